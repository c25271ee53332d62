import { describe, expect, test } from 'vitest';
import { parsePrefix, prefixesOverlap } from '../../src/packet/addr.js';
import { Ipam, IpamExhaustedError, IpamRequestError } from '../../src/control/ipam.js';

const LOCAL = ['10.0.0.0/16', '10.96.0.0/12', '10.70.0.0/16', '10.80.0.0/16'];

describe('Ipam (Liqo policy)', () => {
  test("keeps the peer's exact CIDR when it is free", () => {
    const ipam = new Ipam({ reserved: LOCAL });
    expect(ipam.allocate('b/pod', '10.1.0.0/16')).toBe('10.1.0.0/16');
    expect(ipam.allocate('c/pod', '192.168.10.0/24')).toBe('192.168.10.0/24');
  });

  test('a CIDR colliding with a local network gets the first free prefix of the same size', () => {
    const ipam = new Ipam({ reserved: LOCAL });
    // 10.0.0.0/16 is the local pod CIDR: the first free /16 in 10/8 is 10.1.0.0/16.
    expect(ipam.allocate('b/pod', '10.0.0.0/16')).toBe('10.1.0.0/16');
    // Next request for the same CIDR by another peer skips 10.1 (allocated) too.
    expect(ipam.allocate('c/pod', '10.0.0.0/16')).toBe('10.2.0.0/16');
    // The external CIDR 10.70/16 of two peers: collides locally → first free /16.
    expect(ipam.allocate('b/ext', '10.70.0.0/16')).toBe('10.3.0.0/16');
  });

  test('never overlaps local, service, internal or external CIDRs or earlier allocations', () => {
    const ipam = new Ipam({ reserved: LOCAL });
    const out: string[] = [];
    for (let i = 0; i < 120; i++) out.push(ipam.allocate(`p${i}`, '10.0.0.0/16'));
    const all = [...out, ...LOCAL].map((c) => parsePrefix(c, true));
    for (let i = 0; i < all.length; i++) {
      for (let j = 0; j < i; j++) expect(prefixesOverlap(all[i]!, all[j]!), `${i} vs ${j}`).toBe(false);
    }
    // The service /12 (10.96–10.111) is skipped as a block.
    expect(out).not.toContain('10.96.0.0/16');
    expect(out).toContain('10.112.0.0/16');
  });

  test('a request outside the pools is moved into them; larger prefixes are aligned', () => {
    const ipam = new Ipam({ reserved: LOCAL });
    expect(ipam.allocate('b/pod', '100.64.0.0/16')).toBe('10.1.0.0/16');
    // A /12 must start on a /12 boundary: 10.0/12 holds local CIDRs, 10.16/12 is free.
    expect(ipam.allocate('c/pod', '10.0.0.0/12')).toBe('10.16.0.0/12');
  });

  test('pools are used in order; exhaustion is a typed error', () => {
    const ipam = new Ipam({ reserved: ['10.0.0.0/8'] });
    expect(ipam.allocate('a', '10.0.0.0/13')).toBe('172.16.0.0/13');
    expect(() => ipam.allocate('b', '10.0.0.0/9')).toThrow(IpamExhaustedError); // no /9 fits in 172.16/12 or 192.168/16
    const small = new Ipam({ pools: ['192.168.0.0/23'], reserved: [] });
    expect(small.allocate('a', '192.168.0.0/24')).toBe('192.168.0.0/24');
    expect(small.allocate('b', '192.168.0.0/24')).toBe('192.168.1.0/24');
    expect(() => small.allocate('c', '192.168.0.0/24')).toThrow(IpamExhaustedError);
    expect(small.release('a')).toBe(true);
    expect(small.allocate('c', '192.168.0.0/24')).toBe('192.168.0.0/24');
  });

  test('idempotent per owner; IPv6 and bad text rejected', () => {
    const ipam = new Ipam({ reserved: LOCAL });
    const first = ipam.allocate('b/pod', '10.0.0.0/16');
    expect(ipam.allocate('b/pod', '10.0.0.0/16')).toBe(first);
    expect(ipam.allocations()).toEqual(new Map([['b/pod', first]]));
    expect(() => ipam.allocate('x', 'fd00::/64')).toThrow(IpamRequestError);
    expect(() => ipam.allocate('x', '10.0.0.1/16')).toThrow(/host bits/);
  });
});
