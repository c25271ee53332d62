/**
 * Cross-check against scapy 2.5 (an independent implementation): scapy builds packets and we
 * read them; we build packets and scapy recomputes their checksums and parses their fields.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/packet/addr.js';
import { arpOperation, arpValid, ARP_SPA_OFFSET, ARP_TPA_OFFSET } from '../../src/packet/arp.js';
import { ETH_HEADER_LEN, ethType, formatMac } from '../../src/packet/ethernet.js';
import {
  icmpCode,
  icmpEchoId,
  icmpEchoSeq,
  icmpType,
  icmpv4ChecksumValid,
  icmpv6ChecksumValid,
} from '../../src/packet/icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_SRC_OFFSET,
  ipv4DontFragment,
  ipv4FragmentOffset,
  ipv4HeaderLen,
  ipv4HeaderValid,
  ipv4Identification,
  ipv4MoreFragments,
  ipv4Protocol,
  ipv4TotalLength,
  ipv4Ttl,
  ipVersion,
} from '../../src/packet/ipv4.js';
import {
  chainOffset,
  chainProtocol,
  IPV6_DST_OFFSET,
  IPV6_SRC_OFFSET,
  ipv6FlowLabel,
  ipv6HeaderValid,
  ipv6HopLimit,
  ipv6NextHeader,
  ipv6PayloadLength,
  ipv6TrafficClass,
  ipv6TransportOffset,
} from '../../src/packet/ipv6.js';
import {
  tcpAck,
  tcpChecksumValidV4,
  tcpChecksumValidV6,
  tcpDstPort,
  tcpFindMssOption,
  tcpFlags,
  tcpHeaderLen,
  tcpSeq,
  tcpSrcPort,
  tcpWindow,
} from '../../src/packet/tcp.js';
import {
  udpChecksum,
  udpChecksumValidV4,
  udpChecksumValidV6,
  udpDstPort,
  udpLength,
  udpSrcPort,
  writeIpv4UdpHeaders,
  writeIpv6UdpHeaders,
} from '../../src/packet/udp.js';
import { parseAddress } from '../../src/packet/addr.js';
import { icmpEcho, tcpPacket, udpPacket } from './factory.js';
import { needs, missingPythonModule } from '../util/requirements.js';
import { toHex, fromHex } from '../util/hex.js';

const PY = '/usr/bin/python3';
const scapyMissing = needs({ other: [missingPythonModule(PY, 'scapy', 'python3-scapy', 'import scapy.all')] });
const skipped = scapyMissing ? ` (skipped: ${scapyMissing})` : '';

function py(script: string, input = ''): string {
  const r = spawnSync(PY, ['-c', `import sys, json\nfrom scapy.all import *\n${script}`], {
    input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`scapy script failed: ${r.stderr}`);
  return r.stdout.trim();
}

describe.skipIf(scapyMissing !== null)(`packets crafted by scapy read back with the same fields${skipped}`, () => {
  const out = py(`
pkts = {
 'udp4': IP(src='10.1.2.3', dst='192.168.100.200', ttl=17, id=0xbeef, flags='DF')/UDP(sport=40000, dport=6091)/Raw(b'x'*13),
 'tcp4': IP(src='172.16.0.9', dst='10.0.0.1', ttl=64)/TCP(sport=51234, dport=443, seq=0xdeadbeef, ack=7, flags='SA', window=29200, options=[('NOP', None), ('MSS', 1360), ('SAckOK', b''), ('WScale', 7)]),
 'icmp4': IP(src='1.1.1.1', dst='2.2.2.2')/ICMP(type=8, id=0x1234, seq=77)/Raw(b'ping!'),
 'frag4': IP(src='1.1.1.1', dst='2.2.2.2', flags='MF', frag=185, proto=17)/Raw(b'y'*24),
 'udp6': IPv6(src='fd00::1', dst='2001:db8::ff', hlim=9, tc=0xb8, fl=0xabcde)/UDP(sport=5353, dport=51840)/Raw(b'hello'),
 'tcp6ext': IPv6(src='fd00::a', dst='fd00::b')/IPv6ExtHdrHopByHop()/IPv6ExtHdrDestOpt()/TCP(sport=1, dport=2, options=[('MSS', 1220)]),
 'icmp6': IPv6(src='fe80::1', dst='ff02::1')/ICMPv6EchoRequest(id=0x4444, seq=3, data=b'abc'),
 'frag6': IPv6(src='fd00::1', dst='fd00::2')/IPv6ExtHdrFragment(offset=100, m=1, nh=17)/Raw(b'z'*16),
 'arp': Ether(src='02:00:00:00:00:01', dst='ff:ff:ff:ff:ff:ff')/ARP(op=1, hwsrc='02:00:00:00:00:01', psrc='10.0.0.1', pdst='10.0.0.254'),
}
print(json.dumps({k: bytes(v).hex() for k, v in pkts.items()}))
`);
  const p = JSON.parse(out) as Record<string, string>;
  const get = (k: string): Uint8Array => fromHex(p[k]!);

  it('IPv4 + UDP', () => {
    const b = get('udp4');
    expect(ipVersion(b, 0)).toBe(4);
    expect(ipv4HeaderValid(b, 0, b.length)).toBe(true);
    expect(ipv4HeaderLen(b, 0)).toBe(20);
    expect(ipv4TotalLength(b, 0)).toBe(b.length);
    expect(ipv4Ttl(b, 0)).toBe(17);
    expect(ipv4Identification(b, 0)).toBe(0xbeef);
    expect(ipv4DontFragment(b, 0)).toBe(true);
    expect(ipv4Protocol(b, 0)).toBe(17);
    expect(formatAddress(b, IPV4_SRC_OFFSET, 4)).toBe('10.1.2.3');
    expect(formatAddress(b, IPV4_DST_OFFSET, 4)).toBe('192.168.100.200');
    expect(udpSrcPort(b, 20)).toBe(40000);
    expect(udpDstPort(b, 20)).toBe(6091);
    expect(udpLength(b, 20)).toBe(8 + 13);
    expect(udpChecksumValidV4(b, 0, 20, 21)).toBe(true);
  });

  it('IPv4 + TCP with options', () => {
    const b = get('tcp4');
    const t = 20;
    expect(tcpSrcPort(b, t)).toBe(51234);
    expect(tcpDstPort(b, t)).toBe(443);
    expect(tcpSeq(b, t)).toBe(0xdeadbeef);
    expect(tcpAck(b, t)).toBe(7);
    expect(tcpFlags(b, t)).toBe(0x12);
    expect(tcpWindow(b, t)).toBe(29200);
    const mss = tcpFindMssOption(b, t, b.length - t);
    expect(mss).toBeGreaterThan(t);
    expect((b[mss]! << 8) | b[mss + 1]!).toBe(1360);
    expect(tcpChecksumValidV4(b, 0, t, b.length - t)).toBe(true);
    expect(tcpHeaderLen(b, t)).toBe(b.length - t);
  });

  it('ICMPv4 echo', () => {
    const b = get('icmp4');
    expect(icmpType(b, 20)).toBe(8);
    expect(icmpCode(b, 20)).toBe(0);
    expect(icmpEchoId(b, 20)).toBe(0x1234);
    expect(icmpEchoSeq(b, 20)).toBe(77);
    expect(icmpv4ChecksumValid(b, 20, b.length - 20)).toBe(true);
  });

  it('IPv4 fragment fields', () => {
    const b = get('frag4');
    expect(ipv4MoreFragments(b, 0)).toBe(true);
    expect(ipv4FragmentOffset(b, 0)).toBe(185 * 8);
  });

  it('IPv6 + UDP: traffic class, flow label, hop limit, checksum', () => {
    const b = get('udp6');
    expect(ipVersion(b, 0)).toBe(6);
    expect(ipv6HeaderValid(b, 0, b.length)).toBe(true);
    expect(ipv6HeaderValid(b, 0, b.length - 1)).toBe(false);
    expect(ipv6TrafficClass(b, 0)).toBe(0xb8);
    expect(ipv6FlowLabel(b, 0)).toBe(0xabcde);
    expect(ipv6HopLimit(b, 0)).toBe(9);
    expect(ipv6NextHeader(b, 0)).toBe(17);
    expect(ipv6PayloadLength(b, 0)).toBe(13);
    expect(formatAddress(b, IPV6_SRC_OFFSET, 6)).toBe('fd00::1');
    expect(formatAddress(b, IPV6_DST_OFFSET, 6)).toBe('2001:db8::ff');
    expect(udpChecksumValidV6(b, 0, 40, 13)).toBe(true);
  });

  it('IPv6 extension header chain is skipped to TCP', () => {
    const b = get('tcp6ext');
    const r = ipv6TransportOffset(b, 0, b.length);
    expect(chainProtocol(r)).toBe(6);
    const t = chainOffset(r);
    expect(t).toBe(40 + 8 + 8);
    expect(tcpSrcPort(b, t)).toBe(1);
    const mss = tcpFindMssOption(b, t, b.length - t);
    expect((b[mss]! << 8) | b[mss + 1]!).toBe(1220);
    expect(tcpChecksumValidV6(b, 0, t, b.length - t)).toBe(true);
    expect(ipv6TransportOffset(b, 0, 50)).toBe(-1); // truncated inside the chain
  });

  it('ICMPv6 echo', () => {
    const b = get('icmp6');
    expect(icmpType(b, 40)).toBe(128);
    expect(icmpEchoId(b, 40)).toBe(0x4444);
    expect(icmpEchoSeq(b, 40)).toBe(3);
    expect(icmpv6ChecksumValid(b, 0, 40, b.length - 40)).toBe(true);
  });

  it('IPv6 non-first fragment is reported as a fragment', () => {
    const b = get('frag6');
    const r = ipv6TransportOffset(b, 0, b.length);
    expect(chainProtocol(r)).toBe(44);
    expect(chainOffset(r)).toBe(40);
  });

  it('Ethernet + ARP request', () => {
    const b = get('arp');
    expect(ethType(b, 0)).toBe(0x0806);
    expect(formatMac(b, 6)).toBe('02:00:00:00:00:01');
    expect(arpValid(b, ETH_HEADER_LEN, b.length - ETH_HEADER_LEN)).toBe(true);
    expect(arpOperation(b, ETH_HEADER_LEN)).toBe(1);
    expect(formatAddress(b, ETH_HEADER_LEN + ARP_SPA_OFFSET, 4)).toBe('10.0.0.1');
    expect(formatAddress(b, ETH_HEADER_LEN + ARP_TPA_OFFSET, 4)).toBe('10.0.0.254');
  });
});

describe.skipIf(scapyMissing !== null)(`packets we build are parsed by scapy with matching checksums${skipped}`, () => {
  it('factory packets and encapsulation headers', () => {
    const built: Record<string, string> = {};
    built.udp4 = ((p) => toHex(p.buf, p.off, p.len))(
      udpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 999, dport: 6091, payload: new Uint8Array(17).fill(7) }),
    );
    built.udp6 = ((p) => toHex(p.buf, p.off, p.len))(
      udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 999, dport: 51840 }),
    );
    built.tcp4 = ((p) => toHex(p.buf, p.off, p.len))(
      tcpPacket({
        src: '10.0.0.1',
        dst: '10.0.0.2',
        sport: 1111,
        dport: 80,
        mss: 1400,
        seq: 123456789,
        payload: new Uint8Array([1, 2, 3]),
      }),
    );
    built.tcp6 = ((p) => toHex(p.buf, p.off, p.len))(
      tcpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1111, dport: 80, mss: 1380 }),
    );
    built.icmp4 = ((p) => toHex(p.buf, p.off, p.len))(
      icmpEcho({ src: '10.0.0.1', dst: '10.0.0.2', ident: 9, seq: 10 }),
    );
    built.icmp6 = ((p) => toHex(p.buf, p.off, p.len))(icmpEcho({ src: 'fd00::1', dst: 'fd00::2', ident: 9, seq: 10 }));
    // Headroom encapsulation: inner packet placed first, outer headers written in front.
    const inner = icmpEcho({ src: '10.200.0.1', dst: '10.201.0.1' });
    const buf = new Uint8Array(64 + inner.len);
    buf.set(inner.buf.subarray(0, inner.len), 64);
    const n4 = writeIpv4UdpHeaders(
      buf,
      64 - 28,
      parseAddress('192.0.2.1'),
      parseAddress('192.0.2.2'),
      50000,
      6091,
      inner.len,
      true,
      63,
      7,
    );
    built.encap4 = toHex(buf, 64 - 28, n4);
    expect(udpChecksum(buf, 64 - 8)).not.toBe(0);
    const n6 = writeIpv6UdpHeaders(
      buf,
      64 - 48,
      parseAddress('2001:db8::1'),
      parseAddress('2001:db8::2'),
      50000,
      6091,
      inner.len,
      true,
      5,
      0x20,
      0x12345,
    );
    built.encap6 = toHex(buf, 64 - 48, n6);

    const out = py(
      `
d = json.loads(sys.stdin.read())
res = {}
for k, h in d.items():
    raw = bytes.fromhex(h)
    pkt = IP(raw) if k.endswith('4') else IPv6(raw)
    # Re-serialise with checksums cleared so scapy recomputes them, and compare bytes.
    clone = pkt.copy()
    for layer in (IP, UDP, TCP, ICMP):
        if clone.haslayer(layer):
            clone[layer].chksum = None
    if clone.haslayer(ICMPv6EchoRequest):
        clone[ICMPv6EchoRequest].cksum = None
    if clone.haslayer(IP): clone[IP].len = None
    if clone.haslayer(UDP): clone[UDP].len = None
    if clone.haslayer(IPv6): clone[IPv6].plen = None
    info = {'same': bytes(clone) == raw, 'summary': pkt.summary()}
    if pkt.haslayer(UDP): info['dport'] = pkt[UDP].dport
    if pkt.haslayer(TCP): info['mss'] = dict((o[0], o[1]) for o in pkt[TCP].options).get('MSS')
    if k.startswith('encap'):
        inner = IP(bytes(pkt[UDP].payload))
        info['inner'] = inner.dst
        info['ttl'] = pkt[IP].ttl if k == 'encap4' else pkt[IPv6].hlim
    res[k] = info
print(json.dumps(res))
`,
      JSON.stringify(built),
    );
    const res = JSON.parse(out) as Record<
      string,
      { same: boolean; summary: string; dport?: number; mss?: number; inner?: string; ttl?: number }
    >;
    for (const [k, info] of Object.entries(res)) expect({ k, same: info.same }).toEqual({ k, same: true });
    expect(res.udp4!.dport).toBe(6091);
    expect(res.tcp4!.mss).toBe(1400);
    expect(res.tcp6!.mss).toBe(1380);
    expect(res.encap4!.inner).toBe('10.201.0.1');
    expect(res.encap4!.ttl).toBe(63);
    expect(res.encap6!.inner).toBe('10.201.0.1');
    expect(res.encap6!.ttl).toBe(5);
  });
});
