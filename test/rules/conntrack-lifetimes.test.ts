/**
 * The connection tracker's lifetimes and limits (src/nat/flows.ts FlowTable, driven as the
 * compiled rules drive it: RulesRuntime's hooks, and FlowTable directly where slots matter):
 * per-state idle timeouts, a full table, masquerade source-port choice and its exhaustion,
 * conntrack zones. Virtual clock: every call gets its `now` (ms).
 *
 * Timeouts are pinned by value (config.ts DEFAULT_CONNTRACK_TIMEOUTS, the RFC 5382 / 4787 / 5508
 * figures); where Linux's nf_conntrack defaults differ, the case says so and Weft's is pinned.
 */
import { describe, expect, it } from 'vitest';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import {
  DIR_ORIG,
  DIR_REPLY,
  FLOW_CLOSE,
  FLOW_ESTABLISHED,
  FLOW_FIN_WAIT,
  FLOW_OTHER,
  FLOW_SYN_RECV,
  FLOW_SYN_SENT,
  FLOW_TIME_WAIT,
  FLOW_UDP,
  FlowTable,
} from '../../src/nat/flows.js';
import {
  HOOK_FORWARD,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_NODE,
  SOURCE_PEER,
  VERDICT_ACCEPT,
  VERDICT_DROP,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import type { RulesDevices } from '../../src/rules/devices.js';
import { ipToNumber } from '../../src/rules/model.js';
import { parseFirewallConfiguration } from '../../src/rules/parse.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import * as fx from './fixtures.js';

const SYN = 0x02,
  ACK = 0x10,
  FIN = 0x01,
  RST = 0x04;
const S = 1000;

/** Masquerade address of the tunnel side. */
const MASQ = '192.0.2.1';
const HOST = '10.112.0.5';
const SERVER = '10.243.3.9';

const DEV: RulesDevices = {
  peer: fx.TUNNEL,
  node: fx.NODE_IF,
  host: fx.DEFAULT_IF,
  peerAddr: ipToNumber(MASQ)!,
  nodeAddr: ipToNumber('198.51.100.1')!,
  hostAddr: 0,
  pathMtu: 1500,
};

/** Masquerade of everything leaving through the tunnel (Liqo's masquerade-ct form). */
const MASQ_OUT = {
  metadata: { name: 'masq', namespace: 't' },
  spec: {
    table: {
      name: 'masq',
      family: 'IPV4',
      chains: [
        {
          name: 'postrouting',
          type: 'nat',
          hook: 'postrouting',
          priority: 100,
          policy: 'accept',
          rules: {
            natRules: [
              { name: 'out', natType: 'masquerade', match: [{ op: 'eq', dev: { position: 'out', value: fx.TUNNEL } }] },
            ],
          },
        },
      ],
    },
  },
};

function runtime(capacity = 64): RulesRuntime {
  const r = new RulesRuntime(DEV, { flows: { capacity, seed: 7 }, statelessMirror: false });
  r.install(compileRules([parseFirewallConfiguration(MASQ_OUT)]));
  return r;
}

const v = new IpView();
const meta = new PacketMeta();

/** A forwarded packet through PREROUTING, FORWARD, POSTROUTING (node → tunnel, or tunnel → node). */
function pass(r: RulesRuntime, p: Built, fromPeer: boolean, now: number, zone = 0): number {
  expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
  meta.source = fromPeer ? SOURCE_PEER : SOURCE_NODE;
  meta.output = OUTPUT_NONE;
  meta.zone = zone;
  if (r.hooks[HOOK_PREROUTING]!.process(p.buf, v, meta, now) === VERDICT_DROP) return VERDICT_DROP;
  meta.output = fromPeer ? OUTPUT_NODE : OUTPUT_PEER;
  if (r.hooks[HOOK_FORWARD]!.process(p.buf, v, meta, now) === VERDICT_DROP) return VERDICT_DROP;
  return r.hooks[HOOK_POSTROUTING]!.process(p.buf, v, meta, now);
}

const addr = (p: Built, o: number): string => [...p.buf.subarray(p.off + o, p.off + o + 4)].join('.');
const port = (p: Built, o: number): number => (p.buf[p.l4 + o]! << 8) | p.buf[p.l4 + o + 1]!;
/** Source "addr:port" as the packet left (ICMP: the echo identifier). */
const src = (p: Built): string => `${addr(p, 12)}:${p.buf[p.off + 9] === 1 ? port(p, 4) : port(p, 0)}`;
const dst = (p: Built): string => `${addr(p, 16)}:${p.buf[p.off + 9] === 1 ? port(p, 4) : port(p, 2)}`;
const liveStates = (r: RulesRuntime): number[] => [...r.flows.state].filter((s) => s !== 0);

// The connection of the timeout cases: HOST:40000 → SERVER:80 (TCP), :5353 → :53 (UDP), echo id 0x77.
const tcpOut = (flags: number): Built => tcpPacket({ src: HOST, dst: SERVER, sport: 40000, dport: 80, flags });
const tcpBack = (flags: number): Built => tcpPacket({ src: SERVER, dst: MASQ, sport: 80, dport: 40000, flags });
const udpOut = (): Built => udpPacket({ src: HOST, dst: SERVER, sport: 5353, dport: 53 });
const udpBack = (): Built => udpPacket({ src: SERVER, dst: MASQ, sport: 53, dport: 5353 });
const echoOut = (): Built => icmpEcho({ src: HOST, dst: SERVER, ident: 0x77 });
const echoBack = (): Built => icmpEcho({ src: SERVER, dst: MASQ, ident: 0x77, type: 0 });

interface Case {
  name: string;
  /** Weft's idle timeout for the state (ms). */
  timeout: number;
  /** Packets that bring the connection to the state: [packet, from the peer]. */
  setup: [() => Built, boolean][];
  state: number;
  /** A reply-direction packet: translated back to HOST while the entry lives. */
  probe: () => Built;
  /** A packet that refreshes the entry without changing its state (and timeout). */
  keep: [() => Built, boolean];
}

const CASES: Case[] = [
  {
    name: 'TCP SYN_SENT: 240 s (tcpTransitory; Linux syn_sent 120 s)',
    timeout: 240 * S,
    setup: [[() => tcpOut(SYN), false]],
    state: FLOW_SYN_SENT,
    probe: () => tcpBack(SYN | ACK),
    keep: [() => tcpOut(SYN), false],
  },
  {
    name: 'TCP SYN_RECV: 240 s (tcpTransitory; Linux syn_recv 60 s)',
    timeout: 240 * S,
    setup: [
      [() => tcpOut(SYN), false],
      [() => tcpBack(SYN | ACK), true],
    ],
    state: FLOW_SYN_RECV,
    probe: () => tcpBack(SYN | ACK),
    keep: [() => tcpBack(SYN | ACK), true],
  },
  {
    name: 'TCP ESTABLISHED: 7440 s = 2 h 4 min (RFC 5382 REQ-5; Linux established 432000 s = 5 days)',
    timeout: 7440 * S,
    setup: [
      [() => tcpOut(SYN), false],
      [() => tcpBack(SYN | ACK), true],
      [() => tcpOut(ACK), false],
    ],
    state: FLOW_ESTABLISHED,
    probe: () => tcpBack(ACK),
    keep: [() => tcpBack(ACK), true],
  },
  {
    name: 'TCP picked up mid-stream, no reply yet: 240 s (tcpTransitory)',
    timeout: 240 * S,
    setup: [[() => tcpOut(ACK), false]],
    state: FLOW_ESTABLISHED,
    probe: () => tcpBack(ACK),
    keep: [() => tcpOut(ACK), false],
  },
  {
    name: 'TCP FIN seen one way: 240 s (tcpTransitory; Linux fin_wait 120 s, close_wait 60 s)',
    timeout: 240 * S,
    setup: [
      [() => tcpOut(SYN), false],
      [() => tcpBack(SYN | ACK), true],
      [() => tcpOut(ACK), false],
      [() => tcpOut(FIN | ACK), false],
    ],
    state: FLOW_FIN_WAIT,
    probe: () => tcpBack(ACK),
    keep: [() => tcpBack(ACK), true],
  },
  {
    name: 'TCP FIN both ways (TIME_WAIT): 240 s = 2 MSL (Linux time_wait 120 s)',
    timeout: 240 * S,
    setup: [
      [() => tcpOut(SYN), false],
      [() => tcpBack(SYN | ACK), true],
      [() => tcpOut(ACK), false],
      [() => tcpOut(FIN | ACK), false],
      [() => tcpBack(FIN | ACK), true],
    ],
    state: FLOW_TIME_WAIT,
    probe: () => tcpBack(ACK),
    keep: [() => tcpBack(ACK), true],
  },
  {
    name: 'TCP after RST (CLOSE): 10 s (as Linux close 10 s)',
    timeout: 10 * S,
    setup: [
      [() => tcpOut(SYN), false],
      [() => tcpBack(SYN | ACK), true],
      [() => tcpOut(ACK), false],
      [() => tcpOut(RST), false],
    ],
    state: FLOW_CLOSE,
    probe: () => tcpBack(ACK),
    keep: [() => tcpBack(ACK), true],
  },
  {
    name: 'UDP unreplied: 30 s (as Linux udp_timeout 30 s)',
    timeout: 30 * S,
    setup: [[udpOut, false]],
    state: FLOW_UDP,
    probe: udpBack,
    keep: [udpOut, false],
  },
  {
    name: 'UDP replied: 120 s (as Linux udp_timeout_stream 120 s)',
    timeout: 120 * S,
    setup: [
      [udpOut, false],
      [udpBack, true],
    ],
    state: FLOW_UDP,
    probe: udpBack,
    keep: [udpBack, true],
  },
  {
    name: 'ICMP echo: 60 s (RFC 5508 REQ-1; Linux icmp_timeout 30 s)',
    timeout: 60 * S,
    setup: [[echoOut, false]],
    state: FLOW_OTHER,
    probe: echoBack,
    keep: [echoOut, false],
  },
];

const T0 = 5_000;

/** A runtime (default timeouts) with the case's connection set up at T0. */
function established(c: Case): RulesRuntime {
  const r = runtime();
  for (const [mk, fromPeer] of c.setup) expect(pass(r, mk(), fromPeer, T0)).toBe(VERDICT_ACCEPT);
  expect(liveStates(r)).toEqual([c.state]);
  return r;
}

/** Whether the reply-direction probe at `now` is translated back by the connection. */
function replyMatches(r: RulesRuntime, c: Case, now: number): boolean {
  const p = c.probe();
  pass(r, p, true, now);
  return addr(p, 16) === HOST;
}

describe('conntrack idle timeouts (per state)', () => {
  for (const c of CASES) {
    it(c.name, () => {
      // Lives until just before its timeout.
      const a = established(c);
      expect(replyMatches(a, c, T0 + c.timeout - 1)).toBe(true);
      expect(a.stats().flows.expired).toBe(0);

      // Gone at its timeout: the reply no longer matches (untracked or a new connection of its own).
      const b = established(c);
      expect(replyMatches(b, c, T0 + c.timeout)).toBe(false);
      expect(b.stats().flows.expired).toBe(1);

      // Refreshed just before the timeout, it lives a full timeout more (and no longer).
      const d = established(c);
      const [keep, fromPeer] = c.keep;
      const k = keep();
      expect(pass(d, k, fromPeer, T0 + c.timeout - 1)).toBe(VERDICT_ACCEPT);
      if (fromPeer) expect(addr(k, 16)).toBe(HOST);
      else expect(addr(k, 12)).toBe(MASQ);
      expect(liveStates(d)).toEqual([c.state]);
      expect(replyMatches(d, c, T0 + 2 * c.timeout - 2)).toBe(true);
      expect(d.stats().flows.expired).toBe(0);
    });
  }

  it('the housekeeping sweep frees expired entries only', () => {
    const r = runtime();
    expect(pass(r, udpOut(), false, T0)).toBe(VERDICT_ACCEPT); // 30 s
    expect(pass(r, echoOut(), false, T0)).toBe(VERDICT_ACCEPT); // 60 s
    expect(r.expire(T0 + 30 * S - 1)).toBe(0);
    expect(r.flows.size).toBe(2);
    expect(r.expire(T0 + 30 * S)).toBe(1);
    expect(liveStates(r)).toEqual([FLOW_OTHER]);
    expect(r.expire(T0 + 60 * S)).toBe(1);
    expect(r.flows.size).toBe(0);
    expect(r.stats().flows.expired).toBe(2);
  });

  it('a new SYN on a TIME_WAIT connection reopens it (SYN_SENT, unreplied)', () => {
    const c = CASES.find((x) => x.state === FLOW_TIME_WAIT)!;
    const r = established(c);
    expect(pass(r, tcpOut(SYN), false, T0 + S)).toBe(VERDICT_ACCEPT);
    expect(liveStates(r)).toEqual([FLOW_SYN_SENT]);
    expect(r.stats().flows.created).toBe(1);
  });
});

describe('a full table', () => {
  const host = (i: number): string => `10.112.${i >> 8}.${i & 255}`;
  // Originals go to SERVER, newcomers to another server: they never take each other's tuples.
  const syn = (i: number, newcomer: boolean): Built =>
    tcpPacket({ src: host(i), dst: newcomer ? '10.243.3.10' : SERVER, sport: 40000 + i, dport: 80, flags: SYN });
  const synAck = (i: number, newcomer: boolean): Built =>
    tcpPacket({ src: newcomer ? '10.243.3.10' : SERVER, dst: MASQ, sport: 80, dport: 40000 + i, flags: SYN | ACK });
  /** Whether connection i's reply is still translated back (its entry lives). */
  const tracked = (r: RulesRuntime, i: number, newcomer: boolean, now: number): boolean => {
    const p = synAck(i, newcomer);
    pass(r, p, true, now);
    return addr(p, 16) === host(i);
  };

  /**
   * A table of `cap` entries full of connections (the first established), then `cap` new flows:
   * each is admitted, the table never grows, every admission evicts one (counted). Returns the
   * runtime after the flood.
   */
  function flood(cap: number): RulesRuntime {
    const r = runtime(cap);
    for (let i = 0; i < cap; i++) expect(pass(r, syn(i, false), false, T0 + i)).toBe(VERDICT_ACCEPT);
    expect(pass(r, synAck(0, false), true, T0 + cap)).toBe(VERDICT_ACCEPT);
    const ack = tcpPacket({ src: host(0), dst: SERVER, sport: 40000, dport: 80, flags: ACK });
    expect(pass(r, ack, false, T0 + cap)).toBe(VERDICT_ACCEPT);
    expect(r.flows.size).toBe(cap);
    expect(liveStates(r).filter((s) => s === FLOW_ESTABLISHED)).toHaveLength(1);
    expect(r.stats().flows.evicted).toBe(0);
    for (let i = cap; i < 2 * cap; i++) {
      expect(pass(r, syn(i, true), false, T0 + 100 + i)).toBe(VERDICT_ACCEPT);
      expect(r.flows.size).toBe(cap);
      expect(r.stats().flows.evicted).toBe(i - cap + 1);
    }
    expect(r.stats().flows).toMatchObject({ created: 2 * cap, expired: 0, entries: cap });
    return r;
  }

  // flows.ts: "at capacity the sweep cursor's next live entry is evicted (counted)"; config.ts:
  // "the oldest/expired entry is evicted". Linux instead early-drops only unassured entries and
  // otherwise drops the new packet ("table full, dropping packet"): Weft evicts established ones too.
  it('never grows beyond capacity: each new flow evicts one entry (counted), the oldest first, established or not', () => {
    const cap = 16;
    const r = flood(cap);
    // A full sweep later, every original connection is gone (the established one first), the
    // newest is tracked. Probed newest first: a probe that finds nothing creates an entry itself.
    expect(tracked(r, 2 * cap - 1, true, T0 + 1000)).toBe(true);
    expect(liveStates(r)).not.toContain(FLOW_ESTABLISHED);
    for (let i = 0; i < cap; i++) expect(tracked(r, i, false, T0 + 1000), `original ${i}`).toBe(false);
  });

  // Evictions go round every slot in turn: a small table (capacity ≤ 9, where a scan window is
  // the whole table) must not keep evicting the slot the previous new flow just took.
  it('a small table (capacity 8) evicts its old entries too under a flood', () => {
    const cap = 8;
    const r = flood(cap);
    let originals = 0;
    for (let i = 0; i < cap; i++) if (r.flows.a32.subarray(0, cap * 4).includes(ipToNumber(host(i))!)) originals++;
    expect(originals).toBe(0);
  });

  it('an expired entry within the scan is reclaimed (counted as expired) before a live one is evicted', () => {
    const f = new FlowTable({ capacity: 4, seed: 3 });
    const a = new Uint8Array([10, 0, 0, 1, 10, 0, 0, 2]);
    const mk = (proto: number, sport: number, state: number): number => {
      const e = f.create(4, proto, a, 0, 4, sport, 80, state, 0);
      expect(f.confirm(e, 0)).toBe(true);
      f.seen(e, DIR_ORIG, proto === 6 ? SYN : 0, 0);
      return e;
    };
    const tcp0 = mk(6, 1000, FLOW_SYN_SENT); // 240 s
    mk(6, 1001, FLOW_SYN_SENT);
    mk(17, 1002, FLOW_UDP); // 30 s
    mk(6, 1003, FLOW_SYN_SENT);
    expect(f.size).toBe(4);
    const now = 30 * S;
    const e = f.create(4, 17, a, 0, 4, 2000, 80, FLOW_UDP, now);
    expect(f.confirm(e, now)).toBe(true);
    expect(f.size).toBe(4);
    expect(f.stats()).toMatchObject({ evicted: 0, expired: 1, created: 5 });
    expect(f.lookup4(6, 0x0a000001, 0x0a000002, 1000, 80, now)).toBe(tcp0 * 2);
    expect(f.lookup4(17, 0x0a000001, 0x0a000002, 1002, 80, now)).toBe(-1);
    // Then the next live entry after the sweep cursor (slot 3), not the oldest (slot 0).
    const e2 = f.create(4, 17, a, 0, 4, 2001, 80, FLOW_UDP, now);
    expect(f.confirm(e2, now)).toBe(true);
    expect(f.stats()).toMatchObject({ entries: 4, evicted: 1, expired: 1 });
    expect(f.lookup4(6, 0x0a000001, 0x0a000002, 1003, 80, now)).toBe(-1);
    expect(f.lookup4(6, 0x0a000001, 0x0a000002, 1000, 80, now)).toBe(tcp0 * 2);
  });
});

describe('masquerade source ports', () => {
  const host = (i: number): string => `10.112.${1 + (i >> 8)}.${i & 255}`;
  const udpFrom = (i: number, sport: number): Built => udpPacket({ src: host(i), dst: SERVER, sport, dport: 53 });

  it('a clash takes the next port of the same class; replies find their host', () => {
    const r = runtime();
    const got = (i: number, sport: number): string => {
      const p = udpFrom(i, sport);
      expect(pass(r, p, false, T0)).toBe(VERDICT_ACCEPT);
      return src(p);
    };
    expect(got(0, 53)).toBe(`${MASQ}:53`);
    expect(got(1, 53)).toBe(`${MASQ}:54`);
    expect(got(2, 53)).toBe(`${MASQ}:55`);
    // Wrapping inside the class.
    expect(got(0, 511)).toBe(`${MASQ}:511`);
    expect(got(1, 511)).toBe(`${MASQ}:1`);
    expect(got(0, 1023)).toBe(`${MASQ}:1023`);
    expect(got(1, 1023)).toBe(`${MASQ}:600`);
    expect(got(0, 65535)).toBe(`${MASQ}:65535`);
    expect(got(1, 65535)).toBe(`${MASQ}:1024`);
    expect(got(0, 40000)).toBe(`${MASQ}:40000`);
    expect(got(1, 40000)).toBe(`${MASQ}:40001`);
    // The reply to the second clashing flow reaches the second host's own port.
    const back = udpPacket({ src: SERVER, dst: MASQ, sport: 53, dport: 54 });
    expect(pass(r, back, true, T0 + 1)).toBe(VERDICT_ACCEPT);
    expect(dst(back)).toBe(`${host(1)}:53`);
  });

  // Ports 512-599 belong to class 600-1023 (nf_nat_l4proto_unique_tuple): the search starts at
  // the class's first port, never at orig + 1 outside it.
  it('a clash on a port in 512-599 takes a port in 600-1023, as the kernel', () => {
    const r = runtime();
    const a = udpFrom(0, 550);
    const b = udpFrom(1, 550);
    expect(pass(r, a, false, T0)).toBe(VERDICT_ACCEPT);
    expect(pass(r, b, false, T0)).toBe(VERDICT_ACCEPT);
    expect(port(b, 0)).toBeGreaterThanOrEqual(600);
    expect(port(b, 0)).toBeLessThanOrEqual(1023);
  });

  for (const [cls, sport, lo, hi] of [
    ['1-511', 53, 1, 511],
    ['600-1023', 700, 600, 1023],
  ] as const) {
    it(`exhausting class ${cls} drops the next new flow (counted nat_no_port), no entry left; an expired mapping frees its port`, () => {
      const span = hi - lo + 1;
      const r = runtime(1024);
      const seen = new Set<number>();
      for (let i = 0; i < span; i++) {
        const p = udpFrom(i, sport);
        expect(pass(r, p, false, T0)).toBe(VERDICT_ACCEPT);
        expect(addr(p, 12)).toBe(MASQ);
        seen.add(port(p, 0));
      }
      expect(seen.size).toBe(span);
      expect(Math.min(...seen)).toBe(lo);
      expect(Math.max(...seen)).toBe(hi);
      expect(r.stats().natNoPort).toBe(0);
      expect(pass(r, udpFrom(span, sport), false, T0 + 1)).toBe(VERDICT_DROP);
      expect(r.stats().natNoPort).toBe(1);
      // The dropped flow's entry is never confirmed (freed at the next packet).
      expect(pass(r, udpFrom(span + 1, sport), false, T0 + 2)).toBe(VERDICT_DROP);
      expect(r.stats().natNoPort).toBe(2);
      expect(r.flows.size).toBeLessThanOrEqual(span + 1);
      expect(r.stats().flows.created).toBe(span + 2);
      // Unreplied UDP lasts 30 s: after it, the same host gets a port again.
      const later = udpFrom(span, sport);
      expect(pass(r, later, false, T0 + 30 * S)).toBe(VERDICT_ACCEPT);
      expect(port(later, 0)).toBeGreaterThanOrEqual(lo);
      expect(port(later, 0)).toBeLessThanOrEqual(hi);
      expect(r.stats().natNoPort).toBe(2);
    });
  }
});

describe('conntrack zones', () => {
  it('the same 5-tuple in two zones is two entries, each found only in its zone (FlowTable)', () => {
    const f = new FlowTable({ capacity: 8, seed: 5 });
    const a = new Uint8Array([10, 0, 0, 1, 10, 0, 0, 2]);
    const at = (zone: number, now: number): number => {
      f.zone = zone;
      return f.lookup(4, 17, a, 0, 4, 5000, 53, now);
    };
    f.zone = 1;
    const e1 = f.create(4, 17, a, 0, 4, 5000, 53, FLOW_UDP, 0);
    expect(f.confirm(e1, 0)).toBe(true);
    expect(at(2, 0)).toBe(-1);
    f.zone = 2;
    const e2 = f.create(4, 17, a, 0, 4, 5000, 53, FLOW_UDP, 0);
    expect(f.confirm(e2, 0)).toBe(true);
    expect(e2).not.toBe(e1);
    expect(f.stats()).toMatchObject({ entries: 2, clashes: 0 });
    expect(at(1, 0)).toBe(e1 * 2 + DIR_ORIG);
    expect(at(2, 0)).toBe(e2 * 2 + DIR_ORIG);
    expect(at(0, 0)).toBe(-1);
    // Reply tuples are per zone too.
    f.zone = 2;
    expect(f.lookup(4, 17, a, 4, 0, 53, 5000, 0)).toBe(e2 * 2 + DIR_REPLY);
    // Lifetimes are independent: zone 2's flow refreshed, zone 1's expires.
    f.seen(e2, DIR_ORIG, 0, 20 * S);
    expect(at(1, 30 * S)).toBe(-1);
    expect(at(2, 30 * S)).toBe(e2 * 2);
    expect(f.stats()).toMatchObject({ entries: 1, expired: 1 });
    // Within one zone the tuple is unique: a second one clashes at confirmation.
    f.zone = 2;
    const dup = f.create(4, 17, a, 0, 4, 5000, 53, FLOW_UDP, 30 * S);
    expect(f.confirm(dup, 30 * S)).toBe(false);
    expect(f.stats()).toMatchObject({ entries: 1, clashes: 1 });
  });

  it('masquerade: port uniqueness is per zone (PacketMeta.zone)', () => {
    const r = runtime();
    const out = (h: string): Built => udpPacket({ src: h, dst: SERVER, sport: 5353, dport: 53 });
    const a = out(HOST);
    const b = out(HOST);
    expect(pass(r, a, false, T0, 1)).toBe(VERDICT_ACCEPT);
    expect(pass(r, b, false, T0, 2)).toBe(VERDICT_ACCEPT);
    // Same tuple, two zones: two entries, both keep the port.
    expect(src(a)).toBe(`${MASQ}:5353`);
    expect(src(b)).toBe(`${MASQ}:5353`);
    expect(r.flows.size).toBe(2);
    expect([...r.flows.zones.subarray(0, 64)].filter((z, e) => r.flows.state[e] !== 0).sort()).toEqual([1, 2]);
    // Another host in zone 1 clashes with zone 1's mapping only.
    const c = out('10.112.0.6');
    expect(pass(r, c, false, T0, 1)).toBe(VERDICT_ACCEPT);
    expect(src(c)).toBe(`${MASQ}:5354`);
    // A zone 2 reply is translated by zone 2's entry; in zone 3 nothing matches.
    const back2 = udpBack();
    expect(pass(r, back2, true, T0 + 1, 2)).toBe(VERDICT_ACCEPT);
    expect(dst(back2)).toBe(`${HOST}:5353`);
    const back3 = udpBack();
    pass(r, back3, true, T0 + 1, 3);
    expect(dst(back3)).toBe(`${MASQ}:5353`);
  });
});
