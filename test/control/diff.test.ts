import { describe, expect, test } from 'vitest';
import { parseConfig, type GatewayConfig, type NodeConfig } from '../../src/control/config.js';
import { deepEqual, diffConfig } from '../../src/control/diff.js';
import { KEYS, clone, gatewayInput } from './fixtures.js';

type Input = ReturnType<typeof gatewayInput>;
function gw(mut?: (i: Input) => void): GatewayConfig {
  const i = gatewayInput();
  mut?.(i);
  return parseConfig(i) as GatewayConfig;
}

describe('diffConfig: peers', () => {
  test('identical configs give no ops', () => {
    expect(diffConfig(gw(), gw())).toEqual([]);
  });

  test('only the changed fields of a peer are reported; the endpoint is absent when unchanged in the file', () => {
    const ops = diffConfig(
      gw(),
      gw((i) => {
        i.peers[0]!['persistentKeepalive'] = 25;
        i.peers[0]!['presharedKey'] = KEYS.psk;
      }),
    );
    expect(ops).toEqual([
      {
        kind: 'peer.update',
        name: 'cluster-b',
        publicKey: KEYS.bPub,
        changes: { persistentKeepalive: 25, presharedKey: KEYS.psk },
      },
    ]);
    expect('endpoint' in (ops[0] as { changes: object }).changes).toBe(false);
  });

  test('endpoint changed or removed in the file', () => {
    expect(
      diffConfig(
        gw(),
        gw((i) => {
          i.peers[0]!['endpoint'] = '192.0.2.21:51840';
        }),
      ),
    ).toEqual([
      { kind: 'peer.update', name: 'cluster-b', publicKey: KEYS.bPub, changes: { endpoint: '192.0.2.21:51840' } },
    ]);
    expect(
      diffConfig(
        gw(),
        gw((i) => {
          delete i.peers[0]!['endpoint'];
        }),
      ),
    ).toEqual([{ kind: 'peer.update', name: 'cluster-b', publicKey: KEYS.bPub, changes: { endpoint: null } }]);
    // A cosmetic rewrite of the same endpoint is not a change (canonical text).
    const v6a = gw((i) => {
      i.peers[0]!['endpoint'] = '[2001:db8::1]:51840';
    });
    const v6b = gw((i) => {
      i.peers[0]!['endpoint'] = '[2001:DB8:0:0::1]:51840';
    });
    expect(diffConfig(v6a, v6b)).toEqual([]);
  });

  test('remap change is a peer update carrying the new NAT prefixes', () => {
    const ops = diffConfig(
      gw(),
      gw((i) => {
        i.peers[0]!['remapped'] = { podCIDRs: ['10.75.0.0/16'], externalCIDRs: ['10.72.0.0/16'] };
      }),
    );
    expect(ops).toEqual([
      {
        kind: 'peer.update',
        name: 'cluster-b',
        publicKey: KEYS.bPub,
        changes: { remapped: { podCIDRs: ['10.75.0.0/16'], externalCIDRs: ['10.72.0.0/16'] } },
      },
    ]);
  });

  test('public key change replaces the peer (remove before add)', () => {
    const ops = diffConfig(
      gw(),
      gw((i) => {
        i.peers[1]!['publicKey'] = KEYS.aPub;
      }),
    );
    expect(ops.map((o) => o.kind)).toEqual(['peer.remove', 'peer.add']);
    expect(ops[0]).toEqual({ kind: 'peer.remove', name: 'cluster-c', publicKey: KEYS.cPub });
  });

  test('peer added and removed; removals come first', () => {
    const before = gw();
    const after = gw((i) => {
      i.peers.splice(0, 1);
      i.peers.push({
        name: 'cluster-d',
        clusterId: 'cluster-d',
        publicKey: KEYS.bPub,
        remote: { podCIDRs: ['10.71.0.0/16'] },
      });
    });
    const ops = diffConfig(before, after);
    expect(ops.map((o) => o.kind)).toEqual(['peer.remove', 'peer.add']);
    // The same key moved from cluster-b to cluster-d: removal first keeps keys unique at every step.
    expect(ops[0]).toMatchObject({ name: 'cluster-b' });
    expect(ops[1]).toMatchObject({ peer: { name: 'cluster-d', remapped: { podCIDRs: ['10.71.0.0/16'] } } });
  });
});

describe('diffConfig: tunnels, routes, mappings, settings', () => {
  test('tunnel update lists changed fields; routes removed before their tunnel and added after it', () => {
    const before = gw();
    const after = gw((i) => {
      const g = i['geneve'] as { tunnels: Record<string, unknown>[]; podRoutes: Record<string, unknown>[] };
      g.tunnels[0]!['remoteUnderlay'] = '172.18.0.9';
      g.tunnels.push({
        id: 1,
        nodeName: 'worker-2',
        remoteUnderlay: '172.18.0.4',
        localInternalAddress: '10.80.0.1',
        remoteInternalAddress: '10.80.0.3',
      });
      g.podRoutes.push({ podCIDR: '10.0.2.0/24', nodeInternalAddress: '10.80.0.3' });
    });
    expect(diffConfig(before, after)).toEqual([
      { kind: 'tunnel.update', id: 0, changes: { remoteUnderlay: '172.18.0.9' } },
      {
        kind: 'tunnel.add',
        tunnel: {
          id: 1,
          nodeName: 'worker-2',
          remoteUnderlay: '172.18.0.4',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.3',
          mode: 'l3',
        },
      },
      { kind: 'podRoute.add', route: { podCIDR: '10.0.2.0/24', nodeInternalAddress: '10.80.0.3' } },
    ]);
    expect(diffConfig(after, before).map((o) => o.kind)).toEqual(['podRoute.remove', 'tunnel.remove', 'tunnel.update']);
  });

  test('ipMappings add / update / remove', () => {
    const m = (pairs: [string, string][]) => (i: Input) => {
      i['ipMappings'] = pairs.map(([e, r]) => ({ externalAddress: e, realAddress: r }));
    };
    const ops = diffConfig(
      gw(
        m([
          ['10.70.0.5', '192.168.0.5'],
          ['10.70.0.6', '192.168.0.6'],
        ]),
      ),
      gw(
        m([
          ['10.70.0.6', '192.168.0.66'],
          ['10.70.0.7', '192.168.0.7'],
        ]),
      ),
    );
    expect(ops).toEqual([
      { kind: 'ipMapping.remove', mapping: { externalAddress: '10.70.0.5', realAddress: '192.168.0.5' } },
      { kind: 'ipMapping.update', externalAddress: '10.70.0.6', realAddress: '192.168.0.66' },
      { kind: 'ipMapping.add', mapping: { externalAddress: '10.70.0.7', realAddress: '192.168.0.7' } },
    ]);
  });

  test('wireguard, cluster, metrics and logging settings', () => {
    const ops = diffConfig(
      gw(),
      gw((i) => {
        i['wireguard'] = { privateKey: KEYS.aPriv, listenPort: 51841, mtu: 1420 };
        (i['cluster'] as Record<string, unknown>)['serviceCIDRs'] = ['10.112.0.0/12'];
        i['metrics'] = { listen: '127.0.0.1:9000' };
        i['logging'] = { level: 'debug' };
      }),
    );
    expect(ops).toEqual([
      { kind: 'cluster.update', changes: { serviceCIDRs: ['10.112.0.0/12'] } },
      { kind: 'wireguard.update', changes: { listenPort: 51841, mtu: 1420 } },
      { kind: 'metrics.update', listen: '127.0.0.1:9000' },
      { kind: 'logging.update', level: 'debug' },
    ]);
  });

  test('role change requires a restart', () => {
    const node = parseConfig({ role: 'node', cluster: { id: 'cluster-a' }, node: { name: 'w1' } }) as NodeConfig;
    expect(diffConfig(gw(), node)).toEqual([{ kind: 'restart', reason: 'role changed from gateway to node' }]);
  });

  test('node agent gateways', () => {
    const n = (mut: (g: Record<string, unknown>[]) => void) => {
      const gws: Record<string, unknown>[] = [
        {
          name: 'b',
          vni: 0,
          gatewayUnderlay: '172.18.0.2',
          gatewayInternalAddress: '10.80.0.1',
          localInternalAddress: '10.80.0.2',
          remoteCIDRs: ['10.71.0.0/16'],
        },
        {
          name: 'c',
          vni: 1,
          gatewayUnderlay: '172.18.0.5',
          gatewayInternalAddress: '10.80.0.5',
          localInternalAddress: '10.80.0.2',
        },
      ];
      mut(gws);
      return parseConfig({
        role: 'node',
        cluster: { id: 'cluster-a' },
        node: { name: 'w1', gateways: gws },
      }) as NodeConfig;
    };
    const ops = diffConfig(
      n(() => {}),
      n((g) => {
        g[0]!['remoteCIDRs'] = ['10.71.0.0/16', '10.72.0.0/16'];
        g.splice(1, 1);
      }),
    );
    expect(ops).toEqual([
      { kind: 'nodeGateway.remove', name: 'c', vni: 1 },
      { kind: 'nodeGateway.update', name: 'b', changes: { remoteCIDRs: ['10.71.0.0/16', '10.72.0.0/16'] } },
    ]);
  });
});

test('deepEqual', () => {
  const a = gatewayInput();
  expect(deepEqual(a, clone(a))).toBe(true);
  expect(deepEqual([1, 2], [2, 1])).toBe(false);
  expect(deepEqual({ a: undefined }, {})).toBe(true);
  expect(deepEqual({ a: [] }, { a: {} })).toBe(false);
});
