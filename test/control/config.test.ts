import { describe, expect, test } from 'vitest';
import { decodeKey, encodeKey, parseConfig, type GatewayConfig } from '../../src/control/config.js';
import { ConfigError } from '../../src/control/config-error.js';
import { KEYS, clone, gatewayInput } from './fixtures.js';

function issuesOf(input: unknown): { path: string; message: string }[] {
  try {
    parseConfig(input, 'test.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return [...(e as ConfigError).issues];
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig: gateway', () => {
  test('applies Liqo defaults and completes remapped CIDRs', () => {
    const c = parseConfig(gatewayInput()) as GatewayConfig;
    expect(c.role).toBe('gateway');
    expect(c.cluster.externalCIDR).toBe('10.70.0.0/16');
    expect(c.cluster.internalCIDR).toBe('10.80.0.0/16');
    expect(c.wireguard.listenPort).toBe(51840);
    expect(c.wireguard.mtu).toBe(1340);
    expect(c.wireguard.cryptoBackend).toBe('auto');
    expect(c.geneve.port).toBe(6091);
    expect(c.geneve.tunnels[0]!.mode).toBe('l3');
    expect(c.logging.level).toBe('warn');
    // Peer c has no remapped section: it defaults to its real CIDRs.
    expect(c.peers[1]!.remapped).toEqual({ podCIDRs: ['10.200.0.0/16'], externalCIDRs: ['10.73.0.0/16'] });
    expect(c.peers[0]!.remapped.podCIDRs).toEqual(['10.71.0.0/16']);
    expect(c.peers[1]!.endpoint).toBeUndefined();
  });

  test('normalises addresses to canonical text', () => {
    const input = gatewayInput();
    input.peers[0]!['endpoint'] = '[2001:DB8:0::20]:51840';
    (input['cluster'] as Record<string, unknown>)['podCIDRs'] = ['10.0.0.0/16', 'FD00:0:0::/48'];
    const c = parseConfig(input) as GatewayConfig;
    expect(c.peers[0]!.endpoint).toBe('[2001:db8::20]:51840');
    expect(c.cluster.podCIDRs[1]).toBe('fd00::/48');
  });

  test('error message names the file, the field path and the expectation', () => {
    const input = gatewayInput();
    (input.peers[1]!['remote'] as Record<string, unknown>)['podCIDRs'] = ['10.200.0.0/33'];
    let err: unknown;
    try {
      parseConfig(input, 'gw.yaml');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    expect(msg).toContain('gw.yaml');
    expect(msg).toContain('peers[1].remote.podCIDRs[0]');
    expect(msg).toMatch(/expected a CIDR.*exceeds 32/);
  });

  test('keys must decode to 32 bytes', () => {
    const input = gatewayInput();
    input.peers[0]!['publicKey'] = Buffer.alloc(31).toString('base64');
    input.peers[0]!['presharedKey'] = 'not base64!';
    const paths = issuesOf(input).map((i) => i.path);
    expect(paths).toContain('peers[0].publicKey');
    expect(paths).toContain('peers[0].presharedKey');
  });

  test('missing private key names both ways to provide it', () => {
    const input = gatewayInput();
    input['wireguard'] = {};
    const issues = issuesOf(input);
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('wireguard.privateKey');
    expect(issues[0]!.message).toContain('privateKeyFile');
  });

  test('remapped peer CIDR overlapping a local CIDR is rejected', () => {
    const input = gatewayInput();
    // Real CIDR equal to the local pod CIDR is fine (that is what remapping is for) …
    expect(() => parseConfig(input)).not.toThrow();
    // … but addressing it unremapped is not.
    delete input.peers[0]!['remapped'];
    const issues = issuesOf(input);
    expect(issues.map((i) => i.path)).toEqual(['peers[0].remapped.podCIDRs[0]', 'peers[0].remapped.externalCIDRs[0]']);
    expect(issues[0]!.message).toMatch(/overlaps local pod CIDR 10\.0\.0\.0\/16/);
    expect(issues[1]!.message).toMatch(/overlaps local external CIDR 10\.70\.0\.0\/16/);
  });

  test('remapped CIDRs of two peers must not overlap; local CIDRs must not overlap each other', () => {
    const input = gatewayInput();
    input.peers[1]!['remapped'] = { podCIDRs: ['10.71.128.0/17'], externalCIDRs: ['10.74.0.0/16'] };
    (input.peers[1]!['remote'] as Record<string, unknown>)['podCIDRs'] = ['10.200.0.0/17'];
    const issues = issuesOf(input);
    expect(issues.map((i) => i.path)).toEqual(['peers[1].remapped.podCIDRs[0]']);
    expect(issues[0]!.message).toContain('peers[0].remapped.podCIDRs[0]');

    const input2 = gatewayInput();
    (input2['cluster'] as Record<string, unknown>)['serviceCIDRs'] = ['10.0.128.0/17'];
    expect(issuesOf(input2).map((i) => i.path)).toEqual(['cluster.serviceCIDRs[0]']);
  });

  test('remapping must be 1:1 (same count, family and prefix length)', () => {
    const input = gatewayInput();
    input.peers[0]!['remapped'] = { podCIDRs: ['10.71.0.0/17'], externalCIDRs: [] };
    const issues = issuesOf(input);
    expect(issues.map((i) => i.path)).toEqual(['peers[0].remapped.podCIDRs[0]', 'peers[0].remapped.externalCIDRs']);
  });

  test('duplicates and unknown keys', () => {
    const input = gatewayInput();
    input.peers[1]!['name'] = 'cluster-b';
    input.peers[1]!['publicKey'] = KEYS.bPub;
    input.peers[1]!['endpont'] = '1.2.3.4:5';
    const issues = issuesOf(input);
    // Unknown keys are reported by the schema pass (typos must not be silently ignored).
    expect(issues.some((i) => i.path === 'peers[1]' && /endpont/.test(i.message))).toBe(true);
    delete input.peers[1]!['endpont'];
    expect(issuesOf(input).map((i) => i.path)).toEqual(['peers[1].name', 'peers[1].publicKey']);
  });

  test('geneve: VNI range, internal addresses, pod routes to a known tunnel', () => {
    const input = gatewayInput();
    const g = input['geneve'] as { tunnels: Record<string, unknown>[]; podRoutes: Record<string, unknown>[] };
    g.tunnels[0]!['id'] = 1 << 24;
    expect(issuesOf(input).map((i) => i.path)).toEqual(['geneve.tunnels[0].id']);
    g.tunnels[0]!['id'] = 7;
    g.tunnels[0]!['remoteInternalAddress'] = '10.81.0.2';
    g.podRoutes[0]!['podCIDR'] = '10.50.0.0/24';
    const paths = issuesOf(input).map((i) => i.path);
    expect(paths).toEqual([
      'geneve.tunnels[0].remoteInternalAddress',
      'geneve.podRoutes[0].nodeInternalAddress',
      'geneve.podRoutes[0].podCIDR',
    ]);
  });

  test('ipMappings: inside the external CIDR, not its first address', () => {
    const input = gatewayInput();
    input['ipMappings'] = [
      { externalAddress: '10.70.0.0', realAddress: '192.168.1.1' },
      { externalAddress: '10.71.0.5', realAddress: '192.168.1.2' },
      { externalAddress: '10.70.0.9', realAddress: '192.168.1.3' },
    ];
    expect(issuesOf(input).map((i) => i.path)).toEqual([
      'ipMappings[0].externalAddress',
      'ipMappings[1].externalAddress',
    ]);
  });

  test('role is required and drives the shape', () => {
    expect(issuesOf({ cluster: { id: 'x' } })[0]!.path).toBe('role');
    const input = gatewayInput();
    delete input['wireguard'];
    expect(issuesOf(input).map((i) => i.path)).toContain('wireguard');
  });
});

describe('parseConfig: node', () => {
  const node = () => ({
    role: 'node',
    cluster: { id: 'cluster-a', podCIDRs: ['10.0.0.0/16'] },
    node: {
      name: 'worker-1',
      gateways: [
        {
          name: 'cluster-b',
          vni: 0,
          gatewayUnderlay: '172.18.0.2',
          gatewayInternalAddress: '10.80.0.1',
          localInternalAddress: '10.80.0.2',
          remoteCIDRs: ['10.71.0.0/16'],
        },
      ],
    },
  });

  test('defaults', () => {
    const c = parseConfig(node());
    if (c.role !== 'node') throw new Error('role');
    expect(c.node.tunName).toBe('weft0');
    expect(c.node.mtu).toBe(1340);
    expect(c.node.gateways[0]!.mode).toBe('l3');
    expect(c.geneve.port).toBe(6091);
  });

  test('remote CIDRs must not overlap local ones; gateway-only sections rejected', () => {
    const n = node();
    n.node.gateways[0]!.remoteCIDRs = ['10.0.0.0/8'];
    expect(issuesOf(n).map((i) => i.path)).toEqual(['node.gateways[0].remoteCIDRs[0]']);
    const n2 = { ...node(), wireguard: { privateKey: KEYS.aPriv } };
    expect(issuesOf(n2)[0]!.message).toMatch(/wireguard/);
  });
});

test('decodeKey/encodeKey round trip; misuse throws', () => {
  const k = decodeKey(KEYS.aPub);
  expect(k.length).toBe(32);
  expect(encodeKey(k)).toBe(KEYS.aPub);
  expect(() => decodeKey('abc')).toThrow(TypeError);
  expect(() => encodeKey(new Uint8Array(31))).toThrow(TypeError);
});

test('input objects are not mutated', () => {
  const input = gatewayInput();
  const copy = clone(input);
  parseConfig(input);
  expect(input).toEqual(copy);
});
