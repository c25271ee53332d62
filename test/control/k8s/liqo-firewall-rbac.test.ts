// Liqo mode's watches (`weft k8s --liqo-firewall`: GatewayRulesWatcher) under deploy/liqo's
// ClusterRoles, RBAC enforced, against the objects Liqo's controllers create for one peering
// (test/k8s-fake/liqo-peering.ts, validated against Liqo's CRDs on the way in): the gateway's
// ServiceAccount and the fabric DaemonSet's may list and watch Firewall- and
// RouteConfigurations, and a watch over every namespace (as Liqo's gateway and fabric managers
// watch) sees the objects Liqo puts in its own namespace (per-node routes, the Helm MSS clamp,
// service-nodeport-routing) beside the tenant namespace's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  FIREWALL_CONFIGURATIONS,
  GatewayRulesWatcher,
  ROUTE_CONFIGURATIONS,
} from '../../../src/control/k8s/firewall-watch.js';
import { fabricFirewallSelectors, fabricRouteSelectors } from '../../../src/control/k8s/firewall-watch.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import {
  LIQO_NAMESPACE,
  liqoFirewallConfigurations,
  liqoPeeringSide,
  tenantNamespace,
  type PeeringSide,
} from '../../k8s-fake/liqo-peering.js';
import { KEYS } from '../fixtures.js';
import { ROOT } from '../../cli/helpers.js';
import { loadLiqo } from './helpers.js';

const RBAC = 'rbac.authorization.k8s.io/v1';
const NET = 'networking.liqo.io/v1beta1';
const TENANT = tenantNamespace('cluster-b');
let server: FakeApiServer;

const side: PeeringSide = {
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
  liqoMode: { mss: 1200, ipMappings: [{ name: 'db', real: '192.168.61.10', remapped: '10.70.0.5', node: 'worker-1' }] },
};

function docs(file: string): Record<string, unknown>[] {
  return parseAllDocuments(readFileSync(join(ROOT, 'deploy/liqo', file), 'utf8')).map(
    (d) => d.toJS() as Record<string, unknown>,
  );
}

const keys = (l: KubernetesObject[]): string[] => l.map((o) => `${o.metadata?.namespace}/${o.metadata?.name}`);
const forbidden = (): string[] => server.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`);

beforeAll(async () => {
  server = await FakeApiServer.start();
  const res = liqoPeeringSide(side);
  loadLiqo(server, res);
  for (const o of liqoFirewallConfigurations(side)) server.put(NET, FIREWALL_CONFIGURATIONS.plural, o);
  server.put(RBAC, 'clusterroles', docs('gateway-clusterrole.yaml')[0]!);
  server.put(RBAC, 'clusterrolebindings', {
    apiVersion: RBAC,
    kind: 'ClusterRoleBinding',
    metadata: { name: `${TENANT}-cluster-b` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'weft-liqo-gateway' },
    subjects: [{ kind: 'ServiceAccount', name: 'cluster-b', namespace: TENANT }],
  });
  for (const d of docs('fabric-daemonset.yaml'))
    if (d['kind'] === 'ClusterRole' || d['kind'] === 'ClusterRoleBinding')
      server.put(RBAC, d['kind'] === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings', d);
});

afterAll(async () => {
  await server?.stop();
});

async function selected(
  w: (onChange: (fw: KubernetesObject[], rt: KubernetesObject[]) => void) => GatewayRulesWatcher,
): Promise<{ fw: string[]; rt: string[] }> {
  let got: { fw: string[]; rt: string[] } | undefined;
  const watcher = w((fw, rt) => {
    got = { fw: keys(fw), rt: keys(rt) };
  });
  try {
    await watcher.start();
  } finally {
    await watcher.stop();
  }
  return got!;
}

describe("Liqo mode's Firewall-/RouteConfiguration watches under deploy/liqo's ClusterRoles", () => {
  test("every generated object is valid for Liqo's CRDs (nothing pruned)", () => {
    for (const o of liqoFirewallConfigurations(side)) {
      const m = o['metadata'] as { name: string; namespace: string };
      expect(server.getObject(NET, 'firewallconfigurations', m.namespace, m.name)?.['spec'], m.name).toMatchObject(
        o['spec'] as object,
      );
    }
    for (const o of liqoPeeringSide(side).routeConfigurations) {
      expect(
        server.getObject(NET, 'routeconfigurations', o.metadata!.namespace, o.metadata!.name!)?.['spec'],
        o.metadata!.name,
      ).toMatchObject(o.spec as object);
    }
  });

  test("the gateway (its ServiceAccount, every namespace, cmd/gateway label sets) lists and watches them; the liqo namespace's included", async () => {
    server.requests.length = 0;
    const got = await selected(
      (onChange) =>
        new GatewayRulesWatcher({
          kubeConfig: server.serviceAccountKubeConfig(TENANT, 'cluster-b'),
          remoteClusterIds: ['cluster-b'],
          nodeName: 'worker-1',
          onChange,
        }),
    );
    expect(forbidden()).toEqual([]);
    expect(got.fw).toEqual([
      `${TENANT}/cluster-b-remap-externalcidr`,
      `${TENANT}/cluster-b-remap-podcidr`,
      `${TENANT}/db-remap-ipmapping-gw`,
      `${LIQO_NAMESPACE}/gw-mss-clamping`,
      `${LIQO_NAMESPACE}/service-nodeport-routing`,
    ]);
    expect(got.rt).toEqual([
      `${TENANT}/cluster-b-gw-ext`,
      `${LIQO_NAMESPACE}/worker-1-extcidr`,
      `${LIQO_NAMESPACE}/worker-1-gw-node`,
      `${LIQO_NAMESPACE}/worker-1-service-nodeport-routing`,
      `${LIQO_NAMESPACE}/worker-2-gw-node`,
      `${LIQO_NAMESPACE}/worker-2-service-nodeport-routing`,
    ]);
    for (const k of [FIREWALL_CONFIGURATIONS, ROUTE_CONFIGURATIONS]) {
      expect(
        server.requests.some(
          (r) =>
            r.method === 'GET' && r.path.startsWith(`/apis/networking.liqo.io/v1beta1/${k.plural}`) && r.status === 200,
        ),
        k.plural,
      ).toBe(true);
    }
  });

  test('the fabric DaemonSet (weft-fabric, every namespace, cmd/fabric label sets for its node) lists and watches them', async () => {
    server.requests.length = 0;
    const got = await selected(
      (onChange) =>
        new GatewayRulesWatcher({
          kubeConfig: server.serviceAccountKubeConfig(LIQO_NAMESPACE, 'weft-fabric'),
          remoteClusterIds: undefined,
          nodeName: 'worker-1',
          selectors: { firewall: fabricFirewallSelectors('worker-1'), routes: fabricRouteSelectors() },
          onChange,
        }),
    );
    expect(forbidden()).toEqual([]);
    expect(got).toEqual({ fw: [`${TENANT}/cluster-b-masquerade-bypass`], rt: [`${TENANT}/cluster-b-node-gw`] });
  });
});
