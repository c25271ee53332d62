import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/control/config-error.js';
import { loadConfigFile, loadConfigFileSync, parseConfigYaml } from '../../src/control/yaml.js';
import { KEYS } from './fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'weft-ctl-yaml-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('examples', () => {
  test.each(['gateway-a.yaml', 'gateway-b.yaml', 'node.yaml'])('%s validates', async (name) => {
    const c = await loadConfigFile(join('examples', name));
    expect(c.cluster.id).toMatch(/^cluster-/);
  });

  test("gateway-a and gateway-b are mirror images (each one the other's peer)", async () => {
    const a = await loadConfigFile('examples/gateway-a.yaml');
    const b = await loadConfigFile('examples/gateway-b.yaml');
    if (a.role !== 'gateway' || b.role !== 'gateway') throw new Error('role');
    expect(a.peers[0]!.clusterId).toBe(b.cluster.id);
    expect(b.peers[0]!.clusterId).toBe(a.cluster.id);
    expect(a.peers[0]!.remote.podCIDRs).toEqual(b.cluster.podCIDRs);
    expect(b.peers[0]!.remote.podCIDRs).toEqual(a.cluster.podCIDRs);
  });
});

describe('parseConfigYaml errors', () => {
  test("an alias before its anchor is a ConfigError, not the yaml library's ReferenceError (found by fuzzing)", () => {
    const text = ['role: gateway', 'cluster: *c', ''].join('\n');
    expect(() => parseConfigYaml(text, 'x.yaml')).toThrow(ConfigError);
    expect(() => parseConfigYaml(text, 'x.yaml')).toThrow(/x\.yaml.*YAML error: Unresolved alias/);
  });

  test('field error carries file, line and field path', () => {
    const text = [
      'role: gateway',
      'cluster:',
      '  id: a',
      'wireguard:',
      `  privateKey: ${KEYS.aPriv}`,
      'peers:',
      '  - name: b',
      '    clusterId: b',
      `    publicKey: ${KEYS.bPub}`,
      '    remote:',
      '      podCIDRs: [10.1.0.0/16, 10.2.0.1/16]',
    ].join('\n');
    const err = errorOf(() => parseConfigYaml(text, '/etc/weft/gw.yaml'));
    expect(err.issues).toHaveLength(1);
    expect(err.issues[0]!.path).toBe('peers[0].remote.podCIDRs[1]');
    expect(err.issues[0]!.line).toBe(11);
    expect(err.message).toBe(
      '/etc/weft/gw.yaml:11: peers[0].remote.podCIDRs[1]: expected a CIDR like "10.0.0.0/16": host bits are set; did you mean 10.2.0.0/16?',
    );
  });

  test('missing field points at the closest existing parent line', () => {
    const err = errorOf(() =>
      parseConfigYaml('role: gateway\ncluster:\n  id: a\nwireguard:\n  listenPort: 1\n', 'x.yaml'),
    );
    expect(err.issues[0]!.path).toBe('wireguard.privateKey');
    expect(err.issues[0]!.line).toBe(5);
  });

  test('syntax error and duplicate keys', () => {
    const e1 = errorOf(() => parseConfigYaml('role: gateway\ncluster: [\n', 'bad.yaml'));
    expect(e1.message).toMatch(/^bad\.yaml:\d+: \(root\): YAML syntax error/);
    const e2 = errorOf(() => parseConfigYaml('role: node\nrole: gateway\n', 'dup.yaml'));
    expect(e2.message).toMatch(/YAML syntax error/);
    const e3 = errorOf(() => parseConfigYaml('- 1\n', 'list.yaml'));
    expect(e3.message).toMatch(/expected a YAML mapping/);
  });

  test('missing file is a ConfigError naming the file', async () => {
    await expect(loadConfigFile(join(dir, 'nope.yaml'))).rejects.toThrow(/nope\.yaml.*ENOENT/);
    expect(() => loadConfigFileSync(join(dir, 'nope.yaml'))).toThrow(ConfigError);
  });
});

describe('privateKeyFile', () => {
  const base = (wg: string) => `role: gateway\ncluster: { id: a }\nwireguard:\n${wg}\n`;

  test('resolved relative to the config file', async () => {
    writeFileSync(join(dir, 'gw.key'), `${KEYS.aPriv}\n`);
    writeFileSync(join(dir, 'gw.yaml'), base('  privateKeyFile: gw.key'));
    const c = await loadConfigFile(join(dir, 'gw.yaml'));
    if (c.role !== 'gateway') throw new Error('role');
    expect(c.wireguard.privateKey).toBe(KEYS.aPriv);
    expect(c.wireguard.privateKeyFile).toBe('gw.key');
  });

  test('unreadable, malformed, or both set', () => {
    writeFileSync(join(dir, 'bad.key'), 'hello\n');
    writeFileSync(join(dir, 'k1.yaml'), base('  privateKeyFile: missing.key'));
    writeFileSync(join(dir, 'k2.yaml'), base('  privateKeyFile: bad.key'));
    writeFileSync(join(dir, 'k3.yaml'), base(`  privateKeyFile: bad.key\n  privateKey: ${KEYS.aPriv}`));
    expect(() => loadConfigFileSync(join(dir, 'k1.yaml'))).toThrow(
      /k1\.yaml:4: wireguard\.privateKeyFile: cannot read private key file .*missing\.key: ENOENT/,
    );
    expect(() => loadConfigFileSync(join(dir, 'k2.yaml'))).toThrow(
      /wireguard\.privateKeyFile: file .*bad\.key does not hold a base64 32-byte key/,
    );
    expect(() => loadConfigFileSync(join(dir, 'k3.yaml'))).toThrow(/not both/);
  });
});
