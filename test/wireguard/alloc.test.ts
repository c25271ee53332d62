/**
 * The engine's own data path allocates nothing per packet. To see the engine alone, the AEAD
 * of the backend is replaced by an allocation-free stand-in (tag of zeros, plaintext as is);
 * everything else — header, nonce, padding, index table, replay window, allowed IPs, timers,
 * counters, roaming check — is the real code. Heap growth over many round trips must stay
 * near zero (an allocation of even one small object per packet would show as >= 16 bytes/op).
 */
import { describe, expect, it } from 'vitest';
import { ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../../src/wireguard/device.js';
import { heapBytesPerOp, nullAeadBackend } from '../util/alloc.js';
import { sessionPair } from './pair.js';

describe('data path allocation', () => {
  it('encrypt + receive allocate nothing per packet in the engine', () => {
    const backend = nullAeadBackend();
    const now = 1_700_000_000_000;
    const { a, b, pab, pba, epA } = sessionPair(backend, now);
    const rr = new ReceiveResult();
    const er = new EncryptResult();
    const len = 100;
    const buf = new Uint8Array(16 + len + 32);
    buf[16] = 0x45;
    buf[18] = 0;
    buf[19] = len;
    buf.set([10, 1, 0, 1, 10, 2, 0, 1], 28);
    const trip = () => {
      if (a.encrypt(buf, 16, len, now, er) !== ENCRYPT_SEND) throw new Error(`encrypt: ${er.reason}`);
      if (b.receive(buf, er.start, er.length, epA, now, false, rr) !== RECEIVE_DELIVER)
        throw new Error(`receive: ${rr.reason}`);
    };
    for (let i = 0; i < 50_000; i++) trip();
    // Smallest of several windows (a per-packet allocation shows in each): test/util/alloc.ts.
    const perOp = heapBytesPerOp(trip);
    expect(perOp).toBeLessThan(4);
    expect(pab.txBytes).toBe(pba.rxBytes);
  });
});
