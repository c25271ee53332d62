/**
 * weft-wg's drop report: a daemon on a memory network (no root) counts what it refuses, and the
 * report names each reason once, with what grew since the previous reading.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { WgDaemon } from '../../src/gateway/wg-daemon.js';
import { DropDelta, formatDrops, wgDaemonDrops } from '../../src/gateway/wg-drops.js';
import { MemoryNet } from '../../src/io/memory-net.js';
import { MemoryDevices } from '../../src/pipelines/devices.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('weft-wg drop report', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('names every reason that grew, by how much, and nothing when nothing grew', async () => {
    const net = new MemoryNet();
    const dir = mkdtempSync(join(tmpdir(), 'wg-drops-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const d = await WgDaemon.start({
      ifname: 'wgdrop0',
      backend: getCryptoBackend('node'),
      socketDir: dir,
      warmUpMs: 0,
      devices: new MemoryDevices(net.host('192.0.2.1')),
    });
    cleanup.push(() => d.stop());
    const sender = net.host('192.0.2.2').openUdp({ family: 4, port: 40000 });
    cleanup.push(() => sender.close());
    const port = d.port.port;
    expect(port).toBeGreaterThan(0);

    const delta = new DropDelta();
    expect(wgDaemonDrops(d)).toEqual({});
    expect(delta.since(wgDaemonDrops(d))).toBeNull();

    const short = new Uint8Array(3);
    const unknownType = new Uint8Array(64).fill(0);
    unknownType[0] = 9;
    for (let i = 0; i < 3; i++) sender.send(short, 0, short.length, '192.0.2.1', port);
    sender.send(unknownType, 0, unknownType.length, '192.0.2.1', port);
    net.pump();
    await turn();
    const first = wgDaemonDrops(d);
    expect(first).toEqual({ too_short: 3, unknown_type: 1 });
    expect(delta.since(first)).toEqual({ too_short: 3, unknown_type: 1 });
    expect(formatDrops(first)).toBe('too_short 3, unknown_type 1');

    sender.send(unknownType, 0, unknownType.length, '192.0.2.1', port);
    net.pump();
    await turn();
    const second = wgDaemonDrops(d);
    expect(second).toEqual({ too_short: 3, unknown_type: 2 });
    expect(delta.since(second)).toEqual({ unknown_type: 1 });
    expect(delta.since(wgDaemonDrops(d))).toBeNull();
  });
});
