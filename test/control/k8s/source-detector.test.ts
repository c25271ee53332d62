// The node role's source detector against the fake API server, with a fixed route table in
// place of the kernel's: active gateway pods set InternalNode.status.nodeIP.local (gateway on
// this node) or .remote (elsewhere) through the status subresource; pods without the active
// label or without an IP change nothing; an unchanged address is not written again.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ROOT } from '../../cli/helpers.js';
import { SourceDetector } from '../../../src/control/k8s/source-detector.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { until } from '../../util/wait.js';

const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
beforeAll(async () => {
  server = await FakeApiServer.start();
});
afterAll(async () => {
  await server.stop();
});

const pod = (name: string, node: string, ip: string | undefined, active: boolean) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name,
    namespace: 'liqo-tenant-x',
    labels: { 'networking.liqo.io/component': 'gateway', ...(active ? { 'networking.liqo.io/active': 'true' } : {}) },
  },
  spec: { nodeName: node, containers: [{ name: 'gateway', image: 'weft' }] },
  ...(ip !== undefined ? { status: { podIP: ip } } : {}),
});

describe('SourceDetector', () => {
  test('writes nodeIP.local/remote for active gateway pods, once per address', async () => {
    server.put(NET, 'internalnodes', {
      apiVersion: NET,
      kind: 'InternalNode',
      metadata: { name: 'worker-1' },
      spec: { interface: { gateway: { name: 'liqo.worker-1' }, node: { ip: '10.80.0.2' } } },
    });
    // This node's routes: pods on itself via the CNI bridge address, other nodes' pods via the node address.
    const srcFor = async (dst: string): Promise<string> => (dst.startsWith('10.244.1.') ? '10.244.1.1' : '172.18.0.3');
    const writes: string[] = [];
    // As the fabric DaemonSet's ServiceAccount, under deploy/liqo's weft-fabric ClusterRole (RBAC enforced).
    for (const doc of parseAllDocuments(readFileSync(join(ROOT, 'deploy/liqo/fabric-daemonset.yaml'), 'utf8'))) {
      const o = doc.toJS() as { kind: string } & Record<string, unknown>;
      if (o.kind === 'ClusterRole') server.put('rbac.authorization.k8s.io/v1', 'clusterroles', o);
      if (o.kind === 'ClusterRoleBinding') server.put('rbac.authorization.k8s.io/v1', 'clusterrolebindings', o);
    }
    const d = new SourceDetector({
      kubeConfig: server.serviceAccountKubeConfig('liqo', 'weft-fabric'),
      nodeName: 'worker-1',
      srcFor,
      onWrite: (slot, ip) => writes.push(`${slot}=${ip}`),
    });
    server.put('v1', 'pods', pod('gw-standby', 'worker-1', '10.244.1.9', false));
    server.put('v1', 'pods', pod('gw-remote', 'worker-2', '10.244.2.7', true));
    await d.start();
    const status = () => server.getObject(NET, 'internalnodes', undefined, 'worker-1')?.['status'];
    await until(() => status() !== undefined, 'remote written');
    await d.settled();
    expect(status()).toEqual({ nodeIP: { remote: '172.18.0.3' } });
    // The gateway moves to this node: no IP at first, then one.
    server.put('v1', 'pods', pod('gw-local', 'worker-1', undefined, true));
    server.put('v1', 'pods', { ...pod('gw-local', 'worker-1', '10.244.1.7', true) });
    await until(() => (status() as { nodeIP: { local?: string } }).nodeIP.local !== undefined, 'local written');
    await d.settled();
    expect(status()).toEqual({ nodeIP: { remote: '172.18.0.3', local: '10.244.1.1' } });
    // Another update with the same addresses: no write.
    server.put('v1', 'pods', {
      ...pod('gw-remote', 'worker-2', '10.244.2.7', true),
      metadata: { ...pod('gw-remote', 'worker-2', '10.244.2.7', true).metadata, annotations: { a: 'b' } },
    });
    await new Promise((r) => setTimeout(r, 300));
    await d.settled();
    await d.stop();
    expect(writes).toEqual(['remote=172.18.0.3', 'local=10.244.1.1']);
    expect(server.requests.filter((r) => r.status === 403)).toEqual([]);
    const patches = server.requests.filter((r) => r.method === 'PATCH').map((r) => r.path);
    expect(patches).toEqual([
      '/apis/networking.liqo.io/v1beta1/internalnodes/worker-1/status',
      '/apis/networking.liqo.io/v1beta1/internalnodes/worker-1/status',
    ]);
  });
});
