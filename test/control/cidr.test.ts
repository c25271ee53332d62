import { describe, expect, test } from 'vitest';
import { AddressParseError } from '../../src/packet/addr.js';
import { EndpointParseError, canonicalCidr, formatEndpoint, parseEndpoint } from '../../src/control/cidr.js';

// Address and prefix parsing itself (src/packet/addr.ts) is tested in test/packet/addr.test.ts.

describe('canonicalCidr', () => {
  test('canonical text, host bits rejected with a suggestion', () => {
    expect(canonicalCidr('10.0.0.0/16')).toBe('10.0.0.0/16');
    expect(canonicalCidr('FD00:0::/64')).toBe('fd00::/64');
    expect(canonicalCidr('0.0.0.0/0')).toBe('0.0.0.0/0');
    expect(() => canonicalCidr('10.0.0.1/16')).toThrow(/did you mean 10\.0\.0\.0\/16/);
    expect(() => canonicalCidr('10.0.0.0')).toThrow(/prefix-length/);
    expect(() => canonicalCidr('10.0.0.0/33')).toThrow(/exceeds 32/);
    expect(() => canonicalCidr('::/129')).toThrow(/exceeds 128/);
    expect(() => canonicalCidr('10.0.0.0/x')).toThrow(AddressParseError);
    expect(() => canonicalCidr('10.0.0.256/16')).toThrow(AddressParseError);
  });
});

describe('parseEndpoint', () => {
  test('IPv4, bracketed IPv6, DNS names', () => {
    expect(parseEndpoint('192.0.2.1:51840')).toEqual({ host: '192.0.2.1', port: 51840 });
    expect(parseEndpoint('[2001:DB8::1]:51820')).toEqual({ host: '2001:db8::1', port: 51820 });
    expect(parseEndpoint('gw.example.com:443')).toEqual({ host: 'gw.example.com', port: 443 });
    expect(formatEndpoint(parseEndpoint('[2001:DB8::1]:51820'))).toBe('[2001:db8::1]:51820');
  });
  test('rejections', () => {
    for (const bad of [
      '2001:db8::1:51820',
      '[10.0.0.1]:1',
      '1.2.3.4',
      '1.2.3.4:0',
      '1.2.3.4:65536',
      '[::1]51820',
      'bad_host:1',
      '1.2.3.999:1',
      '[1::2::3]:1',
    ]) {
      let err: unknown;
      try {
        parseEndpoint(bad);
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(EndpointParseError);
      expect((err as EndpointParseError).text, bad).toBe(bad);
    }
  });
});
