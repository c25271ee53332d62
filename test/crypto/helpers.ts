/**
 * Shared helpers for the crypto tests (not a test file itself).
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { createPureBackend } from '../../src/crypto/pure.js';

/** All backends, for describe.each: every vector runs against each. */
export const BACKENDS: ReadonlyArray<readonly [string, () => CryptoBackend]> = [
  ['node', () => createNodeBackend()],
  ['openssl', () => createOpensslBackend()],
  // The openssl backend's fallback when the native BLAKE2s addon is not built: EVP hashing.
  ['openssl-evphash', () => createOpensslBackend({ nativeHash: false })],
  // Its X25519 fallback when the addon's ladder is not usable: EVP_PKEY through koffi.
  ['openssl-evpx25519', () => createOpensslBackend({ nativeX25519: false })],
  ['pure', () => createPureBackend()],
];

/** Hex (whitespace, ':' allowed between digits) to bytes. */
export function hex(text: string): Uint8Array {
  const t = text.replace(/[\s:]/g, '');
  if (t.length % 2 !== 0 || /[^0-9a-fA-F]/.test(t)) throw new Error(`bad hex in test vector: ${text}`);
  const out = new Uint8Array(t.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(t.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

/** Bytes 0, 1, 2, … (mod 256), the input pattern of the BLAKE2 reference test vectors. */
export function sequence(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = i & 0xff;
  return out;
}

/**
 * Deterministic byte generator (mulberry32) so that "random input" tests are reproducible;
 * not for keys outside tests.
 */
export function seeded(seed: number): (n: number) => Uint8Array {
  let s = seed >>> 0;
  const next = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return (n: number) => {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = next() & 0xff;
    return out;
  };
}

/** A copy of `bytes` placed at `offset` inside a larger zero-filled buffer (a view at an odd offset). */
export function placed(bytes: Uint8Array, offset: number, slack = 7): Uint8Array {
  const big = new Uint8Array(offset + bytes.length + slack);
  big.set(bytes, offset);
  return big.subarray(offset, offset + bytes.length);
}
