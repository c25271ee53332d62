/**
 * The Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s handshake as WireGuard instantiates it
 * (whitepaper §5.4.2 initiation, §5.4.3 response, §5.4.5 transport key derivation).
 *
 * Notation of the whitepaper: C (chaining key), H (hash), HASH = BLAKE2s-256,
 * KDF_n = HKDF with HMAC-BLAKE2s (src/crypto/kdf.ts), AEAD = ChaCha20-Poly1305 with a zero nonce
 * (each key is used exactly once), DH = X25519.
 *
 *   Ci := HASH(CONSTRUCTION);  Hi := HASH(Ci ‖ IDENTIFIER);  Hi := HASH(Hi ‖ Spub_r)
 *   initiation: e → Ci := KDF1(Ci, Epub_i), Hi := HASH(Hi ‖ Epub_i)
 *               es → (Ci, κ) := KDF2(Ci, DH(Epriv_i, Spub_r)); static := AEAD(κ, 0, Spub_i, Hi); Hi := HASH(Hi ‖ static)
 *               ss → (Ci, κ) := KDF2(Ci, DH(Spriv_i, Spub_r)); timestamp := AEAD(κ, 0, TAI64N, Hi); Hi := HASH(Hi ‖ timestamp)
 *   response:   e → Cr := KDF1(Cr, Epub_r), Hr := HASH(Hr ‖ Epub_r)
 *               ee, se → Cr := KDF1(Cr, DH(Epriv_r, Epub_i)); Cr := KDF1(Cr, DH(Epriv_r, Spub_i))
 *               psk → (Cr, τ, κ) := KDF3(Cr, Q); Hr := HASH(Hr ‖ τ); empty := AEAD(κ, 0, ε, Hr); Hr := HASH(Hr ‖ empty)
 *   transport:  (T_send_i = T_recv_r, T_recv_i = T_send_r) := KDF2(C, ε)
 *
 * Design: this module is pure protocol arithmetic. Randomness (ephemeral keys, sender indices)
 * and time (TAI64N, flood window) are arguments, so a test can reproduce a captured handshake
 * byte for byte. The index table, peers, cookies/macs and timers live in device.ts. Nothing here
 * allocates after construction: per-peer state is in fixed arrays of a `Handshake`, and
 * intermediates live in scratch arrays of the `NoiseContext` (all calls are synchronous).
 * When the backend offers whole native steps (`backend.noise`, native/weft_noise.c) each message
 * is one call instead; the arrays are views of one buffer per object in the layout NoiseSteps
 * documents, so the native steps read and write them directly. Both paths give the same bytes.
 */
import type { CryptoBackend, NoiseSteps } from '../crypto/backend.js';
import { kdf1, kdf2, kdf3 } from '../crypto/kdf.js';
import { isZeroKey } from '../crypto/keys.js';
import { NONCE_LEN } from '../crypto/sizes.js';
import { HANDSHAKE_INITIATION_RATE } from './constants.js';
import {
  INITIATION_EPHEMERAL_OFFSET,
  INITIATION_SENDER_OFFSET,
  INITIATION_SIZE,
  INITIATION_STATIC_LEN,
  INITIATION_STATIC_OFFSET,
  INITIATION_TIMESTAMP_LEN,
  INITIATION_TIMESTAMP_OFFSET,
  KEY_LEN,
  MESSAGE_INITIATION,
  MESSAGE_RESPONSE,
  RESPONSE_EMPTY_LEN,
  RESPONSE_EMPTY_OFFSET,
  RESPONSE_EPHEMERAL_OFFSET,
  RESPONSE_RECEIVER_OFFSET,
  RESPONSE_SENDER_OFFSET,
  RESPONSE_SIZE,
  TIMESTAMP_LEN,
  TYPE_OFFSET,
  readU32LE,
  writeU32LE,
} from './messages.js';
import { compareTai64n } from './tai64n.js';

const encoder = new TextEncoder();
/** Noise protocol name, hashed into the initial chaining key (whitepaper §5.4). */
export const CONSTRUCTION = encoder.encode('Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s');
/** WireGuard's prologue, mixed into the initial hash. */
export const IDENTIFIER = encoder.encode('WireGuard v1 zx2c4 Jason@zx2c4.com');

/** Every handshake AEAD key is used exactly once, so its nonce is zero (whitepaper §5.4). */
const ZERO_NONCE = new Uint8Array(NONCE_LEN);
/** ε: the empty message (response payload, transport KDF input). */
const EMPTY = new Uint8Array(0);

/** Handshake states (wireguard-go's names). */
export const HANDSHAKE_ZEROED = 0;
export const HANDSHAKE_INITIATION_CREATED = 1;
export const HANDSHAKE_INITIATION_CONSUMED = 2;
export const HANDSHAKE_RESPONSE_CREATED = 3;
export const HANDSHAKE_RESPONSE_CONSUMED = 4;

/** Outcome of finishing an initiation (what went wrong is a counted drop reason in device.ts). */
export const INITIATION_OK = 0;
export const INITIATION_NO_STATIC_SECRET = 1;
export const INITIATION_DECRYPT_FAILED = 2;
export const INITIATION_REPLAYED = 3;
export const INITIATION_FLOOD = 4;

/** Peer tables alive in this thread (61 KB each): at most MAX_PEER_TABLES, the rest use ladders. */
export const MAX_PEER_TABLES = 1024;
let liveTables = 0;
const tables = new FinalizationRegistry<number>(() => {
  liveTables--;
});

/** This device's static key pair. `hasKey` is false until a private key is configured. */
export class StaticIdentity {
  /** privateKey ‖ publicKey (NoiseSteps' identity layout). */
  readonly keys = new Uint8Array(2 * KEY_LEN);
  readonly privateKey = this.keys.subarray(0, KEY_LEN);
  readonly publicKey = this.keys.subarray(KEY_LEN, 2 * KEY_LEN);
  hasKey = false;

  set(backend: CryptoBackend, privateKey: Uint8Array | null): void {
    if (privateKey === null) {
      this.privateKey.fill(0);
      this.publicKey.fill(0);
      this.hasKey = false;
      return;
    }
    if (privateKey.length !== KEY_LEN)
      throw new RangeError(`a private key is ${KEY_LEN} bytes, got ${privateKey.length}`);
    this.privateKey.set(privateKey);
    backend.publicKey(this.publicKey, this.privateKey);
    this.hasKey = true;
  }
}

/**
 * Per-peer handshake state (whitepaper §5.4: the initiator's and responder's Hi/Ci, ephemeral
 * keys, indices) plus the replay/flood memory of §5.1, which survives handshakes.
 */
export class Handshake {
  state = HANDSHAKE_ZEROED;
  /** The arrays below, in NoiseSteps' handshake layout. */
  readonly keys = new Uint8Array(7 * KEY_LEN);
  readonly hash = this.keys.subarray(0, KEY_LEN);
  readonly chainKey = this.keys.subarray(KEY_LEN, 2 * KEY_LEN);
  readonly presharedKey = this.keys.subarray(2 * KEY_LEN, 3 * KEY_LEN);
  readonly localEphemeral = this.keys.subarray(3 * KEY_LEN, 4 * KEY_LEN);
  readonly remoteEphemeral = this.keys.subarray(4 * KEY_LEN, 5 * KEY_LEN);
  /** The peer's static public key. */
  readonly remoteStatic = this.keys.subarray(5 * KEY_LEN, 6 * KEY_LEN);
  /** DH(Spriv_local, Spub_remote), recomputed when either key changes; all zero if invalid. */
  readonly precomputedStaticStatic = this.keys.subarray(6 * KEY_LEN, 7 * KEY_LEN);
  /**
   * The native steps' table of remoteStatic (NoiseSteps.buildTable): DH(ephemeral, remote static)
   * in both roles becomes a fixed-base multiplication (~3x faster than a ladder). ~61 KB, built
   * by precompute() while fewer than MAX_PEER_TABLES exist in this thread; null: the ladder.
   */
  peerTable: Uint8Array | null = null;
  private tableTried = false;
  /** Greatest TAI64N accepted from this peer (replay protection, never reset by clear()). */
  readonly lastTimestamp = new Uint8Array(TIMESTAMP_LEN);
  /** `now` of the last consumed initiation (flood protection). */
  lastInitiationConsumption = Number.NEGATIVE_INFINITY;
  /** `now` of the last initiation or response we sent (initiations are paced by Rekey-Timeout). */
  lastSentHandshake = Number.NEGATIVE_INFINITY;
  localIndex = 0;
  remoteIndex = 0;

  constructor(remoteStatic: Uint8Array) {
    this.remoteStatic.set(remoteStatic);
  }

  /** Erase ephemeral secrets and the transcript (not the replay memory or the PSK). */
  clear(): void {
    this.localEphemeral.fill(0);
    this.remoteEphemeral.fill(0);
    this.chainKey.fill(0);
    this.hash.fill(0);
    this.localIndex = 0;
    this.remoteIndex = 0;
    this.state = HANDSHAKE_ZEROED;
  }

  /** Recompute the static-static DH after a change of either static key. */
  precompute(backend: CryptoBackend, identity: StaticIdentity): void {
    if (!identity.hasKey || !backend.dh(this.precomputedStaticStatic, identity.privateKey, this.remoteStatic)) {
      this.precomputedStaticStatic.fill(0);
    }
    // remoteStatic never changes for a Handshake: one attempt is enough.
    const steps = backend.noise;
    if (steps !== undefined && !this.tableTried && liveTables < MAX_PEER_TABLES) {
      this.tableTried = true;
      const t = new Uint8Array(steps.tableSize);
      if (steps.buildTable(t, this.remoteStatic)) {
        this.peerTable = t;
        liveTables++;
        tables.register(this, 0);
      }
    }
  }
}

/** The handshake arithmetic bound to one crypto backend, with its scratch space. */
export class NoiseContext {
  readonly initialChainKey = new Uint8Array(KEY_LEN);
  readonly initialHash = new Uint8Array(KEY_LEN);

  private readonly ss = new Uint8Array(KEY_LEN);
  private readonly key = new Uint8Array(KEY_LEN);
  private readonly tau = new Uint8Array(KEY_LEN);
  private readonly tmp = new Uint8Array(KEY_LEN);
  private readonly timestamp = new Uint8Array(TIMESTAMP_LEN);
  // An initiation between beginConsumeInitiation() and finishConsumeInitiation() (or a response
  // being consumed), in NoiseSteps' pending layout.
  private readonly pendingState = new Uint8Array(3 * KEY_LEN);
  private readonly pendingHash = this.pendingState.subarray(0, KEY_LEN);
  private readonly pendingChainKey = this.pendingState.subarray(KEY_LEN, 2 * KEY_LEN);
  private readonly pendingEphemeral = this.pendingState.subarray(2 * KEY_LEN, 3 * KEY_LEN);
  private pendingSender = 0;
  private pending = false;
  private readonly steps: NoiseSteps | null;

  constructor(readonly backend: CryptoBackend) {
    this.steps = backend.noise ?? null;
    backend.hash(this.initialChainKey, CONSTRUCTION);
    backend.hash(this.initialHash, this.initialChainKey, IDENTIFIER);
  }

  /** H := HASH(H ‖ data[off, off+len)). */
  private mixHash(h: Uint8Array, data: Uint8Array, off: number, len: number): void {
    this.backend.hash(this.tmp, h, data.subarray(off, off + len));
    h.set(this.tmp);
  }

  /**
   * Writes a handshake initiation for `hs` into msg[off, off+148) (mac1/mac2 left zero: the
   * cookie generator adds them) and moves `hs` to INITIATION_CREATED with localIndex = sender.
   * `ephemeralPrivate` (32 bytes, any value: X25519 clamps) and the 12-byte TAI64N `timestamp`
   * are inputs so that tests can reproduce captured messages. Returns false (state zeroed) when
   * no message can be made: no private key, or a DH result of all zeros.
   */
  createInitiation(
    identity: StaticIdentity,
    hs: Handshake,
    msg: Uint8Array,
    off: number,
    ephemeralPrivate: Uint8Array,
    timestamp: Uint8Array,
    sender: number,
  ): boolean {
    if (!identity.hasKey || isZeroKey(hs.precomputedStaticStatic)) {
      hs.clear();
      return false;
    }
    msg.fill(0, off, off + INITIATION_SIZE);
    hs.localEphemeral.set(ephemeralPrivate);
    if (this.steps !== null) {
      if (!this.steps.initiation(hs.keys, identity.keys, msg, off, timestamp, hs.peerTable)) {
        hs.clear();
        return false;
      }
    } else if (!this.initiationSteps(identity, hs, msg, off, timestamp)) {
      return false;
    }
    writeU32LE(msg, off + TYPE_OFFSET, MESSAGE_INITIATION);
    writeU32LE(msg, off + INITIATION_SENDER_OFFSET, sender);
    hs.localIndex = sender;
    hs.state = HANDSHAKE_INITIATION_CREATED;
    return true;
  }

  /** createInitiation's message body, step by step (no native steps); false: hs cleared. */
  private initiationSteps(
    identity: StaticIdentity,
    hs: Handshake,
    msg: Uint8Array,
    off: number,
    timestamp: Uint8Array,
  ): boolean {
    const b = this.backend;
    const h = hs.hash;
    const ck = hs.chainKey;
    h.set(this.initialHash);
    ck.set(this.initialChainKey);
    this.mixHash(h, hs.remoteStatic, 0, KEY_LEN);
    const ePub = msg.subarray(off + INITIATION_EPHEMERAL_OFFSET, off + INITIATION_EPHEMERAL_OFFSET + KEY_LEN);
    b.publicKey(ePub, hs.localEphemeral);
    kdf1(b, ck, ck, ePub);
    this.mixHash(h, ePub, 0, KEY_LEN);
    if (!b.dh(this.ss, hs.localEphemeral, hs.remoteStatic)) {
      this.ss.fill(0);
      hs.clear();
      return false;
    }
    kdf2(b, ck, this.key, ck, this.ss);
    b.seal(this.key, ZERO_NONCE, h, identity.publicKey, 0, KEY_LEN, msg, off + INITIATION_STATIC_OFFSET);
    this.mixHash(h, msg, off + INITIATION_STATIC_OFFSET, INITIATION_STATIC_LEN);
    kdf2(b, ck, this.key, ck, hs.precomputedStaticStatic);
    b.seal(this.key, ZERO_NONCE, h, timestamp, 0, TIMESTAMP_LEN, msg, off + INITIATION_TIMESTAMP_OFFSET);
    this.mixHash(h, msg, off + INITIATION_TIMESTAMP_OFFSET, INITIATION_TIMESTAMP_LEN);
    this.ss.fill(0);
    this.key.fill(0);
    return true;
  }

  /**
   * First half of consuming an initiation (responder): decrypts the initiator's static public
   * key into `outStatic` so the caller can find the peer. Intermediate state stays in this
   * context until finishConsumeInitiation() or abandonInitiation(). Returns false when the
   * message does not decrypt (or we have no private key).
   */
  beginConsumeInitiation(identity: StaticIdentity, msg: Uint8Array, off: number, outStatic: Uint8Array): boolean {
    const b = this.backend;
    this.pending = false;
    if (!identity.hasKey) return false;
    if (this.steps !== null) {
      if (!this.steps.beginConsume(this.pendingState, identity.keys, msg, off, outStatic)) {
        this.abandonInitiation();
        return false;
      }
      this.pendingSender = readU32LE(msg, off + INITIATION_SENDER_OFFSET);
      this.pending = true;
      return true;
    }
    const h = this.pendingHash;
    const ck = this.pendingChainKey;
    const e = this.pendingEphemeral;
    e.set(msg.subarray(off + INITIATION_EPHEMERAL_OFFSET, off + INITIATION_EPHEMERAL_OFFSET + KEY_LEN));
    b.hash(h, this.initialHash, identity.publicKey);
    this.mixHash(h, e, 0, KEY_LEN);
    kdf1(b, ck, this.initialChainKey, e);
    if (!b.dh(this.ss, identity.privateKey, e)) {
      this.abandonInitiation();
      return false;
    }
    kdf2(b, ck, this.key, ck, this.ss);
    this.ss.fill(0);
    const ok = b.open(
      this.key,
      ZERO_NONCE,
      h,
      msg,
      off + INITIATION_STATIC_OFFSET,
      INITIATION_STATIC_LEN,
      outStatic,
      0,
    );
    this.key.fill(0);
    if (!ok) {
      this.abandonInitiation();
      return false;
    }
    this.mixHash(h, msg, off + INITIATION_STATIC_OFFSET, INITIATION_STATIC_LEN);
    this.pendingSender = readU32LE(msg, off + INITIATION_SENDER_OFFSET);
    this.pending = true;
    return true;
  }

  /** Wipe a pending initiation (unknown peer, or any other reason to stop). */
  abandonInitiation(): void {
    this.pendingHash.fill(0);
    this.pendingChainKey.fill(0);
    this.pendingEphemeral.fill(0);
    this.pending = false;
  }

  /**
   * Second half: authenticates the initiator (static-static DH of the peer `hs`), decrypts the
   * TAI64N timestamp, enforces replay protection (strictly greater than the greatest accepted)
   * and flood protection (more than 20 ms since the last consumed initiation), then commits the
   * transcript into `hs` (state INITIATION_CONSUMED). Returns INITIATION_OK or a failure code.
   */
  finishConsumeInitiation(hs: Handshake, msg: Uint8Array, off: number, now: number): number {
    const b = this.backend;
    if (!this.pending) throw new Error('finishConsumeInitiation without a successful beginConsumeInitiation');
    const h = this.pendingHash;
    const ck = this.pendingChainKey;
    if (isZeroKey(hs.precomputedStaticStatic)) {
      this.abandonInitiation();
      return INITIATION_NO_STATIC_SECRET;
    }
    let ok: boolean;
    if (this.steps !== null) {
      ok = this.steps.finishConsume(this.pendingState, hs.keys, msg, off, this.timestamp);
    } else {
      kdf2(b, ck, this.key, ck, hs.precomputedStaticStatic);
      ok = b.open(
        this.key,
        ZERO_NONCE,
        h,
        msg,
        off + INITIATION_TIMESTAMP_OFFSET,
        INITIATION_TIMESTAMP_LEN,
        this.timestamp,
        0,
      );
      this.key.fill(0);
      if (ok) this.mixHash(h, msg, off + INITIATION_TIMESTAMP_OFFSET, INITIATION_TIMESTAMP_LEN);
    }
    if (!ok) {
      this.abandonInitiation();
      return INITIATION_DECRYPT_FAILED;
    }
    if (compareTai64n(this.timestamp, 0, hs.lastTimestamp, 0) <= 0) {
      this.abandonInitiation();
      return INITIATION_REPLAYED;
    }
    if (now - hs.lastInitiationConsumption <= HANDSHAKE_INITIATION_RATE) {
      this.abandonInitiation();
      return INITIATION_FLOOD;
    }
    hs.hash.set(h);
    hs.chainKey.set(ck);
    hs.remoteEphemeral.set(this.pendingEphemeral);
    hs.remoteIndex = this.pendingSender;
    hs.lastTimestamp.set(this.timestamp);
    if (now > hs.lastInitiationConsumption) hs.lastInitiationConsumption = now;
    hs.state = HANDSHAKE_INITIATION_CONSUMED;
    this.abandonInitiation();
    return INITIATION_OK;
  }

  /** The TAI64N timestamp decrypted by the last successful finishConsumeInitiation (a view). */
  lastConsumedTimestamp(): Uint8Array {
    return this.timestamp;
  }

  /**
   * Writes a handshake response for a consumed initiation into msg[off, off+92) (macs zero) and
   * moves `hs` to RESPONSE_CREATED with localIndex = sender. Returns false if `hs` holds no
   * consumed initiation or a DH result is all zeros (state zeroed then).
   */
  createResponse(hs: Handshake, msg: Uint8Array, off: number, ephemeralPrivate: Uint8Array, sender: number): boolean {
    if (hs.state !== HANDSHAKE_INITIATION_CONSUMED) return false;
    msg.fill(0, off, off + RESPONSE_SIZE);
    hs.localEphemeral.set(ephemeralPrivate);
    if (this.steps !== null) {
      if (!this.steps.response(hs.keys, msg, off, hs.peerTable)) return this.failResponse(hs);
    } else if (!this.responseSteps(hs, msg, off)) {
      return false;
    }
    writeU32LE(msg, off + TYPE_OFFSET, MESSAGE_RESPONSE);
    writeU32LE(msg, off + RESPONSE_SENDER_OFFSET, sender);
    writeU32LE(msg, off + RESPONSE_RECEIVER_OFFSET, hs.remoteIndex);
    hs.localIndex = sender;
    hs.state = HANDSHAKE_RESPONSE_CREATED;
    return true;
  }

  /** createResponse's message body, step by step (no native steps); false: hs cleared. */
  private responseSteps(hs: Handshake, msg: Uint8Array, off: number): boolean {
    const b = this.backend;
    const h = hs.hash;
    const ck = hs.chainKey;
    const ePub = msg.subarray(off + RESPONSE_EPHEMERAL_OFFSET, off + RESPONSE_EPHEMERAL_OFFSET + KEY_LEN);
    b.publicKey(ePub, hs.localEphemeral);
    this.mixHash(h, ePub, 0, KEY_LEN);
    kdf1(b, ck, ck, ePub);
    if (!b.dh(this.ss, hs.localEphemeral, hs.remoteEphemeral)) return this.failResponse(hs);
    kdf1(b, ck, ck, this.ss);
    if (!b.dh(this.ss, hs.localEphemeral, hs.remoteStatic)) return this.failResponse(hs);
    kdf1(b, ck, ck, this.ss);
    this.ss.fill(0);
    kdf3(b, ck, this.tau, this.key, ck, hs.presharedKey);
    this.mixHash(h, this.tau, 0, KEY_LEN);
    b.seal(this.key, ZERO_NONCE, h, EMPTY, 0, 0, msg, off + RESPONSE_EMPTY_OFFSET);
    this.mixHash(h, msg, off + RESPONSE_EMPTY_OFFSET, RESPONSE_EMPTY_LEN);
    this.tau.fill(0);
    this.key.fill(0);
    return true;
  }

  private failResponse(hs: Handshake): boolean {
    this.ss.fill(0);
    hs.clear();
    return false;
  }

  /**
   * Consumes a handshake response for our initiation `hs` (the caller found `hs` through the
   * message's receiver index). On success the transcript is committed, remoteIndex = the
   * responder's sender index and the state is RESPONSE_CONSUMED; on failure `hs` is unchanged.
   */
  consumeResponse(identity: StaticIdentity, hs: Handshake, msg: Uint8Array, off: number): boolean {
    const b = this.backend;
    if (hs.state !== HANDSHAKE_INITIATION_CREATED || !identity.hasKey) return false;
    const h = this.pendingHash;
    const ck = this.pendingChainKey;
    if (this.steps !== null) {
      if (!this.steps.consumeResponse(this.pendingState, hs.keys, identity.keys, msg, off)) {
        this.abandonInitiation();
        return false;
      }
      return this.commitResponse(hs, msg, off);
    }
    const e = msg.subarray(off + RESPONSE_EPHEMERAL_OFFSET, off + RESPONSE_EPHEMERAL_OFFSET + KEY_LEN);
    b.hash(h, hs.hash, e);
    kdf1(b, ck, hs.chainKey, e);
    let ok = b.dh(this.ss, hs.localEphemeral, e);
    if (ok) {
      kdf1(b, ck, ck, this.ss);
      ok = b.dh(this.ss, identity.privateKey, e);
    }
    if (ok) {
      kdf1(b, ck, ck, this.ss);
      kdf3(b, ck, this.tau, this.key, ck, hs.presharedKey);
      this.mixHash(h, this.tau, 0, KEY_LEN);
      ok = b.open(this.key, ZERO_NONCE, h, msg, off + RESPONSE_EMPTY_OFFSET, RESPONSE_EMPTY_LEN, EMPTY, 0);
    }
    this.ss.fill(0);
    this.tau.fill(0);
    this.key.fill(0);
    if (!ok) {
      this.abandonInitiation();
      return false;
    }
    this.mixHash(h, msg, off + RESPONSE_EMPTY_OFFSET, RESPONSE_EMPTY_LEN);
    return this.commitResponse(hs, msg, off);
  }

  /** The consumed response's transcript (pending) becomes hs's. */
  private commitResponse(hs: Handshake, msg: Uint8Array, off: number): boolean {
    hs.hash.set(this.pendingHash);
    hs.chainKey.set(this.pendingChainKey);
    hs.remoteIndex = readU32LE(msg, off + RESPONSE_SENDER_OFFSET);
    hs.state = HANDSHAKE_RESPONSE_CONSUMED;
    this.abandonInitiation();
    return true;
  }

  /**
   * Derives the transport keys from a finished handshake (whitepaper §5.4.5) and zeroes the
   * transcript and ephemeral secret. Returns 1 for the initiator (RESPONSE_CONSUMED), 0 for the
   * responder (RESPONSE_CREATED), or -1 if the handshake is not finished (nothing written).
   */
  deriveTransportKeys(hs: Handshake, sendKey: Uint8Array, receiveKey: Uint8Array): number {
    let role: number;
    if (hs.state === HANDSHAKE_RESPONSE_CONSUMED) {
      kdf2(this.backend, sendKey, receiveKey, hs.chainKey, EMPTY);
      role = 1;
    } else if (hs.state === HANDSHAKE_RESPONSE_CREATED) {
      kdf2(this.backend, receiveKey, sendKey, hs.chainKey, EMPTY);
      role = 0;
    } else {
      return -1;
    }
    hs.chainKey.fill(0);
    hs.hash.fill(0);
    hs.localEphemeral.fill(0);
    hs.state = HANDSHAKE_ZEROED;
    return role;
  }
}
