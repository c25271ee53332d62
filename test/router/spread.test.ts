/**
 * The flow spread over a peer's tunnels (src/router/spread.ts): a symmetric 5-tuple hash (a flow
 * and its reply on one tunnel, ICMP echo by identifier, fragments by addresses), tunnel weights
 * respected over many flows, and a tunnel taken out and put back by the connection check.
 */
import { describe, expect, it } from 'vitest';
import { IpView, IP_OK, parseIp } from '../../src/packet/ip-view.js';
import { IPV4_FLAG_MF } from '../../src/packet/ipv4.js';
import { TunnelSpread, symmetricFlowHash } from '../../src/router/spread.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { Prng } from '../util/prng.js';

const v = new IpView();
function hashOf(p: Built): number {
  expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
  return symmetricFlowHash(p.buf, v);
}

function addr(rng: Prng, net: string): string {
  return `${net}.${rng.int(0, 255)}.${rng.int(1, 254)}`;
}

/** `n` random TCP/UDP flows between 10.0/16 and 10.71/16 (seeded). */
function flows(n: number, seed: number): Built[] {
  const rng = new Prng(seed);
  const out: Built[] = [];
  for (let i = 0; i < n; i++) {
    const spec = {
      src: addr(rng, '10.0'),
      dst: addr(rng, '10.71'),
      sport: rng.int(1024, 65535),
      dport: rng.int(1, 65535),
    };
    out.push(i % 2 === 0 ? tcpPacket(spec) : udpPacket(spec));
  }
  return out;
}

describe('symmetricFlowHash', () => {
  it('is deterministic and the same for a flow and its reply (TCP, UDP, IPv6)', () => {
    const a = { src: '10.0.1.5', dst: '10.71.2.9', sport: 40000, dport: 80 };
    const back = { src: a.dst, dst: a.src, sport: a.dport, dport: a.sport };
    expect(hashOf(tcpPacket(a))).toBe(hashOf(tcpPacket(a)));
    expect(hashOf(tcpPacket(back))).toBe(hashOf(tcpPacket(a)));
    expect(hashOf(udpPacket(back))).toBe(hashOf(udpPacket(a)));
    // Protocol and ports are part of the flow.
    expect(hashOf(udpPacket(a))).not.toBe(hashOf(tcpPacket(a)));
    expect(hashOf(tcpPacket({ ...a, sport: 40001 }))).not.toBe(hashOf(tcpPacket(a)));
    const v6 = { src: 'fd00::1', dst: 'fd71::2', sport: 5000, dport: 443 };
    expect(hashOf(tcpPacket({ src: v6.dst, dst: v6.src, sport: v6.dport, dport: v6.sport }))).toBe(
      hashOf(tcpPacket(v6)),
    );
  });

  it('ICMP echo: request and reply by addresses and identifier; another identifier is another flow', () => {
    const req = icmpEcho({ src: '10.0.1.5', dst: '10.71.2.9', ident: 77, seq: 1 });
    const rep = icmpEcho({ src: '10.71.2.9', dst: '10.0.1.5', ident: 77, seq: 1, type: 0 });
    const req2 = icmpEcho({ src: '10.0.1.5', dst: '10.71.2.9', ident: 77, seq: 2 });
    expect(hashOf(rep)).toBe(hashOf(req));
    expect(hashOf(req2)).toBe(hashOf(req));
    const ids = new Set<number>();
    for (let id = 0; id < 64; id++) ids.add(hashOf(icmpEcho({ src: '10.0.1.5', dst: '10.71.2.9', ident: id })) % 3);
    expect(ids.size).toBe(3);
  });

  it('IPv4 fragments of one datagram hash alike (addresses and protocol only)', () => {
    const first = udpPacket({ src: '10.0.1.5', dst: '10.71.2.9', sport: 1111, dport: 2222 });
    const later = udpPacket({ src: '10.0.1.5', dst: '10.71.2.9', sport: 3333, dport: 4444 });
    // MF on the first, an offset on the later one (whose "ports" are payload bytes).
    first.buf[first.off + 6] = IPV4_FLAG_MF >>> 8;
    later.buf[later.off + 6] = 0;
    later.buf[later.off + 7] = 185;
    expect(hashOf(later)).toBe(hashOf(first));
  });
});

describe('TunnelSpread', () => {
  it('equal weights: every tunnel carries about a third of 30000 flows, and a flow always the same one', () => {
    const s = new TunnelSpread(['t0', 't1', 't2']);
    const counts = [0, 0, 0];
    const pkts = flows(30000, 1);
    const picked = pkts.map((p) => s.pick(hashOf(p)));
    for (const i of picked) counts[i]!++;
    for (const c of counts) expect(Math.abs(c - 10000)).toBeLessThan(600);
    // Same decision from a fresh spread (the other gateway computes the same).
    const s2 = new TunnelSpread(['x', 'y', 'z']);
    expect(pkts.slice(0, 500).map((p) => s2.pick(hashOf(p)))).toEqual(picked.slice(0, 500));
  });

  it('weights (Liqo nextHops, kernel weight = weight + 1) are respected over many flows', () => {
    const s = new TunnelSpread(['t0', 't1', 't2']);
    s.setWeights([0, 1, 2]); // kernel 1 : 2 : 3
    expect([s.weight(0), s.weight(1), s.weight(2)]).toEqual([1, 2, 3]);
    const counts = [0, 0, 0];
    for (const p of flows(60000, 2)) counts[s.pick(hashOf(p))]!++;
    expect(Math.abs(counts[0]! - 10000)).toBeLessThan(700);
    expect(Math.abs(counts[1]! - 20000)).toBeLessThan(900);
    expect(Math.abs(counts[2]! - 30000)).toBeLessThan(900);
    // A tunnel no next hop names carries nothing.
    s.setWeights([5, undefined, 5]);
    for (const p of flows(2000, 3)) expect(s.pick(hashOf(p))).not.toBe(1);
    expect(() => s.setWeights([256])).toThrow(RangeError);
  });

  it('a tunnel taken out: its flows move to the others, the others stay where they can; back: the same as before', () => {
    const s = new TunnelSpread(['t0', 't1', 't2']);
    const hashes = flows(6000, 4).map(hashOf);
    const before = hashes.map((h) => s.pick(h));
    s.setUp(1, false);
    expect(s.isUp(1)).toBe(false);
    expect(s.inUse).toBe(2);
    const during = hashes.map((h) => s.pick(h));
    expect(during.includes(1)).toBe(false);
    expect(during.filter((t) => t === 0).length).toBeGreaterThan(2500);
    expect(during.filter((t) => t === 2).length).toBeGreaterThan(2500);
    s.setUp(1, true);
    expect(hashes.map((h) => s.pick(h))).toEqual(before);
  });

  it("with every tunnel down it uses tunnel 0 (the single-port peer's, Liqo's routed one)", () => {
    const s = new TunnelSpread(['t0', 't1']);
    s.setUp(0, false);
    s.setUp(1, false);
    expect(s.inUse).toBe(1);
    const seen = new Set(flows(200, 5).map((p) => s.pick(hashOf(p))));
    expect([...seen]).toEqual([0]);
    const one = new TunnelSpread(['only']);
    expect(one.linkFor(0xffffffff)).toBe('only');
    expect(() => new TunnelSpread([])).toThrow(RangeError);
    expect(() => s.setUp(2, true)).toThrow(RangeError);
  });
});
