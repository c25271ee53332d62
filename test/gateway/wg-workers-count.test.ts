/** WEFT_WORKERS parsing and the default worker count (affinity mask capped by the cgroup v2 quota). */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultWorkerCount, parseWorkerCount } from '../../src/gateway/wg-workers.js';

const dir = mkdtempSync(join(tmpdir(), 'weft-cpumax-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function cpuMax(text: string): string {
  const p = join(dir, `cpu.max.${Math.random()}`);
  writeFileSync(p, text);
  return p;
}

describe('worker count', () => {
  it('caps the affinity mask by the cgroup quota, rounding a fraction of a CPU up', () => {
    const cpus = availableParallelism();
    expect(defaultWorkerCount(cpuMax('max 100000\n'))).toBe(cpus);
    expect(defaultWorkerCount(cpuMax('50000 100000\n'))).toBe(1);
    expect(defaultWorkerCount(cpuMax('150000 100000\n'))).toBe(Math.min(cpus, 2));
    expect(defaultWorkerCount(cpuMax(`${cpus * 400000} 100000\n`))).toBe(cpus);
    expect(defaultWorkerCount(join(dir, 'absent'))).toBe(cpus);
  });

  it('parses WEFT_WORKERS: unset is 1, auto is the default count, anything else but 1..64 is refused', () => {
    expect(parseWorkerCount(undefined)).toBe(1);
    expect(parseWorkerCount('')).toBe(1);
    expect(parseWorkerCount('2')).toBe(2);
    expect(parseWorkerCount('auto')).toBe(defaultWorkerCount());
    for (const bad of ['0', '-1', '1.5', 'two', '65']) expect(() => parseWorkerCount(bad)).toThrow(/WEFT_WORKERS/);
  });
});
