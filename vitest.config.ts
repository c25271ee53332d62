import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { TEST_PROJECT_ENV } from './test/util/requirements.js';
import { systemLanes } from './test/util/test-projects.js';

// Four projects, split by the rules in test/util/test-projects.ts (read from the sources):
// - unit: no root, namespaces, TUN or fixed ports: files run in parallel;
// - system: network namespaces, TUN devices, fixed names and ports, heap-per-operation
//   measurements: one file at a time, and only after every unit file has finished
//   (sequence.groupOrder), so nothing else loads the machine while they run;
// - system-timers: system files that mostly wait on protocol timers (TIMER_LANE_FILES), one at a
//   time. scripts/test.sh runs this lane at the same time as `system`; a plain `vitest run` runs
//   it after `system`;
// - system-alone: the files whose latency bounds need the machine to themselves (ALONE_FILES),
//   run after both lanes with nothing beside them.
const lanes = systemLanes();

/** A system lane: its files one at a time, after the projects of lower groupOrder. */
function systemProject(name: string, include: string[], groupOrder: number): TestProjectInlineConfiguration {
  return {
    extends: true,
    test: {
      name,
      include,
      fileParallelism: false,
      maxWorkers: 1,
      sequence: { groupOrder },
      env: { [TEST_PROJECT_ENV]: 'system' },
    },
  };
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: [...lanes.main, ...lanes.timers, ...lanes.alone],
          // Many unit files wait on child processes and sockets rather than the CPU.
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
          env: { [TEST_PROJECT_ENV]: 'unit' },
        },
      },
      systemProject('system', lanes.main, 1),
      systemProject('system-timers', lanes.timers, 2),
      systemProject('system-alone', lanes.alone, 3),
    ],
  },
});
