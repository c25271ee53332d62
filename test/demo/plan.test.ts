/**
 * The demo plan and the configuration files it generates: every file is accepted by the real
 * configuration schema (the same loader `weft up -c FILE` uses), the addressing is the one the
 * README and the e2e test rely on, and names are stable and short enough for the kernel.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, type GatewayConfig, type NodeConfig } from '../../src/control/config.js';
import { parseConfigYaml } from '../../src/control/yaml.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import {
  DemoPlanError,
  buildPlan,
  findPod,
  keyFileName,
  planNamespaces,
  remotePodAddress,
  remoteSnatAddress,
  renderConfigs,
  translateAddress,
  type DemoKeys,
} from '../../src/demo/plan.js';

function keys(): DemoKeys {
  const b = getCryptoBackend('pure');
  const a = generatePrivateKeyBase64(b);
  const c = generatePrivateKeyBase64(b);
  return {
    a: { privateKey: a, publicKey: publicKeyBase64(b, a) },
    b: { privateKey: c, publicKey: publicKeyBase64(b, c) },
  };
}

describe('demo plan', () => {
  const plan = buildPlan('wd');

  it('has two clusters with the same pod CIDR, one gateway, two nodes and four pods each', () => {
    for (const c of [plan.a, plan.b]) {
      expect(c.podCIDR).toBe('10.0.0.0/16');
      expect(c.externalCIDR).toBe('10.70.0.0/16');
      expect(c.internalCIDR).toBe('10.80.0.0/16');
      expect(c.nodes).toHaveLength(2);
      expect(c.pods).toHaveLength(4);
      expect(c.nodes.flatMap((n) => n.pods)).toEqual(c.pods);
      expect(c.nodes.map((n) => n.vni)).toEqual([0, 1]);
    }
    // Overlapping pod CIDRs, different pods: the remap is what tells them apart.
    expect(plan.a.pods.map((p) => p.ip)).toEqual(['10.0.1.11', '10.0.1.12', '10.0.2.13', '10.0.2.14']);
    expect(plan.b.pods.map((p) => p.ip)).toEqual(['10.0.1.21', '10.0.1.22', '10.0.2.23', '10.0.2.24']);
  });

  it('names are stable, prefixed and fit the kernel limits', () => {
    const names = planNamespaces(plan);
    expect(names).toHaveLength(2 * (1 + 2 + 4));
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n.startsWith('wd-')).toBe(true);
    expect(planNamespaces(buildPlan('wd'))).toEqual(names);
    expect(planNamespaces(buildPlan('wx'))[0]).toBe('wx-a-gw');
    for (const c of [plan.a, plan.b]) {
      for (const n of c.nodes)
        for (const i of [n.underlayIf, n.gatewayPortIf, n.tunName, ...n.pods.map((p) => p.nodeIf)])
          expect(i.length).toBeLessThanOrEqual(15);
    }
  });

  it('rejects a prefix that could collide with other namespaces or overflow names', () => {
    expect(() => buildPlan('')).toThrow(DemoPlanError);
    expect(() => buildPlan('Wd')).toThrow(DemoPlanError);
    expect(() => buildPlan('wd-x')).toThrow(DemoPlanError);
    expect(() => buildPlan('abcdefg')).toThrow(DemoPlanError);
  });

  it('remapped addresses: 1:1 prefix translation, host bits kept', () => {
    expect(translateAddress('10.0.2.23', '10.0.0.0/16', '10.71.0.0/16')).toBe('10.71.2.23');
    expect(translateAddress('10.70.0.0', '10.70.0.0/16', '10.72.0.0/16')).toBe('10.72.0.0');
    expect(() => translateAddress('10.1.0.1', '10.0.0.0/16', '10.71.0.0/16')).toThrow(DemoPlanError);
    expect(() => translateAddress('10.0.0.1', '10.0.0.0/16', '10.71.0.0/24')).toThrow(DemoPlanError);
    const b3 = findPod(plan, 'B3');
    const a1 = findPod(plan, 'A1');
    expect(remotePodAddress(plan, plan.a, b3)).toBe('10.71.2.23');
    expect(remotePodAddress(plan, plan.b, a1)).toBe('10.71.1.11');
    expect(() => remotePodAddress(plan, plan.a, a1)).toThrow(DemoPlanError);
    // Host traffic of A is SNATed to 10.70.0.0, which B addresses as 10.72.0.0.
    expect(remoteSnatAddress(plan, plan.b)).toBe('10.72.0.0');
  });

  it('every generated YAML file passes the configuration loader, with the key from its file', () => {
    const k = keys();
    const files = renderConfigs(plan, k);
    expect(files.map((f) => f.file)).toEqual([
      'gateway-a.yaml',
      'gateway-b.yaml',
      'node-a-worker-1.yaml',
      'node-a-worker-2.yaml',
      'node-b-worker-1.yaml',
      'node-b-worker-2.yaml',
    ]);
    const keyFiles: Record<string, string> = {
      [`/cfg/${keyFileName(plan.a)}`]: `${k.a.privateKey}\n`,
      [`/cfg/${keyFileName(plan.b)}`]: `${k.b.privateKey}\n`,
    };
    const readKeyFile = (p: string): string => {
      const t = keyFiles[p];
      if (t === undefined) throw new Error(`unexpected key file ${p}`);
      return t;
    };
    const parsed = files.map((f) => parseConfigYaml(f.yaml, `/cfg/${f.file}`, { baseDir: '/cfg', readKeyFile }));
    const gwA = parsed[0] as GatewayConfig;
    const gwB = parsed[1] as GatewayConfig;
    expect(gwA.role).toBe('gateway');
    expect(gwA.wireguard.privateKey).toBe(k.a.privateKey);
    expect(gwB.wireguard.privateKey).toBe(k.b.privateKey);
    // Each gateway trusts the other's public key; A knows B's endpoint, B learns A's.
    expect(gwA.peers[0]!.publicKey).toBe(k.b.publicKey);
    expect(gwB.peers[0]!.publicKey).toBe(k.a.publicKey);
    expect(gwA.peers[0]!.endpoint).toBe('198.18.0.2:51840');
    expect(gwB.peers[0]!.endpoint).toBeUndefined();
    for (const gw of [gwA, gwB]) {
      expect(gw.wireguard.listenPort).toBe(51840);
      expect(gw.wireguard.mtu).toBe(1340);
      expect(gw.geneve.port).toBe(6091);
      expect(gw.peers[0]!.remote).toEqual({ podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] });
      expect(gw.peers[0]!.remapped).toEqual({ podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] });
      expect(gw.geneve.podRoutes).toEqual([
        { podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' },
        { podCIDR: '10.0.2.0/24', nodeInternalAddress: '10.80.0.3' },
      ]);
    }
    expect(gwA.geneve.tunnels.map((t) => [t.id, t.remoteUnderlay, t.remoteInternalAddress])).toEqual([
      [0, '172.18.0.2', '10.80.0.2'],
      [1, '172.18.0.3', '10.80.0.3'],
    ]);
    expect(gwB.geneve.tunnels.map((t) => t.remoteUnderlay)).toEqual(['172.19.0.2', '172.19.0.3']);
    const nodes = parsed.slice(2) as NodeConfig[];
    for (const n of nodes) {
      expect(n.role).toBe('node');
      expect(n.node.gateways).toHaveLength(1);
      expect(n.node.gateways[0]!.remoteCIDRs).toEqual(['10.71.0.0/16', '10.72.0.0/16']);
      expect(n.node.gateways[0]!.gatewayInternalAddress).toBe('10.80.0.1');
    }
    expect(
      nodes.map((n) => [
        n.cluster.id,
        n.node.name,
        n.node.underlayAddress,
        n.node.gateways[0]!.gatewayUnderlay,
        n.node.gateways[0]!.vni,
        n.node.gateways[0]!.localInternalAddress,
      ]),
    ).toEqual([
      ['cluster-a', 'worker-1', '172.18.0.2', '172.18.0.1', 0, '10.80.0.2'],
      ['cluster-a', 'worker-2', '172.18.0.3', '172.18.0.1', 1, '10.80.0.3'],
      ['cluster-b', 'worker-1', '172.19.0.2', '172.19.0.1', 0, '10.80.0.2'],
      ['cluster-b', 'worker-2', '172.19.0.3', '172.19.0.1', 1, '10.80.0.3'],
    ]);
  });

  it('inline keys (keyFile: false) validate too, and the YAML says what the file is', () => {
    const k = keys();
    const files = renderConfigs(plan, k, { keyFile: false, logLevel: 'info' });
    for (const f of files) {
      const cfg = parseConfig(f.config, f.file);
      expect(cfg.logging.level).toBe('info');
      expect(f.yaml.startsWith('# weft demo:')).toBe(true);
    }
    expect((parseConfig(files[0]!.config) as GatewayConfig).wireguard.privateKey).toBe(k.a.privateKey);
  });
});
