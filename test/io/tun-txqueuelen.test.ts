/**
 * TunOptions.txQueueLen: the kernel's queue in front of our TUN reader is sized as asked
 * (SIOCSIFTXQLEN), visible to `ip link`; without the option the kernel default stays; bad values
 * are API misuse. Root only: the devices live in a namespace this test creates and deletes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TunDevice } from '../../src/io/tun.js';
import { Topology, e2eUnavailableReason, run } from '../util/netns.js';

const reason = e2eUnavailableReason();

function txqlen(ns: string, dev: string): number {
  const j = JSON.parse(run(['ip', '-n', ns, '-j', 'link', 'show', dev])) as { txqlen?: number }[];
  return j[0]?.txqlen ?? -1;
}

describe.skipIf(reason !== null)(`TunDevice txQueueLen${reason ? ` (skipped: ${reason})` : ''}`, () => {
  const topo = new Topology(`wpq${process.pid % 1000}-`);
  let ns = '';

  beforeAll(() => {
    ns = topo.addNamespace('n');
  });

  afterAll(async () => {
    await topo.cleanup();
  });

  it('sets the transmit queue length the caller asks for', async () => {
    const dev = TunDevice.open({ name: 'wpq-t1', netns: ns, txQueueLen: 1234 });
    try {
      expect(txqlen(ns, 'wpq-t1')).toBe(1234);
    } finally {
      await dev.close();
    }
  });

  it("leaves the kernel's default without the option", async () => {
    const dev = TunDevice.open({ name: 'wpq-t2', netns: ns });
    try {
      expect(txqlen(ns, 'wpq-t2')).toBe(500);
    } finally {
      await dev.close();
    }
  });

  it('rejects lengths that are not positive integers', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 21]) {
      expect(() => TunDevice.open({ name: 'wpq-t3', netns: ns, txQueueLen: bad })).toThrow(RangeError);
    }
    // Nothing was created by the rejected calls.
    expect(run(['ip', '-n', ns, 'link', 'show', 'wpq-t3'], { allowFail: true })).toBe('');
  });
});
