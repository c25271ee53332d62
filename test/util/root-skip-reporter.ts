/**
 * Vitest reporter for whole-suite runs (scripts/test.sh): as root nothing may be skipped, so a
 * run with any skipped or todo test fails (exit code 1) and lists them. As non-root it only
 * counts them: skipping there (no namespaces, no TUN) is expected.
 *
 * List it before 'default' so the run still closes with vitest's summary line; filtering with
 * -t or .only also marks tests skipped, which is why this runs from scripts/test.sh only.
 */
import type { Reporter, TestModule } from 'vitest/node';
import { isRoot } from './requirements.js';

export interface TestOutcome {
  /** Test file, relative to the repository root. */
  readonly file: string;
  readonly name: string;
  /** vitest's result state ('passed' | 'failed' | 'skipped' | 'pending') and mode ('run' | 'skip' | 'todo' | 'only'). */
  readonly state: string;
  readonly mode: string;
}

export interface SkipVerdict {
  readonly ok: boolean;
  /** `file > name (mode)` for each skipped or todo test. */
  readonly skipped: string[];
  readonly message: string;
}

/** The check itself, on plain data: as root any skipped/todo test fails the run. */
export function checkSkips(tests: readonly TestOutcome[], root: boolean): SkipVerdict {
  const skipped = tests
    .filter((t) => t.state === 'skipped' || t.mode === 'skip' || t.mode === 'todo')
    .map((t) => `${t.file} > ${t.name} (${t.mode === 'todo' ? 'todo' : 'skipped'})`);
  if (skipped.length === 0) return { ok: true, skipped, message: 'no test skipped' };
  const list = skipped.map((s) => `  - ${s}`).join('\n');
  if (!root) return { ok: true, skipped, message: `${skipped.length} test(s) skipped (not root: allowed):\n${list}` };
  return {
    ok: false,
    skipped,
    message:
      `FAIL: ${skipped.length} test(s) skipped while running as root; as root nothing may be skipped ` +
      `(install what they need: bash scripts/setup.sh):\n${list}`,
  };
}

export function outcomesOf(modules: ReadonlyArray<TestModule>): TestOutcome[] {
  const out: TestOutcome[] = [];
  for (const m of modules) {
    for (const t of m.children.allTests()) {
      out.push({ file: m.relativeModuleId, name: t.fullName, state: t.result().state, mode: t.options.mode });
    }
  }
  return out;
}

export default class RootSkipReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const verdict = checkSkips(outcomesOf(testModules), isRoot());
    if (verdict.skipped.length === 0) return;
    if (verdict.ok) {
      process.stdout.write(`\nroot-skip check: ${verdict.message}\n`);
    } else {
      process.stdout.write(`\nroot-skip check: ${verdict.message}\n`);
      process.exitCode = 1;
    }
  }
}
