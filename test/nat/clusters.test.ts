/**
 * Both clusters' points of view: A and B share the pod CIDR 10.0.0.0/16 (and the external CIDR
 * 10.70.0.0/16), each remaps the other. The real pod IPs must travel inside the tunnel; each pod
 * sees the other through its own cluster's remapped CIDR; replies reverse. Each gateway is the
 * YAML mode's data path (gateway-nat.ts: the router with the configuration's compiled rules).
 * IPv4: the rules are Liqo's family ip tables.
 */
import { describe, expect, it } from 'vitest';
import { ICMPV4_ECHO_REPLY, ICMPV4_DEST_UNREACHABLE, ICMPV4_CODE_PORT_UNREACHABLE } from '../../src/packet/icmp.js';
import { TCP_FLAG_ACK, TCP_FLAG_SYN } from '../../src/packet/tcp.js';
import { NAT_FORWARD } from '../../src/nat/results.js';
import { icmpEcho, tcpPacket, udpPacket } from '../packet/factory.js';
import { GatewayNat, TO_NODE, type GatewayPeer } from './gateway-nat.js';
import { bytesOf, dstOf, icmpErrorPacket, portsOf, quotedOf, recomputeAll, srcOf, type Pkt } from './helpers.js';

/** Cluster A's gateway: B's pods are 10.71/16 here, B's external CIDR 10.72/16. */
function gatewayA(): { nat: GatewayNat; peer: GatewayPeer } {
  const nat = new GatewayNat({
    localPodCIDRs: ['10.0.0.0/16'],
    localExternalCIDR: '10.70.0.0/16',
    conntrack: { seed: 1 },
  });
  const peer = nat.addPeer({
    name: 'cluster-b',
    remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
  });
  return { nat, peer };
}

/** Cluster B's gateway: A's pods are 10.61/16 here, A's external CIDR 10.62/16. */
function gatewayB(): { nat: GatewayNat; peer: GatewayPeer } {
  const nat = new GatewayNat({
    localPodCIDRs: ['10.0.0.0/16'],
    localExternalCIDR: '10.70.0.0/16',
    conntrack: { seed: 2 },
  });
  const peer = nat.addPeer({
    name: 'cluster-a',
    remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.61.0.0/16'], externalCIDRs: ['10.62.0.0/16'] },
  });
  return { nat, peer };
}

/** Checksums after NAT equal a full recomputation. */
function expectChecksumsExact(p: Pkt): void {
  expect(Buffer.from(bytesOf(p)).toString('hex')).toBe(Buffer.from(recomputeAll(p)).toString('hex'));
}

type Kind = 'tcp' | 'udp' | 'udp0' | 'icmp';
function build(kind: Kind, src: string, dst: string, sport: number, dport: number): Pkt {
  switch (kind) {
    case 'tcp':
      return tcpPacket({ src, dst, sport, dport, flags: TCP_FLAG_SYN, mss: 1200, payload: new Uint8Array([1, 2, 3]) });
    case 'udp':
      return udpPacket({ src, dst, sport, dport });
    case 'udp0':
      return udpPacket({ src, dst, sport, dport, noChecksum: true });
    case 'icmp':
      return icmpEcho({ src, dst, ident: sport, seq: 9 });
  }
}

describe('two clusters with the same pod CIDR, each remapping the other', () => {
  const cases: Array<[Kind, string, string, string, string]> = [
    // kind, A pod, B pod real, B pod as A sees it, A pod as B sees it
    ['tcp', '10.0.1.5', '10.0.2.7', '10.71.2.7', '10.61.1.5'],
    ['udp', '10.0.1.5', '10.0.2.7', '10.71.2.7', '10.61.1.5'],
    ['udp0', '10.0.255.1', '10.0.0.254', '10.71.0.254', '10.61.255.1'],
    ['icmp', '10.0.1.5', '10.0.2.7', '10.71.2.7', '10.61.1.5'],
  ];
  it.each(cases)(
    '%s %s → %s: real IPs in the tunnel, remapped source at B, reply reversed',
    (kind, aPod, bPodReal, bPodAtA, aPodAtB) => {
      const A = gatewayA();
      const B = gatewayB();
      // A pod → B pod, addressed by B's remapped address.
      const p = build(kind, aPod, bPodAtA, 40000, 8080);
      expect(A.nat.peerFor(p.buf, p.off)).toBe(A.peer);
      expect(A.nat.outbound(p.buf, p.off, p.len, A.peer, 0)).toBe(NAT_FORWARD);
      // In the tunnel: real addresses on both sides, ports untouched.
      expect(srcOf(p)).toBe(aPod);
      expect(dstOf(p)).toBe(bPodReal);
      expect(portsOf(p)).toEqual(kind === 'icmp' ? [40000, 40000] : [40000, 8080]);
      expectChecksumsExact(p);
      // Arrives at B's gateway: source becomes B's remapped view of A.
      expect(B.nat.inbound(p.buf, p.off, p.len, B.peer, 1)).toBe(NAT_FORWARD);
      expect(srcOf(p)).toBe(aPodAtB);
      expect(dstOf(p)).toBe(bPodReal);
      expectChecksumsExact(p);
      if (kind === 'udp0') expect(p.buf[p.off + 20 + 6]! | p.buf[p.off + 20 + 7]!).toBe(0);

      // The reply from B's pod to the address it saw.
      const r =
        kind === 'icmp'
          ? icmpEcho({ src: bPodReal, dst: aPodAtB, ident: 40000, seq: 9, type: ICMPV4_ECHO_REPLY })
          : build(kind, bPodReal, aPodAtB, 8080, 40000);
      expect(B.nat.peerFor(r.buf, r.off)).toBe(B.peer);
      expect(B.nat.outbound(r.buf, r.off, r.len, B.peer, 2)).toBe(NAT_FORWARD);
      expect(srcOf(r)).toBe(bPodReal);
      expect(dstOf(r)).toBe(aPod);
      expectChecksumsExact(r);
      expect(A.nat.inbound(r.buf, r.off, r.len, A.peer, 3)).toBe(NAT_FORWARD);
      expect(srcOf(r)).toBe(bPodAtA);
      expect(dstOf(r)).toBe(aPod);
      expectChecksumsExact(r);
      // Pod-to-pod traffic is stateless: nothing was tracked.
      expect(A.nat.conntrack.size).toBe(0);
      expect(B.nat.conntrack.size).toBe(0);
    },
  );

  it('an ICMP port-unreachable from B about A’s packet: quoted header translated on both gateways', () => {
    const A = gatewayA();
    const B = gatewayB();
    const p = udpPacket({ src: '10.0.1.5', dst: '10.71.2.7', sport: 5000, dport: 53 });
    A.nat.outbound(p.buf, p.off, p.len, A.peer, 0);
    B.nat.inbound(p.buf, p.off, p.len, B.peer, 0);
    // B's pod answers with an ICMP error quoting the packet exactly as it received it.
    const err = icmpErrorPacket('10.0.2.7', '10.61.1.5', ICMPV4_DEST_UNREACHABLE, ICMPV4_CODE_PORT_UNREACHABLE, p);
    expect(B.nat.outbound(err.buf, err.off, err.len, B.peer, 1)).toBe(NAT_FORWARD);
    expect(dstOf(err)).toBe('10.0.1.5');
    expect(srcOf(quotedOf(err))).toBe('10.0.1.5');
    expect(dstOf(quotedOf(err))).toBe('10.0.2.7');
    expectChecksumsExact(err);
    expect(A.nat.inbound(err.buf, err.off, err.len, A.peer, 2)).toBe(NAT_FORWARD);
    // A's pod sees the error from B's remapped address, quoting the packet it sent.
    expect(srcOf(err)).toBe('10.71.2.7');
    expect(dstOf(err)).toBe('10.0.1.5');
    const q = quotedOf(err);
    expect(srcOf(q)).toBe('10.0.1.5');
    expect(dstOf(q)).toBe('10.71.2.7');
    expect(portsOf(q)).toEqual([5000, 53]);
    expectChecksumsExact(err);
    // Byte-exact: the quote is the packet A's pod originally sent.
    const original = udpPacket({ src: '10.0.1.5', dst: '10.71.2.7', sport: 5000, dport: 53 });
    expect(Buffer.from(bytesOf(q)).equals(Buffer.from(bytesOf(original)))).toBe(true);
  });

  it('TCP handshake both ways keeps MSS within the tunnel MTU and checksums exact', () => {
    const A = gatewayA();
    const B = gatewayB();
    const syn = tcpPacket({
      src: '10.0.1.5',
      dst: '10.71.2.7',
      sport: 33333,
      dport: 80,
      flags: TCP_FLAG_SYN,
      mss: 1460,
    });
    A.nat.outbound(syn.buf, syn.off, syn.len, A.peer, 0);
    expect((syn.buf[syn.off + 42]! << 8) | syn.buf[syn.off + 43]!).toBe(1300); // 1340 − 40
    expectChecksumsExact(syn);
    const synack = tcpPacket({
      src: '10.0.2.7',
      dst: '10.61.1.5',
      sport: 80,
      dport: 33333,
      flags: TCP_FLAG_SYN | TCP_FLAG_ACK,
      mss: 8960,
    });
    B.nat.outbound(synack.buf, synack.off, synack.len, B.peer, 0);
    A.nat.inbound(synack.buf, synack.off, synack.len, A.peer, 0);
    expect((synack.buf[synack.off + 42]! << 8) | synack.buf[synack.off + 43]!).toBe(1300);
    expect(srcOf(synack)).toBe('10.71.2.7');
    expectChecksumsExact(synack);
  });
});

describe('only one side remaps', () => {
  // A (pods 10.0/16) remaps B (pods 10.1/16) to 10.71/16 (10.1/16 is taken at A); B keeps A's real CIDR.
  function pair(): { a: GatewayNat; ap: GatewayPeer; b: GatewayNat; bp: GatewayPeer } {
    const a = new GatewayNat({ localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' });
    const ap = a.addPeer({
      name: 'b',
      remote: { podCIDRs: ['10.1.0.0/16'], externalCIDRs: [] },
      remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
    });
    const b = new GatewayNat({ localPodCIDRs: ['10.1.0.0/16'], localExternalCIDR: '10.70.0.0/16' });
    const bp = b.addPeer({ name: 'a', remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] } });
    return { a, ap, b, bp };
  }

  it('A rewrites; B, whose remapped CIDR equals the real one, rewrites nothing', () => {
    const { a, ap, b, bp } = pair();
    const p = tcpPacket({
      src: '10.0.3.3',
      dst: '10.71.4.4',
      sport: 1234,
      dport: 80,
      flags: TCP_FLAG_ACK,
      payload: new Uint8Array(33),
    });
    a.outbound(p.buf, p.off, p.len, ap, 0);
    expect(dstOf(p)).toBe('10.1.4.4');
    const inTunnel = bytesOf(p);
    expect(b.inbound(p.buf, p.off, p.len, bp, 0)).toBe(NAT_FORWARD);
    expect(Buffer.from(bytesOf(p)).equals(Buffer.from(inTunnel))).toBe(true); // untouched at B
    const r = tcpPacket({
      src: '10.1.4.4',
      dst: '10.0.3.3',
      sport: 80,
      dport: 1234,
      flags: TCP_FLAG_ACK,
      payload: new Uint8Array(7),
    });
    expect(b.peerFor(r.buf, r.off)).toBe(bp); // identity CIDRs still select the peer
    const before = bytesOf(r);
    expect(b.outbound(r.buf, r.off, r.len, bp, 0)).toBe(NAT_FORWARD);
    expect(Buffer.from(bytesOf(r)).equals(Buffer.from(before))).toBe(true);
    a.inbound(r.buf, r.off, r.len, ap, 0);
    expect(srcOf(r)).toBe('10.71.4.4');
    expect(dstOf(r)).toBe('10.0.3.3');
    expectChecksumsExact(r);
  });

  it('a destination outside every peer CIDR is left alone and selects no peer', () => {
    const { a, ap } = pair();
    const p = udpPacket({ src: '10.0.3.3', dst: '192.0.2.1', sport: 1, dport: 2 });
    expect(a.peerFor(p.buf, p.off)).toBeUndefined();
    const before = bytesOf(p);
    expect(a.outbound(p.buf, p.off, p.len, ap, 0)).toBe(TO_NODE);
    expect(Buffer.from(bytesOf(p)).equals(Buffer.from(before))).toBe(true);
  });
});
