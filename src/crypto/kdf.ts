/**
 * WireGuard's key derivation function (whitepaper §5.4 "KDF_n"): HKDF (RFC 5869) with
 * HMAC-BLAKE2s, extracting τ0 := HMAC(key, input) and expanding
 *   τ1 := HMAC(τ0, 0x1),  τi := HMAC(τ0, τ(i-1) ‖ i),
 * returning (τ1, …, τn) for n = 1, 2, 3.
 *
 * Contracts:
 * - Outputs are caller-owned arrays; each receives 32 bytes at [0, 32). Nothing is allocated
 *   except the rest-argument arrays of the backend's hmac() calls.
 * - An output may be the same array as `key` or `input` (C := KDF1(C, x) is the common case):
 *   both are fully consumed into τ0 before any output is written. Outputs must be distinct arrays.
 * - `key` may have any length (HMAC hashes keys longer than the 64-byte block, RFC 2104 §2);
 *   WireGuard always passes a 32-byte chaining key.
 * - τ0 lives in a module scratch array that is wiped before returning. The functions are
 *   synchronous, so the scratch is never shared by two derivations at once within a thread.
 */
import type { CryptoBackend } from './backend.js';
import { assertOutput } from './assert.js';
import { HASH_LEN } from './sizes.js';

const TAU0 = new Uint8Array(HASH_LEN);
const ONE = Uint8Array.of(0x1);
const TWO = Uint8Array.of(0x2);
const THREE = Uint8Array.of(0x3);

/** The first 32 bytes of an output (a view only when the caller passed a longer array). */
function first32(a: Uint8Array): Uint8Array {
  return a.length === HASH_LEN ? a : a.subarray(0, HASH_LEN);
}

function extract(backend: CryptoBackend, key: Uint8Array, input: Uint8Array): void {
  backend.hmac(TAU0, key, input);
}

/** (τ1) := KDF1(key, input). */
export function kdf1(backend: CryptoBackend, t1: Uint8Array, key: Uint8Array, input: Uint8Array): void {
  assertOutput(t1, HASH_LEN, 'kdf output t1');
  if (backend.kdf !== undefined) return backend.kdf(t1, null, null, key, input);
  extract(backend, key, input);
  backend.hmac(t1, TAU0, ONE);
  TAU0.fill(0);
}

/** (τ1, τ2) := KDF2(key, input). */
export function kdf2(backend: CryptoBackend, t1: Uint8Array, t2: Uint8Array, key: Uint8Array, input: Uint8Array): void {
  assertOutput(t1, HASH_LEN, 'kdf output t1');
  assertOutput(t2, HASH_LEN, 'kdf output t2');
  if (t1 === t2) throw new RangeError('kdf2 outputs t1 and t2 must be different arrays');
  if (backend.kdf !== undefined) return backend.kdf(t1, t2, null, key, input);
  extract(backend, key, input);
  backend.hmac(t1, TAU0, ONE);
  backend.hmac(t2, TAU0, first32(t1), TWO);
  TAU0.fill(0);
}

/** (τ1, τ2, τ3) := KDF3(key, input). */
export function kdf3(
  backend: CryptoBackend,
  t1: Uint8Array,
  t2: Uint8Array,
  t3: Uint8Array,
  key: Uint8Array,
  input: Uint8Array,
): void {
  assertOutput(t1, HASH_LEN, 'kdf output t1');
  assertOutput(t2, HASH_LEN, 'kdf output t2');
  assertOutput(t3, HASH_LEN, 'kdf output t3');
  if (t1 === t2 || t1 === t3 || t2 === t3) throw new RangeError('kdf3 outputs t1, t2 and t3 must be different arrays');
  if (backend.kdf !== undefined) return backend.kdf(t1, t2, t3, key, input);
  extract(backend, key, input);
  backend.hmac(t1, TAU0, ONE);
  backend.hmac(t2, TAU0, first32(t1), TWO);
  backend.hmac(t3, TAU0, first32(t2), THREE);
  TAU0.fill(0);
}
