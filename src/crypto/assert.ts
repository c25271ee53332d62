/**
 * Argument checks and small byte helpers shared by the backends (pure, node, openssl). The checks
 * throw on API misuse only (wrong key or nonce length, spans outside their buffer); bad bytes
 * from the network never reach a throw here. Messages are built only on the failure path, so the
 * checks cost a few comparisons per call.
 */
import { KEY_LEN, TAG_LEN } from './sizes.js';

/** Throws unless `buf` is a Uint8Array of exactly `len` bytes. */
export function assertBytes(buf: Uint8Array, len: number, what: string): void {
  if (!(buf instanceof Uint8Array)) throw new TypeError(`${what} must be a Uint8Array`);
  if (buf.length !== len) throw new RangeError(`${what} must be ${len} bytes, got ${buf.length}`);
}

/** Throws unless `buf` is a Uint8Array of at least `min` bytes (outputs may be longer views). */
export function assertOutput(buf: Uint8Array, min: number, what: string): void {
  if (!(buf instanceof Uint8Array)) throw new TypeError(`${what} must be a Uint8Array`);
  if (buf.length < min) throw new RangeError(`${what} must have room for ${min} bytes, has ${buf.length}`);
}

/** Throws unless [off, off+len) is a span of whole bytes inside `buf`. */
export function assertSpan(buf: Uint8Array, off: number, len: number, what: string): void {
  if (!(buf instanceof Uint8Array)) throw new TypeError(`${what} must be a Uint8Array`);
  if (!Number.isInteger(off) || !Number.isInteger(len) || off < 0 || len < 0 || off + len > buf.length) {
    throw new RangeError(`${what} span [${off}, ${off}+${len}) lies outside its ${buf.length}-byte buffer`);
  }
}

/** Throws unless `ad` is null or a Uint8Array. */
export function assertAd(ad: Uint8Array | null): void {
  if (ad !== null && !(ad instanceof Uint8Array)) throw new TypeError('ad must be a Uint8Array or null');
}

/** Throws unless every part is a Uint8Array (hash/mac/hmac inputs). */
export function assertParts(parts: readonly Uint8Array[]): void {
  for (let i = 0; i < parts.length; i++) {
    if (!(parts[i] instanceof Uint8Array)) throw new TypeError(`input part ${i} must be a Uint8Array`);
  }
}

/**
 * The argument checks of seal()/xseal() and open()/xopen() (CryptoBackend contract): a 32-byte
 * key, a nonce of `nonceLen` bytes, `ad` null or bytes, the src span, and the dst span (sealing:
 * len + TAG_LEN bytes; opening: len - TAG_LEN). Misuse throws RangeError. Returns false only when
 * opening a message too short to hold a tag: bad input, for open to answer false.
 */
export function checkAeadArgs(
  opening: boolean,
  key: Uint8Array,
  nonce: Uint8Array,
  nonceLen: number,
  ad: Uint8Array | null,
  src: Uint8Array,
  srcOff: number,
  len: number,
  dst: Uint8Array,
  dstOff: number,
): boolean {
  assertBytes(key, KEY_LEN, 'key');
  assertBytes(nonce, nonceLen, 'nonce');
  assertAd(ad);
  assertSpan(src, srcOff, len, 'src');
  if (opening && len < TAG_LEN) return false;
  assertSpan(dst, dstOff, opening ? len - TAG_LEN : len + TAG_LEN, 'dst');
  return true;
}

/**
 * The end of every backend's dh(): copy the 32-byte secret `shared` into `out` and wipe `shared`.
 * An all-zero secret (a low-order public key, RFC 7748 §6.1), or `shared` null because the
 * library refused the key, leaves `out` zeroed and returns false.
 */
export function finishDh(out: Uint8Array, shared: Uint8Array | null): boolean {
  if (shared === null || isZero32(shared)) {
    shared?.fill(0);
    out.fill(0, 0, KEY_LEN);
    return false;
  }
  out.set(shared);
  shared.fill(0);
  return true;
}

/** Constant-time comparison of two 32-byte arrays (no early exit). */
export function equal32(a: Uint8Array, b: Uint8Array): boolean {
  let d = 0;
  for (let i = 0; i < 32; i++) d |= a[i] ^ b[i];
  return d === 0;
}

/** True when the first 32 bytes are all zero, in constant time (RFC 7748 §6.1 all-zero check). */
export function isZero32(a: Uint8Array): boolean {
  let d = 0;
  for (let i = 0; i < 32; i++) d |= a[i];
  return d === 0;
}
