/**
 * The NAT configuration's errors name the field and what to fix (src/nat/config.ts, through the
 * peer table that validates peers), and removing a peer ends its connections (the rules that
 * bound them are gone: runtime.ts flushes them).
 */
import { describe, expect, it } from 'vitest';
import { NatConfigError, parseNatConfig } from '../../src/nat/config.js';
import { PeerTable } from '../../src/router/peer-table.js';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { GatewayNat } from './gateway-nat.js';

describe('peers', () => {
  it('removing a peer removes its connections', () => {
    const nat = new GatewayNat({ localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' });
    const peer = nat.addPeer({
      name: 'b',
      remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] },
      remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
    });
    const p = new Uint8Array(28);
    p.set([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 172, 18, 0, 1, 10, 71, 0, 1, 0, 1, 0, 2, 0, 8, 0, 0]);
    let s = 0;
    for (let i = 0; i < 20; i += 2) s += (p[i]! << 8) | p[i + 1]!;
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    p[10] = (~s >>> 8) & 0xff;
    p[11] = ~s & 0xff;
    const copy = p.slice();
    expect(nat.outbound(p, 0, 28, peer, 0)).toBe(0);
    expect(nat.conntrack.size).toBe(1);
    nat.nr.removePeer(peer);
    expect(nat.conntrack.size).toBe(0);
    expect(nat.peerTable.peers()).toEqual([]);
    const v = new IpView();
    parseIp(copy, 0, 28, v);
    expect(() => nat.peerTable.checkMtu(copy, v, peer.entry, 0)).toThrow(/removed/);
    expect(() => nat.peerTable.removePeer(peer.entry)).toThrow(/not installed/);
  });
});

describe('configuration errors name the field and what to fix', () => {
  const base = { localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' };
  const peer = (p: object) => ({ name: 'milan', remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] }, ...p });
  const cases: Array<[string, () => unknown, RegExp]> = [
    [
      'bad local CIDR',
      () => parseNatConfig({ ...base, localPodCIDRs: ['10.0.0.0/33'] }),
      /localPodCIDRs\[0\].*prefix length 33/,
    ],
    [
      'host bits set',
      () => parseNatConfig({ ...base, localExternalCIDR: '10.70.0.1/16' }),
      /localExternalCIDR.*host bits.*10\.70\.0\.0\/16/,
    ],
    [
      'IPv6 external in the IPv4 field',
      () => parseNatConfig({ ...base, localExternalCIDR: 'fd70::/64' }),
      /localExternalCIDR.*IPv4/,
    ],
    [
      'pod CIDR overlapping the external CIDR',
      () => parseNatConfig({ ...base, localPodCIDRs: ['10.70.5.0/24'] }),
      /localPodCIDRs\[0\].*overlaps the external CIDR/,
    ],
    [
      'mapping outside the external CIDR',
      () => parseNatConfig({ ...base, ipMappings: [{ externalAddress: '10.9.0.1', realAddress: '10.0.0.5' }] }),
      /ipMappings\[0\]\.externalAddress.*not inside/,
    ],
    [
      'duplicate mapping',
      () =>
        parseNatConfig({
          ...base,
          ipMappings: [
            { externalAddress: '10.70.0.9', realAddress: '10.0.0.5' },
            { externalAddress: '10.70.0.9', realAddress: '10.0.0.6' },
          ],
        }),
      /ipMappings\[1\]\.externalAddress.*already used/,
    ],
    ['MTU too small', () => parseNatConfig({ ...base, mtu: 40 }), /mtu: expected an integer in 68\.\.65535/],
    [
      'inverted port range',
      () => parseNatConfig({ ...base, conntrack: { portMin: 5000, portMax: 4000 } }),
      /conntrack\.portMax/,
    ],
    [
      'remap count mismatch',
      () => new PeerTable(base).addPeer(peer({ remapped: { podCIDRs: [], externalCIDRs: [] } })),
      /peers\[milan\]\.remapped\.podCIDRs: expected 1 entries/,
    ],
    [
      'remap length mismatch',
      () => new PeerTable(base).addPeer(peer({ remapped: { podCIDRs: ['10.71.0.0/24'], externalCIDRs: [] } })),
      /remapped\.podCIDRs\[0\].*same family and prefix length/,
    ],
    [
      'remapped overlapping a local CIDR',
      () => new PeerTable(base).addPeer(peer({})),
      /remapped\.podCIDRs\[0\].*overlaps a local pod CIDR.*remap the peer/,
    ],
    [
      'two peers with overlapping remapped CIDRs',
      () => {
        const n = new PeerTable(base);
        n.addPeer(peer({ remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] } }));
        return n.addPeer({
          name: 'rome',
          remote: { podCIDRs: ['10.0.0.0/17'], externalCIDRs: [] },
          remapped: { podCIDRs: ['10.71.128.0/17'], externalCIDRs: [] },
        });
      },
      /peers\[rome\].*overlaps peer milan/,
    ],
    [
      'duplicate peer name',
      () => {
        const n = new PeerTable(base);
        n.addPeer(peer({ remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] } }));
        return n.addPeer(peer({ remapped: { podCIDRs: ['10.72.0.0/16'], externalCIDRs: [] } }));
      },
      /peers\[milan\]: a peer with this name is already installed/,
    ],
  ];
  it.each(cases)('%s', (_name, fn, re) => {
    let err: unknown;
    try {
      fn();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(NatConfigError);
    expect((err as Error).message).toMatch(re);
  });
});
