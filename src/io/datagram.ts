/**
 * A datagram socket: what a pipeline sends and receives UDP datagrams through (io/udp.ts; the
 * in-memory socket, io/memory-socket.ts). Shaped after wireguard-go's conn.Bind: receives fill a
 * caller-owned PacketBatch with a 24-byte address record per datagram (native.ts ADDR_*), sends
 * take batches of offsets and destination records, and the offloads in effect are declared.
 */
import type { PacketBatch } from './batch.js';

/** UDP offloads in effect (all false unless asked for and granted). */
export interface DatagramOffloads {
  /** Sends of equal-sized runs as one message (UDP_SEGMENT). */
  gso: boolean;
  /** Receives of coalesced runs: PacketBatch.segs says their size (UDP_GRO). */
  readonly gro: boolean;
}

export interface DatagramStats {
  rxPackets: number;
  rxBytes: number;
  rxBatches: number;
  rxTruncated: number;
  rxErrors: number;
  txPackets: number;
  txBytes: number;
  txDropped: number;
  /** GSO runs the kernel refused with EIO and that were resent one datagram each (then GSO goes off). */
  gsoFallbacks: number;
}

/** A socket's counters, all zero. */
export function zeroDatagramStats(): DatagramStats {
  return {
    rxPackets: 0,
    rxBytes: 0,
    rxBatches: 0,
    rxTruncated: 0,
    rxErrors: 0,
    txPackets: 0,
    txBytes: 0,
    txDropped: 0,
    gsoFallbacks: 0,
  };
}

/** Socket buffer sizes requested and granted. */
export interface DatagramBufferSizes {
  readonly requestedRcvbuf: number;
  readonly requestedSndbuf: number;
  /** Granted (as getsockopt reports: the kernel doubles what it grants). */
  readonly rcvbuf: number;
  readonly sndbuf: number;
  /** Whether SO_RCVBUFFORCE/SO_SNDBUFFORCE raised them above the sysctl limits. */
  readonly forced: boolean;
}

export interface DatagramSocket {
  readonly family: 4 | 6;
  /** The bound port. */
  readonly port: number;
  readonly offload: DatagramOffloads;
  readonly stats: DatagramStats;
  /** GRO receives may arrive scattered at PacketBatch.scatterSeg (see batch.ts). */
  readonly canScatter: boolean;
  /** Messages sent as GSO runs so far. */
  readonly gsoMessages: number;
  /**
   * Starts receiving: each wake-up fills `batch` (withAddresses; withSegments and maxLen
   * UDP_GRO_MAX_LEN with GRO) and calls `cb` once; valid only during the call.
   */
  onBatch(batch: PacketBatch, cb: (batch: PacketBatch) => void): void;
  /** Source address text / port of datagram i of a received batch. */
  addressOf(batch: PacketBatch, i: number): string;
  portOf(batch: PacketBatch, i: number): number;
  /** Sends buf[off, +len) to address/port; false when dropped (counted). */
  send(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean;
  /** Sends to the address record rec[recOff, +24). */
  sendTo(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean;
  /** Sends datagrams i < count to records addrs[(addrIdx ? addrIdx[i] : i) * 24 ..]; returns how many were taken. */
  sendBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
  ): number;
  bufferSizes(): DatagramBufferSizes;
  /** SO_MARK; throws (typed) where it cannot be set. */
  setMark(mark: number): void;
  /** UdpSocket.steerReusePort, where the socket has it (native UDP sockets). */
  steerReusePort?(workers: number): boolean;
  close(): Promise<void>;
}
