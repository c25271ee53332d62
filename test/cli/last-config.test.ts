import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { loadConfigFileSync } from '../../src/control/yaml.js';
import { lastConfigPath, readLastConfig, saveLastConfig, verifyLastConfig } from '../../src/daemon/last-config.js';
import type { NodeConfig } from '../../src/control/config.js';
import { ROOT } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'weft-lastcfg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('last configuration of a node agent (the start of a restarted one)', () => {
  test('a node configuration comes back as it was saved, then validated', async () => {
    const cfg = loadConfigFileSync(join(ROOT, 'examples/node.yaml')) as NodeConfig;
    expect(cfg.role).toBe('node');
    const path = lastConfigPath(dir, 'k8s-node');
    expect(path).toBe(join(dir, 'k8s-node.last-config.json'));
    expect(readLastConfig(path)).toEqual({ kind: 'none' });
    saveLastConfig(path, cfg);
    expect(readLastConfig(path)).toEqual({ kind: 'config', config: cfg });
    expect(await verifyLastConfig(path, cfg)).toEqual({ kind: 'config', config: cfg });
  });

  test('a gateway configuration is never kept (it must hold the Lease before forwarding)', () => {
    const gw = loadConfigFileSync(join(ROOT, 'examples/gateway-a.yaml'));
    const path = join(dir, 'gw.last-config.json');
    expect(() => saveLastConfig(path, gw)).toThrow(/only a node configuration/);
    writeFileSync(path, JSON.stringify(gw));
    expect(readLastConfig(path)).toEqual({ kind: 'unusable', reason: `${path}: not a node configuration` });
  });

  test('a file that does not parse, or is not a node configuration in outline, is unusable, with the reason', () => {
    const path = join(dir, 'bad.last-config.json');
    writeFileSync(path, '{"role":"node",');
    const r = readLastConfig(path);
    expect(r.kind).toBe('unusable');
    expect(r.kind === 'unusable' && r.reason).toContain(path);
    const cfg = JSON.parse(readFileSync(lastConfigPath(dir, 'k8s-node'), 'utf8')) as Record<string, unknown>;
    writeFileSync(path, JSON.stringify({ ...cfg, node: 'x' }));
    const r2 = readLastConfig(path);
    expect(r2.kind).toBe('unusable');
    expect(r2.kind === 'unusable' && r2.reason).toContain(path);
  });

  test('a file in outline but invalid (as an older build may have written it) fails verifyLastConfig, naming the field', async () => {
    const path = join(dir, 'old.last-config.json');
    const cfg = JSON.parse(readFileSync(lastConfigPath(dir, 'k8s-node'), 'utf8')) as Record<string, unknown>;
    writeFileSync(path, JSON.stringify({ ...cfg, geneve: { ...(cfg['geneve'] as object), port: 0 } }));
    const r = readLastConfig(path);
    expect(r.kind).toBe('config');
    const v = await verifyLastConfig(path, (r as { config: NodeConfig }).config);
    expect(v.kind).toBe('unusable');
    expect(v.kind === 'unusable' && v.reason).toMatch(new RegExp(`${path}: geneve\\.port`));
  });
});
