/**
 * The engine data path allocates nothing per packet, counted by V8's sampling heap profiler
 * with objects that a GC already collected included (heapUsed deltas cannot see garbage that a
 * scavenge removed in the middle of the window). Traffic is daemon-like: a data direction with
 * packets of varying sizes and a reverse (ACK-like) direction, `now` advancing, and a receiving
 * session whose index is >= 2^31 (a uint32 that V8 would box on every lookup). The AEAD is an
 * allocation-free stand-in so only the engine is measured.
 *
 * Regressions this catches (both measured in the daemon): a closure created per call in
 * paddedLength (56 B/packet), and index-table lookups keyed by a boxed uint32 (16 B/packet).
 */
import { describe, expect, it } from 'vitest';
import { ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../../src/wireguard/device.js';
import { nullAeadBackend, sampledAllocations } from '../util/alloc.js';
import { sessionPair } from './pair.js';

describe('data path allocation (sampling heap profiler)', () => {
  it('allocates nothing per packet with daemon-like traffic and a session index >= 2^31', async () => {
    // Every 4-byte index drawn from these bytes is 0xfedcba98 or similar: >= 2^31.
    const backend = nullAeadBackend(new Uint8Array([0x98, 0xba, 0xdc, 0xfe, 0x91, 0xb3, 0xd5, 0xf7]));
    let now = 1_700_000_000_000;
    const { a, b, pab, pba, epA, epB } = sessionPair(backend, now);
    const rr = new ReceiveResult();
    const er = new EncryptResult();
    expect(pab.keypairs.current).not.toBeNull();
    expect(pba.keypairs.current!.localIndex).toBeGreaterThanOrEqual(2 ** 31);
    expect(pab.keypairs.current!.localIndex).toBeGreaterThanOrEqual(2 ** 31);

    const SLOT = 2048;
    const N = 64;
    const buf = new Uint8Array(SLOT * N);
    const ipv4 = (o: number, src: number, dst: number, size: number): void => {
      buf[o] = 0x45;
      buf[o + 2] = size >> 8;
      buf[o + 3] = size & 0xff;
      buf[o + 12] = 10;
      buf[o + 13] = src;
      buf[o + 14] = 0;
      buf[o + 15] = 1;
      buf[o + 16] = 10;
      buf[o + 17] = dst;
      buf[o + 18] = 0;
      buf[o + 19] = 1;
    };
    let packets = 0;
    const round = (r: number): void => {
      now += 1; // a new millisecond per batch, as the daemon's clock gives
      for (let i = 0; i < N; i++) {
        const o = i * SLOT + 16;
        const size = 40 + ((r * 7 + i * 131) % 1380); // 40..1419
        ipv4(o, 1, 2, size);
        if (a.encrypt(buf, o, size, now, er) !== ENCRYPT_SEND) throw new Error(`encrypt: ${er.reason}`);
        if (b.receive(buf, er.start, er.length, epA, now, false, rr) !== RECEIVE_DELIVER)
          throw new Error(`receive: ${rr.reason}`);
        packets++;
        if ((i & 1) === 0) {
          ipv4(o, 2, 1, 52);
          if (b.encrypt(buf, o, 52, now, er) !== ENCRYPT_SEND) throw new Error(`encrypt back: ${er.reason}`);
          if (a.receive(buf, er.start, er.length, epB, now, false, rr) !== RECEIVE_DELIVER)
            throw new Error(`receive back: ${rr.reason}`);
          packets++;
        }
      }
    };
    for (let r = 0; r < 3000; r++) round(r); // optimized code, as in a running daemon

    // Only what src/wireguard itself allocates (the test's own frames excluded).
    const { bytes, where } = await sampledAllocations(
      () => {
        packets = 0;
        for (let r = 0; r < 1500; r++) round(r);
      },
      ({ url }) => url.includes('/src/wireguard/'),
    );
    // Measured 0. One small object (>= 16 B) even every 8th packet fails this. (Timer jitter's
    // Math.random() result, boxed by the builtin itself, is not attributed to src/wireguard.)
    expect(bytes / packets, where.join('; ')).toBeLessThan(2);
  }, 60_000);
});
