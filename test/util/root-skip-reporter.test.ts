/**
 * The whole-suite check that nothing is skipped as root (test/util/root-skip-reporter.ts, used
 * by scripts/test.sh): the decision on plain data, then the reporter inside a real vitest run of
 * a fixture suite (its own config, so the main suite never picks the fixture up).
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkSkips, type TestOutcome } from './root-skip-reporter.js';
import { isRoot, MissingRequirement, skipUnlessRoot, missingCommand } from './requirements.js';

const ROOT = resolve(import.meta.dirname, '../..');
const passed: TestOutcome = { file: 'test/a.test.ts', name: 'a works', state: 'passed', mode: 'run' };
const skipped: TestOutcome = {
  file: 'test/b.test.ts',
  name: 'b (skipped: tcpdump not installed)',
  state: 'skipped',
  mode: 'skip',
};
const todo: TestOutcome = { file: 'test/c.test.ts', name: 'c later', state: 'skipped', mode: 'todo' };

describe('checkSkips', () => {
  it('as root, a skipped or todo test fails the run and is named', () => {
    const v = checkSkips([passed, skipped, todo], true);
    expect(v.ok).toBe(false);
    expect(v.skipped).toEqual([
      'test/b.test.ts > b (skipped: tcpdump not installed) (skipped)',
      'test/c.test.ts > c later (todo)',
    ]);
    expect(v.message).toMatch(/2 test\(s\) skipped while running as root/);
    expect(v.message).toContain('scripts/setup.sh');
  });

  it('as root with nothing skipped, and as non-root with skips, the run passes', () => {
    expect(checkSkips([passed], true)).toMatchObject({ ok: true, skipped: [] });
    const nonRoot = checkSkips([passed, skipped], false);
    expect(nonRoot.ok).toBe(true);
    expect(nonRoot.skipped).toHaveLength(1);
  });
});

describe('skipUnlessRoot / missingCommand', () => {
  it('a missing tool: the reason as non-root, a MissingRequirement naming the package as root', () => {
    expect(skipUnlessRoot(null, true)).toBeNull();
    expect(skipUnlessRoot('x missing', false)).toBe('x missing');
    expect(() => skipUnlessRoot('tcpdump not installed: install tcpdump', true)).toThrow(MissingRequirement);
    expect(() => skipUnlessRoot('tcpdump not installed: install tcpdump', true)).toThrow(/as root.*install tcpdump/);
  });

  it('names the Debian package of a missing command, and refuses a command it has no package for', () => {
    expect(missingCommand(['sh'])).toBeNull();
    // Put a known command out of reach by running the probe with an empty PATH.
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      expect(missingCommand(['tcpdump'])).toBe(
        'tcpdump not installed: install tcpdump (apt-get install --no-install-recommends tcpdump, or run scripts/setup.sh)',
      );
      expect(missingCommand(['nft'])).toMatch(/^nft not installed: install nftables /);
    } finally {
      process.env.PATH = saved;
    }
    expect(() => missingCommand(['no-such-tool-cix'])).toThrow(/no package known for command 'no-such-tool-cix'/);
  });
});

describe('RootSkipReporter in a real vitest run', () => {
  function runFixture(mode: string): { status: number | null; out: string } {
    const r = spawnSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/vitest/vitest.mjs'),
        'run',
        // The runner config loader writes no bundled config next to it (works for any user).
        '--configLoader',
        'runner',
        '--config',
        join(ROOT, 'test/util/fixtures/root-skip/vitest.config.ts'),
        '--reporter',
        join(ROOT, 'test/util/root-skip-reporter.ts'),
        '--reporter',
        'default',
      ],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, CIX_FIXTURE_MODE: mode, NO_COLOR: '1', CI: '1' },
      },
    );
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  }

  it('passes a run with nothing skipped, and still closes with the vitest summary', () => {
    const r = runFixture('clean');
    expect(r.status, r.out).toBe(0);
    expect(r.out).not.toContain('root-skip check');
    expect(
      r.out
        .trim()
        .split('\n')
        .filter((l) => /Tests\s+1 passed/.test(l)),
    ).toHaveLength(1);
  });

  it.each(['skip', 'todo'])('a %s test: fails as root naming it, passes as non-root', (mode) => {
    const r = runFixture(mode);
    const why = 'fixture of root-skip-reporter.test.ts, which the reporter must refuse as root';
    const name = mode === 'skip' ? `is skipped: ${why} (skipped)` : `is todo: ${why} (todo)`;
    expect(r.out).toContain(`sample.fixture.ts > ${name}`);
    expect(r.status, r.out).toBe(isRoot() ? 1 : 0);
    // The summary stays after the check's message: CI reads the closing lines.
    const lines = r.out.trim().split('\n');
    const check = lines.findIndex((l) => l.startsWith('root-skip check:'));
    const summary = lines.findIndex((l) => /^\s*Tests\s+/.test(l));
    expect(check).toBeGreaterThanOrEqual(0);
    expect(summary).toBeGreaterThan(check);
  });
});
