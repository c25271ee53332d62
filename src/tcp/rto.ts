/**
 * The retransmission timer's value (RFC 6298): SRTT and RTTVAR from one RTT sample at a time
 * (§2), Karn's rule (samples only from segments never retransmitted, §3 — the caller's part),
 * exponential backoff (§5.5) and the bounds. The first sample sets SRTT = R, RTTVAR = R/2; later
 * ones use alpha = 1/8, beta = 1/4. Times are milliseconds.
 */
export interface RtoOptions {
  /** RTO before the first sample (RFC 6298 §2.1: 1 s). */
  readonly initialRtoMs: number;
  /** Lower bound (RFC 6298 §2.4 says 1 s; Linux uses 200 ms). */
  readonly minRtoMs: number;
  /** Upper bound (RFC 6298 §2.5: at least 60 s). */
  readonly maxRtoMs: number;
  /** Clock granularity G (§2.3). */
  readonly granularityMs: number;
}

export const DEFAULT_RTO: RtoOptions = { initialRtoMs: 1000, minRtoMs: 200, maxRtoMs: 60_000, granularityMs: 1 };

export class RtoEstimator {
  srtt = 0;
  rttvar = 0;
  /** RTO without backoff. */
  private base: number;
  /** Backoff exponent (§5.5): doubled per expiry, reset by a new sample. */
  backoff = 0;
  private sampled = false;

  constructor(private readonly opts: RtoOptions) {
    this.base = opts.initialRtoMs;
  }

  /** The current timeout, backoff applied, within the bounds. */
  get rto(): number {
    return Math.min(this.opts.maxRtoMs, Math.max(this.opts.minRtoMs, this.base) * 2 ** this.backoff);
  }

  /** Feeds one RTT measurement R (ms) of a segment that was not retransmitted. */
  sample(r: number): void {
    if (!this.sampled) {
      this.srtt = r;
      this.rttvar = r / 2;
      this.sampled = true;
    } else {
      this.rttvar = 0.75 * this.rttvar + 0.25 * Math.abs(this.srtt - r);
      this.srtt = 0.875 * this.srtt + 0.125 * r;
    }
    this.base = this.srtt + Math.max(this.opts.granularityMs, 4 * this.rttvar);
    this.backoff = 0;
  }

  /** The timer expired (§5.5): the next RTO doubles, up to the bound. */
  expired(): void {
    if (this.rto < this.opts.maxRtoMs) this.backoff++;
  }
}
