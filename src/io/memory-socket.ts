/**
 * The in-memory DatagramSocket (datagram.ts) of a memory-net.ts host: the network hands it the
 * due datagrams of a round (`take`, then one `flush` into the reader's batch, as a recvmmsg
 * would); sends go onto the network's wire from the host address routing picks.
 */
import type { PacketBatch } from './batch.js';
import { zeroDatagramStats, type DatagramBufferSizes, type DatagramSocket, type DatagramStats } from './datagram.js';
import { ADDR_PORT_OFFSET, ADDR_RECORD_LEN } from './native.js';
import { AddressInterner, recordPort } from './udp-address.js';
import { UdpError } from './udp.js';

/** Puts buf[off, +len) on the wire; false when dropped (counted). */
export type Transmit = (
  toAddress: string,
  toPort: number,
  fromAddress: string,
  fromPort: number,
  buf: Uint8Array,
  off: number,
  len: number,
) => boolean;

/** What a socket needs of the network it is bound on (MemoryNet implements it). */
export interface MemoryWire {
  readonly transmit: Transmit;
  unbind(s: MemoryDatagramSocket, addresses: readonly string[], port: number): void;
}

/** What a socket needs of its host (MemoryHost implements it). */
export interface MemorySocketHost {
  readonly net: MemoryWire;
  /** The host address a datagram to `dst` leaves from. */
  sourceFor(dst: string): string | undefined;
}

export class MemoryDatagramSocket implements DatagramSocket {
  readonly stats: DatagramStats = zeroDatagramStats();
  readonly offload = { gso: false, gro: false };
  readonly canScatter = false;
  readonly gsoMessages = 0;
  /** The fwmark last set (recorded only: the memory net has no policy routing). */
  mark = 0;
  /** Datagrams taken into the batch this round. */
  pending = 0;
  private batch: PacketBatch | null = null;
  private cb: ((b: PacketBatch) => void) | null = null;
  private readonly addresses = new AddressInterner();
  private closed = false;

  constructor(
    private readonly host: MemorySocketHost,
    readonly family: 4 | 6,
    readonly port: number,
    private readonly on: readonly string[],
    /** The bound address (null: the wildcard). */
    readonly address: string | null,
  ) {}

  get reading(): boolean {
    return this.batch !== null;
  }

  get full(): boolean {
    return this.pending === this.batch!.capacity;
  }

  onBatch(batch: PacketBatch, cb: (batch: PacketBatch) => void): void {
    if (this.closed) throw new UdpError('socket is closed');
    if (this.cb) throw new Error('onBatch already set');
    if (batch.addrs.length < batch.capacity * ADDR_RECORD_LEN)
      throw new TypeError('the batch needs withAddresses: true');
    this.batch = batch;
    this.cb = cb;
  }

  /** @internal A datagram for this socket: into the next slot of the batch. */
  take(bytes: Uint8Array, len: number, rec: Uint8Array, port: number): void {
    const b = this.batch!;
    if (len > b.maxLen) {
      this.stats.rxTruncated++;
      return;
    }
    const i = this.pending++;
    const off = i * b.slotSize + b.headroom;
    b.buf.set(bytes.subarray(0, len), off);
    b.lens[i] = len;
    const r = i * ADDR_RECORD_LEN;
    b.addrs.set(rec, r);
    b.addrs[r + ADDR_PORT_OFFSET] = port >> 8;
    b.addrs[r + ADDR_PORT_OFFSET + 1] = port & 0xff;
    if (b.segs.length > 0) b.segs[i] = 0;
    this.stats.rxPackets++;
    this.stats.rxBytes += len;
  }

  /** @internal Hands the round's datagrams to the reader. */
  flush(): void {
    const n = this.pending;
    this.pending = 0;
    if (n === 0 || this.closed) return;
    const b = this.batch!;
    b.filled(n);
    this.stats.rxBatches++;
    this.cb!(b);
  }

  addressOf(batch: PacketBatch, i: number): string {
    return this.addresses.text(batch.addrs, i * ADDR_RECORD_LEN);
  }

  portOf(batch: PacketBatch, i: number): number {
    return recordPort(batch.addrs, i * ADDR_RECORD_LEN);
  }

  send(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    if (this.closed) throw new UdpError('socket is closed');
    const src = this.address ?? this.host.sourceFor(address);
    const ok =
      src !== undefined &&
      (address.includes(':') ? 6 : 4) === this.family &&
      this.host.net.transmit(address, port, src, this.port, buf, off, len);
    if (ok) {
      this.stats.txPackets++;
      this.stats.txBytes += len;
    } else this.stats.txDropped++;
    return ok;
  }

  sendTo(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean {
    return this.send(buf, off, len, this.addresses.text(rec, recOff), recordPort(rec, recOff));
  }

  readonly sendBatch: DatagramSocket['sendBatch'] = (buf, offs, lens, addrs, addrIdx, count) => {
    let sent = 0;
    for (let i = 0; i < count; i++) {
      if (this.sendTo(buf, offs[i]!, lens[i]!, addrs, (addrIdx === null ? i : addrIdx[i]!) * ADDR_RECORD_LEN)) sent++;
    }
    return sent;
  };

  bufferSizes(): DatagramBufferSizes {
    return { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }

  setMark(mark: number): void {
    if (!Number.isInteger(mark) || mark < 0 || mark > 0xffffffff)
      throw new RangeError(`fwmark ${mark} is not a uint32`);
    this.mark = mark;
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.batch = null;
      this.host.net.unbind(this, this.on, this.port);
    }
    return Promise.resolve();
  }
}
