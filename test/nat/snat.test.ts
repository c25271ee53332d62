/**
 * Masquerade (SNAT) of host traffic to the first address of the external CIDR, with conntrack;
 * IP mappings (Liqo IP resources).
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
import {
  CT_TCP_CLOSE,
  CT_TCP_ESTABLISHED,
  CT_TCP_FIN_WAIT,
  CT_TCP_SYN_RECV,
  CT_TCP_SYN_SENT,
  CT_TCP_TIME_WAIT,
} from '../../src/nat/conntrack.js';
import { Nat, type NatPeer } from '../../src/nat/nat.js';
import { NAT_FORWARD, NatDrop } from '../../src/nat/results.js';
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

function gateway(extra: Partial<ConstructorParameters<typeof Nat>[0]> = {}): { nat: Nat; peer: NatPeer } {
  const nat = new Nat({
    localPodCIDRs: ['10.0.0.0/16'],
    localExternalCIDR: '10.70.0.0/16',
    localExternalCIDRv6: 'fd70::/64',
    conntrack: { seed: 7, ...(extra.conntrack ?? {}) },
    ...extra,
  });
  const peer = nat.addPeer({
    name: 'b',
    remote: { podCIDRs: ['10.0.0.0/16', 'fd00:b::/64'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.71.0.0/16', 'fd71:b::/64'], externalCIDRs: ['10.72.0.0/16'] },
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

  it('IPv6 host traffic is masqueraded to the IPv6 external CIDR’s first address', () => {
    const { nat, peer } = gateway();
    const p = icmpEcho({ src: 'fd18::3', dst: 'fd71:b::7', ident: 5 });
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    expect(srcOf(p)).toBe('fd70::');
    expect(dstOf(p)).toBe('fd00:b::7');
    exact(p);
    const r = icmpEcho({ src: 'fd00:b::7', dst: 'fd70::', ident: portsOf(p)[0], type: ICMPV6_ECHO_REPLY });
    expect(nat.inbound(r.buf, r.off, r.len, peer, 0)).toBe(NAT_FORWARD);
    expect(dstOf(r)).toBe('fd18::3');
    exact(r);
  });

  it('packets for the SNAT address without a flow are dropped and counted', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: REMOTE_REAL, dst: '10.70.0.0', sport: 53, dport: 40000 });
    expect(nat.inbound(p.buf, p.off, p.len, peer, 0)).toBe(NatDrop.NoConntrack);
    expect(nat.drops[NatDrop.NoConntrack]).toBe(1);
    expect(nat.stats().drops.NoConntrack).toBe(1);
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

  it('a non-first fragment that would need conntrack is dropped with its reason', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 1, dport: 2 });
    p.buf[p.off + 6] = 0x00;
    p.buf[p.off + 7] = 0x10; // fragment offset 128 bytes
    fillIpv4Checksum(p.buf, p.off);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NatDrop.SnatFragment);
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

describe('conntrack timeouts (virtual clock)', () => {
  const S = 1000;
  it('UDP: 30 s without a reply, 120 s once replied', () => {
    const { nat, peer } = gateway();
    const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 1111, dport: 53 });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    const late = replyTo(p);
    expect(nat.inbound(late.buf, late.off, late.len, peer, 30 * S)).toBe(NatDrop.NoConntrack);
    expect(nat.conntrack.size).toBe(0);

    const q = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 1111, dport: 53 });
    nat.outbound(q.buf, q.off, q.len, peer, 100 * S);
    const r1 = replyTo(q);
    expect(nat.inbound(r1.buf, r1.off, r1.len, peer, 129 * S)).toBe(NAT_FORWARD);
    const r2 = replyTo(q);
    expect(nat.inbound(r2.buf, r2.off, r2.len, peer, 129 * S + 119 * S)).toBe(NAT_FORWARD);
    const r3 = replyTo(q);
    expect(nat.inbound(r3.buf, r3.off, r3.len, peer, 129 * S + 119 * S + 120 * S)).toBe(NatDrop.NoConntrack);
  });

  function tcpFlow(nat: Nat, peer: NatPeer, flags: number, now: number, dir: 'out' | 'in', sport = 2222): number {
    const p =
      dir === 'out'
        ? tcpPacket({ src: HOST, dst: REMOTE_AT_A, sport, dport: 80, flags })
        : tcpPacket({ src: REMOTE_REAL, dst: '10.70.0.0', sport: 80, dport: sport, flags });
    return dir === 'out' ? nat.outbound(p.buf, p.off, p.len, peer, now) : nat.inbound(p.buf, p.off, p.len, peer, now);
  }
  function state(nat: Nat): number {
    for (let e = 0; e < nat.conntrack.capacity; e++) if (nat.conntrack.state[e] !== 0) return nat.conntrack.state[e]!;
    return 0;
  }

  it('TCP: SYN_SENT short, ESTABLISHED long, FIN/TIME_WAIT short, RST closes', () => {
    const { nat, peer } = gateway();
    tcpFlow(nat, peer, TCP_FLAG_SYN, 0, 'out');
    expect(state(nat)).toBe(CT_TCP_SYN_SENT);
    // Unanswered SYN: gone after the transitory timeout (240 s).
    expect(tcpFlow(nat, peer, TCP_FLAG_SYN | TCP_FLAG_ACK, 240 * S, 'in')).toBe(NatDrop.NoConntrack);

    tcpFlow(nat, peer, TCP_FLAG_SYN, 1000 * S, 'out');
    tcpFlow(nat, peer, TCP_FLAG_SYN | TCP_FLAG_ACK, 1001 * S, 'in');
    expect(state(nat)).toBe(CT_TCP_SYN_RECV);
    tcpFlow(nat, peer, TCP_FLAG_ACK, 1002 * S, 'out');
    expect(state(nat)).toBe(CT_TCP_ESTABLISHED);
    // Idle for 2 hours: still there (established timeout 2 h 4 min, RFC 5382).
    expect(tcpFlow(nat, peer, TCP_FLAG_ACK, 1002 * S + 7200 * S, 'in')).toBe(NAT_FORWARD);
    const t = 1002 * S + 7200 * S;
    tcpFlow(nat, peer, TCP_FLAG_FIN | TCP_FLAG_ACK, t + S, 'out');
    expect(state(nat)).toBe(CT_TCP_FIN_WAIT);
    tcpFlow(nat, peer, TCP_FLAG_FIN | TCP_FLAG_ACK, t + 2 * S, 'in');
    expect(state(nat)).toBe(CT_TCP_TIME_WAIT);
    expect(tcpFlow(nat, peer, TCP_FLAG_ACK, t + 2 * S + 240 * S, 'in')).toBe(NatDrop.NoConntrack);

    // RST → CLOSE, then gone after 10 s.
    tcpFlow(nat, peer, TCP_FLAG_SYN, 20_000 * S, 'out', 3333);
    tcpFlow(nat, peer, TCP_FLAG_SYN | TCP_FLAG_ACK, 20_000 * S, 'in', 3333);
    tcpFlow(nat, peer, TCP_FLAG_RST, 20_001 * S, 'in', 3333);
    expect(state(nat)).toBe(CT_TCP_CLOSE);
    expect(tcpFlow(nat, peer, TCP_FLAG_ACK, 20_011 * S, 'in', 3333)).toBe(NatDrop.NoConntrack);
  });

  it('an outbound RST without a flow is dropped; a mid-stream segment is picked up', () => {
    const { nat, peer } = gateway();
    expect(tcpFlow(nat, peer, TCP_FLAG_RST, 0, 'out')).toBe(NatDrop.NoConntrack);
    expect(tcpFlow(nat, peer, TCP_FLAG_ACK, 0, 'out')).toBe(NAT_FORWARD);
    expect(state(nat)).toBe(CT_TCP_ESTABLISHED);
    // Unanswered pickups only get the transitory timeout.
    expect(tcpFlow(nat, peer, TCP_FLAG_ACK, 240 * S, 'in')).toBe(NatDrop.NoConntrack);
  });

  it('expire() frees expired entries with bounded work per call', () => {
    const { nat, peer } = gateway({ conntrack: { capacity: 64 } });
    for (let i = 0; i < 10; i++) {
      const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 100 + i, dport: 53 });
      nat.outbound(p.buf, p.off, p.len, peer, 0);
    }
    expect(nat.expire(29 * S)).toBe(0);
    // Ten live slots (0..9) in a 64-slot table: budget 4 inspects 4 slots per call.
    expect(nat.expire(30 * S, 4)).toBe(4);
    expect(nat.conntrack.size).toBe(6);
    expect(nat.expire(30 * S, 4)).toBe(4);
    expect(nat.expire(30 * S, 4)).toBe(2);
    expect(nat.conntrack.size).toBe(0);
    expect(nat.conntrack.stats().expired).toBe(10);
  });
});

describe('bounded table', () => {
  it('evicts the least recently used entry at capacity and counts it', () => {
    const { nat, peer } = gateway({ conntrack: { capacity: 4 } });
    const flows: Pkt[] = [];
    for (let i = 0; i < 4; i++) {
      const p = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 100 + i, dport: 53 });
      nat.outbound(p.buf, p.off, p.len, peer, i);
      flows.push(p);
    }
    // Refresh flow 0 so flow 1 becomes the oldest.
    const again = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 100, dport: 53 });
    nat.outbound(again.buf, again.off, again.len, peer, 10);
    const fifth = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 200, dport: 53 });
    nat.outbound(fifth.buf, fifth.off, fifth.len, peer, 11);
    expect(nat.conntrack.size).toBe(4);
    expect(nat.conntrack.stats().evicted).toBe(1);
    const r1 = replyTo(flows[1]!);
    expect(nat.inbound(r1.buf, r1.off, r1.len, peer, 12)).toBe(NatDrop.NoConntrack);
    for (const i of [0, 2, 3]) {
      const r = replyTo(flows[i]!);
      expect(nat.inbound(r.buf, r.off, r.len, peer, 12)).toBe(NAT_FORWARD);
    }
  });

  it('prefers an expired entry over the least recently used live one', () => {
    const { nat, peer } = gateway({ conntrack: { capacity: 3 } });
    // Flow 0: TCP SYN at t=0 (transitory 240 s). Flow 1: UDP at t=1 (30 s). Flow 2: TCP at t=2.
    const a = tcpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 1, dport: 80, flags: TCP_FLAG_SYN });
    nat.outbound(a.buf, a.off, a.len, peer, 0);
    const b = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 2, dport: 53 });
    nat.outbound(b.buf, b.off, b.len, peer, 1);
    const c = tcpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 3, dport: 80, flags: TCP_FLAG_SYN });
    nat.outbound(c.buf, c.off, c.len, peer, 2);
    // At t=60 s the UDP flow has expired; the TCP flow 0 is older but alive.
    const d = udpPacket({ src: HOST, dst: REMOTE_AT_A, sport: 4, dport: 53 });
    nat.outbound(d.buf, d.off, d.len, peer, 60_000);
    const st = nat.conntrack.stats();
    expect(st.evicted).toBe(0);
    expect(st.expired).toBe(1);
    const ra = replyTo(a);
    ra.buf[33] = TCP_FLAG_SYN | TCP_FLAG_ACK;
    const fixed = recomputeAll(ra);
    expect(nat.inbound(fixed, 0, fixed.length, peer, 60_001)).toBe(NAT_FORWARD);
  });

  it('refuses a flow when no SNAT port is left towards that endpoint', () => {
    const { nat, peer } = gateway({ conntrack: { capacity: 16, portMin: 5000, portMax: 5002 } });
    const res: number[] = [];
    for (let i = 0; i < 4; i++) {
      const p = udpPacket({ src: `172.18.0.${i + 1}`, dst: REMOTE_AT_A, sport: 7000, dport: 53 });
      res.push(nat.outbound(p.buf, p.off, p.len, peer, 0));
    }
    // First keeps 7000, then 5000..5002 → four flows fit; the fifth does not.
    expect(res).toEqual([NAT_FORWARD, NAT_FORWARD, NAT_FORWARD, NAT_FORWARD]);
    const p = udpPacket({ src: '172.18.0.9', dst: REMOTE_AT_A, sport: 7000, dport: 53 });
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NatDrop.SnatPortsExhausted);
    expect(nat.conntrack.stats().portExhausted).toBe(1);
  });
});

describe('IP mappings (Liqo IP resources)', () => {
  it('external address ↔ real address, both directions, stateless', () => {
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
    expect(nat.conntrack.size).toBe(0);
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
