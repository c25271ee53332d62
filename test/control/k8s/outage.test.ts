// LiqoWatcher against an API server that goes away: the fake server's outage mode closes the
// port (ECONNREFUSED, as a restarting kube-apiserver), and the real list responses' items
// without kind/apiVersion.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { GatewayConfig } from '../../../src/control/config.js';
import { ConfigError } from '../../../src/control/config-error.js';
import { KubernetesApiError } from '../../../src/control/k8s/client.js';
import type { TranslateResult } from '../../../src/control/k8s/translate-common.js';
import { LiqoWatcher } from '../../../src/control/k8s/watcher.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { NS } from './liqo-fixtures.js';
import { loadLiqo } from './helpers.js';
import { until } from '../../util/wait.js';

const INFORMERS = 11;

describe('LiqoWatcher during an API server outage', () => {
  let server: FakeApiServer;
  beforeAll(async () => {
    server = await FakeApiServer.start();
    loadLiqo(server);
  });
  afterAll(async () => {
    await server.stop();
  });

  test('a 20 s outage: failed attempts back off (1 s → 30 s), then the watcher recovers', async () => {
    const results: TranslateResult[] = [];
    const errors: unknown[] = [];
    const w = new LiqoWatcher({
      kubeConfig: server.kubeConfig(),
      namespace: NS,
      role: 'gateway',
      clusterId: 'cluster-a',
      nodeName: 'worker-1',
      debounceMs: 30,
      onConfig: (r) => results.push(r),
      onError: (e) => errors.push(e),
    });
    try {
      await w.start();
      expect(errors).toEqual([]);
      await until(() => server.watchCount === INFORMERS, 'watches open');
      await server.outage(20_000);
      // Every failed attempt (one request that could not connect) reports exactly one error.
      const attempts = errors.length;
      expect(errors.every((e) => e instanceof KubernetesApiError)).toBe(true);
      // With 1, 2, 4, 8, 16 s delays an informer fails at t ≈ 0, 1, 3, 7, 15 s: 5 attempts in
      // 20 s. Without backoff (the old reset on `connect`) it was about 20 each (~220 in all).
      console.log(`outage 20 s: ${attempts} failed attempts by ${INFORMERS} informers`);
      expect(attempts).toBeGreaterThanOrEqual(INFORMERS);
      expect(attempts).toBeLessThanOrEqual(INFORMERS * 6);

      // Recovery: the next restart (at most 16 s away) reconnects; a change is then seen.
      await until(() => server.watchCount === INFORMERS, 'watches re-established', 40_000);
      const conf = server.getObject('networking.liqo.io/v1beta1', 'configurations', NS, 'cluster-b')!;
      (conf['status'] as { remote: { cidr: { pod: string[] } } }).remote.cidr.pod = ['10.76.0.0/16'];
      server.put('networking.liqo.io/v1beta1', 'configurations', conf);
      await until(
        () => results.some((r) => (r.config as GatewayConfig).peers[0]!.remapped.podCIDRs[0] === '10.76.0.0/16'),
        'change after recovery',
      );
    } finally {
      await w.stop();
    }
  }, 90_000);

  test('list items without kind: an error from the initial list still names the Secret', async () => {
    const sec = server.getObject('v1', 'secrets', NS, 'gw-keys')!;
    const bad = structuredClone(sec);
    (bad['data'] as Record<string, string>)['privateKey'] = Buffer.from('short').toString('base64');
    server.put('v1', 'secrets', bad);
    const w = new LiqoWatcher({
      kubeConfig: server.kubeConfig(),
      namespace: NS,
      role: 'gateway',
      clusterId: 'cluster-a',
      nodeName: 'worker-1',
      onConfig: () => {},
    });
    try {
      const err = await w.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain(`Secret ${NS}/gw-keys: data.privateKey`);
    } finally {
      await w.stop();
      server.put('v1', 'secrets', sec);
    }
  });
});
