/**
 * What a WireGuardPort agrees with its owner: the sink decrypted packets go to, the options it
 * is built with and the counters it keeps. Apart from wireguard-port.ts so the contract reads
 * on its own, and a sink can implement InnerSink without importing the engine.
 */
import type { EncryptResult, ReceiveResult } from '../wireguard/device.js';
import type { Endpoint, Peer } from '../wireguard/peer.js';
import type { OutgoingMessage } from '../wireguard/pool.js';
import type { DatagramSocket } from '../io/datagram.js';
import type { UdpMechanism, UdpOptions } from '../io/udp.js';

/**
 * The engine a port drives: Device (the whole protocol), or a worker thread's ShardEngine
 * (transport only, handshakes handed to the owner). Device's methods of the same names state
 * the contracts; P is the engine's peer type.
 */
export interface PortEngine<P> {
  listenPort: number;
  readonly outgoingCount: number;
  encrypt(buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult<P>): number;
  encryptFor(peer: P, buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult<P>): number;
  /** A transport message encrypt() counted for `peer` (`bytes` long) that the socket refused. */
  sendFailed(peer: P, bytes: number): void;
  receive(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult<P>,
  ): number;
  screenHandshake(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult<P>,
  ): boolean;
  receiveScreened(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    out: ReceiveResult<P>,
  ): number;
  poll(now: number): void;
  nextDeadline(): number;
  popOutgoing(out: OutgoingMessage<P>): boolean;
  releaseOutgoing(slot: number): void;
  initiateIdlePeers(now: number): number;
}

/** Where decrypted inner packets go (a TUN device, or the gateway's routing stage). */
export interface InnerSink<P = Peer> {
  /**
   * Takes packets i < count at buf[offs[i], offs[i]+lens[i]), packet i decrypted by the session
   * of peers[i]; returns how many it accepted. All arrays are the port's, reused per batch:
   * valid only during the call (entries at i >= count are stale). buf[areaOff, +areaLen) is
   * free scratch space in the same buffer (rxCoalesceReservation; length 0 without it).
   */
  writeBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    peers: readonly P[],
    count: number,
    areaOff: number,
    areaLen: number,
  ): number;
}

export interface WireGuardPortOptions<P = Peer> {
  readonly device: PortEngine<P>;
  readonly sink: InnerSink<NoInfer<P>>;
  /** Largest inner packet (the TUN MTU). */
  readonly mtu: number;
  /** Handshake ring capacity; under load (≥ 1/8 full) mac2 cookies are demanded. Default 1024. */
  readonly handshakeQueueSize?: number;
  /** Handshake messages processed per event-loop turn. Default 16. */
  readonly handshakesPerTurn?: number;
  /** Socket buffers to request (bytes). Default 8 MiB (io/udp.ts). */
  readonly socketBuffer?: number;
  readonly udpMechanism?: UdpMechanism;
  /** Opens the sockets (default: real UDP sockets; pipelines/devices.ts). */
  readonly openUdp?: (opts: UdpOptions) => Promise<DatagramSocket>;
  /** SO_REUSEPORT on the sockets: one port shared by the ports of several worker threads. */
  readonly reusePort?: boolean;
  /** Packets per receive batch. Default 64. */
  readonly batchSize?: number;
  /**
   * Bytes reserved before every received datagram. Decrypted plaintext starts 16 bytes into the
   * datagram, so the sink sees rxHeadroom + 16 bytes of headroom in front of each inner packet
   * (the gateway uses it to write a Geneve header in place). Default 0.
   */
  readonly rxHeadroom?: number;
  /** Bytes reserved after every datagram slot, for a sink that grows packets. Default 0. */
  readonly rxTailroom?: number;
  /**
   * Try UDP GSO (send: the equal-sized datagrams to one endpoint, e.g. the segments of one
   * super-packet, go as one message) and UDP GRO (receive: a run of datagrams per slot).
   * Per feature, whatever the kernel refuses stays off (udpOffload() says what is on). Default false.
   */
  readonly udpOffload?: boolean;
  /**
   * Bytes one super-packet takes in the sink's coalescing area (Coalescer.reservation): the
   * receive batches get a scratch area after their slots sized for a batch's worth of
   * super-packets, passed to the sink. 0 (default): no area.
   */
  readonly rxCoalesceReservation?: number;
  /** Open flows the sink coalesces at once (sizes the area). Default 16. */
  readonly rxCoalesceFlows?: number;
  /** Wall-clock milliseconds (Unix epoch); injectable for tests. */
  readonly clock?: () => number;
  /** Called for unexpected I/O errors (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
}

/** Counters of this stage (the engine keeps its own drop counters by reason). */
export interface WireGuardPortStats {
  handshakesQueued: number;
  handshakesDroppedQueueFull: number;
  handshakesProcessed: number;
  sendFailures: number;
  innerSinkRefused: number;
  noSocketForFamily: number;
}
