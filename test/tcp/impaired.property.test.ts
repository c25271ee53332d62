/**
 * Properties (fast-check, virtual clock) of two TCP engines joined by a seeded network that
 * loses, duplicates, reorders, delays and corrupts segments (lossy-net.ts), for many seeds and
 * settings (MTU, ring sizes, window scaling, SACK, out-of-order ranges, family, reader speed):
 * - data both ways at once arrives exactly once, in order, intact;
 * - after FIN both ways each side is CLOSED or TIME_WAIT with reason `closed`, and once TIME_WAIT
 *   ends both tables are empty;
 * - an abort reaches the other side as `reset` even when RSTs are lost;
 * - no sender exceeds the window it was offered; out-of-order ranges and rings stay in bounds;
 * - segments mutated with a valid checksum (any header field, options, flags) and random
 *   bytes never throw; every one not used is a counted drop.
 */
import { fc, test } from '@fast-check/vitest';
import { describe, expect } from 'vitest';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { fillTcpChecksumV4, fillTcpChecksumV6 } from '../../src/packet/tcp.js';
import type { TcpConnection } from '../../src/tcp/connection.js';
import { TCP_DROP_BAD_CHECKSUM, TCP_DROP_BAD_HEADER } from '../../src/tcp/reasons.js';
import { TCP_CLOSED, TCP_EV_CLOSED, TCP_EV_PEER_FIN, TCP_TIME_WAIT, TCP_STATE_NAMES } from '../../src/tcp/state.js';
import { App, endpoints, mutate, open, run, type Setup, type Side, type LossyNet } from './lossy-net.js';
import { pattern } from './pair.js';

const setup: fc.Arbitrary<Setup> = fc.record({
  seed: fc.integer({ min: 1, max: 0x7fffffff }),
  family: fc.constantFrom(4 as const, 6 as const),
  mtu: fc.constantFrom(576, 1280, 1500, 9000),
  ringA: fc.constantFrom(2048, 8192, 65536, 262144),
  ringB: fc.constantFrom(2048, 8192, 65536, 262144),
  windowScaling: fc.boolean(),
  sack: fc.boolean(),
  maxOooRanges: fc.integer({ min: 0, max: 8 }),
  loss: fc.constantFrom(0, 0.02, 0.05, 0.1),
  duplicate: fc.constantFrom(0, 0.05, 0.1),
  reorder: fc.constantFrom(0, 0.05, 0.2),
  corrupt: fc.constantFrom(0, 0.01),
  bytesAB: fc.integer({ min: 0, max: 200_000 }),
  bytesBA: fc.integer({ min: 0, max: 200_000 }),
  // A reader that stalls on some turns (0) but reads on others: every cycle reads something.
  readChunks: fc
    .array(fc.constantFrom(0, 7, 100, 1460, 4096, 65536), { minLength: 1, maxLength: 6 })
    .map((a) => (a.some((x) => x > 0) ? a : [...a, 1460])),
});

const describeState = (c: TcpConnection | null): string =>
  c === null ? 'none' : `${TCP_STATE_NAMES[c.state]}/${c.closeReason}`;

/** Settings that found engine defects, kept as fixed examples (run before the random ones). */
const base = {
  family: 4,
  mtu: 576,
  ringA: 2048,
  ringB: 2048,
  windowScaling: false,
  sack: false,
  maxOooRanges: 0,
  loss: 0,
  duplicate: 0,
  reorder: 0,
  corrupt: 0,
} as const;
const FOUND: [Setup][] = [
  // A fast retransmission sent a never-sent byte beyond the peer's window.
  [{ ...base, seed: 1, bytesAB: 0, bytesBA: 2049, readChunks: [1] }],
  // Pure ACKs numbered at the rewound SND.NXT were dropped unread by the peer: both timed out.
  [{ ...base, seed: 1, maxOooRanges: 1, loss: 0.1, bytesAB: 61233, bytesBA: 58118, readChunks: [4096] }],
  // Data queued into a closed window with nothing in flight armed no persist timer.
  [{ ...base, seed: 1, maxOooRanges: 1, loss: 0.05, bytesAB: 0, bytesBA: 93121, readChunks: [0, 65536, 100] }],
  // A retransmission into TIME_WAIT did not restart it; the peer's next one met a RST.
  [
    {
      ...base,
      seed: 1736349046,
      family: 6,
      mtu: 1500,
      ringA: 8192,
      ringB: 262144,
      loss: 0.1,
      reorder: 0.05,
      corrupt: 0.01,
      bytesAB: 181793,
      bytesBA: 199073,
      readChunks: [0, 0, 65536, 0, 65536],
    },
  ],
  // An ACK at the right edge of the receive window (a full window lost) was dropped unread.
  [{ ...base, seed: 15, mtu: 9000, loss: 0.1, bytesAB: 28671, bytesBA: 30719, readChunks: [65536, 0, 0] }],
];

describe('tcp engine under a seeded lossy, reordering, duplicating network (virtual clock)', () => {
  test.prop([setup], { numRuns: 300, examples: FOUND })(
    'data both ways exactly once, in order, intact; FIN both ways ends in CLOSED / TIME_WAIT; windows respected; drops counted',
    (s) => {
      const net = endpoints(s);
      const ab = pattern(s.bytesAB, s.seed);
      const ba = pattern(s.bytesBA, s.seed + 1);
      const apps = { a: new App(ab, ba, s.readChunks, true), b: new App(ba, ab, [...s.readChunks].reverse(), true) };
      const ca = open(net, s);
      const finished = (): boolean =>
        apps.a.got === ba.length &&
        apps.b.got === ab.length &&
        net.conn.b !== null &&
        [ca, net.conn.b].every((c) => c.state === TCP_CLOSED || c.state === TCP_TIME_WAIT);
      run(net, apps, finished);
      const cb = net.conn.b;
      const where = `a ${describeState(ca)}, b ${describeState(cb)}, a got ${apps.a.got}/${ba.length}, b got ${apps.b.got}/${ab.length}`;
      expect(finished(), where).toBe(true);
      // Graceful both ways. The one exception TCP allows: the last closer's FIN (all its data
      // acknowledged) and every retransmission of it lost for as long as the other side's
      // TIME_WAIT lasted; its next retransmission then meets a RST.
      for (const [c, peer] of [
        [ca, cb!],
        [cb!, ca],
      ] as const) {
        if (c.closeReason === 'reset') {
          expect(peer.closeReason, where).toBe('closed');
          expect(c.snd.ring.size, where).toBe(0);
          expect(c.snd.finQueued && !c.snd.finAcked, where).toBe(true);
        } else expect(c.closeReason, where).toBe('closed');
      }
      for (const app of [apps.a, apps.b]) {
        expect(app.events & TCP_EV_PEER_FIN).toBeTruthy();
        expect(app.events & TCP_EV_CLOSED).toBeTruthy();
      }
      // TIME_WAIT ends; nothing is left in either table; nothing left in flight is taken.
      run(net, apps, () => net.a.connectionCount === 0 && net.b.connectionCount === 0 && net.inFlight === 0);
      expect(net.a.connectionCount).toBe(0);
      expect(net.b.connectionCount).toBe(0);
      expect(net.a.stats.timeouts + net.b.stats.timeouts).toBe(0);
      expect(net.dropsMatch('a')).toBe(true);
      expect(net.dropsMatch('b')).toBe(true);
      // Every corrupted copy was delivered and dropped: by the checksum, or before it by the
      // header check when the flipped bit is in the data offset.
      const caught = (code: number): number => net.a.stats.drops[code]! + net.b.stats.drops[code]!;
      expect(caught(TCP_DROP_BAD_CHECKSUM) + caught(TCP_DROP_BAD_HEADER)).toBe(net.corrupted);
    },
    120_000,
  );

  test.prop([setup, fc.integer({ min: 0, max: 100_000 }), fc.constantFrom<Side>('a', 'b')], { numRuns: 200 })(
    'an abort mid-transfer reaches the other side as a reset (RSTs may be lost); both tables empty',
    (s, abortAfter, aborter) => {
      const net = endpoints(s);
      const ab = pattern(Math.max(s.bytesAB, 1000), s.seed);
      const ba = pattern(Math.max(s.bytesBA, 1000), s.seed + 1);
      const apps = { a: new App(ab, ba, s.readChunks, false), b: new App(ba, ab, s.readChunks, false) };
      const ca = open(net, s);
      const other: Side = aborter === 'a' ? 'b' : 'a';
      let aborted = false;
      let poked = false;
      run(net, apps, () => {
        const c = net.conn[aborter];
        if (
          !aborted &&
          c !== null &&
          net.conn.b !== null &&
          apps[aborter].got + apps[aborter].sent >= Math.min(abortAfter, 1000)
        ) {
          c.abort();
          aborted = true;
        }
        // The other side must have something unacknowledged to hear the RST from a retransmission.
        const o = net.conn[other];
        if (aborted && !poked && o !== null && o.state !== TCP_CLOSED) {
          o.send(new Uint8Array(10), 0, 10);
          poked = true;
        }
        return aborted && net.a.connectionCount === 0 && net.b.connectionCount === 0;
      });
      const cb = net.conn.b;
      const where = `a ${describeState(ca)}, b ${describeState(cb)}`;
      expect(aborted, where).toBe(true);
      expect(net.conn[aborter]!.closeReason, where).toBe('aborted');
      expect(net.conn[other]!.closeReason, where).toBe('reset');
      expect(apps[other].events & TCP_EV_CLOSED).toBeTruthy();
      expect(net.a.connectionCount + net.b.connectionCount).toBe(0);
      expect(net.dropsMatch('a')).toBe(true);
      expect(net.dropsMatch('b')).toBe(true);
    },
    120_000,
  );
});

/** A mutation of a real segment, its checksum made valid again so it reaches the state machine. */
const mutation = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom('byte', 'seq', 'ack', 'flags', 'window', 'offset', 'truncate', 'random'),
  value: fc.nat(),
  pos: fc.nat(),
});
describe('tcp engine fed mutated segments (valid checksums) and random bytes', () => {
  test.prop([setup, fc.array(mutation, { minLength: 1, maxLength: 60 })], { numRuns: 300 })(
    'never throws; every segment not taken is a counted drop; bounds hold; the tables drain',
    (s, muts) => {
      const net = endpoints({ ...s, loss: 0.02, duplicate: 0.02, reorder: 0.05, corrupt: 0 });
      const ab = pattern(Math.min(s.bytesAB, 60_000), s.seed);
      const ba = pattern(Math.min(s.bytesBA, 60_000), s.seed + 1);
      const apps = { a: new App(ab, ba, s.readChunks, true), b: new App(ba, ab, s.readChunks, true) };
      // A mutated segment can carry wrong data with a valid checksum: the readers do not check.
      for (const app of [apps.a, apps.b]) (app as { expected: Uint8Array }).expected = new Uint8Array(0);
      for (const app of [apps.a, apps.b]) app.serve = lenientServe(app);
      const v = new IpView();
      const seen: { to: Side; pkt: Uint8Array }[] = [];
      let tapped = 0;
      // Copies of real segments each way: the material for the mutations.
      net.tap = (from, pkt, len) => {
        if (tapped++ % 3 === 0 && seen.length < 200)
          seen.push({ to: from === 'a' ? 'b' : 'a', pkt: pkt.slice(0, len) });
      };
      open(net, s);
      // Each mutation goes in between a few steps of the real exchange.
      let mi = 0;
      for (const m of muts) {
        if (seen.length > 0) {
          const src = seen[m.at % seen.length]!;
          net.inject(src.to, mutate(src.pkt, m, v));
        }
        mi++;
        let steps = 0;
        run(net, apps, () => ++steps > m.pos % 8);
      }
      expect(mi).toBe(muts.length);
      // A mutation may leave a connection open for ever (ESTABLISHED, nothing to send, no
      // keep-alive): the consumer can always end it, and then every table drains.
      for (const side of ['a', 'b'] as const) net.conn[side]?.abort();
      run(net, apps, () => false);
      expect(net.dropsMatch('a')).toBe(true);
      expect(net.dropsMatch('b')).toBe(true);
      expect(net.a.connectionCount).toBe(0);
      expect(net.b.connectionCount).toBe(0);
    },
    120_000,
  );
});

function lenientServe(app: App): (c: TcpConnection) => void {
  return (c) => {
    app.events |= c.takeEvents();
    while (app.sent < app.out.length) {
      const n = c.send(app.out, app.sent, app.out.length - app.sent);
      if (n === 0) break;
      app.sent += n;
    }
    for (let n = c.recv(app.tmp, 0, app.tmp.length); n > 0; n = c.recv(app.tmp, 0, app.tmp.length)) app.got += n;
    if (app.sent === app.out.length && !app.closeCalled) {
      app.closeCalled = true;
      c.close();
    }
  };
}
