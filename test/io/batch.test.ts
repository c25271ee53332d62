import { describe, expect, it } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { ADDR_RECORD_LEN } from '../../src/io/native.js';

describe('PacketBatch', () => {
  it('lays out cache-aligned slots with headroom and tailroom', () => {
    const b = new PacketBatch({ maxLen: 1420, capacity: 4 });
    // 16 headroom + 1420 + 32 tailroom = 1468 → rounded to 1472 (23 × 64).
    expect(b.slotSize).toBe(1472);
    expect(b.buf.length).toBe(4 * 1472);
    expect([...b.offs]).toEqual([16, 1488, 2960, 4432]);
    expect(b.addrs.length).toBe(0);
    const u = new PacketBatch({ maxLen: 100, capacity: 2, headroom: 0, tailroom: 0, withAddresses: true });
    expect(u.slotSize).toBe(128);
    expect(u.addrs.length).toBe(2 * ADDR_RECORD_LEN);
  });

  it('filled() sets the count and restores offsets a caller moved', () => {
    const b = new PacketBatch({ maxLen: 64, capacity: 3 });
    b.offs[1] = 999;
    b.lens[0] = 5;
    b.lens[1] = 7;
    b.filled(2);
    expect(b.count).toBe(2);
    expect(b.offs[1]).toBe(b.slotSize + 16);
    b.buf.set([1, 2, 3, 4, 5], 16);
    expect([...b.packet(0)]).toEqual([1, 2, 3, 4, 5]);
    expect(() => b.packet(2)).toThrow(RangeError);
  });

  it('rejects impossible shapes', () => {
    expect(() => new PacketBatch({ maxLen: 0 })).toThrow(RangeError);
    expect(() => new PacketBatch({ maxLen: 70000 })).toThrow(RangeError);
    expect(() => new PacketBatch({ maxLen: 100, capacity: 0 })).toThrow(RangeError);
    expect(() => new PacketBatch({ maxLen: 100, headroom: -1 })).toThrow(RangeError);
  });
});
