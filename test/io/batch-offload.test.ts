import { describe, expect, it } from 'vitest';
import { PACKET_BATCH_MAX_LEN, PacketBatch } from '../../src/io/batch.js';

describe('PacketBatch for offloads', () => {
  it('takes 64 KiB IPv6 super-packets, a scratch area after the slots and a segment size per slot', () => {
    const b = new PacketBatch({
      maxLen: PACKET_BATCH_MAX_LEN,
      capacity: 2,
      headroom: 16,
      scratch: 5000,
      withSegments: true,
    });
    expect(PACKET_BATCH_MAX_LEN).toBe(65575);
    expect(b.slotSize).toBeGreaterThanOrEqual(16 + 65575);
    expect(b.scratchOff).toBe(2 * b.slotSize);
    expect(b.scratchLen).toBe(5000);
    expect(b.buf.length).toBe(b.scratchOff + 5000);
    expect(b.segs.length).toBe(2);
    const plain = new PacketBatch({ maxLen: 1500 });
    expect(plain.segs.length).toBe(0);
    expect(plain.scratchLen).toBe(0);
    expect(plain.buf.length).toBe(plain.slotSize * plain.capacity);
    expect(() => new PacketBatch({ maxLen: PACKET_BATCH_MAX_LEN + 1 })).toThrow(RangeError);
    expect(() => new PacketBatch({ maxLen: 100, scratch: -1 })).toThrow(RangeError);
  });
});
