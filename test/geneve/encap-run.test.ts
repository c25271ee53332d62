/**
 * Encapsulating the segments of a super-packet once per run (GeneveEngine.encapsulateNext,
 * with the previous tunnel, flowhash sameFlowKey) must give exactly the datagrams the
 * per-packet path gives: same buffer bytes, results, source ports and counters, over random
 * runs of segments, flows that change mid-run, damaged packets, and L3/L2 tunnels with options.
 */
import { describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import { flowSourcePort, sameFlowKey } from '../../src/geneve/flowhash.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import type { GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { Prng } from '../util/prng.js';

const H = GENEVE_MAX_HEADROOM;
const STRIDE = H + 1500 + 64;

/** Tunnels in every mode: L3 without and with options (one critical), L2 with a static MAC, L2 unresolved (ARP), an IPv6 underlay. */
const SPECS: GeneveTunnelSpec[] = [
  { vni: 1, remoteUnderlay: '192.0.2.2', localInternalAddress: '10.80.0.1', remoteInternalAddress: '10.80.0.2' },
  {
    vni: 2,
    remoteUnderlay: '192.0.2.3',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.3',
    options: new Uint8Array([1, 2, 5, 1, 9, 8, 7, 6]),
  },
  {
    vni: 3,
    remoteUnderlay: '192.0.2.4',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.4',
    options: new Uint8Array([1, 2, 0x85, 2, 1, 2, 3, 4, 5, 6, 7, 8]),
  },
  {
    vni: 4,
    remoteUnderlay: '192.0.2.5',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.5',
    mode: 'l2',
    remoteMac: '02:00:00:00:00:05',
  },
  {
    vni: 5,
    remoteUnderlay: '192.0.2.6',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.6',
    mode: 'l2',
    options: new Uint8Array([1, 2, 3, 1, 0, 0, 0, 1]),
  },
  {
    vni: 6,
    remoteUnderlay: '2001:db8::7',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.7',
    mode: 'l2',
    remoteMac: '02:00:00:00:00:07',
  },
  // IPv6 internal addressing (the next hops of the IPv6 pod routes).
  {
    vni: 7,
    remoteUnderlay: '192.0.2.8',
    localInternalAddress: 'fd80::1',
    remoteInternalAddress: 'fd80::8',
    options: new Uint8Array([1, 2, 5, 1, 9, 8, 7, 6]),
  },
  {
    vni: 8,
    remoteUnderlay: '2001:db8::9',
    localInternalAddress: 'fd80::1',
    remoteInternalAddress: 'fd80::9',
    mode: 'l2',
    remoteMac: '02:00:00:00:00:09',
  },
];
const V4_TUNNELS = 6;

function makeTable(): GeneveTunnelTable {
  const table = new GeneveTunnelTable();
  for (const s of SPECS) table.add(s);
  for (let k = 0; k < V4_TUNNELS; k++) {
    table.addPodRoute(`10.${10 + k}.0.0/16`, SPECS[k]!.remoteInternalAddress as string);
    table.addPodRoute(`fd00:${10 + k}::/32`, SPECS[V4_TUNNELS + (k & 1)]!.remoteInternalAddress as string);
  }
  return table; // 10.99.x.x / fd00:99:: have no route
}

interface Flow {
  v6: boolean;
  src: string;
  dst: string;
  kind: number;
  sport: number;
  dport: number;
}

function randomFlow(rng: Prng): Flow {
  const v6 = rng.int(0, 2) === 0;
  const net = rng.int(0, 6) === 6 ? 99 : 10 + rng.int(0, V4_TUNNELS - 1);
  return {
    v6,
    src: v6 ? `fd00:1::${rng.int(1, 9)}` : `10.1.0.${rng.int(1, 9)}`,
    dst: v6 ? `fd00:${net}::${rng.int(1, 4)}` : `10.${net}.0.${rng.int(1, 4)}`,
    kind: rng.int(0, 4),
    sport: rng.int(1, 4),
    dport: rng.int(1, 4),
  };
}

function build(f: Flow, payload: number, rng: Prng): Built {
  const common = { src: f.src, dst: f.dst, payload: rng.bytes(payload), headroom: 0 };
  return f.kind === 0
    ? icmpEcho(common)
    : f.kind === 1
      ? udpPacket({ ...common, sport: f.sport, dport: f.dport })
      : tcpPacket({ ...common, sport: f.sport, dport: f.dport, seq: rng.nextU32() });
}

/** A batch of packets at STRIDE: runs of one flow's segments (equal sizes, shorter last), some damaged, runs of several flows interleaved. */
function makeBatch(rng: Prng, n: number): { buf: Uint8Array; offs: Uint32Array; lens: Uint32Array } {
  const buf = new Uint8Array(n * STRIDE);
  const offs = new Uint32Array(n);
  const lens = new Uint32Array(n);
  let i = 0;
  const flows = [randomFlow(rng), randomFlow(rng)];
  while (i < n) {
    if (rng.int(0, 3) === 0) flows[rng.int(0, 1)] = randomFlow(rng);
    const f = flows[rng.int(0, 1)]!;
    const seg = rng.int(0, 1300);
    const runLen = Math.min(n - i, rng.int(1, 50));
    for (let k = 0; k < runLen; k++, i++) {
      const last = k === runLen - 1;
      const b = build(f, last ? rng.int(0, seg) : seg, rng);
      const off = i * STRIDE + H;
      buf.set(b.buf.subarray(b.off, b.off + b.len), off);
      let len = b.len;
      // Damage: a field the hash or the lookup reads, or a field they do not read.
      switch (rng.int(0, 24)) {
        case 0:
          buf[off + (f.v6 ? 39 : 19)]! ^= 1;
          break; // destination
        case 1:
          buf[off + (f.v6 ? 23 : 15)]! ^= 1;
          break; // source
        case 2:
          if (!f.v6) buf[off + 6]! ^= 0x20;
          break; // IPv4 MF: a fragment hashes without ports
        case 3:
          buf[off + (f.v6 ? 40 : 20)]! ^= 1;
          break; // source port (ICMP: type)
        case 4:
          len = rng.int(0, f.v6 ? 45 : 25);
          break; // too short for headers or ports
        case 5:
          buf[off]! ^= rng.int(1, 0xff);
          break; // version / IHL
        case 6:
          buf[off + (f.v6 ? 6 : 9)]! = rng.int(0, 255);
          break; // protocol
        case 7:
          buf[off + (f.v6 ? 7 : 8)]! ^= 0xff;
          break; // TTL: not read
        default:
          break;
      }
      offs[i] = off;
      lens[i] = len;
    }
  }
  return { buf, offs, lens };
}

interface Outcome {
  verdict: number;
  off: number;
  len: number;
  srcPort: number;
  tunnel: string | null;
}

/** The per-packet reference: lookupSend and encapsulate for every packet. */
function perPacket(
  engine: GeneveEngine,
  table: GeneveTunnelTable,
  buf: Uint8Array,
  offs: Uint32Array,
  lens: Uint32Array,
): Outcome[] {
  const res = new GeneveResult();
  const out: Outcome[] = [];
  for (let i = 0; i < offs.length; i++) {
    const t = table.lookupSend(buf, offs[i]!, lens[i]!);
    if (t === undefined) {
      out.push({ verdict: -1, off: 0, len: 0, srcPort: 0, tunnel: null });
      continue;
    }
    const v = engine.encapsulate(buf, offs[i]!, lens[i]!, t, 0, res);
    out.push(
      v === GeneveVerdict.Drop
        ? { verdict: v, off: 0, len: 0, srcPort: 0, tunnel: t.name }
        : { verdict: v, off: res.off, len: res.len, srcPort: res.srcPort, tunnel: t.name },
    );
  }
  return out;
}

/** As GenevePort.sendBatch: encapsulateNext with the previous packet's tunnel (no lookup), else lookupSend and encapsulate. */
function perRun(
  engine: GeneveEngine,
  table: GeneveTunnelTable,
  buf: Uint8Array,
  offs: Uint32Array,
  lens: Uint32Array,
): { out: Outcome[]; reused: number } {
  const res = new GeneveResult();
  res.verdict = GeneveVerdict.Drop;
  const out: Outcome[] = [];
  let reused = 0;
  for (let i = 0; i < offs.length; i++) {
    const prev: GeneveTunnel | null = res.tunnel;
    if (prev !== null && engine.encapsulateNext(buf, offs[i]!, lens[i]!, prev, res)) {
      reused++;
      out.push({ verdict: GeneveVerdict.Send, off: res.off, len: res.len, srcPort: res.srcPort, tunnel: prev.name });
      continue;
    }
    const t = table.lookupSend(buf, offs[i]!, lens[i]!);
    if (t === undefined) {
      out.push({ verdict: -1, off: 0, len: 0, srcPort: 0, tunnel: null });
      continue;
    }
    const v = engine.encapsulate(buf, offs[i]!, lens[i]!, t, 0, res);
    out.push(
      v === GeneveVerdict.Drop
        ? { verdict: v, off: 0, len: 0, srcPort: 0, tunnel: t.name }
        : { verdict: v, off: res.off, len: res.len, srcPort: res.srcPort, tunnel: t.name },
    );
  }
  return { out, reused };
}

function countersOf(engine: GeneveEngine, table: GeneveTunnelTable): number[][] {
  return [
    Array.from(engine.counters.values),
    Array.from(engine.counters.drops),
    ...[...table.tunnels()].map((t) => Array.from(t.stats)),
  ];
}

describe('Geneve encapsulation once per run of segments', () => {
  it('gives byte-identical datagrams, results and counters to per-packet encapsulation', () => {
    const rng = new Prng(0x5e9);
    let reused = 0;
    let total = 0;
    let control = 0;
    for (let round = 0; round < 60; round++) {
      const { buf, offs, lens } = makeBatch(rng, rng.int(1, 300));
      const a = buf.slice();
      const tA = makeTable();
      const tB = makeTable();
      const eA = new GeneveEngine(tA, { hashSeed: round });
      const eB = new GeneveEngine(tB, { hashSeed: round });
      const ref = perPacket(eA, tA, a, offs, lens);
      const got = perRun(eB, tB, buf, offs, lens);
      expect(got.out).toEqual(ref);
      expect(Buffer.compare(buf, a)).toBe(0);
      expect(countersOf(eB, tB)).toEqual(countersOf(eA, tA));
      reused += got.reused;
      total += offs.length;
      control += ref.filter((o) => o.verdict === GeneveVerdict.SendControl).length;
    }
    // The shortcut is taken for most segments, and not for the rest (flow changes, damage, ARP).
    expect(reused).toBeGreaterThan(total / 3);
    expect(reused).toBeLessThan(total * 0.95);
    expect(control).toBeGreaterThan(0);
  });

  it('sameFlowKey implies the same source port and the same tunnel', () => {
    const rng = new Prng(77);
    const table = makeTable();
    let same = 0;
    let differ = 0;
    for (let round = 0; round < 40; round++) {
      const { buf, offs, lens } = makeBatch(rng, 100);
      for (let i = 1; i < offs.length; i++) {
        const a = offs[i - 1]!;
        const b = offs[i]!;
        if (sameFlowKey(buf, a, lens[i - 1]!, b, lens[i]!)) {
          same++;
          expect(flowSourcePort(buf, b, lens[i]!, round)).toBe(flowSourcePort(buf, a, lens[i - 1]!, round));
          expect(table.lookupSend(buf, b, lens[i]!)).toBe(table.lookupSend(buf, a, lens[i - 1]!));
        } else if (flowSourcePort(buf, b, lens[i]!, round) !== flowSourcePort(buf, a, lens[i - 1]!, round)) differ++;
      }
    }
    expect(same).toBeGreaterThan(1000);
    expect(differ).toBeGreaterThan(100);
  });

  it('refuses without a previous Send, for another tunnel, or for overlapping headers', () => {
    const table = makeTable();
    const engine = new GeneveEngine(table);
    const res = new GeneveResult();
    const t = [...table.tunnels()][0]!;
    const b = udpPacket({
      src: '10.1.0.1',
      dst: '10.10.0.1',
      sport: 1,
      dport: 2,
      headroom: H,
      payload: new Uint8Array(100),
    });
    const buf = new Uint8Array(4 * STRIDE);
    buf.set(b.buf.subarray(b.off, b.off + b.len), H);
    buf.set(b.buf.subarray(b.off, b.off + b.len), STRIDE + H);
    expect(engine.encapsulateNext(buf, STRIDE + H, b.len, t, res)).toBe(false); // fresh result: Drop
    expect(engine.encapsulate(buf, H, b.len, t, 0, res)).toBe(GeneveVerdict.Send);
    expect(engine.encapsulateNext(buf, STRIDE + H, b.len, [...table.tunnels()][1]!, res)).toBe(false);
    expect(engine.encapsulateNext(buf, H + 4, b.len - 4, t, res)).toBe(false); // header would overlap the previous one
    const before = engine.counters.values.slice();
    expect(engine.encapsulateNext(buf, STRIDE + H, b.len, t, res)).toBe(true);
    expect(res.off).toBe(STRIDE + H - 8);
    expect(engine.counters.values[0]).toBe(before[0]! + 1);
  });
});
