// The connection-check runner on real UDP sockets (loopback): Liqo's JSON PING/PONG on the wire,
// Connected with a measured latency, Error after the loss threshold, target changes, and the
// addressing rule for Liqo's tunnel /30.
import { createSocket } from 'node:dgram';
import { afterEach, describe, expect, test } from 'vitest';
import { ConnCheckRunner } from '../../src/daemon/conncheck-runner.js';
import { waitFor } from '../util/wait.js';

const open: ConnCheckRunner[] = [];
afterEach(async () => {
  for (const r of open.splice(0)) await r.stop();
});

async function runner(opts: Parameters<typeof ConnCheckRunner.start>[0]): Promise<ConnCheckRunner> {
  const r = await ConnCheckRunner.start({ bindAddress: '127.0.0.1', port: 0, ...opts });
  open.push(r);
  return r;
}

describe('ConnCheckRunner', () => {
  test('two runners: the pinger sees Connected with a latency; the answerer echoes PONGs', async () => {
    const answerer = await runner({});
    const pinger = await runner({
      peerPort: answerer.port,
      intervalMs: 50,
      lossThreshold: 3,
      targets: [{ clusterId: 'cluster-b', address: '127.0.0.1' }],
    });
    await waitFor('Connected', () => pinger.status('cluster-b')?.value === 'Connected', 5000, 10);
    const st = pinger.status('cluster-b')!;
    expect(st.latencyMs).toBeGreaterThan(0);
    expect(st.lastReplyAt).toBeTypeOf('number');
    expect(answerer.checker.pongsSent).toBeGreaterThan(0);
    expect(pinger.checker.pingsSent).toBeGreaterThan(0);
    expect(pinger.sendErrors).toBe(0);
  });

  test('a PING that cannot leave (canSend false: no endpoint yet) is held back, not sent; the peer counts as unanswered', async () => {
    const answerer = await runner({});
    let can = false;
    const pinger = await runner({
      peerPort: answerer.port,
      intervalMs: 50,
      lossThreshold: 3,
      targets: [{ clusterId: 'cluster-b', address: '127.0.0.1' }],
      canSend: (address) => {
        expect(address).toBe('127.0.0.1');
        return can;
      },
    });
    await waitFor('Error', () => pinger.status('cluster-b')?.value === 'Error', 5000, 10);
    expect(pinger.heldBack).toBeGreaterThanOrEqual(3);
    expect(answerer.checker.pongsSent).toBe(0);
    can = true;
    await waitFor('Connected', () => pinger.status('cluster-b')?.value === 'Connected', 5000, 10);
  });

  test('Liqo wire format: a PING carries the target cluster ID and an RFC 3339 nanosecond timestamp', async () => {
    const peer = createSocket('udp4');
    await new Promise<void>((r) => peer.bind(0, '127.0.0.1', () => r()));
    const got: string[] = [];
    peer.on('message', (m, rinfo) => {
      got.push(m.toString());
      const o = JSON.parse(m.toString()) as Record<string, string>;
      peer.send(JSON.stringify({ ...o, msgType: 'PONG' }), rinfo.port, rinfo.address);
    });
    try {
      const r = await runner({
        peerPort: peer.address().port,
        intervalMs: 100,
        targets: [{ clusterId: 'liqo-b', address: '127.0.0.1' }],
      });
      await waitFor('Connected', () => r.status('liqo-b')?.value === 'Connected', 5000, 10);
      const ping = JSON.parse(got[0]!) as Record<string, string>;
      // Liqo's three fields, and the multipath mark Liqo's receiver ignores (src/control/conncheck.ts).
      expect(Object.keys(ping)).toEqual(['clusterID', 'msgType', 'timeStamp', 'multipath']);
      expect(ping.clusterID).toBe('liqo-b');
      expect(ping.msgType).toBe('PING');
      expect(ping.timeStamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    } finally {
      await new Promise<void>((r) => peer.close(() => r()));
    }
  });

  test('no replies: Error after lossThreshold intervals; garbage is a counted drop', async () => {
    const silent = createSocket('udp4');
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    try {
      const r = await runner({
        peerPort: silent.address().port,
        intervalMs: 40,
        lossThreshold: 2,
        targets: [{ clusterId: 'gone', address: '127.0.0.1' }],
      });
      expect(r.status('gone')?.value).toBe('Connecting');
      await waitFor('Error', () => r.status('gone')?.value === 'Error', 5000, 10);
      const junk = createSocket('udp4');
      await new Promise<void>((res) => junk.send('not json', r.port, '127.0.0.1', () => res()));
      junk.close();
      await waitFor('malformed drop', () => r.checker.drops.malformed === 1, 2000, 10);
    } finally {
      await new Promise<void>((res) => silent.close(() => res()));
    }
  });

  test('setTargets adds and removes peers', async () => {
    const answerer = await runner({});
    const r = await runner({
      peerPort: answerer.port,
      intervalMs: 50,
      targets: [{ clusterId: 'x', address: '127.0.0.1' }],
    });
    r.setTargets([{ clusterId: 'y', address: '127.0.0.1' }]);
    expect(r.status('x')).toBeUndefined();
    await waitFor('y Connected', () => r.status('y')?.value === 'Connected', 5000, 10);
  });

  test('binding an address this host does not have rejects (the runtime logs it and goes on)', async () => {
    // 192.0.2.1 (TEST-NET-1) is on no interface here: EADDRNOTAVAIL, and no socket is left open.
    await expect(ConnCheckRunner.start({ bindAddress: '192.0.2.1', port: 0 })).rejects.toThrow(/EADDRNOTAVAIL/);
  });

  test('a bound port in use rejects with EADDRINUSE', async () => {
    const first = await runner({});
    await expect(ConnCheckRunner.start({ bindAddress: '127.0.0.1', port: first.port })).rejects.toThrow(/EADDRINUSE/);
  });
});
