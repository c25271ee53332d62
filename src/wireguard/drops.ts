/**
 * Why the engine dropped something: a fixed set of reasons, counted in a Float64Array indexed by
 * reason (no allocation, no log line per packet). Bad network input is always one of these,
 * never an exception.
 */

// Structure of the datagram (cheapest checks, before any crypto).
export const DROP_TOO_SHORT = 0;
export const DROP_BAD_LENGTH = 1;
export const DROP_UNKNOWN_TYPE = 2;
// Handshake admission.
export const DROP_INVALID_MAC1 = 3;
/** Under load without a valid mac2: a cookie reply was queued instead of processing. */
export const DROP_COOKIE_REQUIRED = 4;
export const DROP_RATE_LIMITED = 5;
export const DROP_NO_PRIVATE_KEY = 6;
// Handshake content.
export const DROP_INITIATION_DECRYPT_FAILED = 7;
export const DROP_UNKNOWN_PEER = 8;
export const DROP_INITIATION_REPLAY = 9;
export const DROP_INITIATION_FLOOD = 10;
export const DROP_UNKNOWN_RECEIVER = 11;
export const DROP_RESPONSE_UNEXPECTED = 12;
export const DROP_RESPONSE_DECRYPT_FAILED = 13;
export const DROP_COOKIE_DECRYPT_FAILED = 14;
export const DROP_HANDSHAKE_FAILED = 15;
// Transport.
export const DROP_KEYPAIR_EXPIRED = 16;
export const DROP_REPLAYED_COUNTER = 17;
export const DROP_DECRYPT_FAILED = 18;
export const DROP_INNER_INVALID = 19;
export const DROP_INNER_SOURCE_NOT_ALLOWED = 20;
// Outbound.
export const DROP_OUTBOUND_INVALID = 21;
export const DROP_NO_ROUTE = 22;
export const DROP_NO_ENDPOINT = 23;
export const DROP_PACKET_TOO_BIG = 24;
/** The oldest staged packet was pushed out of a full per-peer staging queue. */
export const DROP_STAGED_QUEUE_FULL = 25;
/** Staged packets discarded: handshake attempts gave up, keys were zeroed, or the peer removed. */
export const DROP_STAGED_FLUSHED = 26;
export const DROP_POOL_EXHAUSTED = 27;
export const DROP_OUTBOX_FULL = 28;

export const DROP_REASON_COUNT = 29;

/** Stable snake_case names, index = reason (for metrics labels). */
export const DROP_REASON_NAMES: readonly string[] = [
  'too_short',
  'bad_length',
  'unknown_type',
  'invalid_mac1',
  'cookie_required',
  'rate_limited',
  'no_private_key',
  'initiation_decrypt_failed',
  'unknown_peer',
  'initiation_replay',
  'initiation_flood',
  'unknown_receiver',
  'response_unexpected',
  'response_decrypt_failed',
  'cookie_decrypt_failed',
  'handshake_failed',
  'keypair_expired',
  'replayed_counter',
  'decrypt_failed',
  'inner_invalid',
  'inner_source_not_allowed',
  'outbound_invalid',
  'no_route',
  'no_endpoint',
  'packet_too_big',
  'staged_queue_full',
  'staged_flushed',
  'pool_exhausted',
  'outbox_full',
];
