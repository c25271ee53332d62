/**
 * X25519 through OpenSSL's EVP_PKEY functions, called directly through koffi (ffi.ts) on the
 * OpenSSL inside Node, for the 'openssl' backend. node:crypto's route (node.ts) imports keys as
 * JWK KeyObjects and builds a JS object per derivation; its overhead, not the curve arithmetic,
 * was most of a handshake (profile in bench/history/2026.md). Here:
 *
 * - dh(): the public key becomes an EVP_PKEY with EVP_PKEY_new_raw_public_key (no arithmetic),
 *   is set as the peer of the private key's cached derive context (EVP_PKEY_derive_set_peer_ex
 *   with validation off: X25519 accepts every 32-byte string, RFC 7748 §5) and EVP_PKEY_derive
 *   writes the secret straight into a scratch array. OpenSSL refuses an all-zero result (a
 *   low-order point), which is reported as false, as the other backends do.
 * - publicKey(): EVP_PKEY_new_raw_private_key computes the public half (OpenSSL's fixed-base
 *   table, much cheaper than a ladder) and EVP_PKEY_get_raw_public_key reads it.
 * - Private keys: an imported private EVP_PKEY and its derive context are cached per key array
 *   (the device's static key, each peer's ephemeral key array), reused only while the array
 *   holds the same bytes: an ephemeral key is imported once by publicKey() and then serves its
 *   one or two DHs. The cache is a bounded Map kept in LRU order: an evicted or replaced
 *   entry's EVP_PKEY is freed at once (OpenSSL wipes the key material), so native memory is
 *   bounded by CACHE_SIZE entries. It keeps a copy of the key bytes, like node.ts's cache.
 *
 * Contracts: arguments are checked by the caller (openssl.ts) before they get here; nothing is
 * allocated per call on the JS side except what koffi needs for pointer results. Availability is
 * checked by createEvpX25519(): every symbol must bind and RFC 7748 §6.1 must come out right.
 */
import { equal32 } from './assert.js';
import { processLibrary } from './ffi.js';
import { KEY_LEN } from './sizes.js';

/** NID_X25519 / EVP_PKEY_X25519 (include/openssl/obj_mac.h). */
const EVP_PKEY_X25519 = 1034;
/** Private keys kept imported: the static key plus the ephemeral arrays of busy peers. */
const CACHE_SIZE = 64;

type Ptr = unknown;

export interface EvpX25519 {
  /** X25519(priv, pub) into out[0..32); false (out untouched) when OpenSSL refuses (all-zero result). */
  dh(out: Uint8Array, privateKey: Uint8Array, publicKey: Uint8Array): boolean;
  /** Public key of privateKey (clamped as X25519 does) into out[0..32). */
  publicKey(out: Uint8Array, privateKey: Uint8Array): void;
  /** Frees every cached key and context. */
  dispose(): void;
}

interface Entry {
  readonly bytes: Uint8Array;
  pkey: Ptr;
  ctx: Ptr;
}

/** RFC 7748 §6.1, for the self-test. */
const ALICE_PRIV = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
const ALICE_PUB = hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
const BOB_PUB = hex('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
const SHARED = hex('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');

function hex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Binds the EVP_PKEY functions and self-tests them, or returns why that is not possible. */
export function createEvpX25519(): EvpX25519 | string {
  const p = processLibrary();
  if (typeof p === 'string') return p;
  const { lib } = p;
  let made: EvpX25519;
  try {
    const f = <T>(decl: string): T => lib.func(decl) as unknown as T;
    const newPrivate = f<(type: number, e: null, key: Uint8Array, len: number) => Ptr>(
      'void *EVP_PKEY_new_raw_private_key(int type, void *e, const uint8_t *key, size_t len)',
    );
    const newPublic = f<(type: number, e: null, key: Uint8Array, len: number) => Ptr>(
      'void *EVP_PKEY_new_raw_public_key(int type, void *e, const uint8_t *key, size_t len)',
    );
    const getPublic = f<(pkey: Ptr, out: Uint8Array, len: BigUint64Array) => number>(
      'int EVP_PKEY_get_raw_public_key(void *pkey, uint8_t *pub, size_t *len)',
    );
    const freeKey = f<(pkey: Ptr) => void>('void EVP_PKEY_free(void *pkey)');
    const ctxNew = f<(pkey: Ptr, e: null) => Ptr>('void *EVP_PKEY_CTX_new(void *pkey, void *e)');
    const ctxFree = f<(ctx: Ptr) => void>('void EVP_PKEY_CTX_free(void *ctx)');
    const deriveInit = f<(ctx: Ptr) => number>('int EVP_PKEY_derive_init(void *ctx)');
    const setPeer = f<(ctx: Ptr, peer: Ptr, validate: number) => number>(
      'int EVP_PKEY_derive_set_peer_ex(void *ctx, void *peer, int validate_peer)',
    );
    const derive = f<(ctx: Ptr, out: Uint8Array, len: BigUint64Array) => number>(
      'int EVP_PKEY_derive(void *ctx, uint8_t *key, size_t *keylen)',
    );

    const cache = new Map<Uint8Array, Entry>();
    const len = new BigUint64Array(1);
    const secret = new Uint8Array(KEY_LEN);

    const release = (e: Entry): void => {
      ctxFree(e.ctx);
      freeKey(e.pkey);
      e.bytes.fill(0);
    };

    /** The cached (pkey, derive ctx) of `raw`, importing it when new or changed. */
    const privateEntry = (raw: Uint8Array): Entry => {
      const hit = cache.get(raw);
      if (hit !== undefined) {
        cache.delete(raw);
        if (equal32(hit.bytes, raw)) {
          cache.set(raw, hit); // most recently used last: the static key stays while peers churn
          return hit;
        }
        release(hit);
      }
      const pkey = newPrivate(EVP_PKEY_X25519, null, raw, KEY_LEN);
      if (pkey === null) throw new Error('EVP_PKEY_new_raw_private_key failed'); // not reachable from input bytes
      const ctx = ctxNew(pkey, null);
      if (ctx === null || deriveInit(ctx) !== 1) {
        if (ctx !== null) ctxFree(ctx);
        freeKey(pkey);
        throw new Error('EVP_PKEY_derive_init failed');
      }
      if (cache.size >= CACHE_SIZE) {
        const [oldKey, old] = cache.entries().next().value as [Uint8Array, Entry];
        cache.delete(oldKey);
        release(old);
      }
      const e: Entry = { bytes: raw.slice(0, KEY_LEN), pkey, ctx };
      cache.set(raw, e);
      return e;
    };

    made = {
      dh(out, privateKey, publicKey) {
        const e = privateEntry(privateKey);
        const peer = newPublic(EVP_PKEY_X25519, null, publicKey, KEY_LEN);
        if (peer === null) throw new Error('EVP_PKEY_new_raw_public_key failed');
        let ok = setPeer(e.ctx, peer, 0) === 1;
        freeKey(peer); // the context holds its own reference until the next set_peer
        if (ok) {
          len[0] = BigInt(KEY_LEN);
          ok = derive(e.ctx, secret, len) === 1 && len[0] === BigInt(KEY_LEN);
        }
        if (ok) out.set(secret);
        secret.fill(0);
        return ok;
      },
      publicKey(out, privateKey) {
        const e = privateEntry(privateKey);
        len[0] = BigInt(KEY_LEN);
        if (getPublic(e.pkey, out, len) !== 1 || len[0] !== BigInt(KEY_LEN))
          throw new Error('EVP_PKEY_get_raw_public_key failed');
      },
      dispose() {
        for (const e of cache.values()) release(e);
        cache.clear();
      },
    };
  } catch (e) {
    return `OpenSSL EVP X25519 is not usable: ${(e as Error).message}`;
  }
  const why = selfTest(made);
  if (why !== null) {
    made.dispose();
    return why;
  }
  return made;
}

function selfTest(x: EvpX25519): string | null {
  try {
    const out = new Uint8Array(KEY_LEN);
    x.publicKey(out, ALICE_PRIV);
    if (!equal32(out, ALICE_PUB)) return 'OpenSSL EVP X25519 public key disagrees with RFC 7748 §6.1';
    if (!x.dh(out, ALICE_PRIV, BOB_PUB) || !equal32(out, SHARED))
      return 'OpenSSL EVP X25519 disagrees with RFC 7748 §6.1';
    if (x.dh(out, ALICE_PRIV, new Uint8Array(KEY_LEN))) return 'OpenSSL EVP X25519 accepted a low-order point';
  } catch (e) {
    return `OpenSSL EVP X25519 does not work: ${(e as Error).message}`;
  }
  return null;
}
