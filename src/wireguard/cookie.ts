/**
 * mac1/mac2 and cookies: WireGuard's DoS mitigation (whitepaper §5.3, §5.4.4, §5.4.7).
 *
 *   mac1 := MAC(HASH(LABEL_MAC1 ‖ Spub_receiver), msg_alpha)         (msg up to mac1)
 *   mac2 := MAC(Tm, msg_beta) if a fresh cookie Tm is known, else 16 zero bytes (msg up to mac2)
 *   Tm   := MAC(Rm, source ip ‖ source port), Rm a random secret rotated every 120 s
 *   cookie reply: XAEAD(HASH(LABEL_COOKIE ‖ Spub_receiver), 24-byte random nonce, Tm, mac1)
 * where MAC is keyed BLAKE2s with a 16-byte digest.
 *
 * `CookieChecker` is the device's (responder's) side: it verifies mac1 always (a cheap check
 * before any DH) and mac2 when under load, and makes cookie replies. `CookieGenerator` is one
 * per peer (initiator's side): it adds macs to outgoing handshake messages and accepts cookie
 * replies for the last mac1 it sent. The source encoding is opaque to the initiator (only the
 * responder recomputes Tm), so any injective encoding of (address, port) is wire-compatible;
 * the caller passes it as bytes (see device.ts).
 *
 * No allocation after construction. Times are `now` in ms.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { COOKIE_REFRESH_TIME } from './constants.js';
import {
  COOKIE_LEN,
  COOKIE_NONCE_LEN,
  COOKIE_REPLY_COOKIE_LEN,
  COOKIE_REPLY_COOKIE_OFFSET,
  COOKIE_REPLY_NONCE_OFFSET,
  COOKIE_REPLY_RECEIVER_OFFSET,
  COOKIE_REPLY_SIZE,
  KEY_LEN,
  MAC_LEN,
  MESSAGE_COOKIE_REPLY,
  TYPE_OFFSET,
  INITIATION_SENDER_OFFSET,
  mac1Offset,
  mac2Offset,
  readU32LE,
  writeU32LE,
} from './messages.js';

const encoder = new TextEncoder();
export const LABEL_MAC1 = encoder.encode('mac1----');
export const LABEL_COOKIE = encoder.encode('cookie--');

/** Constant-time equality of a[aOff, aOff+n) and b[bOff, bOff+n). */
function equalCT(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, n: number): boolean {
  let d = 0;
  for (let i = 0; i < n; i++) d |= a[aOff + i] ^ b[bOff + i];
  return d === 0;
}

/** The responder side, keyed by this device's public key. */
export class CookieChecker {
  private readonly mac1Key = new Uint8Array(KEY_LEN);
  private readonly cookieKey = new Uint8Array(KEY_LEN);
  private readonly secret = new Uint8Array(KEY_LEN);
  private secretSetAt = Number.NEGATIVE_INFINITY;
  private readonly scratch = new Uint8Array(MAC_LEN);
  private readonly cookie = new Uint8Array(COOKIE_LEN);
  private hasKey = false;

  constructor(private readonly backend: CryptoBackend) {}

  /** (Re)key for this device's public key, or disable (every mac1 then fails) with null. */
  init(publicKey: Uint8Array | null): void {
    if (publicKey === null) {
      this.mac1Key.fill(0);
      this.cookieKey.fill(0);
      this.hasKey = false;
      return;
    }
    this.backend.hash(this.mac1Key, LABEL_MAC1, publicKey);
    this.backend.hash(this.cookieKey, LABEL_COOKIE, publicKey);
    this.hasKey = true;
  }

  /** Verifies mac1 of the handshake message msg[off, off+len). */
  checkMac1(msg: Uint8Array, off: number, len: number): boolean {
    if (!this.hasKey) return false;
    const m1 = off + mac1Offset(len);
    this.backend.mac(this.scratch, this.mac1Key, msg.subarray(off, m1));
    return equalCT(this.scratch, 0, msg, m1, MAC_LEN);
  }

  /**
   * Verifies mac2 against the cookie this device would give `source` now. False when no secret
   * was made in the last 120 s (nobody can hold a valid cookie then).
   */
  checkMac2(msg: Uint8Array, off: number, len: number, source: Uint8Array, now: number): boolean {
    if (now - this.secretSetAt > COOKIE_REFRESH_TIME) return false;
    const m2 = off + mac2Offset(len);
    // 16 zero bytes is how an initiator without a cookie says so (whitepaper §5.4.4): refuse it
    // without two MACs, the common case of an initiation flood (public bytes: no timing concern).
    let any = 0;
    for (let i = 0; i < MAC_LEN; i++) any |= msg[m2 + i];
    if (any === 0) return false;
    this.backend.mac(this.cookie, this.secret, source);
    this.backend.mac(this.scratch, this.cookie, msg.subarray(off, m2));
    this.cookie.fill(0);
    return equalCT(this.scratch, 0, msg, m2, MAC_LEN);
  }

  /**
   * Writes a cookie reply to the handshake message msg[off, off+len) into out[outOff, +64):
   * receiver := the message's sender index; the cookie for `source` sealed with mac1 as
   * associated data. Rotates the secret Rm when it is older than 120 s. `nonce24` must hold
   * 24 fresh random bytes. Returns the reply size.
   */
  createReply(
    msg: Uint8Array,
    off: number,
    len: number,
    source: Uint8Array,
    now: number,
    nonce24: Uint8Array,
    out: Uint8Array,
    outOff: number,
  ): number {
    if (now - this.secretSetAt > COOKIE_REFRESH_TIME) {
      this.backend.randomFill(this.secret);
      this.secretSetAt = now;
    }
    this.backend.mac(this.cookie, this.secret, source);
    writeU32LE(out, outOff + TYPE_OFFSET, MESSAGE_COOKIE_REPLY);
    // Both initiation and response carry their sender index at offset 4.
    writeU32LE(out, outOff + COOKIE_REPLY_RECEIVER_OFFSET, readU32LE(msg, off + INITIATION_SENDER_OFFSET));
    out.set(nonce24.subarray(0, COOKIE_NONCE_LEN), outOff + COOKIE_REPLY_NONCE_OFFSET);
    const m1 = off + mac1Offset(len);
    this.backend.xseal(
      this.cookieKey,
      out.subarray(outOff + COOKIE_REPLY_NONCE_OFFSET, outOff + COOKIE_REPLY_NONCE_OFFSET + COOKIE_NONCE_LEN),
      msg.subarray(m1, m1 + MAC_LEN),
      this.cookie,
      0,
      COOKIE_LEN,
      out,
      outOff + COOKIE_REPLY_COOKIE_OFFSET,
    );
    this.cookie.fill(0);
    return COOKIE_REPLY_SIZE;
  }
}

/** The initiator side for one peer, keyed by the peer's public key. */
export class CookieGenerator {
  private readonly mac1Key = new Uint8Array(KEY_LEN);
  private readonly cookieKey = new Uint8Array(KEY_LEN);
  private readonly cookie = new Uint8Array(COOKIE_LEN);
  private cookieSetAt = Number.NEGATIVE_INFINITY;
  private readonly lastMac1 = new Uint8Array(MAC_LEN);
  private hasLastMac1 = false;
  private readonly decrypted = new Uint8Array(COOKIE_LEN);

  constructor(
    private readonly backend: CryptoBackend,
    peerPublicKey: Uint8Array,
  ) {
    backend.hash(this.mac1Key, LABEL_MAC1, peerPublicKey);
    backend.hash(this.cookieKey, LABEL_COOKIE, peerPublicKey);
  }

  /** Fills mac1 and mac2 of the handshake message msg[off, off+len) (mac2 zero without a fresh cookie). */
  addMacs(msg: Uint8Array, off: number, len: number, now: number): void {
    const m1 = off + mac1Offset(len);
    const m2 = off + mac2Offset(len);
    this.backend.mac(this.lastMac1, this.mac1Key, msg.subarray(off, m1));
    msg.set(this.lastMac1, m1);
    this.hasLastMac1 = true;
    if (now - this.cookieSetAt > COOKIE_REFRESH_TIME) {
      msg.fill(0, m2, m2 + MAC_LEN);
      return;
    }
    this.backend.mac(msg.subarray(m2, m2 + MAC_LEN), this.cookie, msg.subarray(off, m2));
  }

  /**
   * Accepts a cookie reply msg[off, off+64) if it decrypts under the last mac1 we sent; the
   * cookie is then used for mac2 during the next 120 s. Returns false (state unchanged) otherwise.
   */
  consumeReply(msg: Uint8Array, off: number, now: number): boolean {
    if (!this.hasLastMac1) return false;
    const n = off + COOKIE_REPLY_NONCE_OFFSET;
    const ok = this.backend.xopen(
      this.cookieKey,
      msg.subarray(n, n + COOKIE_NONCE_LEN),
      this.lastMac1,
      msg,
      off + COOKIE_REPLY_COOKIE_OFFSET,
      COOKIE_REPLY_COOKIE_LEN,
      this.decrypted,
      0,
    );
    if (!ok) return false;
    this.cookie.set(this.decrypted);
    this.decrypted.fill(0);
    this.cookieSetAt = now;
    return true;
  }

  /** Forget the cookie (e.g. when the peer's keys are erased). */
  clear(): void {
    this.cookie.fill(0);
    this.cookieSetAt = Number.NEGATIVE_INFINITY;
    this.hasLastMac1 = false;
  }
}
