import { planTunnelAddresses } from '../../../src/control/tunnel-address.js';
import { describe, expect, test } from 'vitest';
import { ConfigError } from '../../../src/control/config-error.js';
import { translate } from '../../../src/control/k8s/translate.js';
import { TranslateError } from '../../../src/control/k8s/translate-common.js';
import { KINDS, type LiqoResourceName } from '../../../src/control/k8s/resources.js';
import { loadCrds, validate } from '../../k8s-fake/schema.js';
import { LIQO_CRD_DIR } from '../../k8s-fake/server.js';
import { KEYS } from '../fixtures.js';
import { NS, liqoClientResources, liqoResources } from './liqo-fixtures.js';

const crds = loadCrds(LIQO_CRD_DIR);
const KIND_OF: Partial<Record<LiqoResourceName, string>> = {
  configurations: KINDS.configurations.kind,
  gatewayServers: KINDS.gatewayServers.kind,
  gatewayClients: KINDS.gatewayClients.kind,
  publicKeys: KINDS.publicKeys.kind,
  internalNodes: KINDS.internalNodes.kind,
  internalFabrics: KINDS.internalFabrics.kind,
  geneveTunnels: KINDS.geneveTunnels.kind,
  routeConfigurations: KINDS.routeConfigurations.kind,
  networks: KINDS.networks.kind,
  ips: KINDS.ips.kind,
};

describe('CRD schema validator', () => {
  test("the fixtures validate against Liqo's CRD schemas", () => {
    const r = liqoResources();
    let n = 0;
    for (const [list, kind] of Object.entries(KIND_OF) as [LiqoResourceName, string][]) {
      const crd = crds.find((c) => c.kind === kind);
      expect(crd, kind).toBeDefined();
      for (const o of r[list]) {
        expect(validate(o, crd!.schema, 'strict'), `${kind} ${o.metadata?.name}`).toEqual([]);
        n++;
      }
    }
    expect(n).toBeGreaterThan(10);
  });

  test('the validator rejects wrong types, missing required fields, bad enums and unknown fields', () => {
    const conn = crds.find((c) => c.kind === 'Connection')!;
    const errs = validate({ spec: { type: 'Peer', gatewayRef: {}, extra: 1 }, status: { value: 5 } }, conn.schema);
    expect(errs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^spec\.type: "Peer" is not one of "Server", "Client"/),
        'spec.extra: unknown field',
        'status.value: expected string',
      ]),
    );
    const tun = crds.find((c) => c.kind === 'GeneveTunnel')!;
    expect(validate({ spec: { id: 1.5, internalNodeRef: {} } }, tun.schema)).toEqual(
      expect.arrayContaining(['spec.internalFabricRef: required', 'spec.id: expected integer']),
    );
    const conf = crds.find((c) => c.kind === 'Configuration')!;
    expect(validate({ spec: { remote: { cidr: { pod: ['10.0.0.0/33'] } } } }, conf.schema)).toEqual([
      'spec.remote.cidr.pod[0]: "10.0.0.0/33" is not a valid cidr',
    ]);
  });
});

describe('translate: gateway', () => {
  test('maps Liqo resources onto the model', () => {
    const { config, warnings } = translate(liqoResources(), {
      role: 'gateway',
      clusterId: 'cluster-a',
      nodeName: 'worker-1',
    });
    expect(warnings).toEqual([]);
    if (config.role !== 'gateway') throw new Error('role');
    expect(config.cluster).toEqual({
      id: 'cluster-a',
      podCIDRs: ['10.0.0.0/16'],
      serviceCIDRs: ['10.96.0.0/12'],
      externalCIDR: '10.70.0.0/16',
      internalCIDR: '10.80.0.0/16',
    });
    expect(config.wireguard).toMatchObject({ privateKey: KEYS.aPriv, listenPort: 51840, mtu: 1340 });
    expect(config.peers).toEqual([
      {
        name: 'cluster-b',
        clusterId: 'cluster-b',
        publicKey: KEYS.bPub,
        remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
        remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
      },
    ]);
    // worker-1 hosts the gateway: its tunnel uses the node's local IP (as Liqo's fabric does).
    expect(config.geneve.tunnels).toEqual([
      {
        id: 0,
        nodeName: 'worker-1',
        remoteUnderlay: '10.244.1.1',
        localInternalAddress: '10.80.0.1',
        remoteInternalAddress: '10.80.0.2',
        mode: 'l3',
      },
      {
        id: 1,
        nodeName: 'worker-2',
        remoteUnderlay: '172.18.0.4',
        localInternalAddress: '10.80.0.1',
        remoteInternalAddress: '10.80.0.3',
        mode: 'l3',
      },
    ]);
    expect(config.geneve.podRoutes).toEqual([
      { podCIDR: '10.0.1.5/32', nodeInternalAddress: '10.80.0.2' },
      { podCIDR: '10.0.2.9/32', nodeInternalAddress: '10.80.0.3' },
    ]);
    expect(config.ipMappings).toEqual([{ externalAddress: '10.70.0.10', realAddress: '192.168.1.10' }]);
  });

  test('client side takes the endpoint from GatewayClient.spec.endpoint', () => {
    const r = liqoClientResources({ addresses: ['2001:db8::7'], port: 32000, protocol: 'UDP' }, 1300);
    const { config } = translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    if (config.role !== 'gateway') throw new Error('role');
    expect(config.peers[0]!.endpoint).toBe('[2001:db8::7]:32000');
    expect(config.wireguard.mtu).toBe(1300);
    expect(config.wireguard.listenPort).toBe(51840);
  });

  test('several endpoint ports: one tunnel per port on both sides, as Liqo opens them', () => {
    const r = liqoClientResources({ addresses: ['172.18.0.9'], ports: [32000, 32001, 32002], protocol: 'UDP' }, 1340);
    const { config, warnings } = translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    if (config.role !== 'gateway') throw new Error('role');
    expect(config.peers[0]!.endpoint).toBe('172.18.0.9:32000');
    expect(config.peers[0]!.endpointPorts).toEqual([32000, 32001, 32002]);
    expect(warnings.filter((w) => w.includes('ports'))).toEqual([]);
    expect(planTunnelAddresses(config).peers.map((t) => [t.tunnel, t.local, t.remote])).toEqual([
      [0, '169.254.18.2', '169.254.18.1'],
      [1, '169.254.18.6', '169.254.18.5'],
      [2, '169.254.18.10', '169.254.18.9'],
    ]);

    const r2 = liqoResources();
    r2.gatewayServers[0]!.spec!.endpoint = { ports: [51841, 51840], serviceType: 'NodePort' };
    const t2 = translate(r2, { role: 'gateway', clusterId: 'cluster-a' });
    if (t2.config.role !== 'gateway') throw new Error('role');
    expect(t2.config.wireguard.listenPort).toBe(51841);
    expect(t2.config.wireguard.listenPorts).toEqual([51841, 51840]);
    expect(planTunnelAddresses(t2.config).peers.map((t) => [t.tunnel, t.local, t.remote])).toEqual([
      [0, '169.254.18.1', '169.254.18.2'],
      [1, '169.254.18.5', '169.254.18.6'],
    ]);
    const r3 = liqoResources();
    r3.gatewayServers[0]!.spec!.endpoint = { ports: [51850], serviceType: 'NodePort' };
    const c3 = translate(r3, { role: 'gateway', clusterId: 'cluster-a' }).config;
    if (c3.role !== 'gateway') throw new Error('role');
    expect(c3.wireguard.listenPort).toBe(51850);
    expect(c3.wireguard.listenPorts).toBeUndefined();
  });

  test('incomplete resources are skipped with a warning, not an error', () => {
    const r = liqoResources();
    delete r.configurations[0]!.status;
    expect(() => translate(r, { role: 'gateway', clusterId: 'cluster-a' })).toThrow(/status\.remote\.cidr not set yet/);
    const r2 = liqoResources();
    delete r2.internalNodes[1]!.status;
    const { config, warnings } = translate(r2, { role: 'gateway', clusterId: 'cluster-a' });
    if (config.role !== 'gateway') throw new Error('role');
    expect(config.geneve.tunnels.map((t) => t.nodeName)).toEqual(['worker-1']);
    // The pod route through the skipped node goes too (it would point at no tunnel).
    expect(config.geneve.podRoutes.map((p) => p.nodeInternalAddress)).toEqual(['10.80.0.2']);
    expect(warnings).toEqual(['InternalNode worker-2: status.nodeIP not set yet; tunnel 1 skipped']);
  });

  test('bad key material is a ConfigError naming the resource and field', () => {
    const r = liqoResources();
    r.secrets[0]!.data!['privateKey'] = Buffer.alloc(16).toString('base64');
    let err: unknown;
    try {
      translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(
      `kubernetes: Secret ${NS}/gw-keys: data.privateKey: expected the raw 32-byte WireGuard private key (base64-encoded by Kubernetes)`,
    );
  });

  test('a pod CIDR that is not a CIDR is a TranslateError on the Network or Configuration holding it (found by fuzzing)', () => {
    for (const bad of ['', '10.0.0.0', '10.0.0.1/16', 'fd00::/129']) {
      const r = liqoResources();
      r.networks[0]!.status!.cidr = bad;
      let err: unknown;
      try {
        translate(r, { role: 'gateway', clusterId: 'cluster-a' });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(TranslateError);
      expect((err as TranslateError).objects).toEqual([r.networks[0]]);
      expect((err as Error).message).toMatch(/^kubernetes: Network liqo\/pod-cidr: status\.cidr: /);
    }
    const r = liqoResources();
    r.networks = r.networks.filter((n) => n.metadata?.name !== 'pod-cidr');
    r.configurations[0]!.spec!.local!.cidr!.pod = ['10.0.0.0/33'];
    let err: unknown;
    try {
      translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TranslateError);
    expect((err as Error).message).toMatch(/Configuration liqo-tenant-cluster-b\/cluster-b: spec\.local\.cidr\.pod: /);
  });

  test('two pod-cidr Networks with the same CIDR (a renamed Network beside its old name) are one pod CIDR, not an overlap', () => {
    const r = liqoResources();
    const pod = r.networks.find((n) => n.metadata?.name === 'pod-cidr')!;
    const cidr = pod.status!.cidr!;
    r.networks.push({ ...structuredClone(pod), metadata: { ...pod.metadata, name: 'pod-cidr-renamed' } });
    const out = translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    expect((out.config as { cluster: { podCIDRs: string[] } }).cluster.podCIDRs).toEqual([cidr]);
  });

  test('remoteClusterIds filters peers', () => {
    expect(() =>
      translate(liqoResources(), { role: 'gateway', clusterId: 'cluster-a', remoteClusterIds: ['cluster-z'] }),
    ).toThrow(/no usable gateway for cluster-z/);
  });
});

describe('translate: node', () => {
  test('one gateway per InternalFabric with the tunnel to this node', () => {
    const { config } = translate(liqoResources(), { role: 'node', clusterId: 'cluster-a', nodeName: 'worker-2' });
    if (config.role !== 'node') throw new Error('role');
    expect(config.node).toEqual({
      name: 'worker-2',
      tunName: 'weft0',
      mtu: 1340,
      gateways: [
        {
          name: 'cluster-b',
          vni: 1,
          gatewayUnderlay: '10.244.1.7',
          gatewayInternalAddress: '10.80.0.1',
          localInternalAddress: '10.80.0.3',
          remoteCIDRs: ['10.71.0.0/16', '10.72.0.0/16'],
          mode: 'l3',
        },
      ],
    });
  });

  test('unknown node is a ConfigError', () => {
    expect(() => translate(liqoResources(), { role: 'node', clusterId: 'cluster-a', nodeName: 'worker-9' })).toThrow(
      /InternalNode worker-9: not found/,
    );
  });
});

describe('warnings', () => {
  test('a reference name with control characters stays one log line (fuzz/crashes/k8s-translate)', () => {
    const r = liqoResources();
    r.geneveTunnels[1]!.spec!.internalNodeRef = { name: 'w\n2\u0007' };
    const { warnings } = translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    const w = warnings.find((x) => x.includes('tunnel skipped'));
    expect(w).toBe(`GeneveTunnel ${NS}/cluster-b-worker-2: InternalNode w\\n2\\u0007 not found; tunnel skipped`);
  });
});
