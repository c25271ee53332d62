// The leader-election decision on a virtual clock: a leader stands down only on proof that
// another replica holds the Lease, never because the API server is unreachable.
import { describe, expect, test } from 'vitest';
import { LeaseDecision, type LeaseObservation } from '../../../src/control/k8s/lease-decision.js';

const DURATION = 1500;
const RETRY = 250;
const held = (holder: string, renew: number): LeaseObservation => ({
  kind: 'held',
  holder,
  record: `${holder}|${renew}`,
  durationMs: DURATION,
});
const unknown: LeaseObservation = { kind: 'unknown' };

/** A leader `a` that created the Lease at t=0 and a standby `b` that has seen it. */
function pair() {
  const a = new LeaseDecision('a');
  const b = new LeaseDecision('b');
  expect(a.afterRead({ kind: 'absent' }, 0)).toBe('create');
  a.afterWrite('ok', 0);
  expect(b.afterRead(held('a', 0), 0)).toBe('none');
  return { a, b };
}

describe('LeaseDecision', () => {
  test('a standby takes over only after the record stayed unchanged for the lease duration', () => {
    const { a, b } = pair();
    expect(a.leading).toBe(true);
    for (let t = RETRY; t < DURATION; t += RETRY) expect(b.afterRead(held('a', 0), t)).toBe('none');
    // A renewal restarts the wait.
    expect(b.afterRead(held('a', 1000), 1250)).toBe('none');
    expect(b.afterRead(held('a', 1000), 2500)).toBe('none');
    expect(b.afterRead(held('a', 1000), 2750)).toBe('acquire');
    b.afterWrite('ok', 2750);
    expect(b.leading).toBe(true);
  });

  test('a leader that cannot reach the API server keeps leading for as long as it lasts', () => {
    const { a } = pair();
    for (let t = RETRY; t <= 30_000; t += RETRY) {
      expect(a.afterRead(unknown, t)).toBe('none');
      expect(a.leading).toBe(true);
    }
    // Failed writes (5xx, 401, timeouts) do not end it either.
    expect(a.afterRead(held('a', 0), 30_250)).toBe('renew');
    a.afterWrite('failed', 30_250);
    expect(a.leading).toBe(true);
    expect(a.lastRenew).toBe(0);
    a.afterWrite('ok', 30_500);
    expect(a.lastRenew).toBe(30_500);
  });

  test('a 409 is not proof: the next read decides', () => {
    const { a } = pair();
    expect(a.afterRead(held('a', 0), RETRY)).toBe('renew');
    a.afterWrite('conflict', RETRY);
    expect(a.leading).toBe(true);
    // Its own earlier write had landed: still its Lease.
    expect(a.afterRead(held('a', RETRY), 2 * RETRY)).toBe('renew');
    a.afterWrite('ok', 2 * RETRY);
    expect(a.leading).toBe(true);
  });

  test('a leader that reads another holder stands down at once', () => {
    const { a } = pair();
    expect(a.afterRead(held('b', 5000), 5000)).toBe('none');
    expect(a.leading).toBe(false);
    // As a standby it then waits a full duration like any other.
    expect(a.afterRead(held('b', 5000), 5000 + DURATION - 1)).toBe('none');
  });

  test('after an outage the standby waits a full duration of reads: the leader renews first, nothing flaps', () => {
    const { a, b } = pair();
    // Both cut off for 20 s: the record stays at renewTime 0.
    for (let t = RETRY; t <= 20_000; t += RETRY) {
      expect(a.afterRead(unknown, t)).toBe('none');
      expect(b.afterRead(unknown, t)).toBe('none');
    }
    // The standby reads first after recovery: the old record, 20 s old — not a takeover.
    expect(b.afterRead(held('a', 0), 20_100)).toBe('none');
    expect(a.afterRead(held('a', 0), 20_200)).toBe('renew');
    a.afterWrite('ok', 20_200);
    expect(b.afterRead(held('a', 20_200), 20_350)).toBe('none');
    expect(b.afterRead(held('a', 20_200), 20_350 + DURATION - 1)).toBe('none');
    expect(a.leading).toBe(true);
    expect(b.leading).toBe(false);
  });

  test('the leader cut off, the standby not: the standby takes over; the leader learns it on its next read', () => {
    const { a, b } = pair();
    let t = 0;
    while (t < DURATION + RETRY) {
      t += RETRY;
      expect(a.afterRead(unknown, t)).toBe('none');
      if (b.afterRead(held('a', 0), t) === 'acquire') break;
    }
    expect(t).toBe(DURATION);
    b.afterWrite('ok', t);
    // The partition: a cannot know and keeps forwarding…
    expect(a.leading).toBe(true);
    // …until it reaches the API server and sees b's record.
    expect(a.afterRead(held('b', t), t + 5000)).toBe('none');
    expect(a.leading).toBe(false);
  });

  test('a released Lease (empty holder) is taken at once', () => {
    const { b } = pair();
    expect(b.afterRead(held('', 400), 400)).toBe('acquire');
  });
});
