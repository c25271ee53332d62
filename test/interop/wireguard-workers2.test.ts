/**
 * The whole interop suite of wireguard.test.ts again, with weft-wg on 2 worker threads: every
 * pair (weft ↔ wireguard-go both ways, weft ↔ weft), offloads on and off, roaming, rekeys,
 * captures. That file reads WEFT_WORKERS at run time and checks that each daemon says it runs
 * that many workers, so this run cannot pass on one thread.
 */
import { afterAll } from 'vitest';

const before = process.env['WEFT_WORKERS'];
process.env['WEFT_WORKERS'] = '2';
afterAll(() => {
  if (before === undefined) delete process.env['WEFT_WORKERS'];
  else process.env['WEFT_WORKERS'] = before;
});
await import('./wireguard.test.js');
