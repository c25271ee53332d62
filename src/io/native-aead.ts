/**
 * A CryptoBackend whose in-place ChaCha20-Poly1305 without associated data — exactly what
 * WireGuard transport messages use (whitepaper §5.4.6) — runs in the native I/O addon
 * (native/weft_aead.c: the OpenSSL inside the running Node — its ChaCha20 and Poly1305 assembly,
 * else its EVP interface — one N-API call per packet) instead of through koffi (five FFI calls
 * and two views per packet). Besides the per-packet cost this matters when the tunnel is idle:
 * the first EVP seal after a pause runs from cold caches and costs tens of microseconds, the
 * composed primitives about half of that (measured in native/weft_aead.c's notes). Everything else (handshake
 * AEAD with associated data, XChaCha, hashing, X25519, randomness) is the base backend's.
 *
 * Measured where it matters: bench/tunnel.ts and bench/history/2026.md ("Tunnel").
 *
 * Contracts: the same as CryptoBackend's (src/crypto/backend.ts). API misuse (wrong key or
 * nonce length, span outside the buffer) throws from the addon as TypeError/RangeError; a bad tag
 * returns false with the plaintext span zeroed. Nothing is allocated per call.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { loadNativeIo, type NativeIo } from './native.js';

type AeadFn = (key: Uint8Array, nonce: Uint8Array, buf: Uint8Array, off: number, len: number) => number;

/**
 * `base` with transport AEAD in the addon, or `base` itself (and the reason) when the addon or
 * its OpenSSL symbols are unavailable, or when the addon disagrees with `base` on a self-test.
 */
export function withNativeAead(
  base: CryptoBackend,
  native: NativeIo | null = loadNativeIo(),
): { backend: CryptoBackend; reason: string | null } {
  if (native === null) return { backend: base, reason: 'the native I/O addon is not available' };
  const { aeadAvailable, aeadSeal, aeadOpen } = native;
  if (typeof aeadAvailable !== 'function' || typeof aeadSeal !== 'function' || typeof aeadOpen !== 'function') {
    return {
      backend: base,
      reason: 'the native I/O addon predates aeadSeal/aeadOpen; rebuild it with `node native/build.mjs`',
    };
  }
  if (aeadAvailable() === false)
    return { backend: base, reason: 'OpenSSL ChaCha20-Poly1305 symbols not found in this Node' };
  const seal = aeadSeal as AeadFn;
  const open = aeadOpen as AeadFn;
  const mismatch = selfTest(base, seal, open);
  if (mismatch !== null) return { backend: base, reason: mismatch };
  const backend: CryptoBackend = {
    ...base,
    seal(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      if (src !== dst || srcOff !== dstOff || (ad !== null && ad.length > 0))
        return base.seal(key, nonce, ad, src, srcOff, len, dst, dstOff);
      if (seal(key, nonce, dst, dstOff, len) !== 1) throw new Error('OpenSSL ChaCha20-Poly1305 seal failed'); // not reachable from network input
      return len + 16;
    },
    open(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      if (src !== dst || srcOff !== dstOff || (ad !== null && ad.length > 0))
        return base.open(key, nonce, ad, src, srcOff, len, dst, dstOff);
      if (len < 16) return false;
      return open(key, nonce, dst, dstOff, len) === 1;
    },
  };
  return { backend, reason: null };
}

/** The addon must produce the base backend's bytes and reject a flipped bit; null when it does. */
function selfTest(base: CryptoBackend, seal: AeadFn, open: AeadFn): string | null {
  const key = new Uint8Array(32);
  const nonce = new Uint8Array(12);
  for (let i = 0; i < 32; i++) key[i] = 0x80 + i;
  nonce[4] = 7;
  nonce[11] = 0x42;
  for (const len of [0, 1, 63, 64, 65, 1420]) {
    const a = new Uint8Array(len + 16 + 3);
    for (let i = 0; i < len; i++) a[3 + i] = (i * 29 + len) & 0xff;
    const b = a.slice();
    base.seal(key, nonce, null, a, 3, len, a, 3);
    if (seal(key, nonce, b, 3, len) !== 1) return `native seal failed at ${len} bytes`;
    for (let i = 0; i < a.length; i++)
      if (a[i] !== b[i]) return `native seal differs from ${base.name} at ${len} bytes`;
    if (open(key, nonce, b, 3, len + 16) !== 1) return `native open rejects its own ${len}-byte message`;
    for (let i = 0; i < len; i++)
      if (b[3 + i] !== ((i * 29 + len) & 0xff)) return `native open returns wrong plaintext at ${len} bytes`;
    a[3 + len] ^= 1; // first tag byte
    if (open(key, nonce, a, 3, len + 16) !== 0) return `native open accepts a forged ${len}-byte message`;
  }
  return null;
}
