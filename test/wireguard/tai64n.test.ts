import { describe, expect, it } from 'vitest';
import { compareTai64n, tai64n, writeTai64n } from '../../src/wireguard/tai64n.js';
import { toHex } from '../util/hex.js';

describe('TAI64N', () => {
  it('the Unix epoch is 2^62 + 10 seconds, zero nanoseconds', () => {
    expect(toHex(tai64n(0))).toBe('400000000000000a00000000');
  });

  it('encodes seconds big-endian and rounds nanoseconds down to 2^24 ns', () => {
    // 2018-07-31T23:14:36Z (0x5b60ed5c s) + 999 ms: 999e6 ns = 0x3b8b87c0 → 0x3b000000.
    const ms = 0x5b60ed5c * 1000 + 999;
    expect(toHex(tai64n(ms))).toBe('400000005b60ed663b000000');
    // 16 ms = 16e6 ns < 2^24 ns: rounds to 0; 17 ms = 17e6 ns >= 2^24: one whitened unit.
    expect(toHex(tai64n(16)).slice(16)).toBe('00000000');
    expect(toHex(tai64n(17)).slice(16)).toBe('01000000');
  });

  it('handles second values past 2^32 with a carry into the high word', () => {
    const secs = 2 ** 32 - 10; // + 10 carries
    expect(toHex(tai64n(secs * 1000))).toBe('400000010000000000000000');
  });

  it('is monotonic: later ms never compare smaller, and differ once 2^24 ns apart', () => {
    const base = 1_700_000_000_000;
    let prev = tai64n(base);
    for (let d = 1; d < 3000; d += 7) {
      const cur = tai64n(base + d);
      expect(compareTai64n(cur, 0, prev, 0)).toBeGreaterThanOrEqual(0);
      prev = cur;
    }
    expect(compareTai64n(tai64n(base + 17), 0, tai64n(base), 0)).toBeGreaterThan(0);
    expect(compareTai64n(tai64n(base), 0, tai64n(base + 1000), 0)).toBeLessThan(0);
  });

  it('writes at an offset without touching neighbours; rejects negative or non-finite time', () => {
    const b = new Uint8Array(16).fill(0xee);
    writeTai64n(b, 3, 0);
    expect(b[2]).toBe(0xee);
    expect(b[15]).toBe(0xee);
    expect(toHex(b.subarray(3, 15))).toBe('400000000000000a00000000');
    expect(() => tai64n(-1)).toThrow(RangeError);
    expect(() => tai64n(Number.NaN)).toThrow(RangeError);
  });
});
