/**
 * The WireGuard engine the daemon drives: bytes and `now` in, what to send / deliver / drop out.
 * No sockets, timers or clock (every method takes `now`, wall-clock Unix ms, because handshake
 * timestamps are TAI64N of wall-clock time).
 *
 * Data path (zero allocation per packet):
 *   encrypt(buf, off, len, now, out) — an IP packet read from TUN at buf[off, off+len), with
 *     off >= 16 (headroom for the transport header) and tailroom for padding (to 16, capped at
 *     the MTU) + the 16-byte tag. With a usable session it is encrypted in place and `out` says
 *     "send buf[start, start+length) to endpoint". Without one the packet is copied into an
 *     engine buffer and staged (bounded queue per peer, oldest dropped first) and a handshake
 *     initiation is queued in the outbox.
 *   receive(buf, off, len, from, now, underLoad, out) — one UDP payload. Transport data is
 *     decrypted in place (plaintext at buf[off+16, ...), trimmed to the inner IP length);
 *     handshake messages are consumed and any reply is queued in the outbox.
 *   poll(now) runs expired timers; nextDeadline() says when to call it next.
 *   popOutgoing(msg) / releaseOutgoing(slot) drain the outbox: handshake messages, cookie
 *     replies, keepalives and staged packets that became sendable. The bytes stay valid (and
 *     owned by the engine) until releaseOutgoing(slot).
 *
 * Failure kinds: API misuse throws (TypeError/RangeError); bad network input is a counted drop
 * (`drops[DROP_*]`), never an exception; configuration errors are `WireGuardConfigError`.
 *
 * Behaviour follows the whitepaper and, where the whitepaper leaves a choice, wireguard-go:
 * the same message checks, handshake pacing (one initiation per Rekey-Timeout), retry/give-up
 * counts, keypair rotation, timers, roaming, rx/tx byte accounting and UAPI semantics.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { parseAddress, type Prefix } from '../packet/addr.js';
import { IPV4_MIN_HEADER_LEN, IPV4_TOTAL_LENGTH_OFFSET } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN, IPV6_PAYLOAD_LENGTH_OFFSET } from '../packet/ipv6.js';
import { AllowedIps } from './allowedips.js';
import {
  DEFAULT_MTU, MAX_TIMER_HANDSHAKES, PADDING_MULTIPLE, QUEUE_STAGED_SIZE, REJECT_AFTER_TIME, REKEY_AFTER_TIME,
  REKEY_ON_RECEIVE_AGE, REKEY_TIMEOUT, UNDER_LOAD_AFTER_TIME, ZERO_KEY_MATERIAL_AFTER, KEEPALIVE_TIMEOUT,
} from './constants.js';
import { CookieChecker } from './cookie.js';
import {
  DROP_BAD_LENGTH, DROP_COOKIE_DECRYPT_FAILED, DROP_COOKIE_REQUIRED, DROP_DECRYPT_FAILED, DROP_HANDSHAKE_FAILED,
  DROP_INITIATION_DECRYPT_FAILED, DROP_INITIATION_FLOOD, DROP_INITIATION_REPLAY, DROP_INNER_INVALID,
  DROP_INNER_SOURCE_NOT_ALLOWED, DROP_INVALID_MAC1, DROP_KEYPAIR_EXPIRED, DROP_NO_ENDPOINT, DROP_NO_PRIVATE_KEY,
  DROP_NO_ROUTE, DROP_OUTBOUND_INVALID, DROP_OUTBOX_FULL, DROP_PACKET_TOO_BIG, DROP_POOL_EXHAUSTED, DROP_RATE_LIMITED,
  DROP_REASON_COUNT, DROP_REPLAYED_COUNTER, DROP_RESPONSE_DECRYPT_FAILED, DROP_RESPONSE_UNEXPECTED,
  DROP_STAGED_FLUSHED, DROP_STAGED_QUEUE_FULL, DROP_TOO_SHORT, DROP_UNKNOWN_PEER, DROP_UNKNOWN_RECEIVER,
  DROP_UNKNOWN_TYPE,
} from './drops.js';
import { Keypair, writeNonce } from './keypair.js';
import {
  AEAD_TAG_LEN, CLASSIFY_BAD_LENGTH, CLASSIFY_TOO_SHORT, COOKIE_NONCE_LEN, COOKIE_REPLY_RECEIVER_OFFSET,
  INITIATION_SIZE, KEY_LEN, MESSAGE_COOKIE_REPLY, MESSAGE_INITIATION, MESSAGE_TRANSPORT, RESPONSE_RECEIVER_OFFSET,
  RESPONSE_SIZE, TRANSPORT_COUNTER_OFFSET, TRANSPORT_HEADER_SIZE, TRANSPORT_OVERHEAD, TRANSPORT_RECEIVER_OFFSET,
  classifyMessage, isHandshakeMessage, readU32LE, writeTransportHeader,
} from './messages.js';
import {
  HANDSHAKE_INITIATION_CREATED, HANDSHAKE_RESPONSE_CONSUMED, INITIATION_DECRYPT_FAILED, INITIATION_FLOOD,
  INITIATION_OK, INITIATION_REPLAYED, NoiseContext, StaticIdentity,
} from './noise.js';
import { keyHex, Peer, type Endpoint } from './peer.js';
import {
  BufferPool, OUT_COOKIE_REPLY, OUT_INITIATION, OUT_KEEPALIVE, OUT_RESPONSE, OUT_TRANSPORT, Outbox, OutgoingMessage,
} from './pool.js';
import { RateLimiter } from './ratelimiter.js';
import { writeTai64n } from './tai64n.js';
import { planSet, type UapiDeviceSnapshot, type UapiOperation, type UapiSetPlan } from './uapi.js';

/** encrypt() results. */
export const ENCRYPT_DROP = 0;
/** Encrypted in place: send out.buf-relative [start, start+length) to out.endpoint. */
export const ENCRYPT_SEND = 1;
/** No usable session: the packet was staged (copied) and a handshake is under way. */
export const ENCRYPT_STAGED = 2;

/** receive() results. */
export const RECEIVE_DROP = 0;
/** Plaintext IP packet at buf[start, start+length): write it to TUN. */
export const RECEIVE_DELIVER = 1;
/** An authenticated keepalive: nothing to deliver. */
export const RECEIVE_KEEPALIVE = 2;
/** A handshake message or cookie reply was consumed; the outbox may hold replies. */
export const RECEIVE_HANDSHAKE = 3;

/** Caller-owned, reused result of encrypt(). */
export class EncryptResult {
  action = ENCRYPT_DROP;
  /** DROP_* when action is ENCRYPT_DROP. */
  reason = -1;
  peer: Peer | null = null;
  endpoint: Endpoint | null = null;
  start = 0;
  length = 0;
}

/** Caller-owned, reused result of receive(). */
export class ReceiveResult {
  action = RECEIVE_DROP;
  reason = -1;
  peer: Peer | null = null;
  start = 0;
  length = 0;
}

/** Configuration the daemon or UAPI tried to apply is invalid. */
export class WireGuardConfigError extends Error {
  override readonly name = 'WireGuardConfigError';
}

export interface DeviceOptions {
  backend: CryptoBackend;
  /** Uniform [0, 1) source for timer jitter (inject a seeded one in tests). Default Math.random. */
  random?: () => number;
  /** TUN MTU: plaintext padding is capped at it. Default 1420. */
  mtu?: number;
  /** Largest IP packet that can be staged before a session exists. Default 2016 (2 KiB slots). */
  maxPacketSize?: number;
  /** Engine buffers (staged packets + queued messages), allocated lazily. Default 2048. */
  bufferPoolSize?: number;
  /** Outbox capacity. Default 1024. */
  outboxCapacity?: number;
  /** Staged packets per peer. Default 128 (wireguard-go). */
  stagedQueueSize?: number;
}

const DEFAULT_MAX_PACKET_SIZE = 2016;
const DEFAULT_BUFFER_POOL_SIZE = 2048;
const DEFAULT_OUTBOX_CAPACITY = 1024;
const NEVER = Number.POSITIVE_INFINITY;
const SOURCE_SCRATCH_LEN = 128;

/** An index-table entry: a handshake in flight (keypair null) or a session. */
class IndexEntry {
  constructor(readonly peer: Peer, public keypair: Keypair | null) {}
}

function isZeroKey(k: Uint8Array): boolean {
  let acc = 0;
  for (let i = 0; i < k.length; i++) acc |= k[i];
  return acc === 0;
}

function checkKey(k: Uint8Array, what: string): void {
  if (!(k instanceof Uint8Array) || k.length !== KEY_LEN) throw new TypeError(`${what} must be a ${KEY_LEN}-byte Uint8Array`);
}

function checkEndpoint(ep: Endpoint): void {
  if (typeof ep.address !== 'string' || ep.address.length === 0) throw new WireGuardConfigError('endpoint address must be a non-empty IP literal');
  if (!Number.isInteger(ep.port) || ep.port < 0 || ep.port > 0xffff) throw new WireGuardConfigError(`endpoint port ${ep.port} is not in 0..65535`);
}

/**
 * Plaintext length after padding to a multiple of 16, capped at the MTU (wireguard-go's rule,
 * including packets longer than the MTU, whose last MTU-sized unit is padded). mtu 0: no cap.
 */
export function paddedLength(len: number, mtu: number): number {
  if (mtu === 0) return roundUpToPadding(len);
  let last = len;
  if (last > mtu) last %= mtu;
  let padded = roundUpToPadding(last);
  if (padded > mtu) padded = mtu;
  return len + (padded - last);
}

// A module-level function, not a closure inside paddedLength: a closure there was allocated on
// every packet (56 bytes, measured with the sampling heap profiler).
function roundUpToPadding(n: number): number {
  return (n + PADDING_MULTIPLE - 1) & ~(PADDING_MULTIPLE - 1);
}

/**
 * Our session indices → entries, keyed by the index's int32 bit pattern. Indices are uint32
 * everywhere else; as a key, a uint32 ≥ 2^31 would be a boxed heap number in V8 and cost an
 * allocation on every transport message, while an int32 is always a small integer.
 */
class IndexTable {
  private readonly map = new Map<number, IndexEntry>();

  get size(): number {
    return this.map.size;
  }

  get(index: number): IndexEntry | undefined {
    return this.map.get(index | 0);
  }

  /** The entry for the little-endian index at buf[off, off+4) (a receiver field). */
  getAt(buf: Uint8Array, off: number): IndexEntry | undefined {
    return this.map.get(buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24));
  }

  has(index: number): boolean {
    return this.map.has(index | 0);
  }

  set(index: number, e: IndexEntry): void {
    this.map.set(index | 0, e);
  }

  delete(index: number): boolean {
    return this.map.delete(index | 0);
  }
}

export class Device {
  readonly backend: CryptoBackend;
  /** Drops by DROP_* reason. */
  readonly drops = new Float64Array(DROP_REASON_COUNT);
  /** Listen port and fwmark are model fields: the daemon applies them to its sockets. */
  listenPort = 0;
  fwmark = 0;

  private mtuValue: number;
  private readonly random: () => number;
  private readonly noise: NoiseContext;
  private readonly identity = new StaticIdentity();
  private readonly cookieChecker: CookieChecker;
  private readonly rateLimiter = new RateLimiter();
  private readonly allowedIps = new AllowedIps<Peer>();
  private readonly peerMap = new Map<string, Peer>();
  private peerList: Peer[] = [];
  private readonly indexTable = new IndexTable();
  private readonly pool: BufferPool;
  private readonly outbox: Outbox<Peer>;
  private readonly maxPacketSize: number;
  private readonly stagedQueueSize: number;
  private underLoadUntil = Number.NEGATIVE_INFINITY;

  // Scratch (all calls are synchronous).
  private readonly nonce = new Uint8Array(12);
  private readonly ephemeral = new Uint8Array(KEY_LEN);
  private readonly timestamp = new Uint8Array(12);
  private readonly index4 = new Uint8Array(4);
  private readonly staticKey = new Uint8Array(KEY_LEN);
  private readonly cookieNonce = new Uint8Array(COOKIE_NONCE_LEN);
  private readonly sourceScratch = new Uint8Array(SOURCE_SCRATCH_LEN);
  private readonly encoder = new TextEncoder();

  constructor(options: DeviceOptions) {
    if (options === null || typeof options !== 'object' || options.backend === undefined) {
      throw new TypeError('Device needs { backend: CryptoBackend }');
    }
    this.backend = options.backend;
    this.random = options.random ?? Math.random;
    this.mtuValue = DEFAULT_MTU;
    if (options.mtu !== undefined) this.mtu = options.mtu;
    this.maxPacketSize = options.maxPacketSize ?? DEFAULT_MAX_PACKET_SIZE;
    if (!Number.isInteger(this.maxPacketSize) || this.maxPacketSize < 64 || this.maxPacketSize > 65535) {
      throw new RangeError(`maxPacketSize must be an integer in 64..65535, got ${this.maxPacketSize}`);
    }
    const slotSize = TRANSPORT_HEADER_SIZE + paddedLength(this.maxPacketSize, 0) + AEAD_TAG_LEN;
    this.pool = new BufferPool(slotSize, options.bufferPoolSize ?? DEFAULT_BUFFER_POOL_SIZE);
    this.outbox = new Outbox<Peer>(options.outboxCapacity ?? DEFAULT_OUTBOX_CAPACITY);
    this.stagedQueueSize = options.stagedQueueSize ?? QUEUE_STAGED_SIZE;
    if (!Number.isInteger(this.stagedQueueSize) || this.stagedQueueSize < 1) {
      throw new RangeError(`stagedQueueSize must be a positive integer, got ${this.stagedQueueSize}`);
    }
    this.noise = new NoiseContext(this.backend);
    this.cookieChecker = new CookieChecker(this.backend);
  }

  /**
   * True for datagrams that announce a handshake message (types 1–3): lets the daemon steer them
   * to a separate bounded queue (and measure its depth for `underLoad`) before calling receive().
   */
  static isHandshakeMessage(buf: Uint8Array, off: number, len: number): boolean {
    return isHandshakeMessage(buf, off, len);
  }

  // ===========================================================================================
  // Configuration (allocates; never on the packet path)

  get mtu(): number {
    return this.mtuValue;
  }

  set mtu(v: number) {
    if (!Number.isInteger(v) || v < 0 || v > 65535) throw new WireGuardConfigError(`MTU must be an integer in 0..65535, got ${v}`);
    this.mtuValue = v;
  }

  /** This device's public key (a copy), or null without a private key. */
  get publicKey(): Uint8Array | null {
    return this.identity.hasKey ? Uint8Array.from(this.identity.publicKey) : null;
  }

  /** This device's private key (a copy), or null. */
  get privateKey(): Uint8Array | null {
    return this.identity.hasKey ? Uint8Array.from(this.identity.privateKey) : null;
  }

  /**
   * Sets (or with null / all zeros, clears) the private key, as wireguard-go does: a peer whose
   * public key is our new public key is removed; static-static DH is recomputed for every peer;
   * handshakes in flight are dropped and current sessions may no longer send (the next packet
   * starts a new handshake). Setting the same key again changes nothing.
   */
  setPrivateKey(key: Uint8Array | null): void {
    if (key !== null) checkKey(key, 'private key');
    const clear = key === null || isZeroKey(key);
    if (clear ? !this.identity.hasKey : this.identity.hasKey && keysEqual(key!, this.identity.privateKey)) return;
    this.identity.set(this.backend, clear ? null : key);
    if (this.identity.hasKey) {
      const self = this.peerMap.get(keyHex(this.identity.publicKey));
      if (self !== undefined) this.removePeerInternal(self);
    }
    this.cookieChecker.init(this.identity.hasKey ? this.identity.publicKey : null);
    for (const peer of this.peerList) {
      peer.handshake.precompute(this.backend, this.identity);
      this.expireCurrentKeypairs(peer);
    }
  }

  /** Adds a peer (no allowed IPs, no endpoint). Throws if it exists or is this device's key. */
  addPeer(publicKey: Uint8Array): Peer {
    checkKey(publicKey, 'public key');
    const id = keyHex(publicKey);
    if (this.peerMap.has(id)) throw new WireGuardConfigError(`peer ${id} already exists`);
    if (this.identity.hasKey && keysEqual(publicKey, this.identity.publicKey)) {
      throw new WireGuardConfigError(`peer ${id} has this device's own public key`);
    }
    const peer = new Peer(this.backend, publicKey, this.random, this.stagedQueueSize);
    peer.handshake.precompute(this.backend, this.identity);
    this.peerMap.set(id, peer);
    this.peerList = [...this.peerList, peer];
    return peer;
  }

  getPeer(publicKey: Uint8Array): Peer | undefined {
    checkKey(publicKey, 'public key');
    return this.peerMap.get(keyHex(publicKey));
  }

  /** All peers in insertion order (a snapshot array). */
  peers(): readonly Peer[] {
    return this.peerList;
  }

  removePeer(peer: Peer): boolean {
    if (peer.removed || this.peerMap.get(peer.id) !== peer) return false;
    this.removePeerInternal(peer);
    return true;
  }

  removeAllPeers(): void {
    for (const p of this.peerList) this.removePeerInternal(p);
  }

  setPresharedKey(peer: Peer, key: Uint8Array | null): void {
    this.checkPeer(peer);
    if (key === null) {
      peer.handshake.presharedKey.fill(0);
      return;
    }
    checkKey(key, 'preshared key');
    peer.handshake.presharedKey.set(key);
  }

  setEndpoint(peer: Peer, endpoint: Endpoint | null): void {
    this.checkPeer(peer);
    if (endpoint !== null) checkEndpoint(endpoint);
    peer.endpoint = endpoint === null ? null : { address: endpoint.address, port: endpoint.port };
  }

  /**
   * Persistent keepalive interval in seconds (0 = off). Turning it on sends a keepalive right
   * away (which starts a handshake if needed), as wireguard-go does.
   */
  setPersistentKeepalive(peer: Peer, seconds: number, now: number): void {
    this.checkPeer(peer);
    if (!Number.isInteger(seconds) || seconds < 0 || seconds > 0xffff) {
      throw new WireGuardConfigError(`persistent keepalive must be 0..65535 seconds, got ${seconds}`);
    }
    const turnedOn = peer.persistentKeepalive === 0 && seconds !== 0;
    peer.persistentKeepalive = seconds;
    if (seconds === 0) peer.timers.persistentKeepalive = NEVER;
    if (turnedOn) this.sendKeepalive(peer, now);
  }

  /** Routes `prefix` to `peer` (moving it from any other peer). */
  addAllowedIp(peer: Peer, prefix: Prefix): void {
    this.checkPeer(peer);
    this.allowedIps.insert(prefix, peer);
  }

  removeAllowedIp(peer: Peer, prefix: Prefix): boolean {
    this.checkPeer(peer);
    return this.allowedIps.remove(prefix, peer);
  }

  clearAllowedIps(peer: Peer): void {
    this.checkPeer(peer);
    this.allowedIps.removeByPeer(peer);
  }

  allowedIpsOf(peer: Peer): Prefix[] {
    return this.allowedIps.prefixesOf(peer);
  }

  /** Starts a handshake now (subject to the one-per-Rekey-Timeout pacing). */
  initiateHandshake(peer: Peer, now: number): void {
    this.checkPeer(peer);
    this.sendHandshakeInitiation(peer, false, now);
  }

  /**
   * Applies a parsed UAPI `set=1` request atomically: the operations were fully validated by
   * parseSet(), and the plan is checked again here before anything changes; then it is applied
   * in order with wireguard-go's semantics (replace_peers first, update_only, remove,
   * replace_allowed_ips, a peer with our own public key ignored, keepalive sent when persistent
   * keepalive is switched on). Throws WireGuardConfigError / TypeError without changing anything.
   */
  applyUapiSet(ops: readonly UapiOperation[], now: number): void {
    this.applyUapiPlan(planSet(ops), now);
  }

  applyUapiPlan(plan: UapiSetPlan, now: number): void {
    // Validate everything first.
    if (plan.privateKey !== undefined) checkKey(plan.privateKey, 'private_key');
    if (plan.listenPort !== undefined && (!Number.isInteger(plan.listenPort) || plan.listenPort < 0 || plan.listenPort > 0xffff)) {
      throw new WireGuardConfigError(`listen_port ${plan.listenPort} is not in 0..65535`);
    }
    if (plan.fwmark !== undefined && (!Number.isInteger(plan.fwmark) || plan.fwmark < 0 || plan.fwmark > 0xffffffff)) {
      throw new WireGuardConfigError(`fwmark ${plan.fwmark} is not a uint32`);
    }
    for (const p of plan.peers) {
      checkKey(p.publicKey, 'public_key');
      if (p.presharedKey !== undefined) checkKey(p.presharedKey, 'preshared_key');
      if (p.endpoint !== undefined) checkEndpoint(p.endpoint);
      const k = p.persistentKeepaliveInterval;
      if (k !== undefined && (!Number.isInteger(k) || k < 0 || k > 0xffff)) {
        throw new WireGuardConfigError(`persistent_keepalive_interval ${k} is not in 0..65535`);
      }
      for (const a of p.allowedIps) {
        if ((a.family !== 4 && a.family !== 6) || a.addr.length !== (a.family === 4 ? 4 : 16)) {
          throw new WireGuardConfigError('allowed_ip has a bad address family or length');
        }
      }
    }
    // Then change.
    if (plan.privateKey !== undefined) this.setPrivateKey(plan.privateKey);
    if (plan.listenPort !== undefined) this.listenPort = plan.listenPort;
    if (plan.fwmark !== undefined) this.fwmark = plan.fwmark;
    if (plan.replacePeers) this.removeAllPeers();
    for (const p of plan.peers) {
      if (this.identity.hasKey && keysEqual(p.publicKey, this.identity.publicKey)) continue;
      let peer = this.peerMap.get(keyHex(p.publicKey));
      if (p.remove) {
        if (peer !== undefined) this.removePeerInternal(peer);
        continue;
      }
      if (peer === undefined) {
        if (p.updateOnly) continue;
        peer = this.addPeer(p.publicKey);
      }
      if (p.presharedKey !== undefined) this.setPresharedKey(peer, isZeroKey(p.presharedKey) ? null : p.presharedKey);
      if (p.endpoint !== undefined) this.setEndpoint(peer, p.endpoint);
      let keepaliveTurnedOn = false;
      if (p.persistentKeepaliveInterval !== undefined) {
        keepaliveTurnedOn = peer.persistentKeepalive === 0 && p.persistentKeepaliveInterval !== 0;
        peer.persistentKeepalive = p.persistentKeepaliveInterval;
        if (p.persistentKeepaliveInterval === 0) peer.timers.persistentKeepalive = NEVER;
      }
      if (p.replaceAllowedIps) this.allowedIps.removeByPeer(peer);
      for (const a of p.allowedIps) this.allowedIps.insert(a, peer);
      if (keepaliveTurnedOn) this.sendKeepalive(peer, now);
      this.sendStagedPackets(peer, now);
    }
  }

  /** What UAPI `get=1` reports. */
  uapiSnapshot(): UapiDeviceSnapshot {
    return {
      privateKey: this.privateKey,
      listenPort: this.listenPort,
      fwmark: this.fwmark,
      peers: this.peerList.map((p) => ({
        publicKey: Uint8Array.from(p.publicKey),
        presharedKey: p.presharedKey,
        endpoint: p.endpoint === null ? null : { address: p.endpoint.address, port: p.endpoint.port },
        lastHandshakeTimeMs: p.lastHandshakeMs,
        txBytes: p.txBytes,
        rxBytes: p.rxBytes,
        persistentKeepaliveInterval: p.persistentKeepalive,
        allowedIps: this.allowedIps.prefixesOf(p),
      })),
    };
  }

  // ===========================================================================================
  // Outbox

  /** Messages waiting in the outbox. */
  get outgoingCount(): number {
    return this.outbox.size;
  }

  /** Buffers handed out by popOutgoing() and not yet released, plus staged packets. */
  get buffersInUse(): number {
    return this.pool.inUse;
  }

  /**
   * Moves the oldest queued message into `out`: send out.buf[out.start, out.start+out.length)
   * to out.address:out.port, then call releaseOutgoing(out.slot). Returns false when empty.
   */
  popOutgoing(out: OutgoingMessage<Peer>): boolean {
    if (!this.outbox.shift(out)) return false;
    out.buf = this.pool.buffer(out.slot);
    return true;
  }

  /** Gives an engine buffer back after its message was sent (or abandoned). */
  releaseOutgoing(slot: number): void {
    this.pool.release(slot);
  }

  // ===========================================================================================
  // Timers

  /** Runs every timer that expired at `now` (in deadline order per peer). */
  poll(now: number): void {
    const list = this.peerList;
    for (let i = 0; i < list.length; i++) {
      const peer = list[i];
      if (!peer.removed) this.pollPeer(peer, now);
    }
  }

  /** The earliest timer deadline over all peers (Infinity when nothing is pending). */
  nextDeadline(): number {
    let t = NEVER;
    const list = this.peerList;
    for (let i = 0; i < list.length; i++) {
      const d = list[i].timers.earliest();
      if (d < t) t = d;
    }
    return t;
  }

  private pollPeer(peer: Peer, now: number): void {
    const t = peer.timers;
    // Each expiry re-arms timers only into the future, so this terminates; the bound is a guard.
    for (let guard = 0; guard < 32; guard++) {
      let which = -1;
      let best = now;
      if (t.retransmitHandshake <= best) { which = 0; best = t.retransmitHandshake; }
      if (t.sendKeepalive < best || (which < 0 && t.sendKeepalive <= best)) { which = 1; best = t.sendKeepalive; }
      if (t.newHandshake < best || (which < 0 && t.newHandshake <= best)) { which = 2; best = t.newHandshake; }
      if (t.zeroKeyMaterial < best || (which < 0 && t.zeroKeyMaterial <= best)) { which = 3; best = t.zeroKeyMaterial; }
      if (t.persistentKeepalive < best || (which < 0 && t.persistentKeepalive <= best)) { which = 4; best = t.persistentKeepalive; }
      switch (which) {
        case 0:
          t.retransmitHandshake = NEVER;
          this.expiredRetransmitHandshake(peer, now);
          break;
        case 1:
          t.sendKeepalive = NEVER;
          this.sendKeepalive(peer, now);
          if (t.needAnotherKeepalive) {
            t.needAnotherKeepalive = false;
            t.sendKeepalive = now + KEEPALIVE_TIMEOUT;
          }
          break;
        case 2:
          t.newHandshake = NEVER;
          this.sendHandshakeInitiation(peer, false, now);
          break;
        case 3:
          t.zeroKeyMaterial = NEVER;
          this.zeroAndFlushAll(peer);
          break;
        case 4:
          t.persistentKeepalive = NEVER;
          if (peer.persistentKeepalive > 0) this.sendKeepalive(peer, now);
          break;
        default:
          return;
      }
    }
  }

  private expiredRetransmitHandshake(peer: Peer, now: number): void {
    const t = peer.timers;
    if (t.handshakeAttempts > MAX_TIMER_HANDSHAKES) {
      // Give up: drop what waited for a session, and erase any residue of the attempt later.
      t.sendKeepalive = NEVER;
      this.flushStaged(peer);
      if (t.zeroKeyMaterial === NEVER) t.zeroKeyMaterial = now + ZERO_KEY_MATERIAL_AFTER;
      return;
    }
    t.handshakeAttempts++;
    this.sendHandshakeInitiation(peer, true, now);
  }

  // ===========================================================================================
  // Data path: outbound

  /**
   * Encrypts (or stages) the IP packet at buf[off, off+len). Requires off >= 16 and, for the
   * in-place case, buf.length >= off + padded + 16 (padded <= len rounded up to 16); throws
   * RangeError otherwise (API misuse). Returns ENCRYPT_* and fills `out`.
   */
  encrypt(buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult): number {
    out.peer = null;
    out.endpoint = null;
    out.start = 0;
    out.length = 0;
    out.reason = -1;
    if (off < TRANSPORT_HEADER_SIZE) throw new RangeError(`encrypt needs ${TRANSPORT_HEADER_SIZE} bytes of headroom, got offset ${off}`);
    let peer: Peer | undefined;
    const version = len > 0 ? buf[off] >> 4 : 0;
    if (version === 4 && len >= IPV4_MIN_HEADER_LEN) peer = this.allowedIps.lookupV4Destination(buf, off);
    else if (version === 6 && len >= IPV6_HEADER_LEN) peer = this.allowedIps.lookupV6Destination(buf, off);
    else return this.encryptDrop(out, DROP_OUTBOUND_INVALID);
    if (peer === undefined) return this.encryptDrop(out, DROP_NO_ROUTE);
    out.peer = peer;
    const kp = peer.keypairs.current;
    if (peer.stagedCount === 0 && kp !== null && kp.canSend(now)) {
      const endpoint = peer.endpoint;
      if (endpoint === null) return this.encryptDrop(out, DROP_NO_ENDPOINT);
      const padded = paddedLength(len, this.mtuValue);
      if (off + padded + AEAD_TAG_LEN > buf.length) {
        throw new RangeError(`encrypt needs ${padded - len + AEAD_TAG_LEN} bytes of tailroom after the packet`);
      }
      kp.takeSendCounter();
      const total = this.sealTransport(kp, buf, off, len, padded);
      const t = peer.timers;
      peer.txBytes += total;
      t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
      t.anyAuthenticatedPacketSent();
      t.dataSent(now);
      this.keepKeyFreshSending(peer, now);
      out.action = ENCRYPT_SEND;
      out.endpoint = endpoint;
      out.start = off - TRANSPORT_HEADER_SIZE;
      out.length = total;
      return ENCRYPT_SEND;
    }
    const staged = this.stage(peer, buf, off, len);
    this.sendStagedPackets(peer, now);
    if (!staged) {
      // The packet is lost (counted in stage()), but a session is still wanted.
      if (kp === null || !kp.canSend(now)) this.sendHandshakeInitiation(peer, false, now);
      out.action = ENCRYPT_DROP;
      out.reason = this.lastStageDrop;
      return ENCRYPT_DROP;
    }
    out.action = ENCRYPT_STAGED;
    return ENCRYPT_STAGED;
  }

  private encryptDrop(out: EncryptResult, reason: number): number {
    this.drops[reason]++;
    out.action = ENCRYPT_DROP;
    out.reason = reason;
    return ENCRYPT_DROP;
  }

  /** Pads, writes the header at off-16 and seals buf[off, off+padded) in place. Returns message size. */
  private sealTransport(kp: Keypair, buf: Uint8Array, off: number, len: number, padded: number): number {
    if (padded > len) buf.fill(0, off + len, off + padded);
    writeTransportHeader(buf, off - TRANSPORT_HEADER_SIZE, kp.remoteIndex, kp.takenLo, kp.takenHi);
    writeNonce(this.nonce, kp.takenLo, kp.takenHi);
    this.backend.seal(kp.sendKey, this.nonce, null, buf, off, padded, buf, off);
    return padded + TRANSPORT_OVERHEAD;
  }

  private lastStageDrop = -1;

  /** Copies a packet into the peer's staging queue. False (and a counted drop) if impossible. */
  private stage(peer: Peer, buf: Uint8Array, off: number, len: number): boolean {
    if (len > this.maxPacketSize) {
      this.drops[DROP_PACKET_TOO_BIG]++;
      this.lastStageDrop = DROP_PACKET_TOO_BIG;
      return false;
    }
    if (peer.stagedCount === peer.stagedCapacity) {
      const oldest = this.unstage(peer);
      if (oldest.slot >= 0) this.pool.release(oldest.slot);
      this.drops[DROP_STAGED_QUEUE_FULL]++;
    }
    const slot = this.pool.acquire();
    if (slot < 0) {
      this.drops[DROP_POOL_EXHAUSTED]++;
      this.lastStageDrop = DROP_POOL_EXHAUSTED;
      return false;
    }
    this.pool.buffer(slot).set(buf.subarray(off, off + len), TRANSPORT_HEADER_SIZE);
    this.enstage(peer, slot, len);
    return true;
  }

  private enstage(peer: Peer, slot: number, len: number): void {
    const i = (peer.stagedHead + peer.stagedCount) % peer.stagedCapacity;
    peer.stagedSlots[i] = slot;
    peer.stagedLengths[i] = len;
    peer.stagedCount++;
  }

  private readonly unstaged = { slot: -1, length: 0 };

  private unstage(peer: Peer): { slot: number; length: number } {
    const i = peer.stagedHead;
    this.unstaged.slot = peer.stagedSlots[i];
    this.unstaged.length = peer.stagedLengths[i];
    peer.stagedHead = (i + 1) % peer.stagedCapacity;
    peer.stagedCount--;
    return this.unstaged;
  }

  private flushStaged(peer: Peer): void {
    while (peer.stagedCount > 0) {
      const s = this.unstage(peer);
      if (s.slot >= 0) {
        this.pool.release(s.slot);
        this.drops[DROP_STAGED_FLUSHED]++;
      }
    }
  }

  /**
   * Sends what is staged if the current session may send; otherwise starts a handshake and
   * leaves the packets staged (wireguard-go's SendStagedPackets).
   */
  private sendStagedPackets(peer: Peer, now: number): void {
    for (;;) {
      if (peer.stagedCount === 0 || peer.removed) return;
      const kp = peer.keypairs.current;
      if (kp === null || !kp.canSend(now)) {
        this.sendHandshakeInitiation(peer, false, now);
        return;
      }
      while (peer.stagedCount > 0) {
        if (!kp.takeSendCounter()) break;
        const s = this.unstage(peer);
        let slot = s.slot;
        const len = s.length;
        if (slot < 0) {
          slot = this.pool.acquire();
          if (slot < 0) {
            this.drops[DROP_POOL_EXHAUSTED]++;
            continue;
          }
        }
        const endpoint = peer.endpoint;
        if (endpoint === null) {
          this.pool.release(slot);
          this.drops[DROP_NO_ENDPOINT]++;
          continue;
        }
        const buf = this.pool.buffer(slot);
        const total = this.sealTransport(kp, buf, TRANSPORT_HEADER_SIZE, len, paddedLength(len, this.mtuValue));
        if (!this.outbox.push(slot, 0, total, endpoint.address, endpoint.port, peer, len === 0 ? OUT_KEEPALIVE : OUT_TRANSPORT)) {
          this.pool.release(slot);
          this.drops[DROP_OUTBOX_FULL]++;
          continue;
        }
        peer.txBytes += total;
        const t = peer.timers;
        t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
        t.anyAuthenticatedPacketSent();
        if (len > 0) t.dataSent(now);
      }
      if (peer.stagedCount === 0) {
        this.keepKeyFreshSending(peer, now);
        return;
      }
    }
  }

  /** Queue a keepalive (an empty transport message), or start a handshake to send it. */
  private sendKeepalive(peer: Peer, now: number): void {
    if (peer.removed) return;
    if (peer.stagedCount === 0) this.enstage(peer, -1, 0);
    this.sendStagedPackets(peer, now);
  }

  /** Initiator-side rekey when sending: after 2^60 messages, or a session older than 120 s. */
  private keepKeyFreshSending(peer: Peer, now: number): void {
    const kp = peer.keypairs.current;
    if (kp === null) return;
    if (kp.sendCountWantsRekey || (kp.isInitiator && now - kp.created > REKEY_AFTER_TIME)) {
      this.sendHandshakeInitiation(peer, false, now);
    }
  }

  /** Initiator-side rekey when receiving on a session close to Reject-After-Time (once). */
  private keepKeyFreshReceiving(peer: Peer, now: number): void {
    const t = peer.timers;
    if (t.sentLastMinuteHandshake) return;
    const kp = peer.keypairs.current;
    if (kp !== null && kp.isInitiator && now - kp.created > REKEY_ON_RECEIVE_AGE) {
      t.sentLastMinuteHandshake = true;
      this.sendHandshakeInitiation(peer, false, now);
    }
  }

  // ===========================================================================================
  // Data path: inbound

  /**
   * Processes one UDP payload buf[off, off+len) received from `from` (caller-owned; copied only
   * when the peer's endpoint changes). `underLoad`: the daemon's handshake queue is past its
   * threshold — handshake messages then need a valid mac2 (else a cookie reply is queued) and
   * pass a per-source rate limiter; the state lingers for 1 s after the last report.
   * Returns RECEIVE_* and fills `out`.
   */
  receive(buf: Uint8Array, off: number, len: number, from: Endpoint, now: number, underLoad: boolean, out: ReceiveResult): number {
    out.peer = null;
    out.start = 0;
    out.length = 0;
    out.reason = -1;
    const kind = classifyMessage(buf, off, len);
    if (kind === MESSAGE_TRANSPORT) return this.receiveTransport(buf, off, len, from, now, out);
    if (kind < 0) {
      return this.receiveDrop(out, kind === CLASSIFY_TOO_SHORT ? DROP_TOO_SHORT : kind === CLASSIFY_BAD_LENGTH ? DROP_BAD_LENGTH : DROP_UNKNOWN_TYPE);
    }
    return this.receiveHandshake(kind, buf, off, len, from, now, underLoad, out);
  }

  private receiveDrop(out: ReceiveResult, reason: number): number {
    this.drops[reason]++;
    out.action = RECEIVE_DROP;
    out.reason = reason;
    return RECEIVE_DROP;
  }

  private receiveTransport(buf: Uint8Array, off: number, len: number, from: Endpoint, now: number, out: ReceiveResult): number {
    const entry = this.indexTable.getAt(buf, off + TRANSPORT_RECEIVER_OFFSET);
    const kp = entry === undefined ? null : entry.keypair;
    if (kp === null) return this.receiveDrop(out, DROP_UNKNOWN_RECEIVER);
    if (now - kp.created > REJECT_AFTER_TIME) return this.receiveDrop(out, DROP_KEYPAIR_EXPIRED);
    const lo = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET);
    const hi = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET + 4);
    if (!kp.replay.check(lo, hi)) return this.receiveDrop(out, DROP_REPLAYED_COUNTER);
    writeNonce(this.nonce, lo, hi);
    const content = off + TRANSPORT_HEADER_SIZE;
    if (!this.backend.open(kp.receiveKey, this.nonce, null, buf, content, len - TRANSPORT_HEADER_SIZE, buf, content)) {
      return this.receiveDrop(out, DROP_DECRYPT_FAILED);
    }
    if (!kp.replay.validate(lo, hi)) return this.receiveDrop(out, DROP_REPLAYED_COUNTER);
    const peer = entry!.peer;
    out.peer = peer;
    this.roam(peer, from);
    if (this.receivedWithKeypair(peer, kp)) {
      peer.timers.handshakeComplete();
      peer.lastHandshakeMs = now;
      this.sendStagedPackets(peer, now);
    }
    peer.rxBytes += len;
    this.keepKeyFreshReceiving(peer, now);
    const t = peer.timers;
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketReceived();
    const plainLen = len - TRANSPORT_OVERHEAD;
    if (plainLen === 0) {
      out.action = RECEIVE_KEEPALIVE;
      return RECEIVE_KEEPALIVE;
    }
    t.dataReceived(now);
    let ipLen: number;
    let owner: Peer | undefined;
    const version = buf[content] >> 4;
    if (version === 4) {
      if (plainLen < IPV4_MIN_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      ipLen = (buf[content + IPV4_TOTAL_LENGTH_OFFSET] << 8) | buf[content + IPV4_TOTAL_LENGTH_OFFSET + 1];
      if (ipLen > plainLen || ipLen < IPV4_MIN_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      owner = this.allowedIps.lookupV4Source(buf, content);
    } else if (version === 6) {
      if (plainLen < IPV6_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      ipLen = ((buf[content + IPV6_PAYLOAD_LENGTH_OFFSET] << 8) | buf[content + IPV6_PAYLOAD_LENGTH_OFFSET + 1]) + IPV6_HEADER_LEN;
      if (ipLen > plainLen) return this.receiveDrop(out, DROP_INNER_INVALID);
      owner = this.allowedIps.lookupV6Source(buf, content);
    } else {
      return this.receiveDrop(out, DROP_INNER_INVALID);
    }
    if (owner !== peer) return this.receiveDrop(out, DROP_INNER_SOURCE_NOT_ALLOWED);
    out.action = RECEIVE_DELIVER;
    out.start = content;
    out.length = ipLen;
    return RECEIVE_DELIVER;
  }

  private receiveHandshake(kind: number, buf: Uint8Array, off: number, len: number, from: Endpoint, now: number,
    underLoad: boolean, out: ReceiveResult): number {
    if (kind === MESSAGE_COOKIE_REPLY) {
      const entry = this.indexTable.getAt(buf, off + COOKIE_REPLY_RECEIVER_OFFSET);
      if (entry === undefined) return this.receiveDrop(out, DROP_UNKNOWN_RECEIVER);
      if (!entry.peer.cookieGenerator.consumeReply(buf, off, now)) return this.receiveDrop(out, DROP_COOKIE_DECRYPT_FAILED);
      out.peer = entry.peer;
      out.action = RECEIVE_HANDSHAKE;
      return RECEIVE_HANDSHAKE;
    }
    // Initiation or response: cheap checks before any Diffie-Hellman.
    if (!this.identity.hasKey) return this.receiveDrop(out, DROP_NO_PRIVATE_KEY);
    if (!this.cookieChecker.checkMac1(buf, off, len)) return this.receiveDrop(out, DROP_INVALID_MAC1);
    if (underLoad) this.underLoadUntil = now + UNDER_LOAD_AFTER_TIME;
    if (underLoad || now < this.underLoadUntil) {
      const source = this.sourceBytes(from);
      if (!this.cookieChecker.checkMac2(buf, off, len, source, now)) {
        this.sendCookieReply(buf, off, len, source, from, now);
        return this.receiveDrop(out, DROP_COOKIE_REQUIRED);
      }
      if (!this.rateLimiter.allow(this.rateLimitKey(from.address), now)) return this.receiveDrop(out, DROP_RATE_LIMITED);
    }
    if (kind === MESSAGE_INITIATION) return this.receiveInitiation(buf, off, from, now, out);
    return this.receiveResponse(buf, off, from, now, out);
  }

  private receiveInitiation(buf: Uint8Array, off: number, from: Endpoint, now: number, out: ReceiveResult): number {
    const noise = this.noise;
    if (!noise.beginConsumeInitiation(this.identity, buf, off, this.staticKey)) return this.receiveDrop(out, DROP_INITIATION_DECRYPT_FAILED);
    const peer = this.peerMap.get(keyHex(this.staticKey));
    if (peer === undefined) {
      noise.abandonInitiation();
      return this.receiveDrop(out, DROP_UNKNOWN_PEER);
    }
    const r = noise.finishConsumeInitiation(peer.handshake, buf, off, now);
    if (r !== INITIATION_OK) {
      return this.receiveDrop(out, r === INITIATION_REPLAYED ? DROP_INITIATION_REPLAY
        : r === INITIATION_FLOOD ? DROP_INITIATION_FLOOD
          : r === INITIATION_DECRYPT_FAILED ? DROP_INITIATION_DECRYPT_FAILED : DROP_HANDSHAKE_FAILED);
    }
    out.peer = peer;
    const t = peer.timers;
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketReceived();
    this.roam(peer, from);
    peer.rxBytes += INITIATION_SIZE;
    this.sendHandshakeResponse(peer, now);
    out.action = RECEIVE_HANDSHAKE;
    return RECEIVE_HANDSHAKE;
  }

  private receiveResponse(buf: Uint8Array, off: number, from: Endpoint, now: number, out: ReceiveResult): number {
    const receiver = readU32LE(buf, off + RESPONSE_RECEIVER_OFFSET);
    const entry = this.indexTable.get(receiver);
    if (entry === undefined || entry.keypair !== null) return this.receiveDrop(out, DROP_UNKNOWN_RECEIVER);
    const peer = entry.peer;
    const hs = peer.handshake;
    if (hs.localIndex !== receiver || hs.state !== HANDSHAKE_INITIATION_CREATED) return this.receiveDrop(out, DROP_RESPONSE_UNEXPECTED);
    if (!this.noise.consumeResponse(this.identity, hs, buf, off)) return this.receiveDrop(out, DROP_RESPONSE_DECRYPT_FAILED);
    out.peer = peer;
    this.roam(peer, from);
    peer.rxBytes += RESPONSE_SIZE;
    const t = peer.timers;
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketReceived();
    if (!this.beginSymmetricSession(peer, now)) return this.receiveDrop(out, DROP_HANDSHAKE_FAILED);
    t.sessionDerived(now);
    t.handshakeComplete();
    peer.lastHandshakeMs = now;
    this.sendKeepalive(peer, now);
    out.action = RECEIVE_HANDSHAKE;
    return RECEIVE_HANDSHAKE;
  }

  /** Roaming: the endpoint follows the source of the latest authenticated packet. */
  private roam(peer: Peer, from: Endpoint): void {
    const ep = peer.endpoint;
    if (ep === null || ep.port !== from.port || ep.address !== from.address) {
      peer.endpoint = { address: from.address, port: from.port };
    }
  }

  /** The cookie input for a source: its address text and big-endian port (opaque, injective). */
  private sourceBytes(from: Endpoint): Uint8Array {
    const s = this.sourceScratch;
    const r = this.encoder.encodeInto(from.address, s.subarray(0, SOURCE_SCRATCH_LEN - 2));
    const n = r.written;
    s[n] = (from.port >>> 8) & 0xff;
    s[n + 1] = from.port & 0xff;
    return s.subarray(0, n + 2);
  }

  /** Rate-limit key: the IPv4 address, or the /64 of an IPv6 address (as wireguard-go and Linux). */
  private rateLimitKey(address: string): string {
    if (!address.includes(':')) return address;
    const pct = address.indexOf('%');
    let bytes: Uint8Array;
    try {
      bytes = parseAddress(pct >= 0 ? address.slice(0, pct) : address);
    } catch {
      return address;
    }
    return keyHex(bytes.subarray(0, 8));
  }

  // ===========================================================================================
  // Handshake sending and sessions

  private sendHandshakeInitiation(peer: Peer, isRetry: boolean, now: number): void {
    if (peer.removed) return;
    const t = peer.timers;
    if (!isRetry) t.handshakeAttempts = 0;
    const hs = peer.handshake;
    if (now - hs.lastSentHandshake < REKEY_TIMEOUT) return;
    hs.lastSentHandshake = now;
    if (!this.identity.hasKey) {
      this.drops[DROP_NO_PRIVATE_KEY]++;
      return;
    }
    const slot = this.pool.acquire();
    if (slot < 0) {
      this.drops[DROP_POOL_EXHAUSTED]++;
      t.handshakeInitiated(now); // try again after Rekey-Timeout
      return;
    }
    this.removeHandshakeIndex(peer);
    const index = this.newIndex(peer);
    this.freshEphemeral();
    writeTai64n(this.timestamp, 0, now);
    const buf = this.pool.buffer(slot);
    if (!this.noise.createInitiation(this.identity, hs, buf, 0, this.ephemeral, this.timestamp, index)) {
      this.indexTable.delete(index);
      this.pool.release(slot);
      this.drops[DROP_HANDSHAKE_FAILED]++;
      this.ephemeral.fill(0);
      return;
    }
    this.ephemeral.fill(0);
    peer.cookieGenerator.addMacs(buf, 0, INITIATION_SIZE, now);
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketSent();
    this.sendOwned(peer, slot, INITIATION_SIZE, OUT_INITIATION);
    t.handshakeInitiated(now);
  }

  private sendHandshakeResponse(peer: Peer, now: number): void {
    const hs = peer.handshake;
    hs.lastSentHandshake = now;
    const slot = this.pool.acquire();
    if (slot < 0) {
      this.drops[DROP_POOL_EXHAUSTED]++;
      return;
    }
    this.removeHandshakeIndex(peer);
    const index = this.newIndex(peer);
    this.freshEphemeral();
    const buf = this.pool.buffer(slot);
    const ok = this.noise.createResponse(hs, buf, 0, this.ephemeral, index);
    this.ephemeral.fill(0);
    if (!ok) {
      this.indexTable.delete(index);
      this.pool.release(slot);
      this.drops[DROP_HANDSHAKE_FAILED]++;
      return;
    }
    peer.cookieGenerator.addMacs(buf, 0, RESPONSE_SIZE, now);
    if (!this.beginSymmetricSession(peer, now)) {
      this.pool.release(slot);
      this.drops[DROP_HANDSHAKE_FAILED]++;
      return;
    }
    const t = peer.timers;
    t.sessionDerived(now);
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketSent();
    this.sendOwned(peer, slot, RESPONSE_SIZE, OUT_RESPONSE);
  }

  private sendCookieReply(buf: Uint8Array, off: number, len: number, source: Uint8Array, from: Endpoint, now: number): void {
    const slot = this.pool.acquire();
    if (slot < 0) {
      this.drops[DROP_POOL_EXHAUSTED]++;
      return;
    }
    this.backend.randomFill(this.cookieNonce);
    const n = this.cookieChecker.createReply(buf, off, len, source, now, this.cookieNonce, this.pool.buffer(slot), 0);
    if (!this.outbox.push(slot, 0, n, from.address, from.port, null, OUT_COOKIE_REPLY)) {
      this.pool.release(slot);
      this.drops[DROP_OUTBOX_FULL]++;
    }
  }

  /** Queues an engine-built message of `peer` to the peer's endpoint; counts tx bytes. */
  private sendOwned(peer: Peer, slot: number, length: number, kind: number): void {
    const ep = peer.endpoint;
    if (ep === null) {
      this.pool.release(slot);
      this.drops[DROP_NO_ENDPOINT]++;
      return;
    }
    if (!this.outbox.push(slot, 0, length, ep.address, ep.port, peer, kind)) {
      this.pool.release(slot);
      this.drops[DROP_OUTBOX_FULL]++;
      return;
    }
    peer.txBytes += length;
  }

  /** Random clamped X25519 private key into the ephemeral scratch (RFC 7748 §5). */
  private freshEphemeral(): void {
    const e = this.ephemeral;
    this.backend.randomFill(e);
    e[0] &= 248;
    e[31] &= 127;
    e[31] |= 64;
  }

  /** A fresh random non-zero index not in use, registered as a handshake entry of `peer`. */
  private newIndex(peer: Peer): number {
    for (;;) {
      this.backend.randomFill(this.index4);
      const idx = readU32LE(this.index4, 0);
      if (idx !== 0 && !this.indexTable.has(idx)) {
        this.indexTable.set(idx, new IndexEntry(peer, null));
        return idx;
      }
    }
  }

  private removeHandshakeIndex(peer: Peer): void {
    const idx = peer.handshake.localIndex;
    if (idx === 0) return;
    const e = this.indexTable.get(idx);
    if (e !== undefined && e.peer === peer && e.keypair === null) this.indexTable.delete(idx);
    peer.handshake.localIndex = 0;
  }

  /**
   * Turns a finished handshake into a keypair and rotates the peer's sessions
   * (wireguard-go's BeginSymmetricSession): the initiator uses it at once (current); the
   * responder parks it in `next` until the initiator's first transport message confirms it.
   */
  private beginSymmetricSession(peer: Peer, now: number): boolean {
    const hs = peer.handshake;
    const isInitiator = hs.state === HANDSHAKE_RESPONSE_CONSUMED;
    const kp = new Keypair(now, isInitiator, hs.localIndex, hs.remoteIndex);
    if (this.noise.deriveTransportKeys(hs, kp.sendKey, kp.receiveKey) < 0) return false;
    const entry = this.indexTable.get(kp.localIndex);
    if (entry !== undefined && entry.peer === peer) entry.keypair = kp;
    else this.indexTable.set(kp.localIndex, new IndexEntry(peer, kp));
    hs.localIndex = 0;
    const kps = peer.keypairs;
    const previous = kps.previous;
    const next = kps.next;
    const current = kps.current;
    if (isInitiator) {
      if (next !== null) {
        kps.next = null;
        kps.previous = next;
        this.deleteKeypair(current);
      } else {
        kps.previous = current;
      }
      this.deleteKeypair(previous);
      kps.current = kp;
    } else {
      kps.next = kp;
      this.deleteKeypair(next);
      kps.previous = null;
      this.deleteKeypair(previous);
    }
    return true;
  }

  /** First transport message under the responder's `next` keypair: promote it to current. */
  private receivedWithKeypair(peer: Peer, kp: Keypair): boolean {
    const kps = peer.keypairs;
    if (kps.next !== kp) return false;
    const old = kps.previous;
    kps.previous = kps.current;
    this.deleteKeypair(old);
    kps.current = kp;
    kps.next = null;
    return true;
  }

  private deleteKeypair(kp: Keypair | null): void {
    if (kp === null) return;
    const e = this.indexTable.get(kp.localIndex);
    if (e !== undefined && e.keypair === kp) this.indexTable.delete(kp.localIndex);
    kp.zero();
  }

  /** Key change: forget the handshake in flight; current sessions may no longer send. */
  private expireCurrentKeypairs(peer: Peer): void {
    this.removeHandshakeIndex(peer);
    peer.handshake.clear();
    peer.handshake.lastSentHandshake = Number.NEGATIVE_INFINITY;
    const kps = peer.keypairs;
    if (kps.current !== null) kps.current.expireSending();
    if (kps.next !== null) kps.next.expireSending();
  }

  /** Erase every key of the peer and drop its staged packets (zero-key-material timer). */
  private zeroAndFlushAll(peer: Peer): void {
    const kps = peer.keypairs;
    this.deleteKeypair(kps.previous);
    this.deleteKeypair(kps.current);
    this.deleteKeypair(kps.next);
    kps.previous = null;
    kps.current = null;
    kps.next = null;
    this.removeHandshakeIndex(peer);
    peer.handshake.clear();
    this.flushStaged(peer);
  }

  private removePeerInternal(peer: Peer): void {
    if (peer.removed) return;
    peer.timers.stop();
    this.zeroAndFlushAll(peer);
    peer.handshake.presharedKey.fill(0);
    peer.handshake.precomputedStaticStatic.fill(0);
    this.allowedIps.removeByPeer(peer);
    this.peerMap.delete(peer.id);
    this.peerList = this.peerList.filter((p) => p !== peer);
    peer.removed = true;
  }

  private checkPeer(peer: Peer): void {
    if (!(peer instanceof Peer) || peer.removed || this.peerMap.get(peer.id) !== peer) {
      throw new TypeError('not a live peer of this device');
    }
  }

  // ===========================================================================================
  // Introspection for tests and metrics (allocation-free getters)

  /** Number of live index-table entries (handshakes in flight + sessions). */
  get indexCount(): number {
    return this.indexTable.size;
  }

  /** Is the device currently treating handshakes as under load (1 s hysteresis included)? */
  isUnderLoad(now: number): boolean {
    return now < this.underLoadUntil;
  }
}

function keysEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

