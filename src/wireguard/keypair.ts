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

export class Keypair {
  readonly sendKey = new Uint8Array(KEY_LEN);
  readonly receiveKey = new Uint8Array(KEY_LEN);
  readonly replay = new ReplayFilter();
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

  /** True once the send counter reached Reject-After-Messages: nothing more may be sent. */
  get sendExhausted(): boolean {
    return this.sendHi === REJECT_AFTER_MESSAGES_HI && this.sendLo >= REJECT_AFTER_MESSAGES_LO;
  }

  /**
   * Reserves the next send counter into (takenLo, takenHi). Returns false, reserving nothing,
   * when the keypair may not send any more (counter at Reject-After-Messages).
   */
  takeSendCounter(): boolean {
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
    return this.sendHi > REKEY_AFTER_MESSAGES_HI || (this.sendHi === REKEY_AFTER_MESSAGES_HI && this.sendLo > 0);
  }

  /** May this keypair still send at `now`? (counter below the limit, younger than Reject-After-Time) */
  canSend(now: number): boolean {
    return !this.sendExhausted && now - this.created < REJECT_AFTER_TIME;
  }

  /** Forbid further sending (wireguard-go's ExpireCurrentKeypairs: counter := limit). */
  expireSending(): void {
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

/** The peer's three session slots. */
export class Keypairs {
  current: Keypair | null = null;
  previous: Keypair | null = null;
  next: Keypair | null = null;
}
