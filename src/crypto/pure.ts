/**
 * The 'pure' crypto backend: JavaScript only (@noble/ciphers, @noble/hashes, @noble/curves), no
 * node:crypto. It runs wherever the node backend cannot (no OpenSSL, or OpenSSL without
 * ChaCha20-Poly1305/X25519) and serves as the independent implementation the tests compare the
 * OpenSSL-based backends against. It is the slowest (bench/crypto.ts), so 'auto' picks it last.
 *
 * Buffers and allocation (contract of CryptoBackend in backend.ts):
 * - seal/open/xseal/xopen pass views of the caller's buffers to noble with noble's `output`
 *   argument, so ciphertext and plaintext are written straight into `dst` with no copy of the
 *   payload. In place (src === dst, same offset) and overlapping spans work: noble copies the
 *   input into the output region first (TypedArray.set copes with overlap) and then XORs the
 *   keystream over it.
 *   Still allocated per call by noble: the cipher object and its closures, the Poly1305 state
 *   and tag, and two subarray views made here. noble has no API that avoids these.
 * - open authenticates before it decrypts (noble checks the tag first), so on failure `dst` is
 *   left untouched and the call returns false.
 * - hash/mac/hmac finish into a 4-byte-aligned scratch array (noble's digestInto requires
 *   alignment) and copy to `out`, so `out` may be any view, including one that aliases an input.
 */
import { chacha20poly1305, xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { blake2s } from '@noble/hashes/blake2.js';
import { hmac } from '@noble/hashes/hmac.js';
import { x25519 } from '@noble/curves/ed25519.js';
import type { AeadOpen, AeadSeal, CryptoBackend } from './backend.js';
import { assertBytes, checkAeadArgs, assertOutput, assertParts, finishDh } from './assert.js';
import { BLAKE2S_MAX_KEY_LEN, HASH_LEN, KEY_LEN, MAC_LEN, NONCE_LEN, TAG_LEN, XNONCE_LEN } from './sizes.js';
import { randomPrivateKey } from './keys.js';
import { CryptoBackendError } from './errors.js';

/** Web Crypto getRandomValues throws QuotaExceededError above 65536 bytes per call. */
const RANDOM_CHUNK = 65536;

type AeadFactory = (
  key: Uint8Array,
  nonce: Uint8Array,
  aad?: Uint8Array,
) => {
  encrypt(data: Uint8Array, output?: Uint8Array): Uint8Array;
  decrypt(data: Uint8Array, output?: Uint8Array): Uint8Array;
};

interface RandomSource {
  getRandomValues<T extends ArrayBufferView>(array: T): T;
}

function webRandom(): RandomSource | null {
  const c = (globalThis as { crypto?: Partial<RandomSource> }).crypto;
  return c !== undefined && typeof c.getRandomValues === 'function' ? (c as RandomSource) : null;
}

/** seal() with a noble AEAD and its nonce length. */
const sealWith =
  (aead: AeadFactory, nonceLen: number): AeadSeal =>
  (key, nonce, ad, src, srcOff, len, dst, dstOff) => {
    checkAeadArgs(false, key, nonce, nonceLen, ad, src, srcOff, len, dst, dstOff);
    aead(key, nonce, ad ?? undefined).encrypt(
      src.subarray(srcOff, srcOff + len),
      dst.subarray(dstOff, dstOff + len + TAG_LEN),
    );
    return len + TAG_LEN;
  };

/** open() with a noble AEAD and its nonce length. */
const openWith =
  (aead: AeadFactory, nonceLen: number): AeadOpen =>
  (key, nonce, ad, src, srcOff, len, dst, dstOff) => {
    if (!checkAeadArgs(true, key, nonce, nonceLen, ad, src, srcOff, len, dst, dstOff)) return false;
    const cipher = aead(key, nonce, ad ?? undefined);
    try {
      // Arguments were validated above, so the only error left is noble's 'invalid tag'.
      cipher.decrypt(src.subarray(srcOff, srcOff + len), dst.subarray(dstOff, dstOff + len - TAG_LEN));
      return true;
    } catch {
      return false;
    }
  };

// Scratch for hash/mac/hmac digests: noble's digestInto wants a 4-byte-aligned array. Module
// level is safe because every function here is synchronous (one use at a time per thread).
const DIGEST = new Uint8Array(HASH_LEN);

/** BLAKE2s-256 of the concatenated parts into out[0..32) with noble (CryptoBackend.hash). */
export function nobleHash(out: Uint8Array, parts: readonly Uint8Array[]): void {
  assertOutput(out, HASH_LEN, 'hash output');
  assertParts(parts);
  const h = blake2s.create();
  for (let i = 0; i < parts.length; i++) h.update(parts[i]);
  h.digestInto(DIGEST);
  out.set(DIGEST);
  DIGEST.fill(0);
}

/** Keyed BLAKE2s with a 16-byte digest into out[0..16) with noble (CryptoBackend.mac). */
export function nobleMac(out: Uint8Array, key: Uint8Array, parts: readonly Uint8Array[]): void {
  assertOutput(out, MAC_LEN, 'mac output');
  if (!(key instanceof Uint8Array) || key.length < 1 || key.length > BLAKE2S_MAX_KEY_LEN) {
    throw new RangeError(`mac key must be 1..${BLAKE2S_MAX_KEY_LEN} bytes`);
  }
  assertParts(parts);
  const h = blake2s.create({ key, dkLen: MAC_LEN });
  for (let i = 0; i < parts.length; i++) h.update(parts[i]);
  h.digestInto(DIGEST);
  out.set(DIGEST.subarray(0, MAC_LEN));
  DIGEST.fill(0);
}

/** HMAC-BLAKE2s-256 into out[0..32) with noble (CryptoBackend.hmac). */
export function nobleHmac(out: Uint8Array, key: Uint8Array, parts: readonly Uint8Array[]): void {
  assertOutput(out, HASH_LEN, 'hmac output');
  if (!(key instanceof Uint8Array)) throw new TypeError('hmac key must be a Uint8Array');
  assertParts(parts);
  const h = hmac.create(blake2s, key);
  for (let i = 0; i < parts.length; i++) h.update(parts[i]);
  h.digestInto(DIGEST);
  out.set(DIGEST);
  DIGEST.fill(0);
}

/**
 * Creates the noble-only backend. Throws CryptoBackendError if the runtime has no
 * globalThis.crypto.getRandomValues (needed for key generation).
 */
export function createPureBackend(): CryptoBackend {
  const random = webRandom();
  if (random === null) {
    throw new CryptoBackendError(
      'pure crypto backend needs globalThis.crypto.getRandomValues, which this runtime lacks',
    );
  }
  function randomFill(out: Uint8Array): void {
    assertOutput(out, 0, 'randomFill output');
    for (let off = 0; off < out.length; off += RANDOM_CHUNK) {
      random!.getRandomValues(out.subarray(off, Math.min(out.length, off + RANDOM_CHUNK)));
    }
  }

  return {
    name: 'pure',
    seal: sealWith(chacha20poly1305, NONCE_LEN),
    open: openWith(chacha20poly1305, NONCE_LEN),
    xseal: sealWith(xchacha20poly1305, XNONCE_LEN),
    xopen: openWith(xchacha20poly1305, XNONCE_LEN),

    hash(out, ...parts) {
      nobleHash(out, parts);
    },

    mac(out, key, ...parts) {
      nobleMac(out, key, parts);
    },

    hmac(out, key, ...parts) {
      nobleHmac(out, key, parts);
    },

    dh(out, privateKey, publicKey) {
      assertOutput(out, KEY_LEN, 'dh output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      assertBytes(publicKey, KEY_LEN, 'public key');
      let shared: Uint8Array | null = null;
      try {
        shared = x25519.getSharedSecret(privateKey, publicKey);
      } catch {
        // noble throws for the low-order points (whose result would be all zero) before running
        // the ladder; lengths were checked above, so that is the only error left.
      }
      return finishDh(out, shared);
    },

    publicKey(out, privateKey) {
      assertOutput(out, KEY_LEN, 'public key output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      out.set(x25519.getPublicKey(privateKey));
    },

    generatePrivateKey() {
      return randomPrivateKey(randomFill);
    },

    randomFill,
  };
}
