import { describe, expect, it } from 'vitest';
import { REPLAY_RING_BITS, REPLAY_WINDOW_SIZE, ReplayFilter } from '../../src/wireguard/replay.js';
import { Prng } from '../util/prng.js';

const REJECT = (1n << 64n) - (1n << 13n) - 1n;

function split(c: bigint): [number, number] {
  return [Number(c & 0xffffffffn), Number(c >> 32n)];
}

function accept(f: ReplayFilter, c: bigint): boolean {
  const [lo, hi] = split(c);
  const pre = f.check(lo, hi);
  const ok = f.validate(lo, hi);
  // check() is a pure pre-filter: it never rejects what validate() accepts.
  if (ok) expect(pre).toBe(true);
  return ok;
}

/** The specification as a set: accept iff below the limit, not seen, and newest − c <= window. */
class Reference {
  private seen = new Set<bigint>();
  private last = 0n;
  accept(c: bigint): boolean {
    if (c >= REJECT) return false;
    if (c <= this.last && this.last - c > BigInt(REPLAY_WINDOW_SIZE)) return false;
    if (this.seen.has(c)) return false;
    this.seen.add(c);
    if (c > this.last) this.last = c;
    return true;
  }
}

describe('ReplayFilter (RFC 6479 ring, wireguard-go parameters)', () => {
  it('has an 8192-bit ring and an 8128-counter window', () => {
    expect(REPLAY_RING_BITS).toBe(8192);
    expect(REPLAY_WINDOW_SIZE).toBe(8128);
  });

  it('accepts counter 0 once', () => {
    const f = new ReplayFilter();
    expect(accept(f, 0n)).toBe(true);
    expect(accept(f, 0n)).toBe(false);
    expect(accept(f, 1n)).toBe(true);
    expect(accept(f, 0n)).toBe(false);
  });

  it('accepts out-of-order counters within the window exactly once', () => {
    const f = new ReplayFilter();
    for (const c of [5n, 3n, 4n, 1n, 0n, 2n, 100n, 64n, 63n, 65n]) expect(accept(f, c)).toBe(true);
    for (const c of [5n, 3n, 0n, 100n, 64n]) expect(accept(f, c)).toBe(false);
  });

  it('window boundary: newest − 8128 is accepted, newest − 8129 is not', () => {
    for (const head of [8129n, 8191n, 8192n, 10_000n, 123_457n]) {
      const f = new ReplayFilter();
      expect(accept(f, head)).toBe(true);
      expect(accept(f, head - 8128n)).toBe(true);
      expect(accept(f, head - 8128n)).toBe(false);
      expect(accept(f, head - 8129n)).toBe(false);
      expect(accept(f, head - 1n)).toBe(true);
    }
  });

  it('counter 0 falls out of the window once the head passes 8128', () => {
    const f = new ReplayFilter();
    expect(accept(f, 8128n)).toBe(true);
    expect(accept(f, 0n)).toBe(true);
    const g = new ReplayFilter();
    expect(accept(g, 8129n)).toBe(true);
    expect(accept(g, 0n)).toBe(false);
  });

  it('far jumps clear the ring, and bits of the previous lap do not leak', () => {
    const f = new ReplayFilter();
    for (let c = 0n; c < 300n; c++) expect(accept(f, c)).toBe(true);
    // Exactly one ring lap ahead: the same ring slots must read as unseen.
    expect(accept(f, 8192n + 10n)).toBe(true);
    expect(accept(f, 8192n + 5n)).toBe(true);
    const far = 1n << 40n;
    expect(accept(f, far)).toBe(true);
    expect(accept(f, far - 8128n)).toBe(true);
    expect(accept(f, far - 8129n)).toBe(false);
    expect(accept(f, 8192n + 11n)).toBe(false);
    expect(accept(f, far + 1n)).toBe(true);
  });

  it('handles the 2^32 boundary of the low half exactly', () => {
    const f = new ReplayFilter();
    const head = (1n << 32n) + 5n;
    expect(accept(f, (1n << 32n) - 3n)).toBe(true);
    expect(accept(f, head)).toBe(true);
    expect(accept(f, (1n << 32n) - 3n)).toBe(false);
    expect(accept(f, (1n << 32n) - 2n)).toBe(true);
    expect(accept(f, head - 8128n)).toBe(true);
    expect(accept(f, head - 8129n)).toBe(false);
    // A jump of exactly 2^32 (same low half): must not be mistaken for "same counter".
    const g = new ReplayFilter();
    expect(accept(g, 7n)).toBe(true);
    expect(accept(g, (1n << 32n) + 7n)).toBe(true);
    expect(accept(g, 7n)).toBe(false);
  });

  it('rejects counters at and beyond Reject-After-Messages, accepts the one just below', () => {
    const f = new ReplayFilter();
    expect(accept(f, REJECT)).toBe(false);
    expect(accept(f, (1n << 64n) - 1n)).toBe(false);
    expect(accept(f, REJECT - 1n)).toBe(true);
    expect(accept(f, REJECT - 1n)).toBe(false);
    expect(accept(f, REJECT - 8129n)).toBe(true);
    expect(accept(f, REJECT - 8130n)).toBe(false);
  });

  it('check() does not change state', () => {
    const f = new ReplayFilter();
    expect(f.check(10, 0)).toBe(true);
    expect(f.check(10, 0)).toBe(true);
    expect(f.validate(10, 0)).toBe(true);
    expect(f.check(10, 0)).toBe(false);
    expect(f.check(9, 0)).toBe(true);
  });

  it('reset() forgets everything', () => {
    const f = new ReplayFilter();
    expect(accept(f, 100_000n)).toBe(true);
    f.reset();
    expect(accept(f, 0n)).toBe(true);
    expect(accept(f, 100_000n)).toBe(true);
  });

  it('agrees with a set-based reference on random traffic (fixed seed)', () => {
    const rng = new Prng(6479);
    for (let round = 0; round < 20; round++) {
      const f = new ReplayFilter();
      const ref = new Reference();
      let head = BigInt(rng.int(0, 1000));
      if (round % 5 === 4) head += (1n << 32n) - 5000n; // straddle the 2^32 boundary
      for (let i = 0; i < 5000; i++) {
        const r = rng.next();
        let c: bigint;
        if (r < 0.55)
          c = head + BigInt(rng.int(0, 3)); // mostly in order
        else if (r < 0.9)
          c = head - BigInt(rng.int(0, 9000)); // reordered / too old
        else if (r < 0.98)
          c = head + BigInt(rng.int(0, 20_000)); // jump
        else c = head - BigInt(rng.int(8120, 8140)); // boundary
        if (c < 0n) c = 0n;
        if (c > head) head = c;
        expect(accept(f, c)).toBe(ref.accept(c));
      }
    }
  });
});
