/**
 * Byte sizes of the primitives behind {@link CryptoBackend} (WireGuard whitepaper §5.4).
 * Protocol code uses these names instead of bare numbers when it lays out packets.
 */

/** X25519 private/public keys, shared secrets, ChaCha20-Poly1305 keys and preshared keys (RFC 7748 §5, RFC 8439 §2.8). */
export const KEY_LEN = 32;
/** ChaCha20-Poly1305 nonce (RFC 8439 §2.8): 4 zero bytes then the 64-bit little-endian counter in WireGuard. */
export const NONCE_LEN = 12;
/** XChaCha20-Poly1305 nonce (draft-irtf-cfrg-xchacha-03 §2). */
export const XNONCE_LEN = 24;
/** Poly1305 tag appended by every seal (RFC 8439 §2.8). */
export const TAG_LEN = 16;
/** BLAKE2s-256 digest and HMAC-BLAKE2s output (RFC 7693; whitepaper HASH and HMAC). */
export const HASH_LEN = 32;
/** Keyed BLAKE2s digest used by WireGuard's MAC (mac1, mac2, cookie). */
export const MAC_LEN = 16;
/** Largest BLAKE2s key (RFC 7693 §2.1): keys for keyed hashing are 1..32 bytes. */
export const BLAKE2S_MAX_KEY_LEN = 32;
