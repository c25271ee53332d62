/**
 * Whole Noise handshake steps in one native call each (native/weft_noise.c), offered by the
 * 'openssl' backend with the addon; src/wireguard/noise.ts uses them instead of its
 * step-by-step code when present. Each returns false when a DH result is all zeros or a tag
 * does not verify. State buffers have a fixed layout (byte offsets):
 *  - hs (224): hash 0, chaining key 32, PSK 64, local ephemeral private 96, remote ephemeral
 *    public 128, remote static public 160, precomputed static-static DH 192;
 *  - identity (64): private key 0, public key 32;
 *  - pending (96): hash 0, chaining key 32, remote ephemeral 64.
 * `off` is the message's offset in `msg` (initiation 148 bytes, response 92). `peerTable`
 * (optional) is buildTable()'s output for hs's remote static key: DH(ephemeral, remote static)
 * then runs as a fixed-base multiplication with that table instead of a ladder (same result);
 * a table built for another key, or null, means the ladder.
 */
export interface NoiseSteps {
  /** Initiation body (ephemeral, static, timestamp); writes hs hash and chaining key. */
  initiation(
    hs: Uint8Array,
    identity: Uint8Array,
    msg: Uint8Array,
    off: number,
    timestamp: Uint8Array,
    peerTable: Uint8Array | null,
  ): boolean;
  /** Consumes an initiation up to the static key (into outStatic); writes pending. */
  beginConsume(pending: Uint8Array, identity: Uint8Array, msg: Uint8Array, off: number, outStatic: Uint8Array): boolean;
  /** Continues with the static-static key of hs: decrypts the timestamp; advances pending. */
  finishConsume(pending: Uint8Array, hs: Uint8Array, msg: Uint8Array, off: number, outTimestamp: Uint8Array): boolean;
  /** Response body (ephemeral, empty); writes hs hash and chaining key. */
  response(hs: Uint8Array, msg: Uint8Array, off: number, peerTable: Uint8Array | null): boolean;
  /** Size in bytes of a peer table (~61 KB). */
  readonly tableSize: number;
  /**
   * Builds the table of the X25519 public key `u` into `out` (tableSize bytes, ~0.2 ms); false
   * for a key that is not on the curve or has small order (such keys stay on the ladder).
   */
  buildTable(out: Uint8Array, u: Uint8Array): boolean;
  /** Consumes a response to hs's initiation; writes pending hash and chaining key. */
  consumeResponse(pending: Uint8Array, hs: Uint8Array, identity: Uint8Array, msg: Uint8Array, off: number): boolean;
}

/** An AEAD seal over src[srcOff, +len) into dst[dstOff, +len+16) (see CryptoBackend.seal). */
export type AeadSeal = (
  key: Uint8Array,
  nonce: Uint8Array,
  ad: Uint8Array | null,
  src: Uint8Array,
  srcOff: number,
  len: number,
  dst: Uint8Array,
  dstOff: number,
) => number;

/** An AEAD open of src[srcOff, +len) (tag included) into dst[dstOff, ...) (see CryptoBackend.open). */
export type AeadOpen = (...args: Parameters<AeadSeal>) => boolean;

/**
 * The narrow crypto interface every protocol engine uses (WireGuard whitepaper §5.4 primitives).
 *
 * Contracts:
 * - All byte arguments are `Uint8Array` views; offsets are honoured, so a view may start at any
 *   (odd) byte offset of a larger packet buffer.
 * - AEAD calls work *in place*: `src` and `dst` may be the same buffer at the same offset. The
 *   caller owns every buffer; a backend never keeps a reference after returning.
 * - `nonce` arguments are the full 12-byte (ChaCha20-Poly1305) or 24-byte (XChaCha20-Poly1305)
 *   nonces; WireGuard's transport nonce is 4 zero bytes followed by the little-endian counter,
 *   built by the caller (see src/wireguard) so that 64-bit counters never pass through a float.
 * - open() returns false on an authentication failure and never throws for bad input bytes;
 *   it throws only on API misuse (wrong key/nonce length, out-of-range offsets).
 */
export interface CryptoBackend {
  /**
   * 'node' (OpenSSL via node:crypto, noble where OpenSSL lacks a primitive), 'openssl' (as 'node',
   * but ChaCha20-Poly1305 calls Node's own OpenSSL EVP functions in place through koffi; see
   * openssl.ts) or 'pure' (noble only). Get one with getCryptoBackend() in select.ts.
   */
  readonly name: 'node' | 'openssl' | 'pure';

  /**
   * ChaCha20-Poly1305 (RFC 8439 §2.8). Encrypts `src[srcOff, srcOff+len)` into
   * `dst[dstOff, dstOff+len)` and writes the 16-byte tag at `dst[dstOff+len, dstOff+len+16)`.
   * Returns len + 16.
   */
  readonly seal: AeadSeal;

  /**
   * ChaCha20-Poly1305 open. `len` includes the 16-byte tag. On success writes len - 16 plaintext
   * bytes at `dst[dstOff, ...)` and returns true; on failure returns false (dst contents undefined).
   */
  readonly open: AeadOpen;

  /** XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha-03), same contract as seal(); nonce is 24 bytes. */
  readonly xseal: AeadSeal;

  /** XChaCha20-Poly1305 open, same contract as open(). */
  readonly xopen: AeadOpen;

  /** BLAKE2s-256 of the concatenation of `parts` (RFC 7693), written to out[0..32). */
  hash(out: Uint8Array, ...parts: Uint8Array[]): void;

  /** Keyed BLAKE2s with a 16-byte digest (WireGuard's MAC(key, input) for mac1/mac2/cookie). */
  mac(out: Uint8Array, key: Uint8Array, ...parts: Uint8Array[]): void;

  /** HMAC-BLAKE2s-256 (RFC 2104 over BLAKE2s, 64-byte block), written to out[0..32). */
  hmac(out: Uint8Array, key: Uint8Array, ...parts: Uint8Array[]): void;

  /**
   * Optional: WireGuard's KDF_n (kdf.ts) in one call, n = number of non-null outputs (1..3).
   * Same contract as kdf1/kdf2/kdf3, which call it after their own checks when it exists.
   */
  kdf?(t1: Uint8Array, t2: Uint8Array | null, t3: Uint8Array | null, key: Uint8Array, input: Uint8Array): void;

  /** Optional: whole handshake steps in native code (see NoiseSteps), same results as the steps. */
  noise?: NoiseSteps;

  /** Which X25519 implementation dh() runs (`weft show`, benchmark output); absent: the backend's default. */
  x25519Impl?: string;

  /** X25519(privateKey, publicKey) → 32-byte shared secret (RFC 7748 §5). Returns false if all-zero. */
  dh(out: Uint8Array, privateKey: Uint8Array, publicKey: Uint8Array): boolean;

  /** Public key of a (clamped) private key. */
  publicKey(out: Uint8Array, privateKey: Uint8Array): void;

  /** A fresh clamped X25519 private key (RFC 7748 §5 clamping). Allocates. */
  generatePrivateKey(): Uint8Array;

  /** Fill `out` with cryptographically secure random bytes. */
  randomFill(out: Uint8Array): void;
}
