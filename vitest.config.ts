import { defineConfig } from 'vitest/config';
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
      {
        extends: true,
        test: {
          name: 'system',
          include: lanes.main,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
          env: { [TEST_PROJECT_ENV]: 'system' },
        },
      },
      {
        extends: true,
        test: {
          name: 'system-timers',
          include: lanes.timers,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
          env: { [TEST_PROJECT_ENV]: 'system' },
        },
      },
      {
        extends: true,
        test: {
          name: 'system-alone',
          include: lanes.alone,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
          env: { [TEST_PROJECT_ENV]: 'system' },
        },
      },
    ],
  },
});
