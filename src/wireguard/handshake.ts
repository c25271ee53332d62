/**
 * Handshakes (wireguard-go's noise-protocol.go + send.go/receive.go handshake halves): sending
 * initiations, responses and cookie replies; consuming them; beginning a session from a
 * finished handshake; keypair rotation and erasure. Imports only state, staging and the
 * protocol pieces: the data path modules (send.ts, receive.ts) call into this one, never the
 * other way round — so after a consumed response, receive.ts sends the confirming keepalive.
 */
import { REKEY_TIMEOUT } from './constants.js';
import { receiveDrop, type DeviceState } from './device-state.js';
import { RECEIVE_HANDSHAKE, type ReceiveResult } from './device-types.js';
import {
  DROP_COOKIE_DECRYPT_FAILED,
  DROP_HANDSHAKE_FAILED,
  DROP_INITIATION_DECRYPT_FAILED,
  DROP_INITIATION_FLOOD,
  DROP_INITIATION_REPLAY,
  DROP_NO_ENDPOINT,
  DROP_NO_PRIVATE_KEY,
  DROP_OUTBOX_FULL,
  DROP_POOL_EXHAUSTED,
  DROP_RESPONSE_DECRYPT_FAILED,
  DROP_RESPONSE_UNEXPECTED,
  DROP_UNKNOWN_PEER,
  DROP_UNKNOWN_RECEIVER,
} from './drops.js';
import { IndexEntry } from './index-table.js';
import { Keypair } from './keypair.js';
import {
  COOKIE_REPLY_RECEIVER_OFFSET,
  INITIATION_SIZE,
  MESSAGE_COOKIE_REPLY,
  MESSAGE_INITIATION,
  RESPONSE_RECEIVER_OFFSET,
  RESPONSE_SIZE,
  readU32LE,
} from './messages.js';
import {
  HANDSHAKE_INITIATION_CREATED,
  HANDSHAKE_RESPONSE_CONSUMED,
  INITIATION_DECRYPT_FAILED,
  INITIATION_FLOOD,
  INITIATION_OK,
  INITIATION_REPLAYED,
} from './noise.js';
import { keyHex, type Endpoint, type Peer } from './peer.js';
import { SCREEN_PASS } from './screen.js';
import { OUT_COOKIE_REPLY, OUT_INITIATION, OUT_RESPONSE } from './pool.js';
import { flushStaged } from './staging.js';
import { writeTai64n } from './tai64n.js';

// ===========================================================================================
// Sending

export function sendHandshakeInitiation(s: DeviceState, peer: Peer, isRetry: boolean, now: number): void {
  if (peer.removed || s.handshakesHeld) return;
  const t = peer.timers;
  if (!isRetry) t.handshakeAttempts = 0;
  const hs = peer.handshake;
  if (now - hs.lastSentHandshake < REKEY_TIMEOUT) return;
  hs.lastSentHandshake = now;
  t.speculativeInitiation = false;
  if (!s.identity.hasKey) {
    s.drops[DROP_NO_PRIVATE_KEY]++;
    return;
  }
  const slot = s.pool.acquire();
  if (slot < 0) {
    s.drops[DROP_POOL_EXHAUSTED]++;
    t.handshakeInitiated(now); // try again after Rekey-Timeout
    return;
  }
  removeHandshakeIndex(s, peer);
  const index = newIndex(s, peer);
  freshEphemeral(s);
  writeTai64n(s.timestamp, 0, now);
  const buf = s.pool.buffer(slot);
  if (!s.noise.createInitiation(s.identity, hs, buf, 0, s.ephemeral, s.timestamp, index)) {
    s.indexTable.delete(index);
    s.pool.release(slot);
    s.drops[DROP_HANDSHAKE_FAILED]++;
    s.ephemeral.fill(0);
    return;
  }
  s.ephemeral.fill(0);
  peer.cookieGenerator.addMacs(buf, 0, INITIATION_SIZE, now);
  t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
  t.anyAuthenticatedPacketSent();
  sendOwned(s, peer, slot, INITIATION_SIZE, OUT_INITIATION);
  t.handshakeInitiated(now);
}

function sendHandshakeResponse(s: DeviceState, peer: Peer, now: number): void {
  const hs = peer.handshake;
  hs.lastSentHandshake = now;
  const slot = s.pool.acquire();
  if (slot < 0) {
    s.drops[DROP_POOL_EXHAUSTED]++;
    return;
  }
  removeHandshakeIndex(s, peer);
  const index = newIndex(s, peer);
  freshEphemeral(s);
  const buf = s.pool.buffer(slot);
  const ok = s.noise.createResponse(hs, buf, 0, s.ephemeral, index);
  s.ephemeral.fill(0);
  if (!ok) {
    s.indexTable.delete(index);
    s.pool.release(slot);
    s.drops[DROP_HANDSHAKE_FAILED]++;
    return;
  }
  peer.cookieGenerator.addMacs(buf, 0, RESPONSE_SIZE, now);
  if (!beginSymmetricSession(s, peer, now)) {
    s.pool.release(slot);
    s.drops[DROP_HANDSHAKE_FAILED]++;
    return;
  }
  const t = peer.timers;
  t.sessionDerived(now);
  t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
  t.anyAuthenticatedPacketSent();
  sendOwned(s, peer, slot, RESPONSE_SIZE, OUT_RESPONSE);
}

function sendCookieReply(s: DeviceState, buf: Uint8Array, off: number, len: number, from: Endpoint, now: number): void {
  const slot = s.pool.acquire();
  if (slot < 0) {
    s.drops[DROP_POOL_EXHAUSTED]++;
    return;
  }
  s.randomFill(s.cookieNonce);
  const n = s.screen.cookieReply(buf, off, len, from, now, s.cookieNonce, s.pool.buffer(slot), 0);
  if (!s.outbox.push(slot, 0, n, from.address, from.port, null, OUT_COOKIE_REPLY)) {
    s.pool.release(slot);
    s.drops[DROP_OUTBOX_FULL]++;
  }
}

/** Queues an engine-built message of `peer` to the peer's endpoint; counts tx bytes. */
function sendOwned(s: DeviceState, peer: Peer, slot: number, length: number, kind: number): void {
  const ep = peer.endpoint;
  if (ep === null) {
    s.pool.release(slot);
    s.drops[DROP_NO_ENDPOINT]++;
    return;
  }
  if (!s.outbox.push(slot, 0, length, ep.address, ep.port, peer, kind)) {
    s.pool.release(slot);
    s.drops[DROP_OUTBOX_FULL]++;
    return;
  }
  peer.txBytes += length;
  peer.txPackets++;
}

/** Random clamped X25519 private key into the ephemeral scratch (RFC 7748 §5). */
function freshEphemeral(s: DeviceState): void {
  const e = s.ephemeral;
  s.randomFill(e);
  e[0] &= 248;
  e[31] &= 127;
  e[31] |= 64;
}

/** A fresh random non-zero index not in use, registered as a handshake entry of `peer`. */
function newIndex(s: DeviceState, peer: Peer): number {
  for (;;) {
    s.randomFill(s.index4);
    const idx = readU32LE(s.index4, 0);
    if (idx !== 0 && !s.indexTable.has(idx)) {
      s.indexTable.set(idx, new IndexEntry(peer, null));
      return idx;
    }
  }
}

function removeHandshakeIndex(s: DeviceState, peer: Peer): void {
  const idx = peer.handshake.localIndex;
  if (idx === 0) return;
  const e = s.indexTable.get(idx);
  if (e !== undefined && e.peer === peer && e.keypair === null) s.indexTable.delete(idx);
  peer.handshake.localIndex = 0;
}

// ===========================================================================================
// Receiving

/**
 * Consumes a handshake message (kind: MESSAGE_INITIATION/RESPONSE/COOKIE_REPLY). On a consumed
 * response the session is begun here and the caller must send the confirming keepalive.
 */
export function receiveHandshake(
  s: DeviceState,
  kind: number,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  underLoad: boolean,
  out: ReceiveResult,
): number {
  if (kind !== MESSAGE_COOKIE_REPLY && !screenHandshake(s, buf, off, len, from, now, underLoad, out)) return out.action;
  return receiveScreenedHandshake(s, kind, buf, off, from, now, out);
}

/**
 * The cheap checks of an initiation or response before any Diffie-Hellman (screen.ts), with
 * the cookie reply they may call for. Returns false when the message was dropped (counted; out
 * filled), true when it deserves the full processing (receiveScreenedHandshake), which the
 * daemon may defer to its handshake queue.
 */
export function screenHandshake(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  underLoad: boolean,
  out: ReceiveResult,
): boolean {
  const sc = s.screen;
  const r = sc.screen(s.identity.hasKey, buf, off, len, from, now, underLoad);
  if (r === SCREEN_PASS) return true;
  if (sc.replyDue) sendCookieReply(s, buf, off, len, from, now);
  return dropped(s, out, r);
}

/** Counts a drop and returns false (screenHandshake's "not for processing"). */
function dropped(s: DeviceState, out: ReceiveResult, reason: number): boolean {
  receiveDrop(s, out, reason);
  return false;
}

/** A cookie reply, or an initiation/response that passed screenHandshake(). */
export function receiveScreenedHandshake(
  s: DeviceState,
  kind: number,
  buf: Uint8Array,
  off: number,
  from: Endpoint,
  now: number,
  out: ReceiveResult,
): number {
  if (kind === MESSAGE_COOKIE_REPLY) {
    const entry = s.indexTable.getAt(buf, off + COOKIE_REPLY_RECEIVER_OFFSET);
    if (entry === undefined) return receiveDrop(s, out, DROP_UNKNOWN_RECEIVER);
    if (!entry.peer.cookieGenerator.consumeReply(buf, off, now)) return receiveDrop(s, out, DROP_COOKIE_DECRYPT_FAILED);
    out.peer = entry.peer;
    out.action = RECEIVE_HANDSHAKE;
    return RECEIVE_HANDSHAKE;
  }
  if (kind === MESSAGE_INITIATION) return receiveInitiation(s, buf, off, from, now, out);
  return receiveResponse(s, buf, off, from, now, out);
}

function receiveInitiation(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  from: Endpoint,
  now: number,
  out: ReceiveResult,
): number {
  const noise = s.noise;
  if (!noise.beginConsumeInitiation(s.identity, buf, off, s.staticKey))
    return receiveDrop(s, out, DROP_INITIATION_DECRYPT_FAILED);
  const peer = s.peerMap.get(keyHex(s.staticKey));
  if (peer === undefined) {
    noise.abandonInitiation();
    return receiveDrop(s, out, DROP_UNKNOWN_PEER);
  }
  const r = noise.finishConsumeInitiation(peer.handshake, buf, off, now);
  if (r !== INITIATION_OK) {
    return receiveDrop(
      s,
      out,
      r === INITIATION_REPLAYED
        ? DROP_INITIATION_REPLAY
        : r === INITIATION_FLOOD
          ? DROP_INITIATION_FLOOD
          : r === INITIATION_DECRYPT_FAILED
            ? DROP_INITIATION_DECRYPT_FAILED
            : DROP_HANDSHAKE_FAILED,
    );
  }
  out.peer = peer;
  const t = peer.timers;
  t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
  t.anyAuthenticatedPacketReceived();
  roam(peer, from);
  peer.rxBytes += INITIATION_SIZE;
  peer.rxPackets++;
  sendHandshakeResponse(s, peer, now);
  out.action = RECEIVE_HANDSHAKE;
  return RECEIVE_HANDSHAKE;
}

function receiveResponse(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  from: Endpoint,
  now: number,
  out: ReceiveResult,
): number {
  const receiver = readU32LE(buf, off + RESPONSE_RECEIVER_OFFSET);
  const entry = s.indexTable.get(receiver);
  if (entry === undefined || entry.keypair !== null) return receiveDrop(s, out, DROP_UNKNOWN_RECEIVER);
  const peer = entry.peer;
  const hs = peer.handshake;
  if (hs.localIndex !== receiver || hs.state !== HANDSHAKE_INITIATION_CREATED)
    return receiveDrop(s, out, DROP_RESPONSE_UNEXPECTED);
  if (!s.noise.consumeResponse(s.identity, hs, buf, off)) return receiveDrop(s, out, DROP_RESPONSE_DECRYPT_FAILED);
  out.peer = peer;
  roam(peer, from);
  peer.rxBytes += RESPONSE_SIZE;
  peer.rxPackets++;
  const t = peer.timers;
  t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
  t.anyAuthenticatedPacketReceived();
  if (!beginSymmetricSession(s, peer, now)) return receiveDrop(s, out, DROP_HANDSHAKE_FAILED);
  t.sessionDerived(now);
  t.handshakeComplete();
  peer.lastHandshakeMs = now;
  out.action = RECEIVE_HANDSHAKE;
  return RECEIVE_HANDSHAKE;
}

/** Roaming: the endpoint follows the source of the latest authenticated packet. */
export function roam(peer: Peer, from: Endpoint): void {
  const ep = peer.endpoint;
  if (ep === null || ep.port !== from.port || ep.address !== from.address) {
    peer.endpoint = { address: from.address, port: from.port };
  }
}

// ===========================================================================================
// Sessions and keypairs

/**
 * Turns a finished handshake into a keypair and rotates the peer's sessions
 * (wireguard-go's BeginSymmetricSession): the initiator uses it at once (current); the
 * responder parks it in `next` until the initiator's first transport message confirms it.
 */
function beginSymmetricSession(s: DeviceState, peer: Peer, now: number): boolean {
  const hs = peer.handshake;
  const isInitiator = hs.state === HANDSHAKE_RESPONSE_CONSUMED;
  const kp = new Keypair(now, isInitiator, hs.localIndex, hs.remoteIndex);
  if (s.noise.deriveTransportKeys(hs, kp.sendKey, kp.receiveKey) < 0) return false;
  if (s.sessionSlots !== null) s.sessionSlots.attach(kp);
  const entry = s.indexTable.get(kp.localIndex);
  if (entry !== undefined && entry.peer === peer) entry.keypair = kp;
  else s.indexTable.set(kp.localIndex, new IndexEntry(peer, kp));
  hs.localIndex = 0;
  const kps = peer.keypairs;
  const previous = kps.previous;
  const next = kps.next;
  const current = kps.current;
  if (isInitiator) {
    if (next !== null) {
      kps.next = null;
      kps.previous = next;
      deleteKeypair(s, current);
    } else {
      kps.previous = current;
    }
    deleteKeypair(s, previous);
    kps.current = kp;
  } else {
    kps.next = kp;
    deleteKeypair(s, next);
    kps.previous = null;
    deleteKeypair(s, previous);
  }
  return true;
}

/** First transport message under the responder's `next` keypair: promote it to current. */
export function receivedWithKeypair(s: DeviceState, peer: Peer, kp: Keypair): boolean {
  const kps = peer.keypairs;
  if (kps.next !== kp) return false;
  const old = kps.previous;
  kps.previous = kps.current;
  deleteKeypair(s, old);
  kps.current = kp;
  kps.next = null;
  return true;
}

function deleteKeypair(s: DeviceState, kp: Keypair | null): void {
  if (kp === null) return;
  const e = s.indexTable.get(kp.localIndex);
  if (e !== undefined && e.keypair === kp) s.indexTable.delete(kp.localIndex);
  kp.zero();
  if (s.sessionSlots !== null) s.sessionSlots.release(kp);
}

/** Key change: forget the handshake in flight; current sessions may no longer send. */
export function expireCurrentKeypairs(s: DeviceState, peer: Peer): void {
  removeHandshakeIndex(s, peer);
  peer.handshake.clear();
  peer.handshake.lastSentHandshake = Number.NEGATIVE_INFINITY;
  const kps = peer.keypairs;
  if (kps.current !== null) kps.current.expireSending();
  if (kps.next !== null) kps.next.expireSending();
}

/** Erase every key of the peer and drop its staged packets (zero-key-material timer). */
export function zeroAndFlushAll(s: DeviceState, peer: Peer): void {
  const kps = peer.keypairs;
  deleteKeypair(s, kps.previous);
  deleteKeypair(s, kps.current);
  deleteKeypair(s, kps.next);
  kps.previous = null;
  kps.current = null;
  kps.next = null;
  removeHandshakeIndex(s, peer);
  peer.handshake.clear();
  flushStaged(s, peer);
}
