import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/wireguard/ratelimiter.js';

describe('RateLimiter (20/s, burst 5, per key)', () => {
  it('allows a burst of exactly 5 at one instant, then one per 50 ms', () => {
    const r = new RateLimiter();
    const t = 1000;
    const burst = Array.from({ length: 7 }, () => r.allow('1.2.3.4', t));
    expect(burst).toEqual([true, true, true, true, true, false, false]);
    expect(r.allow('1.2.3.4', t + 49)).toBe(false);
    expect(r.allow('1.2.3.4', t + 50)).toBe(true);
    expect(r.allow('1.2.3.4', t + 50)).toBe(false);
    // Steady 20/s: every 50 ms one passes, for a long time.
    let passed = 0;
    for (let i = 1; i <= 200; i++) if (r.allow('1.2.3.4', t + 50 + i * 50)) passed++;
    expect(passed).toBe(200);
    // Faster than 20/s: only 20 of 40 per second pass once the burst is spent.
    const r2 = new RateLimiter();
    let ok = 0;
    for (let i = 0; i < 400; i++) if (r2.allow('k', 5000 + i * 25)) ok++;
    expect(ok).toBe(5 + Math.floor((399 * 25) / 50)); // the initial burst of 5, then one per 50 ms elapsed
  });

  it('keys are independent', () => {
    const r = new RateLimiter();
    for (let i = 0; i < 5; i++) expect(r.allow('a', 0)).toBe(true);
    expect(r.allow('a', 0)).toBe(false);
    expect(r.allow('b', 0)).toBe(true);
  });

  it('refills to at most the burst and garbage-collects idle keys after a second', () => {
    const r = new RateLimiter();
    for (let i = 0; i < 5; i++) r.allow('a', 0);
    r.allow('b', 900);
    expect(r.size).toBe(2);
    r.gc(1500);
    expect(r.size).toBe(1); // 'a' idle 1.5 s, 'b' only 0.6 s
    const burst = Array.from({ length: 6 }, () => r.allow('b', 100_000));
    expect(burst).toEqual([true, true, true, true, true, false]);
  });

  it('is bounded: beyond the maximum number of live keys new sources are refused', () => {
    const r = new RateLimiter(3);
    expect(r.allow('1', 0)).toBe(true);
    expect(r.allow('2', 0)).toBe(true);
    expect(r.allow('3', 0)).toBe(true);
    expect(r.allow('4', 0)).toBe(false);
    expect(r.allow('1', 0)).toBe(true); // known keys still work
    expect(r.allow('4', 2500)).toBe(true); // after GC there is room again
    expect(r.size).toBe(1);
  });
});
