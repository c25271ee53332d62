/**
 * Per-source token bucket for handshake messages (whitepaper §5.3: "rate limit" under load).
 *
 * 20 handshakes per second per source with a burst of 5, the parameters of wireguard-go and
 * Linux. Tokens are kept in milliseconds of credit: each packet costs 1000/20 = 50 ms and a
 * bucket holds at most 5 × 50 ms. A new source starts with a full bucket minus this packet.
 * As in Linux, a packet passes when the bucket holds at least one packet's cost (">="), so a
 * burst of exactly 5 passes at one instant.
 *
 * Keys are chosen by the caller (device.ts: the IPv4 address, or the /64 of an IPv6 address, as
 * both reference implementations do). The table is bounded: beyond RATELIMIT_MAX_ENTRIES live
 * sources a new source is refused. Garbage collection is driven by `now`: entries idle for more
 * than a second are dropped at most once per second, during allow() or gc().
 */
import {
  RATELIMIT_BURST,
  RATELIMIT_GC_INTERVAL,
  RATELIMIT_MAX_ENTRIES,
  RATELIMIT_PACKETS_PER_SECOND,
} from './constants.js';

const PACKET_COST = 1000 / RATELIMIT_PACKETS_PER_SECOND;
const MAX_TOKENS = PACKET_COST * RATELIMIT_BURST;

interface Bucket {
  tokens: number;
  lastTime: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private nextGc = Number.NEGATIVE_INFINITY;

  constructor(private readonly maxEntries = RATELIMIT_MAX_ENTRIES) {}

  get size(): number {
    return this.buckets.size;
  }

  /** Should a handshake from `key` at `now` be processed? Consumes one packet's cost if so. */
  allow(key: string, now: number): boolean {
    if (now >= this.nextGc) this.gc(now);
    const b = this.buckets.get(key);
    if (b === undefined) {
      if (this.buckets.size >= this.maxEntries) return false;
      this.buckets.set(key, { tokens: MAX_TOKENS - PACKET_COST, lastTime: now });
      return true;
    }
    let tokens = b.tokens + (now - b.lastTime);
    if (tokens > MAX_TOKENS) tokens = MAX_TOKENS;
    b.lastTime = now;
    if (tokens >= PACKET_COST) {
      b.tokens = tokens - PACKET_COST;
      return true;
    }
    b.tokens = tokens;
    return false;
  }

  /** Drop buckets idle for more than a second (a full bucket is the same as no bucket). */
  gc(now: number): void {
    this.nextGc = now + RATELIMIT_GC_INTERVAL;
    for (const [key, b] of this.buckets) {
      if (now - b.lastTime > RATELIMIT_GC_INTERVAL) this.buckets.delete(key);
    }
  }

  clear(): void {
    this.buckets.clear();
  }
}
