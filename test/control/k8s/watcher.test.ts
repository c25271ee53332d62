import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { makeInformer, type KubernetesObject } from '@kubernetes/client-node';
import type { GatewayConfig } from '../../../src/control/config.js';
import { listFunction } from '../../../src/control/k8s/client.js';
import { KINDS, apiVersionOf, collectionPath } from '../../../src/control/k8s/resources.js';
import type { TranslateResult } from '../../../src/control/k8s/translate-common.js';
import { LiqoWatcher } from '../../../src/control/k8s/watcher.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { NS } from './liqo-fixtures.js';
import { until } from '../../util/wait.js';
import { loadLiqo } from './helpers.js';

describe('informers against the fake API server (real client-node over TLS)', () => {
  let server: FakeApiServer;
  beforeAll(async () => {
    server = await FakeApiServer.start();
  });
  afterAll(async () => {
    await server.stop();
  });

  test('ADDED / MODIFIED / DELETED reach the informer', async () => {
    const kc = server.kubeConfig();
    const kind = KINDS.publicKeys;
    const inf = makeInformer<KubernetesObject>(kc, collectionPath(kind, 'ns1'), listFunction(kc, kind, 'ns1'));
    const seen: string[] = [];
    inf.on('add', (o) => seen.push(`add ${o.metadata!.name}`));
    inf.on('update', (o) => seen.push(`update ${o.metadata!.name}`));
    inf.on('delete', (o) => seen.push(`delete ${o.metadata!.name}`));
    server.put(apiVersionOf(kind), kind.plural, {
      metadata: { name: 'pre', namespace: 'ns1' },
      spec: { publicKey: Buffer.alloc(32, 1).toString('base64') },
    });
    await inf.start();
    try {
      expect(seen).toEqual(['add pre']);
      server.put(apiVersionOf(kind), kind.plural, {
        metadata: { name: 'k1', namespace: 'ns1' },
        spec: { publicKey: Buffer.alloc(32, 2).toString('base64') },
      });
      server.put(apiVersionOf(kind), kind.plural, { metadata: { name: 'other-ns', namespace: 'ns2' }, spec: {} });
      await until(() => seen.length === 2, 'ADDED');
      server.put(apiVersionOf(kind), kind.plural, {
        metadata: { name: 'k1', namespace: 'ns1' },
        spec: { publicKey: Buffer.alloc(32, 3).toString('base64') },
      });
      await until(() => seen.length === 3, 'MODIFIED');
      server.remove(apiVersionOf(kind), kind.plural, 'ns1', 'pre');
      await until(() => seen.length === 4, 'DELETED');
      expect(seen).toEqual(['add pre', 'add k1', 'update k1', 'delete pre']);
      expect(inf.list().map((o) => o.metadata!.name)).toEqual(['k1']);
    } finally {
      await inf.stop();
    }
  });
});

describe.each(['event', 'http'] as const)('LiqoWatcher (410 as %s)', (expired) => {
  let server: FakeApiServer;
  let watcher: LiqoWatcher | undefined;
  const results: TranslateResult[] = [];
  const errors: unknown[] = [];
  beforeAll(async () => {
    server = await FakeApiServer.start({ expired });
    loadLiqo(server);
  });
  afterEach(async () => {
    await watcher?.stop();
    watcher = undefined;
    results.length = 0;
    errors.length = 0;
  });
  afterAll(async () => {
    await server.stop();
  });

  const start = async () => {
    watcher = new LiqoWatcher({
      kubeConfig: server.kubeConfig(),
      namespace: NS,
      role: 'gateway',
      clusterId: 'cluster-a',
      nodeName: 'worker-1',
      debounceMs: 30,
      onConfig: (r) => results.push(r),
      onError: (e) => errors.push(e),
    });
    return watcher.start();
  };

  test('initial translation, then a remap change is emitted', async () => {
    const first = await start();
    const gw = first.config as GatewayConfig;
    expect(gw.peers[0]!.remapped.podCIDRs).toEqual(['10.71.0.0/16']);
    expect(gw.geneve.tunnels).toHaveLength(2);

    const conf = server.getObject('networking.liqo.io/v1beta1', 'configurations', NS, 'cluster-b')!;
    (conf['status'] as { remote: { cidr: { pod: string[] } } }).remote.cidr.pod = ['10.75.0.0/16'];
    server.put('networking.liqo.io/v1beta1', 'configurations', conf);
    await until(() => results.length === 1, 'a new config');
    expect((results[0]!.config as GatewayConfig).peers[0]!.remapped.podCIDRs).toEqual(['10.75.0.0/16']);

    // A change that does not alter the model (a label) emits nothing.
    const pk = server.getObject('networking.liqo.io/v1beta1', 'publickeies', NS, 'gw-cluster-b')!;
    pk.metadata.labels = { ...pk.metadata.labels, unrelated: 'x' };
    server.put('networking.liqo.io/v1beta1', 'publickeies', pk);
    server.remove('networking.liqo.io/v1beta1', 'genevetunnels', NS, 'cluster-b-worker-2');
    await until(() => results.length === 2, 'tunnel removal');
    expect((results[1]!.config as GatewayConfig).geneve.tunnels.map((t) => t.nodeName)).toEqual(['worker-1']);
    expect(errors).toEqual([]);
  });

  test("pod routes from Liqo's per-node RouteConfiguration in the Liqo namespace, outside the tenant namespace", async () => {
    // Liqo's internal pod controller writes NODE-gw-node in its own namespace (route/pod_k8s.go).
    const rc = {
      apiVersion: 'networking.liqo.io/v1beta1',
      kind: 'RouteConfiguration',
      metadata: { name: 'worker-1-gw-node', namespace: 'liqo' },
      spec: {
        table: {
          name: 'worker-1',
          rules: [{ iif: 'liqo-tunnel', routes: [{ dst: '10.0.1.77/32', gw: '10.80.0.2' }] }],
        },
      },
    };
    server.put(rc.apiVersion, 'routeconfigurations', rc);
    try {
      const gw = (await start()).config as GatewayConfig;
      expect(gw.geneve.podRoutes).toContainEqual({ podCIDR: '10.0.1.77/32', nodeInternalAddress: '10.80.0.2' });
      expect(errors).toEqual([]);
    } finally {
      server.remove(rc.apiVersion, 'routeconfigurations', 'liqo', 'worker-1-gw-node');
    }
  });

  test('recovers after 410 Gone by re-listing', async () => {
    await start();
    const listsBefore = server.requests.filter((r) => r.method === 'GET' && !r.path.includes('watch=')).length;
    // Partition: the informers miss the next writes; then history is compacted and streams end.
    server.muteWatches();
    server.put('networking.liqo.io/v1beta1', 'genevetunnels', {
      apiVersion: 'networking.liqo.io/v1beta1',
      kind: 'GeneveTunnel',
      metadata: { name: 'cluster-b-worker-2', namespace: NS },
      spec: { id: 7, internalFabricRef: { name: 'cluster-b', namespace: NS }, internalNodeRef: { name: 'worker-2' } },
    });
    const expiredBefore = server.expiredCount;
    server.compact();
    server.dropWatches();
    await until(() => results.length === 1, 'config after re-list');
    const tunnels = (results[0]!.config as GatewayConfig).geneve.tunnels;
    expect(tunnels.map((t) => [t.nodeName, t.id])).toEqual([
      ['worker-1', 0],
      ['worker-2', 7],
    ]);
    const listsAfter = server.requests.filter((r) => r.method === 'GET' && !r.path.includes('watch=')).length;
    expect(listsAfter).toBeGreaterThan(listsBefore);
    expect(server.expiredCount).toBeGreaterThan(expiredBefore);
    await until(() => server.watchCount === 11, 'watches re-established');
  });

  test('start() fails with a typed error when the API refuses', async () => {
    const kc = server.kubeConfig();
    kc.users[0] = { ...kc.users[0]!, token: 'wrong' };
    watcher = new LiqoWatcher({
      kubeConfig: kc,
      namespace: NS,
      role: 'gateway',
      clusterId: 'cluster-a',
      onConfig: () => {},
    });
    await expect(watcher.start()).rejects.toMatchObject({ name: 'KubernetesApiError', status: 401 });
  });
});
