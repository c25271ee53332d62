// `weft demo --simulate` through the CLI: the two-cluster simulation's table on stdout, exit 0
// when every check passed (the report's exit code is the command's).
import { expect, test } from 'vitest';
import { main } from '../../src/cli/weft.js';
import { captureIo } from './helpers.js';

test('weft demo --simulate prints the cross-cluster table and exits 0', async () => {
  const io = captureIo();
  const code = await main(['demo', '--simulate'], io);
  expect(io.stderr).toBe('');
  expect(code).toBe(0);
  expect(io.stdout).toMatch(/WireGuard handshake/);
  expect(io.stdout).toMatch(/all checks passed/);
}, 60_000);
