/**
 * The engine's own data path allocates nothing per packet. To see the engine alone, the AEAD
 * of the backend is replaced by an allocation-free stand-in (tag of zeros, plaintext as is);
 * everything else — header, nonce, padding, index table, replay window, allowed IPs, timers,
 * counters, roaming check — is the real code. Heap growth over many round trips must stay
 * near zero (an allocation of even one small object per packet would show as >= 16 bytes/op).
 */
import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../../src/packet/addr.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../../src/wireguard/device.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import type { Peer } from '../../src/wireguard/peer.js';
import { heapBytesPerOp, nullAeadBackend } from '../util/alloc.js';

describe('data path allocation', () => {
  it('encrypt + receive allocate nothing per packet in the engine', () => {
    const backend = nullAeadBackend();
    const a = new Device({ backend });
    const b = new Device({ backend });
    a.setPrivateKey(new Uint8Array(32).fill(1));
    b.setPrivateKey(new Uint8Array(32).fill(2));
    const pab = a.addPeer(b.publicKey!);
    const pba = b.addPeer(a.publicKey!);
    a.addAllowedIp(pab, parsePrefix('10.2.0.0/16'));
    b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
    const epA = { address: '192.0.2.1', port: 1 };
    const epB = { address: '192.0.2.2', port: 2 };
    a.setEndpoint(pab, epB);
    b.setEndpoint(pba, epA);
    const now = 1_700_000_000_000;
    const out = new OutgoingMessage<Peer>();
    const rr = new ReceiveResult();
    const er = new EncryptResult();
    const pump = (from: Device, to: Device, src: typeof epA) => {
      while (from.popOutgoing(out)) {
        to.receive(out.buf, out.start, out.length, src, now, false, rr);
        from.releaseOutgoing(out.slot);
      }
    };
    a.initiateHandshake(pab, now);
    pump(a, b, epA);
    pump(b, a, epB);
    pump(a, b, epA);
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
