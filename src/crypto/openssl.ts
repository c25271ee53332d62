/**
 * The 'openssl' crypto backend: the node backend, except that ChaCha20-Poly1305 (and the
 * XChaCha20-Poly1305 built on it) and, where OpenSSL 3 provides them, BLAKE2s, HMAC-BLAKE2s and
 * keyed BLAKE2s (evp-hash.ts) call the OpenSSL that Node already contains directly, through its
 * exported EVP functions and koffi (ffi.ts), instead of through node:crypto's objects; so does
 * X25519 (EVP_PKEY_derive with raw keys, evp-x25519.ts) when its RFC 7748 self-test passes.
 * Randomness and key handling are the node backend's.
 *
 * Why: node:crypto has no way to encrypt into a caller's buffer, and each createCipheriv builds a
 * stream object and a native context. Here two EVP_CIPHER_CTX are created once per backend and
 * re-keyed per packet (EVP_EncryptInit_ex with only key and IV), and OpenSSL reads and writes the
 * caller's packet buffer itself: true in-place encryption, no per-packet Buffer, no copy.
 * bench/crypto.ts measures it at 3-4x node:crypto's one-shot seal per packet (64 and 1420 bytes).
 *
 * Contracts and allocation:
 * - koffi passes a Uint8Array's backing-store pointer (no copy; measured constant call time from
 *   64 B to 16 MiB), so the only per-call allocations are the subarray views handed to koffi.
 * - Exact in-place operation (src and dst the same bytes) is what OpenSSL supports; partially
 *   overlapping spans are copied to a scratch buffer first, because OpenSSL rejects them.
 * - open() verifies the tag in EVP_DecryptFinal_ex, after EVP_DecryptUpdate has already written
 *   plaintext to dst; on failure that region of dst is zeroed before returning false.
 * - All FFI arguments are range-checked first: a wrong length here would be a memory error, not
 *   an exception.
 * - Nothing is loaded on import. koffi is required lazily; the EVP symbols are looked up in the
 *   running process (koffi.load(null)), and a self-test against RFC 8439 §2.8.2 runs before the
 *   backend is handed out. Any failure makes the backend unavailable (select.ts then uses 'node').
 */
import type { CryptoBackend } from './backend.js';
import { assertBytes, assertOutput, checkAeadArgs } from './assert.js';
import { CryptoBackendError } from './errors.js';
import { createEvpHashing, type EvpHashing } from './evp-hash.js';
import { createEvpX25519, type EvpX25519 } from './evp-x25519.js';
import { loadNativeHash } from './native-hash.js';
import { loadNativeNoise } from './native-noise.js';
import { loadNativeX25519 } from './native-x25519.js';
import { processLibrary } from './ffi.js';
import { createNodeBackend, loadNodeCrypto, nodeBackendUnavailableReason } from './node.js';
import { KEY_LEN, NONCE_LEN, TAG_LEN } from './sizes.js';
import { createXChaCha } from './xchacha.js';

/** EVP_CIPHER_CTX_ctrl commands (include/openssl/evp.h; same in OpenSSL 1.1 and 3.x). */
const EVP_CTRL_AEAD_GET_TAG = 0x10;
const EVP_CTRL_AEAD_SET_TAG = 0x11;

type Ptr = unknown;
type Fn<A extends unknown[]> = (...args: A) => number;

interface Evp {
  readonly newCtx: () => Ptr;
  readonly freeCtx: (ctx: Ptr) => void;
  readonly cipher: Ptr;
  readonly encryptInit: Fn<[Ptr, Ptr | null, null, Uint8Array | null, Uint8Array | null]>;
  readonly decryptInit: Fn<[Ptr, Ptr | null, null, Uint8Array | null, Uint8Array | null]>;
  readonly encryptUpdate: Fn<[Ptr, Uint8Array | null, Int32Array, Uint8Array, number]>;
  readonly decryptUpdate: Fn<[Ptr, Uint8Array | null, Int32Array, Uint8Array, number]>;
  readonly encryptFinal: Fn<[Ptr, Uint8Array, Int32Array]>;
  readonly decryptFinal: Fn<[Ptr, Uint8Array, Int32Array]>;
  readonly ctrl: Fn<[Ptr, number, number, Uint8Array]>;
}

let evpCache: Evp | string | undefined;

/** Binds the EVP functions once per thread; returns the reason as a string if that fails. */
function bindEvp(): Evp | string {
  if (evpCache !== undefined) return evpCache;
  const p = processLibrary();
  if (typeof p === 'string') {
    evpCache = p;
    return evpCache;
  }
  try {
    const { lib } = p;
    const f = <T>(decl: string): T => lib.func(decl) as unknown as T;
    const cipherFn = f<() => Ptr>('void *EVP_chacha20_poly1305()');
    const cipher = cipherFn();
    if (cipher === null) throw new Error('EVP_chacha20_poly1305() returned NULL');
    evpCache = {
      newCtx: f('void *EVP_CIPHER_CTX_new()'),
      freeCtx: f('void EVP_CIPHER_CTX_free(void *ctx)'),
      cipher,
      encryptInit: f(
        'int EVP_EncryptInit_ex(void *ctx, void *type, void *impl, const uint8_t *key, const uint8_t *iv)',
      ),
      decryptInit: f(
        'int EVP_DecryptInit_ex(void *ctx, void *type, void *impl, const uint8_t *key, const uint8_t *iv)',
      ),
      encryptUpdate: f('int EVP_EncryptUpdate(void *ctx, uint8_t *out, int *outl, const uint8_t *in, int inl)'),
      decryptUpdate: f('int EVP_DecryptUpdate(void *ctx, uint8_t *out, int *outl, const uint8_t *in, int inl)'),
      encryptFinal: f('int EVP_EncryptFinal_ex(void *ctx, uint8_t *out, int *outl)'),
      decryptFinal: f('int EVP_DecryptFinal_ex(void *ctx, uint8_t *out, int *outl)'),
      ctrl: f('int EVP_CIPHER_CTX_ctrl(void *ctx, int type, int arg, uint8_t *ptr)'),
    };
  } catch (e) {
    evpCache = `OpenSSL's EVP functions are not reachable through koffi: ${(e as Error).message}`;
  }
  return evpCache;
}

/** True when [aOff, aOff+len) and [bOff, bOff+len) overlap in memory without being identical. */
function partiallyOverlaps(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, len: number): boolean {
  if (a.buffer !== b.buffer || len === 0) return false;
  const x = a.byteOffset + aOff;
  const y = b.byteOffset + bOff;
  return x !== y && x < y + len && y < x + len;
}

// RFC 8439 §2.8.2, for the self-test.
const SELFTEST_KEY = Uint8Array.from({ length: 32 }, (_, i) => 0x80 + i);
const SELFTEST_NONCE = Uint8Array.of(7, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47);
const SELFTEST_AD = Uint8Array.of(0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7);
const SELFTEST_TAG = Uint8Array.of(
  0x1a,
  0xe1,
  0x0b,
  0x59,
  0x4f,
  0x09,
  0xe2,
  0x6a,
  0x7e,
  0x90,
  0x2e,
  0xcb,
  0xd0,
  0x60,
  0x06,
  0x91,
);
const SELFTEST_TEXT =
  "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";

/**
 * Why the openssl backend cannot run here, or null if it can. Checks the node backend's
 * requirements, binds the EVP functions and runs the RFC 8439 §2.8.2 vector through them
 * (seal, open, and rejection of a flipped tag bit). Probed once per thread.
 */
export function opensslBackendUnavailableReason(): string | null {
  probeCache ??= { reason: probe() };
  return probeCache.reason;
}

let probeCache: { reason: string | null } | undefined;

function probe(): string | null {
  const nodeReason = nodeBackendUnavailableReason(loadNodeCrypto());
  if (nodeReason !== null) return nodeReason;
  const evp = bindEvp();
  if (typeof evp === 'string') return evp;
  try {
    const aead = createEvpAead(evp);
    const pt = new TextEncoder().encode(SELFTEST_TEXT);
    const buf = new Uint8Array(pt.length + TAG_LEN);
    buf.set(pt);
    aead.seal(SELFTEST_KEY, SELFTEST_NONCE, SELFTEST_AD, buf, 0, pt.length, buf, 0);
    for (let i = 0; i < TAG_LEN; i++) {
      if (buf[pt.length + i] !== SELFTEST_TAG[i])
        return 'OpenSSL EVP ChaCha20-Poly1305 failed the RFC 8439 §2.8.2 self-test';
    }
    const back = new Uint8Array(pt.length);
    if (
      !aead.open(SELFTEST_KEY, SELFTEST_NONCE, SELFTEST_AD, buf, 0, buf.length, back, 0) ||
      new TextDecoder().decode(back) !== SELFTEST_TEXT
    )
      return 'OpenSSL EVP ChaCha20-Poly1305 did not open its own output';
    buf[pt.length] ^= 1;
    if (aead.open(SELFTEST_KEY, SELFTEST_NONCE, SELFTEST_AD, buf, 0, buf.length, back, 0)) {
      return 'OpenSSL EVP ChaCha20-Poly1305 accepted a forged tag';
    }
    aead.dispose();
  } catch (e) {
    return `OpenSSL EVP ChaCha20-Poly1305 does not work: ${(e as Error).message}`;
  }
  return null;
}

interface EvpAead {
  seal: CryptoBackend['seal'];
  open: CryptoBackend['open'];
  dispose(): void;
}

/** OpenSSL takes lengths as C int. */
const MAX_LEN = 0x7fffffff - TAG_LEN;

/** One encryption and one decryption context, re-keyed per call. */
function createEvpAead(evp: Evp): EvpAead {
  const ectx = evp.newCtx();
  const dctx = evp.newCtx();
  if (ectx === null || dctx === null) throw new Error('EVP_CIPHER_CTX_new() returned NULL');
  const check = (ok: number, what: string): void => {
    if (ok !== 1) throw new Error(`OpenSSL ${what} failed`); // not reachable from network input
  };
  check(evp.encryptInit(ectx, evp.cipher, null, null, null), 'EVP_EncryptInit_ex');
  check(evp.decryptInit(dctx, evp.cipher, null, null, null), 'EVP_DecryptInit_ex');
  const outl = new Int32Array(1);
  const tag = new Uint8Array(TAG_LEN);
  let scratch = new Uint8Array(2048);

  /** The input span, copied to scratch when it partially overlaps the output span. */
  function input(src: Uint8Array, srcOff: number, len: number, dst: Uint8Array, dstOff: number): Uint8Array {
    if (!partiallyOverlaps(src, srcOff, dst, dstOff, len)) {
      return srcOff === 0 && len === src.length ? src : src.subarray(srcOff, srcOff + len);
    }
    if (scratch.length < len) scratch = new Uint8Array(len);
    scratch.set(src.subarray(srcOff, srcOff + len));
    return scratch.subarray(0, len);
  }

  return {
    seal(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      checkAeadArgs(false, key, nonce, NONCE_LEN, ad, src, srcOff, len, dst, dstOff);
      if (len > MAX_LEN) throw new RangeError(`seal length ${len} exceeds OpenSSL's int range`);
      const inp = input(src, srcOff, len, dst, dstOff);
      const out = dst.subarray(dstOff, dstOff + len + TAG_LEN);
      check(evp.encryptInit(ectx, null, null, key, nonce), 'EVP_EncryptInit_ex');
      if (ad !== null && ad.length > 0)
        check(evp.encryptUpdate(ectx, null, outl, ad, ad.length), 'EVP_EncryptUpdate(AD)');
      check(evp.encryptUpdate(ectx, out, outl, inp, len), 'EVP_EncryptUpdate');
      check(evp.encryptFinal(ectx, out, outl), 'EVP_EncryptFinal_ex');
      check(evp.ctrl(ectx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, tag), 'EVP_CTRL_AEAD_GET_TAG');
      dst.set(tag, dstOff + len);
      return len + TAG_LEN;
    },

    open(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      if (!checkAeadArgs(true, key, nonce, NONCE_LEN, ad, src, srcOff, len, dst, dstOff)) return false;
      if (len > MAX_LEN) throw new RangeError(`open length ${len} exceeds OpenSSL's int range`);
      const ctLen = len - TAG_LEN;
      for (let i = 0; i < TAG_LEN; i++) tag[i] = src[srcOff + ctLen + i];
      const inp = input(src, srcOff, ctLen, dst, dstOff);
      const out = dst.subarray(dstOff, dstOff + ctLen);
      check(evp.decryptInit(dctx, null, null, key, nonce), 'EVP_DecryptInit_ex');
      check(evp.ctrl(dctx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, tag), 'EVP_CTRL_AEAD_SET_TAG');
      if (ad !== null && ad.length > 0)
        check(evp.decryptUpdate(dctx, null, outl, ad, ad.length), 'EVP_DecryptUpdate(AD)');
      check(evp.decryptUpdate(dctx, out, outl, inp, ctLen), 'EVP_DecryptUpdate');
      if (evp.decryptFinal(dctx, out, outl) !== 1) {
        out.fill(0); // never leave unauthenticated plaintext behind
        return false;
      }
      return true;
    },

    dispose() {
      evp.freeCtx(ectx);
      evp.freeCtx(dctx);
    },
  };
}

let hashingCache: { reason: string | null } | undefined;

/**
 * Why the openssl backend keeps node:crypto/noble for BLAKE2s, HMAC and MAC instead of OpenSSL's
 * EVP_MD/EVP_MAC (evp-hash.ts), or null when it uses EVP. Probed once per thread.
 */
export function opensslHashingUnavailableReason(): string | null {
  if (hashingCache === undefined) {
    const h = createEvpHashing(() => {
      throw new Error('unused');
    });
    hashingCache = { reason: typeof h === 'string' ? h : null };
    if (typeof h !== 'string') h.dispose();
  }
  return hashingCache.reason;
}

/**
 * Creates the openssl backend (name 'openssl'). Throws CryptoBackendError with the reason when
 * its AEAD cannot run here; the 'node' backend is then the next choice. BLAKE2s, HMAC and MAC
 * come from OpenSSL's EVP functions when opensslHashingUnavailableReason() is null, and X25519
 * when opensslX25519UnavailableReason() is null, else from the node backend. With the native
 * addon (native-hash.ts) hash, mac, hmac and kdf are one N-API call each instead
 * (`nativeHash: false` keeps EVP: tests and benchmarks of that fallback). X25519 comes from the
 * addon (native-x25519.ts: OpenSSL's ossl_x25519 or the addon's own ladder, and its fixed-base
 * table) when it passes its self-test, else from EVP_PKEY, else from node.ts (`nativeX25519:
 * false` skips the addon, 'ladder' forces its own ladder: tests and benchmarks). `x25519Impl`
 * names the X25519 in use. With the addon's hashing and X25519 the backend also offers whole
 * handshake steps (`noise`, native-noise.ts; `nativeNoise: false` leaves them out).
 * The OpenSSL contexts are freed when the backend object is garbage-collected.
 */
export function createOpensslBackend(
  options: {
    readonly nativeHash?: boolean;
    readonly nativeX25519?: boolean | 'ladder';
    readonly nativeNoise?: boolean;
  } = {},
): CryptoBackend {
  const reason = opensslBackendUnavailableReason();
  const evp = bindEvp();
  if (reason !== null || typeof evp === 'string') {
    throw new CryptoBackendError(
      `the openssl crypto backend cannot run: ${reason ?? String(evp)}; choose 'node' or 'pure' (WEFT_CRYPTO)`,
    );
  }
  const node = createNodeBackend();
  const aead = createEvpAead(evp);
  const made = createEvpHashing((out, key, parts) => node.hmac(out, key, ...parts));
  const hashing: EvpHashing | null = typeof made === 'string' ? null : made;
  const backend: CryptoBackend = {
    ...node,
    name: 'openssl',
    seal: aead.seal,
    open: aead.open,
    ...createXChaCha(aead.seal, aead.open),
  };
  if (hashing !== null) {
    backend.hash = (out, ...parts) => hashing.hash(out, parts);
    backend.mac = (out, key, ...parts) => hashing.mac(out, key, parts);
    backend.hmac = (out, key, ...parts) => hashing.hmac(out, key, parts);
  }
  const nh = options.nativeHash === false ? 'not wanted' : loadNativeHash();
  if (typeof nh !== 'string') {
    // One N-API call instead of 3-4 koffi crossings; more parts than WireGuard uses go to EVP.
    const { hash, mac, hmac } = backend;
    backend.hash = (out, ...parts) =>
      parts.length === 1
        ? nh.hash(out, parts[0])
        : parts.length === 2
          ? nh.hash(out, parts[0], parts[1])
          : hash(out, ...parts);
    backend.mac = (out, key, ...parts) => (parts.length === 1 ? nh.mac(out, key, parts[0]) : mac(out, key, ...parts));
    backend.hmac = (out, key, ...parts) =>
      parts.length === 1
        ? nh.hmac(out, key, parts[0])
        : parts.length === 2
          ? nh.hmac(out, key, parts[0], parts[1])
          : hmac(out, key, ...parts);
    backend.kdf = nh.kdf;
  }
  const nx = options.nativeX25519 === false ? 'not wanted' : loadNativeX25519();
  const x = typeof nx === 'string' ? createEvpX25519() : 'the native addon is used';
  const x25519: EvpX25519 | null = typeof x === 'string' ? null : x;
  if (typeof nx !== 'string') {
    // The addon checks lengths too; these keep the backend's error messages and contract.
    const dh = options.nativeX25519 === 'ladder' ? nx.x25519Ladder : nx.x25519;
    backend.x25519Impl = options.nativeX25519 === 'ladder' ? 'weft radix-2^51 ladder (forced)' : nx.impl;
    backend.dh = (out, privateKey, publicKey) => {
      assertOutput(out, KEY_LEN, 'dh output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      assertBytes(publicKey, KEY_LEN, 'public key');
      return dh(out, privateKey, publicKey);
    };
    backend.publicKey = (out, privateKey) => {
      assertOutput(out, KEY_LEN, 'public key output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      nx.x25519Base(out, privateKey);
    };
  } else if (x25519 !== null) {
    backend.x25519Impl = 'OpenSSL EVP_PKEY through koffi';
    backend.dh = (out, privateKey, publicKey) => {
      assertOutput(out, KEY_LEN, 'dh output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      assertBytes(publicKey, KEY_LEN, 'public key');
      if (x25519.dh(out, privateKey, publicKey)) return true;
      out.fill(0, 0, KEY_LEN);
      return false;
    };
    backend.publicKey = (out, privateKey) => {
      assertOutput(out, KEY_LEN, 'public key output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      x25519.publicKey(out, privateKey);
    };
  }
  // Whole handshake steps: they use the addon's hashing and X25519, so only with both.
  if (
    typeof nh !== 'string' &&
    typeof nx !== 'string' &&
    options.nativeX25519 !== 'ladder' &&
    options.nativeNoise !== false
  ) {
    const steps = loadNativeNoise();
    if (typeof steps !== 'string') backend.noise = steps;
  }
  resources.register(backend, { aead, hashing, x25519 });
  return backend;
}

let x25519Cache: { reason: string | null } | undefined;

/**
 * Why the openssl backend keeps node:crypto's KeyObjects for X25519 instead of EVP_PKEY through
 * koffi (evp-x25519.ts), or null when it uses EVP. Probed once per thread.
 */
export function opensslX25519UnavailableReason(): string | null {
  if (x25519Cache === undefined) {
    const x = createEvpX25519();
    x25519Cache = { reason: typeof x === 'string' ? x : null };
    if (typeof x !== 'string') x.dispose();
  }
  return x25519Cache.reason;
}

const resources = new FinalizationRegistry<{ aead: EvpAead; hashing: EvpHashing | null; x25519: EvpX25519 | null }>(
  (r) => {
    r.aead.dispose();
    r.hashing?.dispose();
    r.x25519?.dispose();
  },
);
