/**
 * One TCP connection (RFC 9293 §3.3.2 state machine, §3.10 event processing), driven by its
 * endpoint (endpoint.ts): `input` takes a received segment, `emit` (output.ts) writes the next
 * segment to send, `onTimer` runs the timers that are due. The consumer reads and writes through
 * `recv`/`send`, closes with `close` (FIN after the data) or `abort` (RST).
 *
 * Passive connections start in SYN_RECEIVED (the endpoint plays LISTEN); active ones in
 * SYN_SENT. Data in a SYN is not taken (the peer sends it again). SACK (RFC 2018) as a
 * receiver only: when both sides permit it, our ACKs carry SACK blocks of the out-of-order
 * ranges held, and SACK blocks the peer sends are ignored (its cumulative ACK drives our
 * retransmissions). No urgent data, no timestamps, no keep-alive, no Nagle (data goes as soon
 * as the windows allow).
 */
import type { IpFamily } from '../packet/addr.js';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_RST, TCP_FLAG_SYN } from '../packet/tcp.js';
import {
  TCP_ACCEPTED,
  TCP_DROP_BAD_ACK,
  TCP_DROP_BAD_FLAGS,
  TCP_DROP_NO_ACK,
  TCP_DROP_OOO_FULL,
  TCP_DROP_OUT_OF_WINDOW,
  TCP_DROP_RST_INVALID,
  TCP_DROP_SYN_IN_WINDOW,
} from './reasons.js';
import { RX_OK, RX_OOO_FULL } from './recv.js';
import { type TcpSegment } from './segment.js';
import { ACK_NEW } from './send.js';
import { ConnectionOutput } from './output.js';
import { seqAdd, seqGt, seqLe, seqLt } from './seq.js';
import {
  TCP_CLOSED,
  TCP_SYN_SENT,
  TCP_SYN_RECEIVED,
  TCP_ESTABLISHED,
  TCP_FIN_WAIT_1,
  TCP_FIN_WAIT_2,
  TCP_CLOSE_WAIT,
  TCP_CLOSING,
  TCP_LAST_ACK,
  TCP_TIME_WAIT,
  TCP_EV_ESTABLISHED,
  TCP_EV_READABLE,
  TCP_EV_WRITABLE,
  TCP_EV_PEER_FIN,
  TCP_EV_CLOSED,
  defaultMss,
  scaleFor,
  type ConnectionOwner,
  type TcpCloseReason,
} from './state.js';

export class TcpConnection extends ConnectionOutput {
  /** Why the connection ended (null while open). */
  closeReason: TcpCloseReason | null = null;
  /** The consumer's slot (the relay's socket, say); the engine never reads it. */
  context: unknown = undefined;
  /** When the last segment of this connection arrived (`now` of its input; idle timeouts). */
  lastInputAt = 0;
  private timeWaitDeadline = -1;
  private challengeWindowStart = -1;
  private challengeCount = 0;
  /** The consumer has seen this connection (EV_ESTABLISHED reported or opened by it). */
  private known: boolean;
  private pending = 0;
  /** Endpoint bookkeeping: hash-chain link, ready-list and output-list membership. */
  hashNext: TcpConnection | null = null;
  hash = 0;
  index = -1;
  readyNext: TcpConnection | null = null;
  readyQueued = false;
  outputNext: TcpConnection | null = null;
  outputQueued = false;

  constructor(
    private readonly owner: ConnectionOwner<TcpConnection>,
    family: IpFamily,
    local: Uint8Array,
    localOff: number,
    localPort: number,
    remote: Uint8Array,
    remoteOff: number,
    remotePort: number,
    active: boolean,
  ) {
    super(owner.options, owner.stats, family, local, localOff, localPort, remote, remoteOff, remotePort);
    this.known = active;
  }

  // ——— consumer side ———

  /** Bytes waiting to be read. */
  get readable(): number {
    return this.rcv.ring.size;
  }

  /** Bytes `send` would take now (0 after close). */
  get writable(): number {
    if (this.snd.finQueued || this.state === TCP_CLOSED || this.state > TCP_CLOSE_WAIT) return 0;
    return this.snd.ring.free;
  }

  /** The peer sent its FIN (all data before it has arrived; some may be unread). */
  get peerFinished(): boolean {
    return this.rcv.finReceived;
  }

  /** Events since the last call (TCP_EV_* bits), cleared. */
  takeEvents(): number {
    const e = this.pending;
    this.pending = 0;
    return e;
  }

  /** Queues up to `len` bytes of src[off..] for sending; returns how many were taken. */
  send(src: Uint8Array, off: number, len: number): number {
    if (this.writable === 0) return 0;
    const n = this.snd.ring.write(src, off, len);
    if (n > 0) this.owner.wantOutput(this);
    return n;
  }

  /** Moves up to `len` received bytes to dst[off..]; returns how many. Opens the window. */
  recv(dst: Uint8Array, off: number, len: number): number {
    const n = this.rcv.ring.read(dst, off, len);
    if (n > 0 && this.synchronized && !this.rcv.finReceived && this.rcv.windowUpdateDue(this.snd.mss)) {
      this.ackNeeded = true;
      this.owner.wantOutput(this);
    }
    return n;
  }

  /** Graceful close: a FIN follows the queued data (RFC 9293 §3.10.4). Idempotent. */
  close(): void {
    switch (this.state) {
      case TCP_SYN_SENT:
        this.finish('closed', false);
        return;
      case TCP_SYN_RECEIVED:
        this.snd.finQueued = true; // sent once established
        return;
      case TCP_ESTABLISHED:
        this.snd.finQueued = true;
        this.state = TCP_FIN_WAIT_1;
        break;
      case TCP_CLOSE_WAIT:
        this.snd.finQueued = true;
        this.state = TCP_LAST_ACK;
        break;
      default:
        return;
    }
    this.owner.wantOutput(this);
  }

  /** Abort: RST to the peer (from a synchronized state), buffers dropped (RFC 9293 §3.10.5). */
  abort(): void {
    if (this.state === TCP_CLOSED) return;
    if (this.state !== TCP_SYN_SENT && this.state !== TCP_TIME_WAIT) {
      // SND.MAX: what the peer expects next when it had everything (RFC 5961 §3.2).
      this.owner.queueRst(this, this.snd.max, this.rcv.nxt, true);
      this.owner.stats.resetsOut++;
    }
    this.finish('aborted', false);
  }

  // ——— endpoint side ———

  /** Passive open from a SYN (already parsed into `s`, options read): answers with SYN-ACK. */
  openPassive(s: TcpSegment, iss: number): void {
    this.state = TCP_SYN_RECEIVED;
    this.rcv.init(s.seq);
    this.snd.init(iss);
    this.applySynOptions(s);
    this.snd.wnd = s.window; // never scaled in a SYN (RFC 7323 §2.2)
    this.snd.wl1 = s.seq;
    this.snd.wl2 = iss;
    this.owner.wantOutput(this);
  }

  /**
   * A new SYN for this connection's addresses while in TIME_WAIT with a sequence number beyond
   * RCV.NXT may start a new connection (RFC 9293 §3.10.7.4 note, RFC 6191): the old one ends.
   */
  yieldsToSyn(s: TcpSegment): boolean {
    if (this.state !== TCP_TIME_WAIT || !seqGt(s.seq, this.rcv.nxt)) return false;
    this.finish('closed', false);
    return true;
  }

  /** Active open: sends a SYN. */
  openActive(iss: number): void {
    this.state = TCP_SYN_SENT;
    this.snd.init(iss);
    this.wsOk = this.owner.options.windowScaling; // offered; confirmed by the SYN-ACK
    this.sackOk = this.owner.options.sack;
    this.rcv.wscale = this.wsOk ? scaleFor(this.rcv.ring.capacity) : 0;
    this.snd.setMss(Math.min(this.ourMss, defaultMss(this.family)));
    this.owner.wantOutput(this);
  }

  private applySynOptions(s: TcpSegment): void {
    const peerMss = s.mss > 0 ? s.mss : defaultMss(this.family);
    this.snd.setMss(Math.max(64, Math.min(this.ourMss, peerMss)));
    this.wsOk = this.owner.options.windowScaling && s.wscale >= 0;
    this.sackOk = this.owner.options.sack && s.sackPermitted;
    this.snd.wscale = this.wsOk ? s.wscale : 0;
    this.rcv.wscale = this.wsOk ? scaleFor(this.rcv.ring.capacity) : 0;
  }

  /** Processes one received segment for this connection; returns TCP_ACCEPTED or a drop code. */
  input(s: TcpSegment, buf: Uint8Array, now: number): number {
    this.lastInputAt = now;
    const r = this.state === TCP_SYN_SENT ? this.inputSynSent(s, now) : this.inputSynchronizing(s, buf, now);
    if (this.state !== TCP_CLOSED) this.armPersist(now);
    if (this.ackNeeded || this.dupAcksOwed > 0) this.owner.wantOutput(this);
    return r;
  }

  private inputSynSent(s: TcpSegment, now: number): number {
    const f = s.flags;
    if (f & TCP_FLAG_ACK && (seqLe(s.ack, this.snd.iss) || seqGt(s.ack, this.snd.max))) {
      if (!(f & TCP_FLAG_RST)) this.owner.queueRst(this, s.ack, 0, false);
      return TCP_DROP_BAD_ACK;
    }
    if (f & TCP_FLAG_RST) {
      if (!(f & TCP_FLAG_ACK)) return TCP_DROP_RST_INVALID;
      this.owner.stats.resetsIn++;
      this.finish('refused', true);
      return TCP_ACCEPTED;
    }
    if (!(f & TCP_FLAG_SYN)) return TCP_DROP_BAD_FLAGS;
    this.rcv.init(s.seq);
    this.applySynOptions(s);
    this.snd.wl1 = s.seq;
    this.snd.wl2 = s.ack;
    this.snd.wnd = s.window;
    this.snd.maxWnd = s.window;
    if (f & TCP_FLAG_ACK) {
      this.snd.onAck(s.ack, s.seq, s.window, 0, now);
      this.state = TCP_ESTABLISHED;
      this.owner.stats.connected++;
      this.raise(TCP_EV_ESTABLISHED | TCP_EV_WRITABLE);
      this.ackNeeded = true;
    } else {
      // Simultaneous open (RFC 9293 §3.5 figure 7): SYN-ACK from here.
      this.state = TCP_SYN_RECEIVED;
      this.snd.nxt = this.snd.iss;
      this.owner.wantOutput(this);
    }
    return TCP_ACCEPTED;
  }

  private inputSynchronizing(s: TcpSegment, buf: Uint8Array, now: number): number {
    const f = s.flags;
    const segLen = s.dataLen + (f & TCP_FLAG_SYN ? 1 : 0) + (f & TCP_FLAG_FIN ? 1 : 0);
    // TIME_WAIT: the peer still retransmits (its FIN, or data before it when our last ACK was
    // lost and it went back to SND.UNA): each segment with an ACK restarts the 2·MSL timer and
    // is answered with an ACK (as Linux does; RFC 9293 names only the FIN), so a peer whose
    // RTO has backed off beyond 2·MSL still hears it before the state ends.
    if (this.state === TCP_TIME_WAIT && f & TCP_FLAG_ACK && !(f & TCP_FLAG_RST))
      this.timeWaitDeadline = now + this.owner.options.timeWaitMs;
    // First: the sequence number (RFC 9293 §3.10.7.4).
    if (!this.rcv.acceptable(s.seq, segLen)) {
      const zeroWindowProbe = this.rcv.window === 0 && s.seq === this.rcv.nxt && f & TCP_FLAG_ACK;
      if (!zeroWindowProbe) {
        if (s.dataLen > 0 && seqLe(seqAdd(s.seq, s.dataLen), this.rcv.nxt)) this.owner.stats.duplicates++;
        if (this.state === TCP_SYN_RECEIVED && f & TCP_FLAG_SYN && !(f & TCP_FLAG_ACK)) {
          if (seqAdd(s.seq, 1) === this.rcv.nxt) {
            this.snd.nxt = this.snd.iss; // the SYN again: our SYN-ACK was lost
            this.owner.wantOutput(this);
            return TCP_ACCEPTED;
          }
        }
        if (!(f & TCP_FLAG_RST)) this.ackNeeded = true;
        return TCP_DROP_OUT_OF_WINDOW;
      }
    }
    // Second: RST (RFC 5961 §3.2: only exactly at RCV.NXT; in the window, a challenge ACK).
    if (f & TCP_FLAG_RST) {
      if (s.seq !== this.rcv.nxt) {
        this.challengeAck(now);
        return TCP_DROP_RST_INVALID;
      }
      this.owner.stats.resetsIn++;
      this.finish('reset', true);
      return TCP_ACCEPTED;
    }
    // Fourth: SYN in a synchronized state (RFC 5961 §4.2: challenge ACK).
    if (f & TCP_FLAG_SYN) {
      this.challengeAck(now);
      return TCP_DROP_SYN_IN_WINDOW;
    }
    // Fifth: the ACK field.
    if (!(f & TCP_FLAG_ACK)) return TCP_DROP_NO_ACK;
    if (this.state === TCP_SYN_RECEIVED) {
      if (seqLe(s.ack, this.snd.una) || seqGt(s.ack, this.snd.max)) {
        this.owner.queueRst(this, s.ack, 0, false);
        this.owner.stats.resetsOut++;
        return TCP_DROP_BAD_ACK;
      }
      this.establish();
    }
    // RFC 5961 §5.2: SND.UNA − MAX.SND.WND ≤ SEG.ACK ≤ SND.MAX, else ACK and drop.
    if (seqGt(s.ack, this.snd.max) || seqLt(s.ack, seqAdd(this.snd.una, -Math.max(this.snd.maxWnd, 1)))) {
      this.ackNeeded = true;
      return TCP_DROP_BAD_ACK;
    }
    const wasFree = this.snd.ring.free;
    const ackResult = this.snd.onAck(s.ack, s.seq, s.window << this.snd.wscale, segLen, now);
    if (this.snd.wnd === 0) this.snd.retries = 0; // the peer answers: closed window, not dead
    if (ackResult === ACK_NEW && this.snd.ring.free > wasFree && !this.snd.finQueued) this.raise(TCP_EV_WRITABLE);
    // New acknowledgment, a window that opened, a retransmission due: output decides.
    if (ackResult === ACK_NEW || this.snd.retransmitOne || this.snd.sendable() > 0) this.owner.wantOutput(this);
    if (this.snd.finAcked) {
      if (this.state === TCP_FIN_WAIT_1) this.state = TCP_FIN_WAIT_2;
      else if (this.state === TCP_CLOSING) this.enterTimeWait(now);
      else if (this.state === TCP_LAST_ACK) {
        this.finish('closed', true);
        return TCP_ACCEPTED;
      }
    }
    // Seventh: the data.
    let result = TCP_ACCEPTED;
    if (s.dataLen > 0) {
      if (this.state === TCP_ESTABLISHED || this.state === TCP_FIN_WAIT_1 || this.state === TCP_FIN_WAIT_2) {
        const before = this.rcv.nxt;
        const r = this.rcv.receiveData(s.seq, buf, s.dataOff, s.dataLen);
        if (r === RX_OOO_FULL) result = TCP_DROP_OOO_FULL;
        if (this.rcv.nxt !== before || r !== RX_OK) {
          if (this.rcv.nxt !== before) this.raise(TCP_EV_READABLE);
          this.ackNeeded = true;
        } else {
          this.owner.stats.outOfOrder++;
          // RFC 5681 §4.2: one immediate duplicate ACK per out-of-order segment, not coalesced
          // with the ACK of in-order data, so the sender's count reaches three.
          if (this.dupAcksOwed < MAX_DUP_ACKS_OWED) this.dupAcksOwed++;
        }
      } else {
        this.ackNeeded = true;
      }
    }
    // Eighth: FIN, taken in order only.
    if (f & TCP_FLAG_FIN) {
      this.ackNeeded = true;
      if (!this.rcv.finReceived && this.rcv.finInOrder(seqAdd(s.seq, s.dataLen))) {
        this.rcv.takeFin();
        this.raise(TCP_EV_PEER_FIN);
        if (this.state === TCP_ESTABLISHED) this.state = TCP_CLOSE_WAIT;
        else if (this.state === TCP_FIN_WAIT_1) {
          if (this.snd.finAcked) this.enterTimeWait(now);
          else this.state = TCP_CLOSING;
        } else if (this.state === TCP_FIN_WAIT_2) this.enterTimeWait(now);
      } else if (this.state === TCP_TIME_WAIT) {
        this.timeWaitDeadline = now + this.owner.options.timeWaitMs;
      }
    }
    return result;
  }

  private establish(): void {
    this.state = TCP_ESTABLISHED;
    this.owner.stats.accepted++;
    if (this.snd.finQueued) this.state = TCP_FIN_WAIT_1;
    this.known = true;
    this.raise(TCP_EV_ESTABLISHED | TCP_EV_WRITABLE);
  }

  private enterTimeWait(now: number): void {
    this.state = TCP_TIME_WAIT;
    this.timeWaitDeadline = now + this.owner.options.timeWaitMs;
    this.snd.rtoDeadline = -1;
    this.snd.persistDeadline = -1;
    this.raise(TCP_EV_CLOSED);
    this.closeReason = 'closed';
  }

  /** RFC 5961 §7 rate limit: at most challengeAcksPerSecond per connection. */
  private challengeAck(now: number): void {
    if (this.challengeWindowStart < 0 || now - this.challengeWindowStart >= 1000) {
      this.challengeWindowStart = now;
      this.challengeCount = 0;
    }
    if (this.challengeCount >= this.owner.options.challengeAcksPerSecond) return;
    this.challengeCount++;
    this.owner.stats.challengeAcks++;
    this.ackNeeded = true;
  }

  private raise(ev: number): void {
    if (!this.known) return;
    this.pending |= ev;
    this.owner.notify(this);
  }

  /** To CLOSED: out of the table; the consumer hears EV_CLOSED (unless it closed it itself). */
  private finish(reason: TcpCloseReason, report: boolean): void {
    const wasTimeWait = this.state === TCP_TIME_WAIT;
    this.state = TCP_CLOSED;
    if (this.closeReason === null) this.closeReason = reason;
    this.snd.rtoDeadline = -1;
    this.snd.persistDeadline = -1;
    this.timeWaitDeadline = -1;
    this.ackNeeded = false;
    this.dupAcksOwed = 0;
    if (report && !wasTimeWait) this.raise(TCP_EV_CLOSED);
    this.owner.release(this);
  }

  /**
   * ConnectionOutput.emit, and when nothing could go: data queued by `send` into a closed window
   * with nothing in flight arms the persist timer here (no ACK may come to arm it in `input`).
   */
  override emit(buf: Uint8Array, off: number, now: number): number {
    const n = super.emit(buf, off, now);
    if (n === 0 && this.state !== TCP_CLOSED && this.snd.persistDeadline < 0) this.armPersist(now);
    return n;
  }

  private armPersist(now: number): void {
    if (this.snd.needsProbe && this.state !== TCP_SYN_RECEIVED) {
      if (this.snd.persistDeadline < 0)
        this.snd.persistDeadline = now + Math.min(60_000, this.snd.rto.rto * 2 ** this.snd.persistBackoff);
    } else {
      this.snd.persistDeadline = -1;
      this.snd.persistBackoff = 0;
    }
  }

  /** The earliest timer deadline, or -1 when none runs. */
  nextDeadline(): number {
    let d = this.snd.rtoDeadline;
    const p = this.snd.persistDeadline;
    if (p >= 0 && (d < 0 || p < d)) d = p;
    const t = this.timeWaitDeadline;
    if (t >= 0 && (d < 0 || t < d)) d = t;
    return d;
  }

  /** Runs the timers due at `now`. */
  onTimer(now: number): void {
    if (this.timeWaitDeadline >= 0 && now >= this.timeWaitDeadline) {
      this.finish('closed', false);
      return;
    }
    const snd = this.snd;
    const rtoDue = snd.rtoDeadline >= 0 && now >= snd.rtoDeadline;
    const probeDue = snd.persistDeadline >= 0 && now >= snd.persistDeadline;
    if (!rtoDue && !probeDue) return;
    // Unanswered retransmissions and window probes count alike; any ACK resets the count, so
    // a live peer that keeps its window closed is probed for ever, a dead one is given up.
    const limit = this.synchronized ? this.owner.options.maxRetries : this.owner.options.maxSynRetries;
    if (snd.retries >= limit) {
      this.owner.stats.timeouts++;
      if (this.state !== TCP_SYN_SENT) {
        this.owner.queueRst(this, snd.max, this.rcv.nxt, true);
        this.owner.stats.resetsOut++;
      }
      this.finish('timeout', true);
      return;
    }
    if (rtoDue && snd.wnd === 0 && this.synchronized) {
      // Data in flight into a window closed since: probe, as the persist timer would.
      snd.rto.expired();
      snd.retries++;
      snd.rtoDeadline = now + snd.rto.rto;
      this.probeDue = true;
    } else if (rtoDue) {
      snd.onTimeout(now);
    }
    if (probeDue) {
      this.probeDue = true;
      snd.retries++;
      snd.persistBackoff++;
      snd.persistDeadline = -1;
      this.armPersist(now);
    }
    this.owner.wantOutput(this);
  }
}

const MAX_DUP_ACKS_OWED = 16;
