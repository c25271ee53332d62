/**
 * A token bucket for rate-limiting generated packets (ICMP errors). No clock: time is the `now`
 * (ms) the caller passes; no allocation per call.
 */

/** Token bucket: `ratePerSecond` tokens per second up to `burst`; starts full. */
export class TokenBucket {
  private tokens: number;
  private last = Number.NaN;

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
  ) {
    if (!(ratePerSecond >= 0) || !(burst >= 1))
      throw new RangeError(`token bucket needs rate ≥ 0 and burst ≥ 1, got ${ratePerSecond}/${burst}`);
    this.tokens = burst;
  }

  /** Take one token at time `now` (ms). False when the bucket is empty. */
  take(now: number): boolean {
    if (this.last !== this.last) this.last = now; // NaN: first use
    const elapsed = now - this.last;
    if (elapsed > 0) {
      const t = this.tokens + (elapsed * this.ratePerSecond) / 1000;
      this.tokens = t < this.burst ? t : this.burst;
      this.last = now;
    } else if (elapsed < 0) {
      this.last = now; // the caller's clock went back: restart refilling from here
    }
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }
}
