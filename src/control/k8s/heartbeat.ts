/**
 * Heartbeat messages between the replicas of one gateway (takeover-decision.ts says what they
 * decide), sans I/O: encode, and verify-then-decode.
 *
 * Wire format (one UDP datagram, big-endian):
 *   0  4  magic "WFHB"
 *   4  1  version (1)
 *   5  1  state: 1 active, 2 standby, 3 leaving
 *   6  8  sentAt: the sender's wall clock, ms since the epoch (float64; strictly increasing per sender)
 *  14  1  length L of the sender identity (its pod name, UTF-8, 1..253 bytes)
 *  15  L  sender identity
 *  15+L 32 HMAC-SHA256 over bytes [0, 15+L) with the heartbeat key
 * The heartbeat key is HKDF-SHA256 of the gateway's WireGuard private key (every replica mounts
 * the same keys Secret), salted with the Lease name (one gateway's heartbeats are no other's).
 * Whoever lacks the key can neither forge a heartbeat (to hold off or to cause a takeover) nor
 * alter one; replays are refused by the receiver (sentAt, see TakeoverDecision.accept).
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { Heard, ReplicaState } from './takeover-decision.js';

const MAGIC = 0x57464842; // "WFHB"
const VERSION = 1;
const MAC_LEN = 32;
const HEADER = 15;
const MAX_ID = 253;
const STATES: readonly ReplicaState[] = ['active', 'standby', 'leaving'];

/** Why a datagram was refused (counted by the link, never logged per packet). */
export type HeartbeatDrop = 'short' | 'magic' | 'version' | 'state' | 'length' | 'mac';

/** The heartbeat key of a gateway: `privateKey` raw 32 bytes, `scope` the Lease name. */
export function heartbeatKey(privateKey: Uint8Array, scope: string): Buffer {
  if (privateKey.length !== 32) throw new RangeError('heartbeatKey: the WireGuard private key is 32 bytes');
  if (scope === '') throw new RangeError('heartbeatKey: empty scope');
  return Buffer.from(hkdfSync('sha256', privateKey, Buffer.from(scope, 'utf8'), 'weft gateway heartbeat v1', 32));
}

function mac(key: Uint8Array, buf: Uint8Array, end: number): Buffer {
  return createHmac('sha256', key).update(buf.subarray(0, end)).digest();
}

/** One heartbeat datagram. Throws RangeError for an identity that does not fit. */
export function encodeHeartbeat(key: Uint8Array, h: Heard): Buffer {
  const id = Buffer.from(h.from, 'utf8');
  if (id.length === 0 || id.length > MAX_ID) throw new RangeError(`heartbeat: identity of ${id.length} bytes`);
  const buf = Buffer.alloc(HEADER + id.length + MAC_LEN);
  buf.writeUInt32BE(MAGIC, 0);
  buf[4] = VERSION;
  buf[5] = STATES.indexOf(h.state) + 1;
  buf.writeDoubleBE(h.sentAt, 6);
  buf[14] = id.length;
  id.copy(buf, HEADER);
  mac(key, buf, HEADER + id.length).copy(buf, HEADER + id.length);
  return buf;
}

/** The heartbeat in `buf` if it is well formed and its MAC verifies; otherwise why not. */
export function decodeHeartbeat(key: Uint8Array, buf: Uint8Array): Heard | HeartbeatDrop {
  if (buf.length < HEADER + 1 + MAC_LEN) return 'short';
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  if (b.readUInt32BE(0) !== MAGIC) return 'magic';
  if (b[4] !== VERSION) return 'version';
  const idLen = b[14]!;
  if (idLen === 0 || HEADER + idLen + MAC_LEN !== b.length) return 'length';
  const want = mac(key, b, HEADER + idLen);
  if (!timingSafeEqual(want, b.subarray(HEADER + idLen))) return 'mac';
  const state = STATES[b[5]! - 1];
  if (state === undefined) return 'state';
  const sentAt = b.readDoubleBE(6);
  if (!Number.isFinite(sentAt)) return 'state';
  return { from: b.toString('utf8', HEADER, HEADER + idLen), state, sentAt };
}
