// packet/ipv6.ts isIpv6LinkLocalControl: which IPv6 packets are the kernel's link-local control.
import { describe, expect, it } from 'vitest';
import { isIpv6LinkLocalControl } from '../../src/packet/ipv6.js';
import { icmpEcho, udpPacket } from './factory.js';

const is = (src: string, dst: string): boolean => {
  const p = icmpEcho({ src, dst, headroom: 4 });
  return isIpv6LinkLocalControl(p.buf, p.off, p.len);
};

describe('isIpv6LinkLocalControl', () => {
  it('link-local scope destinations (ff02::/16, ffX2::, fe80::/10) and fe80:: sources', () => {
    expect(is('fe80::1', 'ff02::2')).toBe(true); // router solicitation
    expect(is('fe80::1', 'ff02::16')).toBe(true); // MLDv2 report
    expect(is('::', 'ff02::1:ff12:3456')).toBe(true); // DAD neighbour solicitation
    expect(is('fd00::1', 'ff12::1')).toBe(true); // transient group, link-local scope
    expect(is('fd00::1', 'fe80::2')).toBe(true);
    expect(is('fe80::1', 'fd00::2')).toBe(true);
    expect(is('febf::1', 'fd00::2')).toBe(true); // last of fe80::/10
  });

  it('not: global or site scope, IPv4, short buffers', () => {
    expect(is('fd00::1', 'fd00::2')).toBe(false);
    expect(is('fd00::1', 'ff05::2')).toBe(false);
    expect(is('fec0::1', 'fd00::2')).toBe(false);
    expect(is('::', 'fd00::2')).toBe(false);
    const v4 = udpPacket({ src: '10.0.0.1', dst: '224.0.0.22', sport: 1, dport: 2 });
    expect(isIpv6LinkLocalControl(v4.buf, v4.off, v4.len)).toBe(false);
    const p = icmpEcho({ src: 'fe80::1', dst: 'ff02::2' });
    expect(isIpv6LinkLocalControl(p.buf, p.off, 39)).toBe(false);
  });
});
