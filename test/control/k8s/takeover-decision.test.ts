// Fast failover between gateway replicas on a virtual clock: when a standby asks for the Lease
// (heartbeat silence, a "leaving" heartbeat), when it must not (never heard the active, a
// replayed or skewed heartbeat), and what the Lease write then does (LeaseDecision.takeoverWrite).
import { describe, expect, test } from 'vitest';
import { TakeoverDecision, type Heard } from '../../../src/control/k8s/takeover-decision.js';
import { LeaseDecision, type LeaseObservation } from '../../../src/control/k8s/lease-decision.js';

const WINDOW = 500;
const INTERVAL = 100;
const SKEW = 5000;
/** Wall clock = local clock + this (the decision compares sentAt with the wall clock). */
const EPOCH = 1_700_000_000_000;

const hb = (from: string, state: Heard['state'], at: number): Heard => ({ from, state, sentAt: EPOCH + at });

/** Standby `b` hearing active `a` every INTERVAL from 0 to `until` (inclusive); every tick checked. */
function standbyHearing(until: number): TakeoverDecision {
  const b = new TakeoverDecision('b', { windowMs: WINDOW, maxSkewMs: SKEW });
  for (let t = 0; t <= until; t += INTERVAL) {
    expect(b.accept(hb('a', 'active', t), t, EPOCH + t)).toBe(true);
    expect(b.tick(t)).toEqual({ kind: 'none' });
  }
  return b;
}

describe('TakeoverDecision', () => {
  test('a standby takes over once the active replica has been silent for the window, not before', () => {
    const b = standbyHearing(1000);
    for (let t = 1010; t < 1000 + WINDOW; t += 10) expect(b.tick(t)).toEqual({ kind: 'none' });
    expect(b.tick(1000 + WINDOW)).toEqual({ kind: 'takeover', holder: 'a', reason: 'silent' });
    // Asked once per window while the silence lasts (a failed write is retried, not spammed).
    expect(b.tick(1000 + WINDOW + 10)).toEqual({ kind: 'none' });
    expect(b.tick(1000 + 2 * WINDOW - 1)).toEqual({ kind: 'none' });
    expect(b.tick(1000 + 2 * WINDOW)).toEqual({ kind: 'takeover', holder: 'a', reason: 'silent' });
  });

  test('late heartbeats shorter than the window cause nothing', () => {
    const b = standbyHearing(0);
    // Heartbeats 400 ms apart (three lost in a row) with ticks every 10 ms.
    for (let t = 10; t <= 4000; t += 10) {
      if (t % 400 === 0) b.accept(hb('a', 'active', t), t, EPOCH + t);
      expect(b.tick(t)).toEqual({ kind: 'none' });
    }
  });

  test('a leaving heartbeat from the active replica asks for the Lease at once', () => {
    const b = standbyHearing(300);
    expect(b.accept(hb('a', 'leaving', 350), 350, EPOCH + 350)).toBe(true);
    expect(b.tick(350)).toEqual({ kind: 'takeover', holder: 'a', reason: 'leaving' });
    expect(b.tick(360)).toEqual({ kind: 'none' });
  });

  test('a replica that never heard an active one never takes over by heartbeat (the Lease decides)', () => {
    const b = new TakeoverDecision('b', { windowMs: WINDOW, maxSkewMs: SKEW });
    for (let t = 0; t < 10_000; t += 50) expect(b.tick(t)).toEqual({ kind: 'none' });
    // Standbys heard do not count either.
    b.accept(hb('c', 'standby', 10_000), 10_000, EPOCH + 10_000);
    expect(b.tick(20_000)).toEqual({ kind: 'none' });
  });

  test('after a partition the old leader, now standby, does not take the Lease back from a leader it cannot hear', () => {
    // a led; b took over (a partition); a read the Lease, saw b, stood down. a never hears b.
    const a = new TakeoverDecision('a', { windowMs: WINDOW, maxSkewMs: SKEW });
    a.setLeading(true, 0);
    a.setLeading(false, 2000);
    for (let t = 2000; t < 20_000; t += 50) expect(a.tick(t)).toEqual({ kind: 'none' });
  });

  test('the replica we asked to replace speaks again as active: no retry', () => {
    const b = standbyHearing(0);
    expect(b.tick(WINDOW)).toMatchObject({ kind: 'takeover' });
    b.accept(hb('a', 'active', WINDOW + 10), WINDOW + 10, EPOCH + WINDOW + 10);
    expect(b.tick(2 * WINDOW)).toEqual({ kind: 'none' });
  });

  test('a leader told that another replica is active reads the Lease (once per heartbeat), and never takes over', () => {
    const a = new TakeoverDecision('a', { windowMs: WINDOW, maxSkewMs: SKEW });
    a.setLeading(true, 0);
    expect(a.tick(10_000)).toEqual({ kind: 'none' });
    a.accept(hb('b', 'active', 10_000), 10_000, EPOCH + 10_000);
    expect(a.tick(10_000)).toEqual({ kind: 'check-lease', other: 'b', reason: 'heard-active' });
    expect(a.tick(10_010)).toEqual({ kind: 'none' });
  });

  test('a leader whose standby falls silent reads the Lease every window/5 from one window to three after it last heard it', () => {
    const a = new TakeoverDecision('a', { windowMs: WINDOW, maxSkewMs: SKEW });
    a.setLeading(true, 0);
    for (let t = 0; t <= 1000; t += INTERVAL) {
      a.accept(hb('b', 'standby', t), t, EPOCH + t);
      expect(a.tick(t)).toEqual({ kind: 'none' });
    }
    // Silent from 1000 (a partition, or b died): ticks every 10 ms.
    const reads: { t: number; first: boolean }[] = [];
    for (let t = 1010; t <= 1000 + 5 * WINDOW; t += 10) {
      const x = a.tick(t);
      if (x.kind === 'check-lease') {
        expect(x).toMatchObject({ other: 'b', reason: 'standby-silent' });
        reads.push({ t, first: x.reason === 'standby-silent' && x.first });
      } else expect(x).toEqual({ kind: 'none' });
    }
    expect(reads[0]).toEqual({ t: 1000 + WINDOW, first: true });
    expect(reads.slice(1).every((r) => !r.first)).toBe(true);
    expect(reads.map((r) => r.t - 1000)).toEqual([500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400, 1500]);
  });

  test('the silent standby heard again: the reads stop; silent again later: they start again', () => {
    const a = new TakeoverDecision('a', { windowMs: WINDOW, maxSkewMs: SKEW });
    a.setLeading(true, 0);
    a.accept(hb('b', 'standby', 0), 0, EPOCH);
    expect(a.tick(WINDOW)).toMatchObject({ kind: 'check-lease', reason: 'standby-silent', first: true });
    a.accept(hb('b', 'standby', 550), 550, EPOCH + 550);
    for (let t = 560; t < 550 + WINDOW; t += 10) expect(a.tick(t)).toEqual({ kind: 'none' });
    expect(a.tick(550 + WINDOW)).toMatchObject({ kind: 'check-lease', reason: 'standby-silent', first: true });
    // Not leading: no reads for silent standbys.
    const s = new TakeoverDecision('s', { windowMs: WINDOW, maxSkewMs: SKEW });
    s.accept(hb('b', 'standby', 0), 0, EPOCH);
    for (let t = 10; t <= 3 * WINDOW; t += 10) expect(s.tick(t)).toEqual({ kind: 'none' });
  });

  test('replayed, reordered, own and skewed heartbeats are refused and change nothing', () => {
    const b = standbyHearing(1000);
    // A copy of an old heartbeat, replayed after the active went silent, does not hold off the takeover.
    expect(b.accept(hb('a', 'active', 900), 1200, EPOCH + 1200)).toBe(false);
    expect(b.accept(hb('a', 'active', 1000), 1300, EPOCH + 1300)).toBe(false);
    expect(b.tick(1000 + WINDOW)).toMatchObject({ kind: 'takeover', holder: 'a' });
    // Our own heartbeat (sent to ourselves through a listed address).
    expect(b.accept(hb('b', 'leaving', 2000), 2000, EPOCH + 2000)).toBe(false);
    // A sender clock too far off either way.
    expect(b.accept(hb('c', 'active', 2000 + SKEW + 1), 2000, EPOCH + 2000)).toBe(false);
    expect(b.accept(hb('c', 'active', 2000 - SKEW - 1), 2000, EPOCH + 2000)).toBe(false);
    expect(b.accept(hb('c', 'active', 2000 + SKEW), 2000, EPOCH + 2000)).toBe(true);
  });

  test('a leaving heartbeat from a replica other than the active one is ignored', () => {
    const b = standbyHearing(300);
    b.accept(hb('c', 'leaving', 310), 310, EPOCH + 310);
    expect(b.tick(320)).toEqual({ kind: 'none' });
  });

  test('handover: the leaving leader learns when another replica is active; standbys heard are listed', () => {
    const a = new TakeoverDecision('a', { windowMs: WINDOW, maxSkewMs: SKEW });
    a.setLeading(true, 0);
    a.accept(hb('b', 'standby', 100), 100, EPOCH + 100);
    expect(a.standbysHeard(200)).toEqual(['b']);
    expect(a.standbysHeard(100 + WINDOW)).toEqual([]);
    a.setLeading(false, 1000); // leaving
    expect(a.otherActiveSince(1000)).toBeUndefined();
    a.accept(hb('b', 'active', 1020), 1020, EPOCH + 1020);
    expect(a.otherActiveSince(1000)).toBe('b');
    expect(a.tick(1020)).toEqual({ kind: 'none' });
  });

  test('timings are checked', () => {
    expect(() => new TakeoverDecision('a', { windowMs: 0, maxSkewMs: 1 })).toThrow(RangeError);
    expect(() => new TakeoverDecision('a', { windowMs: 1, maxSkewMs: 0 })).toThrow(RangeError);
  });
});

describe('LeaseDecision.takeoverWrite', () => {
  const held = (holder: string): LeaseObservation => ({
    kind: 'held',
    holder,
    record: `${holder}|1`,
    durationMs: 6000,
  });

  test('takes the Lease only while it names the silent replica or nobody', () => {
    const b = new LeaseDecision('b');
    expect(b.takeoverWrite(held('a'), 'a')).toBe('acquire');
    expect(b.takeoverWrite(held(''), 'a')).toBe('acquire');
    expect(b.takeoverWrite({ kind: 'absent' }, 'a')).toBe('create');
    expect(b.takeoverWrite(held('c'), 'a')).toBe('none'); // a third replica got there first
    expect(b.takeoverWrite(held('b'), 'a')).toBe('renew');
    expect(b.takeoverWrite({ kind: 'unknown' }, 'a')).toBe('none');
  });

  test('a won takeover makes the replica lead; the old leader stands down at its next read', () => {
    const a = new LeaseDecision('a');
    a.afterRead({ kind: 'absent' }, 0);
    a.afterWrite('ok', 0);
    const b = new LeaseDecision('b');
    b.afterWrite('ok', 700); // takeoverWrite → acquire → ok
    expect(b.leading).toBe(true);
    expect(a.afterRead(held('b'), 1000)).toBe('none');
    expect(a.leading).toBe(false);
    // And b, not a, keeps renewing.
    expect(b.afterRead(held('b'), 1700)).toBe('renew');
  });
});
