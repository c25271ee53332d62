/**
 * L2 mode (protocol type 0x6558, inner Ethernet), as Liqo's kernel geneve devices speak it: ARP
 * for the tunnel's internal addresses, peer MAC learning, Ethernet added/stripped around IP.
 * Expected frames are written out byte by byte here (RFC 826 layout), not with the code under test.
 */
import { describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import {
  GENEVE_PROTO_TEB,
  geneveOptionsLen,
  geneveProtocolType,
  geneveVni,
  writeGeneveHeader,
  writeGeneveOption,
} from '../../src/geneve/header.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveDrop } from '../../src/geneve/reasons.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { icmpEcho, udpPacket } from '../packet/factory.js';
import { toHex } from '../util/hex.js';

const OUR_MAC = [0x02, 0x57, 0x0a, 0x50, 0x00, 0x01]; // default for local internal 10.80.0.1
const PEER_MAC = [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f];
const OUR_IP = [10, 80, 0, 1];
const PEER_IP = [10, 80, 0, 2];
const FROM = '192.168.0.20';
const VNI = 4;

function setup(extra: Partial<GeneveTunnelSpec> = {}, arpRetryMs = 1000) {
  const table = new GeneveTunnelTable();
  const t = table.add({
    vni: VNI,
    remoteUnderlay: FROM,
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l2',
    ...extra,
  });
  return { table, t, engine: new GeneveEngine(table, { arpRetryMs }), res: new GeneveResult() };
}

/** A Geneve(TEB) datagram carrying `frame`, with `tailroom` spare bytes after it. */
function datagram(
  frame: number[],
  tailroom = 0,
  options: Uint8Array = new Uint8Array(0),
): { buf: Uint8Array; len: number } {
  const buf = new Uint8Array(8 + options.length + frame.length + tailroom);
  writeGeneveHeader(buf, 0, VNI, GENEVE_PROTO_TEB, options.length, false, false);
  buf.set(options, 8);
  buf.set(frame, 8 + options.length);
  return { buf, len: 8 + options.length + frame.length };
}

function arp(op: number, sha: number[], spa: number[], tha: number[], tpa: number[]): number[] {
  return [0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, op, ...sha, ...spa, ...tha, ...tpa];
}

const BCAST = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
const ZERO = [0, 0, 0, 0, 0, 0];

describe('L2 mode: ARP', () => {
  it('answers an ARP request for our internal address with a correct reply and learns the asker', () => {
    const { t, engine, res } = setup();
    const request = [...BCAST, ...PEER_MAC, 0x08, 0x06, ...arp(1, PEER_MAC, PEER_IP, ZERO, OUR_IP)];
    const d = datagram(request);
    expect(engine.decapsulate(d.buf, 0, d.len, FROM, 0, res)).toBe(GeneveVerdict.SendControl);
    expect(res.tunnel).toBe(t);
    expect(res.off).toBe(0);
    expect(res.srcPort).toBeGreaterThanOrEqual(49152);
    const reply = [...PEER_MAC, ...OUR_MAC, 0x08, 0x06, ...arp(2, OUR_MAC, OUR_IP, PEER_MAC, PEER_IP)];
    expect(res.len).toBe(8 + reply.length);
    expect(geneveVni(d.buf, res.off)).toBe(VNI);
    expect(geneveProtocolType(d.buf, res.off)).toBe(GENEVE_PROTO_TEB);
    expect(toHex(d.buf, res.off + 8, reply.length)).toBe(Buffer.from(reply).toString('hex'));
    expect(t.remoteMacKnown).toBe(true);
    expect(Array.from(t.remoteMac)).toEqual(PEER_MAC);
    expect(engine.counters.arpRepliesSent).toBe(1);
    expect(engine.counters.macLearned).toBe(1);
  });

  it("answers the asker at the addresses in its request, even when it is not the tunnel's remote internal address", () => {
    const { engine, res } = setup();
    const askerMac = [0x0a, 0, 0, 0, 0, 0x50];
    const askerIp = [10, 80, 0, 50];
    const d = datagram([...BCAST, ...askerMac, 0x08, 0x06, ...arp(1, askerMac, askerIp, ZERO, OUR_IP)]);
    expect(engine.decapsulate(d.buf, 0, d.len, FROM, 0, res)).toBe(GeneveVerdict.SendControl);
    const reply = [...askerMac, ...OUR_MAC, 0x08, 0x06, ...arp(2, OUR_MAC, OUR_IP, askerMac, askerIp)];
    expect(toHex(d.buf, res.off + 8, res.len - 8)).toBe(Buffer.from(reply).toString('hex'));
  });

  it('builds the reply with our own header (tunnel options) even when the request had none, or drops for lack of room', () => {
    const opts = new Uint8Array(12);
    writeGeneveOption(opts, 0, 0x0101, 0x01, new Uint8Array(8), 0, 8);
    const { engine, res } = setup({ options: opts });
    const request = [...BCAST, ...PEER_MAC, 0x08, 0x06, ...arp(1, PEER_MAC, PEER_IP, ZERO, OUR_IP)];
    const tight = datagram(request);
    expect(engine.decapsulate(tight.buf, 0, tight.len, FROM, 0, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.NoRoom);
    const roomy = datagram(request, 12);
    expect(engine.decapsulate(roomy.buf, 0, roomy.len, FROM, 0, res)).toBe(GeneveVerdict.SendControl);
    expect(geneveOptionsLen(roomy.buf, 0)).toBe(12);
    expect(roomy.buf.subarray(8, 20)).toEqual(opts);
    const reply = [...PEER_MAC, ...OUR_MAC, 0x08, 0x06, ...arp(2, OUR_MAC, OUR_IP, PEER_MAC, PEER_IP)];
    expect(toHex(roomy.buf, 20, res.len - 20)).toBe(Buffer.from(reply).toString('hex'));
  });

  it('replies even to a request that arrives with options (the reply starts where the datagram did)', () => {
    const { engine, res } = setup();
    const inOpts = new Uint8Array(8);
    writeGeneveOption(inOpts, 0, 0x0101, 0x02, new Uint8Array(4), 0, 4);
    const d = datagram([...BCAST, ...PEER_MAC, 0x08, 0x06, ...arp(1, PEER_MAC, PEER_IP, ZERO, OUR_IP)], 0, inOpts);
    expect(engine.decapsulate(d.buf, 0, d.len, FROM, 0, res)).toBe(GeneveVerdict.SendControl);
    expect(res.off).toBe(0);
    expect(geneveOptionsLen(d.buf, 0)).toBe(0);
    expect(toHex(d.buf, 8 + 28, 4)).toBe('0a500001'); // ARP sender protocol address = ours
  });

  it('learns from replies and gratuitous ARP, drops requests for other addresses and malformed ARP', () => {
    const { t, engine, res } = setup();
    const reply = datagram([...OUR_MAC, ...PEER_MAC, 0x08, 0x06, ...arp(2, PEER_MAC, PEER_IP, OUR_MAC, OUR_IP)]);
    expect(engine.decapsulate(reply.buf, 0, reply.len, FROM, 0, res)).toBe(GeneveVerdict.Consumed);
    expect(Array.from(t.remoteMac)).toEqual(PEER_MAC);
    expect(engine.counters.arpRepliesReceived).toBe(1);
    const newMac = [0x0a, 0, 0, 0, 0, 0x99];
    const garp = datagram([...BCAST, ...newMac, 0x08, 0x06, ...arp(1, newMac, PEER_IP, ZERO, PEER_IP)]);
    expect(engine.decapsulate(garp.buf, 0, garp.len, FROM, 0, res)).toBe(GeneveVerdict.Consumed);
    expect(Array.from(t.remoteMac)).toEqual(newMac);
    expect(engine.counters.macChanged).toBe(1);
    const other = datagram([...BCAST, ...newMac, 0x08, 0x06, ...arp(1, newMac, PEER_IP, ZERO, [10, 80, 0, 77])]);
    expect(engine.decapsulate(other.buf, 0, other.len, FROM, 0, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.ArpNotForUs);
    const bad = [...BCAST, ...newMac, 0x08, 0x06, ...arp(1, newMac, PEER_IP, ZERO, OUR_IP)];
    bad[14 + 4] = 8; // hardware address length 8
    const b = datagram(bad);
    expect(engine.decapsulate(b.buf, 0, b.len, FROM, 0, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.ArpMalformed);
    const short = datagram([...BCAST, ...newMac, 0x08, 0x06, ...arp(1, newMac, PEER_IP, ZERO, OUR_IP).slice(0, 27)]);
    expect(engine.decapsulate(short.buf, 0, short.len, FROM, 0, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.ArpMalformed);
  });

  it('a configured peer MAC is never overwritten by learning', () => {
    const { t, engine, res } = setup({ remoteMac: '02:00:00:00:00:42' });
    const garp = datagram([...BCAST, ...PEER_MAC, 0x08, 0x06, ...arp(1, PEER_MAC, PEER_IP, ZERO, PEER_IP)]);
    engine.decapsulate(garp.buf, 0, garp.len, FROM, 0, res);
    expect(Array.from(t.remoteMac)).toEqual([2, 0, 0, 0, 0, 0x42]);
  });
});

describe('L2 mode: sending before and after the peer MAC is known', () => {
  it('without room in the hold queue: drops and emits a rate-limited ARP request until the MAC is learned, then wraps IP in Ethernet', () => {
    const { table, t, res } = setup({}, 1000);
    const engine = new GeneveEngine(table, { arpRetryMs: 1000, hold: { maxNeighbours: 1 } });
    // Another unresolved neighbour takes the one pending place (its packet is held, not dropped).
    const other = table.add({
      vni: VNI + 1,
      remoteUnderlay: '192.168.0.21',
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: '10.80.0.3',
      mode: 'l2',
    });
    const o = icmpEcho({ src: '10.0.0.1', dst: '10.80.0.3', headroom: GENEVE_MAX_HEADROOM });
    expect(engine.encapsulate(o.buf, o.off, o.len, other, 5000, res)).toBe(GeneveVerdict.SendControl);
    expect(res.reason).toBe(GeneveDrop.None);
    expect(engine.heldPackets).toBe(1);
    const p = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM });
    expect(engine.encapsulate(p.buf, p.off, p.len, t, 5000, res)).toBe(GeneveVerdict.SendControl);
    expect(res.reason).toBe(GeneveDrop.NoPeerMac);
    const request = [...BCAST, ...OUR_MAC, 0x08, 0x06, ...arp(1, OUR_MAC, OUR_IP, ZERO, PEER_IP)];
    expect(res.len).toBe(8 + request.length);
    expect(res.off).toBe(p.off - 14 - 8);
    expect(geneveProtocolType(p.buf, res.off)).toBe(GENEVE_PROTO_TEB);
    expect(toHex(p.buf, res.off + 8, request.length)).toBe(Buffer.from(request).toString('hex'));
    // Within arpRetryMs: a plain counted drop.
    const q = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM });
    expect(engine.encapsulate(q.buf, q.off, q.len, t, 5999, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.NoPeerMac);
    expect(engine.encapsulate(q.buf, q.off, q.len, t, 6000, res)).toBe(GeneveVerdict.SendControl);
    expect(engine.counters.drops[GeneveDrop.NoPeerMac]).toBe(3);
    expect(engine.counters.arpRequestsSent).toBe(3);
    expect(engine.counters.txPackets).toBe(0);

    // The peer answers; now IP goes out in Ethernet addressed to it.
    const reply = datagram([...OUR_MAC, ...PEER_MAC, 0x08, 0x06, ...arp(2, PEER_MAC, PEER_IP, OUR_MAC, OUR_IP)]);
    expect(engine.decapsulate(reply.buf, 0, reply.len, FROM, 6001, res)).toBe(GeneveVerdict.Consumed);
    for (const pkt of [
      icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM }),
      udpPacket({ src: 'fd00::1', dst: 'fd00:1::1', sport: 1, dport: 2, headroom: GENEVE_MAX_HEADROOM }),
    ]) {
      const inner = toHex(pkt.buf, pkt.off, pkt.len);
      expect(engine.encapsulate(pkt.buf, pkt.off, pkt.len, t, 6002, res)).toBe(GeneveVerdict.Send);
      expect(res.off).toBe(pkt.off - 14 - 8);
      expect(res.len).toBe(pkt.len + 22);
      const type = pkt.buf[pkt.off]! >>> 4 === 4 ? '0800' : '86dd';
      expect(toHex(pkt.buf, res.off + 8, 14)).toBe(Buffer.from([...PEER_MAC, ...OUR_MAC]).toString('hex') + type);
      expect(toHex(pkt.buf, res.off + 22, pkt.len)).toBe(inner);
    }
  });

  it('an IPv6-only internal addressing cannot ARP: plain drop', () => {
    const table = new GeneveTunnelTable();
    const t = table.add({
      vni: 1,
      remoteUnderlay: FROM,
      localInternalAddress: 'fd80::1',
      remoteInternalAddress: 'fd80::2',
      mode: 'l2',
    });
    const engine = new GeneveEngine(table);
    const res = new GeneveResult();
    const p = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM });
    expect(engine.encapsulate(p.buf, p.off, p.len, t, 0, res)).toBe(GeneveVerdict.Drop);
    expect(engine.counters.arpRequestsSent).toBe(0);
  });
});

describe('L2 mode: receiving frames', () => {
  const ipFrame = (dst: number[], src: number[], type = [0x08, 0x00]) => {
    const p = icmpEcho({ src: '10.1.0.1', dst: '10.0.0.1' });
    return { frame: [...dst, ...src, ...type, ...p.buf], inner: toHex(p.buf) };
  };

  it('unwraps IP addressed to our MAC (or broadcast/multicast) and learns the sender', () => {
    const { t, engine, res } = setup();
    const f = ipFrame(OUR_MAC, PEER_MAC);
    const d = datagram(f.frame, 9);
    expect(engine.decapsulate(d.buf, 0, d.len, FROM, 0, res)).toBe(GeneveVerdict.Deliver);
    expect(res.off).toBe(8 + 14);
    expect(toHex(d.buf, res.off, res.len)).toBe(f.inner);
    expect(res.innerProtocol).toBe(0x0800);
    expect(Array.from(t.remoteMac)).toEqual(PEER_MAC);
    for (const dst of [BCAST, [0x01, 0x00, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1]]) {
      const g = datagram(ipFrame(dst, PEER_MAC).frame);
      expect(engine.decapsulate(g.buf, 0, g.len, FROM, 0, res)).toBe(GeneveVerdict.Deliver);
    }
    const v6 = udpPacket({ src: 'fd00:1::1', dst: 'fd00::1', sport: 1, dport: 2 });
    const h = datagram([...OUR_MAC, ...PEER_MAC, 0x86, 0xdd, ...v6.buf]);
    expect(engine.decapsulate(h.buf, 0, h.len, FROM, 0, res)).toBe(GeneveVerdict.Deliver);
    expect(res.innerProtocol).toBe(0x86dd);
    expect(toHex(h.buf, res.off, res.len)).toBe(toHex(v6.buf));
    expect(t.rxPackets).toBe(5);
  });

  it('drops frames for another unicast MAC, bad sources, other EtherTypes, short frames and mismatched inner IP', () => {
    const { t, engine, res } = setup();
    const cases: [number[], GeneveDrop][] = [
      [ipFrame([0x02, 0, 0, 0, 0, 0x77], PEER_MAC).frame, GeneveDrop.NotForUs],
      [ipFrame(OUR_MAC, [0x01, 0, 0, 0, 0, 1]).frame, GeneveDrop.InnerMalformed],
      [ipFrame(OUR_MAC, ZERO).frame, GeneveDrop.InnerMalformed],
      [ipFrame(OUR_MAC, PEER_MAC, [0x81, 0x00]).frame, GeneveDrop.UnsupportedEthertype],
      [ipFrame(OUR_MAC, PEER_MAC, [0x86, 0xdd]).frame, GeneveDrop.InnerMalformed],
      [[...OUR_MAC, ...PEER_MAC, 0x08], GeneveDrop.InnerMalformed],
    ];
    for (const [frame, reason] of cases) {
      const d = datagram(frame);
      expect(engine.decapsulate(d.buf, 0, d.len, FROM, 0, res)).toBe(GeneveVerdict.Drop);
      expect(res.reason).toBe(reason);
    }
    expect(t.remoteMacKnown).toBe(false); // nothing was learned from rejected frames
    expect(t.drops).toBe(cases.length);
  });
});
