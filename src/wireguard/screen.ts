/**
 * The cheap checks of an initiation or response, before any Diffie-Hellman (whitepaper §5.3):
 * a private key, mac1, and under load a valid mac2 (else a cookie reply, at most
 * RATELIMIT_PACKETS_PER_SECOND per source: a real initiator retries every Rekey-Timeout and
 * needs one, a flood from one source gets no reflection) and the per-source rate limit.
 *
 * One `HandshakeScreen` holds what these checks keep: the cookie checker (its secret), the
 * two per-source limiters and the under-load hysteresis. The Device has one (handshake.ts
 * screenHandshake); with worker threads each worker has its own (shard.ts), so both paths run
 * this one function. No I/O, no allocation per message (an IPv6 source's rate-limit key is text).
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { parseAddress } from '../packet/addr.js';
import { UNDER_LOAD_AFTER_TIME } from './constants.js';
import { CookieChecker } from './cookie.js';
import { DROP_COOKIE_REQUIRED, DROP_INVALID_MAC1, DROP_NO_PRIVATE_KEY, DROP_RATE_LIMITED } from './drops.js';
import { keyHex, type Endpoint } from './peer.js';
import { RateLimiter } from './ratelimiter.js';

/** screen()'s result when the message deserves the full processing. */
export const SCREEN_PASS = -1;
/** Bytes for the source encoding (address text and port). */
const SOURCE_SCRATCH_LEN = 128;

export class HandshakeScreen {
  readonly cookieChecker: CookieChecker;
  readonly rateLimiter = new RateLimiter();
  /** Cookie replies per source under load (same bucket parameters as rateLimiter). */
  readonly cookieReplyLimiter = new RateLimiter();
  /** Until when the checks of "under load" apply (UNDER_LOAD_AFTER_TIME after the last load). */
  underLoadUntil = Number.NEGATIVE_INFINITY;
  /** Set by screen() with DROP_COOKIE_REQUIRED: the caller sends cookieReply() to the source. */
  replyDue = false;
  private readonly sourceScratch = new Uint8Array(SOURCE_SCRATCH_LEN);
  private readonly encoder = new TextEncoder();

  constructor(backend: CryptoBackend) {
    this.cookieChecker = new CookieChecker(backend);
  }

  /** Whether the under-load checks apply at `now` (1 s hysteresis included). */
  isUnderLoad(now: number): boolean {
    return now < this.underLoadUntil;
  }

  /**
   * Screens the initiation or response buf[off, +len) from `from`: SCREEN_PASS, or the DROP_*
   * reason to count. `underLoad`: the caller's queue is loaded now.
   */
  screen(
    hasKey: boolean,
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
  ): number {
    this.replyDue = false;
    if (!hasKey) return DROP_NO_PRIVATE_KEY;
    if (!this.cookieChecker.checkMac1(buf, off, len)) return DROP_INVALID_MAC1;
    if (underLoad) this.underLoadUntil = now + UNDER_LOAD_AFTER_TIME;
    if (underLoad || now < this.underLoadUntil) {
      if (!this.cookieChecker.checkMac2(buf, off, len, this.sourceBytes(from), now)) {
        this.replyDue = this.cookieReplyLimiter.allow(rateLimitKey(from.address), now);
        return DROP_COOKIE_REQUIRED;
      }
      if (!this.rateLimiter.allow(rateLimitKey(from.address), now)) return DROP_RATE_LIMITED;
    }
    return SCREEN_PASS;
  }

  /**
   * Writes the cookie reply to the message buf[off, +len) from `from` into out[outOff, +64)
   * (`nonce24`: 24 fresh random bytes); returns its size.
   */
  cookieReply(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    nonce24: Uint8Array,
    out: Uint8Array,
    outOff: number,
  ): number {
    return this.cookieChecker.createReply(buf, off, len, this.sourceBytes(from), now, nonce24, out, outOff);
  }

  /** The cookie input for a source: its address text and big-endian port (opaque, injective). */
  private sourceBytes(from: Endpoint): Uint8Array {
    const b = this.sourceScratch;
    const r = this.encoder.encodeInto(from.address, b.subarray(0, SOURCE_SCRATCH_LEN - 2));
    const n = r.written;
    b[n] = (from.port >>> 8) & 0xff;
    b[n + 1] = from.port & 0xff;
    return b.subarray(0, n + 2);
  }
}

/** Rate-limit key: the IPv4 address, or the /64 of an IPv6 address (as wireguard-go and Linux). */
function rateLimitKey(address: string): string {
  if (!address.includes(':')) return address;
  const pct = address.indexOf('%');
  let bytes: Uint8Array;
  try {
    bytes = parseAddress(pct >= 0 ? address.slice(0, pct) : address);
  } catch {
    return address;
  }
  return keyHex(bytes.subarray(0, 8));
}
