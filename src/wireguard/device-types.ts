/**
 * The result codes, caller-owned result objects and configuration error of Device (device.ts),
 * in a module of their own so the per-concern modules (send.ts, receive.ts, …) can use them
 * without importing the facade. device.ts re-exports them: callers import from there.
 */
import type { Endpoint, Peer } from './peer.js';

/** encrypt() / encryptFor() results. */
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
export class EncryptResult<P = Peer> {
  action = ENCRYPT_DROP;
  /** DROP_* when action is ENCRYPT_DROP. */
  reason = -1;
  peer: P | null = null;
  endpoint: Endpoint | null = null;
  start = 0;
  length = 0;
}

/** Caller-owned, reused result of receive(). */
export class ReceiveResult<P = Peer> {
  action = RECEIVE_DROP;
  reason = -1;
  peer: P | null = null;
  start = 0;
  length = 0;
}

/** Configuration the daemon or UAPI tried to apply is invalid. */
export class WireGuardConfigError extends Error {
  override readonly name = 'WireGuardConfigError';
}
