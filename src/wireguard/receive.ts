/**
 * Inbound path (wireguard-go's receive.go): classify a UDP payload, decrypt transport data in
 * place with replay protection, confirm the responder's next keypair, roam, rekey-on-receive,
 * and check the inner source against the decrypting peer's allowed IPs. Handshake messages go
 * to handshake.ts. Zero allocation per transport packet.
 */
import { IPV4_MIN_HEADER_LEN, IPV4_TOTAL_LENGTH_OFFSET } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN, IPV6_PAYLOAD_LENGTH_OFFSET } from '../packet/ipv6.js';
import { REJECT_AFTER_TIME, REKEY_ON_RECEIVE_AGE } from './constants.js';
import { receiveDrop, type DeviceState } from './device-state.js';
import { RECEIVE_DELIVER, RECEIVE_HANDSHAKE, RECEIVE_KEEPALIVE, type ReceiveResult } from './device-types.js';
import {
  DROP_BAD_LENGTH,
  DROP_DECRYPT_FAILED,
  DROP_INNER_INVALID,
  DROP_INNER_SOURCE_NOT_ALLOWED,
  DROP_KEYPAIR_EXPIRED,
  DROP_REPLAYED_COUNTER,
  DROP_TOO_SHORT,
  DROP_UNKNOWN_RECEIVER,
  DROP_UNKNOWN_TYPE,
} from './drops.js';
import {
  receivedWithKeypair,
  receiveHandshake,
  receiveScreenedHandshake,
  roam,
  screenHandshake,
  sendHandshakeInitiation,
} from './handshake.js';
import { writeNonce } from './keypair.js';
import {
  CLASSIFY_BAD_LENGTH,
  CLASSIFY_TOO_SHORT,
  MESSAGE_INITIATION,
  MESSAGE_RESPONSE,
  MESSAGE_TRANSPORT,
  TRANSPORT_COUNTER_OFFSET,
  TRANSPORT_HEADER_SIZE,
  TRANSPORT_OVERHEAD,
  TRANSPORT_RECEIVER_OFFSET,
  classifyMessage,
  readU32LE,
} from './messages.js';
import type { Endpoint, Peer } from './peer.js';
import { sendKeepalive, sendStagedPackets } from './send.js';
import { wakeOnUnknownSession } from './wake.js';

/** Device.receive (see device.ts for the contract). */
export function receive(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  underLoad: boolean,
  out: ReceiveResult,
): number {
  out.peer = null;
  out.start = 0;
  out.length = 0;
  out.reason = -1;
  const kind = classifyMessage(buf, off, len);
  if (kind === MESSAGE_TRANSPORT) return receiveTransport(s, buf, off, len, from, now, out);
  if (kind < 0) {
    return receiveDrop(
      s,
      out,
      kind === CLASSIFY_TOO_SHORT ? DROP_TOO_SHORT : kind === CLASSIFY_BAD_LENGTH ? DROP_BAD_LENGTH : DROP_UNKNOWN_TYPE,
    );
  }
  const r = receiveHandshake(s, kind, buf, off, len, from, now, underLoad, out);
  // A consumed response began our session as initiator: confirm it to the responder.
  if (kind === MESSAGE_RESPONSE && r === RECEIVE_HANDSHAKE) sendKeepalive(s, out.peer!, now);
  return r;
}

/** Device.screenHandshake (see device.ts for the contract). */
export function screen(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  underLoad: boolean,
  out: ReceiveResult,
): boolean {
  const kind = classifyMessage(buf, off, len);
  if (kind !== MESSAGE_INITIATION && kind !== MESSAGE_RESPONSE) return true; // receive() handles (or drops) the rest
  out.peer = null;
  out.reason = -1;
  return screenHandshake(s, buf, off, len, from, now, underLoad, out);
}

/** Device.receiveScreened (see device.ts for the contract). */
export function receiveScreened(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  out: ReceiveResult,
): number {
  const kind = classifyMessage(buf, off, len);
  if (kind !== MESSAGE_INITIATION && kind !== MESSAGE_RESPONSE) return receive(s, buf, off, len, from, now, false, out);
  out.peer = null;
  out.start = 0;
  out.length = 0;
  out.reason = -1;
  const r = receiveScreenedHandshake(s, kind, buf, off, from, now, out);
  if (kind === MESSAGE_RESPONSE && r === RECEIVE_HANDSHAKE) sendKeepalive(s, out.peer!, now);
  return r;
}

function receiveTransport(
  s: DeviceState,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  out: ReceiveResult,
): number {
  const entry = s.indexTable.getAt(buf, off + TRANSPORT_RECEIVER_OFFSET);
  const kp = entry === undefined ? null : entry.keypair;
  if (kp === null) {
    // Counted as the drop it is; a peer still on a session we lost (we restarted) gets a
    // handshake now instead of after its own Rekey-Timeout.
    wakeOnUnknownSession(s, from, now);
    return receiveDrop(s, out, DROP_UNKNOWN_RECEIVER);
  }
  if (now - kp.created > REJECT_AFTER_TIME) return receiveDrop(s, out, DROP_KEYPAIR_EXPIRED);
  const lo = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET);
  const hi = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET + 4);
  if (!kp.replay.check(lo, hi)) return receiveDrop(s, out, DROP_REPLAYED_COUNTER);
  writeNonce(s.nonce, lo, hi);
  const content = off + TRANSPORT_HEADER_SIZE;
  if (!s.backend.open(kp.receiveKey, s.nonce, null, buf, content, len - TRANSPORT_HEADER_SIZE, buf, content)) {
    return receiveDrop(s, out, DROP_DECRYPT_FAILED);
  }
  if (!kp.replay.validate(lo, hi)) return receiveDrop(s, out, DROP_REPLAYED_COUNTER);
  const peer = entry!.peer;
  out.peer = peer;
  roam(peer, from);
  if (receivedWithKeypair(s, peer, kp)) {
    peer.timers.handshakeComplete();
    peer.lastHandshakeMs = now;
    sendStagedPackets(s, peer, now);
  }
  peer.rxBytes += len;
  peer.rxPackets++;
  keepKeyFreshReceiving(s, peer, now);
  const t = peer.timers;
  t.anyAuthenticatedPacketTraversal(now, peer.persistentKeepalive);
  t.anyAuthenticatedPacketReceived();
  const plainLen = len - TRANSPORT_OVERHEAD;
  if (plainLen === 0) {
    out.action = RECEIVE_KEEPALIVE;
    return RECEIVE_KEEPALIVE;
  }
  t.dataReceived(now);
  // Default mode: the device-wide table must map the source back to this peer. Overlapping
  // mode: the source must be in this peer's own set (values are the peer itself).
  const table = s.overlapping ? peer.ownAllowedIps! : s.allowedIps;
  let ipLen: number;
  let owner: Peer | undefined;
  const version = buf[content] >> 4;
  if (version === 4) {
    if (plainLen < IPV4_MIN_HEADER_LEN) return receiveDrop(s, out, DROP_INNER_INVALID);
    ipLen = (buf[content + IPV4_TOTAL_LENGTH_OFFSET] << 8) | buf[content + IPV4_TOTAL_LENGTH_OFFSET + 1];
    if (ipLen > plainLen || ipLen < IPV4_MIN_HEADER_LEN) return receiveDrop(s, out, DROP_INNER_INVALID);
    owner = table.lookupV4Source(buf, content);
  } else if (version === 6) {
    if (plainLen < IPV6_HEADER_LEN) return receiveDrop(s, out, DROP_INNER_INVALID);
    ipLen =
      ((buf[content + IPV6_PAYLOAD_LENGTH_OFFSET] << 8) | buf[content + IPV6_PAYLOAD_LENGTH_OFFSET + 1]) +
      IPV6_HEADER_LEN;
    if (ipLen > plainLen) return receiveDrop(s, out, DROP_INNER_INVALID);
    owner = table.lookupV6Source(buf, content);
  } else {
    return receiveDrop(s, out, DROP_INNER_INVALID);
  }
  if (owner !== peer) return receiveDrop(s, out, DROP_INNER_SOURCE_NOT_ALLOWED);
  out.action = RECEIVE_DELIVER;
  out.start = content;
  out.length = ipLen;
  return RECEIVE_DELIVER;
}

/** Initiator-side rekey when receiving on a session close to Reject-After-Time (once). */
export function keepKeyFreshReceiving(s: DeviceState, peer: Peer, now: number): void {
  const t = peer.timers;
  if (t.sentLastMinuteHandshake) return;
  const kp = peer.keypairs.current;
  if (kp !== null && kp.isInitiator && now - kp.created > REKEY_ON_RECEIVE_AGE) {
    t.sentLastMinuteHandshake = true;
    sendHandshakeInitiation(s, peer, false, now);
  }
}
