/**
 * The send half of a connection: SND.UNA / SND.NXT / SND.MAX, the send ring (bytes from SND.UNA
 * onward, after our SYN), the peer's window (RFC 9293 §3.8.6, SND.WL1/WL2), congestion control
 * (RFC 5681 slow start, congestion avoidance, fast retransmit; RFC 6582 NewReno recovery), the
 * retransmission timer (RFC 6298, RtoEstimator) and zero-window probing (RFC 9293 §3.8.6.1).
 *
 * SND.MAX is the highest sequence number sent: after a timeout SND.NXT goes back to SND.UNA
 * (go-back-N), and an ACK up to SND.MAX is still valid.
 */
import { ByteRing } from './ring.js';
import { RtoEstimator, type RtoOptions } from './rto.js';
import { seqAdd, seqDiff, seqGe, seqGt, seqLe, seqLt } from './seq.js';

/** onAck results. */
export const ACK_OLD = 0;
export const ACK_NEW = 1;
export const ACK_DUP = 2;
/** Acknowledges something never sent. */
export const ACK_TOO_NEW = 3;

export class TcpSender {
  readonly ring: ByteRing;
  readonly rto: RtoEstimator;
  iss = 0;
  una = 0;
  nxt = 0;
  max = 0;
  /** The peer's window in bytes (scaled), SND.WL1, SND.WL2. */
  wnd = 0;
  wl1 = 0;
  wl2 = 0;
  /** The largest window the peer ever offered (RFC 5961 §5 MAX.SND.WND). */
  maxWnd = 0;
  /** The peer's window scale shift (0 when not negotiated). */
  wscale = 0;
  mss = 536;
  cwnd = 0;
  ssthresh = 0x7fffffff;
  dupAcks = 0;
  /** NewReno: in recovery until `recover` is acknowledged. */
  inRecovery = false;
  recover = 0;
  /** Our SYN is unacknowledged. */
  synPending = true;
  /** close() was called: a FIN follows the data. */
  finQueued = false;
  finAcked = false;
  /** Send one segment at SND.UNA next, outside the window's accounting (fast retransmit). */
  retransmitOne = false;
  /** Retransmission timer deadline (-1 stopped), consecutive expiries. */
  rtoDeadline = -1;
  retries = 0;
  /** Persist timer (zero window, nothing in flight) deadline and backoff. */
  persistDeadline = -1;
  persistBackoff = 0;
  /** RTT sample in progress: the sequence number that ends it and the time it was sent (-1 none). */
  private rttSeq = 0;
  private rttSentAt = -1;

  constructor(capacity: number, rto: RtoOptions) {
    this.ring = new ByteRing(capacity);
    this.rto = new RtoEstimator(rto);
  }

  init(iss: number): void {
    this.iss = iss;
    this.una = iss;
    this.nxt = iss;
    this.max = iss;
    this.recover = iss;
  }

  /** Sequence number of ring byte 0. */
  get dataSeq(): number {
    return this.synPending ? seqAdd(this.una, 1) : this.una;
  }

  /** Sequence number of our FIN (meaningful once finQueued). */
  get finSeq(): number {
    return seqAdd(this.dataSeq, this.ring.size);
  }

  /** Sequence space sent and unacknowledged. */
  get inFlight(): number {
    return seqDiff(this.max, this.una);
  }

  /** Everything sent (SYN, data, FIN) is acknowledged and nothing is left to send. */
  get idle(): boolean {
    return this.ring.size === 0 && !this.synPending && (!this.finQueued || this.finAcked);
  }

  setMss(mss: number): void {
    this.mss = mss;
    // RFC 5681 §3.1 initial window: IW = min(4·SMSS, max(2·SMSS, 4380)).
    this.cwnd = Math.min(4 * mss, Math.max(2 * mss, 4380));
  }

  /**
   * Processes SEG.ACK (the connection checked it is ≤ SND.MAX). Returns ACK_NEW when it moved
   * SND.UNA, ACK_DUP for an RFC 5681 §2 duplicate, ACK_OLD otherwise. `segLen` (payload + SYN
   * + FIN) and `window` (scaled) are the segment's; the duplicate test needs both.
   */
  onAck(ack: number, seq: number, window: number, segLen: number, now: number): number {
    if (seqGt(ack, this.max)) return ACK_TOO_NEW;
    let result = ACK_OLD;
    if (seqGt(ack, this.una)) {
      let acked = seqDiff(ack, this.una);
      if (this.synPending) {
        this.synPending = false;
        acked--;
      }
      const data = Math.min(acked, this.ring.size);
      this.ring.discard(data);
      if (this.finQueued && acked > data) this.finAcked = true;
      this.una = ack;
      if (seqLt(this.nxt, ack)) this.nxt = ack;
      if (this.rttSentAt >= 0 && seqGe(ack, this.rttSeq)) {
        this.rto.sample(now - this.rttSentAt);
        this.rttSentAt = -1;
      }
      this.retries = 0;
      this.onNewAck(ack, acked);
      this.rtoDeadline = this.max === this.una ? -1 : now + this.rto.rto;
      result = ACK_NEW;
    } else if (ack === this.una && segLen === 0 && this.max !== this.una && window === this.wnd) {
      result = ACK_DUP;
      this.onDupAck();
    }
    // Window update (RFC 9293 §3.10.7.4, "If SND.UNA =< SEG.ACK =< SND.NXT"), and also with
    // every ACK that moves SND.UNA (as Linux does): a segment from beyond RCV.NXT (out of
    // order, or forged in the window) must not freeze SND.WL1 and with it the window.
    if (seqLt(this.wl1, seq) || (this.wl1 === seq && seqLe(this.wl2, ack)) || result === ACK_NEW) {
      this.wnd = window;
      this.wl1 = seq;
      this.wl2 = ack;
      if (window > this.maxWnd) this.maxWnd = window;
      if (window > 0) {
        this.persistDeadline = -1;
        this.persistBackoff = 0;
      }
    }
    return result;
  }

  private onNewAck(ack: number, acked: number): void {
    if (this.inRecovery) {
      if (seqGe(ack, this.recover)) {
        // RFC 6582 §3.2 step 3: full acknowledgment, deflate the window.
        this.inRecovery = false;
        this.cwnd = Math.min(this.ssthresh, Math.max(this.inFlight, this.mss) + this.mss);
      } else {
        // Partial acknowledgment: retransmit the next hole, deflate by what was acknowledged.
        this.retransmitOne = true;
        this.cwnd = Math.max(this.mss, this.cwnd - acked + this.mss);
      }
      this.dupAcks = 0;
      return;
    }
    this.dupAcks = 0;
    if (this.cwnd < this.ssthresh) this.cwnd += Math.min(acked, this.mss);
    else this.cwnd += Math.max(1, Math.floor((this.mss * this.mss) / this.cwnd));
  }

  private onDupAck(): void {
    this.dupAcks++;
    if (this.inRecovery) {
      this.cwnd += this.mss; // RFC 5681 §3.2 step 4: inflate per further duplicate
      return;
    }
    // RFC 5681 §3.2 steps 2–3; RFC 6582 §3.2 step 2: not before what a previous recovery or
    // timeout had outstanding is acknowledged.
    if (this.dupAcks === 3 && seqGt(this.una, this.recover)) {
      this.ssthresh = Math.max(Math.floor(this.inFlight / 2), 2 * this.mss);
      this.cwnd = this.ssthresh + 3 * this.mss;
      this.recover = this.max;
      this.inRecovery = true;
      this.retransmitOne = true;
      this.rttSentAt = -1; // Karn
    }
  }

  /** Notes that [seq, seq+len) is being sent now; arms the timer, starts an RTT sample. */
  onSend(seq: number, len: number, now: number, retransmission: boolean): void {
    const end = seqAdd(seq, len);
    if (retransmission) {
      if (this.rttSentAt >= 0 && seqLt(seq, this.rttSeq)) this.rttSentAt = -1; // Karn
    } else if (this.rttSentAt < 0 && len > 0) {
      this.rttSeq = end;
      this.rttSentAt = now;
    }
    if (seqGt(end, this.max)) this.max = end;
    if (len > 0 && this.rtoDeadline < 0) this.rtoDeadline = now + this.rto.rto;
  }

  /** The retransmission timer expired (RFC 6298 §5.4–5.6, RFC 5681 §3.1 eq. 4): go back to SND.UNA. */
  onTimeout(now: number): void {
    this.ssthresh = Math.max(Math.floor(this.inFlight / 2), 2 * this.mss);
    this.cwnd = this.mss;
    this.inRecovery = false;
    this.recover = this.max;
    this.dupAcks = 0;
    this.nxt = this.una;
    this.retransmitOne = false;
    this.rttSentAt = -1;
    this.rto.expired();
    this.retries++;
    this.rtoDeadline = now + this.rto.rto;
  }

  /**
   * Bytes of new or resent data that may go at SND.NXT now: limited by what the ring holds past
   * SND.NXT, the peer's window, the congestion window and one MSS.
   */
  sendable(): number {
    if (this.synPending) return 0;
    const offset = seqDiff(this.nxt, this.dataSeq);
    const avail = this.ring.size - offset;
    if (avail <= 0) return 0;
    const outstanding = seqDiff(this.nxt, this.una);
    const limit = Math.min(seqDiff(this.windowEdge, this.nxt), this.cwnd - outstanding);
    return Math.max(0, Math.min(avail, limit, this.mss));
  }

  /**
   * The right edge of the peer's window: SND.WL2 + SND.WND, the edge as the ACK that carried the
   * window set it. A receiver never moves its edge back (RFC 9293 §3.8.6), so this edge stays
   * valid whatever SND.UNA does since; SND.UNA + SND.WND would overshoot it when SND.UNA moved
   * on without a window update.
   */
  get windowEdge(): number {
    return seqAdd(this.wl2, this.wnd);
  }

  /** Data waits and the peer's window is closed with nothing in flight: the persist case. */
  get needsProbe(): boolean {
    return this.wnd === 0 && this.max === this.una && this.ring.size > 0 && !this.synPending;
  }
}
