// `weft bench` runs dist/bench/run.js in a child Node.js and keeps its exit-code meaning.
import { beforeAll, expect, test } from 'vitest';
import { ensureBuilt, runWeft } from './helpers.js';

beforeAll(() => ensureBuilt(['src/cli/weft.js', 'src/cli/commands/bench.js', 'bench/run.js']), 120_000);

test('an unknown benchmark name is a usage error (exit 2) listing the known ones', async () => {
  const r = await runWeft(['bench', 'nosuch']);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/unknown benchmark\(s\): nosuch; known: .*crypto.*route/);
});

test('one named benchmark runs and prints its table', async () => {
  const r = await runWeft(['bench', 'route'], { timeoutMs: 120_000 });
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^# weft bench — node v\d+/);
  expect(r.stdout).toContain('## route');
  expect(r.stdout).not.toContain('## crypto');
}, 150_000);
