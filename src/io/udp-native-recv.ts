/**
 * The native receive path of a UdpSocket: readiness through Node's event loop, then one addon
 * call drains up to a batch with recvmmsg (with UDP GRO: coalesced runs, scattered when the
 * addon can), truncated datagrams are compacted away and the batch is delivered once. Apart
 * from udp.ts because it is the batch-layout work of receiving, the same for every socket
 * option; the socket keeps opening, sending and the node:dgram fallback.
 */
import type { PacketBatch } from './batch.js';
import { ADDR_FLAGS_OFFSET, ADDR_FLAG_TRUNCATED, ADDR_RECORD_LEN, type NativeIo, type PollHandle } from './native.js';

/** The receive counters of a socket (UdpStats' rx fields). */
export interface UdpReceiveStats {
  rxPackets: number;
  rxBytes: number;
  rxBatches: number;
  rxTruncated: number;
  rxErrors: number;
}

/** Fills `batch` on every wake-up of socket `fd` and calls `cb` once per batch, until stop(). */
export class NativeUdpReceiver {
  private poll: PollHandle | null = null;
  private stopped = false;

  constructor(
    private readonly native: NativeIo,
    private readonly fd: number,
    private readonly gro: boolean,
    private readonly stats: UdpReceiveStats,
    private readonly batch: PacketBatch,
    private readonly cb: (batch: PacketBatch) => void,
  ) {}

  start(): void {
    const native = this.native;
    const batch = this.batch;
    if (typeof native.recvPollStart === 'function') {
      // The drain runs natively on readiness: one crossing per wake-up (see native.ts).
      this.poll = native.recvPollStart(
        this.fd,
        batch.buf,
        batch.slotSize,
        batch.headroom,
        batch.maxLen,
        batch.capacity,
        batch.lens,
        batch.addrs,
        this.gro ? batch.segs : null,
        this.gro ? batch.scatter : null,
        (n) => this.onReceived(n),
      );
    } else {
      this.poll = native.pollStart(this.fd, false, (status) => this.onReadable(status));
    }
  }

  /** Stops polling (before the socket's fd is closed: it leaves the event loop's epoll set). */
  stop(): void {
    this.stopped = true;
    if (this.poll) this.native.pollStop(this.poll);
    this.poll = null;
  }

  private onReadable(status: number): void {
    const batch = this.batch;
    if (this.stopped) return;
    if (status < 0) {
      this.stats.rxErrors++;
      return;
    }
    const gro = this.gro;
    if (batch.scatterSeg !== 0 && (!gro || this.native.recvScatter !== 1)) batch.scatterSeg = 0;
    const n = gro
      ? this.native.recvBatch(
          this.fd,
          batch.buf,
          batch.slotSize,
          batch.headroom,
          batch.maxLen,
          batch.capacity,
          batch.lens,
          batch.addrs,
          batch.segs,
          batch.scatterSeg,
          batch.scatterStride,
        )
      : this.native.recvBatch(
          this.fd,
          batch.buf,
          batch.slotSize,
          batch.headroom,
          batch.maxLen,
          batch.capacity,
          batch.lens,
          batch.addrs,
        );
    this.onReceived(n);
  }

  /** After a drain into the batch: n datagrams, or a negative errno. */
  private onReceived(n: number): void {
    const batch = this.batch;
    if (this.stopped) return;
    if (n < 0) {
      this.stats.rxErrors++;
      return;
    }
    if (n === 0) return;
    const gro = this.gro;
    // Compact away truncated datagrams (rare: a datagram larger than the slot) so callers never see them.
    let kept = 0;
    let bytes = 0;
    let datagrams = 0;
    for (let i = 0; i < n; i++) {
      if (batch.addrs[i * ADDR_RECORD_LEN + ADDR_FLAGS_OFFSET] & ADDR_FLAG_TRUNCATED) {
        this.stats.rxTruncated++;
        continue;
      }
      if (kept !== i) this.moveSlot(batch, i, kept);
      const len = batch.lens[kept];
      bytes += len;
      const seg = gro ? batch.segs[kept] : 0;
      datagrams += seg !== 0 && len > seg ? Math.ceil(len / seg) : 1;
      kept++;
    }
    if (kept === 0) return;
    batch.filled(kept);
    this.stats.rxBatches++;
    this.stats.rxPackets += datagrams;
    this.stats.rxBytes += bytes;
    this.cb(batch);
  }

  private moveSlot(batch: PacketBatch, from: number, to: number): void {
    const s = from * batch.slotSize + batch.headroom;
    // Scattered slots: the pieces lie anywhere after the headroom.
    batch.buf.copyWithin(
      to * batch.slotSize + batch.headroom,
      s,
      s + (batch.scatterSeg > 0 ? batch.slotSize - batch.headroom : batch.lens[from]),
    );
    batch.lens[to] = batch.lens[from];
    batch.addrs.copyWithin(to * ADDR_RECORD_LEN, from * ADDR_RECORD_LEN, (from + 1) * ADDR_RECORD_LEN);
    if (batch.segs.length > to) batch.segs[to] = batch.segs[from];
  }
}
