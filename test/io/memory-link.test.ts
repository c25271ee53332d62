// Seeded link impairments of the in-memory network (src/io/memory-link.ts, memory-net.ts): the
// same seed gives every datagram the same fate, the rates follow the seeded stream, the wire stays
// bounded and the counters balance.
import { describe, expect, test } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import type { LinkImpairments } from '../../src/io/memory-link.js';
import { MemoryNet } from '../../src/io/memory-net.js';
import { Prng } from '../util/prng.js';

interface World {
  net: MemoryNet;
  /** Indices of the datagrams B received, in order. */
  got: number[];
  /** A datagram carrying `i` from A to B. */
  send(i: number): void;
  /** Datagrams B sent A, received. */
  back: number[];
  sendBack(i: number): void;
  setNow(t: number): void;
}

function world(opts: { impairments?: LinkImpairments; slots?: number; latencyMs?: number } = {}): World {
  let now = 0;
  const net = new MemoryNet({ clock: () => now, ...opts });
  const a = net.host('10.9.0.1');
  const b = net.host('10.9.0.2');
  const sa = a.openUdp({ family: 4, port: 1 });
  const sb = b.openUdp({ family: 4, port: 2 });
  const got: number[] = [];
  const back: number[] = [];
  const batch = (): PacketBatch => new PacketBatch({ capacity: 64, maxLen: 64, withAddresses: true });
  const read = (into: number[]) => (bt: PacketBatch) => {
    for (let i = 0; i < bt.count; i++) into.push(bt.buf[bt.offs[i]!]! | (bt.buf[bt.offs[i]! + 1]! << 8));
  };
  sb.onBatch(batch(), read(got));
  sa.onBatch(batch(), read(back));
  const msg = new Uint8Array(2);
  const to = (s: typeof sa, addr: string, port: number) => (i: number) => {
    msg[0] = i & 0xff;
    msg[1] = i >> 8;
    s.send(msg, 0, 2, addr, port);
  };
  return { net, got, back, send: to(sa, '10.9.0.2', 2), sendBack: to(sb, '10.9.0.1', 1), setNow: (t) => (now = t) };
}

/** Sends n datagrams A→B, one per ms, pumping as time goes, then lets everything arrive. */
function run(w: World, n: number): void {
  for (let i = 0; i < n; i++) {
    w.setNow(i);
    w.send(i);
    w.net.pump();
  }
  w.setNow(n + 1_000_000);
  w.net.pump();
}

const balance = (net: MemoryNet): [number, number] => [
  net.sent + net.duplicated,
  net.delivered + net.droppedLoss + net.droppedFull + net.droppedNoListener + net.pending,
];

const IMP: LinkImpairments = { seed: 7, loss: 0.1, duplicate: 0.05, jitterMs: 3, reorder: 0.02, reorderMs: 20 };

describe('MemoryNet link impairments', () => {
  test('a seed reproduces every fate; another seed does not', () => {
    const x = world({ impairments: IMP });
    const y = world({ impairments: IMP });
    const z = world({ impairments: { ...IMP, seed: 8 } });
    for (const w of [x, y, z]) run(w, 2000);
    expect(y.got).toEqual(x.got);
    expect([y.net.droppedLoss, y.net.duplicated]).toEqual([x.net.droppedLoss, x.net.duplicated]);
    expect(z.got).not.toEqual(x.got);
    // Impaired for real: some lost, some twice, some out of order.
    expect(new Set(x.got).size).toBeLessThan(2000);
    expect(x.got.length).toBeGreaterThan(new Set(x.got).size);
    expect(x.got.some((v, i) => i > 0 && v < x.got[i - 1]!)).toBe(true);
  });

  test('the counts are what the seeded stream decides, and the rates within bounds of the options', () => {
    const n = 20_000;
    const w = world();
    const link = w.net.impairAll(IMP)!;
    run(w, n);
    // Replay the link's documented draws: duplicate?, then per copy lost?, jitter, reorder?.
    const rng = new Prng(IMP.seed!);
    let dup = 0;
    let lost = 0;
    let held = 0;
    for (let i = 0; i < n; i++) {
      const copies = rng.next() < IMP.duplicate! ? 2 : 1;
      dup += copies - 1;
      for (let c = 0; c < copies; c++) {
        if (rng.next() < IMP.loss!) {
          lost++;
          continue;
        }
        rng.next();
        if (rng.next() < IMP.reorder!) held++;
      }
    }
    expect([link.sent, link.duplicated, link.lost, link.reordered]).toEqual([n, dup, lost, held]);
    expect([w.net.duplicated, w.net.droppedLoss]).toEqual([dup, lost]);
    // Binomial bounds, 5 standard deviations.
    const within = (count: number, trials: number, p: number): void => {
      const sd = Math.sqrt(trials * p * (1 - p));
      expect(Math.abs(count - trials * p)).toBeLessThan(5 * sd);
    };
    within(dup, n, IMP.duplicate!);
    within(lost, n + dup, IMP.loss!);
    within(held, n + dup - lost, IMP.reorder!);
    expect(w.got).toHaveLength(n + dup - lost);
  });

  test('counters balance: sent + duplicated = delivered + dropped + in flight, mid-flight and after', () => {
    const w = world({ impairments: { seed: 3, loss: 0.2, duplicate: 0.3, delayMs: 50, jitterMs: 10 }, slots: 64 });
    for (let i = 0; i < 500; i++) {
      w.setNow(i / 10);
      w.send(i);
      w.net.pump();
      const [l, r] = balance(w.net);
      expect(l).toBe(r);
    }
    expect(w.net.pending).toBeGreaterThan(0);
    expect(w.net.pending).toBeLessThanOrEqual(64); // delayed copies wait in the bounded wire
    expect(w.net.droppedFull).toBeGreaterThan(0);
    w.setNow(1000);
    w.net.pump();
    expect(w.net.pending).toBe(0);
    const [l, r] = balance(w.net);
    expect(l).toBe(r);
    expect(w.net.delivered).toBe(w.got.length);
    expect(w.net.sent).toBe(500);
  });

  test('delay: nothing arrives before latency + delay; jitter keeps it within delay + jitter', () => {
    const w = world({ latencyMs: 2, impairments: { delayMs: 10, jitterMs: 5 } });
    w.send(1);
    w.setNow(11.99);
    expect(w.net.pump()).toBe(0);
    expect(w.net.nextDue).toBeGreaterThanOrEqual(12);
    expect(w.net.nextDue).toBeLessThan(17);
    w.setNow(17);
    expect(w.net.pump()).toBe(1);
    expect(w.net.nextDue).toBe(Number.POSITIVE_INFINITY);
  });

  test('reorder: a held-back datagram is overtaken by the ones behind it', () => {
    const w = world({ impairments: { seed: 5, reorder: 0.25, reorderMs: 3 } });
    run(w, 200);
    expect(w.got.slice().sort((p, q) => p - q)).toEqual([...Array(200).keys()]); // nothing lost or doubled
    expect(w.got).not.toEqual([...Array(200).keys()]);
  });

  test('per host pair and one direction; null lifts it; bad options are RangeErrors', () => {
    const w = world();
    const [a, b] = [w.net.hostAt('10.9.0.1')!, w.net.hostAt('10.9.0.2')!];
    const link = w.net.impair(a, b, { loss: 1 })!;
    for (let i = 0; i < 10; i++) {
      w.send(i);
      w.sendBack(i);
    }
    w.net.pump();
    expect(w.got).toEqual([]);
    expect(w.back).toEqual([...Array(10).keys()]);
    expect(link.lost).toBe(10);
    expect(w.net.impair(a, b, null)).toBeNull();
    w.send(42);
    w.net.pump();
    expect(w.got).toEqual([42]);
    expect(() => w.net.impair(a, b, { loss: 1.5 })).toThrow(RangeError);
    expect(() => w.net.impairAll({ jitterMs: -1 })).toThrow(/jitterMs/);
  });
});
