// claimActive: what Liqo's gateway does to the replicas' networking.liqo.io/active label when it
// takes the Lease (pkg/gateway/concurrent), under deploy/liqo's weft-liqo-gateway ClusterRole with
// RBAC enforced by the test API server.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ACTIVE_GATEWAY_LABEL, claimActive } from '../../../src/control/k8s/liqo-gateway.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { ROOT } from '../../cli/helpers.js';

const RBAC = 'rbac.authorization.k8s.io/v1';
const NS = 'liqo-tenant-cluster-b';
let server: FakeApiServer;

function pod(name: string, app: string, active: boolean): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      labels: {
        'app.kubernetes.io/name': app,
        'networking.liqo.io/component': 'gateway',
        ...(active ? { [ACTIVE_GATEWAY_LABEL]: 'true' } : {}),
      },
    },
    spec: { containers: [{ name: 'gateway', image: 'weft' }] },
  };
}
const label = (name: string) => server.getObject('v1', 'pods', NS, name)?.metadata.labels?.[ACTIVE_GATEWAY_LABEL];

beforeAll(async () => {
  server = await FakeApiServer.start();
  server.put(
    RBAC,
    'clusterroles',
    parse(readFileSync(join(ROOT, 'deploy/liqo/gateway-clusterrole.yaml'), 'utf8')) as Record<string, unknown>,
  );
  server.put(RBAC, 'clusterrolebindings', {
    apiVersion: RBAC,
    kind: 'ClusterRoleBinding',
    metadata: { name: `${NS}-cluster-b` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'weft-liqo-gateway' },
    subjects: [{ kind: 'ServiceAccount', name: 'cluster-b', namespace: NS }],
  });
});
afterAll(async () => {
  await server.stop();
});

describe("claimActive (the new leader's labels)", () => {
  test('removes the label from every other replica of the gateway, sets it on itself, leaves other gateways alone', async () => {
    for (const p of [
      pod('cluster-b-old', 'cluster-b', true),
      pod('cluster-b-idle', 'cluster-b', false),
      pod('cluster-b-new', 'cluster-b', false),
      pod('cluster-z-1', 'cluster-z', true),
    ])
      server.put('v1', 'pods', p);
    const cleared = await claimActive(
      server.serviceAccountKubeConfig(NS, 'cluster-b'),
      NS,
      'cluster-b',
      'cluster-b-new',
    );
    expect(cleared).toEqual(['cluster-b-old']);
    expect([label('cluster-b-old'), label('cluster-b-idle'), label('cluster-b-new'), label('cluster-z-1')]).toEqual([
      undefined,
      undefined,
      'true',
      'true',
    ]);
    // Only the pod that carried the label was written (plus our own).
    expect(server.requests.filter((r) => r.method === 'PATCH').map((r) => r.path)).toEqual([
      `/api/v1/namespaces/${NS}/pods/cluster-b-old`,
      `/api/v1/namespaces/${NS}/pods/cluster-b-new`,
    ]);
    expect(server.requests.filter((r) => r.status === 403)).toEqual([]);
  });

  test('a ServiceAccount without pods list (RBAC) gets a typed error naming the list; nothing is labelled', async () => {
    await expect(
      claimActive(server.serviceAccountKubeConfig(NS, 'someone-else'), NS, 'cluster-b', 'cluster-b-idle'),
    ).rejects.toThrow(/list the replicas of gateway liqo-tenant-cluster-b\/cluster-b .*HTTP 403/);
    expect(label('cluster-b-idle')).toBeUndefined();
  });
});
