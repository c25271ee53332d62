/**
 * A small seeded PRNG for reproducible randomized tests (mulberry32: 32-bit state, period 2^32).
 * Not cryptographic. Any helper may reuse it: `const rng = new Prng(42)`.
 */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform unsigned 32-bit integer. */
  nextU32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** A new array of `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    this.fill(out);
    return out;
  }

  /** Fill `buf` with random bytes. */
  fill(buf: Uint8Array): void {
    for (let i = 0; i < buf.length; i++) buf[i] = this.nextU32() & 0xff;
  }

  /** A uniformly chosen element. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty array');
    return items[this.int(0, items.length - 1)]!;
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }
}
