/**
 * What a restarted node agent loads before it forwards. `weft k8s --role=node` starts its data
 * plane from the last configuration (src/daemon/last-config.ts) before anything Kubernetes, and
 * its restart gap is mostly module loading: the modules evaluated up to that point are those of
 * weft (bin/weft runs dist/src/cli/weft.js), the k8s command and the node data plane
 * (src/daemon/launch.ts). This asserts, from
 * the modules Node really loads, that none of the heavy ones that come later is among them.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { ensureBuilt, ROOT } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'weft-warm-imports-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** URLs of the modules `node` loads while importing `entries` (a module.register load hook). */
function loadedBy(entries: readonly string[]): string[] {
  const log = join(dir, 'loaded.txt');
  writeFileSync(log, '');
  writeFileSync(
    join(dir, 'hook.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function load(url, ctx, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, ctx); }`,
  );
  writeFileSync(
    join(dir, 'register.mjs'),
    `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(join(dir, 'hook.mjs')).href)});`,
  );
  const script = entries.map((e) => `await import(${JSON.stringify(pathToFileURL(join(ROOT, e)).href)});`).join('');
  execFileSync(process.execPath, ['--import', join(dir, 'register.mjs'), '--input-type=module', '-e', script], {
    cwd: ROOT,
  });
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

describe('a restarted node agent forwards before loading what it needs only later', () => {
  test('weft, the k8s command and the node data plane load no schema, YAML, metrics, Kubernetes client or host lane', () => {
    ensureBuilt(['src/cli/weft.js', 'src/cli/commands/k8s.js', 'src/daemon/launch.js']);
    const loaded = loadedBy(['dist/src/cli/weft.js', 'dist/src/cli/commands/k8s.js', 'dist/src/daemon/launch.js']);
    // Control: the hook sees what the entries load (the node data plane and the logger among them).
    expect(loaded.some((u) => u.endsWith('/dist/src/node/agent.js'))).toBe(true);
    expect(loaded.some((u) => u.includes('/node_modules/pino/'))).toBe(true);
    const heavy = loaded.filter((u) =>
      /\/node_modules\/(zod|yaml|prom-client|@kubernetes\/client-node)\/|\/dist\/src\/(tcp\/|pipelines\/host-lane(\.js|-udp|-tcp|-icmp)|control\/config-schema|gateway\/)/.test(
        u,
      ),
    );
    expect(heavy).toEqual([]);
  });
});
