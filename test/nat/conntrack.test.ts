/**
 * Conntrack table invariants under random operations (seeded), and configuration validation.
 */
import { describe, expect, it } from 'vitest';
import { NatConfigError, parseNatConfig } from '../../src/nat/config.js';
import { CT_FREE, CT_UDP, Conntrack, DIR_ORIGINAL, DIR_REPLY } from '../../src/nat/conntrack.js';
import { Nat } from '../../src/nat/nat.js';
import { Prng } from '../util/prng.js';

const PROTO_UDP = 17;

describe('Conntrack table', () => {
  it('random create / lookup / reply / expire / evict keeps both indexes consistent and keys unique', () => {
    const rng = new Prng(2024);
    const cap = 200;
    const ct = new Conntrack({ capacity: cap, portMin: 1000, portMax: 1007, seed: 5 });
    const buf = new Uint8Array(32); // [0..16) source, [16..32) remote
    let now = 0;
    for (let step = 0; step < 20_000; step++) {
      now += rng.int(0, 400);
      const v6 = rng.chance(0.3);
      const fam = v6 ? 6 : 4;
      const alen = v6 ? 16 : 4;
      buf.fill(0);
      buf[0] = 10;
      buf[alen - 1] = rng.int(1, 12); // few hosts
      buf[16] = 10;
      buf[16 + alen - 1] = rng.int(1, 3); // few remotes → port pressure
      const sport = rng.int(1, 20);
      const dport = rng.int(1, 2);
      let e = ct.findOriginal(fam, PROTO_UDP, buf, 0, sport, 16, dport, now);
      if (e < 0) {
        e = ct.create(fam, PROTO_UDP, buf, 0, sport, 16, dport, 0, CT_UDP, now);
        if (e < 0) continue; // ports exhausted towards this endpoint: counted
      }
      ct.update(e, rng.chance(0.3) ? DIR_REPLY : DIR_ORIGINAL, 0, now);
      // Its reply key finds the same entry.
      expect(ct.findReply(fam, PROTO_UDP, buf, 16, dport, ct.natPort[e]!, now)).toBe(e);
      if (rng.chance(0.05)) ct.expire(now, 50);
      if (rng.chance(0.01)) ct.remove(e);
      if (step % 1000 === 999) {
        // Invariants over the whole table.
        const replyKeys = new Set<string>();
        const origKeys = new Set<string>();
        let live = 0;
        for (let i = 0; i < cap; i++) {
          if (ct.state[i] === CT_FREE) continue;
          live++;
          const f = ct.family[i]!;
          const a = ct.addrOffset(i);
          const rk = `${f}|${Buffer.from(ct.remoteAddr.subarray(a, a + 16)).toString('hex')}|${ct.remotePort[i]}|${ct.natPort[i]}`;
          const ok = `${f}|${Buffer.from(ct.origAddr.subarray(a, a + 16)).toString('hex')}|${ct.origPort[i]}|${rk}`;
          expect(replyKeys.has(rk)).toBe(false);
          expect(origKeys.has(ok)).toBe(false);
          replyKeys.add(rk);
          origKeys.add(ok);
          if (ct.expires[i]! > now) {
            // Live (not expired) entries are reachable through both indexes.
            const tmp = new Uint8Array(32);
            tmp.set(ct.origAddr.subarray(a, a + 16), 0);
            tmp.set(ct.remoteAddr.subarray(a, a + 16), 16);
            expect(ct.findOriginal(f, PROTO_UDP, tmp, 0, ct.origPort[i]!, 16, ct.remotePort[i]!, now)).toBe(i);
            expect(ct.findReply(f, PROTO_UDP, tmp, 16, ct.remotePort[i]!, ct.natPort[i]!, now)).toBe(i);
          }
          expect(ct.natPort[i] === ct.origPort[i] || (ct.natPort[i]! >= 1000 && ct.natPort[i]! <= 1007)).toBe(true);
        }
        expect(live).toBe(ct.size);
        expect(live).toBeLessThanOrEqual(cap);
      }
    }
    const st = ct.stats();
    expect(st.created).toBeGreaterThan(cap);
    expect(st.evicted + st.expired).toBeGreaterThan(0);
    expect(st.portExhausted).toBeGreaterThan(0);
  });

  it('clear() and removePeer() empty the indexes', () => {
    const ct = new Conntrack({ capacity: 8, seed: 1 });
    const buf = new Uint8Array([10, 0, 0, 1, 10, 0, 0, 2]);
    const e = ct.create(4, PROTO_UDP, buf, 0, 1, 4, 2, 3, CT_UDP, 0);
    expect(ct.findOriginal(4, PROTO_UDP, buf, 0, 1, 4, 2, 0)).toBe(e);
    expect(ct.removePeer(2)).toBe(0);
    expect(ct.removePeer(3)).toBe(1);
    expect(ct.findOriginal(4, PROTO_UDP, buf, 0, 1, 4, 2, 0)).toBe(-1);
    ct.create(4, PROTO_UDP, buf, 0, 1, 4, 2, 3, CT_UDP, 0);
    ct.clear();
    expect(ct.size).toBe(0);
    expect(ct.findReply(4, PROTO_UDP, buf, 4, 2, 1, 0)).toBe(-1);
    // Usable after clear: all 8 slots.
    for (let i = 0; i < 8; i++)
      expect(ct.create(4, PROTO_UDP, buf, 0, 100 + i, 4, 2, 0, CT_UDP, 0)).toBeGreaterThanOrEqual(0);
    expect(ct.size).toBe(8);
    expect(ct.stats().evicted).toBe(0);
  });

  it('removing a peer from the NAT removes its flows', () => {
    const nat = new Nat({ localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' });
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
    expect(nat.outbound(p, 0, 28, peer, 0)).toBe(0);
    expect(nat.conntrack.size).toBe(1);
    expect(nat.removePeer(peer)).toBe(1);
    expect(nat.peers()).toEqual([]);
    expect(() => nat.outbound(p, 0, 28, peer, 0)).toThrow(/removed/);
    expect(() => nat.removePeer(peer)).toThrow(/not installed/);
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
      () => new Nat(base).addPeer(peer({ remapped: { podCIDRs: [], externalCIDRs: [] } })),
      /peers\[milan\]\.remapped\.podCIDRs: expected 1 entries/,
    ],
    [
      'remap length mismatch',
      () => new Nat(base).addPeer(peer({ remapped: { podCIDRs: ['10.71.0.0/24'], externalCIDRs: [] } })),
      /remapped\.podCIDRs\[0\].*same family and prefix length/,
    ],
    [
      'remapped overlapping a local CIDR',
      () => new Nat(base).addPeer(peer({})),
      /remapped\.podCIDRs\[0\].*overlaps a local pod CIDR.*remap the peer/,
    ],
    [
      'two peers with overlapping remapped CIDRs',
      () => {
        const n = new Nat(base);
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
        const n = new Nat(base);
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
