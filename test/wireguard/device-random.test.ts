/**
 * DeviceState.randomFill: handshake randomness (indices, ephemeral keys, cookie nonces) drawn
 * from the backend's CSPRNG in 1024-byte blocks instead of one call per message.
 */
import { describe, expect, it } from 'vitest';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createPureBackend } from '../../src/crypto/pure.js';
import { DeviceState } from '../../src/wireguard/device-state.js';

function countingBackend(): { backend: CryptoBackend; calls: () => number; stream: number[] } {
  const pure = createPureBackend();
  let calls = 0;
  const stream: number[] = [];
  return {
    backend: {
      ...pure,
      randomFill(out) {
        calls++;
        pure.randomFill(out);
        stream.push(...out);
      },
    },
    calls: () => calls,
    stream,
  };
}

describe('DeviceState.randomFill', () => {
  it('hands out the CSPRNG stream in order, each byte once, one backend call per 1024 bytes', () => {
    const c = countingBackend();
    const s = new DeviceState({ backend: c.backend });
    const got: number[] = [];
    const key = new Uint8Array(32);
    const index = new Uint8Array(4);
    for (let i = 0; i < 100; i++) {
      // 100 handshake messages' worth: 3600 bytes
      s.randomFill(index);
      got.push(...index);
      s.randomFill(key);
      got.push(...key);
    }
    // 1024 / 36 = 28 messages per block, so 4 blocks for 100; leftovers at a block's end are skipped.
    expect(c.calls()).toBe(4);
    let pos = 0;
    let block = 0;
    let used = 0;
    for (let m = 0; m < 200; m++) {
      const n = m % 2 === 0 ? 4 : 32;
      if (used + n > 1024) {
        block++;
        used = 0;
      }
      for (let i = 0; i < n; i++) expect(got[pos + i]).toBe(c.stream[block * 1024 + used + i]);
      pos += n;
      used += n;
    }
  });

  it('zeroes what it handed out and refuses requests larger than the reserve', () => {
    const c = countingBackend();
    const s = new DeviceState({ backend: c.backend });
    const a = new Uint8Array(32);
    s.randomFill(a);
    const reserve = (s as unknown as { randomReserve: Uint8Array }).randomReserve;
    expect(reserve.subarray(0, 32).every((x) => x === 0)).toBe(true);
    expect(a.some((x) => x !== 0)).toBe(true);
    expect(() => s.randomFill(new Uint8Array(1025))).toThrow(RangeError);
  });
});
