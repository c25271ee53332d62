// The daemons' V8 tier-up threshold (src/cli/v8-tiering.ts): parsing of WEFT_V8_INTERRUPT_BUDGET,
// and that the flag really makes V8 optimize a function that its default threshold leaves in
// the interpreter (checked in a child process with synchronous compilation: no timing involved).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  DAEMON_INTERRUPT_BUDGET,
  DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE,
  daemonTieringFlags,
  FABRIC_INTERRUPT_BUDGET,
  interruptBudgetFlag,
  TieringConfigError,
} from '../../src/cli/v8-tiering.js';
import { ensureBuilt, ROOT } from './helpers.js';

describe('interruptBudgetFlag', () => {
  test('unset or empty: the daemon default; "default": no flag; an integer in range: that budget', () => {
    expect(interruptBudgetFlag(undefined)).toBe(`--interrupt-budget=${DAEMON_INTERRUPT_BUDGET}`);
    expect(interruptBudgetFlag(' ')).toBe(`--interrupt-budget=${DAEMON_INTERRUPT_BUDGET}`);
    expect(interruptBudgetFlag('default')).toBeNull();
    expect(interruptBudgetFlag('4096')).toBe('--interrupt-budget=4096');
    expect(interruptBudgetFlag('64')).toBe('--interrupt-budget=64');
  });

  test('an unset budget of null: no flag when unset, the value when set', () => {
    expect(FABRIC_INTERRUPT_BUDGET).toBeNull();
    expect(interruptBudgetFlag(undefined, null)).toBeNull();
    expect(interruptBudgetFlag(' ', null)).toBeNull();
    expect(interruptBudgetFlag('1024', null)).toBe('--interrupt-budget=1024');
    expect(interruptBudgetFlag('default', null)).toBeNull();
    expect(() => interruptBudgetFlag('x', null)).toThrow("unset = V8's own)");
    expect(daemonTieringFlags(undefined, null)).toEqual([]);
  });

  test.each(['abc', '-5', '1.5', '63', '2000000', '1e3'])(
    'rejects %s naming the variable and the accepted values',
    (v) => {
      expect(() => interruptBudgetFlag(v)).toThrow(TieringConfigError);
      expect(() => interruptBudgetFlag(v)).toThrow(/WEFT_V8_INTERRUPT_BUDGET=.*"default".*64\.\.1048576/);
    },
  );
});

describe('daemonTieringFlags', () => {
  const wait = `--minimum-invocations-after-ic-update=${DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE}`;

  const eager = '--no-lazy-feedback-allocation';

  test('the budget, the shorter wait after inline-cache changes and feedback from the first call; none for "default"', () => {
    expect(daemonTieringFlags(undefined)).toEqual([`--interrupt-budget=${DAEMON_INTERRUPT_BUDGET}`, wait, eager]);
    expect(daemonTieringFlags('4096')).toEqual(['--interrupt-budget=4096', wait, eager]);
    expect(daemonTieringFlags('default')).toEqual([]);
    expect(() => daemonTieringFlags('fast')).toThrow(TieringConfigError);
  });

  test("this Node's V8 knows every flag (v8.setFlagsFromString would ignore an unknown one silently)", () => {
    // On the command line V8 refuses unknown flags: a renamed flag fails here, not silently in production.
    const r = spawnSync(process.execPath, [...daemonTieringFlags(undefined), '-e', '0'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const bad = spawnSync(process.execPath, ['--minimum-invocations-after-ic-updat=16', '-e', '0'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(bad.status).not.toBe(0);
  });
});

/** Runs 200 calls of a small loop in a child: is it optimized afterwards (V8's own status bits)? */
function optimizedAfter200Calls(budgetEnv: string): boolean {
  const mod = pathToFileURL(join(ROOT, 'dist/src/cli/v8-tiering.js')).href;
  const script = `
    const { applyDaemonTiering } = await import(${JSON.stringify(mod)});
    applyDaemonTiering();
    function sum(a) { let s = 0; for (let i = 0; i < a.length; i++) s += a[i]; return s; }
    const a = new Uint8Array(8);
    for (let i = 0; i < 200; i++) sum(a);
    process.stdout.write(String(%GetOptimizationStatus(sum)));`;
  const r = spawnSync(
    process.execPath,
    ['--allow-natives-syntax', '--no-concurrent-recompilation', '--input-type=module', '-e', script],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, WEFT_V8_INTERRUPT_BUDGET: budgetEnv }, timeout: 30_000 },
  );
  expect(r.status, r.stderr).toBe(0);
  const status = Number(r.stdout.trim());
  expect(status & 1).toBe(1); // "is a function": the status is real
  return (status & 16) !== 0; // V8's OptimizationStatus::kOptimized
}

/**
 * A branch taken only in a function's first call, then never until the function is optimized:
 * does taking it again keep the optimized code (the first call left feedback) or deoptimize it?
 */
function firstCallBranchStaysOptimized(budgetEnv: string): boolean {
  const mod = pathToFileURL(join(ROOT, 'dist/src/cli/v8-tiering.js')).href;
  const script = `
    const { applyDaemonTiering } = await import(${JSON.stringify(mod)});
    applyDaemonTiering();
    const seen = { n: 0 };
    function note(o) { o.n++; }
    function f(first) { if (first) note(seen); return seen.n; }
    f(true);
    for (let i = 0; i < 20; i++) f(false);
    %PrepareFunctionForOptimization(f);
    f(false);
    %OptimizeFunctionOnNextCall(f);
    f(false);
    f(true);
    process.stdout.write(String(%GetOptimizationStatus(f)));`;
  const r = spawnSync(
    process.execPath,
    ['--allow-natives-syntax', '--no-concurrent-recompilation', '--input-type=module', '-e', script],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, WEFT_V8_INTERRUPT_BUDGET: budgetEnv }, timeout: 30_000 },
  );
  expect(r.status, r.stderr).toBe(0);
  const status = Number(r.stdout.trim());
  expect(status & 1).toBe(1);
  return (status & 16) !== 0;
}

describe('applyDaemonTiering in a process', () => {
  // A build (or waiting for another file's) outlasts a test's time limit.
  beforeAll(() => ensureBuilt(['src/cli/v8-tiering.js', 'src/cli/weft-wg.js']), 300_000);
  test('with the daemon budget a hot function is optimized after 200 calls; with V8 default it is not', () => {
    expect(optimizedAfter200Calls('')).toBe(true);
    expect(optimizedAfter200Calls('default')).toBe(false);
  });

  test('with the daemon flags a branch taken only in the first call does not deoptimize the optimized code', () => {
    expect(firstCallBranchStaysOptimized('')).toBe(true);
    expect(firstCallBranchStaysOptimized('default')).toBe(false);
  });
});

test('bin/weft-wg refuses a bad WEFT_V8_INTERRUPT_BUDGET before starting (exit 2, the variable named)', () => {
  ensureBuilt(['src/cli/v8-tiering.js', 'src/cli/weft-wg.js']);
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/weft-wg'), '--version'], {
    encoding: 'utf8',
    env: { ...process.env, WEFT_V8_INTERRUPT_BUDGET: 'fast' },
    timeout: 30_000,
  });
  expect(r.status).toBe(2);
  expect(r.stderr).toMatch(/WEFT_V8_INTERRUPT_BUDGET=fast/);
  const ok = spawnSync(process.execPath, [join(ROOT, 'bin/weft-wg'), '--version'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(ok.status).toBe(0);
  expect(ok.stdout).toMatch(/^weft-wg v/);
});

test('bin/weft: a daemon command refuses a bad WEFT_V8_INTERRUPT_BUDGET (exit 2, the variable named); a short-lived one ignores it', () => {
  ensureBuilt(['src/cli/v8-tiering.js', 'src/cli/daemon-commands.js', 'src/cli/weft.js']);
  const env = { ...process.env, WEFT_V8_INTERRUPT_BUDGET: 'fast' };
  for (const cmd of ['up', 'k8s']) {
    const r = spawnSync(process.execPath, [join(ROOT, 'bin/weft'), cmd, '--help'], {
      encoding: 'utf8',
      env,
      timeout: 30_000,
    });
    expect(r.status, cmd).toBe(2);
    expect(r.stderr, cmd).toMatch(/^weft: WEFT_V8_INTERRUPT_BUDGET=fast: expected "default"/);
    expect(r.stderr, cmd).toContain("unset = V8's own)");
    expect(r.stdout, cmd).toBe('');
  }
  const v = spawnSync(process.execPath, [join(ROOT, 'bin/weft'), 'version'], {
    encoding: 'utf8',
    env,
    timeout: 30_000,
  });
  expect(v.status, v.stderr).toBe(0);
  expect(v.stdout).toMatch(/^weft /);
  const ok = spawnSync(process.execPath, [join(ROOT, 'bin/weft'), 'up', '--help'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(ok.status, ok.stderr).toBe(0);
  expect(ok.stdout).toMatch(/^Usage: weft up/);
});
