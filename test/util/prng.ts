/**
 * A small seeded PRNG for reproducible randomized tests (mulberry32: 32-bit state, period 2^32).
 * Not cryptographic. Any helper may reuse it: `const rng = new Prng(42)`. The stream is the memory
 * network's (src/io/memory-link.ts), so a test can replay what a seeded link decided.
 */
import { SeededRandom } from '../../src/io/memory-link.js';

export class Prng extends SeededRandom {
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
