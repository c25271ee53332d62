/**
 * Tunnel MTU handling: TCP MSS clamping on SYN / SYN-ACK, and the ICMP Fragmentation Needed /
 * Packet Too Big reply built in place of an oversized packet (validated with our validators and,
 * independently, with scapy 2.5), rate-limited by a `now`-driven token bucket — through the
 * gateway's data path (gateway-nat.ts: the router's peer table and the configuration's compiled
 * rules; the clamp is the rules' tcpmssclamp, IPv4 as Liqo's family ip tables).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/packet/addr.js';
import {
  ICMPV4_CODE_FRAG_NEEDED,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV4_TIME_EXCEEDED,
  ICMPV6_PACKET_TOO_BIG,
  icmpCode,
  icmpType,
  icmpv4ChecksumValid,
  icmpv4NextHopMtu,
  icmpv6ChecksumValid,
  icmpv6Mtu,
} from '../../src/packet/icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_SRC_OFFSET,
  fillIpv4Checksum,
  ipv4HeaderValid,
  ipv4Protocol,
  ipv4TotalLength,
} from '../../src/packet/ipv4.js';
import {
  IPV6_DST_OFFSET,
  IPV6_SRC_OFFSET,
  ipv6HeaderValid,
  ipv6NextHeader,
  ipv6PayloadLength,
} from '../../src/packet/ipv6.js';
import { TCP_FLAG_ACK, TCP_FLAG_SYN, tcpFindMssOption } from '../../src/packet/tcp.js';
import { TokenBucket } from '../../src/ratelimit/token-bucket.js';
import type { NatConfig } from '../../src/nat/config.js';
import { NAT_FORWARD, NAT_REPLY, NatDrop } from '../../src/nat/results.js';
import { tcpPacket, udpPacket } from '../packet/factory.js';
import { GatewayNat, type GatewayPeer } from './gateway-nat.js';
import { bytesOf, icmpErrorPacket, recomputeAll, withHeadroom, type Pkt } from './helpers.js';
import { needs, missingPythonModule } from '../util/requirements.js';

function gateway(extra: Partial<NatConfig> = {}, mtu?: number): { nat: GatewayNat; peer: GatewayPeer } {
  const nat = new GatewayNat({
    localPodCIDRs: ['10.0.0.0/16', 'fd00:a::/48'],
    localExternalCIDR: '10.70.0.0/16',
    conntrack: { seed: 3 },
    ...extra,
  });
  const peer = nat.addPeer({
    name: 'b',
    remote: { podCIDRs: ['10.0.0.0/16', 'fd00:a::/48'], externalCIDRs: [] },
    remapped: { podCIDRs: ['10.71.0.0/16', 'fd71:b::/48'], externalCIDRs: [] },
    ...(mtu === undefined ? {} : { mtu }),
  });
  return { nat, peer };
}

function mssOf(p: Pkt): number {
  const t = p.off + (p.buf[p.off]! >>> 4 === 6 ? 40 : 20);
  const o = tcpFindMssOption(p.buf, t, p.len - (t - p.off));
  return o < 0 ? -1 : (p.buf[o]! << 8) | p.buf[o + 1]!;
}

function exact(p: Pkt): void {
  expect(Buffer.from(bytesOf(p)).toString('hex')).toBe(Buffer.from(recomputeAll(p)).toString('hex'));
}

describe('MSS clamping', () => {
  it('clamps a SYN’s MSS to MTU − 40 (IPv4), checksum exact', () => {
    const { nat, peer } = gateway();
    const v4 = tcpPacket({ src: '10.0.0.1', dst: '10.71.0.2', sport: 1, dport: 2, flags: TCP_FLAG_SYN, mss: 1460 });
    nat.outbound(v4.buf, v4.off, v4.len, peer, 0);
    expect(mssOf(v4)).toBe(1300);
    exact(v4);
    expect(nat.mssClamped).toBe(1);
  });

  it('clamps a SYN-ACK arriving from the tunnel too; uses the peer’s own MTU', () => {
    const { nat, peer } = gateway({}, 1200);
    const p = tcpPacket({
      src: '10.0.0.2',
      dst: '10.0.0.1',
      sport: 2,
      dport: 1,
      flags: TCP_FLAG_SYN | TCP_FLAG_ACK,
      mss: 1460,
    });
    nat.inbound(p.buf, p.off, p.len, peer, 0);
    expect(mssOf(p)).toBe(1160);
    exact(p);
  });

  it('leaves a SYN without an MSS option, a smaller MSS and non-SYN segments byte-identical', () => {
    const { nat, peer } = gateway();
    const cases = [
      tcpPacket({
        src: '10.0.0.9',
        dst: '10.0.0.1',
        sport: 2,
        dport: 1,
        flags: TCP_FLAG_SYN,
        options: [1, 1, 3, 3, 7, 0],
      }),
      tcpPacket({ src: '10.0.0.9', dst: '10.0.0.1', sport: 2, dport: 1, flags: TCP_FLAG_SYN, mss: 1200 }),
      tcpPacket({ src: '10.0.0.9', dst: '10.0.0.1', sport: 2, dport: 1, flags: TCP_FLAG_ACK, mss: 9000 }),
    ];
    for (const p of cases) {
      const before = bytesOf(p);
      // Inbound with a source outside the peer's CIDRs: nothing but the clamp could change it.
      p.buf[p.off + 12] = 192;
      before[12] = 192;
      fillIpv4Checksum(p.buf, p.off);
      fillIpv4Checksum(before, 0);
      expect(nat.inbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
      expect(Buffer.from(bytesOf(p)).equals(Buffer.from(before))).toBe(true);
    }
    expect(nat.mssClamped).toBe(0);
  });

  it('handles an MSS option at an odd offset (after one NOP)', () => {
    const { nat, peer } = gateway();
    const p = tcpPacket({
      src: '10.0.0.1',
      dst: '10.71.0.2',
      sport: 1,
      dport: 2,
      flags: TCP_FLAG_SYN,
      options: [1, 2, 4, 0x23, 0x28, 1, 1, 1],
    });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    expect(mssOf(p)).toBe(1300);
    exact(p);
    expect(nat.mssClamped).toBe(1);
  });

  it('clampMss: false disables clamping', () => {
    const { nat, peer } = gateway({ clampMss: false });
    const p = tcpPacket({ src: '10.0.0.1', dst: '10.71.0.2', sport: 1, dport: 2, flags: TCP_FLAG_SYN, mss: 1460 });
    nat.outbound(p.buf, p.off, p.len, peer, 0);
    expect(mssOf(p)).toBe(1460);
  });
});

const HEADROOM = 80;

function oversizeV4(df = true): Pkt {
  const p = udpPacket({
    src: '10.0.3.4',
    dst: '10.71.5.6',
    sport: 4444,
    dport: 53,
    payload: new Uint8Array(1400).map((_, i) => i & 0xff),
  });
  if (!df) {
    p.buf[p.off + 6] = 0;
    fillIpv4Checksum(p.buf, p.off);
  }
  return withHeadroom(p, HEADROOM, 64);
}

describe('oversized packets: Fragmentation Needed / Packet Too Big', () => {
  it('DF set and larger than the tunnel MTU → ICMP type 3 code 4 with next-hop MTU, in place', () => {
    const { nat, peer } = gateway({ icmpSourceV4: '10.80.0.1' });
    const p = oversizeV4();
    const original = bytesOf(p);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_REPLY);
    const n = nat.replyLength;
    expect(n).toBe(576); // RFC 1812 §4.3.2.3: as much as fits in 576 bytes
    const b = p.buf;
    const o = p.off;
    expect(ipv4HeaderValid(b, o, n)).toBe(true);
    expect(ipv4TotalLength(b, o)).toBe(576);
    expect(ipv4Protocol(b, o)).toBe(1);
    // Related to the packet's dnat-ed connection, the error leaves from the address the packet
    // was sent to, over the configured source (the kernel's nf_nat_icmp_reply_translation;
    // README "Rules: deviations", "not a deviation").
    expect(formatAddress(b, o + IPV4_SRC_OFFSET, 4)).toBe('10.71.5.6');
    expect(formatAddress(b, o + IPV4_DST_OFFSET, 4)).toBe('10.0.3.4');
    expect(icmpType(b, o + 20)).toBe(ICMPV4_DEST_UNREACHABLE);
    expect(icmpCode(b, o + 20)).toBe(ICMPV4_CODE_FRAG_NEEDED);
    expect(icmpv4NextHopMtu(b, o + 20)).toBe(1340);
    expect(icmpv4ChecksumValid(b, o + 20, n - 20)).toBe(true);
    // The quote is the packet as the sender sent it (untranslated), so its socket matches it.
    expect(Buffer.from(b.subarray(o + 28, o + n)).equals(Buffer.from(original.subarray(0, 548)))).toBe(true);
    expect(nat.replies).toBe(1);
  });

  it('without a configured source the error comes from the original destination', () => {
    const { nat, peer } = gateway();
    const p = oversizeV4();
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_REPLY);
    expect(formatAddress(p.buf, p.off + IPV4_SRC_OFFSET, 4)).toBe('10.71.5.6');
  });

  it('DF clear: forwarded (translated), not answered', () => {
    const { nat, peer } = gateway();
    const p = oversizeV4(false);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
    exact({ buf: p.buf, off: p.off, len: p.len });
  });

  it('IPv6 → ICMPv6 Packet Too Big (type 2) of at most 1280 bytes', () => {
    const { nat, peer } = gateway();
    const q = udpPacket({ src: 'fd00:a::4', dst: 'fd71:b::6', sport: 1, dport: 2, payload: new Uint8Array(1500) });
    const p = withHeadroom(q, HEADROOM);
    expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_REPLY);
    const n = nat.replyLength;
    expect(n).toBe(1280);
    const b = p.buf;
    const o = p.off;
    expect(ipv6HeaderValid(b, o, n)).toBe(true);
    expect(ipv6PayloadLength(b, o)).toBe(1240);
    expect(ipv6NextHeader(b, o)).toBe(58);
    expect(formatAddress(b, o + IPV6_DST_OFFSET, 6)).toBe('fd00:a::4');
    expect(formatAddress(b, o + IPV6_SRC_OFFSET, 6)).toBe('fd71:b::6');
    expect(icmpType(b, o + 40)).toBe(ICMPV6_PACKET_TOO_BIG);
    expect(icmpv6Mtu(b, o + 40)).toBe(1340);
    expect(icmpv6ChecksumValid(b, o, o + 40, n - 40)).toBe(true);
  });

  it('rate-limited by a token bucket driven by `now`', () => {
    const { nat, peer } = gateway({ icmpRatePerSecond: 2, icmpBurst: 3 });
    const res: number[] = [];
    for (let i = 0; i < 5; i++) {
      const p = oversizeV4();
      res.push(nat.outbound(p.buf, p.off, p.len, peer, 1000));
    }
    expect(res).toEqual([NAT_REPLY, NAT_REPLY, NAT_REPLY, NatDrop.TooBigRateLimited, NatDrop.TooBigRateLimited]);
    const later = oversizeV4();
    expect(nat.outbound(later.buf, later.off, later.len, peer, 1499)).toBe(NatDrop.TooBigRateLimited);
    const refilled = oversizeV4();
    expect(nat.outbound(refilled.buf, refilled.off, refilled.len, peer, 1500)).toBe(NAT_REPLY);
    expect(nat.drops[NatDrop.TooBigRateLimited]).toBe(3);
  });

  it('never answers an ICMP error or a bad source (RFC 1812 §4.3.2.7); counts a TooBig drop', () => {
    const { nat, peer } = gateway();
    const inner = udpPacket({ src: '10.71.1.1', dst: '10.0.0.1', sport: 1, dport: 2, payload: new Uint8Array(1400) });
    const err = withHeadroom(icmpErrorPacket('10.0.0.1', '10.71.1.1', ICMPV4_TIME_EXCEEDED, 0, inner), 0);
    err.buf[err.off + 6] = 0x40; // DF
    fillIpv4Checksum(err.buf, err.off);
    expect(nat.outbound(err.buf, err.off, err.len, peer, 0)).toBe(NatDrop.TooBig);
    const bad = oversizeV4();
    bad.buf[bad.off + 12] = 0; // source 0.x.x.x
    fillIpv4Checksum(bad.buf, bad.off);
    expect(nat.outbound(bad.buf, bad.off, bad.len, peer, 0)).toBe(NatDrop.TooBig);
    expect(nat.drops[NatDrop.TooBig]).toBe(2);
  });

  it('TokenBucket refills proportionally and caps at the burst', () => {
    const tb = new TokenBucket(10, 2);
    expect([tb.take(0), tb.take(0), tb.take(0)]).toEqual([true, true, false]);
    expect(tb.take(99)).toBe(false);
    expect(tb.take(100)).toBe(true);
    expect([tb.take(10_000), tb.take(10_000), tb.take(10_000)]).toEqual([true, true, false]);
  });
});

const PY = '/usr/bin/python3';
const scapyMissing = needs({ other: [missingPythonModule(PY, 'scapy', 'python3-scapy', 'import scapy.all')] });

describe.skipIf(scapyMissing !== null)(
  `scapy parses the generated ICMP errors and agrees on every field and checksum${scapyMissing ? ` (skipped: ${scapyMissing})` : ''}`,
  () => {
    it('Fragmentation Needed (IPv4) and Packet Too Big (IPv6)', () => {
      const { nat, peer } = gateway({ icmpSourceV4: '10.80.0.1', icmpSourceV6: 'fd80::1' });
      const p4 = oversizeV4();
      expect(nat.outbound(p4.buf, p4.off, p4.len, peer, 0)).toBe(NAT_REPLY);
      const h4 = Buffer.from(p4.buf.subarray(p4.off, p4.off + nat.replyLength)).toString('hex');
      const q = withHeadroom(
        tcpPacket({
          src: 'fd00:a::4',
          dst: 'fd71:b::6',
          sport: 1,
          dport: 2,
          flags: TCP_FLAG_ACK,
          payload: new Uint8Array(1400),
        }),
        8,
      );
      expect(nat.outbound(q.buf, q.off, q.len, peer, 0)).toBe(NAT_REPLY);
      const h6 = Buffer.from(q.buf.subarray(q.off, q.off + nat.replyLength)).toString('hex');
      const script = `
import sys, json
from scapy.all import IP, IPv6, ICMP, ICMPv6PacketTooBig, IPerror, UDPerror, IPerror6
d = json.loads(sys.stdin.read())
p = IP(bytes.fromhex(d['v4']))
r = {}
r['v4'] = dict(src=p.src, dst=p.dst, len=p.len, proto=p.proto, type=p[ICMP].type, code=p[ICMP].code,
    mtu=p[ICMP].nexthopmtu, ipsum=p.chksum, icmpsum=p[ICMP].chksum,
    inner_src=p[IPerror].src, inner_dst=p[IPerror].dst, inner_sport=p[UDPerror].sport, inner_dport=p[UDPerror].dport)
p.show2(dump=True)
c = p.copy(); del c.chksum; del c[ICMP].chksum
c = IP(bytes(c))
r['v4']['ipsum_rebuilt'] = c.chksum
r['v4']['icmpsum_rebuilt'] = c[ICMP].chksum
q = IPv6(bytes.fromhex(d['v6']))
r['v6'] = dict(src=q.src, dst=q.dst, plen=q.plen, nh=q.nh, type=q[ICMPv6PacketTooBig].type, mtu=q[ICMPv6PacketTooBig].mtu,
    cksum=q[ICMPv6PacketTooBig].cksum, inner_src=q[IPerror6].src, inner_dst=q[IPerror6].dst)
c6 = q.copy(); del c6[ICMPv6PacketTooBig].cksum
c6 = IPv6(bytes(c6))
r['v6']['cksum_rebuilt'] = c6[ICMPv6PacketTooBig].cksum
print(json.dumps(r))
`;
      const out = spawnSync(PY, ['-c', script], {
        input: JSON.stringify({ v4: h4, v6: h6 }),
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(out.status, out.stderr).toBe(0);
      const r = JSON.parse(out.stdout) as { v4: Record<string, number | string>; v6: Record<string, number | string> };
      expect(r.v4).toMatchObject({
        src: '10.71.5.6', // the address the packet was sent to (related to its dnat-ed connection)
        dst: '10.0.3.4',
        len: 576,
        proto: 1,
        type: 3,
        code: 4,
        mtu: 1340,
        inner_src: '10.0.3.4',
        inner_dst: '10.71.5.6',
        inner_sport: 4444,
        inner_dport: 53,
      });
      expect(r.v4.ipsum_rebuilt).toBe(r.v4.ipsum);
      expect(r.v4.icmpsum_rebuilt).toBe(r.v4.icmpsum);
      expect(r.v6).toMatchObject({
        src: 'fd71:b::6', // likewise (the ip6 table's dnat)
        dst: 'fd00:a::4',
        plen: 1240,
        nh: 58,
        type: 2,
        mtu: 1340,
        inner_src: 'fd00:a::4',
        inner_dst: 'fd71:b::6',
      });
      expect(r.v6.cksum_rebuilt).toBe(r.v6.cksum);
    });

    it('a masqueraded TCP SYN with clamped MSS: scapy recomputes the same checksums', () => {
      const { nat, peer } = gateway();
      const p = tcpPacket({
        src: '172.18.0.3',
        dst: '10.71.2.7',
        sport: 40000,
        dport: 443,
        flags: TCP_FLAG_SYN,
        options: [1, 2, 4, 0x05, 0xb4, 1, 4, 2],
      });
      expect(nat.outbound(p.buf, p.off, p.len, peer, 0)).toBe(NAT_FORWARD);
      const hex = Buffer.from(bytesOf(p)).toString('hex');
      const script = `
import sys, json
from scapy.all import IP, TCP
p = IP(bytes.fromhex(sys.stdin.read().strip()))
c = p.copy(); del c.chksum; del c[TCP].chksum
c = IP(bytes(c))
mss = [v for k, v in p[TCP].options if k == 'MSS'][0]
print(json.dumps(dict(src=p.src, dst=p.dst, sport=p[TCP].sport, mss=mss, ip=[p.chksum, c.chksum], tcp=[p[TCP].chksum, c[TCP].chksum])))
`;
      const out = spawnSync(PY, ['-c', script], { input: hex, encoding: 'utf8', timeout: 60_000 });
      expect(out.status, out.stderr).toBe(0);
      const r = JSON.parse(out.stdout) as {
        src: string;
        dst: string;
        sport: number;
        mss: number;
        ip: number[];
        tcp: number[];
      };
      expect(r).toMatchObject({ src: '10.70.0.0', dst: '10.0.2.7', sport: 40000, mss: 1300 });
      expect(r.ip[1]).toBe(r.ip[0]);
      expect(r.tcp[1]).toBe(r.tcp[0]);
    });
  },
);
