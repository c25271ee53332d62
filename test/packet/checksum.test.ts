import { describe, expect, it } from 'vitest';
import {
  adjustChecksumBytes,
  checksumUpdate16,
  checksumUpdate16Bytes,
  checksumUpdate4,
  checksumVerifies,
  foldSum,
  internetChecksum,
  pseudoHeaderSumV4,
  readChecksum,
  sumWords,
} from '../../src/packet/checksum.js';
import { decrementIpv4Ttl, fillIpv4Checksum, ipv4Checksum, ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { fillUdpChecksumV4, fillUdpChecksumV6, udpChecksumValidV4, udpChecksumValidV6 } from '../../src/packet/udp.js';
import { fillTcpChecksumV4, tcpChecksumValidV4 } from '../../src/packet/tcp.js';
import { Prng } from '../util/prng.js';
import { tcpPacket, udpPacket } from './factory.js';
import { fromHex } from '../util/hex.js';

/** Straightforward reference: RFC 1071 on a fresh copy, bit-by-bit simple. */
function refChecksum(bytes: Uint8Array): number {
  let s = 0;
  for (let i = 0; i < bytes.length; i += 2) s += (bytes[i]! << 8) + (i + 1 < bytes.length ? bytes[i + 1]! : 0);
  while (s > 0xffff) s = (s & 0xffff) + Math.floor(s / 0x10000);
  return ~s & 0xffff;
}

describe('RFC 1071 internet checksum', () => {
  it('RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2', () => {
    const b = fromHex('0001f203f4f5f6f7');
    expect(foldSum(sumWords(b, 0, b.length))).toBe(0xddf2);
    expect(internetChecksum(b, 0, b.length)).toBe(0x220d);
  });

  it('a captured IPv4 header with checksum 0xb861 verifies and recomputes', () => {
    // 192.168.0.1 → 192.168.0.199, UDP, total length 115, DF, TTL 64.
    const h = fromHex('450000730000400040110000c0a80001c0a800c7');
    expect(internetChecksum(h, 0, 20)).toBe(0xb861);
    h[10] = 0xb8;
    h[11] = 0x61;
    expect(checksumVerifies(h, 0, 20)).toBe(true);
    expect(ipv4HeaderValid(h, 0, 20)).toBe(false); // total length 115 > 20 bytes available
    const full = new Uint8Array(115);
    full.set(h);
    expect(ipv4HeaderValid(full, 0, 115)).toBe(true);
    full[8] = 63; // TTL changed without fixing the checksum
    expect(ipv4HeaderValid(full, 0, 115)).toBe(false);
  });

  it('equals the reference at every offset and odd length (fixed seed)', () => {
    const rng = new Prng(1071);
    const big = rng.bytes(3000);
    for (let i = 0; i < 500; i++) {
      const off = rng.int(0, 1500);
      const len = rng.int(0, 1499);
      expect(internetChecksum(big, off, len)).toBe(refChecksum(big.slice(off, off + len)));
    }
  });

  it('foldSum handles accumulators above 2^32', () => {
    const b = new Uint8Array(200000).fill(0xff);
    // 100000 words of 0xffff: ones' complement sum is 0xffff → checksum 0.
    expect(internetChecksum(b, 0, b.length)).toBe(0);
    expect(foldSum(0x1_0000_0000 * 3 + 5)).toBe(foldSum(3 + 5));
  });
});

describe('RFC 1624 incremental update', () => {
  it('RFC 1624 §4 example: eqn. 3 gives 0x0000 where eqn. 2 would give 0xffff', () => {
    expect(checksumUpdate16(0xdd2f, 0x5555, 0x3285)).toBe(0x0000);
  });

  it('matches full recomputation for random 16-bit word changes (fixed seed)', () => {
    const rng = new Prng(1624);
    for (let i = 0; i < 3000; i++) {
      const len = 2 * rng.int(2, 40);
      const data = rng.bytes(len);
      const hc = internetChecksum(data, 0, len);
      const w = 2 * rng.int(0, len / 2 - 1);
      const oldWord = (data[w]! << 8) | data[w + 1]!;
      const newWord = rng.chance(0.1) ? oldWord : rng.nextU32() & 0xffff;
      data[w] = newWord >>> 8;
      data[w + 1] = newWord & 0xff;
      const inc = checksumUpdate16(hc, oldWord, newWord);
      const full = internetChecksum(data, 0, len);
      // Both are valid; eqn. 3 differs from recomputation only for the all-zero data case.
      expect(inc).toBe(full);
    }
  });

  it('matches recomputation for NAT-style address rewrites in IPv4 and IPv6 (fixed seed)', () => {
    const rng = new Prng(4242);
    for (let i = 0; i < 2000; i++) {
      const len = 60;
      const data = rng.bytes(len);
      const hc = internetChecksum(data, 0, len);
      const v6 = rng.chance(0.5);
      const alen = v6 ? 16 : 4;
      const at = 2 * rng.int(0, (len - alen) / 2);
      const oldAddr = data.slice(at, at + alen);
      const newAddr = rng.bytes(alen);
      const inc = v6 ? checksumUpdate16Bytes(hc, data, at, newAddr, 0) : checksumUpdate4(hc, data, at, newAddr, 0);
      data.set(newAddr, at);
      expect(inc).toBe(internetChecksum(data, 0, len));
      // And the in-place variant on a checksum field stored in the data.
      const pkt = new Uint8Array(len + 2);
      pkt.set(data, 2);
      pkt[0] = hc >>> 8;
      pkt[1] = hc & 0xff;
      pkt.set(oldAddr, 2 + at);
      const expectedBefore = internetChecksum(pkt, 2, len);
      pkt[0] = expectedBefore >>> 8;
      pkt[1] = expectedBefore & 0xff;
      adjustChecksumBytes(pkt, 0, pkt, 2 + at, newAddr, 0, alen);
      pkt.set(newAddr, 2 + at);
      expect(readChecksum(pkt, 0)).toBe(internetChecksum(pkt, 2, len));
    }
  });

  it('decrementIpv4Ttl keeps the header checksum valid', () => {
    const p = udpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, ttl: 3 });
    for (let ttl = 2; ttl >= 0; ttl--) {
      expect(decrementIpv4Ttl(p.buf, p.off)).toBe(ttl);
      expect(ipv4HeaderValid(p.buf, p.off, p.len)).toBe(true);
      const incremental = ipv4Checksum(p.buf, p.off);
      fillIpv4Checksum(p.buf, p.off);
      expect(incremental).toBe(ipv4Checksum(p.buf, p.off));
    }
    expect(() => decrementIpv4Ttl(p.buf, p.off)).toThrow(RangeError);
  });
});

describe('pseudo-header checksums', () => {
  it('UDP/TCP checksums verify after filling and fail after corruption, v4 and v6, odd lengths', () => {
    for (const len of [0, 1, 7, 8, 333]) {
      const payload = new Prng(len).bytes(len);
      const u4 = udpPacket({ src: '10.0.0.1', dst: '10.9.8.7', sport: 1234, dport: 6091, payload, headroom: 3 });
      const u6 = udpPacket({ src: 'fd00::1', dst: 'fd00:9::7', sport: 1234, dport: 51840, payload, headroom: 5 });
      const t4 = tcpPacket({ src: '10.0.0.1', dst: '10.9.8.7', sport: 40000, dport: 80, payload, mss: 1460 });
      expect(udpChecksumValidV4(u4.buf, u4.off, u4.l4, u4.len - 20)).toBe(true);
      expect(udpChecksumValidV6(u6.buf, u6.off, u6.l4, u6.len - 40)).toBe(true);
      expect(tcpChecksumValidV4(t4.buf, t4.off, t4.l4, t4.len - 20)).toBe(true);
      u4.buf[u4.off + 12] ^= 1; // source address is covered by the pseudo header
      u6.buf[u6.off + 39] ^= 0x10;
      t4.buf[t4.len - 1] ^= 0x80;
      expect(udpChecksumValidV4(u4.buf, u4.off, u4.l4, u4.len - 20)).toBe(false);
      expect(udpChecksumValidV6(u6.buf, u6.off, u6.l4, u6.len - 40)).toBe(false);
      if (len > 0) expect(tcpChecksumValidV4(t4.buf, t4.off, t4.l4, t4.len - 20)).toBe(false);
      fillUdpChecksumV4(u4.buf, u4.off, u4.l4, u4.len - 20);
      fillUdpChecksumV6(u6.buf, u6.off, u6.l4, u6.len - 40);
      fillTcpChecksumV4(t4.buf, t4.off, t4.l4, t4.len - 20);
      expect(udpChecksumValidV4(u4.buf, u4.off, u4.l4, u4.len - 20)).toBe(true);
      expect(udpChecksumValidV6(u6.buf, u6.off, u6.l4, u6.len - 40)).toBe(true);
      expect(tcpChecksumValidV4(t4.buf, t4.off, t4.l4, t4.len - 20)).toBe(true);
    }
  });

  it('a zero UDP checksum is "none" in IPv4 and invalid in IPv6 unless allowed', () => {
    const u4 = udpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, noChecksum: true });
    expect(udpChecksumValidV4(u4.buf, u4.off, u4.l4, u4.len - 20)).toBe(true);
    const u6 = udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1, dport: 2 });
    u6.buf[u6.l4 + 6] = 0;
    u6.buf[u6.l4 + 7] = 0;
    expect(udpChecksumValidV6(u6.buf, u6.off, u6.l4, u6.len - 40)).toBe(false);
    expect(udpChecksumValidV6(u6.buf, u6.off, u6.l4, u6.len - 40, true)).toBe(true);
  });

  it('pseudo-header sum equals summing an explicit pseudo header', () => {
    const ip = fromHex('450000730000400040110000c0a80001c0a800c7');
    const explicit = fromHex('c0a80001c0a800c70011005f');
    expect(foldSum(pseudoHeaderSumV4(ip, 12, 16, 17, 0x5f))).toBe(foldSum(sumWords(explicit, 0, 12)));
  });
});
