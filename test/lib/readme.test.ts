// The package surface as a consumer sees it: the README's library example run verbatim through
// the package name, deep imports refused, and the exact list of public names.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ensureBuilt, ROOT } from '../cli/helpers.js';

// Self-reference ('weft') resolves only from files inside the package directory.
let dir = '';
beforeAll(() => {
  ensureBuilt(['src/lib/index.js', 'src/lib/wireguard.js', 'src/lib/memory-network.js']);
  dir = mkdtempSync(join(ROOT, 'test/lib/.tmp-'));
}, 120_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runModule(name: string, code: string): { status: number | null; stdout: string; stderr: string } {
  const f = join(dir, name);
  writeFileSync(f, code);
  const r = spawnSync(process.execPath, [f], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The first ```js block after the "## Use as a library" heading. */
function readmeExample(): string {
  const md = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = md.indexOf('\n## Use as a library');
  expect(at, 'README has a "Use as a library" section').toBeGreaterThan(0);
  const m = /```js\n([\s\S]*?)```/.exec(md.slice(at));
  expect(m, 'a ```js block in that section').not.toBeNull();
  return m![1]!;
}

describe('weft as a package', () => {
  test('the README example runs verbatim: two devices handshake and a packet arrives', () => {
    const code = readmeExample();
    expect(code.split('\n').filter((l) => l.trim() !== '').length).toBeLessThanOrEqual(14);
    expect(code).toMatch(/from 'weft'/);
    const r = runModule('readme.mjs', code);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('hi true\n');
  });

  test('deep imports through the package name are refused; package.json is exported', () => {
    const r = runModule(
      'deep.mjs',
      `
      const out = {};
      for (const spec of ['weft/dist/src/wireguard/device.js', 'weft/dist/src/lib/index.js', 'weft/src/lib/index.ts', 'weft/bin/weft']) {
        try { await import(spec); out[spec] = 'loaded'; } catch (e) { out[spec] = e.code; }
      }
      const pkg = await import('weft/package.json', { with: { type: 'json' } });
      out.version = pkg.default.version;
      console.log(JSON.stringify(out));
    `,
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, string>;
    expect(out['weft/dist/src/wireguard/device.js']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(out['weft/dist/src/lib/index.js']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(out['weft/src/lib/index.ts']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(out['weft/bin/weft']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(out.version).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
  });

  test('the public surface is exactly this list of runtime names', () => {
    const r = runModule(
      'names.mjs',
      `import * as weft from 'weft'; console.log(JSON.stringify(Object.keys(weft).sort()));`,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      'ConfigError',
      'CryptoBackendError',
      'DROP_REASON_NAMES',
      'Device',
      'ENCRYPT_DROP',
      'ENCRYPT_SEND',
      'ENCRYPT_STAGED',
      'EncryptResult',
      'GeneveTunnelTable',
      'HOOK_FORWARD',
      'HOOK_INPUT',
      'HOOK_NAMES',
      'HOOK_OUTPUT',
      'HOOK_POSTROUTING',
      'HOOK_PREROUTING',
      'IpView',
      'KeyFormatError',
      'MemoryNetwork',
      'NatConfigError',
      'NatRouter',
      'PacketMeta',
      'PeerTable',
      'RECEIVE_DELIVER',
      'RECEIVE_DROP',
      'RECEIVE_HANDSHAKE',
      'RECEIVE_KEEPALIVE',
      'ROUTER_DROP_NAMES',
      'ReceiveResult',
      'Router',
      'RouterDrop',
      'RouterLanes',
      'VERDICT_ACCEPT',
      'VERDICT_DROP',
      'WEFT_VERSION',
      'WireGuardConfigError',
      'WireGuardDevice',
      'createWireGuardDevice',
      'diffConfig',
      'generatePresharedKey',
      'generatePrivateKey',
      'getCryptoBackend',
      'loadConfig',
      'parseConfig',
      'parseConfigYaml',
      'parseIp',
      'publicKeyOf',
      'startGateway',
      'startNodeAgent',
      'startWgDaemon',
      'wireGuardStatus',
    ]);
  });

  test('importing the package loads no native code (koffi, the I/O addon) until a function needs it', () => {
    const r = runModule(
      'lazy.mjs',
      `
      import { createRequire } from 'node:module';
      await import('weft');
      const require = createRequire(import.meta.url);
      const loaded = Object.keys(require.cache).filter((k) => /koffi|weft_io/.test(k));
      const dl = process.moduleLoadList?.filter((m) => /koffi/.test(m)) ?? [];
      console.log(JSON.stringify({ loaded, dl }));
    `,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ loaded: [], dl: [] });
  });

  test('the type declarations for the entry point exist (package.json "types")', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, unknown>;
      types: string;
    };
    expect(Object.keys(pkg.exports).sort()).toEqual(['.', './package.json']);
    const dts = readFileSync(join(ROOT, pkg.types), 'utf8');
    expect(dts).toMatch(/export declare function loadConfig\(/);
    expect(dts).toMatch(/export \{ createWireGuardDevice, WireGuardDevice, wireGuardStatus \}/);
  });
});
