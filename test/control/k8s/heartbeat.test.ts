// Heartbeat datagrams between gateway replicas: round trip, and every way a datagram from
// someone without the key (or damaged) is refused.
import { describe, expect, test } from 'vitest';
import { decodeHeartbeat, encodeHeartbeat, heartbeatKey } from '../../../src/control/k8s/heartbeat.js';

const priv = Buffer.alloc(32, 7);
const key = heartbeatKey(priv, 'gw.ns.server.connections.liqo.io');

describe('heartbeat messages', () => {
  test('round trip of each state', () => {
    for (const state of ['active', 'standby', 'leaving'] as const) {
      const h = { from: 'cluster-b-7d9f-x2', state, sentAt: 1_765_000_000_123.456 };
      expect(decodeHeartbeat(key, encodeHeartbeat(key, h))).toEqual(h);
    }
  });

  test('the key depends on the private key and on the Lease name', () => {
    const msg = encodeHeartbeat(key, { from: 'a', state: 'active', sentAt: 1 });
    expect(decodeHeartbeat(heartbeatKey(Buffer.alloc(32, 8), 'gw.ns.server.connections.liqo.io'), msg)).toBe('mac');
    expect(decodeHeartbeat(heartbeatKey(priv, 'gw.ns.client.connections.liqo.io'), msg)).toBe('mac');
  });

  test('every altered byte is refused; truncated and random datagrams too', () => {
    const msg = encodeHeartbeat(key, { from: 'pod-1', state: 'standby', sentAt: 1000 });
    for (let i = 0; i < msg.length; i++) {
      const bad = Buffer.from(msg);
      bad[i]! ^= 0x01;
      expect(typeof decodeHeartbeat(key, bad), `byte ${i}`).toBe('string');
    }
    expect(decodeHeartbeat(key, msg.subarray(0, msg.length - 1))).toBe('length');
    expect(decodeHeartbeat(key, Buffer.alloc(10))).toBe('short');
    expect(decodeHeartbeat(key, Buffer.alloc(80, 0xab))).toBe('magic');
    // A forged message with a valid layout but no key.
    const forged = encodeHeartbeat(Buffer.alloc(32), { from: 'pod-1', state: 'leaving', sentAt: 2000 });
    expect(decodeHeartbeat(key, forged)).toBe('mac');
  });

  test('misuse throws', () => {
    expect(() => heartbeatKey(Buffer.alloc(31), 'x')).toThrow(RangeError);
    expect(() => heartbeatKey(priv, '')).toThrow(RangeError);
    expect(() => encodeHeartbeat(key, { from: '', state: 'active', sentAt: 1 })).toThrow(RangeError);
    expect(() => encodeHeartbeat(key, { from: 'x'.repeat(254), state: 'active', sentAt: 1 })).toThrow(RangeError);
  });
});
