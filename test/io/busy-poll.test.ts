/**
 * Busy polling (src/io/busy-poll.ts, native/weft_poll.c): the variable's parsing, the daemon's
 * refusal of a bad value, and what the polling changes, shown by order rather than by time —
 * a datagram that reaches a second socket while the first socket's callback runs is taken in
 * the same wake-up (before an immediate that callback queued) with a budget, and in the next
 * turn of the event loop (after it) without.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { BusyPollConfigError, parseBusyPollUs } from '../../src/io/busy-poll.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { encodeAddress, UdpSocket } from '../../src/io/udp.js';
import { ensureBuilt, ROOT } from '../cli/helpers.js';
import { skipUnlessRoot } from '../util/requirements.js';
import { waitFor } from '../util/wait.js';

describe('WEFT_BUSY_POLL_US', () => {
  it('accepts 0..1000 microseconds, unset or empty as off, and nothing else', () => {
    expect(parseBusyPollUs(undefined)).toBe(0);
    expect(parseBusyPollUs('')).toBe(0);
    expect(parseBusyPollUs(' 150 ')).toBe(150);
    expect(parseBusyPollUs('1000')).toBe(1000);
    for (const bad of ['1001', '-1', '1.5', 'fast', '1e3']) {
      expect(() => parseBusyPollUs(bad)).toThrow(BusyPollConfigError);
      expect(() => parseBusyPollUs(bad)).toThrow(`WEFT_BUSY_POLL_US=${bad}`);
    }
  });

  it('weft-wg refuses a bad value before it opens anything (exit 2, the variable named)', () => {
    ensureBuilt(['src/io/busy-poll.js', 'src/cli/weft-wg.js']);
    const r = spawnSync(process.execPath, [join(ROOT, 'bin/weft-wg'), '-f', 'wbpoll0'], {
      encoding: 'utf8',
      env: { ...process.env, WEFT_BUSY_POLL_US: '5000' },
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/WEFT_BUSY_POLL_US=5000: expected an integer 0\.\.1000/);
  });

  it('weft up and weft k8s refuse a bad value (exit 2); a short-lived command ignores it', () => {
    ensureBuilt(['src/io/busy-poll.js', 'src/cli/weft.js']);
    const env = { ...process.env, WEFT_BUSY_POLL_US: 'fast' };
    for (const cmd of ['up', 'k8s']) {
      const r = spawnSync(process.execPath, [join(ROOT, 'bin/weft'), cmd, '--help'], {
        encoding: 'utf8',
        env,
        timeout: 30_000,
      });
      expect(r.status, cmd).toBe(2);
      expect(r.stderr, cmd).toMatch(/^weft: WEFT_BUSY_POLL_US=fast: expected an integer/);
    }
    const v = spawnSync(process.execPath, [join(ROOT, 'bin/weft'), 'version'], {
      encoding: 'utf8',
      env,
      timeout: 30_000,
    });
    expect(v.status, v.stderr).toBe(0);
  });
});

const native = loadNativeIo();
const nativeMissing = skipUnlessRoot(
  native === null
    ? `native addon unusable (${nativeIoLoadError()}): run node native/build.mjs (scripts/setup.sh does it)`
    : null,
);

describe.skipIf(nativeMissing !== null)(
  `busy polling in the native poller${nativeMissing ? ` (skipped: ${nativeMissing})` : ''}`,
  () => {
    const opened: UdpSocket[] = [];
    afterEach(async () => {
      native?.setBusyPoll?.(0);
      for (const s of opened.splice(0)) await s.close();
    });

    /**
     * X's callback sends one datagram to Y (loopback: queued at Y when send returns) and queues
     * an immediate; returns what ran first.
     */
    async function order(): Promise<string[]> {
      const seen: string[] = [];
      const x = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism: 'native' });
      const y = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism: 'native' });
      opened.push(x, y);
      const tx = new PacketBatch({ maxLen: 64, capacity: 1, withAddresses: true });
      tx.lens[0] = 8;
      encodeAddress('127.0.0.1', y.port, tx.addrs, 0);
      x.onBatch(new PacketBatch({ maxLen: 64, capacity: 4, withAddresses: true }), () => {
        seen.push('x');
        setImmediate(() => seen.push('immediate'));
        expect(x.sendBatch(tx.buf, tx.offs, tx.lens, tx.addrs, null, 1)).toBe(1);
      });
      y.onBatch(new PacketBatch({ maxLen: 64, capacity: 4, withAddresses: true }), () => seen.push('y'));
      encodeAddress('127.0.0.1', x.port, tx.addrs, 0);
      expect(y.sendBatch(tx.buf, tx.offs, tx.lens, tx.addrs, null, 1)).toBe(1);
      encodeAddress('127.0.0.1', y.port, tx.addrs, 0);
      await waitFor('x, y and the immediate', () => seen.length === 3, 5000, 5);
      return seen;
    }

    it('without a budget the second datagram waits for the next turn of the loop', async () => {
      native!.setBusyPoll!(0);
      expect(await order()).toEqual(['x', 'immediate', 'y']);
    });

    it('with a budget it is taken in the same wake-up, before the loop runs anything else', async () => {
      native!.setBusyPoll!(1000);
      expect(await order()).toEqual(['x', 'y', 'immediate']);
    });

    it('refuses a budget outside 0..1000', () => {
      expect(() => native!.setBusyPoll!(1001)).toThrow(RangeError);
      expect(() => native!.setBusyPoll!(-1)).toThrow(RangeError);
    });
  },
);
