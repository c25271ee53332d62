/**
 * The WireGuard engine the daemon drives: bytes and `now` in, what to send / deliver / drop out.
 * No sockets, timers or clock (every method takes `now`, wall-clock Unix ms, because handshake
 * timestamps are TAI64N of wall-clock time).
 *
 * This class is the facade; as in wireguard-go the work is split by concern, each module a set
 * of free functions over the shared DeviceState (device-state.ts): send.ts (encrypt, staging,
 * keepalives), receive.ts (decrypt, roaming, inner-source check), handshake.ts (handshake
 * messages, sessions, keypairs), index-table.ts, device-timers.ts (poll, nextDeadline),
 * peer-config.ts (keys, peers, allowed IPs) and uapi-apply.ts.
 *
 * Data path (zero allocation per packet):
 *   encrypt(buf, off, len, now, out) — an IP packet read from TUN at buf[off, off+len), with
 *     off >= 16 (headroom for the transport header) and tailroom for padding (to 16, capped at
 *     the MTU) + the 16-byte tag. With a usable session it is encrypted in place and `out` says
 *     "send buf[start, start+length) to endpoint". Without one the packet is copied into an
 *     engine buffer and staged (bounded queue per peer, oldest dropped first) and a handshake
 *     initiation is queued in the outbox.
 *   encryptFor(peer, buf, off, len, now, out) — the same for a peer the caller already chose
 *     (no allowed-IPs lookup).
 *   receive(buf, off, len, from, now, underLoad, out) — one UDP payload. Transport data is
 *     decrypted in place (plaintext at buf[off+16, ...), trimmed to the inner IP length);
 *     handshake messages are consumed and any reply is queued in the outbox. out.peer is the
 *     peer whose session decrypted it.
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
import type { Prefix } from '../packet/addr.js';
import { DeviceState, type DeviceOptions } from './device-state.js';
import type { EncryptResult, ReceiveResult } from './device-types.js';
import { poll, updateNextDeadline } from './device-timers.js';
import { sendHandshakeInitiation } from './handshake.js';
import { isHandshakeMessage } from './messages.js';
import {
  addAllowedIp,
  addPeer,
  allowedIpsOf,
  checkKey,
  checkPeer,
  clearAllowedIps,
  removeAllowedIp,
  removePeer,
  setEndpoint,
  setPersistentKeepalive,
  setPresharedKey,
  setPrivateKey,
} from './peer-config.js';
import { keyHex, type Endpoint, type Peer } from './peer.js';
import type { OutgoingMessage } from './pool.js';
import { receive, receiveScreened, screen } from './receive.js';
import { encrypt, encryptFor } from './send.js';
import { applyUapiPlan, uapiSnapshot } from './uapi-apply.js';
import {
  confirmSession,
  foldActivity,
  roamPeer,
  shardSnapshot,
  type PeerActivity,
  type ShardSnapshot,
} from './shard-owner.js';
import { initiateIdlePeers } from './wake.js';
import { planSet, type UapiDeviceSnapshot, type UapiOperation, type UapiSetPlan } from './uapi.js';

export {
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  RECEIVE_HANDSHAKE,
  RECEIVE_KEEPALIVE,
  ReceiveResult,
  WireGuardConfigError,
} from './device-types.js';

export class Device {
  /** Shared with the per-concern modules; not part of the public API. */
  private readonly s: DeviceState;
  readonly backend: CryptoBackend;
  /** Drops by DROP_* reason. */
  readonly drops: Float64Array;

  constructor(options: DeviceOptions) {
    this.s = new DeviceState(options);
    this.backend = this.s.backend;
    this.drops = this.s.drops;
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

  /** Listen port and fwmark are model fields: the daemon applies them to its sockets. */
  get listenPort(): number {
    return this.s.listenPort;
  }

  set listenPort(v: number) {
    this.s.listenPort = v;
  }

  get fwmark(): number {
    return this.s.fwmark;
  }

  set fwmark(v: number) {
    this.s.fwmark = v;
  }

  get mtu(): number {
    return this.s.mtu;
  }

  set mtu(v: number) {
    this.s.setMtu(v);
  }

  /** Whether peers may hold overlapping allowed IPs (DeviceOptions.overlappingAllowedIps). */
  get overlappingAllowedIps(): boolean {
    return this.s.overlapping;
  }

  /** This device's public key (a copy), or null without a private key. */
  get publicKey(): Uint8Array | null {
    const id = this.s.identity;
    return id.hasKey ? Uint8Array.from(id.publicKey) : null;
  }

  /** This device's private key (a copy), or null. */
  get privateKey(): Uint8Array | null {
    const id = this.s.identity;
    return id.hasKey ? Uint8Array.from(id.privateKey) : null;
  }

  /**
   * Sets (or with null / all zeros, clears) the private key, as wireguard-go does: a peer whose
   * public key is our new public key is removed; static-static DH is recomputed for every peer;
   * handshakes in flight are dropped and current sessions may no longer send (the next packet
   * starts a new handshake). Setting the same key again changes nothing.
   */
  setPrivateKey(key: Uint8Array | null): void {
    setPrivateKey(this.s, key);
  }

  /** Adds a peer (no allowed IPs, no endpoint). Throws if it exists or is this device's key. */
  addPeer(publicKey: Uint8Array): Peer {
    return addPeer(this.s, publicKey);
  }

  getPeer(publicKey: Uint8Array): Peer | undefined {
    checkKey(publicKey, 'public key');
    return this.s.peerMap.get(keyHex(publicKey));
  }

  /** All peers in insertion order (a snapshot array). */
  peers(): readonly Peer[] {
    return this.s.peerList;
  }

  removePeer(peer: Peer): boolean {
    if (peer.removed || this.s.peerMap.get(peer.id) !== peer) return false;
    removePeer(this.s, peer);
    return true;
  }

  removeAllPeers(): void {
    for (const p of this.s.peerList) removePeer(this.s, p);
  }

  setPresharedKey(peer: Peer, key: Uint8Array | null): void {
    checkPeer(this.s, peer);
    setPresharedKey(peer, key);
  }

  setEndpoint(peer: Peer, endpoint: Endpoint | null): void {
    checkPeer(this.s, peer);
    setEndpoint(peer, endpoint);
  }

  /**
   * Persistent keepalive interval in seconds (0 = off). Turning it on sends a keepalive right
   * away (which starts a handshake if needed), as wireguard-go does.
   */
  setPersistentKeepalive(peer: Peer, seconds: number, now: number): void {
    checkPeer(this.s, peer);
    setPersistentKeepalive(this.s, peer, seconds, now);
  }

  /**
   * Routes `prefix` to `peer`. Default: moving it from any other peer (WireGuard). With
   * overlappingAllowedIps: added to this peer's own set; other peers keep theirs.
   */
  addAllowedIp(peer: Peer, prefix: Prefix): void {
    checkPeer(this.s, peer);
    addAllowedIp(this.s, peer, prefix);
  }

  removeAllowedIp(peer: Peer, prefix: Prefix): boolean {
    checkPeer(this.s, peer);
    return removeAllowedIp(this.s, peer, prefix);
  }

  clearAllowedIps(peer: Peer): void {
    checkPeer(this.s, peer);
    clearAllowedIps(this.s, peer);
  }

  allowedIpsOf(peer: Peer): Prefix[] {
    return allowedIpsOf(this.s, peer);
  }

  /** Starts a handshake now (subject to the one-per-Rekey-Timeout pacing). */
  initiateHandshake(peer: Peer, now: number): void {
    checkPeer(this.s, peer);
    sendHandshakeInitiation(this.s, peer, false, now);
  }

  /**
   * Starts a handshake now with every peer that has an endpoint and no usable session (each
   * subject to the one-per-Rekey-Timeout pacing): what a freshly started or newly active device
   * does instead of waiting for data or the peer's timers. Returns the initiations queued.
   */
  initiateIdlePeers(now: number): number {
    return initiateIdlePeers(this.s, now);
  }

  /**
   * From now on this device starts no handshake (no initiation: not for data, timers, wake or
   * initiateIdlePeers); it keeps forwarding on the sessions it has and still answers the peer's
   * initiations. For a gateway replica handing its peers over to a successor with the same key
   * (SIGTERM): while the leaving replica still forwards on the old session, a peer that took
   * the successor's session (and roams to whoever sent last) sends it transport under an index
   * it does not know; a handshake answering that would switch the peer back to a session that
   * ends with the replica, and the successor may initiate again only a Rekey-Timeout after its
   * own initiation. Not reversible.
   */
  holdHandshakes(): void {
    this.s.handshakesHeld = true;
  }

  /**
   * Handshakes started because transport data arrived under an unknown receiver index from a
   * peer's address (also counted as DROP_UNKNOWN_RECEIVER), and such packets left unanswered by
   * the per-peer pacing or the device-wide limit (wake.ts).
   */
  get unknownSessionInitiations(): number {
    return this.s.wake.initiations;
  }

  get unknownSessionSuppressed(): number {
    return this.s.wake.suppressed;
  }

  /**
   * Applies a parsed UAPI `set=1` request atomically: the operations were fully validated by
   * parseSet(), and the plan is checked again before anything changes (see uapi-apply.ts).
   * Throws WireGuardConfigError / TypeError without changing anything.
   */
  applyUapiSet(ops: readonly UapiOperation[], now: number): void {
    applyUapiPlan(this.s, planSet(ops), now);
  }

  applyUapiPlan(plan: UapiSetPlan, now: number): void {
    applyUapiPlan(this.s, plan, now);
  }

  /** What UAPI `get=1` reports. */
  uapiSnapshot(): UapiDeviceSnapshot {
    return uapiSnapshot(this.s);
  }

  // ===========================================================================================
  // Outbox

  /** Messages waiting in the outbox. */
  get outgoingCount(): number {
    return this.s.outbox.size;
  }

  /** Buffers handed out by popOutgoing() and not yet released, plus staged packets. */
  get buffersInUse(): number {
    return this.s.pool.inUse;
  }

  /**
   * Moves the oldest queued message into `out`: send out.buf[out.start, out.start+out.length)
   * to out.address:out.port, then call releaseOutgoing(out.slot). Returns false when empty.
   */
  popOutgoing(out: OutgoingMessage<Peer>): boolean {
    if (!this.s.outbox.shift(out)) return false;
    out.buf = this.s.pool.buffer(out.slot);
    return true;
  }

  /** Gives an engine buffer back after its message was sent (or abandoned). */
  releaseOutgoing(slot: number): void {
    this.s.pool.release(slot);
  }

  // ===========================================================================================
  // Timers

  /** Runs every timer that expired at `now` (in deadline order per peer). */
  poll(now: number): void {
    poll(this.s, now);
  }

  /** The earliest timer deadline over all peers (Infinity when nothing is pending). */
  nextDeadline(): number {
    updateNextDeadline(this.s);
    return this.s.nextDeadline;
  }

  // ===========================================================================================
  // Data path

  /**
   * Encrypts (or stages) the IP packet at buf[off, off+len) for the peer whose allowed IPs hold
   * its destination (with overlappingAllowedIps: one of the matching peers, unspecified which —
   * use encryptFor). Requires off >= 16 and, for the in-place case, buf.length >= off + padded
   * + 16 (padded <= len rounded up to 16); throws RangeError otherwise (API misuse). Returns
   * ENCRYPT_* and fills `out`.
   */
  encrypt(buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult): number {
    return encrypt(this.s, buf, off, len, now, out);
  }

  /**
   * As encrypt(), but to `peer` (a peer of this device, chosen by the caller): no allowed-IPs
   * lookup. Same in-place contract, staging without a session, and drop reasons; a peer removed
   * meanwhile is a DROP_NO_ROUTE drop.
   */
  encryptFor(peer: Peer, buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult): number {
    return encryptFor(this.s, peer, buf, off, len, now, out);
  }

  /**
   * A transport message of `bytes` that encrypt() counted for `peer` and the socket refused:
   * off the transfer counters (wireguard-go counts only what its socket took).
   */
  sendFailed(peer: Peer, bytes: number): void {
    peer.txBytes -= bytes;
    peer.txPackets--;
  }

  /**
   * Processes one UDP payload buf[off, off+len) received from `from` (caller-owned; copied only
   * when the peer's endpoint changes). `underLoad`: the daemon's handshake queue is past its
   * threshold — handshake messages then need a valid mac2 (else a cookie reply is queued) and
   * pass a per-source rate limiter; the state lingers for 1 s after the last report.
   * Returns RECEIVE_* and fills `out`.
   */
  receive(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult,
  ): number {
    return receive(this.s, buf, off, len, from, now, underLoad, out);
  }

  /**
   * The cheap half of receive() for an initiation or response, for a daemon that queues
   * handshakes: mac1, and under load mac2 (a cookie reply is queued, at most 20/s per source)
   * and the per-source rate limit — no Diffie-Hellman. Returns false when the message was
   * dropped here (counted by reason, `out` filled): it must not be queued. True: queue it and
   * later call receiveScreened() (never receive(), which would check it again). Any other
   * message kind returns true untouched.
   */
  screenHandshake(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult,
  ): boolean {
    return screen(this.s, buf, off, len, from, now, underLoad, out);
  }

  /**
   * receive() for a message that passed screenHandshake(): initiations and responses skip the
   * checks done there; anything else takes the receive() path with underLoad false.
   */
  receiveScreened(buf: Uint8Array, off: number, len: number, from: Endpoint, now: number, out: ReceiveResult): number {
    return receiveScreened(this.s, buf, off, len, from, now, out);
  }

  // ===========================================================================================
  // Worker threads sharing the data path (shard-owner.ts; this device owns handshakes and timers)

  /** Folds a worker's activity for `peer` into its counters and timers. */
  foldShardActivity(peer: Peer, a: PeerActivity, now: number): void {
    foldActivity(this.s, peer, a, now);
  }

  /** A worker received the first message under session `localIndex` (confirms a `next` keypair). */
  confirmShardSession(localIndex: number, now: number): Peer | null {
    return confirmSession(this.s, localIndex, now);
  }

  /** A worker saw `peer` authenticated from `from`. */
  roamShardPeer(peer: Peer, from: Endpoint): void {
    roamPeer(peer, from);
  }

  /** The data-path snapshot for the workers (`peerSlot`: each peer's activity row). */
  shardSnapshot(version: number, peerSlot: (p: Peer) => number, now: number): ShardSnapshot {
    return shardSnapshot(this.s, version, peerSlot, (p) => allowedIpsOf(this.s, p), now);
  }

  // ===========================================================================================
  // Introspection for tests and metrics (allocation-free getters)

  /** Number of live index-table entries (handshakes in flight + sessions). */
  get indexCount(): number {
    return this.s.indexTable.size;
  }

  /** Is the device currently treating handshakes as under load (1 s hysteresis included)? */
  isUnderLoad(now: number): boolean {
    return this.s.screen.isUnderLoad(now);
  }
}
