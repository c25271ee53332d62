/**
 * The 'node' crypto backend: OpenSSL through node:crypto wherever it has the primitive, noble for
 * the rest. Choices, each measured with bench/crypto.ts on Node 20.20 / OpenSSL 3.0.19 (ratios
 * are medians of three runs on the shared 2-vCPU development machine):
 *
 * - ChaCha20-Poly1305: OpenSSL one-shot createCipheriv/createDecipheriv per packet, about 2x
 *   noble at 64 bytes and 3x at 1420 bytes (the 'openssl' backend, openssl.ts, is faster still).
 *   ALLOCATES per call: the Cipher/Decipher object, the Buffer update() returns (OpenSSL cannot
 *   write into a caller's buffer through node:crypto), the tag Buffer, and subarray views. The
 *   result is then copied into `dst`; the input is fully read before `dst` is written, so in-place
 *   and overlapping spans are safe. open() copies plaintext into `dst` only after final() has
 *   verified the tag, so unauthenticated plaintext never reaches the caller.
 * - X25519: OpenSSL via KeyObjects. Raw 32-byte keys are imported as JWK, about 10x faster than
 *   the DER/PKCS#8 route on OpenSSL 3.0 (its DER decoder dominates). For a private key Node needs
 *   a JWK "x" member but derives the public half from "d" itself, so a placeholder is passed; a
 *   probe at backend creation checks that against RFC 7748 §6.1 and falls back to PKCS#8 if a
 *   future runtime behaves differently. Imported KeyObjects are cached per key array (a WeakMap,
 *   so an entry dies with its array) and reused only while the array still holds the same bytes:
 *   static keys are imported once, which gives 2-3x the DH/s of importing both keys per call. The cache keeps a copy of the 32 key bytes next to the KeyObject.
 * - BLAKE2s-256 and HMAC-BLAKE2s: OpenSSL 'blake2s256' (createHash / createHmac), about 3x
 *   (hash) and 4x (HMAC) noble for handshake-sized inputs; noble if OpenSSL lacks blake2s256.
 * - Keyed BLAKE2s with a 16-byte digest (WireGuard MAC): not reachable through node:crypto
 *   (OpenSSL's BLAKE2SMAC is not exposed), so noble.
 * - XChaCha20-Poly1305: HChaCha20 from noble derives the subkey, then the OpenSSL AEAD above
 *   (xchacha.ts), about 2x noble's XChaCha20-Poly1305 for a 16-byte cookie.
 * - randomFill: crypto.randomFillSync.
 */
import type * as NodeCrypto from 'node:crypto';
import type { AeadOpen, AeadSeal, CryptoBackend } from './backend.js';
import { assertBytes, checkAeadArgs, assertOutput, assertParts, equal32, finishDh } from './assert.js';
import { CryptoBackendError } from './errors.js';
import { randomPrivateKey } from './keys.js';
import { nobleHash, nobleHmac, nobleMac } from './pure.js';
import { createXChaCha } from './xchacha.js';
import { HASH_LEN, KEY_LEN, NONCE_LEN, TAG_LEN } from './sizes.js';

type Crypto = typeof NodeCrypto;
type KeyObject = NodeCrypto.KeyObject;

const AEAD = 'chacha20-poly1305';
const BLAKE2S = 'blake2s256';
const AEAD_OPTIONS = { authTagLength: TAG_LEN } as const;
/** Placeholder JWK "x" for private-key import: 32 zero bytes, base64url. Node ignores it (probed). */
const JWK_PLACEHOLDER_X = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
/** RFC 8410 §7 PKCS#8 prefix for a raw X25519 private key (OID 1.3.101.110). */
const PKCS8_X25519_PREFIX = Uint8Array.of(
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x6e,
  0x04,
  0x22,
  0x04,
  0x20,
);

// RFC 7748 §6.1 test keys: used once per backend to probe how this runtime imports raw keys.
const PROBE_PRIVATE = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
const PROBE_PUBLIC = hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');

function hex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/**
 * node:crypto if this runtime has a working one, else null. Loaded lazily (no import side
 * effects) and without a static import, because a Node built without OpenSSL throws when
 * node:crypto is loaded.
 */
export function loadNodeCrypto(): Crypto | null {
  try {
    const get = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
    if (typeof get !== 'function') return null;
    const c = get.call(process, 'node:crypto') as Crypto | undefined;
    return c !== undefined && typeof c.createCipheriv === 'function' ? c : null;
  } catch {
    return null;
  }
}

/**
 * Why the node backend cannot run here, or null if it can: node:crypto must exist and its
 * OpenSSL must provide ChaCha20-Poly1305 and X25519. Detected by trying them, not by version.
 */
export function nodeBackendUnavailableReason(c: Crypto | null = loadNodeCrypto()): string | null {
  if (c === null) return 'node:crypto is not available in this runtime';
  try {
    if (!c.getCiphers().includes(AEAD)) return `this OpenSSL (${process.versions.openssl}) lacks ${AEAD}`;
    const key = new Uint8Array(KEY_LEN);
    const nonce = new Uint8Array(NONCE_LEN);
    const cipher = c.createCipheriv(AEAD, key, nonce, AEAD_OPTIONS);
    cipher.update(key);
    cipher.final();
    if (cipher.getAuthTag().length !== TAG_LEN) return `${AEAD} returned a tag that is not ${TAG_LEN} bytes`;
  } catch (e) {
    return `${AEAD} does not work: ${(e as Error).message}`;
  }
  try {
    const { privateKey, publicKey } = c.generateKeyPairSync('x25519');
    if (c.diffieHellman({ privateKey, publicKey }).length !== KEY_LEN)
      return 'X25519 returned a secret that is not 32 bytes';
  } catch (e) {
    return `X25519 does not work: ${(e as Error).message}`;
  }
  return null;
}

/** Options of {@link createNodeBackend}; the defaults are the measured-fastest choices. */
export interface NodeBackendOptions {
  /** Cache imported X25519 KeyObjects per key array (default true). Off only for measurement. */
  readonly keyCache?: boolean;
  /**
   * The node:crypto module to use (default: this runtime's). Tests pass a look-alike with parts
   * missing to exercise detection and the noble fallbacks.
   */
  readonly nodeCrypto?: Crypto | null;
}

interface CachedKey {
  readonly bytes: Uint8Array;
  key: KeyObject;
}

/**
 * Creates the OpenSSL-backed backend. Throws CryptoBackendError naming what is missing when
 * node:crypto cannot provide ChaCha20-Poly1305 or X25519 (use the 'pure' backend there).
 */
export function createNodeBackend(options: NodeBackendOptions = {}): CryptoBackend {
  const c = options.nodeCrypto === undefined ? loadNodeCrypto() : options.nodeCrypto;
  const reason = nodeBackendUnavailableReason(c);
  if (c === null || reason !== null) {
    throw new CryptoBackendError(
      `the node crypto backend cannot run: ${reason ?? 'unknown'}; choose the 'pure' backend (WEFT_CRYPTO=pure)`,
    );
  }
  const keyCache = options.keyCache ?? true;
  const opensslBlake2s = c.getHashes().includes(BLAKE2S);

  const privateCache = new WeakMap<Uint8Array, CachedKey>();
  const publicCache = new WeakMap<Uint8Array, CachedKey>();

  function b64url(key: Uint8Array): string {
    return Buffer.from(key.buffer, key.byteOffset, KEY_LEN).toString('base64url');
  }

  function importPrivateJwk(raw: Uint8Array): KeyObject {
    return c!.createPrivateKey({
      key: { kty: 'OKP', crv: 'X25519', d: b64url(raw), x: JWK_PLACEHOLDER_X },
      format: 'jwk',
    });
  }

  function importPrivatePkcs8(raw: Uint8Array): KeyObject {
    const der = new Uint8Array(PKCS8_X25519_PREFIX.length + KEY_LEN);
    der.set(PKCS8_X25519_PREFIX);
    der.set(raw, PKCS8_X25519_PREFIX.length);
    const key = c!.createPrivateKey({ key: Buffer.from(der.buffer), format: 'der', type: 'pkcs8' });
    der.fill(0);
    return key;
  }

  // Probe once: does the JWK route derive the public half from "d" (ignoring our placeholder)?
  let importPrivate = importPrivateJwk;
  try {
    const x = c.createPublicKey(importPrivateJwk(PROBE_PRIVATE)).export({ format: 'jwk' }).x;
    if (x !== b64url(PROBE_PUBLIC)) importPrivate = importPrivatePkcs8;
  } catch {
    importPrivate = importPrivatePkcs8;
  }

  function importPublic(raw: Uint8Array): KeyObject {
    return c!.createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url(raw) }, format: 'jwk' });
  }

  function cached(
    cache: WeakMap<Uint8Array, CachedKey>,
    raw: Uint8Array,
    load: (raw: Uint8Array) => KeyObject,
  ): KeyObject {
    if (!keyCache) return load(raw);
    const entry = cache.get(raw);
    if (entry !== undefined && equal32(entry.bytes, raw)) return entry.key;
    const key = load(raw);
    if (entry !== undefined) {
      entry.bytes.set(raw);
      entry.key = key;
    } else {
      cache.set(raw, { bytes: raw.slice(0, KEY_LEN), key });
    }
    return key;
  }

  const seal: AeadSeal = (key, nonce, ad, src, srcOff, len, dst, dstOff) => {
    checkAeadArgs(false, key, nonce, NONCE_LEN, ad, src, srcOff, len, dst, dstOff);
    const cipher = c!.createCipheriv(AEAD, key, nonce, AEAD_OPTIONS);
    if (ad !== null && ad.length > 0) cipher.setAAD(ad, { plaintextLength: len });
    const ct = cipher.update(srcOff === 0 && len === src.length ? src : src.subarray(srcOff, srcOff + len));
    cipher.final();
    dst.set(ct, dstOff);
    dst.set(cipher.getAuthTag(), dstOff + len);
    return len + TAG_LEN;
  };

  const open: AeadOpen = (key, nonce, ad, src, srcOff, len, dst, dstOff) => {
    if (!checkAeadArgs(true, key, nonce, NONCE_LEN, ad, src, srcOff, len, dst, dstOff)) return false;
    const ctLen = len - TAG_LEN;
    const decipher = c!.createDecipheriv(AEAD, key, nonce, AEAD_OPTIONS);
    decipher.setAuthTag(src.subarray(srcOff + ctLen, srcOff + len));
    if (ad !== null && ad.length > 0) decipher.setAAD(ad, { plaintextLength: ctLen });
    const pt = decipher.update(src.subarray(srcOff, srcOff + ctLen));
    try {
      decipher.final(); // throws when the tag does not verify
    } catch {
      return false;
    }
    dst.set(pt, dstOff);
    return true;
  };

  function randomFill(out: Uint8Array): void {
    assertOutput(out, 0, 'randomFill output');
    c!.randomFillSync(out);
  }

  return {
    name: 'node',
    seal,
    open,

    ...createXChaCha(seal, open),

    hash: opensslBlake2s
      ? (out: Uint8Array, ...parts: Uint8Array[]): void => {
          assertOutput(out, HASH_LEN, 'hash output');
          assertParts(parts);
          const h = c.createHash(BLAKE2S);
          for (let i = 0; i < parts.length; i++) h.update(parts[i]);
          out.set(h.digest());
        }
      : (out: Uint8Array, ...parts: Uint8Array[]): void => nobleHash(out, parts),

    // No keyed BLAKE2s with a 16-byte digest in node:crypto: noble.
    mac(out, key, ...parts) {
      nobleMac(out, key, parts);
    },

    hmac: opensslBlake2s
      ? (out: Uint8Array, key: Uint8Array, ...parts: Uint8Array[]): void => {
          assertOutput(out, HASH_LEN, 'hmac output');
          if (!(key instanceof Uint8Array)) throw new TypeError('hmac key must be a Uint8Array');
          assertParts(parts);
          const h = c.createHmac(BLAKE2S, key);
          for (let i = 0; i < parts.length; i++) h.update(parts[i]);
          const d = h.digest();
          out.set(d);
          d.fill(0);
        }
      : (out: Uint8Array, key: Uint8Array, ...parts: Uint8Array[]): void => nobleHmac(out, key, parts),

    dh(out, privateKey, publicKey) {
      assertOutput(out, KEY_LEN, 'dh output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      assertBytes(publicKey, KEY_LEN, 'public key');
      let shared: Buffer | null = null;
      try {
        shared = c.diffieHellman({
          privateKey: cached(privateCache, privateKey, importPrivate),
          publicKey: cached(publicCache, publicKey, importPublic),
        });
      } catch {
        // OpenSSL fails the derivation when the result is all zero (a low-order public key);
        // lengths were checked above, so that is the only failure left.
      }
      return finishDh(out, shared);
    },

    publicKey(out, privateKey) {
      assertOutput(out, KEY_LEN, 'public key output');
      assertBytes(privateKey, KEY_LEN, 'private key');
      const x = c.createPublicKey(cached(privateCache, privateKey, importPrivate)).export({ format: 'jwk' }).x;
      if (typeof x !== 'string') throw new Error('node:crypto exported an X25519 public key without "x"');
      out.set(Buffer.from(x, 'base64url'));
    },

    generatePrivateKey() {
      return randomPrivateKey(randomFill);
    },

    randomFill,
  };
}
