import { describe, expect, test } from 'vitest';
import {
  CONNCHECK_PORT,
  ConnChecker,
  decodeMessage,
  encodeMessage,
  formatLatency,
  formatTimestamp,
  parseTimestamp,
} from '../../src/control/conncheck.js';
import { PacketBatch } from '../../src/io/batch.js';
import { MemoryNet } from '../../src/io/memory-net.js';

describe('formats', () => {
  test('latency text like Liqo (whole ms, else whole μs)', () => {
    expect(formatLatency(2.7)).toBe('2ms');
    expect(formatLatency(1)).toBe('1ms');
    expect(formatLatency(0.85)).toBe('850μs');
    expect(formatLatency(1.9998)).toBe('2ms'); // float error must not drop a millisecond
    expect(formatLatency(0.0004)).toBe('N/A');
    expect(formatLatency(0)).toBe('N/A');
  });

  test('timestamps: RFC 3339 with nanoseconds, round trip, Go offsets accepted', () => {
    const t = Date.UTC(2024, 0, 2, 3, 4, 5, 678) + 0.123;
    const s = formatTimestamp(t);
    // A double of epoch ms resolves ~0.25 µs: the microseconds are exact, the rest is noise.
    expect(s).toMatch(/^2024-01-02T03:04:05\.678123\d{3}Z$/);
    expect(parseTimestamp(s)).toBeCloseTo(t, 3);
    expect(parseTimestamp('2024-01-02T03:04:05.000000001Z') - Date.UTC(2024, 0, 2, 3, 4, 5)).toBeCloseTo(1e-6, 3);
    // Go's RFC3339Nano trims trailing zeros and may carry a zone offset.
    expect(parseTimestamp('2024-01-02T04:04:05.5+01:00')).toBe(Date.UTC(2024, 0, 2, 3, 4, 5, 500));
    expect(parseTimestamp('2024-01-02T03:04:05Z')).toBe(Date.UTC(2024, 0, 2, 3, 4, 5));
    expect(parseTimestamp('yesterday')).toBeNaN();
  });

  test("message codec matches Liqo's JSON field names", () => {
    const bytes = encodeMessage({
      clusterID: 'cluster-b',
      msgType: 'PING',
      timeStamp: '2024-01-02T03:04:05.000000001Z',
    });
    expect(new TextDecoder().decode(bytes)).toBe(
      '{"clusterID":"cluster-b","msgType":"PING","timeStamp":"2024-01-02T03:04:05.000000001Z"}',
    );
    expect(decodeMessage(bytes)).toEqual({
      clusterID: 'cluster-b',
      msgType: 'PING',
      timeStamp: '2024-01-02T03:04:05.000000001Z',
    });
    for (const bad of [
      '',
      '{',
      '[]',
      '{"clusterID":1,"msgType":"PING","timeStamp":"x"}',
      '{"clusterID":"a","msgType":"HELLO","timeStamp":"x"}',
    ]) {
      expect(decodeMessage(new TextEncoder().encode(bad)), bad).toBeNull();
    }
    expect(decodeMessage(new Uint8Array([0xff, 0xfe]))).toBeNull();
  });
});

/** Two gateways on the in-memory network (src/io/memory-net.ts) with a virtual clock. */
function pair(oneWayMs: number) {
  const T0 = Date.UTC(2025, 5, 1);
  let now = T0;
  const updates: { who: string; peer: string; value: string; latencyMs: number }[] = [];
  const net = new MemoryNet({ clock: () => now, latencyMs: oneWayMs });
  const mk = (self: 'a' | 'b', addr: string) => {
    const host = net.host(addr);
    // Pings leave from port 40000 (where the replies come back) and arrive at CONNCHECK_PORT.
    const out = host.openUdp({ family: 4, port: 40000 });
    const checker = new ConnChecker({
      send: (bytes, address, port) => {
        expect(port === CONNCHECK_PORT || port === 40000).toBe(true);
        out.send(bytes, 0, bytes.length, address, port);
      },
      onUpdate: (peer, s) => updates.push({ who: self, peer, value: s.value, latencyMs: s.latencyMs }),
    });
    for (const sock of [out, host.openUdp({ family: 4, port: CONNCHECK_PORT })]) {
      sock.onBatch(new PacketBatch({ capacity: 8, maxLen: 1500, withAddresses: true }), (bt) => {
        for (let i = 0; i < bt.count; i++)
          checker.receive(bt.packet(i), sock.addressOf(bt, i), sock.portOf(bt, i), now);
      });
    }
    return checker;
  };
  const a = mk('a', '10.80.0.1');
  const b = mk('b', '10.80.0.9');
  a.addPeer('cluster-b', '10.80.0.9', now);
  b.addPeer('cluster-a', '10.80.0.1', now);
  const run = (untilMs: number) => {
    while (now < untilMs) {
      const next = Math.min(untilMs, a.nextDeadline(), b.nextDeadline(), net.nextDue);
      now = Math.max(now, next);
      net.pump();
      a.poll(now);
      b.poll(now);
      if (next === untilMs && now >= untilMs) break;
    }
  };
  return {
    a,
    b,
    updates,
    run,
    t: (ms: number) => T0 + ms,
    /** Down: every datagram sent is lost. */
    setLink: (v: boolean) => {
      net.impairAll(v ? null : { loss: 1 });
    },
  };
}

describe('ConnChecker state machine', () => {
  test('Connecting → Connected with the measured round trip, both directions', () => {
    const p = pair(0.4);
    expect(p.a.status('cluster-b')!.value).toBe('Connecting');
    p.run(p.t(1));
    expect(p.a.status('cluster-b')).toMatchObject({ value: 'Connected' });
    expect(p.a.status('cluster-b')!.latencyMs).toBeCloseTo(0.8, 3);
    expect(p.b.status('cluster-a')!.latencyMs).toBeCloseTo(0.8, 3);
    expect(formatLatency(p.a.status('cluster-b')!.latencyMs)).toBe('800μs');
    // One PING each at t=0 and every 2 s after.
    p.run(p.t(4001));
    expect(p.a.pingsSent).toBe(3);
    expect(p.a.pongsSent).toBe(3);
  });

  test('Error after 5 missed replies, back to Connected when replies return', () => {
    const p = pair(1);
    p.run(p.t(100));
    expect(p.a.status('cluster-b')!.value).toBe('Connected');
    const lastReply = p.a.status('cluster-b')!.lastReplyAt!;
    p.setLink(false);
    p.run(lastReply + 5 * 2000 - 1); // just under 5 intervals: not yet
    expect(p.a.status('cluster-b')!.value).toBe('Connected');
    p.run(lastReply + 5 * 2000);
    expect(p.a.status('cluster-b')).toEqual({
      value: 'Error',
      latencyMs: 0,
      lastReplyAt: lastReply,
      peerSpreads: true,
    });
    p.setLink(true);
    p.run(p.t(20_000));
    expect(p.a.status('cluster-b')!.value).toBe('Connected');
    const values = p.updates.filter((u) => u.who === 'a').map((u) => u.value);
    expect(values.indexOf('Error')).toBeGreaterThan(0);
    expect(values.at(-1)).toBe('Connected');
  });

  test("the multipath mark: echoed by a Weft peer (peerSpreads), not by a receiver that keeps only Liqo's three fields", () => {
    const p = pair(0.4);
    p.run(p.t(1));
    expect(p.a.status('cluster-b')!.peerSpreads).toBe(true);
    // Liqo's receiver: decode into clusterID/msgType/timeStamp, answer PONG with those alone.
    const pings: Uint8Array[] = [];
    const c = new ConnChecker({ send: (b) => pings.push(b.slice()) });
    const t0 = Date.UTC(2025, 0, 1);
    c.addPeer('liqo', '10.80.0.9', t0);
    c.poll(t0);
    const ping = decodeMessage(pings[0]!)!;
    expect(ping.multipath).toBe('spread');
    const pong = encodeMessage({ clusterID: ping.clusterID, msgType: 'PONG', timeStamp: ping.timeStamp });
    c.receive(pong, '10.80.0.9', CONNCHECK_PORT, t0 + 1);
    expect(c.status('liqo')).toMatchObject({ value: 'Connected', peerSpreads: false });
  });

  test('a peer that never answers goes from Connecting to Error', () => {
    const p = pair(1);
    p.setLink(false);
    p.run(p.t(10_000));
    expect(p.a.status('cluster-b')!.value).toBe('Error');
  });

  test('bad input is counted, never thrown; out-of-order PONGs are dropped', () => {
    const sent: Uint8Array[] = [];
    const c = new ConnChecker({ send: (b) => sent.push(b) });
    const t0 = Date.UTC(2025, 0, 1);
    c.addPeer('x', '10.80.0.2', t0);
    c.receive(new TextEncoder().encode('nope'), '10.80.0.2', 12345, t0);
    c.receive(new Uint8Array(2000), '10.80.0.2', 12345, t0);
    c.receive(
      encodeMessage({ clusterID: 'y', msgType: 'PONG', timeStamp: formatTimestamp(t0) }),
      '10.80.0.2',
      12345,
      t0,
    );
    c.receive(
      encodeMessage({ clusterID: 'x', msgType: 'PONG', timeStamp: formatTimestamp(t0 + 5) }),
      '10.80.0.2',
      12345,
      t0,
    );
    c.receive(
      encodeMessage({ clusterID: 'x', msgType: 'PONG', timeStamp: formatTimestamp(t0 - 3) }),
      '10.80.0.2',
      12345,
      t0,
    );
    c.receive(
      encodeMessage({ clusterID: 'x', msgType: 'PONG', timeStamp: formatTimestamp(t0 - 10) }),
      '10.80.0.2',
      12345,
      t0,
    );
    expect(c.drops).toEqual({
      malformed: 1,
      'too-large': 1,
      'unknown-peer': 1,
      'out-of-order': 1,
      'future-timestamp': 1,
    });
    expect(c.status('x')!.latencyMs).toBe(3);
    expect(() => c.addPeer('x', '10.80.0.2', t0)).toThrow(/already/);
  });
});

describe('ConnChecker after a failover: the handshake wait is not a round trip', () => {
  /**
   * Gateway a's PINGs go into a tunnel whose session does not exist yet: WireGuard holds them
   * until the handshake completes at `sessionAt`, then sends them; each echo comes back `rttMs`
   * after its PING left. `session` false: the checker is not told when the session began.
   */
  function failover(session: boolean) {
    const T0 = Date.UTC(2025, 5, 1);
    const sessionAt = T0 + 6200;
    const rttMs = 0.8;
    let now = T0;
    const echoes: { at: number; bytes: Uint8Array }[] = [];
    const updates: { value: string; latencyMs: number }[] = [];
    const a = new ConnChecker({
      send: (bytes) => {
        const m = decodeMessage(bytes)!;
        echoes.push({ at: Math.max(now, sessionAt) + rttMs, bytes: encodeMessage({ ...m, msgType: 'PONG' }) });
      },
      onUpdate: (_, s) => updates.push({ value: s.value, latencyMs: s.latencyMs }),
      ...(session ? { sessionStartedAt: () => (now >= sessionAt ? sessionAt : undefined) } : {}),
    });
    a.addPeer('cluster-b', '169.254.18.2', now);
    const run = (until: number) => {
      for (;;) {
        now = Math.min(until, a.nextDeadline(), ...echoes.map((e) => e.at));
        for (const e of echoes.filter((x) => x.at <= now)) {
          echoes.splice(echoes.indexOf(e), 1);
          a.receive(e.bytes, '169.254.18.2', CONNCHECK_PORT, now);
        }
        a.poll(now);
        if (now >= until) return;
      }
    };
    return { a, run, updates, t: (ms: number) => T0 + ms, sessionAt };
  }

  test('replies to PINGs sent before the session are signs of life, not latency; the first real echo follows at once', () => {
    const f = failover(true);
    f.run(f.sessionAt + 0.5);
    // PINGs at 0, 2, 4, 6 s waited for the handshake (6.2 s): not yet Connected, nothing measured.
    expect(f.a.handshakeWaits).toBe(0);
    f.run(f.sessionAt + 1);
    expect(f.a.handshakeWaits).toBe(4);
    expect(f.a.status('cluster-b')).toMatchObject({ value: 'Connecting', latencyMs: 0 });
    // The probe sent on the first of them comes back one round trip later: Connected, 0.8 ms.
    f.run(f.sessionAt + 2);
    expect(f.a.status('cluster-b')!.value).toBe('Connected');
    expect(f.a.status('cluster-b')!.latencyMs).toBeCloseTo(0.8, 3);
    expect(f.updates[0]!.value).toBe('Connected');
    expect(Math.max(...f.updates.map((u) => u.latencyMs))).toBeLessThan(1);
    // One probe, not one per stale reply; then the 2 s cadence resumes.
    expect(f.a.pingsSent).toBe(5);
    f.run(f.sessionAt + 4001);
    expect(f.a.pingsSent).toBe(7);
    expect(f.a.status('cluster-b')!.latencyMs).toBeCloseTo(0.8, 3);
  });

  test('without the session time, the wait would be reported as latency (what the check must not do)', () => {
    const f = failover(false);
    f.run(f.t(7000));
    expect(f.a.handshakeWaits).toBe(0);
    expect(Math.max(...f.updates.map((u) => u.latencyMs))).toBeGreaterThan(6000);
  });
});
