// The host lane's flow table (src/router/host-flows.ts) on a virtual clock: bounds, the
// kernel-like idle timeouts (unreplied / replied), refusal when full of live flows, reclaiming
// expired ones, the handle closed exactly once.
import { describe, expect, test } from 'vitest';
import {
  HOST_FLOW_REPLIED_MS,
  HOST_FLOW_UNREPLIED_MS,
  HostFlowTable,
  type HostFlow,
} from '../../src/router/host-flows.js';

const UDP = 17;
const A = 0x0a000105; // 10.0.1.5
const E = 0xc0a8010a; // 192.168.1.10

describe('HostFlowTable', () => {
  test('lookup finds the flow by its five fields only', () => {
    const t = new HostFlowTable<string>();
    const closed: HostFlow<string>[] = [];
    const f = t.open(UDP, A, 40000, E, 53, 0, (x) => closed.push(x))!;
    expect(f).not.toBeNull();
    expect(t.lookup(UDP, A, 40000, E, 53, 1)).toBe(f);
    expect(t.lookup(UDP, A, 40001, E, 53, 1)).toBeUndefined();
    expect(t.lookup(UDP, A, 40000, E, 54, 1)).toBeUndefined();
    expect(t.lookup(UDP, E, 40000, A, 53, 1)).toBeUndefined();
    expect(t.lookup(1, A, 40000, E, 53, 1)).toBeUndefined();
    expect(t.size).toBe(1);
    expect(closed).toEqual([]);
  });

  test('idle timeouts: 30 s without a reply, 120 s after one; every packet refreshes', () => {
    const t = new HostFlowTable<string>();
    const closed: HostFlow<string>[] = [];
    const onClose = (x: HostFlow<string>): void => {
      closed.push(x);
    };
    const f = t.open(UDP, A, 40000, E, 53, 1000, onClose)!;
    t.touch(f, 1000, false);
    expect(t.expire(1000 + HOST_FLOW_UNREPLIED_MS - 1, onClose)).toBe(0);
    expect(t.lookup(UDP, A, 40000, E, 53, 1000 + HOST_FLOW_UNREPLIED_MS - 1)).toBe(f);
    // Not found at its timeout, and gone at the next expire.
    expect(t.lookup(UDP, A, 40000, E, 53, 1000 + HOST_FLOW_UNREPLIED_MS)).toBeUndefined();
    expect(t.expire(1000 + HOST_FLOW_UNREPLIED_MS, onClose)).toBe(1);
    expect(closed).toEqual([f]);
    expect(t.size).toBe(0);

    const g = t.open(UDP, A, 40002, E, 53, 0, onClose)!;
    t.touch(g, 10_000, true); // a reply: the stream timeout from now on
    expect(t.expire(10_000 + HOST_FLOW_UNREPLIED_MS, onClose)).toBe(0);
    t.touch(g, 100_000, false); // refreshed by a packet out
    expect(t.expire(100_000 + HOST_FLOW_REPLIED_MS - 1, onClose)).toBe(0);
    expect(t.expire(100_000 + HOST_FLOW_REPLIED_MS, onClose)).toBe(1);
    expect(g.out).toBe(1);
    expect(g.back).toBe(1);
    expect(t.expired).toBe(2);
  });

  test('bounded: a table full of live flows refuses new ones (counted), reclaims expired ones first', () => {
    const t = new HostFlowTable<number>({ capacity: 4, unrepliedMs: 1000, repliedMs: 5000 });
    const closed: number[] = [];
    const onClose = (x: HostFlow<number>): void => {
      closed.push(x.sport);
    };
    for (let i = 0; i < 4; i++) {
      const f = t.open(UDP, A, 1000 + i, E, 53, i * 100, onClose)!;
      f.handle = i;
    }
    expect(t.size).toBe(4);
    expect(t.open(UDP, A, 2000, E, 53, 500, onClose)).toBeNull();
    expect(t.refused).toBe(1);
    expect(t.size).toBe(4);
    expect(closed).toEqual([]);
    // At 1050 the first flow (opened at 0) has been idle ≥ 1000 ms, the second (at 100) not: only the first is reclaimed.
    const n = t.open(UDP, A, 2000, E, 53, 1050, onClose);
    expect(n).not.toBeNull();
    expect(closed).toEqual([1000]);
    expect(t.size).toBe(4);
    expect(t.lookup(UDP, A, 1000, E, 53, 1050)).toBeUndefined();
    expect(t.lookup(UDP, A, 1001, E, 53, 1050)).toBeDefined();
  });

  test('a stale entry with the same key is closed before the key is opened again', () => {
    const t = new HostFlowTable<string>({ capacity: 2, unrepliedMs: 1000 });
    const closed: HostFlow<string>[] = [];
    const f = t.open(UDP, A, 1, E, 2, 0, (x) => closed.push(x))!;
    expect(t.lookup(UDP, A, 1, E, 2, 5000)).toBeUndefined();
    const g = t.open(UDP, A, 1, E, 2, 5000, (x) => closed.push(x))!;
    expect(closed).toEqual([f]);
    expect(g).not.toBe(f);
    expect(t.size).toBe(1);
    expect(t.lookup(UDP, A, 1, E, 2, 5001)).toBe(g);
  });

  test('many flows: every one found, removal leaves the others', () => {
    const t = new HostFlowTable<number>({ capacity: 5000 });
    const all: HostFlow<number>[] = [];
    for (let i = 0; i < 5000; i++)
      all.push(t.open(UDP, A + (i % 7), 1024 + i, E + (i % 3), 53 + (i % 5), 0, () => {})!);
    expect(t.size).toBe(5000);
    for (let i = 0; i < 5000; i += 97)
      expect(t.lookup(UDP, A + (i % 7), 1024 + i, E + (i % 3), 53 + (i % 5), 1)).toBe(all[i]);
    t.remove(all[10]!);
    t.remove(all[10]!);
    expect(t.size).toBe(4999);
    expect(t.lookup(UDP, A + 3, 1034, E + 1, 53, 1)).toBeUndefined();
    expect(t.lookup(UDP, A + 4, 1035, E + 2, 54, 1)).toBe(all[11]);
    expect(() => new HostFlowTable({ capacity: 0 })).toThrow(RangeError);
  });
});
