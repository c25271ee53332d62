/**
 * BLAKE2s-256, HMAC-BLAKE2s and keyed BLAKE2s-128 (WireGuard's HASH, HMAC and MAC, whitepaper
 * §5.4) through OpenSSL 3's EVP_MD / EVP_MAC functions, called with koffi (ffi.ts). Used by the
 * 'openssl' backend; bench/crypto.ts measures it against node:crypto and noble:
 * node:crypto has no keyed BLAKE2s at all (noble does it, several times slower), and its
 * createHash/createHmac objects cost more than the hashing itself for handshake-sized inputs.
 *
 * Contexts (one EVP_MD_CTX, one HMAC and one BLAKE2SMAC EVP_MAC_CTX) are created once and
 * re-initialised per call; outputs are written by OpenSSL straight into the caller's array (no
 * scratch, no copy). Inputs are fully absorbed before the output is written, so `out` may alias
 * an input part. OpenSSL's HMAC refuses an empty key, so hmac() with a zero-length key is
 * delegated to `fallbackHmac` (WireGuard never uses one; the KDF test vectors do).
 *
 * Availability is all-or-nothing and checked by createEvpHashing(): every function must bind
 * and agree with noble on a few inputs, else it returns the reason and the caller keeps its
 * node:crypto/noble implementations.
 */
import { assertOutput, assertParts } from './assert.js';
import { processLibrary } from './ffi.js';
import { nobleHash, nobleHmac, nobleMac } from './pure.js';
import { BLAKE2S_MAX_KEY_LEN, HASH_LEN, MAC_LEN } from './sizes.js';

/** OSSL_PARAM data types (include/openssl/core.h). */
const OSSL_PARAM_UNSIGNED_INTEGER = 2;
const OSSL_PARAM_UTF8_STRING = 4;

type Ptr = unknown;
type Parts = readonly Uint8Array[];

export interface EvpHashing {
  hash(out: Uint8Array, parts: Parts): void;
  mac(out: Uint8Array, key: Uint8Array, parts: Parts): void;
  hmac(out: Uint8Array, key: Uint8Array, parts: Parts): void;
  dispose(): void;
}

/**
 * Builds the EVP hashing functions, or returns why it cannot (missing symbols, OpenSSL without
 * EVP_MAC or BLAKE2SMAC, or a self-test mismatch against noble).
 */
export function createEvpHashing(
  fallbackHmac: (out: Uint8Array, key: Uint8Array, parts: Parts) => void,
): EvpHashing | string {
  const p = processLibrary();
  if (typeof p === 'string') return p;
  const { koffi, lib } = p;
  let made: EvpHashing;
  try {
    const param = koffi.struct({
      key: 'const char *',
      data_type: 'uint',
      data: 'void *',
      data_size: 'size_t',
      return_size: 'size_t',
    });
    const f = <T>(decl: string): T => lib.func(decl) as unknown as T;
    const mdCtxNew = f<() => Ptr>('void *EVP_MD_CTX_new()');
    const mdCtxFree = f<(ctx: Ptr) => void>('void EVP_MD_CTX_free(void *ctx)');
    const blake2s256 = f<() => Ptr>('void *EVP_blake2s256()');
    const digestInit = f<(ctx: Ptr, md: Ptr, impl: null) => number>(
      'int EVP_DigestInit_ex(void *ctx, void *type, void *impl)',
    );
    const digestUpdate = f<(ctx: Ptr, d: Uint8Array, n: number) => number>(
      'int EVP_DigestUpdate(void *ctx, const uint8_t *d, size_t cnt)',
    );
    const digestFinal = f<(ctx: Ptr, md: Uint8Array, s: Uint32Array) => number>(
      'int EVP_DigestFinal_ex(void *ctx, uint8_t *md, uint32_t *s)',
    );
    const macFetch = f<(libctx: null, alg: string, props: null) => Ptr>(
      'void *EVP_MAC_fetch(void *libctx, const char *algorithm, const char *properties)',
    );
    const macFree = f<(mac: Ptr) => void>('void EVP_MAC_free(void *mac)');
    const macCtxNew = f<(mac: Ptr) => Ptr>('void *EVP_MAC_CTX_new(void *mac)');
    const macCtxFree = f<(ctx: Ptr) => void>('void EVP_MAC_CTX_free(void *ctx)');
    const macSetParams = lib.func('EVP_MAC_CTX_set_params', 'int', ['void *', koffi.pointer(param)]) as unknown as (
      ctx: Ptr,
      params: object[],
    ) => number;
    const macInit = f<(ctx: Ptr, key: Uint8Array, keylen: number, params: null) => number>(
      'int EVP_MAC_init(void *ctx, const uint8_t *key, size_t keylen, void *params)',
    );
    const macUpdate = f<(ctx: Ptr, d: Uint8Array, n: number) => number>(
      'int EVP_MAC_update(void *ctx, const uint8_t *data, size_t datalen)',
    );
    const macFinal = f<(ctx: Ptr, out: Uint8Array, outl: BigUint64Array, outsize: number) => number>(
      'int EVP_MAC_final(void *ctx, uint8_t *out, size_t *outl, size_t outsize)',
    );

    const md = blake2s256();
    const hmacAlg = macFetch(null, 'HMAC', null);
    const b2mac = macFetch(null, 'BLAKE2SMAC', null);
    if (md === null || hmacAlg === null || b2mac === null) throw new Error('OpenSSL lacks BLAKE2s, HMAC or BLAKE2SMAC');
    const mdCtx = mdCtxNew();
    const hmacCtx = macCtxNew(hmacAlg);
    const b2Ctx = macCtxNew(b2mac);
    // The contexts hold their own references to the algorithms.
    macFree(hmacAlg);
    macFree(b2mac);
    if (mdCtx === null || hmacCtx === null || b2Ctx === null)
      throw new Error('OpenSSL could not allocate a digest or MAC context');
    const end = { key: null, data_type: 0, data: null, data_size: 0, return_size: 0 };
    const digestName = new TextEncoder().encode('BLAKE2S-256\0');
    if (
      macSetParams(hmacCtx, [
        {
          key: 'digest',
          data_type: OSSL_PARAM_UTF8_STRING,
          data: digestName,
          data_size: digestName.length - 1,
          return_size: 0,
        },
        end,
      ]) !== 1 ||
      macSetParams(b2Ctx, [
        {
          key: 'size',
          data_type: OSSL_PARAM_UNSIGNED_INTEGER,
          data: new BigUint64Array([BigInt(MAC_LEN)]),
          data_size: 8,
          return_size: 0,
        },
        end,
      ]) !== 1
    ) {
      throw new Error('OpenSSL rejected the HMAC digest or BLAKE2SMAC size parameter');
    }
    const mdLen = new Uint32Array(1);
    const macLen = new BigUint64Array(1);
    const check = (ok: number, what: string): void => {
      if (ok !== 1) throw new Error(`OpenSSL ${what} failed`); // never caused by input bytes
    };

    made = {
      hash(out, parts) {
        assertOutput(out, HASH_LEN, 'hash output');
        assertParts(parts);
        check(digestInit(mdCtx, md, null), 'EVP_DigestInit_ex');
        for (let i = 0; i < parts.length; i++)
          check(digestUpdate(mdCtx, parts[i], parts[i].length), 'EVP_DigestUpdate');
        check(digestFinal(mdCtx, out, mdLen), 'EVP_DigestFinal_ex');
      },
      mac(out, key, parts) {
        assertOutput(out, MAC_LEN, 'mac output');
        if (!(key instanceof Uint8Array) || key.length < 1 || key.length > BLAKE2S_MAX_KEY_LEN) {
          throw new RangeError(`mac key must be 1..${BLAKE2S_MAX_KEY_LEN} bytes`);
        }
        assertParts(parts);
        check(macInit(b2Ctx, key, key.length, null), 'EVP_MAC_init(BLAKE2SMAC)');
        for (let i = 0; i < parts.length; i++) check(macUpdate(b2Ctx, parts[i], parts[i].length), 'EVP_MAC_update');
        check(macFinal(b2Ctx, out, macLen, MAC_LEN), 'EVP_MAC_final');
      },
      hmac(out, key, parts) {
        assertOutput(out, HASH_LEN, 'hmac output');
        if (!(key instanceof Uint8Array)) throw new TypeError('hmac key must be a Uint8Array');
        if (key.length === 0) {
          fallbackHmac(out, key, parts);
          return;
        }
        assertParts(parts);
        check(macInit(hmacCtx, key, key.length, null), 'EVP_MAC_init(HMAC)');
        for (let i = 0; i < parts.length; i++) check(macUpdate(hmacCtx, parts[i], parts[i].length), 'EVP_MAC_update');
        check(macFinal(hmacCtx, out, macLen, HASH_LEN), 'EVP_MAC_final');
      },
      dispose() {
        mdCtxFree(mdCtx);
        macCtxFree(hmacCtx);
        macCtxFree(b2Ctx);
      },
    };
  } catch (e) {
    return `OpenSSL EVP hashing is not usable: ${(e as Error).message}`;
  }
  const mismatch = selfTest(made);
  if (mismatch !== null) {
    made.dispose();
    return mismatch;
  }
  return made;
}

/** Compares against noble on inputs around the 64-byte block boundary and several key lengths. */
function selfTest(h: EvpHashing): string | null {
  const a = new Uint8Array(HASH_LEN);
  const b = new Uint8Array(HASH_LEN);
  const same = (n: number): boolean => {
    for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
    return true;
  };
  for (const len of [0, 3, 64, 65, 148]) {
    const msg = Uint8Array.from({ length: len }, (_, i) => (i * 7 + len) & 0xff);
    h.hash(a, [msg]);
    nobleHash(b, [msg]);
    if (!same(HASH_LEN)) return `EVP BLAKE2s-256 disagrees with noble for a ${len}-byte input`;
    for (const keyLen of [1, 32]) {
      const key = Uint8Array.from({ length: keyLen }, (_, i) => (i * 13 + 1) & 0xff);
      h.mac(a, key, [msg]);
      nobleMac(b, key, [msg]);
      if (!same(MAC_LEN)) return `EVP BLAKE2SMAC disagrees with noble (key ${keyLen} B, input ${len} B)`;
    }
    for (const keyLen of [1, 32, 64, 65]) {
      const key = Uint8Array.from({ length: keyLen }, (_, i) => (i * 5 + 3) & 0xff);
      h.hmac(a, key, [msg]);
      nobleHmac(b, key, [msg]);
      if (!same(HASH_LEN)) return `EVP HMAC-BLAKE2s disagrees with noble (key ${keyLen} B, input ${len} B)`;
    }
  }
  return null;
}
