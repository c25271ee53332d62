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
 * The argument checks of seal()/xseal() (CryptoBackend contract): a 32-byte key, a nonce of
 * `nonceLen` bytes, `ad` null or bytes, the src span, and a dst span with room for the tag.
 */
export function assertSealArgs(
  key: Uint8Array,
  nonce: Uint8Array,
  nonceLen: number,
  ad: Uint8Array | null,
  src: Uint8Array,
  srcOff: number,
  len: number,
  dst: Uint8Array,
  dstOff: number,
): void {
  assertOpenArgs(key, nonce, nonceLen, ad, src, srcOff, len);
  assertSpan(dst, dstOff, len + TAG_LEN, 'dst');
}

/**
 * The argument checks of open()/xopen() that come before the length test: key, nonce, ad and
 * the src span. The caller checks the dst span (len - TAG_LEN bytes) only once `len` holds a tag,
 * because a message too short for one is bad input (open returns false), not misuse.
 */
export function assertOpenArgs(
  key: Uint8Array,
  nonce: Uint8Array,
  nonceLen: number,
  ad: Uint8Array | null,
  src: Uint8Array,
  srcOff: number,
  len: number,
): void {
  assertBytes(key, KEY_LEN, 'key');
  assertBytes(nonce, nonceLen, 'nonce');
  assertAd(ad);
  assertSpan(src, srcOff, len, 'src');
}

/** Every argument check of open()/xopen(): false when `len` cannot hold a tag (bad input), else the dst span is checked too. */
export function openArgsHoldTag(
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
  assertOpenArgs(key, nonce, nonceLen, ad, src, srcOff, len);
  if (len < TAG_LEN) return false;
  assertSpan(dst, dstOff, len - TAG_LEN, 'dst');
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
