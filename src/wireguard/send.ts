/**
 * Outbound data path (wireguard-go's send.go): encrypt in place, stage while there is no
 * session, send what was staged once there is one, keepalives, and rekey-on-send.
 * Zero allocation per packet.
 */
import { IPV4_MIN_HEADER_LEN } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN } from '../packet/ipv6.js';
import { REKEY_AFTER_TIME } from './constants.js';
import type { DeviceState } from './device-state.js';
import { ENCRYPT_DROP, ENCRYPT_SEND, ENCRYPT_STAGED, type EncryptResult } from './device-types.js';
import {
  DROP_NO_ENDPOINT,
  DROP_NO_ROUTE,
  DROP_OUTBOUND_INVALID,
  DROP_OUTBOX_FULL,
  DROP_POOL_EXHAUSTED,
} from './drops.js';
import { sendHandshakeInitiation } from './handshake.js';
import { releaseSpeculativePacing } from './wake.js';
import { writeNonce, type Keypair } from './keypair.js';
import { AEAD_TAG_LEN, TRANSPORT_HEADER_SIZE, TRANSPORT_OVERHEAD, writeTransportHeader } from './messages.js';
import { paddedLength } from './padding.js';
import type { Peer } from './peer.js';
import { OUT_KEEPALIVE, OUT_TRANSPORT } from './pool.js';
import { enstage, stage, unstage } from './staging.js';

/** Device.encrypt: the peer is chosen by the destination's allowed IPs. */
export function encrypt(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  now: number,
  out: EncryptResult,
): number {
  resetEncrypt(out, off);
  let peer: Peer | undefined;
  const version = len > 0 ? buf[off] >> 4 : 0;
  if (version === 4 && len >= IPV4_MIN_HEADER_LEN) peer = s.allowedIps.lookupV4Destination(buf, off);
  else if (version === 6 && len >= IPV6_HEADER_LEN) peer = s.allowedIps.lookupV6Destination(buf, off);
  else return encryptDrop(s, out, DROP_OUTBOUND_INVALID);
  if (peer === undefined) return encryptDrop(s, out, DROP_NO_ROUTE);
  return encryptToPeer(s, peer, buf, off, len, now, out);
}

/** Device.encryptFor: the caller chose the peer; no allowed-IPs lookup. A removed peer: DROP_NO_ROUTE. */
export function encryptFor(
  s: DeviceState,
  peer: Peer,
  buf: Uint8Array,
  off: number,
  len: number,
  now: number,
  out: EncryptResult,
): number {
  resetEncrypt(out, off);
  const version = len > 0 ? buf[off] >> 4 : 0;
  if (!((version === 4 && len >= IPV4_MIN_HEADER_LEN) || (version === 6 && len >= IPV6_HEADER_LEN))) {
    return encryptDrop(s, out, DROP_OUTBOUND_INVALID);
  }
  if (peer.removed) return encryptDrop(s, out, DROP_NO_ROUTE);
  return encryptToPeer(s, peer, buf, off, len, now, out);
}

function resetEncrypt(out: EncryptResult, off: number): void {
  out.peer = null;
  out.endpoint = null;
  out.start = 0;
  out.length = 0;
  out.reason = -1;
  if (off < TRANSPORT_HEADER_SIZE)
    throw new RangeError(`encrypt needs ${TRANSPORT_HEADER_SIZE} bytes of headroom, got offset ${off}`);
}

function encryptToPeer(
  s: DeviceState,
  peer: Peer,
  buf: Uint8Array,
  off: number,
  len: number,
  now: number,
  out: EncryptResult,
): number {
  out.peer = peer;
  const kp = peer.keypairs.current;
  if (peer.stagedCount === 0 && kp !== null && kp.canSend(now)) {
    const endpoint = peer.endpoint;
    if (endpoint === null) return encryptDrop(s, out, DROP_NO_ENDPOINT);
    const padded = paddedLength(len, s.mtu);
    if (off + padded + AEAD_TAG_LEN > buf.length) {
      throw new RangeError(`encrypt needs ${padded - len + AEAD_TAG_LEN} bytes of tailroom after the packet`);
    }
    kp.takeSendCounter();
    const total = sealTransport(s, kp, buf, off, len, padded);
    const t = peer.timers;
    peer.txBytes += total;
    peer.txPackets++;
    t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
    t.anyAuthenticatedPacketSent();
    t.dataSent(now);
    keepKeyFreshSending(s, peer, now);
    out.action = ENCRYPT_SEND;
    out.endpoint = endpoint;
    out.start = off - TRANSPORT_HEADER_SIZE;
    out.length = total;
    return ENCRYPT_SEND;
  }
  const staged = stage(s, peer, buf, off, len);
  sendStagedPackets(s, peer, now);
  if (!staged) {
    // The packet is lost (counted in stage()), but a session is still wanted.
    if (kp === null || !kp.canSend(now)) sendHandshakeInitiation(s, peer, false, now);
    out.action = ENCRYPT_DROP;
    out.reason = s.lastStageDrop;
    return ENCRYPT_DROP;
  }
  out.action = ENCRYPT_STAGED;
  return ENCRYPT_STAGED;
}

function encryptDrop(s: DeviceState, out: EncryptResult, reason: number): number {
  s.drops[reason]++;
  out.action = ENCRYPT_DROP;
  out.reason = reason;
  return ENCRYPT_DROP;
}

/** Pads, writes the header at off-16 and seals buf[off, off+padded) in place. Returns message size. */
function sealTransport(s: DeviceState, kp: Keypair, buf: Uint8Array, off: number, len: number, padded: number): number {
  // At most 15 bytes: a loop, not TypedArray#fill (a call into V8's C++ runtime, several µs from cold caches).
  for (let i = off + len; i < off + padded; i++) buf[i] = 0;
  writeTransportHeader(buf, off - TRANSPORT_HEADER_SIZE, kp.remoteIndex, kp.takenLo, kp.takenHi);
  writeNonce(s.nonce, kp.takenLo, kp.takenHi);
  s.backend.seal(kp.sendKey, s.nonce, null, buf, off, padded, buf, off);
  return padded + TRANSPORT_OVERHEAD;
}

/**
 * Sends what is staged if the current session may send; otherwise starts a handshake and
 * leaves the packets staged (wireguard-go's SendStagedPackets).
 */
export function sendStagedPackets(s: DeviceState, peer: Peer, now: number): void {
  for (;;) {
    if (peer.stagedCount === 0 || peer.removed) return;
    const kp = peer.keypairs.current;
    if (kp === null || !kp.canSend(now)) {
      releaseSpeculativePacing(peer, now);
      sendHandshakeInitiation(s, peer, false, now);
      return;
    }
    while (peer.stagedCount > 0) {
      if (!kp.takeSendCounter()) break;
      const u = unstage(s, peer);
      let slot = u.slot;
      const len = u.length;
      if (slot < 0) {
        slot = s.pool.acquire();
        if (slot < 0) {
          s.drops[DROP_POOL_EXHAUSTED]++;
          continue;
        }
      }
      const endpoint = peer.endpoint;
      if (endpoint === null) {
        s.pool.release(slot);
        s.drops[DROP_NO_ENDPOINT]++;
        continue;
      }
      const buf = s.pool.buffer(slot);
      const total = sealTransport(s, kp, buf, TRANSPORT_HEADER_SIZE, len, paddedLength(len, s.mtu));
      if (
        !s.outbox.push(slot, 0, total, endpoint.address, endpoint.port, peer, len === 0 ? OUT_KEEPALIVE : OUT_TRANSPORT)
      ) {
        s.pool.release(slot);
        s.drops[DROP_OUTBOX_FULL]++;
        continue;
      }
      peer.txBytes += total;
      peer.txPackets++;
      const t = peer.timers;
      t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
      t.anyAuthenticatedPacketSent();
      if (len > 0) t.dataSent(now);
    }
    if (peer.stagedCount === 0) {
      keepKeyFreshSending(s, peer, now);
      return;
    }
  }
}

/** Queue a keepalive (an empty transport message), or start a handshake to send it. */
export function sendKeepalive(s: DeviceState, peer: Peer, now: number): void {
  if (peer.removed) return;
  if (peer.stagedCount === 0) enstage(peer, -1, 0);
  sendStagedPackets(s, peer, now);
}

/** Initiator-side rekey when sending: after 2^60 messages, or a session older than 120 s. */
export function keepKeyFreshSending(s: DeviceState, peer: Peer, now: number): void {
  const kp = peer.keypairs.current;
  if (kp === null) return;
  if (kp.sendCountWantsRekey || (kp.isInitiator && now - kp.created > REKEY_AFTER_TIME)) {
    sendHandshakeInitiation(s, peer, false, now);
  }
}
