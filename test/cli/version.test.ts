// WEFT_VERSION (what `weft version` and `weft-wg --version` print) is package.json's version.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { WEFT_VERSION } from '../../src/daemon/version.js';
import { main } from '../../src/cli/weft.js';
import { captureIo, ROOT } from './helpers.js';

test('WEFT_VERSION equals package.json version and is what weft version prints', async () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  expect(WEFT_VERSION).toBe(pkg.version);
  const io = captureIo();
  expect(await main(['version', '--short'], io)).toBe(0);
  expect(io.stdout).toBe(`weft ${pkg.version}\n`);
});
