// The npm package builds its addons at install (package.json "install": node native/build.mjs):
// every source binding.gyp names and every header those sources include must be in the tarball
// (`npm pack --dry-run` lists it; nothing is built or written), and so must what `bin/` loads.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../cli/helpers.js';

function packed(): Set<string> {
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const j = JSON.parse(r.stdout) as { files: { path: string }[] }[];
  return new Set(j[0]!.files.map((f) => f.path));
}

describe('npm package contents', () => {
  it('holds every addon source binding.gyp names and every local header they include', () => {
    const files = packed();
    const gyp = JSON.parse(readFileSync(join(ROOT, 'native/binding.gyp'), 'utf8')) as {
      targets: { sources: string[] }[];
    };
    const sources = gyp.targets.flatMap((t) => t.sources);
    expect(sources.length).toBeGreaterThan(4);
    const needed = new Set(['native/binding.gyp', 'native/build.mjs']);
    const todo = sources.map((s) => `native/${s}`);
    while (todo.length > 0) {
      const f = todo.pop()!;
      if (needed.has(f)) continue;
      needed.add(f);
      for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/^#include "([^"]+)"/gm))
        todo.push(`native/${m[1]}`);
    }
    expect(
      [...needed].filter((f) => !files.has(f)),
      'missing from package.json "files"',
    ).toEqual([]);
  });

  it('holds the commands and their compiled entry points', () => {
    const files = packed();
    for (const f of [
      'bin/weft',
      'bin/weft-wg',
      'dist/src/cli/weft.js',
      'dist/src/cli/weft-wg.js',
      'dist/src/lib/index.js',
      'README.md',
    ])
      expect(files.has(f), f).toBe(true);
  });
});
