/**
 * The L2 hold queue (hold.ts through the engine): packets to a peer whose MAC is being resolved
 * are held, ARP is retransmitted, the reply releases them in order; timeouts and overflow drop
 * and count as the kernel's neighbour queue does. All on a virtual clock (`now` passed in).
 */
import { describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GENEVE_PROTO_TEB, geneveProtocolType, writeGeneveHeader } from '../../src/geneve/header.js';
import type { HoldLimits } from '../../src/geneve/hold.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveDrop } from '../../src/geneve/reasons.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { icmpEcho } from '../packet/factory.js';
import { toHex } from '../util/hex.js';

const OUR_MAC = [0x02, 0x57, 0x0a, 0x50, 0x00, 0x01];
const PEER_MAC = [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f];
const OUR_IP = [10, 80, 0, 1];
const PEER_IP = [10, 80, 0, 2];
const BCAST = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
const ZERO = [0, 0, 0, 0, 0, 0];
const FROM = '192.168.0.20';
const VNI = 7;

const arp = (op: number, sha: number[], spa: number[], tha: number[], tpa: number[]): number[] => [
  0x00,
  0x01,
  0x08,
  0x00,
  6,
  4,
  0x00,
  op,
  ...sha,
  ...spa,
  ...tha,
  ...tpa,
];
const REQUEST = Buffer.from([...BCAST, ...OUR_MAC, 0x08, 0x06, ...arp(1, OUR_MAC, OUR_IP, ZERO, PEER_IP)]).toString(
  'hex',
);

function setup(hold: HoldLimits = {}) {
  const table = new GeneveTunnelTable();
  const t = table.add({
    vni: VNI,
    remoteUnderlay: FROM,
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l2',
  });
  return { t, engine: new GeneveEngine(table, { hold }), res: new GeneveResult() };
}

/** An echo request with sequence number `seq` (distinct bytes per packet). */
const ping = (seq: number) => icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', seq, headroom: GENEVE_MAX_HEADROOM });

/** The peer's ARP reply as a received datagram. */
function reply(): { buf: Uint8Array; len: number } {
  const frame = [...OUR_MAC, ...PEER_MAC, 0x08, 0x06, ...arp(2, PEER_MAC, PEER_IP, OUR_MAC, OUR_IP)];
  const buf = new Uint8Array(8 + frame.length);
  writeGeneveHeader(buf, 0, VNI, GENEVE_PROTO_TEB, 0, false, false);
  buf.set(frame, 8);
  return { buf, len: buf.length };
}

/** Everything poll has due at `now`: each item's verdict and, for Send, the inner packet (hex) and Ethernet header. */
function pollAll(engine: GeneveEngine, now: number, _res: GeneveResult, tunnel: GeneveTunnel) {
  let res: GeneveResult;
  const scratch = new Uint8Array(GENEVE_MAX_HEADROOM + 65536);
  res = new GeneveResult(); // as a port's own: nothing left over from encapsulate
  const out: { verdict: GeneveVerdict; eth: string; inner: string }[] = [];
  for (let i = 0; i < 1000; i++) {
    const v = engine.poll(scratch, GENEVE_MAX_HEADROOM, now, res);
    if (v === GeneveVerdict.Drop) {
      expect(res.reason).toBe(GeneveDrop.None);
      return out;
    }
    expect(geneveProtocolType(scratch, res.off)).toBe(GENEVE_PROTO_TEB);
    expect(res.tunnel).toBe(tunnel);
    out.push({
      verdict: v,
      eth: toHex(scratch, res.off + 8, 14),
      inner:
        v === GeneveVerdict.Send
          ? toHex(scratch, res.off + 22, res.len - 22)
          : toHex(scratch, res.off + 8, res.len - 8),
    });
  }
  throw new Error('poll never ran out');
}

describe('L2 hold queue', () => {
  it('holds packets while ARP resolves, retransmits every second, and sends them in order with the MAC once the reply comes', () => {
    const { t, engine, res } = setup();
    const pkts = [ping(1), ping(2), ping(3)];
    const inners = pkts.map((p) => toHex(p.buf, p.off, p.len));
    // The first packet's buffer carries the ARP request; it and the others are held.
    expect(engine.encapsulate(pkts[0]!.buf, pkts[0]!.off, pkts[0]!.len, t, 0, res)).toBe(GeneveVerdict.SendControl);
    expect(res.reason).toBe(GeneveDrop.None);
    expect(toHex(pkts[0]!.buf, res.off + 8, res.len - 8)).toBe(REQUEST);
    expect(engine.encapsulate(pkts[1]!.buf, pkts[1]!.off, pkts[1]!.len, t, 100, res)).toBe(GeneveVerdict.Held);
    expect(engine.encapsulate(pkts[2]!.buf, pkts[2]!.off, pkts[2]!.len, t, 200, res)).toBe(GeneveVerdict.Held);
    expect(engine.heldPackets).toBe(3);
    expect(engine.counters.arpHeld).toBe(3);
    expect(engine.counters.totalDrops()).toBe(0);
    // Nothing due before retrans_time; at it, the request again (and nothing else).
    expect(pollAll(engine, 999, res, t)).toEqual([]);
    expect(engine.holdDeadline(999)).toBe(1000);
    const again = pollAll(engine, 1000, res, t);
    expect(again.map((x) => x.verdict)).toEqual([GeneveVerdict.SendControl]);
    expect(again[0]!.inner).toBe(REQUEST);
    expect(engine.counters.arpRequestsSent).toBe(2);
    // The reply: the held packets leave in order, addressed to the peer's MAC.
    const r = reply();
    expect(engine.decapsulate(r.buf, 0, r.len, FROM, 1100, res)).toBe(GeneveVerdict.Consumed);
    expect(engine.holdDeadline(1100)).toBe(1100);
    const sent = pollAll(engine, 1100, res, t);
    expect(sent.map((x) => x.verdict)).toEqual([GeneveVerdict.Send, GeneveVerdict.Send, GeneveVerdict.Send]);
    expect(sent.map((x) => x.inner)).toEqual(inners);
    const eth = Buffer.from([...PEER_MAC, ...OUR_MAC, 0x08, 0x00]).toString('hex');
    for (const x of sent) expect(x.eth).toBe(eth);
    expect(engine.counters.arpHeldSent).toBe(3);
    expect(engine.counters.txPackets).toBe(3);
    expect(engine.heldPackets).toBe(0);
    expect(engine.holdPending).toBe(0);
    expect(engine.holdDeadline(1100)).toBe(Infinity);
    expect(engine.counters.totalDrops()).toBe(0);
    // Resolved: the next packet goes straight out.
    const p = ping(4);
    expect(engine.encapsulate(p.buf, p.off, p.len, t, 1200, res)).toBe(GeneveVerdict.Send);
  });

  it('resolve: a tunnel just pointed at a peer sends the ARP request at once with nothing held; a packet meanwhile waits behind it; a peer never answering costs no drop', () => {
    const { t, engine, res } = setup();
    expect(engine.resolve(t, 0)).toBe(true);
    expect(engine.resolve(t, 0)).toBe(false); // pending already
    expect(engine.holdDeadline(0)).toBe(0);
    const first = pollAll(engine, 0, res, t);
    expect(first.map((x) => x.verdict)).toEqual([GeneveVerdict.SendControl]);
    expect(first[0]!.inner).toBe(REQUEST);
    // A packet to send now is held without a second request (probe 1 is out).
    const p = ping(1);
    const inner = toHex(p.buf, p.off, p.len);
    expect(engine.encapsulate(p.buf, p.off, p.len, t, 10, res)).toBe(GeneveVerdict.Held);
    expect(engine.counters.arpRequestsSent).toBe(1);
    const r = reply();
    expect(engine.decapsulate(r.buf, 0, r.len, FROM, 20, res)).toBe(GeneveVerdict.Consumed);
    expect(pollAll(engine, 20, res, t).map((x) => x.inner)).toEqual([inner]);
    expect(engine.holdPending).toBe(0);
    expect(engine.resolve(t, 30)).toBe(false); // resolved
    // Unanswered: three probes a second apart, then given up with nothing dropped.
    const other = setup();
    expect(other.engine.resolve(other.t, 0)).toBe(true);
    let probes = 0;
    for (const now of [0, 1000, 2000, 3000]) probes += pollAll(other.engine, now, other.res, other.t).length;
    expect(probes).toBe(3);
    expect(other.engine.holdPending).toBe(0);
    expect(other.engine.counters.totalDrops()).toBe(0);
  });

  it('a packet sent after the reply but before poll waits behind the held ones (order kept)', () => {
    const { t, engine, res } = setup();
    const a = ping(1);
    const b = ping(2);
    const ia = toHex(a.buf, a.off, a.len);
    const ib = toHex(b.buf, b.off, b.len);
    engine.encapsulate(a.buf, a.off, a.len, t, 0, res);
    const r = reply();
    engine.decapsulate(r.buf, 0, r.len, FROM, 10, res);
    expect(engine.encapsulate(b.buf, b.off, b.len, t, 11, res)).toBe(GeneveVerdict.Held);
    expect(pollAll(engine, 12, res, t).map((x) => x.inner)).toEqual([ia, ib]);
  });

  it('times out after 3 probes one second apart: held packets dropped and counted, the next packet starts again', () => {
    const { t, engine, res } = setup();
    for (const [i, now] of [0, 300].entries()) {
      const p = ping(i);
      engine.encapsulate(p.buf, p.off, p.len, t, now, res);
    }
    expect(pollAll(engine, 1000, res, t).map((x) => x.verdict)).toEqual([GeneveVerdict.SendControl]);
    expect(pollAll(engine, 2000, res, t).map((x) => x.verdict)).toEqual([GeneveVerdict.SendControl]);
    expect(pollAll(engine, 2999, res, t)).toEqual([]);
    expect(engine.counters.drops[GeneveDrop.ArpTimeout]).toBe(0);
    expect(pollAll(engine, 3000, res, t)).toEqual([]);
    expect(engine.counters.drops[GeneveDrop.ArpTimeout]).toBe(2);
    expect(t.drops).toBe(2);
    expect(engine.counters.arpRequestsSent).toBe(3);
    expect(engine.heldPackets).toBe(0);
    expect(engine.holdPending).toBe(0);
    const p = ping(9);
    expect(engine.encapsulate(p.buf, p.off, p.len, t, 3001, res)).toBe(GeneveVerdict.SendControl);
    expect(engine.holdPending).toBe(1);
  });

  it('a full queue drops its oldest packets (by count and by bytes), counted as overflow', () => {
    const { t, engine, res } = setup({ queuePackets: 3 });
    const pkts = [1, 2, 3, 4, 5].map(ping);
    for (const p of pkts) engine.encapsulate(p.buf, p.off, p.len, t, 0, res);
    expect(engine.counters.drops[GeneveDrop.ArpHoldOverflow]).toBe(2);
    expect(engine.heldPackets).toBe(3);
    const r = reply();
    engine.decapsulate(r.buf, 0, r.len, FROM, 1, res);
    const fresh = [3, 4, 5].map((s) => {
      const p = ping(s);
      return toHex(p.buf, p.off, p.len);
    });
    expect(pollAll(engine, 1, res, t).map((x) => x.inner)).toEqual(fresh);

    const len = ping(1).len;
    const s = setup({ queueBytes: 2 * len + 1 });
    for (const p of [1, 2, 3].map(ping)) s.engine.encapsulate(p.buf, p.off, p.len, s.t, 0, s.res);
    expect(s.engine.counters.drops[GeneveDrop.ArpHoldOverflow]).toBe(1);
    expect(s.engine.heldPackets).toBe(2);
  });

  it('defaults are the kernel neighbour defaults', () => {
    const { engine } = setup();
    const h = (engine as unknown as { arp: { hold: Record<string, number> } }).arp.hold;
    expect([h.queueBytes, h.queuePackets, h.retransMs, h.probes]).toEqual([212992, 101, 1000, 3]);
  });
});
