/**
 * The output half of a connection: its addresses, send and receive state, and `emit`, which
 * writes the next segment it has to send (SYN or SYN-ACK with options, a fast retransmission,
 * new or resent data with our FIN at its end, a window probe, an ACK or one of the duplicate
 * ACKs owed) into the caller's buffer. connection.ts's TcpConnection adds input and timers.
 */
import type { IpFamily } from '../packet/addr.js';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_PSH, TCP_FLAG_SYN, TCP_MIN_HEADER_LEN } from '../packet/tcp.js';
import type { TcpOptions } from './options.js';
import type { TcpStats } from './reasons.js';
import { TcpReceiver } from './recv.js';
import {
  MAX_SACK_BLOCKS,
  SegmentOptions,
  ipHeaderLen,
  payloadOffset,
  writeSegment,
  type SegmentAddresses,
} from './segment.js';
import { TcpSender } from './send.js';
import { seqAdd, seqDiff, seqLt } from './seq.js';
import {
  TCP_CLOSED,
  TCP_CLOSING,
  TCP_ESTABLISHED,
  TCP_FIN_WAIT_1,
  TCP_LAST_ACK,
  TCP_STATE_NAMES,
  TCP_SYN_RECEIVED,
} from './state.js';

export abstract class ConnectionOutput implements SegmentAddresses {
  state = TCP_CLOSED;
  readonly localAddr = new Uint8Array(16);
  readonly remoteAddr = new Uint8Array(16);
  readonly snd: TcpSender;
  readonly rcv: TcpReceiver;
  /** Our MSS (what we announce). */
  readonly ourMss: number;
  /** Both sides scale windows (RFC 7323). */
  protected wsOk = false;
  /** Both sides agreed to SACK (RFC 2018): we send SACK blocks; blocks we receive are ignored. */
  protected sackOk = false;
  protected ackNeeded = false;
  /** Duplicate ACKs still to send, one per out-of-order segment received. */
  protected dupAcksOwed = 0;
  protected probeDue = false;
  private readonly opts = new SegmentOptions();

  constructor(
    options: TcpOptions,
    private readonly counters: TcpStats,
    readonly family: IpFamily,
    local: Uint8Array,
    localOff: number,
    readonly localPort: number,
    remote: Uint8Array,
    remoteOff: number,
    readonly remotePort: number,
  ) {
    const n = family === 4 ? 4 : 16;
    this.localAddr.set(local.subarray(localOff, localOff + n));
    this.remoteAddr.set(remote.subarray(remoteOff, remoteOff + n));
    this.snd = new TcpSender(options.sendBufferSize, options.rto);
    this.rcv = new TcpReceiver(options.recvBufferSize, options.maxOooRanges);
    this.ourMss = Math.min(0xffff, options.mtu - ipHeaderLen(family) - TCP_MIN_HEADER_LEN);
  }

  get stateName(): string {
    return TCP_STATE_NAMES[this.state]!;
  }

  protected get synchronized(): boolean {
    return this.state >= TCP_ESTABLISHED;
  }

  /**
   * Writes the next segment this connection has to send at buf[off..] (at most the MTU);
   * returns its length, or 0 when it has nothing to send.
   */
  emit(buf: Uint8Array, off: number, now: number): number {
    if (this.state === TCP_CLOSED) return 0;
    const snd = this.snd;
    const synAck = this.state === TCP_SYN_RECEIVED;
    if (snd.synPending && snd.nxt === snd.iss) {
      const flags = TCP_FLAG_SYN | (synAck ? TCP_FLAG_ACK : 0);
      const o = this.opts.none();
      o.synMss = this.ourMss;
      o.synWscale = this.wsOk ? this.rcv.wscale : -1;
      o.synSack = this.sackOk;
      const n = writeSegment(buf, off, this, snd.iss, synAck ? this.rcv.nxt : 0, flags, this.synWindow(), 0, o);
      const again = snd.max !== snd.iss;
      if (again) this.counters.retransmits++;
      snd.onSend(snd.iss, 1, now, again);
      snd.nxt = seqAdd(snd.iss, 1);
      this.ackNeeded = false;
      return n;
    }
    if (snd.synPending) return synAck && this.ackNeeded ? this.emitAck(buf, off, -1) : 0;
    // SACK blocks ride on every segment while out-of-order data is held; the payload shrinks
    // by their size so the packet stays within the MSS (RFC 6691).
    const room = snd.mss - this.prepareOptions();
    if (snd.retransmitOne) {
      snd.retransmitOne = false;
      // What was sent before may go again; bytes never sent stay within the peer's window.
      const limit = Math.min(room, Math.max(seqDiff(snd.windowEdge, snd.una), seqDiff(snd.max, snd.una)));
      const n = this.emitData(buf, off, snd.una, this.dataAt(snd.una, limit), now, true);
      if (n > 0) {
        this.counters.fastRetransmits++;
        return n;
      }
    }
    const len = Math.min(snd.sendable(), room);
    const fin = this.finAt(snd.nxt, len);
    if (len > 0 || fin) {
      const at = snd.nxt;
      const n = this.emitData(buf, off, at, len, now, seqLt(at, snd.max));
      snd.nxt = seqAdd(at, len + (fin ? 1 : 0));
      return n;
    }
    if (this.probeDue) {
      this.probeDue = false;
      return this.emitAck(buf, off, seqAdd(snd.una, -1)); // RFC 9293 §3.8.6.1: elicits an ACK
    }
    if (this.ackNeeded) return this.emitAck(buf, off, -1);
    if (this.dupAcksOwed > 0) {
      this.dupAcksOwed--;
      return this.emitAck(buf, off, -1);
    }
    return 0;
  }

  /** Whether a segment of `len` bytes at `seq` carries our FIN (sent after close, ends the data). */
  private finAt(seq: number, len: number): boolean {
    const st = this.state;
    if (st !== TCP_FIN_WAIT_1 && st !== TCP_CLOSING && st !== TCP_LAST_ACK) return false;
    return this.snd.finQueued && !this.snd.finAcked && seqAdd(seq, len) === this.snd.finSeq;
  }

  /** Payload bytes held at sequence `seq`, up to `max`. */
  private dataAt(seq: number, max: number): number {
    return Math.max(0, Math.min(max, this.snd.ring.size - seqDiff(seq, this.snd.dataSeq)));
  }

  private emitData(buf: Uint8Array, off: number, seq: number, len: number, now: number, again: boolean): number {
    const snd = this.snd;
    const fin = this.finAt(seq, len);
    if (len === 0 && !fin) return 0;
    const o = this.opts;
    if (len > 0) snd.ring.peek(seqDiff(seq, snd.dataSeq), buf, payloadOffset(off, this.family, o), len);
    let flags = TCP_FLAG_ACK;
    if (len > 0 && seqAdd(seq, len) === snd.finSeq) flags |= TCP_FLAG_PSH;
    if (fin) flags |= TCP_FLAG_FIN;
    const n = writeSegment(buf, off, this, seq, this.rcv.nxt, flags, this.windowField(), len, o);
    if (again) this.counters.retransmits++;
    snd.onSend(seq, len + (fin ? 1 : 0), now, again);
    this.ackNeeded = false;
    return n;
  }

  /** Fills the options of a non-SYN segment (SACK blocks, when agreed and data is held); returns their length. */
  private prepareOptions(): number {
    const o = this.opts.none();
    if (this.sackOk && this.rcv.oooRanges > 0) o.sackCount = this.rcv.sackBlocks(o.sack, MAX_SACK_BLOCKS);
    return o.length;
  }

  private emitAck(buf: Uint8Array, off: number, seq: number): number {
    this.ackNeeded = false;
    this.prepareOptions();
    // SND.MAX, not SND.NXT: after a timeout SND.NXT goes back to SND.UNA (go-back-N), and an
    // ACK numbered there lies before the peer's RCV.NXT when the peer had the data: the peer
    // drops it unread (RFC 9293 §3.10.7.4 first check) and its ACK field with it.
    const s = seq >= 0 ? seq : this.snd.max;
    return writeSegment(buf, off, this, s, this.rcv.nxt, TCP_FLAG_ACK, this.windowField(), 0, this.opts);
  }

  private windowField(): number {
    return this.rcv.windowField(this.snd.mss, this.wsOk);
  }

  /** A SYN's window is never scaled (RFC 7323 §2.2). */
  private synWindow(): number {
    return Math.min(0xffff, this.rcv.window);
  }
}
