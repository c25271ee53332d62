/**
 * Transport sessions ("keypairs", whitepaper §5.4.5–§5.4.6) and their 64-bit counters.
 *
 * A keypair holds the two ChaCha20-Poly1305 keys of one handshake, the next send counter and
 * the receive replay window. Counters are two uint32 halves: the send counter increments in
 * 32-bit arithmetic with a carry, so no counter ever passes through a float and the limits
 * Rekey-After-Messages (2^60) and Reject-After-Messages (2^64 − 2^13 − 1) are compared exactly.
 * The transport nonce is 4 zero bytes followed by the little-endian counter (RFC 8439 §2.8 with
 * WireGuard's layout), which is also exactly the counter field of the transport header.
 *
 * A peer has up to three keypairs (whitepaper §5.4.5 and wireguard-go's rotation rules):
 * `current` (used to send), `previous` (still accepted on receive after a rotation) and, on the
 * responder, `next` — derived when the response is sent, promoted to current only when the first
 * transport message under it arrives (key confirmation). The rotation itself lives in device.ts
 * because it also maintains the index table.
 */
import {
  REJECT_AFTER_MESSAGES_HI,
  REJECT_AFTER_MESSAGES_LO,
  REJECT_AFTER_TIME,
  REKEY_AFTER_MESSAGES_HI,
} from './constants.js';
import { KEY_LEN } from './messages.js';
import { ReplayFilter } from './replay.js';
import { SHARED_REKEY_AFTER, SHARED_SEND_LIMIT, SharedReplayFilter } from './shared-sessions.js';

/** What receive() asks of a replay window (ReplayFilter, or SharedReplayFilter across threads). */
export interface ReplayWindow {
  check(lo: number, hi: number): boolean;
  validate(lo: number, hi: number): boolean;
}

export class Keypair {
  readonly sendKey = new Uint8Array(KEY_LEN);
  readonly receiveKey = new Uint8Array(KEY_LEN);
  replay: ReplayWindow = new ReplayFilter();
  /**
   * Shared-session slot (shared-sessions.ts) when worker threads send and receive under this
   * keypair too: the send counter is then the slot's word, advanced atomically, and `replay`
   * the slot's window. -1: this thread's own counter and window.
   */
  sharedSlot = -1;
  private shared: Uint32Array | null = null;
  private sharedAt = 0;
  private sharedSpent = false;
  /** Next send counter, low and high 32 bits. */
  sendLo = 0;
  sendHi = 0;
  /** The counter handed out by the last successful takeSendCounter(). */
  takenLo = 0;
  takenHi = 0;

  constructor(
    /** `now` when the handshake that made this keypair finished. */
    readonly created: number,
    /** True on the side that sent the initiation (only the initiator rekeys by time). */
    readonly isInitiator: boolean,
    /** Our index: transport messages to us carry it as receiver. */
    readonly localIndex: number,
    /** The peer's index: we put it in the receiver field of what we send. */
    readonly remoteIndex: number,
  ) {}

  /**
   * Moves this keypair to shared slot `slot`: its counter (the next one to send) is copied into
   * the slot's send word and its replay window becomes the slot's (`words`: the slots' Int32
   * view, `base`: this slot's first word). Call before any other thread knows the slot.
   */
  attachShared(slot: number, words: Int32Array, base: number): void {
    if (this.sendHi !== 0) throw new RangeError('a shared keypair counts in 32 bits');
    const u = new Uint32Array(words.buffer, words.byteOffset, words.length);
    const replay = new SharedReplayFilter(words, base);
    replay.reset();
    Atomics.store(u, base, this.sendExhausted ? SHARED_SEND_LIMIT : this.sendLo);
    this.shared = u;
    this.sharedAt = base;
    this.sharedSlot = slot;
    this.replay = replay;
  }

  /** True once the send counter reached Reject-After-Messages: nothing more may be sent. */
  get sendExhausted(): boolean {
    if (this.shared !== null) return this.sharedSpent || Atomics.load(this.shared, this.sharedAt) >= SHARED_SEND_LIMIT;
    return this.sendHi === REJECT_AFTER_MESSAGES_HI && this.sendLo >= REJECT_AFTER_MESSAGES_LO;
  }

  /**
   * Reserves the next send counter into (takenLo, takenHi). Returns false, reserving nothing,
   * when the keypair may not send any more (counter at Reject-After-Messages).
   */
  takeSendCounter(): boolean {
    if (this.shared !== null) {
      if (this.sharedSpent) return false;
      const c = Atomics.add(this.shared, this.sharedAt, 1);
      if (c >= SHARED_SEND_LIMIT) {
        this.sharedSpent = true;
        return false;
      }
      this.takenLo = c;
      this.takenHi = 0;
      this.sendLo = c + 1;
      return true;
    }
    if (this.sendExhausted) return false;
    this.takenLo = this.sendLo;
    this.takenHi = this.sendHi;
    const lo = (this.sendLo + 1) >>> 0;
    if (lo === 0) this.sendHi = (this.sendHi + 1) >>> 0;
    this.sendLo = lo;
    return true;
  }

  /** Send counter > Rekey-After-Messages (2^60): time for a new handshake. */
  get sendCountWantsRekey(): boolean {
    if (this.shared !== null) return this.sendLo > SHARED_REKEY_AFTER;
    return this.sendHi > REKEY_AFTER_MESSAGES_HI || (this.sendHi === REKEY_AFTER_MESSAGES_HI && this.sendLo > 0);
  }

  /** May this keypair still send at `now`? (counter below the limit, younger than Reject-After-Time) */
  canSend(now: number): boolean {
    return !this.sendExhausted && now - this.created < REJECT_AFTER_TIME;
  }

  /** Forbid further sending (wireguard-go's ExpireCurrentKeypairs: counter := limit). */
  expireSending(): void {
    if (this.shared !== null) {
      Atomics.store(this.shared, this.sharedAt, SHARED_SEND_LIMIT);
      this.sharedSpent = true;
    }
    this.sendHi = REJECT_AFTER_MESSAGES_HI;
    this.sendLo = REJECT_AFTER_MESSAGES_LO;
  }

  /** Set the next send counter (tests and diagnostics; the halves are uint32). */
  setSendCounter(lo: number, hi: number): void {
    this.sendLo = lo >>> 0;
    this.sendHi = hi >>> 0;
  }

  /** Erase the keys (the keypair is dead afterwards). */
  zero(): void {
    this.sendKey.fill(0);
    this.receiveKey.fill(0);
    this.expireSending();
  }
}

/** Writes the 12-byte transport nonce for counter (lo, hi) into out[0, 12). */
export function writeNonce(out: Uint8Array, lo: number, hi: number): void {
  out[0] = 0;
  out[1] = 0;
  out[2] = 0;
  out[3] = 0;
  out[4] = lo & 0xff;
  out[5] = (lo >>> 8) & 0xff;
  out[6] = (lo >>> 16) & 0xff;
  out[7] = (lo >>> 24) & 0xff;
  out[8] = hi & 0xff;
  out[9] = (hi >>> 8) & 0xff;
  out[10] = (hi >>> 16) & 0xff;
  out[11] = (hi >>> 24) & 0xff;
}

/**
 * Called by the device as keypairs are born (before their first use) and die: where the data
 * path runs on several threads, attach() gives a keypair a shared slot (Keypair.attachShared)
 * and release() takes it back.
 */
export interface SessionSlots {
  attach(kp: Keypair): void;
  release(kp: Keypair): void;
}

/** The peer's three session slots. */
export class Keypairs {
  current: Keypair | null = null;
  previous: Keypair | null = null;
  next: Keypair | null = null;
}
