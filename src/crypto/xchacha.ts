/**
 * XChaCha20-Poly1305 on top of any ChaCha20-Poly1305 seal/open (draft-irtf-cfrg-xchacha-03 §2):
 * subkey := HChaCha20(key, nonce[0..16)) (noble), then the 12-byte-nonce AEAD with the subkey and
 * the nonce 0^4 ‖ nonce[16..24). Used by the backends whose AEAD is OpenSSL's, which has no
 * XChaCha. WireGuard needs it only for cookie replies (whitepaper §5.4.7).
 *
 * The subkey and nonce live in scratch owned by the returned pair, and the subkey is wiped after
 * every call. HChaCha20 allocates one small array inside noble per call.
 */
import { hchacha } from '@noble/ciphers/chacha.js';
import { assertBytes } from './assert.js';
import type { AeadOpen, AeadSeal } from './backend.js';
import { KEY_LEN, NONCE_LEN, XNONCE_LEN } from './sizes.js';

/** "expand 32-byte k" (RFC 8439 §2.3), as bytes so its u32 view has the in-memory order noble expects. */
const SIGMA_BYTES = Uint8Array.of(
  0x65,
  0x78,
  0x70,
  0x61,
  0x6e,
  0x64,
  0x20,
  0x33,
  0x32,
  0x2d,
  0x62,
  0x79,
  0x74,
  0x65,
  0x20,
  0x6b,
);

/** Builds xseal/xopen (CryptoBackend contract) from a backend's seal/open. */
export function createXChaCha(seal: AeadSeal, open: AeadOpen): { xseal: AeadSeal; xopen: AeadOpen } {
  // u32 views over byte arrays: noble's hchacha reads and writes raw little-endian memory words,
  // so these are right on either host endianness.
  const sigma = new Uint32Array(SIGMA_BYTES.slice().buffer);
  const keyBytes = new Uint8Array(KEY_LEN);
  const keyWords = new Uint32Array(keyBytes.buffer);
  const nonceBytes = new Uint8Array(16);
  const nonceWords = new Uint32Array(nonceBytes.buffer);
  const subkey = new Uint8Array(KEY_LEN);
  const subkeyWords = new Uint32Array(subkey.buffer);
  const chachaNonce = new Uint8Array(NONCE_LEN);

  function derive(key: Uint8Array, nonce: Uint8Array): void {
    assertBytes(key, KEY_LEN, 'key');
    assertBytes(nonce, XNONCE_LEN, 'nonce');
    keyBytes.set(key);
    nonceBytes.set(nonce.subarray(0, 16));
    hchacha(sigma, keyWords, nonceWords, subkeyWords);
    keyBytes.fill(0);
    chachaNonce.set(nonce.subarray(16, XNONCE_LEN), 4);
  }

  return {
    xseal(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      derive(key, nonce);
      try {
        return seal(subkey, chachaNonce, ad, src, srcOff, len, dst, dstOff);
      } finally {
        subkey.fill(0);
      }
    },
    xopen(key, nonce, ad, src, srcOff, len, dst, dstOff) {
      derive(key, nonce);
      try {
        return open(subkey, chachaNonce, ad, src, srcOff, len, dst, dstOff);
      } finally {
        subkey.fill(0);
      }
    },
  };
}
