import { describe, expect, it } from 'vitest';
import {
  AddressParseError,
  addressEquals,
  compareAddress,
  copyAddress,
  formatAddress,
  formatPrefix,
  isAddress,
  makePrefix,
  parseAddress,
  parsePrefix,
  prefixContains,
  prefixContainsPrefix,
  prefixesOverlap,
  prefixNthAddress,
  readIpv4U32,
  writeIpv4U32,
} from '../../src/packet/addr.js';
import { Prng } from '../util/prng.js';

const hex = (a: Uint8Array): string => Buffer.from(a).toString('hex');

describe('parseAddress / formatAddress', () => {
  it('parses IPv4 dotted quads', () => {
    expect([...parseAddress('192.168.0.1')]).toEqual([192, 168, 0, 1]);
    expect([...parseAddress('0.0.0.0')]).toEqual([0, 0, 0, 0]);
    expect([...parseAddress('255.255.255.255')]).toEqual([255, 255, 255, 255]);
  });

  it('parses IPv6 forms of RFC 4291 §2.2', () => {
    expect(hex(parseAddress('2001:DB8:0:0:8:800:200C:417A'))).toBe('20010db8000000000008080020' + '0c417a');
    expect(hex(parseAddress('ff01::101'))).toBe('ff010000000000000000000000000101');
    expect(hex(parseAddress('::1'))).toBe('00000000000000000000000000000001');
    expect(hex(parseAddress('::'))).toBe('0'.repeat(32));
    expect(hex(parseAddress('1::'))).toBe('0001' + '0'.repeat(28));
    expect(hex(parseAddress('::13.1.68.3'))).toBe('0'.repeat(24) + '0d014403');
    expect(hex(parseAddress('::FFFF:129.144.52.38'))).toBe('0'.repeat(20) + 'ffff81903426');
    expect(hex(parseAddress('1:2:3:4:5:6:7:8'))).toBe('00010002000300040005000600070008');
    expect(hex(parseAddress('1:2:3:4:5:6:1.2.3.4'))).toBe('000100020003000400050006' + '01020304');
  });

  it.each([
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '01.2.3.4',
    '1.2.3.-1',
    '1..2.3',
    '1.2.3.4 ',
    'a.b.c.d',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    ':1::',
    '1:::2',
    'fffff::',
    '::1.2.3',
    '1:2:3:4:5:6:7:1.2.3.4',
    '1:2:3:4:5:6:7',
    '1:',
    ':1',
    '1::2:',
    'g::1',
    '1:2:3:4:5:6:7:8::',
    '::1.2.3.4:5',
    '10.0.0',
    '10.0.0.256',
    '10.00.0.1',
    '12345::',
    '1:2:3:4:5:6:7::8',
    // RFC 4291 §2.2 form 3: the dotted IPv4 part is only allowed as the last 32 bits.
    '1.2.3.4::',
  ])('rejects %j with AddressParseError naming it', (text) => {
    let err: unknown;
    try {
      parseAddress(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AddressParseError);
    expect((err as AddressParseError).text).toBe(text);
    expect((err as Error).message).toContain(JSON.stringify(text));
    expect(isAddress(text)).toBe(false);
  });

  it('formats IPv6 in RFC 5952 canonical form', () => {
    const cases: [string, string][] = [
      ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'], // §4.1 leading zeros, §4.2.1
      ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
      ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // §4.2.2 single zero group kept
      ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'], // §4.2.3 longest run
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // §4.2.3 first of equal runs
      ['2001:DB8::AbCd', '2001:db8::abcd'], // §4.3 lowercase
      ['::', '::'],
      ['::1', '::1'],
      ['1::', '1::'],
      ['::ffff:192.0.2.1', '::ffff:192.0.2.1'], // §5 mixed notation for IPv4-mapped
      ['::ffff:c000:0201', '::ffff:192.0.2.1'],
      ['1:0:0:0:0:0:0:0', '1::'],
    ];
    for (const [input, canonical] of cases) expect(formatAddress(parseAddress(input))).toBe(canonical);
  });

  it('formats an address inside a packet at an offset', () => {
    const pkt = new Uint8Array(40);
    pkt.set(parseAddress('10.1.2.3'), 12);
    expect(formatAddress(pkt, 12, 4)).toBe('10.1.2.3');
    pkt.set(parseAddress('fd00::7'), 20);
    expect(formatAddress(pkt, 20, 6)).toBe('fd00::7');
    expect(() => formatAddress(pkt, 30, 6)).toThrow(RangeError);
  });

  it('round-trips random addresses and agrees with the WHATWG URL serializer (fixed seed)', () => {
    const rng = new Prng(5952);
    for (let i = 0; i < 2000; i++) {
      const a = rng.bytes(16);
      // Zero out random groups so that "::" runs of all lengths occur.
      for (let g = 0; g < 8; g++) if (rng.chance(0.45)) a[2 * g] = a[2 * g + 1] = 0;
      const text = formatAddress(a);
      expect(hex(parseAddress(text))).toBe(hex(a));
      const mapped = a.subarray(0, 10).every((x) => x === 0) && a[10] === 0xff && a[11] === 0xff;
      if (!mapped) expect(`[${text}]`).toBe(new URL(`http://[${text}]/`).hostname);
      const v4 = rng.bytes(4);
      expect(hex(parseAddress(formatAddress(v4)))).toBe(hex(v4));
    }
  });
});

describe('prefixes', () => {
  it('parsePrefix zeroes host bits; strict mode rejects them and suggests the network', () => {
    const p = parsePrefix('10.1.2.3/16');
    expect(p.family).toBe(4);
    expect(p.prefixLen).toBe(16);
    expect(formatPrefix(p)).toBe('10.1.0.0/16');
    expect(() => parsePrefix('10.1.2.3/16', true)).toThrow(/did you mean 10\.1\.0\.0\/16/);
    expect(formatPrefix(parsePrefix('fd00:1:ffff::ff/33'))).toBe('fd00:1:8000::/33');
    expect(formatPrefix(parsePrefix('fd00:1:7fff::ff/33'))).toBe('fd00:1::/33');
    expect(formatPrefix(parsePrefix('fd00:1:8000::/33'))).toBe('fd00:1:8000::/33');
    expect(formatPrefix(parsePrefix('0.0.0.0/0'))).toBe('0.0.0.0/0');
    expect(formatPrefix(parsePrefix('::/0'))).toBe('::/0');
  });

  it.each([
    '10.0.0.0',
    '10.0.0.0/33',
    '::/129',
    '10.0.0.0/08',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '10.0.0/8',
    'x/8',
    '10.0.0.0/-1',
  ])('parsePrefix rejects %j', (text) => {
    expect(() => parsePrefix(text)).toThrow(AddressParseError);
  });

  it('prefixContains reads in place, at any offset, at every boundary', () => {
    const p = parsePrefix('192.168.128.0/17');
    const buf = new Uint8Array(10);
    const at = (s: string): boolean => {
      buf.set(parseAddress(s), 3);
      return prefixContains(p, buf, 3);
    };
    expect(at('192.168.128.0')).toBe(true);
    expect(at('192.168.255.255')).toBe(true);
    expect(at('192.168.127.255')).toBe(false);
    expect(at('192.169.128.0')).toBe(false);
    expect(prefixContains(parsePrefix('0.0.0.0/0'), parseAddress('1.2.3.4'), 0)).toBe(true);
    const host = parsePrefix('fd00::1/128');
    expect(prefixContains(host, parseAddress('fd00::1'), 0)).toBe(true);
    expect(prefixContains(host, parseAddress('fd00::2'), 0)).toBe(false);
  });

  it('overlap and containment between prefixes', () => {
    const a = parsePrefix('10.0.0.0/8');
    const b = parsePrefix('10.20.0.0/16');
    const c = parsePrefix('11.0.0.0/8');
    expect(prefixesOverlap(a, b)).toBe(true);
    expect(prefixesOverlap(b, a)).toBe(true);
    expect(prefixesOverlap(a, c)).toBe(false);
    expect(prefixesOverlap(a, parsePrefix('::/0'))).toBe(false);
    expect(prefixContainsPrefix(a, b)).toBe(true);
    expect(prefixContainsPrefix(b, a)).toBe(false);
    const d = parsePrefix('10.0.0.0/16');
    const e = parsePrefix('10.0.5.0/24');
    expect(prefixesOverlap(d, e)).toBe(true);
    expect(prefixesOverlap(e, d)).toBe(true);
    expect(prefixesOverlap(d, parsePrefix('10.1.0.0/16'))).toBe(false);
    expect(prefixesOverlap(parsePrefix('0.0.0.0/0'), d)).toBe(true);
    expect(prefixContains(d, parseAddress('10.0.255.255'), 0)).toBe(true);
    expect(prefixContains(d, parseAddress('10.1.0.0'), 0)).toBe(false);
    // Non-byte-aligned prefix: the /12 boundary of 172.16.0.0/12.
    const f = parsePrefix('172.16.0.0/12');
    expect(prefixContains(f, parseAddress('172.31.255.255'), 0)).toBe(true);
    expect(prefixContains(f, parseAddress('172.32.0.0'), 0)).toBe(false);
  });

  it('makePrefix copies and masks; prefixNthAddress counts from the network address', () => {
    const raw = parseAddress('10.1.2.3');
    const p = makePrefix(raw, 24);
    raw[0] = 99;
    expect(formatPrefix(p)).toBe('10.1.2.0/24');
    expect(formatAddress(prefixNthAddress(p, 1))).toBe('10.1.2.1');
    expect(formatAddress(prefixNthAddress(p, 255))).toBe('10.1.2.255');
    expect(() => prefixNthAddress(p, 256)).toThrow(RangeError);
    expect(formatAddress(prefixNthAddress(parsePrefix('10.0.0.0/8'), 65537))).toBe('10.1.0.1');
    expect(formatAddress(prefixNthAddress(parsePrefix('fd00::/64'), 0x1_0000_0001))).toBe('fd00::1:0:1');
    expect(() => makePrefix(new Uint8Array(4), 33)).toThrow(RangeError);
  });
});

describe('address helpers', () => {
  it('compare, equal, copy at offsets; u32 conversions', () => {
    const a = parseAddress('10.0.0.1');
    const b = parseAddress('10.0.0.2');
    expect(compareAddress(a, 0, b, 0, 4)).toBeLessThan(0);
    expect(compareAddress(b, 0, a, 0, 4)).toBeGreaterThan(0);
    expect(addressEquals(a, 0, a, 0, 4)).toBe(true);
    expect(addressEquals(a, 0, b, 0, 4)).toBe(false);
    const pkt = new Uint8Array(20);
    copyAddress(pkt, 16, b, 0, 4);
    expect(addressEquals(pkt, 16, b, 0, 4)).toBe(true);
    expect(readIpv4U32(parseAddress('255.1.2.3'), 0)).toBe(0xff010203);
    writeIpv4U32(pkt, 0, 0xc0a80001);
    expect(formatAddress(pkt, 0, 4)).toBe('192.168.0.1');
  });
});
