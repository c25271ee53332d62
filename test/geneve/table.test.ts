import { describe, expect, it } from 'vitest';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { GeneveConfigError, defaultLocalMac, type GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { writeGeneveOption } from '../../src/geneve/header.js';
import { STAT_RX_PACKETS } from '../../src/geneve/reasons.js';
import { formatAddress, parseAddress } from '../../src/packet/addr.js';
import { icmpEcho } from '../packet/factory.js';
import { Prng } from '../util/prng.js';

function spec(
  vni: number,
  remote: string,
  remoteInternal: string,
  extra: Partial<GeneveTunnelSpec> = {},
): GeneveTunnelSpec {
  return {
    vni,
    remoteUnderlay: remote,
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: remoteInternal,
    ...extra,
  };
}

/** The tunnel lookupSend picks for an ICMP packet to `dst`. */
function sendTo(table: GeneveTunnelTable, dst: string): GeneveTunnel | undefined {
  const p = icmpEcho({ src: dst.includes(':') ? 'fd00::1' : '10.0.0.1', dst });
  return table.lookupSend(p.buf, p.off, p.len);
}

function configError(f: () => unknown): GeneveConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(GeneveConfigError);
    return e as GeneveConfigError;
  }
  throw new Error('expected a GeneveConfigError');
}

describe('GeneveTunnelTable: configuration', () => {
  it('adds tunnels with Liqo defaults and finds them by key', () => {
    const table = new GeneveTunnelTable();
    const t = table.add(spec(0, '192.168.1.10', '10.80.0.2', { name: 'node-a' }));
    expect(t.vni).toBe(0);
    expect(t.remotePort).toBe(6091);
    expect(t.mode).toBe('l3');
    expect(t.l2).toBe(false);
    expect(t.remoteUnderlayText).toBe('192.168.1.10');
    expect(t.remoteUnderlayAlias).toBe('::ffff:192.168.1.10');
    expect(t.localMac).toEqual(defaultLocalMac(parseAddress('10.80.0.1')));
    expect(t.localMac[0]! & 0x03).toBe(0x02); // locally administered, unicast
    expect(t.remoteMacKnown).toBe(false);
    expect(table.get(0, '192.168.1.10')).toBe(t);
    expect(table.get(0, parseAddress('192.168.1.10'))).toBe(t);
    expect(table.get(1, '192.168.1.10')).toBeUndefined();
    expect(table.size).toBe(1);
    expect(table.byRemoteInternal('10.80.0.2')).toBe(t);
  });

  it('rejects bad specs with the field named', () => {
    const table = new GeneveTunnelTable();
    expect(configError(() => table.add(spec(-1, '192.0.2.1', '10.80.0.2'))).field).toBe('vni');
    expect(configError(() => table.add(spec(1 << 24, '192.0.2.1', '10.80.0.2'))).field).toBe('vni');
    expect(configError(() => table.add(spec(1.5, '192.0.2.1', '10.80.0.2'))).field).toBe('vni');
    expect(configError(() => table.add(spec(1, '192.0.2', '10.80.0.2'))).field).toBe('remoteUnderlay');
    expect(configError(() => table.add(spec(1, '192.0.2.1', 'fd00::2'))).field).toBe('remoteInternalAddress');
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.1'))).field).toBe('remoteInternalAddress');
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { localUnderlay: '::1' }))).field).toBe(
      'localUnderlay',
    );
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { remotePort: 0 }))).field).toBe('remotePort');
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { mode: 'l4' as 'l2' }))).field).toBe('mode');
    expect(
      configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { localMac: '01:00:5e:00:00:01' }))).message,
    ).toMatch(/multicast/);
    expect(
      configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { remoteMac: '00:00:00:00:00:00' }))).message,
    ).toMatch(/all-zero/);
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { remoteMac: 'not a mac' }))).field).toBe(
      'remoteMac',
    );
    expect(configError(() => table.add(spec(1, '192.0.2.1', '10.80.0.2', { options: new Uint8Array(5) }))).field).toBe(
      'options',
    );
    expect(table.size).toBe(0);
  });

  it('refuses a duplicate (VNI, remote) and a remote internal address used twice', () => {
    const table = new GeneveTunnelTable();
    table.add(spec(3, '192.0.2.1', '10.80.0.2'));
    expect(configError(() => table.add(spec(3, '192.0.2.1', '10.80.0.9'))).message).toMatch(/already exists/);
    expect(configError(() => table.add(spec(4, '192.0.2.9', '10.80.0.2'))).message).toMatch(
      /already the remote internal address/,
    );
    // Same VNI from another underlay address is a different tunnel.
    expect(table.add(spec(3, '192.0.2.2', '10.80.0.3')).vni).toBe(3);
    expect(table.size).toBe(2);
  });

  it('set() updates in place: same object, counters kept, learned MAC kept unless the neighbour changed', () => {
    const table = new GeneveTunnelTable();
    const t = table.add(spec(5, '192.0.2.1', '10.80.0.2', { mode: 'l2' }));
    t.stats[STAT_RX_PACKETS] = 42;
    t.remoteMac.set([2, 0, 0, 0, 0, 7]);
    t.remoteMacKnown = true;
    const opts = new Uint8Array(8);
    writeGeneveOption(opts, 0, 0x0101, 0x81, new Uint8Array(4), 0, 4);
    expect(
      table.set(spec(5, '192.0.2.1', '10.80.0.2', { mode: 'l2', remotePort: 7000, options: opts, name: 'renamed' })),
    ).toBe(t);
    expect(t.remotePort).toBe(7000);
    expect(t.optionsCritical).toBe(true);
    expect(t.name).toBe('renamed');
    expect(t.rxPackets).toBe(42);
    expect(t.remoteMacKnown).toBe(true);
    // New remote internal address: a different neighbour, forget the MAC; indexes follow.
    expect(table.set(spec(5, '192.0.2.1', '10.80.0.22', { mode: 'l2' }))).toBe(t);
    expect(t.remoteMacKnown).toBe(false);
    expect(table.byRemoteInternal('10.80.0.2')).toBeUndefined();
    expect(table.byRemoteInternal('10.80.0.22')).toBe(t);
    // A configured MAC is static; removing it from the config forgets it.
    table.set(spec(5, '192.0.2.1', '10.80.0.22', { mode: 'l2', remoteMac: '02:00:00:00:00:08' }));
    expect(t.remoteMacKnown && t.remoteMacStatic).toBe(true);
    table.set(spec(5, '192.0.2.1', '10.80.0.22', { mode: 'l2' }));
    expect(t.remoteMacKnown).toBe(false);
    // set() of an unknown key adds.
    expect(table.set(spec(6, '192.0.2.1', '10.80.0.6')).vni).toBe(6);
    expect(table.size).toBe(2);
  });

  it('replaceAll() adds, updates and removes, and validates everything before changing anything', () => {
    const table = new GeneveTunnelTable();
    const a = table.add(spec(1, '192.0.2.1', '10.80.0.2'));
    table.add(spec(2, '192.0.2.2', '10.80.0.3'));
    const before = [...table.tunnels()];
    // Invalid: nothing changes.
    expect(
      configError(() => table.replaceAll([spec(1, '192.0.2.1', '10.80.0.2'), spec(9, 'bad', '10.80.0.9')])).field,
    ).toBe('tunnels[1].remoteUnderlay');
    expect(
      configError(() => table.replaceAll([spec(1, '192.0.2.1', '10.80.0.2'), spec(1, '192.0.2.1', '10.80.0.5')])).field,
    ).toBe('tunnels[1].vni');
    expect(
      configError(() => table.replaceAll([spec(1, '192.0.2.1', '10.80.0.2'), spec(8, '192.0.2.8', '10.80.0.2')])).field,
    ).toBe('tunnels[1].remoteInternalAddress');
    expect([...table.tunnels()]).toEqual(before);
    // Swapping remote internal addresses between two kept tunnels is legal as a whole.
    const b = table.get(2, '192.0.2.2')!;
    table.addPodRoute('10.0.2.0/24', '10.80.0.2');
    expect(sendTo(table, '10.0.2.9')).toBe(a);
    expect(table.replaceAll([spec(1, '192.0.2.1', '10.80.0.3'), spec(2, '192.0.2.2', '10.80.0.2')])).toEqual({
      added: 0,
      updated: 2,
      removed: 0,
    });
    expect(table.byRemoteInternal('10.80.0.3')).toBe(a);
    expect(table.byRemoteInternal('10.80.0.2')).toBe(b);
    expect(sendTo(table, '10.0.2.9')).toBe(b); // the pod route follows its next-hop address
    const r = table.replaceAll([
      spec(1, '192.0.2.1', '10.80.0.2', { remotePort: 6081 }),
      spec(3, '2001:db8::3', '10.80.0.4'),
    ]);
    expect(r).toEqual({ added: 1, updated: 1, removed: 1 });
    expect(table.get(1, '192.0.2.1')).toBe(a);
    expect(a.remotePort).toBe(6081);
    expect(table.get(2, '192.0.2.2')).toBeUndefined();
    expect(table.get(3, '2001:db8::3')!.underlayFamily).toBe(6);
  });
});

describe('GeneveTunnelTable: receive lookup by (VNI, source)', () => {
  const table = new GeneveTunnelTable();
  const a = table.add(spec(10, '192.0.2.1', '10.80.0.2'));
  const b = table.add(spec(10, '192.0.2.2', '10.80.0.3'));
  const c = table.add(spec(11, '2001:db8::1:0:0:1', '10.80.0.4'));

  it('matches text sources as a UDP socket reports them', () => {
    expect(table.lookupReceive(10, '192.0.2.1')).toBe(a);
    expect(table.lookupReceive(10, '192.0.2.2')).toBe(b);
    expect(table.lookupReceive(10, '::ffff:192.0.2.1')).toBe(a);
    expect(table.lookupReceive(10, '192.0.2.3')).toBeUndefined();
    expect(table.lookupReceive(12, '192.0.2.1')).toBeUndefined();
    expect(table.lookupReceive(11, '2001:db8::1:0:0:1')).toBe(c);
    expect(c.remoteUnderlayText).toBe('2001:db8::1:0:0:1'); // RFC 5952 canonical
    expect(table.lookupReceive(11, '192.0.2.1')).toBeUndefined();
  });

  it('matches byte sources, including IPv4-mapped IPv6', () => {
    const buf = new Uint8Array(40);
    buf.set(parseAddress('192.0.2.2'), 3);
    expect(table.lookupReceiveBytes(10, buf, 3, 4)).toBe(b);
    buf.set(parseAddress('::ffff:192.0.2.1'), 20);
    expect(table.lookupReceiveBytes(10, buf, 20, 6)).toBe(a);
    buf.set(parseAddress('2001:db8::1:0:0:1'), 20);
    expect(table.lookupReceiveBytes(11, buf, 20, 6)).toBe(c);
    expect(table.lookupReceiveBytes(10, buf, 20, 6)).toBeUndefined();
  });

  it('forgets removed tunnels', () => {
    const t = new GeneveTunnelTable();
    t.add(spec(1, '192.0.2.1', '10.80.0.2'));
    expect(t.remove(1, '192.0.2.1')).toBe(true);
    expect(t.remove(1, '192.0.2.1')).toBe(false);
    expect(t.lookupReceive(1, '192.0.2.1')).toBeUndefined();
    expect(t.byRemoteInternal('10.80.0.2')).toBeUndefined();
  });
});

describe('GeneveTunnelTable: send lookup (remote internal addresses and pod routes)', () => {
  it('routes pods to their node, longest prefix first, internal addresses before pod routes', () => {
    const table = new GeneveTunnelTable();
    const n1 = table.add(spec(1, '192.168.0.11', '10.80.0.11'));
    const n2 = table.add(spec(2, '192.168.0.12', '10.80.0.12'));
    table.addPodRoute('10.0.1.0/24', '10.80.0.11');
    table.addPodRoute('10.0.1.77/32', '10.80.0.12'); // a pod that moved
    table.addPodRoute('10.80.0.0/16', '10.80.0.11'); // covers n2's internal address too
    expect(sendTo(table, '10.0.1.5')).toBe(n1);
    expect(sendTo(table, '10.0.1.77')).toBe(n2);
    expect(sendTo(table, '10.0.2.1')).toBeUndefined();
    expect(sendTo(table, '10.80.0.12')).toBe(n2); // the tunnel's own remote internal address wins
    expect(sendTo(table, '10.80.5.5')).toBe(n1);
    // Replace the /32 and remove routes.
    table.addPodRoute('10.0.1.77/32', '10.80.0.11');
    expect(sendTo(table, '10.0.1.77')).toBe(n1);
    expect(table.removePodRoute('10.0.1.77/32')).toBe(true);
    expect(table.removePodRoute('10.0.1.77/32')).toBe(false);
    expect(sendTo(table, '10.0.1.77')).toBe(n1);
    expect(
      table
        .podRoutes()
        .map((r) => `${formatAddress(r.prefix.addr)}/${r.prefix.prefixLen}>${r.nodeInternalAddress}`)
        .sort(),
    ).toEqual(['10.0.1.0/24>10.80.0.11', '10.80.0.0/16>10.80.0.11']);
  });

  it('resolves next hops as tunnels come and go', () => {
    const table = new GeneveTunnelTable();
    table.addPodRoute('10.0.3.0/24', '10.80.0.13');
    expect(sendTo(table, '10.0.3.1')).toBeUndefined();
    const n3 = table.add(spec(3, '192.168.0.13', '10.80.0.13'));
    expect(sendTo(table, '10.0.3.1')).toBe(n3);
    table.remove(3, '192.168.0.13');
    expect(sendTo(table, '10.0.3.1')).toBeUndefined();
    const again = table.add(spec(4, '192.168.0.14', '10.80.0.13'));
    expect(sendTo(table, '10.0.3.1')).toBe(again);
    // Moving the tunnel to another internal address detaches the route.
    table.set(spec(4, '192.168.0.14', '10.80.0.14'));
    expect(sendTo(table, '10.0.3.1')).toBeUndefined();
    expect(table.podRoutes()[0]!.tunnel).toBeNull();
  });

  it('handles IPv6 pod routes and rejects mixed families and bad prefixes', () => {
    const table = new GeneveTunnelTable();
    const t = table.add({
      vni: 1,
      remoteUnderlay: '2001:db8::11',
      localInternalAddress: 'fd80::1',
      remoteInternalAddress: 'fd80::11',
    });
    table.addPodRoute('fd00:1::/64', 'fd80::11');
    expect(sendTo(table, 'fd00:1::42')).toBe(t);
    expect(sendTo(table, 'fd80::11')).toBe(t);
    expect(sendTo(table, 'fd00:2::1')).toBeUndefined();
    expect(configError(() => table.addPodRoute('10.0.0.0/8', 'fd80::11')).field).toBe('nodeInternalAddress');
    expect(configError(() => table.addPodRoute('10.0.0.0', '10.80.0.1')).field).toBe('podCIDR');
    expect(
      configError(() =>
        table.replacePodRoutes([
          { podCIDR: '10.0.0.0/8', nodeInternalAddress: '10.80.0.1' },
          { podCIDR: 'x', nodeInternalAddress: '10.80.0.1' },
        ]),
      ).field,
    ).toBe('podRoutes[1].podCIDR');
    expect(table.podRoutes().length).toBe(1); // unchanged by the failed replace
    table.replacePodRoutes([{ podCIDR: '10.0.0.0/8', nodeInternalAddress: '10.80.0.1' }]);
    expect(table.podRoutes().length).toBe(1);
    expect(sendTo(table, 'fd00:1::42')).toBeUndefined(); // its pod route was replaced away
    expect(sendTo(table, 'fd80::11')).toBe(t); // the tunnel's own address needs no pod route
  });

  it('too-short or non-IP packets find no tunnel', () => {
    const table = new GeneveTunnelTable();
    table.add(spec(1, '192.0.2.1', '10.80.0.2'));
    table.addPodRoute('0.0.0.0/0', '10.80.0.2');
    const buf = new Uint8Array(64);
    buf[0] = 0x45;
    expect(table.lookupSend(buf, 0, 19)).toBeUndefined();
    expect(table.lookupSend(buf, 0, 20)).toBeDefined();
    buf[0] = 0x15;
    expect(table.lookupSend(buf, 0, 64)).toBeUndefined();
    expect(table.lookupSend(buf, 0, 0)).toBeUndefined();
  });

  it('agrees with a naive longest-prefix reference over random routes (seeded)', () => {
    const rng = new Prng(6091);
    const table = new GeneveTunnelTable();
    const tunnels: GeneveTunnel[] = [];
    for (let i = 0; i < 20; i++) tunnels.push(table.add(spec(i, `192.168.1.${i + 1}`, `10.80.1.${i + 1}`)));
    const routes = new Map<string, { net: number; len: number; nh: number }>();
    for (let i = 0; i < 300; i++) {
      const len = rng.int(8, 32);
      const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
      const net = ((0x0a000000 | (rng.nextU32() & 0x00ffffff)) & mask) >>> 0;
      const nh = rng.int(0, 21); // 20 and 21 have no tunnel
      const text = `${net >>> 24}.${(net >>> 16) & 255}.${(net >>> 8) & 255}.${net & 255}/${len}`;
      table.addPodRoute(text, `10.80.1.${nh + 1}`);
      routes.set(text, { net, len, nh });
      if (i % 7 === 0) {
        const victim = [...routes.keys()][rng.int(0, routes.size - 1)]!;
        table.removePodRoute(victim);
        routes.delete(victim);
      }
    }
    for (let i = 0; i < 3000; i++) {
      const dst = (0x0a000000 | (rng.nextU32() & 0x00ffffff)) >>> 0;
      let best: { len: number; nh: number } | undefined;
      for (const r of routes.values()) {
        const mask = (0xffffffff << (32 - r.len)) >>> 0;
        if ((dst & mask) >>> 0 === r.net && (best === undefined || r.len > best.len)) best = r;
      }
      let want: GeneveTunnel | undefined = best === undefined ? undefined : tunnels[best.nh];
      const host = dst - 0x0a500100; // 10.80.1.x: a tunnel's own internal address
      if (host >= 1 && host <= 20) want = tunnels[host - 1];
      const text = `${dst >>> 24}.${(dst >>> 16) & 255}.${(dst >>> 8) & 255}.${dst & 255}`;
      expect(sendTo(table, text)).toBe(want);
    }
  });
});
