/**
 * Tests that start Weft processes run them from dist/ (bin/weft imports dist/src/cli/weft.js):
 * rebuild it when a source file is newer than what would run. scripts/test.sh builds first, so
 * there this is a no-op; during development it saves a stale-build surprise.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { runCommand } from '../../src/demo/host.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const UP_JS = join(ROOT, 'dist/src/cli/commands/up.js');
export const LAUNCH_JS = join(ROOT, 'dist/src/daemon/launch.js');
export const DEMO_JS = join(ROOT, 'dist/src/demo/run.js');
export const WEFT_BIN = join(ROOT, 'bin/weft');

function newest(dir: string, ext: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, ext));
    else if (e.name.endsWith(ext)) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

/** Builds dist/ (tsc -p tsconfig.build.json) unless every file in `needed` is newer than every source. */
export async function ensureBuilt(needed: readonly string[] = [LAUNCH_JS, UP_JS, DEMO_JS]): Promise<void> {
  const src = newest(join(ROOT, 'src'), '.ts');
  if (needed.every((f) => existsSync(f) && statSync(f).mtimeMs >= src)) return;
  // Type errors in other work-in-progress files do not stop tsc from emitting.
  await runCommand(['npx', 'tsc', '-p', join(ROOT, 'tsconfig.build.json')], { allowFail: true, timeoutMs: 170_000 });
  for (const f of needed) if (!existsSync(f)) throw new Error(`build failed: ${f} missing (npm run build)`);
}
