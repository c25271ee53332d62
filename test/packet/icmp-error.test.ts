/**
 * Time Exceeded built in the headroom (src/packet/icmp-error.ts), checked field by field
 * against RFC 792 / RFC 4443 and with the packet validators of src/packet.
 *
 * Proves: type 11 / ICMPv6 type 3, code 0, addressed from the router to the packet's source,
 * valid IPv4 header and ICMP/ICMPv6 checksums, the original quoted unchanged right after the
 * 8-byte header and written in front of it (no copy), quotes capped at 576 (IPv4) / 1280 (IPv6)
 * bytes in total; no error about an ICMP error, a non-first fragment, or to a multicast,
 * loopback or unspecified source; too little headroom is reported, not thrown.
 */
import { describe, expect, it } from 'vitest';
import {
  ICMP_ERR_NO_HEADROOM,
  ICMP_ERR_NOT_ALLOWED,
  TIME_EXCEEDED_V4_PREFIX,
  TIME_EXCEEDED_V6_PREFIX,
  writeTimeExceeded,
} from '../../src/packet/icmp-error.js';
import { formatAddress, parseAddress } from '../../src/packet/addr.js';
import { icmpv4ChecksumValid, icmpv6ChecksumValid } from '../../src/packet/icmp.js';
import { fillIpv4Checksum, ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { icmpEcho, udpPacket } from './factory.js';

const ROUTER4 = parseAddress('10.80.0.1');
const ROUTER6 = parseAddress('fd80::1');

describe('writeTimeExceeded', () => {
  it('IPv4: a valid type 11 error in front of the untouched original', () => {
    const p = udpPacket({ src: '10.0.1.5', dst: '10.71.0.9', sport: 33434, dport: 33435, ttl: 1, headroom: 64 });
    const original = p.buf.slice(p.off, p.off + p.len);
    const n = writeTimeExceeded(p.buf, p.off, p.len, ROUTER4);
    expect(n).toBe(TIME_EXCEEDED_V4_PREFIX + p.len);
    const e = p.off - TIME_EXCEEDED_V4_PREFIX;
    expect(ipv4HeaderValid(p.buf, e, n)).toBe(true);
    expect(p.buf[e + 9]).toBe(1); // ICMP
    expect(formatAddress(p.buf, e + 12, 4)).toBe('10.80.0.1');
    expect(formatAddress(p.buf, e + 16, 4)).toBe('10.0.1.5');
    expect([p.buf[e + 20], p.buf[e + 21]]).toEqual([11, 0]);
    expect(icmpv4ChecksumValid(p.buf, e + 20, n - 20)).toBe(true);
    expect(p.buf.subarray(e + 28, e + n)).toEqual(original);
  });

  it('IPv4: the error is at most 576 bytes', () => {
    const p = udpPacket({
      src: '10.0.1.5',
      dst: '10.71.0.9',
      sport: 1,
      dport: 2,
      ttl: 1,
      headroom: 64,
      payload: new Uint8Array(1300).fill(7),
    });
    const n = writeTimeExceeded(p.buf, p.off, p.len, ROUTER4);
    expect(n).toBe(576);
    const e = p.off - TIME_EXCEEDED_V4_PREFIX;
    expect((p.buf[e + 2]! << 8) | p.buf[e + 3]!).toBe(576);
    expect(icmpv4ChecksumValid(p.buf, e + 20, n - 20)).toBe(true);
  });

  it('IPv6: a valid ICMPv6 type 3 error, at most 1280 bytes', () => {
    const small = icmpEcho({ src: 'fd00::5', dst: 'fd71::9', ttl: 1, headroom: 64 });
    let n = writeTimeExceeded(small.buf, small.off, small.len, ROUTER6);
    let e = small.off - TIME_EXCEEDED_V6_PREFIX;
    expect(n).toBe(TIME_EXCEEDED_V6_PREFIX + small.len);
    expect(small.buf[e + 6]).toBe(58);
    expect(formatAddress(small.buf, e + 8, 6)).toBe('fd80::1');
    expect(formatAddress(small.buf, e + 24, 6)).toBe('fd00::5');
    expect([small.buf[e + 40], small.buf[e + 41]]).toEqual([3, 0]);
    expect(icmpv6ChecksumValid(small.buf, e, e + 40, n - 40)).toBe(true);

    const big = udpPacket({
      src: 'fd00::5',
      dst: 'fd71::9',
      sport: 1,
      dport: 2,
      ttl: 1,
      headroom: 64,
      payload: new Uint8Array(1400),
    });
    n = writeTimeExceeded(big.buf, big.off, big.len, ROUTER6);
    e = big.off - TIME_EXCEEDED_V6_PREFIX;
    expect(n).toBe(1280);
    expect(((big.buf[e + 4]! << 8) | big.buf[e + 5]!) + 40).toBe(1280);
    expect(icmpv6ChecksumValid(big.buf, e, e + 40, n - 40)).toBe(true);
  });

  it('sends nothing about an ICMP error, a non-first fragment, or to a source that cannot take one', () => {
    const err = icmpEcho({ src: '10.0.1.5', dst: '10.71.0.9', type: 3, ttl: 1, headroom: 64 });
    expect(writeTimeExceeded(err.buf, err.off, err.len, ROUTER4)).toBe(ICMP_ERR_NOT_ALLOWED);
    const echo = icmpEcho({ src: '10.0.1.5', dst: '10.71.0.9', ttl: 1, headroom: 64 }); // a query is fine
    expect(writeTimeExceeded(echo.buf, echo.off, echo.len, ROUTER4)).toBeGreaterThan(0);
    const frag = udpPacket({ src: '10.0.1.5', dst: '10.71.0.9', sport: 1, dport: 2, ttl: 1, headroom: 64 });
    frag.buf[frag.off + 6] = 0x00;
    frag.buf[frag.off + 7] = 0x10; // fragment offset 16 × 8
    fillIpv4Checksum(frag.buf, frag.off);
    expect(writeTimeExceeded(frag.buf, frag.off, frag.len, ROUTER4)).toBe(ICMP_ERR_NOT_ALLOWED);
    for (const src of ['224.0.0.5', '127.0.0.1', '0.0.0.0']) {
      const p = udpPacket({ src, dst: '10.71.0.9', sport: 1, dport: 2, ttl: 1, headroom: 64 });
      expect(writeTimeExceeded(p.buf, p.off, p.len, ROUTER4)).toBe(ICMP_ERR_NOT_ALLOWED);
    }
    const mc6 = udpPacket({ src: 'ff02::1', dst: 'fd71::9', sport: 1, dport: 2, ttl: 1, headroom: 64 });
    expect(writeTimeExceeded(mc6.buf, mc6.off, mc6.len, ROUTER6)).toBe(ICMP_ERR_NOT_ALLOWED);
    const err6 = icmpEcho({ src: 'fd00::5', dst: 'fd71::9', type: 1, ttl: 1, headroom: 64 });
    expect(writeTimeExceeded(err6.buf, err6.off, err6.len, ROUTER6)).toBe(ICMP_ERR_NOT_ALLOWED);
  });

  it('reports too little headroom instead of writing outside the buffer', () => {
    const p = udpPacket({ src: '10.0.1.5', dst: '10.71.0.9', sport: 1, dport: 2, ttl: 1, headroom: 10 });
    const copy = p.buf.slice();
    expect(writeTimeExceeded(p.buf, p.off, p.len, ROUTER4)).toBe(ICMP_ERR_NO_HEADROOM);
    expect(p.buf).toEqual(copy);
  });
});
