import { describe, expect, it } from 'vitest';
import { foldSum, sumWords } from '../../src/packet/checksum.js';
import { sumWordsWide } from '../../src/packet/checksum-wide.js';
import { Prng } from '../util/prng.js';

describe('sumWordsWide', () => {
  it('equals sumWords (folded) for random spans at every alignment, in views at odd byte offsets', () => {
    const rng = new Prng(0x1071);
    const backing = new Uint8Array(70_000);
    rng.fill(backing);
    for (let iter = 0; iter < 4000; iter++) {
      const base = rng.int(0, 7);
      const buf = backing.subarray(base); // byteOffset 0..7
      const off = rng.int(0, 1000);
      const len = rng.chance(0.1) ? rng.int(0, 80) : rng.int(0, rng.chance(0.5) ? 3000 : 66_000);
      const init = rng.chance(0.5) ? rng.int(0, 0x3ffff) : 0;
      expect(foldSum(sumWordsWide(buf, off, len, init))).toBe(foldSum(sumWords(buf, off, len, init)));
    }
  });

  it('stays right while alternating between more buffers than it caches views for', () => {
    const rng = new Prng(9);
    const bufs = Array.from({ length: 6 }, () => rng.bytes(3000));
    for (let i = 0; i < 600; i++) {
      const b = bufs[rng.int(0, 5)]!;
      const off = rng.int(0, 100);
      const len = rng.int(64, 2800);
      expect(foldSum(sumWordsWide(b, off, len))).toBe(foldSum(sumWords(b, off, len)));
    }
  });

  it('all-0xff and all-zero spans fold like sumWords (no 0 / 0xffff confusion)', () => {
    const ones = new Uint8Array(5000).fill(0xff);
    const zeros = new Uint8Array(5000);
    for (const len of [64, 65, 1448, 4999]) {
      expect(foldSum(sumWordsWide(ones, 1, len))).toBe(foldSum(sumWords(ones, 1, len)));
      expect(foldSum(sumWordsWide(zeros, 3, len))).toBe(0);
    }
  });
});
