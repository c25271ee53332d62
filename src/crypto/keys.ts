/**
 * Text forms of WireGuard's 32-byte keys and `wg genkey` / `wg pubkey` / `wg genpsk` equivalents.
 *
 * - Base64 (RFC 4648 §4, standard alphabet, with padding) is what `wg`, wg-quick configs and
 *   Liqo's PublicKey resources and Secrets carry: exactly 44 characters, the last one '='.
 * - Hex (lowercase) is what the cross-platform UAPI carries (`private_key=`, `public_key=`).
 *
 * Decoders are strict: they accept only the canonical encoding of exactly 32 bytes, so a key has one
 * text form and a truncated or padded paste is rejected instead of silently becoming another key.
 * Surrounding ASCII whitespace (the newline `wg genkey > file` leaves) is ignored. Errors never
 * echo the text, because it may be a private key. Everything here allocates; none of it is on the
 * packet path.
 */
import type { CryptoBackend } from './backend.js';
import { KEY_LEN } from './sizes.js';

/** A key in text form was malformed; the message says which form was expected and what was wrong. */
export class KeyFormatError extends Error {
  override readonly name = 'KeyFormatError';
  constructor(message: string) {
    super(message);
  }
}

const B64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Length of the base64 text of 32 bytes: ceil(32 / 3) * 4. */
export const KEY_BASE64_LEN = 44;
/** Length of the hex text of 32 bytes. */
export const KEY_HEX_LEN = 64;

// 32 bytes are 10 full 3-byte groups (40 characters) and a 2-byte tail encoded as 3 characters
// plus one '='. The tail's third character carries 4 data bits and 2 bits that must be zero in the
// canonical encoding (RFC 4648 §3.5), hence its restricted set.
const CANONICAL_B64_KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;
const HEX_KEY = /^[0-9a-fA-F]{64}$/;

function b64Value(code: number): number {
  if (code >= 65 && code <= 90) return code - 65; // A-Z
  if (code >= 97 && code <= 122) return code - 71; // a-z
  if (code >= 48 && code <= 57) return code + 4; // 0-9
  if (code === 43) return 62; // +
  return 63; // '/': the regex admitted nothing else
}

/**
 * Decodes a base64 WireGuard key (as printed by `wg genkey`/`wg pubkey`). `what` names the key in
 * the error message (e.g. "peer public key"). Throws KeyFormatError. Allocates the result.
 */
export function keyFromBase64(text: string, what = 'key'): Uint8Array {
  if (typeof text !== 'string') throw new KeyFormatError(`${what} must be a base64 string`);
  const t = text.trim();
  if (t.length !== KEY_BASE64_LEN) {
    throw new KeyFormatError(
      `${what} must be ${KEY_BASE64_LEN} characters of base64 (32 bytes, as printed by 'wg genkey'), got ${t.length} characters`,
    );
  }
  if (!CANONICAL_B64_KEY.test(t)) {
    throw new KeyFormatError(
      `${what} is not canonical base64 of 32 bytes (standard alphabet A-Z a-z 0-9 + /, ending in '=')`,
    );
  }
  const out = new Uint8Array(KEY_LEN);
  let o = 0;
  for (let i = 0; i < 40; i += 4) {
    const n =
      (b64Value(t.charCodeAt(i)) << 18) |
      (b64Value(t.charCodeAt(i + 1)) << 12) |
      (b64Value(t.charCodeAt(i + 2)) << 6) |
      b64Value(t.charCodeAt(i + 3));
    out[o++] = n >>> 16;
    out[o++] = (n >>> 8) & 0xff;
    out[o++] = n & 0xff;
  }
  const n = (b64Value(t.charCodeAt(40)) << 18) | (b64Value(t.charCodeAt(41)) << 12) | (b64Value(t.charCodeAt(42)) << 6);
  out[o++] = n >>> 16;
  out[o] = (n >>> 8) & 0xff;
  return out;
}

/** Encodes a 32-byte key as base64 (44 characters), the form `wg` prints. */
export function keyToBase64(key: Uint8Array): string {
  assertKey(key);
  let s = '';
  for (let i = 0; i < 30; i += 3) {
    const n = (key[i] << 16) | (key[i + 1] << 8) | key[i + 2];
    s += B64_ALPHABET[n >>> 18] + B64_ALPHABET[(n >>> 12) & 63] + B64_ALPHABET[(n >>> 6) & 63] + B64_ALPHABET[n & 63];
  }
  const n = (key[30] << 16) | (key[31] << 8);
  return s + B64_ALPHABET[n >>> 18] + B64_ALPHABET[(n >>> 12) & 63] + B64_ALPHABET[(n >>> 6) & 63] + '=';
}

/**
 * Decodes a hex WireGuard key (the UAPI form; upper-case digits are accepted, as wireguard-go
 * does). Throws KeyFormatError. Allocates the result.
 */
export function keyFromHex(text: string, what = 'key'): Uint8Array {
  if (typeof text !== 'string') throw new KeyFormatError(`${what} must be a hex string`);
  const t = text.trim();
  if (t.length !== KEY_HEX_LEN) {
    throw new KeyFormatError(`${what} must be ${KEY_HEX_LEN} hex digits (32 bytes), got ${t.length} characters`);
  }
  if (!HEX_KEY.test(t)) throw new KeyFormatError(`${what} must contain only hex digits 0-9 a-f`);
  const out = new Uint8Array(KEY_LEN);
  for (let i = 0; i < KEY_LEN; i++) out[i] = parseInt(t.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Encodes a 32-byte key as 64 lowercase hex digits (the UAPI form). */
export function keyToHex(key: Uint8Array): string {
  assertKey(key);
  let s = '';
  for (let i = 0; i < KEY_LEN; i++) s += (key[i] < 16 ? '0' : '') + key[i].toString(16);
  return s;
}

/**
 * Clamps an X25519 private key in place (RFC 7748 §5 decodeScalar25519: clear the 3 low bits,
 * clear bit 255, set bit 254) and returns it. `wg genkey` prints keys in this form.
 */
export function clampPrivateKey(key: Uint8Array): Uint8Array {
  assertKey(key);
  key[0] &= 248;
  key[31] = (key[31] & 127) | 64;
  return key;
}

/** A fresh clamped private key from `randomFill` (a backend's CSPRNG); allocates. */
export function randomPrivateKey(randomFill: (out: Uint8Array) => void): Uint8Array {
  const key = new Uint8Array(KEY_LEN);
  randomFill(key);
  return clampPrivateKey(key);
}

/** `wg genkey`: base64 of a fresh clamped private key. */
export function generatePrivateKeyBase64(backend: CryptoBackend): string {
  const key = backend.generatePrivateKey();
  const text = keyToBase64(key);
  key.fill(0);
  return text;
}

/** `wg pubkey`: base64 public key of a base64 private key. Throws KeyFormatError on bad input. */
export function publicKeyBase64(backend: CryptoBackend, privateKeyText: string): string {
  const priv = keyFromBase64(privateKeyText, 'private key');
  const pub = new Uint8Array(KEY_LEN);
  backend.publicKey(pub, priv);
  priv.fill(0);
  return keyToBase64(pub);
}

/** `wg genpsk`: base64 of 32 random bytes (a preshared key is not clamped). */
export function generatePresharedKeyBase64(backend: CryptoBackend): string {
  const key = new Uint8Array(KEY_LEN);
  backend.randomFill(key);
  const text = keyToBase64(key);
  key.fill(0);
  return text;
}

/** Constant-time equality of two 32-byte keys. */
export function keysEqual(a: Uint8Array, b: Uint8Array): boolean {
  assertKey(a);
  assertKey(b);
  let d = 0;
  for (let i = 0; i < KEY_LEN; i++) d |= a[i] ^ b[i];
  return d === 0;
}

/** Constant-time test for the all-zero key (WireGuard's "no key" / "no preshared key"). */
export function isZeroKey(key: Uint8Array): boolean {
  assertKey(key);
  let d = 0;
  for (let i = 0; i < KEY_LEN; i++) d |= key[i];
  return d === 0;
}

function assertKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.length !== KEY_LEN) {
    throw new RangeError(`a key must be a ${KEY_LEN}-byte Uint8Array`);
  }
}
