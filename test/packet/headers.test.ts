import { describe, expect, it } from 'vitest';
import { formatAddress, parseAddress } from '../../src/packet/addr.js';
import { internetChecksum } from '../../src/packet/checksum.js';
import {
  ARP_OP_REPLY,
  ARP_OP_REQUEST,
  ARP_PACKET_LEN,
  ARP_SHA_OFFSET,
  ARP_SPA_OFFSET,
  ARP_THA_OFFSET,
  ARP_TPA_OFFSET,
  arpOperation,
  arpRequestToReply,
  arpValid,
  writeArp,
} from '../../src/packet/arp.js';
import {
  BROADCAST_MAC,
  ETH_HEADER_LEN,
  ETH_SRC_OFFSET,
  ETHERTYPE_ARP,
  ethDstIsBroadcast,
  ethDstIsMulticast,
  ethType,
  formatMac,
  MacParseError,
  parseMac,
  writeEthHeader,
} from '../../src/packet/ethernet.js';
import {
  ICMP_ERROR_PAYLOAD_OFFSET,
  icmpv4NextHopMtu,
  icmpv6Mtu,
  isIcmpv4Error,
  isIcmpv6Error,
} from '../../src/packet/icmp.js';
import { IPV4_DST_OFFSET, ipv4HeaderValid, ipv4IsFragment, ipVersion, writeIpv4Header } from '../../src/packet/ipv4.js';
import { IPV6_CHAIN_INVALID, ipv6HeaderValid, ipv6TransportOffset } from '../../src/packet/ipv6.js';
import { TCP_OPT_NOP, tcpFindMssOption, tcpHeaderValid } from '../../src/packet/tcp.js';
import { tcpPacket, udpPacket } from './factory.js';

describe('IPv4 header validation rejects bad network input without throwing', () => {
  const good = udpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2 });
  // Each mutation re-seals the 20-byte header checksum, so only the targeted check can fail.
  const mutate = (f: (b: Uint8Array) => void, reseal: boolean): Uint8Array => {
    const b = good.buf.slice();
    f(b);
    if (reseal) {
      b[10] = b[11] = 0;
      const c = internetChecksum(b, 0, 20);
      b[10] = c >>> 8;
      b[11] = c & 0xff;
    }
    return b;
  };
  it('accepts the good packet', () => expect(ipv4HeaderValid(good.buf, 0, good.len)).toBe(true));
  it.each([
    ['version 6', (b: Uint8Array) => (b[0] = 0x65)],
    ['IHL 4', (b: Uint8Array) => (b[0] = 0x44)],
    ['IHL beyond data', (b: Uint8Array) => (b[0] = 0x4f)],
    ['total length beyond data', (b: Uint8Array) => (b[3] = b[3]! + 1)],
    ['total length below header', (b: Uint8Array) => ((b[2] = 0), (b[3] = 19))],
    ['bad checksum', (b: Uint8Array) => (b[10] = b[10]! ^ 0xff)],
  ])('%s', (name, f) => {
    const b = mutate(f, name !== 'bad checksum');
    expect(ipv4HeaderValid(b, 0, good.len)).toBe(false);
  });
  it('short and out-of-range views', () => {
    expect(ipv4HeaderValid(good.buf, 0, 19)).toBe(false);
    expect(ipv4HeaderValid(good.buf, 5, good.len)).toBe(false);
    expect(ipv4HeaderValid(new Uint8Array(0), 0, 0)).toBe(false);
  });
  it('writeIpv4Header refuses oversized packets (API misuse)', () => {
    const b = new Uint8Array(20);
    const a = parseAddress('1.2.3.4');
    expect(() => writeIpv4Header(b, 0, a, 0, a, 0, 17, 65516)).toThrow(RangeError);
    expect(() => writeIpv4Header(b, 1, a, 0, a, 0, 17, 0)).toThrow(RangeError);
    writeIpv4Header(b, 0, a, 0, parseAddress('5.6.7.8'), 0, 17, 0);
    expect(ipVersion(b, 0)).toBe(4);
    expect(formatAddress(b, IPV4_DST_OFFSET, 4)).toBe('5.6.7.8');
    expect(ipv4IsFragment(b, 0)).toBe(false);
  });
});

describe('IPv6', () => {
  it('header validation', () => {
    const p = udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1, dport: 2 });
    expect(ipv6HeaderValid(p.buf, 0, p.len)).toBe(true);
    expect(ipv6HeaderValid(p.buf, 0, 39)).toBe(false);
    const b = p.buf.slice();
    b[0] = 0x45;
    expect(ipv6HeaderValid(b, 0, p.len)).toBe(false);
  });

  it('extension header walk stops on a chain of unknown length garbage', () => {
    const b = new Uint8Array(40 + 16 * 8);
    b[0] = 0x60;
    b[6] = 0; // hop-by-hop, each pointing to another hop-by-hop of 8 bytes
    for (let i = 0; i < 16; i++) b[40 + i * 8] = 0;
    expect(ipv6TransportOffset(b, 0, b.length)).toBe(IPV6_CHAIN_INVALID);
  });
});

describe('TCP MSS option walking', () => {
  it('finds MSS after other options', () => {
    const p = tcpPacket({
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 1,
      dport: 2,
      options: [TCP_OPT_NOP, TCP_OPT_NOP, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 2, 4, 0x05, 0xb4],
    });
    const at = tcpFindMssOption(p.buf, p.l4, p.len - 20);
    expect((p.buf[at]! << 8) | p.buf[at + 1]!).toBe(1460);
    expect(tcpHeaderValid(p.buf, p.l4, p.len - 20)).toBe(true);
  });

  it('absent or malformed options yield -1', () => {
    const none = tcpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2 });
    expect(tcpFindMssOption(none.buf, none.l4, none.len - 20)).toBe(-1);
    const zeroLen = tcpPacket({
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 1,
      dport: 2,
      options: [8, 0, 2, 4, 5, 0xb4, 0, 0],
    });
    expect(tcpFindMssOption(zeroLen.buf, zeroLen.l4, zeroLen.len - 20)).toBe(-1);
    const overrun = tcpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, options: [2, 40, 5, 0xb4] });
    expect(tcpFindMssOption(overrun.buf, overrun.l4, overrun.len - 20)).toBe(-1);
    const badMssLen = tcpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, options: [2, 3, 5, 0] });
    expect(tcpFindMssOption(badMssLen.buf, badMssLen.l4, badMssLen.len - 20)).toBe(-1);
    const afterEol = tcpPacket({
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 1,
      dport: 2,
      options: [0, 0, 0, 0, 2, 4, 5, 0xb4],
    });
    expect(tcpFindMssOption(afterEol.buf, afterEol.l4, afterEol.len - 20)).toBe(-1);
    // Data offset claims more bytes than available.
    expect(tcpFindMssOption(afterEol.buf, afterEol.l4, 24)).toBe(-1);
    expect(tcpHeaderValid(afterEol.buf, afterEol.l4, 24)).toBe(false);
  });
});

describe('ICMP helpers', () => {
  it('classifies errors and reads MTU fields', () => {
    expect(isIcmpv4Error(3)).toBe(true);
    expect(isIcmpv4Error(11)).toBe(true);
    expect(isIcmpv4Error(8)).toBe(false);
    expect(isIcmpv6Error(2)).toBe(true);
    expect(isIcmpv6Error(128)).toBe(false);
    const m = new Uint8Array([3, 4, 0, 0, 0, 0, 0x05, 0x78]);
    expect(icmpv4NextHopMtu(m, 0)).toBe(1400);
    const m6 = new Uint8Array([2, 0, 0, 0, 0, 0, 0x05, 0x00]);
    expect(icmpv6Mtu(m6, 0)).toBe(1280);
    expect(ICMP_ERROR_PAYLOAD_OFFSET).toBe(8);
  });
});

describe('Ethernet and ARP', () => {
  it('parseMac/formatMac round trip and reject bad text', () => {
    expect(formatMac(parseMac('02:AB:cd:00:10:ff'))).toBe('02:ab:cd:00:10:ff');
    expect(formatMac(parseMac('02-ab-cd-00-10-ff'))).toBe('02:ab:cd:00:10:ff');
    for (const bad of ['02:ab:cd:00:10', '02:ab:cd:00:10:ff:00', '02:ab-cd:00:10:ff', 'zz:ab:cd:00:10:ff', '']) {
      expect(() => parseMac(bad)).toThrow(MacParseError);
    }
  });

  it('builds an ARP request and answers it in place', () => {
    const asker = parseMac('02:00:00:00:00:01');
    const me = parseMac('02:00:00:00:00:fe');
    const frame = new Uint8Array(ETH_HEADER_LEN + ARP_PACKET_LEN);
    writeEthHeader(frame, 0, BROADCAST_MAC, 0, asker, 0, ETHERTYPE_ARP);
    writeArp(
      frame,
      ETH_HEADER_LEN,
      ARP_OP_REQUEST,
      asker,
      parseAddress('10.0.0.1'),
      new Uint8Array(6),
      parseAddress('10.0.0.254'),
    );
    expect(ethDstIsBroadcast(frame, 0)).toBe(true);
    expect(ethDstIsMulticast(frame, 0)).toBe(true);
    expect(arpValid(frame, ETH_HEADER_LEN, ARP_PACKET_LEN)).toBe(true);
    arpRequestToReply(frame, ETH_HEADER_LEN, me, 0);
    const a = ETH_HEADER_LEN;
    expect(arpOperation(frame, a)).toBe(ARP_OP_REPLY);
    expect(formatMac(frame, a + ARP_SHA_OFFSET)).toBe('02:00:00:00:00:fe');
    expect(formatMac(frame, a + ARP_THA_OFFSET)).toBe('02:00:00:00:00:01');
    expect(formatAddress(frame, a + ARP_SPA_OFFSET, 4)).toBe('10.0.0.254');
    expect(formatAddress(frame, a + ARP_TPA_OFFSET, 4)).toBe('10.0.0.1');
    expect(formatMac(frame, 0)).toBe('02:00:00:00:00:01');
    expect(formatMac(frame, ETH_SRC_OFFSET)).toBe('02:00:00:00:00:fe');
    expect(ethType(frame, 0)).toBe(ETHERTYPE_ARP);
    expect(ethDstIsMulticast(frame, 0)).toBe(false);
  });

  it('arpValid rejects other hardware/protocol types and truncation', () => {
    const b = new Uint8Array(ARP_PACKET_LEN);
    writeArp(b, 0, ARP_OP_REQUEST, new Uint8Array(6), new Uint8Array(4), new Uint8Array(6), new Uint8Array(4));
    expect(arpValid(b, 0, ARP_PACKET_LEN)).toBe(true);
    expect(arpValid(b, 0, ARP_PACKET_LEN - 1)).toBe(false);
    const c = b.slice();
    c[3] = 0xdd; // ptype 0x08dd
    expect(arpValid(c, 0, ARP_PACKET_LEN)).toBe(false);
    const d = b.slice();
    d[7] = 3; // RARP request opcode
    expect(arpValid(d, 0, ARP_PACKET_LEN)).toBe(false);
  });
});
