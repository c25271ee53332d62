// The fabric DaemonSet's node role under its own ServiceAccount: the node-role watcher (every
// informer it starts) and the source detector's InternalNode status patch run as
// liqo/weft-fabric, authorised by deploy/liqo/fabric-daemonset.yaml's ClusterRole and binding as
// the test API server evaluates them (RBAC enforced: without the binding everything is 403).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { NodeConfig } from '../../../src/control/config.js';
import { SourceDetector } from '../../../src/control/k8s/source-detector.js';
import { LiqoWatcher } from '../../../src/control/k8s/watcher.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { LIQO_NAMESPACE, liqoPeeringSide } from '../../k8s-fake/liqo-peering.js';
import { KEYS } from '../fixtures.js';
import { ROOT } from '../../cli/helpers.js';
import { loadLiqo } from './helpers.js';

const RBAC = 'rbac.authorization.k8s.io/v1';
const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;

function fabricDocs(): Record<string, unknown>[] {
  return parseAllDocuments(readFileSync(join(ROOT, 'deploy/liqo/fabric-daemonset.yaml'), 'utf8')).map(
    (d) => d.toJS() as Record<string, unknown>,
  );
}

beforeAll(async () => {
  server = await FakeApiServer.start();
  const res = liqoPeeringSide({
    local: 'cluster-a',
    remote: 'cluster-b',
    side: 'server',
    privateKey: KEYS.aPriv,
    publicKey: KEYS.aPub,
    remotePublicKey: KEYS.bPub,
    endpoint: { address: '192.168.77.1', port: 51840 },
    gatewayPod: { ip: '10.244.0.10', node: 'worker-1' },
    nodes: [
      { name: 'worker-1', pods: [{ name: 'app', ip: '10.0.1.5' }] },
      { name: 'worker-2', pods: [] },
    ],
  });
  loadLiqo(server, res);
  // The active gateway pod the source detector looks for.
  server.put('v1', 'pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'cluster-b-1',
      namespace: 'liqo-tenant-cluster-b',
      labels: {
        'networking.liqo.io/component': 'gateway',
        'networking.liqo.io/active': 'true',
        'app.kubernetes.io/name': 'cluster-b',
      },
    },
    spec: { nodeName: 'worker-1', containers: [{ name: 'gateway', image: 'weft' }] },
    status: { podIP: '10.244.0.10' },
  });
  for (const d of fabricDocs()) if (d['kind'] === 'ClusterRole') server.put(RBAC, 'clusterroles', d);
});

afterAll(async () => {
  await server.stop();
});

const forbidden = () => server.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`);

function nodeWatcher(): LiqoWatcher {
  // The DaemonSet's arguments give no --namespace: every namespace, as Liqo's fabric reads them.
  return new LiqoWatcher({
    kubeConfig: server.serviceAccountKubeConfig(LIQO_NAMESPACE, 'weft-fabric'),
    role: 'node',
    clusterId: 'cluster-a',
    nodeName: 'worker-1',
    onConfig: () => {},
  });
}

describe("the fabric DaemonSet's node role under its ClusterRole (RBAC enforced)", () => {
  test('without the ClusterRoleBinding the node-role watcher is refused (403): the role is what grants it', async () => {
    const w = nodeWatcher();
    await expect(w.start()).rejects.toThrow(/403|forbidden/i);
    await w.stop();
    expect(forbidden().length).toBeGreaterThan(0);
  });

  test("with deploy/liqo's binding: every informer lists, the node configuration translates, no 403, no Secret read; the source detector writes InternalNode status", async () => {
    for (const d of fabricDocs()) if (d['kind'] === 'ClusterRoleBinding') server.put(RBAC, 'clusterrolebindings', d);
    server.requests.length = 0;
    const w = nodeWatcher();
    try {
      const node = (await w.start()).config as NodeConfig;
      expect(node.role).toBe('node');
      expect(node.node.gateways).toEqual([
        expect.objectContaining({
          name: 'cluster-b',
          vni: 0,
          gatewayUnderlay: '10.244.0.10',
          gatewayInternalAddress: '10.80.0.1',
          localInternalAddress: '10.80.0.2',
        }),
      ]);
    } finally {
      await w.stop();
    }
    const d = new SourceDetector({
      kubeConfig: server.serviceAccountKubeConfig(LIQO_NAMESPACE, 'weft-fabric'),
      nodeName: 'worker-1',
      srcFor: async () => '10.244.0.1',
    });
    await d.start();
    try {
      for (
        let i = 0;
        i < 100 &&
        (
          server.getObject(NET, 'internalnodes', undefined, 'worker-1')?.['status'] as
            { nodeIP?: { local?: string } } | undefined
        )?.nodeIP?.local !== '10.244.0.1';
        i++
      ) {
        await new Promise((r) => setTimeout(r, 50));
        await d.settled();
      }
    } finally {
      await d.stop();
    }
    expect(server.getObject(NET, 'internalnodes', undefined, 'worker-1')!['status']).toEqual({
      nodeIP: { local: '10.244.0.1' },
    });
    expect(forbidden()).toEqual([]);
    expect(server.requests.some((r) => r.path.includes('/secrets'))).toBe(false);
    // Every informer of the node role listed under the ServiceAccount.
    for (const plural of ['internalnodes', 'internalfabrics', 'genevetunnels', 'configurations', 'networks']) {
      expect(
        server.requests.some((r) => r.method === 'GET' && r.path.includes(`/${plural}`) && r.status === 200),
        plural,
      ).toBe(true);
    }
  });
});
