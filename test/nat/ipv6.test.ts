/**
 * IPv6 through the YAML mode's data path (gateway-nat.ts: the router with the configuration's
 * compiled rules, here their ip6 table): remap of a peer's IPv6 CIDRs both ways (TCP, UDP, ICMPv6
 * echo), an ICMPv6 error quoting a remapped packet, SNAT of host traffic to the IPv6 external
 * CIDR's first address, IPv6 IP mappings and the MSS clamp (MTU − 60). Checksums are compared
 * with a full recomputation.
 */
import { describe, expect, it } from 'vitest';
import { ICMPV6_CODE_PORT_UNREACHABLE, ICMPV6_DEST_UNREACHABLE, ICMPV6_ECHO_REPLY } from '../../src/packet/icmp.js';
import { TCP_FLAG_SYN } from '../../src/packet/tcp.js';
import { NAT_FORWARD } from '../../src/nat/results.js';
import { icmpEcho, tcpPacket, udpPacket } from '../packet/factory.js';
import { GatewayNat, type GatewayPeer } from './gateway-nat.js';
import {
  bytesOf,
  dstOf,
  icmpErrorPacket,
  layout,
  portsOf,
  quotedOf,
  recomputeAll,
  srcOf,
  type Pkt,
} from './helpers.js';

function gateway(
  remapped: string,
  seed: number,
  extra: { external6?: boolean } = {},
): { nat: GatewayNat; peer: GatewayPeer } {
  const nat = new GatewayNat({
    localPodCIDRs: ['10.0.0.0/16', 'fd00:a::/48'],
    localExternalCIDR: '10.70.0.0/16',
    ...(extra.external6 ? { localExternalCIDRv6: 'fd70::/64' } : {}),
    mtu: 1340,
    conntrack: { seed },
  });
  const peer = nat.addPeer({
    name: 'peer',
    remote: { podCIDRs: ['10.0.0.0/16', 'fd00:a::/48'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.71.0.0/16', remapped], externalCIDRs: ['10.72.0.0/16'] },
  });
  return { nat, peer };
}
/** A's gateway sees B's pods as fd71:b::/48, B's sees A's as fd61:a::/48. */
const gatewayA = () => gateway('fd71:b::/48', 1);
const gatewayB = () => gateway('fd61:a::/48', 2);

function exact(p: Pkt): void {
  expect(Buffer.from(bytesOf(p)).toString('hex')).toBe(Buffer.from(recomputeAll(p)).toString('hex'));
}

function mssOf(p: Pkt): number {
  const t = layout(p.buf, p.off).l4;
  return (p.buf[t + 22]! << 8) | p.buf[t + 23]!;
}

type Kind = 'tcp' | 'udp' | 'icmp';
function build(kind: Kind, src: string, dst: string, sport: number, dport: number): Pkt {
  if (kind === 'tcp') return tcpPacket({ src, dst, sport, dport, flags: TCP_FLAG_SYN, mss: 1200 });
  if (kind === 'udp') return udpPacket({ src, dst, sport, dport });
  return icmpEcho({ src, dst, ident: sport, seq: 9 });
}

describe('IPv6 remap (ip6 table)', () => {
  it.each(['tcp', 'udp', 'icmp'] as Kind[])(
    '%s: real addresses in the tunnel, 1:1 prefix mapping at both gateways, the reply reversed',
    (kind) => {
      const A = gatewayA();
      const B = gatewayB();
      const p = build(kind, 'fd00:a::15', 'fd71:b:0:1::27', 40000, 8080);
      expect(A.nat.peerFor(p.buf, p.off)).toBe(A.peer);
      expect(A.nat.outbound(p.buf, p.off, p.len, A.peer, 0)).toBe(NAT_FORWARD);
      expect([srcOf(p), dstOf(p)]).toEqual(['fd00:a::15', 'fd00:a:0:1::27']);
      exact(p);
      expect(B.nat.inbound(p.buf, p.off, p.len, B.peer, 1)).toBe(NAT_FORWARD);
      expect([srcOf(p), dstOf(p)]).toEqual(['fd61:a::15', 'fd00:a:0:1::27']);
      expect(portsOf(p)).toEqual(kind === 'icmp' ? [40000, 40000] : [40000, 8080]);
      exact(p);
      const r =
        kind === 'icmp'
          ? icmpEcho({ src: 'fd00:a:0:1::27', dst: 'fd61:a::15', ident: 40000, seq: 9, type: ICMPV6_ECHO_REPLY })
          : build(kind, 'fd00:a:0:1::27', 'fd61:a::15', 8080, 40000);
      expect(B.nat.outbound(r.buf, r.off, r.len, B.peer, 2)).toBe(NAT_FORWARD);
      expect([srcOf(r), dstOf(r)]).toEqual(['fd00:a:0:1::27', 'fd00:a::15']);
      exact(r);
      expect(A.nat.inbound(r.buf, r.off, r.len, A.peer, 3)).toBe(NAT_FORWARD);
      expect([srcOf(r), dstOf(r)]).toEqual(['fd71:b:0:1::27', 'fd00:a::15']);
      exact(r);
      // IPv6 runs on conntrack (the stateless shortcut is IPv4's).
      expect(A.nat.conntrack.size).toBe(1);
    },
  );

  it('an ICMPv6 error from B about A’s packet: quoted packet and outer source translated, checksum with pseudo header exact', () => {
    const A = gatewayA();
    const B = gatewayB();
    const p = udpPacket({ src: 'fd00:a::15', dst: 'fd71:b::99', sport: 5000, dport: 53 });
    expect(A.nat.outbound(p.buf, p.off, p.len, A.peer, 0)).toBe(NAT_FORWARD);
    expect(B.nat.inbound(p.buf, p.off, p.len, B.peer, 0)).toBe(NAT_FORWARD);
    const err = icmpErrorPacket('fd00:a::99', 'fd61:a::15', ICMPV6_DEST_UNREACHABLE, ICMPV6_CODE_PORT_UNREACHABLE, p);
    expect(B.nat.outbound(err.buf, err.off, err.len, B.peer, 1)).toBe(NAT_FORWARD);
    expect([srcOf(err), dstOf(err)]).toEqual(['fd00:a::99', 'fd00:a::15']);
    expect([srcOf(quotedOf(err)), dstOf(quotedOf(err))]).toEqual(['fd00:a::15', 'fd00:a::99']);
    exact(err);
    expect(A.nat.inbound(err.buf, err.off, err.len, A.peer, 2)).toBe(NAT_FORWARD);
    expect([srcOf(err), dstOf(err)]).toEqual(['fd71:b::99', 'fd00:a::15']);
    expect([srcOf(quotedOf(err)), dstOf(quotedOf(err))]).toEqual(['fd00:a::15', 'fd71:b::99']);
    exact(err);
  });
});

describe('IPv6 SNAT, IP mappings, MSS clamp', () => {
  it('host traffic is masqueraded to the IPv6 external CIDR’s first address; the echo reply restored', () => {
    const { nat, peer } = gateway('fd71:b::/48', 3, { external6: true });
    const p = icmpEcho({ src: 'fd18::3', dst: 'fd71:b::7', ident: 5 });
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect([srcOf(p), dstOf(p)]).toEqual(['fd70::', 'fd00:a::7']);
    exact(p);
    const r = icmpEcho({ src: 'fd00:a::7', dst: 'fd70::', ident: portsOf(p)[0], type: ICMPV6_ECHO_REPLY });
    expect(nat.inbound(r.buf, r.off, r.len, peer, 1)).toBe(NAT_FORWARD);
    expect([srcOf(r), dstOf(r)]).toEqual(['fd71:b::7', 'fd18::3']);
    expect(portsOf(r)).toEqual([5, 5]);
    exact(r);
    // Two hosts with the same identifier: the second gets another one.
    const q = icmpEcho({ src: 'fd18::4', dst: 'fd71:b::7', ident: 5 });
    expect(nat.outbound(q.buf, q.off, q.len, peer, 2)).toBe(NAT_FORWARD);
    expect(srcOf(q)).toBe('fd70::');
    expect(portsOf(q)[0]).not.toBe(5);
    exact(q);
  });

  it('pod sources are not masqueraded', () => {
    const { nat, peer } = gateway('fd71:b::/48', 4, { external6: true });
    const p = udpPacket({ src: 'fd00:a::3', dst: 'fd71:b::7', sport: 1000, dport: 53 });
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect([srcOf(p), dstOf(p)]).toEqual(['fd00:a::3', 'fd00:a::7']);
  });

  it('an IPv6 IP mapping: external ↔ real address, both directions', () => {
    const { nat, peer } = gateway('fd71:b::/48', 5, { external6: true });
    nat.setIpMappings([{ externalAddress: 'fd70::9', realAddress: 'fd18::9' }]);
    const p = tcpPacket({ src: 'fd00:a::5', dst: 'fd70::9', sport: 3333, dport: 80, flags: TCP_FLAG_SYN });
    expect(nat.inbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect([srcOf(p), dstOf(p)]).toEqual(['fd71:b::5', 'fd18::9']);
    exact(p);
    const q = udpPacket({ src: 'fd18::9', dst: 'fd71:b::6', sport: 777, dport: 53 });
    expect(nat.outbound(q.buf, q.off, q.len, peer, 1)).toBe(NAT_FORWARD);
    expect([srcOf(q), dstOf(q)]).toEqual(['fd70::9', 'fd00:a::6']);
    exact(q);
  });

  it('clamps a SYN’s MSS to MTU − 60 (IPv6) and MTU − 40 (IPv4), checksum exact', () => {
    const { nat, peer } = gatewayA();
    const v6 = tcpPacket({ src: 'fd00:a::1', dst: 'fd71:b::2', sport: 1, dport: 2, flags: TCP_FLAG_SYN, mss: 1440 });
    expect(nat.outbound(v6.buf, v6.off, v6.len, peer, 0)).toBe(NAT_FORWARD);
    expect(mssOf(v6)).toBe(1280);
    exact(v6);
    const v4 = tcpPacket({ src: '10.0.0.1', dst: '10.71.0.2', sport: 1, dport: 2, flags: TCP_FLAG_SYN, mss: 1460 });
    expect(nat.outbound(v4.buf, v4.off, v4.len, peer, 0)).toBe(NAT_FORWARD);
    expect(mssOf(v4)).toBe(1300);
    expect(nat.mssClamped).toBe(2);
  });
});
