/**
 * The optional native BLAKE2s addon (native/weft_crypto.c, built with weft_io by `npm ci` /
 * `node native/build.mjs`): hash, MAC, HMAC-BLAKE2s and WireGuard's whole KDF_n, each one N-API
 * call. The 'openssl' backend prefers it to its EVP hashing (evp-hash.ts), which needs 3-4 koffi
 * crossings per call; bench/handshake.ts measures the difference per handshake.
 *
 * Nothing is loaded on import. A missing addon, one with another ABI, or one that disagrees with
 * noble on the self-test inputs is reported as a reason string and the caller keeps EVP.
 * WEFT_NO_ADDON=1 disables it, as it does weft_io. Argument types and output sizes are checked
 * in C (TypeError/RangeError); callers still check their contract first, as with every backend.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { nobleHash, nobleHmac, nobleMac } from './pure.js';
import { HASH_LEN, MAC_LEN } from './sizes.js';

export interface NativeHash {
  readonly abi: number;
  /** out[0..32) := BLAKE2s-256(a ‖ b). */
  hash(out: Uint8Array, a: Uint8Array, b?: Uint8Array): void;
  /** out[0..16) := keyed BLAKE2s-128(key; a), key 1..32 bytes. */
  mac(out: Uint8Array, key: Uint8Array, a: Uint8Array): void;
  /** out[0..32) := HMAC-BLAKE2s(key, a ‖ b). */
  hmac(out: Uint8Array, key: Uint8Array, a: Uint8Array, b?: Uint8Array): void;
  /** WireGuard KDF_n into t1 (and t2, t3 when not null): n = number of outputs. */
  kdf(t1: Uint8Array, t2: Uint8Array | null, t3: Uint8Array | null, key: Uint8Array, input: Uint8Array): void;
}

const ABI = 1;
let cache: NativeHash | string | undefined;

/** The addon, or the reason it cannot be used. Loaded and self-tested once per thread. */
export function loadNativeHash(): NativeHash | string {
  if (cache !== undefined) return cache;
  cache = load();
  return cache;
}

function load(): NativeHash | string {
  if (process.env.WEFT_NO_ADDON === '1') return 'disabled by WEFT_NO_ADDON=1';
  // src/crypto → ../../native; dist/src/crypto → ../../../native
  const paths = ['../../native/build/Release/weft_crypto.node', '../../../native/build/Release/weft_crypto.node'].map(
    (rel) => fileURLToPath(new URL(rel, import.meta.url)),
  );
  const path = paths.find((p) => existsSync(p));
  if (path === undefined)
    return 'native/build/Release/weft_crypto.node not found; build it with `node native/build.mjs`';
  let mod: NativeHash;
  try {
    mod = createRequire(import.meta.url)(path) as NativeHash;
  } catch (e) {
    return `${path}: ${(e as Error).message}`;
  }
  if (mod.abi !== ABI)
    return `${path} has ABI ${String(mod.abi)}, expected ${ABI}; rebuild with \`node native/build.mjs\``;
  return selfTest(mod) ?? mod;
}

/** Compares with noble around the 64-byte block boundary, several key lengths, and a KDF3. */
function selfTest(n: NativeHash): string | null {
  const a = new Uint8Array(HASH_LEN);
  const b = new Uint8Array(HASH_LEN);
  const same = (len: number): boolean => a.subarray(0, len).every((x, i) => x === b[i]);
  for (const len of [0, 3, 63, 64, 65, 148]) {
    const msg = Uint8Array.from({ length: len }, (_, i) => (i * 7 + len) & 0xff);
    n.hash(a, msg.subarray(0, len >> 1), msg.subarray(len >> 1));
    nobleHash(b, [msg]);
    if (!same(HASH_LEN)) return `weft_crypto BLAKE2s disagrees with noble for a ${len}-byte input`;
    for (const keyLen of [1, 32]) {
      const key = Uint8Array.from({ length: keyLen }, (_, i) => (i * 13 + 1) & 0xff);
      n.mac(a, key, msg);
      nobleMac(b, key, [msg]);
      if (!same(MAC_LEN)) return `weft_crypto MAC disagrees with noble (key ${keyLen} B, input ${len} B)`;
    }
    for (const keyLen of [0, 32, 64, 65]) {
      const key = Uint8Array.from({ length: keyLen }, (_, i) => (i * 5 + 3) & 0xff);
      n.hmac(a, key, msg);
      nobleHmac(b, key, [msg]);
      if (!same(HASH_LEN)) return `weft_crypto HMAC-BLAKE2s disagrees with noble (key ${keyLen} B, input ${len} B)`;
    }
  }
  // KDF3 against its definition (kdf.ts) on noble's HMAC.
  const key = Uint8Array.from({ length: 32 }, (_, i) => i);
  const input = Uint8Array.from({ length: 32 }, (_, i) => 255 - i);
  const t = [new Uint8Array(32), new Uint8Array(32), new Uint8Array(32)];
  n.kdf(t[0], t[1], t[2], key, input);
  const tau0 = new Uint8Array(32);
  nobleHmac(tau0, key, [input]);
  nobleHmac(b, tau0, [Uint8Array.of(1)]);
  for (let i = 0; i < 3; i++) {
    if (i > 0) nobleHmac(b, tau0, [b.slice(), Uint8Array.of(i + 1)]);
    a.set(t[i]);
    if (!same(HASH_LEN)) return `weft_crypto KDF disagrees with HKDF over noble's HMAC at output ${i + 1}`;
  }
  return null;
}
