/**
 * WireGuard protocol constants (whitepaper §6.1 "Timers & Stateless UX", table of constants;
 * §5.4 message sizes; §5.4.6 padding). Times are in milliseconds because every engine in this
 * project takes `now` as a millisecond number.
 *
 * 64-bit message counters never pass through a float: the limits are expressed as the two
 * 32-bit halves that src/wireguard/keypair.ts and replay.ts compare against.
 */

/** Rekey-After-Messages = 2^60: the initiator renegotiates after sending this many messages. */
export const REKEY_AFTER_MESSAGES_HI = 0x10000000; // 2^60 / 2^32 = 2^28, low half 0
/** Reject-After-Messages = 2^64 − 2^13 − 1, high half. */
export const REJECT_AFTER_MESSAGES_HI = 0xffffffff;
/** Reject-After-Messages = 2^64 − 2^13 − 1, low half (2^32 − 2^13 − 1). */
export const REJECT_AFTER_MESSAGES_LO = 0xffffdfff;

/** Rekey-After-Time: 120 s. */
export const REKEY_AFTER_TIME = 120_000;
/** Reject-After-Time: 180 s. */
export const REJECT_AFTER_TIME = 180_000;
/** Rekey-Attempt-Time: 90 s of retries before giving up. */
export const REKEY_ATTEMPT_TIME = 90_000;
/** Rekey-Timeout: 5 s between initiation retransmissions (plus jitter). */
export const REKEY_TIMEOUT = 5_000;
/** Upper bound (exclusive) of the random jitter added to Rekey-Timeout, in ms: 0..333 ms. */
export const REKEY_TIMEOUT_JITTER_MAX = 334;
/** Keepalive-Timeout: 10 s. */
export const KEEPALIVE_TIMEOUT = 10_000;
/**
 * Number of retransmissions that fit in Rekey-Attempt-Time (90 s / 5 s = 18). After the first
 * initiation plus this many retries (and one more expiry), the peer gives up.
 */
export const MAX_TIMER_HANDSHAKES = REKEY_ATTEMPT_TIME / REKEY_TIMEOUT;
/** All key material is erased after 3 × Reject-After-Time (540 s) without a new handshake. */
export const ZERO_KEY_MATERIAL_AFTER = REJECT_AFTER_TIME * 3;
/**
 * An initiator that still uses a keypair this old when *receiving* starts a new handshake
 * (whitepaper §6.2: Reject-After-Time − Keepalive-Timeout − Rekey-Timeout = 165 s), once.
 */
export const REKEY_ON_RECEIVE_AGE = REJECT_AFTER_TIME - KEEPALIVE_TIMEOUT - REKEY_TIMEOUT;

/** Cookie secret Rm rotation and received-cookie lifetime: 120 s (whitepaper §5.4.7). */
export const COOKIE_REFRESH_TIME = 120_000;
/** At most one handshake initiation consumed per peer per 20 ms (flood protection, §5.1). */
export const HANDSHAKE_INITIATION_RATE = 20;
/**
 * "Under load" lingers this long after the caller last reported load (wireguard-go's
 * UnderLoadAfterTime), so a queue that oscillates around the threshold keeps requiring cookies.
 */
export const UNDER_LOAD_AFTER_TIME = 1_000;

/** Per-source handshake rate limit: 20 per second with a burst of 5 (wireguard-go ratelimiter). */
export const RATELIMIT_PACKETS_PER_SECOND = 20;
export const RATELIMIT_BURST = 5;
/** Rate-limiter entries idle this long are garbage-collected. */
export const RATELIMIT_GC_INTERVAL = 1_000;
/** Bound on rate-limiter entries (sources); beyond it new sources are refused (Linux does the same). */
export const RATELIMIT_MAX_ENTRIES = 8192;

/** Plaintext is padded to a multiple of 16 bytes, capped at the MTU (whitepaper §5.4.6). */
export const PADDING_MULTIPLE = 16;
/** wireguard-go's bound of packets staged per peer while no session exists. */
export const QUEUE_STAGED_SIZE = 128;
/** Default TUN MTU (wg-quick and Liqo templates use 1420; Liqo's gateways use 1340). */
export const DEFAULT_MTU = 1420;
