/**
 * HeartbeatLink over real UDP on loopback: a standby whose own event loop stalls must not read
 * the stall as the active replica's silence. The active replica is a worker thread sending
 * heartbeats on its own clock, so they keep arriving (and queue in the socket) while this thread
 * is blocked.
 */
import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeHeartbeat, heartbeatKey } from '../../src/control/k8s/heartbeat.js';
import { HeartbeatLink } from '../../src/daemon/k8s-heartbeat.js';

const INTERVAL_MS = 50;
const WINDOW_MS = 500;

/** Sends msgs[i] to address:port at t0 + i × INTERVAL_MS on the worker's own clock. */
const SENDER = `
const { workerData: w } = require('node:worker_threads');
const s = require('node:dgram').createSocket('udp4');
let i = 0;
const next = () => {
  if (i >= w.msgs.length) return s.close();
  s.send(Buffer.from(w.msgs[i++]), w.port, w.address);
  setTimeout(next, Math.max(0, w.t0 + i * w.interval - Date.now()));
};
s.bind(0, '127.0.0.1', next);
`;

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('HeartbeatLink', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('a standby stalled longer than the takeover window reads the heartbeats that arrived meanwhile before judging silence', async () => {
    const key = heartbeatKey(randomBytes(32), 'gw-lease');
    const port = 40_000 + Math.floor(Math.random() * 20_000);
    const takeovers: string[] = [];
    const standby = new HeartbeatLink({
      identity: 'gw-b',
      port,
      bindAddress: '127.0.0.2',
      key,
      intervalMs: INTERVAL_MS * 2,
      windowMs: WINDOW_MS,
      listPeers: async () => [],
      onTakeover: (holder, reason) => takeovers.push(`${holder} ${reason}`),
      onCheckLease: () => {},
      onBindError: (e) => {
        throw e;
      },
    });
    await standby.start();
    cleanup.push(() => standby.stop());
    expect(standby.running).toBe(true);
    const t0 = Date.now();
    const msgs = Array.from({ length: 60 }, (_, i) =>
      encodeHeartbeat(key, { from: 'gw-a', state: 'active', sentAt: t0 + i * INTERVAL_MS }),
    );
    const sender = new Worker(SENDER, {
      eval: true,
      workerData: { msgs, port, address: '127.0.0.2', t0, interval: INTERVAL_MS },
    });
    cleanup.push(() => sender.terminate());
    for (let i = 0; i < 100 && standby.stats().received < 3; i++) await sleep(20);
    expect(standby.stats().lastActive).toBe('gw-a');
    const before = standby.stats().received;

    busyWait(2 * WINDOW_MS); // this thread stalls; the active replica keeps sending
    await sleep(3 * INTERVAL_MS);
    expect(standby.stats().received - before).toBeGreaterThanOrEqual(10); // what queued was read
    expect(takeovers).toEqual([]);

    // The same standby does take over once the heartbeats really stop.
    await sender.terminate();
    for (let i = 0; i < 100 && takeovers.length === 0; i++) await sleep(20);
    expect(takeovers[0]).toBe('gw-a silent');
  });
});
