/**
 * The owner thread's UDP socket in a multi-threaded `weft-wg` (wg-workers.ts), one per family.
 *
 * Steered (the kernel took the workers' SO_REUSEPORT program, UdpSocket.steerReusePort): a real
 * socket on the device's port, bound after every worker's, so the kernel delivers it every
 * datagram that is not transport — handshake initiations and responses, cookie replies — and the
 * owner screens and answers them on its own thread: a handshake flood never reaches a worker's
 * socket, queue or event loop. What the owner sends leaves from this socket.
 *
 * Relayed (no program: no native addon, or the kernel refused it): no socket; the owner sends
 * through worker 0 (`sendVia`, one copy and one message each) and receives only what workers
 * hand over.
 *
 * In both, `inject` delivers a datagram a worker handed over (transport under a session its
 * snapshot does not know, or a handshake message when unsteered) as if received here.
 */
import type { PacketBatch } from '../io/batch.js';
import type { DatagramBufferSizes, DatagramSocket, DatagramStats } from '../io/datagram.js';
import { zeroDatagramStats } from '../io/datagram.js';
import { ADDR_RECORD_LEN } from '../io/native.js';
import { AddressInterner, recordPort } from '../io/udp-address.js';
import { encodeAddress } from '../io/udp.js';
import { MESSAGE_COOKIE_REPLY } from '../wireguard/messages.js';

/** What the socket needs from the owner. */
export interface OwnerSocketHost {
  /** Relayed mode: sends bytes (copied) from worker 0's socket. */
  sendVia(b: Uint8Array, address: string, port: number): void;
  /** Publishes the data-path snapshot to every worker if it changed. */
  publish(): void;
  /** SO_MARK on every worker's sockets. */
  markWorkers(mark: number): void;
}

export class OwnerSocket implements DatagramSocket {
  readonly stats: DatagramStats;
  /** Datagrams delivered by `inject` (also in stats.rxPackets). */
  injected = 0;
  private batch: PacketBatch | null = null;
  private cb: ((b: PacketBatch) => void) | null = null;
  /** While an injected datagram is being delivered: its source. */
  private injecting = false;
  private address = '';
  private fromPort = 0;
  private readonly names = new AddressInterner();
  private static readonly NO_OFFLOAD = { gso: false, gro: false };

  /** `real`: the steered socket, or null (relayed). */
  constructor(
    readonly family: 4 | 6,
    private readonly boundPort: number,
    private readonly host: OwnerSocketHost,
    private readonly real: DatagramSocket | null,
  ) {
    this.stats = real?.stats ?? zeroDatagramStats();
  }

  get steered(): boolean {
    return this.real !== null;
  }

  get port(): number {
    return this.real?.port ?? this.boundPort;
  }

  get offload(): { gso: boolean; readonly gro: boolean } {
    return this.real?.offload ?? OwnerSocket.NO_OFFLOAD;
  }

  get canScatter(): boolean {
    return this.real?.canScatter ?? false;
  }

  get gsoMessages(): number {
    return this.real?.gsoMessages ?? 0;
  }

  onBatch(batch: PacketBatch, cb: (b: PacketBatch) => void): void {
    this.batch = batch;
    this.cb = cb;
    this.real?.onBatch(batch, cb);
  }

  /** A datagram a worker handed over, as if received here from address:port. */
  inject(bytes: Uint8Array, address: string, port: number): void {
    const b = this.batch;
    if (b === null || this.cb === null || bytes.length > b.maxLen) {
      this.stats.rxTruncated++;
      return;
    }
    b.offs[0] = b.headroom;
    b.buf.set(bytes, b.headroom);
    b.lens[0] = bytes.length;
    if (b.segs.length > 0) b.segs[0] = 0;
    encodeAddress(address, port, b.addrs, 0);
    b.count = 1;
    this.address = address;
    this.fromPort = port;
    this.stats.rxPackets++;
    this.stats.rxBytes += bytes.length;
    this.injected++;
    this.injecting = true;
    try {
      this.cb(b);
    } finally {
      this.injecting = false;
    }
  }

  addressOf(batch: PacketBatch, i: number): string {
    return this.injecting || this.real === null ? this.address : this.real.addressOf(batch, i);
  }

  portOf(batch: PacketBatch, i: number): number {
    return this.injecting || this.real === null ? this.fromPort : this.real.portOf(batch, i);
  }

  /**
   * What a message starts (a handshake response's session, a new endpoint, transport under a
   * session just confirmed) is published to every worker before it leaves. A cookie reply starts
   * nothing, and under a flood there may be thousands a second: no snapshot for those.
   */
  private publishFor(buf: Uint8Array, off: number): void {
    if (buf[off] !== MESSAGE_COOKIE_REPLY) this.host.publish();
  }

  send(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    this.publishFor(buf, off);
    if (this.real !== null) return this.real.send(buf, off, len, address, port);
    this.stats.txPackets++;
    this.stats.txBytes += len;
    this.host.sendVia(buf.slice(off, off + len), address, port);
    return true;
  }

  sendTo(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean {
    if (this.real !== null) {
      this.publishFor(buf, off);
      return this.real.sendTo(buf, off, len, rec, recOff);
    }
    return this.send(buf, off, len, this.names.text(rec, recOff), recordPort(rec, recOff));
  }

  sendBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
  ): number {
    if (this.real !== null) {
      if (count > 0) this.host.publish();
      return this.real.sendBatch(buf, offs, lens, addrs, addrIdx, count);
    }
    for (let i = 0; i < count; i++) {
      const r = (addrIdx === null ? i : addrIdx[i]) * ADDR_RECORD_LEN;
      this.sendTo(buf, offs[i], lens[i], addrs, r);
    }
    return count;
  }

  bufferSizes(): DatagramBufferSizes {
    return this.real?.bufferSizes() ?? { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }

  setMark(mark: number): void {
    this.real?.setMark(mark);
    this.host.markWorkers(mark);
  }

  async close(): Promise<void> {
    await this.real?.close();
  }
}
