/**
 * Masquerade (SNAT) of host traffic to the first address of the external CIDR, with conntrack;
 * IP mappings (Liqo IP resources) — through the gateway's data path (gateway-nat.ts: the router
 * with the configuration's compiled rules; IPv4, Liqo's family ip tables).
 */
import { describe, expect, it } from 'vitest';
import {
  ICMPV4_CODE_PORT_UNREACHABLE,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV4_ECHO_REPLY,
  ICMPV4_TIME_EXCEEDED,
  ICMPV6_ECHO_REPLY,
} from '../../src/packet/icmp.js';
import { fillIpv4Checksum } from '../../src/packet/ipv4.js';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_RST, TCP_FLAG_SYN } from '../../src/packet/tcp.js';
import { NatConfigError } from '../../src/nat/config.js';
import type { NatConfig } from '../../src/nat/config.js';
import { GatewayNat, routerDrop, type GatewayPeer } from './gateway-nat.js';
import { NAT_FORWARD } from '../../src/nat/results.js';
import { ROUTER_DROP_NAMES } from '../../src/router/drops.js';
import { icmpEcho, tcpPacket, udpPacket } from '../packet/factory.js';
import {
  bytesOf,
  dstOf,
  icmpErrorPacket,
  mirror,
  portsOf,
  quotedOf,
  recomputeAll,
  srcOf,
  type Pkt,
} from './helpers.js';

const HOST = '172.18.0.3';
const REMOTE_AT_A = '10.71.2.7';
const REMOTE_REAL = '10.0.2.7';

function gateway(extra: Partial<NatConfig> = {}): { nat: GatewayNat; peer: GatewayPeer } {
  const nat = new GatewayNat({
    localPodCIDRs: ['10.0.0.0/16'],
    localExternalCIDR: '10.70.0.0/16',
    conntrack: { seed: 7, ...(extra.conntrack ?? {}) },
    ...extra,
  });
  const peer = nat.addPeer({
    name: 'b',
    remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
  });
  return { nat, peer };
}

function exact(p: Pkt): void {
  expect(Buffer.from(bytesOf(p)).toString('hex')).toBe(Buffer.from(recomputeAll(p)).toString('hex'));
}

/** The reply the peer would send to an outbound packet as it left the gateway. */
function replyTo(p: Pkt): Pkt {
  return mirror(p);
}

describe('SNAT of host traffic', () => {
  it('source becomes the external CIDR’s first address (10.70.0.0, Liqo’s GetUnknownSourceIP); reply reversed exactly', () => {
    const { nat, peer } = gateway();
    const p = tcpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 40000, dport: 80, flags: TCP_FLAG_SYN, mss: 1000 });
    const original = bytesOf(p);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect(srcOf(p)).toBe('10.70.0.0');
    expect(dstOf(p)).toBe(REMOTE_REAL);
    expect(portsOf(p)).toEqual([40000, 80]); // original port was free: kept
    exact(p);
    expect(nat.conntrack.size).toBe(1);
    const r = replyTo(p);
    expect(nat.inbound(r.buf, r.off, r.len, peer, 1)).toBe(NAT_FORWARD);
    expect(srcOf(r)).toBe(REMOTE_AT_A);
    expect(dstOf(r)).toBe(HOST);
    // Translate then reverse gives the original packet, byte for byte (checksums included).
    expect(Buffer.from(bytesOf(mirror(r))).equals(Buffer.from(original))).toBe(true);
  });

  it('pod sources are not masqueraded; fullMasquerade masquerades them too', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: '10.0.9.9', dst: REMOTE_AT_A, sport: 1000, dport: 53 });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    expect(srcOf(p)).toBe('10.0.9.9');
    expect(nat.conntrack.size).toBe(0);
    const full = gateway({ fullMasquerade: true });
    const q = udpPacket({ src: '10.0.9.9', dst: REMOTE_AT_A, sport: 1000, dport: 53 });
    full.nat.outbound(q.buf, q.off, q.len, full.peer, 0);
    expect(srcOf(q)).toBe('10.70.0.0');
  });

  it('towards the peer’s external CIDR too (Liqo’s service-nodeport-…-ext rule)', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: HOST, dst: '10.72.0.9', sport: 1000, dport: 53 });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    expect(srcOf(p)).toBe('10.70.0.0');
    expect(dstOf(p)).toBe('10.70.0.9'); // peer's real external address
    exact(p);
  });

  it('many flows with colliding source ports get distinct SNAT ports; each reply reaches its host', () => {
    const { nat, peer } = gateway();
    const n = 300;
    const seen = new Map<number, string>();
    const outs: Pkt[] = [];
    for (let i = 0; i < n; i++) {
      const host = `172.18.${1 + (i >> 8)}.${i & 0xff}`;
      const p = udpPacket({
        src: host,
        dst: REMOTE_AT_A,
        sport: 40000,
        dport: 53,
        payload: new Uint8Array([i & 0xff, i >> 8]),
      });
      expect(nat.outbound(p.buf, p.off, p.len, peer, i)).toBe(NAT_FORWARD);
      const [sp] = portsOf(p);
      expect(seen.has(sp)).toBe(false);
      seen.set(sp, host);
      exact(p);
      outs.push(p);
    }
    expect(seen.has(40000)).toBe(true); // the first flow kept its port
    expect(nat.conntrack.size).toBe(n);
    for (const p of outs.reverse()) {
      const r = replyTo(p);
      expect(nat.inbound(r.buf, r.off, r.len, peer, 1000)).toBe(NAT_FORWARD);
      expect(dstOf(r)).toBe(seen.get(portsOf(p)[0]));
      expect(portsOf(r)).toEqual([53, 40000]);
      exact(r);
    }
    // The same source port towards a different remote endpoint is not a collision: kept.
    const other = udpPacket({ src: '172.18.1.1', dst: '10.71.2.8', sport: 40000, dport: 53 });
    nat.outbound(other.buf, other.off, other.len, peer, 1000);
    expect(portsOf(other)[0]).toBe(40000);
  });

  it('ICMP echo identifiers are rewritten like ports and restored on the reply', () => {
    const { nat, peer } = gateway();
    const a = icmpEcho({ src: '172.18.0.1', dst: REMOTE_AT_A, ident: 77, seq: 1 });
    const b = icmpEcho({ src: '172.18.0.2', dst: REMOTE_AT_A, ident: 77, seq: 1 });
    nat.outbound(a.buf, a.off, a.len, peer, 0);
    nat.outbound(b.buf, b.off, b.len, peer, 0);
    const ida = portsOf(a)[0];
    const idb = portsOf(b)[0];
    expect(ida).toBe(77);
    expect(idb).not.toBe(77);
    exact(a);
    exact(b);
    for (const [p, host] of [
      [b, '172.18.0.2'],
      [a, '172.18.0.1'],
    ] as const) {
      const r = icmpEcho({ src: REMOTE_REAL, dst: '10.70.0.0', ident: portsOf(p)[0], seq: 1, type: ICMPV4_ECHO_REPLY });
      expect(nat.inbound(r.buf, r.off, r.len, peer, 1)).toBe(NAT_FORWARD);
      expect(dstOf(r)).toBe(host);
      expect(srcOf(r)).toBe(REMOTE_AT_A);
      expect(portsOf(r)[0]).toBe(77);
      exact(r);
    }
  });

  it('packets for the SNAT address without a flow are dropped and counted', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: REMOTE_REAL, dst: '10.70.0.0', sport: 53, dport: 40000 });
    // No connection reverses it: the SNAT address routes nowhere (counted as route_no_route).
    expect(nat.inbound(p.buf, p.off, p.len, peer, 0)).toBe(routerDrop('no_route'));
    expect(nat.nr.router.drops[ROUTER_DROP_NAMES.indexOf('no_route')]).toBe(1);
  });

  it('an ICMP error from the peer about a masqueraded flow is translated back (outer and quoted packet)', () => {
    const { nat, peer } = gateway();
    // Two hosts with the same port so the second flow's SNAT port differs from its own.
    const first = udpPacket({ src: '172.18.0.9', dst: REMOTE_AT_A, sport: 5353, dport: 53 });
    nat.outbound(first.buf, first.off, first.len, peer, 0);
    const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 5353, dport: 53, payload: new Uint8Array(11).fill(3) });
    const original = bytesOf(p);
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    expect(portsOf(p)[0]).not.toBe(5353);
    // B's pod answers "port unreachable" quoting the packet as it received it.
    const err = icmpErrorPacket(REMOTE_REAL, '10.70.0.0', ICMPV4_DEST_UNREACHABLE, ICMPV4_CODE_PORT_UNREACHABLE, p);
    expect(nat.inbound(err.buf, err.off, err.len, peer, 1)).toBe(NAT_FORWARD);
    expect(srcOf(err)).toBe(REMOTE_AT_A);
    expect(dstOf(err)).toBe(HOST);
    const q = quotedOf(err);
    expect(Buffer.from(bytesOf(q)).equals(Buffer.from(original))).toBe(true);
    exact(err);
  });

  it('an ICMP error from a masqueraded host about a reply it received is translated (outbound)', () => {
    const { nat, peer } = gateway();
    const p = tcpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 6000, dport: 443, flags: TCP_FLAG_SYN });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    const r = replyTo(p);
    nat.inbound(r.buf, r.off, r.len, peer, 1);
    // The host rejects the reply with an ICMP error quoting it as delivered.
    const err = icmpErrorPacket(HOST, REMOTE_AT_A, ICMPV4_DEST_UNREACHABLE, ICMPV4_CODE_PORT_UNREACHABLE, r);
    expect(nat.outbound(err.buf, err.off, err.len, peer, 2)).toBe(NAT_FORWARD);
    expect(srcOf(err)).toBe('10.70.0.0');
    expect(dstOf(err)).toBe(REMOTE_REAL);
    const q = quotedOf(err);
    expect(srcOf(q)).toBe(REMOTE_REAL);
    expect(dstOf(q)).toBe('10.70.0.0');
    expect(portsOf(q)).toEqual([443, portsOf(p)[0]]);
    exact(err);
  });

  it('a node’s Time Exceeded about pod traffic from the peer gets the SNAT source (no flow needed)', () => {
    const { nat, peer } = gateway();
    const fromPeer = udpPacket({ src: REMOTE_AT_A, dst: '10.0.5.5', sport: 9, dport: 9 });
    const err = icmpErrorPacket('172.18.0.4', REMOTE_AT_A, ICMPV4_TIME_EXCEEDED, 0, fromPeer);
    expect(nat.outbound(err.buf, err.off, err.len, peer, 0)).toBe(NAT_FORWARD);
    expect(srcOf(err)).toBe('10.70.0.0');
    expect(dstOf(err)).toBe(REMOTE_REAL);
    expect(srcOf(quotedOf(err))).toBe(REMOTE_REAL);
    expect(dstOf(quotedOf(err))).toBe('10.0.5.5');
    exact(err);
  });

  it('a non-first fragment arriving without its first fragment is untracked, not masqueraded', () => {
    // README "Rules: deviations": no reassembly; a later fragment arriving first is untracked.
    const { nat, peer } = gateway();
    const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 1, dport: 2 });
    p.buf[p.off + 6] = 0x00;
    p.buf[p.off + 7] = 0x10; // fragment offset 128 bytes
    fillIpv4Checksum(p.buf, p.off);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect(srcOf(p)).toBe(HOST);
    expect(nat.nr.rules.stats().fragments).toBe(1);
    expect(nat.conntrack.size).toBe(0);
  });
});

describe('SNAT of pings: checksums', () => {
  it('an echo reply restored to identifier 0, sequence 0, no data carries checksum 0xffff, not 0x0000 (found by fuzzing)', () => {
    const { nat, peer } = gateway();
    // Two hosts ping the same remote with identifier 0: the second gets another identifier.
    for (const host of ['172.18.0.3', '172.18.0.4']) {
      const p = icmpEcho({ src: host, dst: REMOTE_AT_A, ident: 0, seq: 0, payload: new Uint8Array(0) });
      expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
      const o = bytesOf(p);
      const ident = (o[24]! << 8) | o[25]!;
      const r = icmpEcho({
        src: REMOTE_REAL,
        dst: '10.70.0.0',
        ident,
        seq: 0,
        type: ICMPV4_ECHO_REPLY,
        payload: new Uint8Array(0),
      });
      expect(nat.inbound(r.buf, r.off, r.len, peer, 1)).toBe(NAT_FORWARD);
      expect(dstOf(r)).toBe(host);
      const b = bytesOf(r);
      expect([...b.subarray(20, 28)]).toEqual([0, 0, 0xff, 0xff, 0, 0, 0, 0]);
      exact(r);
    }
  });
});

describe('IP mappings (Liqo IP resources)', () => {
  it('external address ↔ real address, both directions', () => {
    const { nat, peer } = gateway({
      ipMappings: [
        { externalAddress: '10.70.0.4', realAddress: '10.0.1.11' },
        { externalAddress: '10.70.0.5', realAddress: '192.168.1.20' },
      ],
    });
    // The peer reaches the mapped pod through our external CIDR (it arrives with the real external address).
    const p = tcpPacket({ src: REMOTE_REAL, dst: '10.70.0.4', sport: 5555, dport: 80, flags: TCP_FLAG_SYN });
    expect(nat.inbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect(srcOf(p)).toBe(REMOTE_AT_A);
    expect(dstOf(p)).toBe('10.0.1.11');
    exact(p);
    // Its reply leaves with the external address.
    const r = mirror(p);
    expect(nat.outbound(r.buf, r.off, r.len, peer, 1)).toBe(NAT_FORWARD);
    expect(srcOf(r)).toBe('10.70.0.4');
    expect(dstOf(r)).toBe(REMOTE_REAL);
    exact(r);
    // A mapped host outside the pod CIDR uses its mapping instead of the masquerade address.
    const h = udpPacket({ src: '192.168.1.20', dst: REMOTE_AT_A, sport: 9, dport: 9 });
    nat.outbound(h.buf, h.off, h.len, peer, 2);
    expect(srcOf(h)).toBe('10.70.0.5');
    // Both flows are connections of the rules' conntrack (the mapping's dnat, the mapped host's snat).
    expect(nat.conntrack.size).toBe(2);
  });

  it('setIpMappings replaces the set; bad input is a NatConfigError naming the field', () => {
    const { nat, peer } = gateway();
    nat.setIpMappings([{ externalAddress: '10.70.3.3', realAddress: '10.0.3.3' }]);
    const p = udpPacket({ src: REMOTE_REAL, dst: '10.70.3.3', sport: 1, dport: 2 });
    nat.inbound(p.buf, p.off, p.len, peer, 0);
    expect(dstOf(p)).toBe('10.0.3.3');
    expect(() => nat.setIpMappings([{ externalAddress: '10.70.0.0', realAddress: '10.0.3.3' }])).toThrow(
      /ipMappings\[0\]\.externalAddress.*reserved as the SNAT source/,
    );
    expect(() => nat.setIpMappings([{ externalAddress: '10.99.0.1', realAddress: '10.0.3.3' }])).toThrow(
      NatConfigError,
    );
    // The old set is still active after a rejected update.
    const q = udpPacket({ src: REMOTE_REAL, dst: '10.70.3.3', sport: 1, dport: 2 });
    nat.inbound(q.buf, q.off, q.len, peer, 0);
    expect(dstOf(q)).toBe('10.0.3.3');
  });
});
