/**
 * One router hop's TTL work: the TTL (IPv4, incremental checksum) / hop limit (IPv6) decrement,
 * and the ICMP Time Exceeded that replaces a packet that would leave with TTL 0, written in its
 * headroom and rate-limited. Apart from the router because it is packet arithmetic and a token
 * bucket, not a routing decision: the router decides where the error goes (routed as its own
 * traffic, or back to the peer the packet came from).
 *
 * The hop is taken on every forward, not on delivery to the host nor on the router's own
 * packets. As the kernel's ip_forward, it comes before the FORWARD hook: forward stages see the
 * decremented TTL and never a packet that expires here.
 */
import type { IpFamily } from '../packet/addr.js';
import { TIME_EXCEEDED_V4_PREFIX, TIME_EXCEEDED_V6_PREFIX, writeTimeExceeded } from '../packet/icmp-error.js';
import { IPV4_TTL_OFFSET, decrementIpv4Ttl } from '../packet/ipv4.js';
import { IPV6_HOP_LIMIT_OFFSET } from '../packet/ipv6.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import { RouterDrop } from './drops.js';

/** The packet's TTL / hop limit survives one hop. */
export function ttlLeft(buf: Uint8Array, off: number, fam: IpFamily): boolean {
  return buf[off + (fam === 4 ? IPV4_TTL_OFFSET : IPV6_HOP_LIMIT_OFFSET)]! > 1;
}

/** Decrements the TTL / hop limit and returns true, or returns false (packet untouched) when it would reach 0. */
export function decrementHop(buf: Uint8Array, off: number, fam: IpFamily): boolean {
  if (fam === 4) {
    if (buf[off + IPV4_TTL_OFFSET]! > 1) {
      decrementIpv4Ttl(buf, off);
      return true;
    }
  } else {
    const hl = buf[off + IPV6_HOP_LIMIT_OFFSET]!;
    if (hl > 1) {
      buf[off + IPV6_HOP_LIMIT_OFFSET] = hl - 1;
      return true;
    }
  }
  return false;
}

/** Bytes a Time Exceeded puts in front of the expired packet (it starts at `off` − this). */
export function timeExceededPrefix(fam: IpFamily): number {
  return fam === 4 ? TIME_EXCEEDED_V4_PREFIX : TIME_EXCEEDED_V6_PREFIX;
}

/** Writes rate-limited Time Exceeded errors; counts into the router's drops (RouterDrop). */
export class TimeExceededWriter {
  private readonly bucket: TokenBucket;

  constructor(
    private readonly drops: Float64Array,
    ratePerSecond: number,
    burst: number,
  ) {
    this.bucket = new TokenBucket(ratePerSecond, burst);
  }

  /**
   * For the expired packet buf[off, off+len): writes the error, sourced from `from` (no error
   * without one), at off − timeExceededPrefix(fam) and returns its length; 0 when none was
   * written (too little headroom or rate-limited: counted).
   */
  write(buf: Uint8Array, off: number, len: number, fam: IpFamily, from: Uint8Array | null, now: number): number {
    if (from === null) return 0;
    // Room for the error's headers and, in front of them, the largest header a later stage writes.
    if (off < timeExceededPrefix(fam) + 64) {
      this.drops[RouterDrop.NoHeadroom]!++;
      return 0;
    }
    if (!this.bucket.take(now)) {
      this.drops[RouterDrop.IcmpRateLimited]!++;
      return 0;
    }
    return writeTimeExceeded(buf, off, len, from);
  }
}
