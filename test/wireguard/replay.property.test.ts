/**
 * Property (fast-check): the replay filter answers exactly like its specification as a set model
 * — accept a counter iff it is below Reject-After-Messages, not seen before, and at most
 * REPLAY_WINDOW_SIZE behind the newest accepted counter — for any sequence of counters, and
 * check() (the pre-decryption peek) gives the same answer without changing anything.
 * Counters are built around the interesting edges: the window edge, block edges, the 32-bit
 * boundary between the halves, far jumps, and the rejection limit.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import { REPLAY_WINDOW_SIZE, ReplayFilter } from '../../src/wireguard/replay.js';

const MAX = (1n << 64n) - 1n;
const REJECT = (1n << 64n) - (1n << 13n) - 1n;
const W = BigInt(REPLAY_WINDOW_SIZE);

class SetModel {
  readonly seen = new Set<bigint>();
  last = 0n;
  answer(c: bigint): boolean {
    if (c >= REJECT) return false;
    if (c > this.last) return true;
    return this.last - c <= W && !this.seen.has(c);
  }
  accept(c: bigint): boolean {
    const ok = this.answer(c);
    if (ok) {
      this.seen.add(c);
      if (c > this.last) this.last = c;
    }
    return ok;
  }
}

/** How the next counter is chosen, relative to the model's newest counter or absolute. */
type Step =
  | { kind: 'near'; delta: number }
  | { kind: 'edge'; delta: number }
  | { kind: 'far'; delta: bigint }
  | { kind: 'abs'; value: bigint };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: -200, max: 200 }).map((delta): Step => ({ kind: 'near', delta })) },
  // Around the window edge (±W) and a whole ring (8192) ahead.
  {
    weight: 3,
    arbitrary: fc
      .integer({ min: -3, max: 3 })
      .chain((d) => fc.constantFrom(-REPLAY_WINDOW_SIZE + d, REPLAY_WINDOW_SIZE + d, 8192 + d, 64 + d, -64 + d))
      .map((delta): Step => ({ kind: 'edge', delta })),
  },
  {
    weight: 1,
    arbitrary: fc.bigInt({ min: -(1n << 40n), max: 1n << 40n }).map((delta): Step => ({ kind: 'far', delta })),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.bigInt({ min: (1n << 32n) - 100n, max: (1n << 32n) + 100n }), // lo/hi boundary
        fc.bigInt({ min: REJECT - 10_000n, max: MAX }), // the end of the counter space
        fc.bigInt({ min: 0n, max: MAX }),
      )
      .map((value): Step => ({ kind: 'abs', value })),
  },
);

function counterFor(s: Step, last: bigint): bigint {
  const c = s.kind === 'abs' ? s.value : last + (s.kind === 'far' ? s.delta : BigInt(s.delta));
  return c < 0n ? 0n : c > MAX ? MAX : c;
}

test.prop([fc.array(step, { minLength: 1, maxLength: 300 })], { numRuns: 300 })(
  'validate() and check() agree with the set model for any counter sequence',
  (steps) => {
    const f = new ReplayFilter();
    const model = new SetModel();
    for (const s of steps) {
      const c = counterFor(s, model.last);
      const lo = Number(c & 0xffffffffn);
      const hi = Number(c >> 32n);
      const want = model.answer(c);
      expect(f.check(lo, hi), `check(${c}) with newest ${model.last}`).toBe(want);
      // A repeated check changes nothing.
      expect(f.check(lo, hi)).toBe(want);
      expect(f.validate(lo, hi), `validate(${c}) with newest ${model.last}`).toBe(model.accept(c));
      // The same counter again is always a replay (or still out of range).
      expect(f.validate(lo, hi)).toBe(false);
    }
  },
);

test.prop([
  fc.array(fc.bigInt({ min: 0n, max: 20_000n }), { maxLength: 200 }),
  fc.array(fc.bigInt({ min: 0n, max: 20_000n }), { maxLength: 50 }),
])('reset() forgets everything: afterwards the filter behaves like a fresh one', (before, after) => {
  const f = new ReplayFilter();
  for (const c of before) f.validate(Number(c), 0);
  f.reset();
  const fresh = new SetModel();
  for (const c of after) expect(f.validate(Number(c), 0)).toBe(fresh.accept(c));
});
