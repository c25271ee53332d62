import { defineConfig } from 'vitest/config';
import { TEST_PROJECT_ENV } from './test/util/requirements.js';
import { systemTestFiles } from './test/util/test-projects.js';

// Two projects, split by the rule in test/util/test-projects.ts (read from the sources):
// - unit: no root, namespaces, TUN or fixed ports: files run in parallel;
// - system: network namespaces, TUN devices, fixed names and ports, heap-per-operation
//   measurements: one file at a time, and only after every unit file has finished
//   (sequence.groupOrder), so nothing else loads the machine while they run.
const system = systemTestFiles();

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
          exclude: system,
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
          include: system,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
          env: { [TEST_PROJECT_ENV]: 'system' },
        },
      },
    ],
  },
});
