/**
 * The split of the test files into vitest's parallel `unit` and serial `system` projects
 * (vitest.config.ts, rule in test/util/test-projects.ts): the config uses the rule, every file
 * that reaches the namespace harness or declares root lands in `system`, and a root-only file
 * the rule missed fails in `unit` instead of colliding with other root tests.
 */
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';
import { MisclassifiedTest, TEST_PROJECT_ENV, needs, unmetNeed, type Needs } from '../util/requirements.js';
import { ALONE_FILES, systemLanes, systemReason, systemTestFiles, TIMER_LANE_FILES } from '../util/test-projects.js';

const ROOT = resolve(import.meta.dirname, '../..');
const system = systemTestFiles();

interface Project {
  test: { name: string; include?: string[]; exclude?: string[]; fileParallelism?: boolean; maxWorkers?: number };
}
const projects = (config.test?.projects ?? []) as Project[];
const project = (name: string): Project['test'] => projects.find((p) => p.test.name === name)!.test;

describe('test projects: unit in parallel, system serial', () => {
  it('vitest.config.ts runs the rule’s system files serially after the unit files, and the rest in parallel', () => {
    expect(projects.map((p) => p.test.name)).toEqual(['unit', 'system', 'system-timers', 'system-alone']);
    const lanes = systemLanes();
    expect([...lanes.main, ...lanes.timers, ...lanes.alone].sort()).toEqual([...system].sort());
    expect(lanes.timers).toEqual(TIMER_LANE_FILES);
    expect(lanes.alone).toEqual(ALONE_FILES);
    for (const f of [...TIMER_LANE_FILES, ...ALONE_FILES]) expect(lanes.main).not.toContain(f);
    for (const f of ALONE_FILES) expect(lanes.timers).not.toContain(f);
    expect(project('system').include).toEqual(lanes.main);
    expect(project('system-timers').include).toEqual(lanes.timers);
    expect(project('system-alone').include).toEqual(lanes.alone);
    for (const name of ['system', 'system-timers', 'system-alone']) {
      expect(project(name).fileParallelism).toBe(false);
      expect(project(name).maxWorkers).toBe(1);
    }
    expect(project('unit').include).toEqual(['test/**/*.test.ts']);
    expect([...project('unit').exclude!].sort()).toEqual([...system].sort());
  });

  it('every file of the end-to-end and interop folders is a system test', () => {
    for (const dir of ['e2e', 'interop']) {
      const files = readdirSync(join(ROOT, 'test', dir)).filter((f) => f.endsWith('.test.ts'));
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) expect(system, f).toContain(`test/${dir}/${f}`);
    }
  });

  it('a file is a system test through a helper that imports the harness, and says which path decided', () => {
    const reasons = system.map((f) => systemReason(join(ROOT, f))!);
    for (const r of reasons) expect(r).toMatch(/test\/util\/(netns|alloc)\.ts \(|passes root: true to needs\(\)$/);
    // Through a helper of its folder (e.g. test/rules/oracle-bed.ts), not only directly.
    expect(reasons.some((r) => /^test\/\S+ imports test\/(?!util\/)\S+ imports test\/util\//.test(r))).toBe(true);
    expect(systemReason(join(ROOT, 'test/demo/topology.test.ts'))).toMatch(/passes root: true to needs\(\)/);
    expect(systemReason(join(ROOT, 'test/wireguard/alloc.test.ts'))).toMatch(/imports test\/util\/alloc\.ts/);
  });

  it('protocol, loopback-socket and architecture tests are unit tests', () => {
    for (const f of [
      'test/packet/checksum.test.ts',
      'test/io/udp.test.ts',
      'test/cli/conncheck-runner.test.ts',
      'test/architecture/test-projects.test.ts',
    ]) {
      expect(systemReason(join(ROOT, f)), f).toBeNull();
      expect(system).not.toContain(f);
    }
  });
});

describe('a root-only file in the unit project fails', () => {
  const saved = process.env[TEST_PROJECT_ENV];
  afterEach(() => {
    if (saved === undefined) delete process.env[TEST_PROJECT_ENV];
    else process.env[TEST_PROJECT_ENV] = saved;
  });

  it('needs() with root throws MisclassifiedTest there, whether or not the run is root', () => {
    process.env[TEST_PROJECT_ENV] = 'unit';
    const rootOnly: Needs = { root: true };
    expect(() => needs(rootOnly)).toThrow(MisclassifiedTest);
    expect(() => unmetNeed({ root: true, commands: ['ip'] })).toThrow(/serial system project/);
    expect(() => unmetNeed({ commands: [] })).not.toThrow();
  });

  it('in the system project the same call decides as before (a reason, or null as root)', () => {
    process.env[TEST_PROJECT_ENV] = 'system';
    expect(() => unmetNeed({ root: true })).not.toThrow(MisclassifiedTest);
  });
});
