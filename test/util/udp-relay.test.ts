/**
 * The seeded relay's byte corruption (test/util/udp-relay.mjs --corrupt), inside a namespace of
 * our own (root): every corrupted datagram differs from the one sent in exactly one byte, the
 * relay's counter says how many, and the same seed corrupts the same datagrams at the same offsets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join, resolve } from 'node:path';
import { e2eUnavailableReason, Topology } from './netns.js';

const RELAY = join(resolve(import.meta.dirname, '../..'), 'test/util/udp-relay.mjs');
const skip = e2eUnavailableReason(['ip', 'timeout']);
const COUNT = 400;

/** Sends COUNT datagrams (48 bytes, all equal to a per-datagram value) through the relay; prints what arrived and the relay's counters. */
const EXCHANGE = `
const { spawn } = require('child_process'); const dgram = require('dgram');
const relay = spawn(process.execPath, [process.argv[1], '--listen', '127.0.0.1:40001', '--target', '127.0.0.1:40002', '--seed', process.argv[2], '--corrupt', '0.25', '--duration', '20']);
let out = ''; relay.stdout.on('data', (d) => out += d);
const sink = dgram.createSocket('udp4'); const got = [];
sink.on('message', (m) => got.push(m.toString('hex')));
const src = dgram.createSocket('udp4');
relay.stderr.on('data', async (d) => {
  if (!String(d).includes('relay ready')) return;
  for (let i = 0; i < ${COUNT}; i++) { src.send(Buffer.alloc(48, 1 + (i % 250)), 40001, '127.0.0.1'); await new Promise((r) => setImmediate(r)); }
  setTimeout(() => { relay.kill('SIGTERM'); relay.on('exit', () => { console.log(JSON.stringify({ got, relay: JSON.parse(out) })); process.exit(0); }); }, 500);
});
sink.bind(40002, '127.0.0.1');
`;

interface Exchange {
  got: string[];
  relay: { corrupted: number; sent: number; fwd: { received: number; corrupted: number } };
}

describe.skipIf(skip !== null)('udp-relay: seeded byte corruption', () => {
  const topo = new Topology('chr');
  let ns = '';
  beforeAll(() => {
    ns = topo.addNamespace('relay');
  });
  afterAll(async () => {
    await topo.cleanup();
  });

  const exchange = (seed: number): Exchange =>
    JSON.parse(topo.exec(ns, ['node', '-e', EXCHANGE, RELAY, String(seed)], { timeoutMs: 30_000 }).trim()) as Exchange;

  /** [index of the datagram's value, offset of the flipped byte] for each corrupted datagram. */
  function corruptions(x: Exchange): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (const hex of x.got) {
      const b = Buffer.from(hex, 'hex');
      expect(b.length).toBe(48);
      const counts = new Map<number, number>();
      for (const v of b) counts.set(v, (counts.get(v) ?? 0) + 1);
      const value = [...counts].sort((p, q) => q[1] - p[1])[0]![0];
      const off = [...b.keys()].filter((i) => b[i] !== value);
      expect(off.length).toBeLessThanOrEqual(1);
      if (off.length === 1) out.push([value, off[0]!]);
    }
    return out;
  }

  it('flips exactly one byte in the datagrams it counts as corrupted, reproducibly for a seed', () => {
    const a = exchange(5);
    expect(a.got.length).toBe(COUNT); // no loss asked for, loopback
    expect(a.relay.fwd.received).toBe(COUNT);
    const ca = corruptions(a);
    expect(ca.length).toBe(a.relay.corrupted);
    expect(a.relay.fwd.corrupted).toBe(a.relay.corrupted);
    // About 25% of 400 (binomial: outside 60..140 is vanishingly unlikely).
    expect(ca.length).toBeGreaterThan(60);
    expect(ca.length).toBeLessThan(140);
    const again = corruptions(exchange(5));
    expect(again).toEqual(ca);
    const other = corruptions(exchange(6));
    expect(other).not.toEqual(ca);
  }, 90_000);
});
