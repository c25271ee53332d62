import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Network-namespace tests share fixed names and the host's TUN devices: keep files serial.
    fileParallelism: false,
    reporters: ['default'],
  },
});
