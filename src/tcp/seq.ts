/**
 * Sequence-number arithmetic modulo 2^32 (RFC 9293 §3.4): comparisons are by the sign of the
 * 32-bit difference, so they hold across wrap-around for distances below 2^31.
 */

/** a + n modulo 2^32. */
export function seqAdd(a: number, n: number): number {
  return (a + n) >>> 0;
}

/** Signed distance a − b (negative when a is before b). */
export function seqDiff(a: number, b: number): number {
  return (a - b) | 0;
}

export function seqLt(a: number, b: number): boolean {
  return ((a - b) | 0) < 0;
}

export function seqLe(a: number, b: number): boolean {
  return ((a - b) | 0) <= 0;
}

export function seqGt(a: number, b: number): boolean {
  return ((a - b) | 0) > 0;
}

export function seqGe(a: number, b: number): boolean {
  return ((a - b) | 0) >= 0;
}

/** lo ≤ x < hi in sequence space. */
export function seqInRange(x: number, lo: number, hi: number): boolean {
  return ((x - lo) | 0) >= 0 && ((x - hi) | 0) < 0;
}
