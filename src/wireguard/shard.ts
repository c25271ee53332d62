/**
 * A worker thread's WireGuard engine: transport data only, on a snapshot of the owner's state
 * (shard-owner.ts ShardSnapshot), for a data path split over threads. Bytes and `now` in, what
 * to send / deliver / drop out; no I/O. WireGuardPort drives it as it drives Device.
 *
 *   encrypt: allowed IPs → the peer's shared session → a counter from the session's shared
 *     word (Atomics.add: unique across threads) → seal in place. No usable session (none yet,
 *     expired, spent, packets staged at the owner): the packet is handed to the owner
 *     (copied; the owner stages it and handshakes), ENCRYPT_STAGED.
 *   receive: transport under a known session → shared replay window → open in place → inner
 *     source check. Initiations and responses are screened here first (screen.ts: mac1; under
 *     load mac2, a cookie reply from this worker's socket, the per-source rate limit) and
 *     only those that pass are handed to the owner, marked screened (HANDOFF_SCREENED: it
 *     queues them for the full processing without checking again). Cookie replies and
 *     transport under an unknown index are handed over as they are. Every handoff carries its
 *     source and is bounded (a full queue is a counted refusal).
 *   Under load: the caller's flag, or the link's (this worker's handoffs in flight ≥ 1/8 of the
 *     limit, or the owner's handshake queue loaded), kept UNDER_LOAD_AFTER_TIME after.
 *   The first message under a responder's unconfirmed session and a peer seen from a new
 *   endpoint are reported to the owner once (it rotates keys / records the endpoint); the
 *   workers send under the confirmed session and to the new endpoint from their next packet
 *   (the peer's shared confirmed-session word and endpoint record, read before each send).
 *
 * Per-peer bytes, packets and packet times go to this worker's activity row (shared-sessions.ts),
 * which only this thread writes and the owner reads. Zero allocation per packet.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { IPV4_MIN_HEADER_LEN, IPV4_TOTAL_LENGTH_OFFSET } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN, IPV6_PAYLOAD_LENGTH_OFFSET } from '../packet/ipv6.js';
import { AllowedIps } from './allowedips.js';
import { REJECT_AFTER_TIME } from './constants.js';
import {
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  RECEIVE_HANDSHAKE,
  RECEIVE_KEEPALIVE,
  type EncryptResult,
  type ReceiveResult,
} from './device-types.js';
import {
  DROP_BAD_LENGTH,
  DROP_DECRYPT_FAILED,
  DROP_INNER_INVALID,
  DROP_INNER_SOURCE_NOT_ALLOWED,
  DROP_KEYPAIR_EXPIRED,
  DROP_NO_ROUTE,
  DROP_OUTBOUND_INVALID,
  DROP_REASON_COUNT,
  DROP_REPLAYED_COUNTER,
  DROP_TOO_SHORT,
  DROP_OUTBOX_FULL,
  DROP_UNKNOWN_TYPE,
} from './drops.js';
import { writeNonce } from './keypair.js';
import {
  AEAD_TAG_LEN,
  CLASSIFY_BAD_LENGTH,
  CLASSIFY_TOO_SHORT,
  COOKIE_NONCE_LEN,
  COOKIE_REPLY_SIZE,
  MESSAGE_INITIATION,
  MESSAGE_RESPONSE,
  MESSAGE_TRANSPORT,
  TRANSPORT_COUNTER_OFFSET,
  TRANSPORT_HEADER_SIZE,
  TRANSPORT_OVERHEAD,
  TRANSPORT_RECEIVER_OFFSET,
  classifyMessage,
  readU32LE,
  writeTransportHeader,
} from './messages.js';
import { paddedLength } from './padding.js';
import type { Endpoint } from './peer.js';
import type { OutgoingMessage } from './pool.js';
import {
  ACT_AUTH_RECEIVED,
  ACT_AUTH_SENT,
  ACT_DATA_RECEIVED,
  ACT_DATA_SENT,
  ACT_RX_BYTES,
  ACT_RX_PACKETS,
  ACT_TX_BYTES,
  ACT_TX_PACKETS,
  KEYPAIR_SLOT_WORDS,
  SHARED_SEND_LIMIT,
  SharedReplayFilter,
  activityRow,
  endpointSeq,
  endpointSeqHint,
  loadEndpoint,
  sendCounterIndex,
  storeEndpoint,
  type SharedSessionBuffers,
} from './shared-sessions.js';
import type { ShardSnapshot } from './shard-owner.js';
import { ShardOutbox } from './shard-outbox.js';
import { HandshakeScreen, SCREEN_PASS } from './screen.js';
import {
  HANDOFF_DATAGRAM,
  HANDOFF_PLAINTEXT,
  HANDOFF_SCREENED,
  ShardPeer,
  ShardSession,
  type ShardOwnerLink,
} from './shard-peer.js';

export class ShardEngine {
  listenPort = 0;
  /** Drops by DROP_* reason (the owner folds them into the device's when they are shared). */
  readonly drops: Float64Array;
  /** Datagrams and packets handed to the owner, and those refused because its queue was full. */
  handoffs = 0;
  handoffsRefused = 0;
  /** The snapshot version in use. */
  version = 0;
  private allowed = new AllowedIps<ShardPeer>();
  private sessions = new Map<number, ShardSession>();
  private peers: ShardPeer[] = [];
  private mtu = 1420;
  private readonly nonce = new Uint8Array(12);
  private readonly words: Int32Array;
  private readonly counters: Uint32Array;
  private readonly act: Float64Array;
  private readonly acks: Int32Array;
  private readonly eps: Int32Array;
  private readonly confirmedWords: Int32Array;
  /** Owner messages (handshakes, keepalives, staged packets) for this worker's socket. */
  private readonly outbox = new ShardOutbox();
  /** This worker's mac1/mac2 checks, cookie secret, per-source limits and under-load state. */
  readonly screen: HandshakeScreen;
  /** The device's public key the screen is keyed for (null: no private key). */
  private publicKey: Uint8Array | null = null;
  private readonly cookieNonce = new Uint8Array(COOKIE_NONCE_LEN);

  constructor(
    readonly backend: CryptoBackend,
    private readonly shared: SharedSessionBuffers,
    /** This worker's index (its activity rows and acknowledgement word). */
    readonly worker: number,
    private readonly link: ShardOwnerLink,
    /** DROP_REASON_COUNT counters to count drops in (e.g. a view of shared memory). */
    drops: Float64Array = new Float64Array(DROP_REASON_COUNT),
  ) {
    if (!Number.isInteger(worker) || worker < 0 || worker >= shared.workers)
      throw new RangeError(`worker ${worker} not in 0..${shared.workers - 1}`);
    if (drops.length !== DROP_REASON_COUNT)
      throw new RangeError(`drops needs ${DROP_REASON_COUNT} counters, got ${drops.length}`);
    this.drops = drops;
    this.screen = new HandshakeScreen(backend);
    this.words = new Int32Array(shared.keypairs);
    this.counters = new Uint32Array(shared.keypairs);
    this.act = new Float64Array(shared.activity);
    this.acks = new Int32Array(shared.acks);
    this.eps = new Int32Array(shared.endpoints);
    this.confirmedWords = new Int32Array(shared.confirmed);
  }

  /**
   * The session to send to `peer` with: a responder session another worker saw confirmed
   * (the shared word) replaces the snapshot's at once, as on a one-thread device.
   */
  private sendSessionOf(peer: ShardPeer): ShardSession | null {
    // A plain read per packet (an atomic load costs a call into V8's runtime): the word is one
    // aligned Int32, so a read sees either the old index or the new one, and the next packet
    // at the latest sees the new one.
    const ci = this.confirmedWords[peer.slot];
    if (ci !== peer.confirmedSeen) {
      peer.confirmedSeen = ci;
      const s = this.sessions.get(ci);
      if (s !== undefined && s.peer === peer && s.spec.next) {
        s.reported = true;
        peer.send = s;
      }
    }
    return peer.send;
  }

  /**
   * The peer's endpoint as the shared record holds it now: a roam another worker saw, or the
   * owner's newest, wins over the snapshot's (one atomic load when nothing changed).
   */
  private endpointOf(peer: ShardPeer): Endpoint | null {
    // The sequence word read plainly first (as sendSessionOf); only a change reads the record,
    // atomically and under its sequence lock.
    if (endpointSeqHint(this.eps, peer.slot) === peer.epSeq) return peer.endpoint;
    const seq = endpointSeq(this.eps, peer.slot);
    if (seq !== peer.epSeq) {
      const ep = loadEndpoint(this.eps, peer.slot, seq);
      if (ep !== undefined) {
        peer.endpoint = ep;
        peer.epSeq = seq;
      }
    }
    return peer.endpoint;
  }

  /** Switches to `snap` as a whole, then acknowledges its version to the owner. */
  apply(snap: ShardSnapshot): void {
    const allowed = new AllowedIps<ShardPeer>();
    const sessions = new Map<number, ShardSession>();
    const peers: ShardPeer[] = [];
    for (const p of snap.peers) {
      const peer = new ShardPeer(p.slot, p.endpoint, activityRow(this.shared, this.worker, p.slot));
      for (const a of p.allowedIps) allowed.insert(a, peer);
      for (const r of p.receive) {
        const s = new ShardSession(
          r,
          peer,
          new SharedReplayFilter(this.words, r.slot * KEYPAIR_SLOT_WORDS),
          sendCounterIndex(r.slot),
        );
        const old = this.sessions.get(r.localIndex | 0);
        if (old !== undefined && old.spec.slot === r.slot) s.reported = old.reported;
        sessions.set(r.localIndex | 0, s);
      }
      // A `next` session this worker already saw confirmed stays the one to send with until
      // the owner's snapshot says so itself.
      let confirmed: ShardSession | null = null;
      for (const r of p.receive) {
        const s = sessions.get(r.localIndex | 0)!;
        if (r.next && s.reported) confirmed = s;
      }
      if (confirmed !== null) peer.send = confirmed;
      else if (p.send !== null) {
        const s = sessions.get(p.send.localIndex | 0);
        peer.send =
          s !== undefined && s.spec.slot === p.send.slot
            ? s
            : new ShardSession(
                p.send,
                peer,
                new SharedReplayFilter(this.words, p.send.slot * KEYPAIR_SLOT_WORDS),
                sendCounterIndex(p.send.slot),
              );
      }
      peers.push(peer);
    }
    this.allowed = allowed;
    this.sessions = sessions;
    this.peers = peers;
    this.mtu = snap.mtu;
    this.setPublicKey(snap.publicKey);
    this.version = snap.version;
    Atomics.store(this.acks, this.worker, snap.version);
  }

  /** Re-keys the screen's mac1/cookie keys when the device's key changed. */
  private setPublicKey(key: Uint8Array | null): void {
    const old = this.publicKey;
    if (key === null ? old === null : old !== null && equalBytes(old, key)) return;
    this.publicKey = key === null ? null : Uint8Array.from(key);
    this.screen.cookieChecker.init(this.publicKey);
  }

  /** Peers of the snapshot in use (tests, stats). */
  get peerCount(): number {
    return this.peers.length;
  }

  // ===========================================================================================
  // Inner → tunnel

  encrypt(buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult<ShardPeer>): number {
    resetEncrypt(out);
    const version = len > 0 ? buf[off] >> 4 : 0;
    let peer: ShardPeer | undefined;
    if (version === 4 && len >= IPV4_MIN_HEADER_LEN) peer = this.allowed.lookupV4Destination(buf, off);
    else if (version === 6 && len >= IPV6_HEADER_LEN) peer = this.allowed.lookupV6Destination(buf, off);
    else return this.encryptDrop(out, DROP_OUTBOUND_INVALID);
    if (peer === undefined) return this.encryptDrop(out, DROP_NO_ROUTE);
    return this.encryptToPeer(peer, buf, off, len, now, out);
  }

  encryptFor(
    peer: ShardPeer,
    buf: Uint8Array,
    off: number,
    len: number,
    now: number,
    out: EncryptResult<ShardPeer>,
  ): number {
    resetEncrypt(out);
    const version = len > 0 ? buf[off] >> 4 : 0;
    if (!((version === 4 && len >= IPV4_MIN_HEADER_LEN) || (version === 6 && len >= IPV6_HEADER_LEN))) {
      return this.encryptDrop(out, DROP_OUTBOUND_INVALID);
    }
    return this.encryptToPeer(peer, buf, off, len, now, out);
  }

  private encryptToPeer(
    peer: ShardPeer,
    buf: Uint8Array,
    off: number,
    len: number,
    now: number,
    out: EncryptResult<ShardPeer>,
  ): number {
    out.peer = peer;
    if (off < TRANSPORT_HEADER_SIZE)
      throw new RangeError(`encrypt needs ${TRANSPORT_HEADER_SIZE} bytes of headroom, got offset ${off}`);
    const s = this.sendSessionOf(peer);
    const endpoint = this.endpointOf(peer);
    if (s !== null && !s.spent && endpoint !== null && now - s.spec.created < REJECT_AFTER_TIME) {
      const padded = paddedLength(len, this.mtu);
      if (off + padded + AEAD_TAG_LEN > buf.length) {
        throw new RangeError(`encrypt needs ${padded - len + AEAD_TAG_LEN} bytes of tailroom after the packet`);
      }
      const c = Atomics.add(this.counters, s.counterAt, 1);
      if (c < SHARED_SEND_LIMIT) {
        for (let i = off + len; i < off + padded; i++) buf[i] = 0;
        writeTransportHeader(buf, off - TRANSPORT_HEADER_SIZE, s.spec.remoteIndex, c, 0);
        writeNonce(this.nonce, c, 0);
        this.backend.seal(s.spec.sendKey, this.nonce, null, buf, off, padded, buf, off);
        const total = padded + TRANSPORT_OVERHEAD;
        const a = this.act;
        const row = peer.row;
        a[row + ACT_TX_BYTES] += total;
        a[row + ACT_TX_PACKETS]++;
        a[row + ACT_DATA_SENT] = now;
        a[row + ACT_AUTH_SENT] = now;
        out.action = ENCRYPT_SEND;
        out.endpoint = endpoint;
        out.start = off - TRANSPORT_HEADER_SIZE;
        out.length = total;
        return ENCRYPT_SEND;
      }
      s.spent = true;
    }
    // No usable session here: the owner stages the packet and handshakes.
    this.handoffs++;
    if (!this.link.handoff(HANDOFF_PLAINTEXT, buf, off, len, '', 0)) {
      this.handoffsRefused++;
      out.action = ENCRYPT_DROP;
      return ENCRYPT_DROP;
    }
    out.action = ENCRYPT_STAGED;
    return ENCRYPT_STAGED;
  }

  /** A message encrypt() counted for `peer` that the socket refused: off this worker's row. */
  sendFailed(peer: ShardPeer, bytes: number): void {
    const a = this.act;
    a[peer.row + ACT_TX_BYTES] -= bytes;
    a[peer.row + ACT_TX_PACKETS]--;
  }

  private encryptDrop(out: EncryptResult<ShardPeer>, reason: number): number {
    this.drops[reason]++;
    out.action = ENCRYPT_DROP;
    out.reason = reason;
    return ENCRYPT_DROP;
  }

  // ===========================================================================================
  // Tunnel → inner

  receive(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    _underLoad: boolean,
    out: ReceiveResult<ShardPeer>,
  ): number {
    out.peer = null;
    out.start = 0;
    out.length = 0;
    out.reason = -1;
    const kind = classifyMessage(buf, off, len);
    if (kind === MESSAGE_TRANSPORT) return this.receiveTransport(buf, off, len, from, now, out);
    if (kind < 0) {
      return this.receiveDrop(
        out,
        kind === CLASSIFY_TOO_SHORT
          ? DROP_TOO_SHORT
          : kind === CLASSIFY_BAD_LENGTH
            ? DROP_BAD_LENGTH
            : DROP_UNKNOWN_TYPE,
      );
    }
    this.toOwner(HANDOFF_DATAGRAM, buf, off, len, from);
    out.action = RECEIVE_HANDSHAKE;
    return RECEIVE_HANDSHAKE;
  }

  /**
   * Screens an initiation or response here (screen.ts) and hands it to the owner only if it
   * passes (HANDOFF_SCREENED); a cookie reply is handed over as it is. Answers a cookie reply
   * itself when mac2 is due and missing (queued for this worker's socket, to the source).
   * Never queues anything for receiveScreened here: returns false.
   */
  screenHandshake(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult<ShardPeer>,
  ): boolean {
    out.peer = null;
    out.start = 0;
    out.length = 0;
    out.reason = -1;
    const kind = classifyMessage(buf, off, len);
    if (kind === MESSAGE_INITIATION || kind === MESSAGE_RESPONSE) {
      const sc = this.screen;
      const r = sc.screen(this.publicKey !== null, buf, off, len, from, now, underLoad || this.link.underLoad());
      if (r !== SCREEN_PASS) {
        if (sc.replyDue) this.sendCookieReply(buf, off, len, from, now);
        this.receiveDrop(out, r);
        return false;
      }
      this.toOwner(HANDOFF_SCREENED, buf, off, len, from);
    } else if (kind < 0) {
      this.receiveDrop(out, kind === CLASSIFY_TOO_SHORT ? DROP_TOO_SHORT : DROP_BAD_LENGTH);
      return false;
    } else {
      this.toOwner(HANDOFF_DATAGRAM, buf, off, len, from);
    }
    out.action = RECEIVE_HANDSHAKE;
    return false;
  }

  receiveScreened(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    out: ReceiveResult<ShardPeer>,
  ): number {
    return this.receive(buf, off, len, from, now, false, out);
  }

  /** A cookie reply (rate-limited per source by the screen) queued for this worker's socket. */
  private sendCookieReply(buf: Uint8Array, off: number, len: number, from: Endpoint, now: number): void {
    this.backend.randomFill(this.cookieNonce);
    // Its own buffer: the outbox keeps it until sent (at most 20 per second per source).
    const reply = new Uint8Array(COOKIE_REPLY_SIZE);
    this.screen.cookieReply(buf, off, len, from, now, this.cookieNonce, reply, 0);
    if (!this.outbox.queue(reply, from.address, from.port)) this.drops[DROP_OUTBOX_FULL]++;
  }

  private toOwner(kind: number, buf: Uint8Array, off: number, len: number, from: Endpoint): void {
    this.handoffs++;
    if (!this.link.handoff(kind, buf, off, len, from.address, from.port)) this.handoffsRefused++;
  }

  private receiveTransport(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    out: ReceiveResult<ShardPeer>,
  ): number {
    const r = off + TRANSPORT_RECEIVER_OFFSET;
    const idx = buf[r] | (buf[r + 1] << 8) | (buf[r + 2] << 16) | (buf[r + 3] << 24);
    const s = this.sessions.get(idx);
    if (s === undefined) {
      // A session the owner has and this snapshot not yet, or none: the owner decides
      // (decrypts, or counts the drop and maybe handshakes with a restarted peer).
      this.toOwner(HANDOFF_DATAGRAM, buf, off, len, from);
      out.action = RECEIVE_HANDSHAKE;
      return RECEIVE_HANDSHAKE;
    }
    if (now - s.spec.created > REJECT_AFTER_TIME) return this.receiveDrop(out, DROP_KEYPAIR_EXPIRED);
    const lo = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET);
    const hi = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET + 4);
    if (!s.replay.check(lo, hi)) return this.receiveDrop(out, DROP_REPLAYED_COUNTER);
    writeNonce(this.nonce, lo, hi);
    const content = off + TRANSPORT_HEADER_SIZE;
    if (
      !this.backend.open(s.spec.receiveKey, this.nonce, null, buf, content, len - TRANSPORT_HEADER_SIZE, buf, content)
    )
      return this.receiveDrop(out, DROP_DECRYPT_FAILED);
    if (!s.replay.validate(lo, hi)) return this.receiveDrop(out, DROP_REPLAYED_COUNTER);
    const peer = s.peer;
    out.peer = peer;
    const ep = this.endpointOf(peer);
    if (ep === null || ep.port !== from.port || ep.address !== from.address) {
      // Every worker sends to the new endpoint from its next packet on (the shared record);
      // the owner records it for handshakes, timers and `wg show`.
      peer.endpoint = { address: from.address, port: from.port };
      peer.epSeq = storeEndpoint(this.eps, peer.slot, peer.endpoint);
      this.link.roamed(peer.slot, from.address, from.port);
    }
    if (s.spec.next && !s.reported) {
      // Key confirmation: this session is the peer's now (its old one may be gone, e.g. the
      // peer restarted), so answers go out under it at once, before the owner's next snapshot.
      s.reported = true;
      peer.send = s;
      Atomics.store(this.confirmedWords, peer.slot, s.spec.localIndex | 0);
      peer.confirmedSeen = s.spec.localIndex | 0;
      this.link.confirmed(s.spec.localIndex);
    }
    const a = this.act;
    const row = peer.row;
    a[row + ACT_RX_BYTES] += len;
    a[row + ACT_RX_PACKETS]++;
    a[row + ACT_AUTH_RECEIVED] = now;
    const plainLen = len - TRANSPORT_OVERHEAD;
    if (plainLen === 0) {
      out.action = RECEIVE_KEEPALIVE;
      return RECEIVE_KEEPALIVE;
    }
    a[row + ACT_DATA_RECEIVED] = now;
    let ipLen: number;
    let owner: ShardPeer | undefined;
    const version = buf[content] >> 4;
    if (version === 4) {
      if (plainLen < IPV4_MIN_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      ipLen = (buf[content + IPV4_TOTAL_LENGTH_OFFSET] << 8) | buf[content + IPV4_TOTAL_LENGTH_OFFSET + 1];
      if (ipLen > plainLen || ipLen < IPV4_MIN_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      owner = this.allowed.lookupV4Source(buf, content);
    } else if (version === 6) {
      if (plainLen < IPV6_HEADER_LEN) return this.receiveDrop(out, DROP_INNER_INVALID);
      ipLen =
        ((buf[content + IPV6_PAYLOAD_LENGTH_OFFSET] << 8) | buf[content + IPV6_PAYLOAD_LENGTH_OFFSET + 1]) +
        IPV6_HEADER_LEN;
      if (ipLen > plainLen) return this.receiveDrop(out, DROP_INNER_INVALID);
      owner = this.allowed.lookupV6Source(buf, content);
    } else {
      return this.receiveDrop(out, DROP_INNER_INVALID);
    }
    if (owner !== peer) return this.receiveDrop(out, DROP_INNER_SOURCE_NOT_ALLOWED);
    out.action = RECEIVE_DELIVER;
    out.start = content;
    out.length = ipLen;
    return RECEIVE_DELIVER;
  }

  private receiveDrop(out: ReceiveResult<ShardPeer>, reason: number): number {
    this.drops[reason]++;
    out.action = RECEIVE_DROP;
    out.reason = reason;
    return RECEIVE_DROP;
  }

  // ===========================================================================================
  // The owner's messages, sent from this worker's socket (one source port for the device)

  /** Owner messages dropped because this worker's outbox was full. */
  get outboxDropped(): number {
    return this.outbox.dropped;
  }

  /** Queues `buf` (kept until sent) for address:port; false (counted) when the outbox is full. */
  queueOutgoing(buf: Uint8Array, address: string, port: number): boolean {
    return this.outbox.queue(buf, address, port);
  }

  get outgoingCount(): number {
    return this.outbox.count;
  }

  popOutgoing(out: OutgoingMessage<ShardPeer>): boolean {
    return this.outbox.pop(out);
  }

  releaseOutgoing(slot: number): void {
    this.outbox.release(slot);
  }

  /** Timers are the owner's. */
  poll(_now: number): void {}

  nextDeadline(): number {
    return Number.POSITIVE_INFINITY;
  }

  initiateIdlePeers(_now: number): number {
    return 0;
  }
}

function resetEncrypt(out: EncryptResult<ShardPeer>): void {
  out.peer = null;
  out.endpoint = null;
  out.start = 0;
  out.length = 0;
  out.reason = -1;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
