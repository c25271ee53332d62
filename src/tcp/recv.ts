/**
 * The receive half of a connection (RFC 9293 §3.4, §3.8.6, §3.10.7.4): RCV.NXT, the receive
 * ring the consumer reads from, the advertised window, and a bounded set of out-of-order ranges.
 *
 * Out-of-order data within the window is written straight into the ring at its place (the
 * window never exceeds the ring's free space) and remembered as up to `maxRanges` sequence
 * ranges; when the gap before a range fills, the range is committed. A segment that would need
 * one range more is dropped (the sender retransmits it). A FIN is taken only in order.
 */
import { ByteRing } from './ring.js';
import { seqAdd, seqDiff, seqGe, seqGt, seqLe, seqLt } from './seq.js';

/** receiveData results. */
export const RX_OK = 0;
/** Nothing of the segment lies in the window. */
export const RX_OUT_OF_WINDOW = 1;
/** Out of order and no range left. */
export const RX_OOO_FULL = 2;

export class TcpReceiver {
  readonly ring: ByteRing;
  /** RCV.NXT. */
  nxt = 0;
  /** Our window scale shift (RFC 7323), 0 when not negotiated. */
  wscale = 0;
  /** The right edge we last advertised (RCV.NXT + window), so the window never shrinks. */
  private advertisedEdge = 0;
  private readonly starts: Uint32Array;
  private readonly ends: Uint32Array;
  private ranges = 0;
  /** Start of the most recent out-of-order segment: its range goes first in SACK (RFC 2018 §4). */
  private lastOoo = 0;
  /** A FIN was received in order (RCV.NXT counts it). */
  finReceived = false;

  constructor(capacity: number, maxRanges: number) {
    this.ring = new ByteRing(capacity);
    this.starts = new Uint32Array(maxRanges);
    this.ends = new Uint32Array(maxRanges);
  }

  init(irs: number): void {
    this.nxt = seqAdd(irs, 1);
    this.advertisedEdge = this.nxt;
  }

  /** Bytes the window could hold: the ring's free space. */
  get window(): number {
    return this.ring.free;
  }

  /** Out-of-order ranges held. */
  get oooRanges(): number {
    return this.ranges;
  }

  /**
   * The 16-bit window field (RFC 9293 §3.8.6.2.2 receiver SWS avoidance: the right edge moves
   * on only by at least min(capacity/2, mss); it never moves back). Records the edge.
   */
  windowField(mss: number, scaled: boolean): number {
    const free = this.ring.free;
    const edge = seqAdd(this.nxt, free);
    const step = Math.min(this.ring.capacity >>> 1, mss);
    let wnd: number;
    if (seqGe(this.advertisedEdge, this.nxt) && seqDiff(edge, this.advertisedEdge) < step) {
      wnd = Math.max(0, seqDiff(this.advertisedEdge, this.nxt));
    } else {
      wnd = free;
      this.advertisedEdge = edge;
    }
    return Math.min(0xffff, wnd >>> (scaled ? this.wscale : 0));
  }

  /**
   * Whether a window update is worth sending now: the consumer freed at least min(capacity/2,
   * mss) beyond the edge last advertised.
   */
  windowUpdateDue(mss: number): boolean {
    const edge = seqAdd(this.nxt, this.ring.free);
    return seqDiff(edge, this.advertisedEdge) >= Math.min(this.ring.capacity >>> 1, mss);
  }

  /**
   * RFC 9293 §3.10.7.4 acceptability: a segment of `segLen` sequence numbers at `seq` is
   * acceptable when it overlaps [RCV.NXT, RCV.NXT + RCV.WND); zero-length ones at RCV.NXT with
   * a closed window, else in [RCV.NXT, RCV.NXT + RCV.WND] (the edge included, as Linux).
   */
  acceptable(seq: number, segLen: number): boolean {
    const wnd = Math.max(this.ring.free, Math.max(0, seqDiff(this.advertisedEdge, this.nxt)));
    if (segLen === 0) {
      if (wnd === 0) return seq === this.nxt;
      // The right edge included (as Linux's tcp_sequence): the peer's ACK carries its SND.MAX,
      // which is the edge when a full window it sent is still missing here; excluding it would
      // drop that ACK unread, and with it the window and acknowledgment it carries.
      return seqLe(this.nxt, seq) && seqLe(seq, seqAdd(this.nxt, wnd));
    }
    if (wnd === 0) return false;
    const last = seqAdd(seq, segLen - 1);
    const end = seqAdd(this.nxt, wnd);
    return (seqLe(this.nxt, seq) && seqLt(seq, end)) || (seqLe(this.nxt, last) && seqLt(last, end));
  }

  /**
   * Takes the payload src[off, +len) at sequence `seq` (an acceptable segment): trims it to the
   * window, writes it at its place, advances RCV.NXT over in-order bytes and filled ranges.
   * Returns RX_OK, RX_OUT_OF_WINDOW (nothing new) or RX_OOO_FULL.
   */
  receiveData(seq: number, src: Uint8Array, off: number, len: number): number {
    let s = seq;
    let o = off;
    let n = len;
    const head = seqDiff(this.nxt, s);
    if (head > 0) {
      if (head >= n) return RX_OUT_OF_WINDOW;
      s = this.nxt;
      o += head;
      n -= head;
    }
    const pos = seqDiff(s, this.nxt); // ≥ 0 from RCV.NXT
    const room = this.ring.free - pos;
    if (room <= 0) return RX_OUT_OF_WINDOW;
    if (n > room) n = room;
    if (pos === 0) {
      this.ring.writeAt(this.ring.size, src, o, n);
      this.ring.commit(n);
      this.nxt = seqAdd(this.nxt, n);
      this.absorbRanges();
      return RX_OK;
    }
    if (!this.addRange(s, seqAdd(s, n))) return RX_OOO_FULL;
    this.lastOoo = s;
    this.ring.writeAt(this.ring.size + pos, src, o, n);
    return RX_OK;
  }

  /**
   * Writes up to `max` SACK blocks (left, right edge pairs) into `out` (RFC 2018 §4): the range
   * holding the latest out-of-order segment first, then the others in sequence order.
   */
  sackBlocks(out: Uint32Array, max: number): number {
    let n = 0;
    let first = -1;
    for (let i = 0; i < this.ranges; i++) {
      if (seqLe(this.starts[i]!, this.lastOoo) && seqLt(this.lastOoo, this.ends[i]!)) first = i;
    }
    if (first >= 0) {
      out[0] = this.starts[first]!;
      out[1] = this.ends[first]!;
      n = 1;
    }
    for (let i = 0; i < this.ranges && n < max; i++) {
      if (i === first) continue;
      out[2 * n] = this.starts[i]!;
      out[2 * n + 1] = this.ends[i]!;
      n++;
    }
    return n;
  }

  /** Whether a FIN at `finSeq` is in order (all data before it received). */
  finInOrder(finSeq: number): boolean {
    return finSeq === this.nxt;
  }

  /** Counts the FIN in RCV.NXT. */
  takeFin(): void {
    this.nxt = seqAdd(this.nxt, 1);
    this.finReceived = true;
    this.advertisedEdge = seqAdd(this.advertisedEdge, 1);
  }

  private addRange(start: number, end: number): boolean {
    // Merge with every overlapping or touching range; keep them sorted by start.
    let s = start;
    let e = end;
    let i = 0;
    let w = 0;
    const n = this.ranges;
    // Work on a compacted copy in place: ranges strictly before, the merged one, those after.
    for (i = 0; i < n; i++) {
      const rs = this.starts[i]!;
      const re = this.ends[i]!;
      if (seqLt(re, s)) {
        this.starts[w] = rs;
        this.ends[w] = re;
        w++;
      } else if (seqGt(rs, e)) {
        break;
      } else {
        if (seqLt(rs, s)) s = rs;
        if (seqGt(re, e)) e = re;
      }
    }
    const after = n - i;
    if (w + 1 + after > this.starts.length) {
      // Undo is not needed: entries [0, w) were copied onto themselves or earlier slots only
      // when a merge happened, which frees a slot; reaching here means no merge: nothing moved.
      return false;
    }
    // Shift the ranges after the merged one into place (they start at i; they go to w + 1).
    if (w + 1 !== i) {
      this.starts.copyWithin(w + 1, i, n);
      this.ends.copyWithin(w + 1, i, n);
    }
    this.starts[w] = s;
    this.ends[w] = e;
    this.ranges = w + 1 + after;
    return true;
  }

  private absorbRanges(): void {
    while (this.ranges > 0 && seqLe(this.starts[0]!, this.nxt)) {
      const end = this.ends[0]!;
      if (seqGt(end, this.nxt)) {
        const n = seqDiff(end, this.nxt);
        this.ring.commit(n);
        this.nxt = end;
      }
      this.starts.copyWithin(0, 1, this.ranges);
      this.ends.copyWithin(0, 1, this.ranges);
      this.ranges--;
    }
  }
}
