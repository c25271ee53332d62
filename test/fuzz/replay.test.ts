/**
 * Replays every committed fuzz input — the corpus (fuzz/corpus/<target>/) and every crash the
 * fuzzer found (fuzz/crashes/<target>/, each fixed since) — through the same target functions
 * and invariant checks `npm run fuzz` runs under jazzer. Fast and fuzzer-free: this is how the
 * fuzzer's findings stay regression tests in CI.
 *
 * Stateful targets (devices, NAT, engines) export reset(): each input replays from a fresh state,
 * so a failure here reproduces with that one file (node scripts or vitest, no jazzer needed).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const TARGETS = readdirSync(join(ROOT, 'fuzz/targets'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .sort();

function inputs(dir: string): string[] {
  return existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => !f.startsWith('.') && !f.endsWith('.md'))
        .sort()
        .map((f) => join(dir, f))
    : [];
}

describe('fuzz corpus and crash replay', () => {
  it('has a corpus for every target', () => {
    expect(TARGETS.length).toBeGreaterThanOrEqual(10);
    expect(TARGETS.filter((t) => inputs(join(ROOT, 'fuzz/corpus', t)).length === 0)).toEqual([]);
  });

  it.each(TARGETS)(
    '%s: every corpus and crash input passes the invariants',
    async (target) => {
      const m = (await import(`../../fuzz/targets/${target}.ts`)) as {
        fuzz: (d: Uint8Array) => void;
        reset?: () => void;
      };
      const files = [...inputs(join(ROOT, 'fuzz/corpus', target)), ...inputs(join(ROOT, 'fuzz/crashes', target))];
      const failures: string[] = [];
      for (const f of files) {
        m.reset?.();
        try {
          m.fuzz(readFileSync(f));
        } catch (e) {
          failures.push(`${f.slice(ROOT.length + 1)}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
        }
      }
      expect(failures).toEqual([]);
    },
    120_000,
  );
});
