/**
 * The fuzzer's native addon (@jazzer.js/fuzzer's prebuilt libFuzzer) loads on this machine: on
 * Debian 12 only after scripts/jazzer-compat.mjs (run by scripts/setup.sh) patched it; see
 * FUZZING.md. As root (CI) a failure names the fix; as non-root the test is skipped with it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { skipUnlessRoot } from '../util/requirements.js';

const ROOT = resolve(import.meta.dirname, '../..');
const ADDON = join(ROOT, 'node_modules/@jazzer.js/fuzzer/prebuilds', `fuzzer-${process.platform}-${process.arch}.node`);

function loadError(): string | null {
  if (!existsSync(ADDON)) return `${ADDON} missing: run npm ci (@jazzer.js/core is a devDependency)`;
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(ADDON)})`], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status === 0) return null;
  const why = r.stderr.split('\n').find((l) => l.startsWith('Error')) ?? r.stderr.trim();
  return `the jazzer fuzzer addon does not load (${why}): run node scripts/jazzer-compat.mjs (scripts/setup.sh does; needs g++ and patchelf)`;
}

const skip = skipUnlessRoot(loadError());

describe.skipIf(skip !== null)(`jazzer fuzzer addon${skip !== null ? ` (skipped: ${skip})` : ''}`, () => {
  it('loads and exposes libFuzzer entry points', () => {
    const r = spawnSync(
      process.execPath,
      ['-e', `const a = require(${JSON.stringify(ADDON)}); console.log(Object.keys(a).sort().join(','))`],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/start/i);
  });

  it('the compatibility step is idempotent: nothing to do once the addon loads', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/jazzer-compat.mjs')], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('nothing to do');
  });
});
