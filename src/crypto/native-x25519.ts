/**
 * X25519 from the native addon (loaded with the BLAKE2s functions by native-hash.ts), one N-API
 * call each and no key import or context per call. DH runs OpenSSL's own ossl_x25519 found in
 * Node's binary (mulx/adx assembly on x86-64) when the addon's load-time self-test accepts it
 * (native/weft_crypto.c: RFC 7748 vectors, low-order points, 64 random pairs against the C
 * ladder), else the addon's RFC 7748 ladder (native/weft_x25519.c); `impl` says which. Public
 * keys use the addon's Edwards fixed-base table (faster than OpenSSL's, measured). The 'openssl' backend prefers it
 * to EVP_PKEY through koffi (evp-x25519.ts), which prefers node:crypto's KeyObjects (node.ts).
 *
 * Nothing is loaded on import. An addon built before X25519 was added, or one that fails the
 * RFC 7748 §5.2/§6.1 self-test or accepts a low-order point, is reported as a reason string and
 * the caller keeps the next choice. Argument types and lengths are checked in C (TypeError /
 * RangeError); callers check their contract first, as with every backend.
 */
import { equal32 } from './assert.js';
import { loadNativeHash } from './native-hash.js';
import { KEY_LEN } from './sizes.js';

export interface NativeX25519 {
  /** out[0..32) := X25519(scalar, u); false and out zeroed when the result is all zeros. */
  x25519(out: Uint8Array, scalar: Uint8Array, u: Uint8Array): boolean;
  /** out[0..32) := X25519(scalar, 9), through the fixed-base table. */
  x25519Base(out: Uint8Array, scalar: Uint8Array): void;
  /** As x25519, always through the addon's own C ladder (the fallback; tests and benchmarks). */
  x25519Ladder(out: Uint8Array, scalar: Uint8Array, u: Uint8Array): boolean;
  /** Which X25519 x25519() runs, for `weft show` and benchmark output. */
  readonly impl: string;
  /** Why OpenSSL's ossl_x25519 is not used (null when it is). */
  readonly osslReason: string | null;
}

let cache: NativeX25519 | string | undefined;

/** The addon's X25519, or the reason it cannot be used. Loaded and self-tested once per thread. */
export function loadNativeX25519(): NativeX25519 | string {
  cache ??= load();
  return cache;
}

function load(): NativeX25519 | string {
  const n = loadNativeHash();
  if (typeof n === 'string') return n;
  const mod = n as unknown as Partial<NativeX25519> & { x25519Impl?: unknown; x25519OsslReason?: unknown };
  if (
    typeof mod.x25519 !== 'function' ||
    typeof mod.x25519Base !== 'function' ||
    typeof mod.x25519Ladder !== 'function' ||
    typeof mod.x25519Impl !== 'string'
  ) {
    return 'the native addon has no X25519 or no ossl_x25519 selection (built from older sources); rebuild with `node native/build.mjs`';
  }
  const x: NativeX25519 = {
    x25519: mod.x25519,
    x25519Base: mod.x25519Base,
    x25519Ladder: mod.x25519Ladder,
    impl: mod.x25519Impl,
    osslReason: typeof mod.x25519OsslReason === 'string' ? mod.x25519OsslReason : null,
  };
  // Both DH paths must pass: the ladder is the fallback and the cross-check of ossl_x25519.
  return selfTest(x, x.x25519) ?? selfTest(x, x.x25519Ladder) ?? x;
}

function hex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** RFC 7748 §5.2 vector 2 (top bit of u set), §6.1 (both public keys, the shared secret), u = 0. */
function selfTest(x: NativeX25519, dh: NativeX25519['x25519']): string | null {
  const out = new Uint8Array(KEY_LEN);
  if (
    !dh(
      out,
      hex('4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d'),
      hex('e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493'),
    ) ||
    !equal32(out, hex('95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957'))
  ) {
    return 'weft_crypto X25519 disagrees with RFC 7748 §5.2';
  }
  const alice = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
  const bob = hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb');
  const bobPub = hex('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
  x.x25519Base(out, alice);
  if (!equal32(out, hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a'))) {
    return 'weft_crypto X25519 fixed-base public key disagrees with RFC 7748 §6.1';
  }
  x.x25519Base(out, bob);
  if (!equal32(out, bobPub)) return 'weft_crypto X25519 fixed-base public key disagrees with RFC 7748 §6.1';
  if (
    !dh(out, alice, bobPub) ||
    !equal32(out, hex('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742'))
  ) {
    return 'weft_crypto X25519 disagrees with RFC 7748 §6.1';
  }
  if (dh(out, alice, new Uint8Array(KEY_LEN))) return 'weft_crypto X25519 accepted a low-order point';
  return null;
}
