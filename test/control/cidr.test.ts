import { describe, expect, test } from 'vitest';
import {
  CidrParseError, canonicalCidr, cidrContains, cidrContainsCidr, cidrsOverlap, formatIp, parseCidr,
  parseEndpoint, parseIp,
} from '../../src/control/cidr.js';

describe('parseIp / formatIp', () => {
  test('IPv4 round trip and strict octets', () => {
    expect([...parseIp('10.70.0.1')]).toEqual([10, 70, 0, 1]);
    expect(formatIp(parseIp('255.255.255.255'))).toBe('255.255.255.255');
    for (const bad of ['10.0.0', '10.0.0.256', '10.00.0.1', '1.2.3.4.5', '', 'a.b.c.d']) {
      expect(() => parseIp(bad), bad).toThrow(CidrParseError);
    }
  });

  test('IPv6 forms and RFC 5952 canonical output', () => {
    // RFC 5952 §4: lower case, leading zeros dropped, longest zero run compressed, first on tie,
    // a single zero group is not compressed.
    expect(formatIp(parseIp('2001:0DB8:0000:0000:0000:0000:0000:0001'))).toBe('2001:db8::1');
    expect(formatIp(parseIp('2001:db8:0:1:1:1:1:1'))).toBe('2001:db8:0:1:1:1:1:1');
    expect(formatIp(parseIp('2001:0:0:1:0:0:0:1'))).toBe('2001:0:0:1::1');
    expect(formatIp(parseIp('2001:db8:0:0:1:0:0:1'))).toBe('2001:db8::1:0:0:1');
    expect(formatIp(parseIp('::'))).toBe('::');
    expect(formatIp(parseIp('::1'))).toBe('::1');
    expect([...parseIp('::ffff:192.0.2.1').slice(10)]).toEqual([0xff, 0xff, 192, 0, 2, 1]);
    for (const bad of ['1::2::3', '1:2:3:4:5:6:7', '1:2:3:4:5:6:7:8:9', '12345::', 'g::1', '1:2:3:4:5:6:7::8']) {
      expect(() => parseIp(bad), bad).toThrow(CidrParseError);
    }
  });
});

describe('parseCidr', () => {
  test('canonical text, host bits rejected with a suggestion', () => {
    expect(canonicalCidr('10.0.0.0/16')).toBe('10.0.0.0/16');
    expect(canonicalCidr('FD00:0::/64')).toBe('fd00::/64');
    expect(() => parseCidr('10.0.0.1/16')).toThrow(/did you mean 10\.0\.0\.0\/16/);
    expect(parseCidr('10.0.0.1/16', false).addr).toEqual(new Uint8Array([10, 0, 0, 0]));
    expect(() => parseCidr('10.0.0.0')).toThrow(/prefix-length/);
    expect(() => parseCidr('10.0.0.0/33')).toThrow(/exceeds 32/);
    expect(() => parseCidr('::/129')).toThrow(/exceeds 128/);
    expect(() => parseCidr('10.0.0.0/x')).toThrow(CidrParseError);
    expect(parseCidr('0.0.0.0/0').prefixLen).toBe(0);
  });

  test('overlap and containment', () => {
    const a = parseCidr('10.0.0.0/16');
    expect(cidrsOverlap(a, parseCidr('10.0.5.0/24'))).toBe(true);
    expect(cidrsOverlap(parseCidr('10.0.5.0/24'), a)).toBe(true);
    expect(cidrsOverlap(a, parseCidr('10.1.0.0/16'))).toBe(false);
    expect(cidrsOverlap(a, parseCidr('::/0'))).toBe(false);
    expect(cidrsOverlap(parseCidr('0.0.0.0/0'), a)).toBe(true);
    expect(cidrContains(a, parseIp('10.0.255.255'))).toBe(true);
    expect(cidrContains(a, parseIp('10.1.0.0'))).toBe(false);
    expect(cidrContainsCidr(a, parseCidr('10.0.1.0/24'))).toBe(true);
    expect(cidrContainsCidr(parseCidr('10.0.1.0/24'), a)).toBe(false);
    // Non-byte-aligned prefix: /12 boundary of 172.16.0.0/12.
    const p = parseCidr('172.16.0.0/12');
    expect(cidrContains(p, parseIp('172.31.255.255'))).toBe(true);
    expect(cidrContains(p, parseIp('172.32.0.0'))).toBe(false);
  });
});

describe('parseEndpoint', () => {
  test('IPv4, bracketed IPv6, DNS names', () => {
    expect(parseEndpoint('192.0.2.1:51840')).toEqual({ host: '192.0.2.1', port: 51840 });
    expect(parseEndpoint('[2001:DB8::1]:51820')).toEqual({ host: '2001:db8::1', port: 51820 });
    expect(parseEndpoint('gw.example.com:443')).toEqual({ host: 'gw.example.com', port: 443 });
  });
  test('rejections', () => {
    for (const bad of ['2001:db8::1:51820', '[10.0.0.1]:1', '1.2.3.4', '1.2.3.4:0', '1.2.3.4:65536', '[::1]51820', 'bad_host:1', '1.2.3.999:1']) {
      expect(() => parseEndpoint(bad), bad).toThrow(CidrParseError);
    }
  });
});
