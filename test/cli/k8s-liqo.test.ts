// `weft k8s` started with the arguments Liqo's gateway template renders (deploy/liqo/): the
// local cluster ID comes from Liqo's cluster-id ConfigMap, the key from the mounted Secret
// directory (no Secret is read through the API), the Connection is Liqo's "gw-NAME" owned by
// the GatewayServer and pointing at the WgGatewayServer, the Lease is Liqo's
// NAME.NAMESPACE.server.connections.liqo.io, and the replica holding it labels its own pod
// networking.liqo.io/active=true (the standby carries no label; a new leader removes a crashed
// one's stale label, listing the replicas as Liqo's gateway does). Deleting the GatewayServer
// (unpeer) removes the Connection through the garbage collector. Gateways run in lqx-* namespaces.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { K8sMode } from '../../src/daemon/k8s-mode.js';
import { routeSourceFor } from '../../src/kernel/route-source.js';
import { parseK8sArgs } from '../../src/cli/commands/k8s-args.js';
import { LEASE_DEFAULTS, type K8sSettings } from '../../src/daemon/k8s-settings.js';
import { parseArgs } from '../../src/cli/commands/common.js';
import { Runtime } from '../../src/daemon/runtime.js';
import { ACTIVE_GATEWAY_LABEL } from '../../src/control/k8s/liqo-gateway.js';
import { leaseName } from '../../src/control/k8s/lease-name.js';
import { createLogger } from '../../src/control/log.js';
import { CREDENTIALS_REJECTED } from '../../src/daemon/k8s-api-errors.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { NS, liqoResources } from '../control/k8s/liqo-fixtures.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';
import { ROOT } from './helpers.js';
import { loadLiqo } from '../control/k8s/helpers.js';

const skip = e2eUnavailableReason();
const topo = new Topology('lqx-k8s');
const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
let dir = '';
let gsUid = '';
const modes: K8sMode[] = [];

function load(s: FakeApiServer): void {
  loadLiqo(s);
  const gs = s.getObject(NET, 'gatewayservers', NS, 'cluster-b')!;
  gsUid = gs.metadata.uid!;
  // What Liqo's controller-manager creates from the GatewayServer: the WgGatewayServer it controls.
  s.put(NET, 'wggatewayservers', {
    apiVersion: NET,
    kind: 'WgGatewayServer',
    metadata: {
      name: 'cluster-b',
      namespace: NS,
      labels: { 'liqo.io/remote-cluster-id': 'cluster-b' },
      ownerReferences: [{ apiVersion: NET, kind: 'GatewayServer', name: 'cluster-b', uid: gsUid, controller: true }],
    },
    spec: { secretRef: { name: 'gw-keys' }, deployment: {}, service: {} },
  });
  s.put('v1', 'configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'liqo-clusterid-configmap',
      namespace: 'liqo',
      labels: { 'app.kubernetes.io/name': 'clusterid-configmap' },
    },
    data: { CLUSTER_ID: 'cluster-a' },
  });
  // RBAC as in a Liqo cluster: deploy/liqo's ClusterRole, bound by Liqo's controller-manager to
  // the gateway's ServiceAccount (named like the gateway); the pods authenticate as it.
  s.put(
    'rbac.authorization.k8s.io/v1',
    'clusterroles',
    parse(readFileSync(join(ROOT, 'deploy/liqo/gateway-clusterrole.yaml'), 'utf8')) as Record<string, unknown>,
  );
  s.put('rbac.authorization.k8s.io/v1', 'clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: `${NS}-cluster-b` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'weft-liqo-gateway' },
    subjects: [{ kind: 'ServiceAccount', name: 'cluster-b', namespace: NS }],
  });
  for (const p of ['cluster-b-pod-b', 'cluster-b-pod-c', 'cluster-b-pod-d', 'cluster-b-pod-e', 'cluster-b-pod-f']) {
    s.put('v1', 'pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: p,
        namespace: NS,
        labels: { 'networking.liqo.io/component': 'gateway', 'app.kubernetes.io/name': 'cluster-b' },
      },
      spec: { containers: [{ name: 'gateway', image: 'weft' }] },
    });
  }
  // The active replica of another gateway in the same namespace: not ours to unlabel.
  s.put('v1', 'pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'cluster-z-pod',
      namespace: NS,
      labels: {
        'networking.liqo.io/component': 'gateway',
        'app.kubernetes.io/name': 'cluster-z',
        [ACTIVE_GATEWAY_LABEL]: 'true',
      },
    },
    spec: { containers: [{ name: 'gateway', image: 'weft' }] },
  });
}

/** The arguments of deploy/liqo/wireguard-server-template.yaml as Liqo renders them, parsed by the CLI. */
/** Lease timings (default: LEASE_DEFAULTS). */
interface LeaseTimes {
  leaseDurationMs: number;
  leaseRenewDeadlineMs: number;
  leaseRetryPeriodMs: number;
}

function settings(id: string, lease?: LeaseTimes): K8sSettings {
  const pod = `cluster-b-pod-${id}`;
  const argv = [
    '--role=gateway',
    '--name=cluster-b',
    `--namespace=${NS}`,
    '--remote-cluster-id=cluster-b',
    '--node-name=worker-1',
    `--pod-name=${pod}`,
    `--gateway-uid=${gsUid}`,
    '--mode=server',
    '--leader-election=true',
    `--wireguard-key-dir=${join(dir, 'keys')}`,
  ];
  const spec = [
    'role',
    'name',
    'namespace',
    'remote-cluster-id',
    'node-name',
    'pod-name',
    'gateway-uid',
    'mode',
    'leader-election',
    'wireguard-key-dir',
  ].map((name) => ({ name, value: true, ...(name === 'remote-cluster-id' ? { repeatable: true } : {}) }));
  const s = parseK8sArgs(parseArgs(argv, spec), {});
  return {
    ...s,
    conncheck: false,
    runDir: join(dir, 'run'),
    logLevel: 'silent',
    name: `lqx-${id}`,
    kubeconfig: undefined,
    leaseDurationMs: LEASE_DEFAULTS.durationMs,
    leaseRenewDeadlineMs: LEASE_DEFAULTS.renewDeadlineMs,
    leaseRetryPeriodMs: LEASE_DEFAULTS.retryPeriodMs,
    ...lease,
  };
}

/** Log lines (pino JSON) per replica id. */
const logs = new Map<string, { level: number; msg: string; err?: string }[]>();

async function startMode(id: string, lease?: LeaseTimes): Promise<K8sMode> {
  const ns = topo.addNamespace(id);
  topo.exec(ns, ['ip', 'link', 'set', 'lo', 'up']);
  const lines: { level: number; msg: string; err?: string }[] = [];
  logs.set(id, lines);
  const logger = createLogger({
    env: { LOG_LEVEL: 'debug' },
    destination: {
      write: (t: string) => {
        for (const l of t.split('\n')) if (l !== '') lines.push(JSON.parse(l) as { level: number; msg: string });
      },
    },
  });
  const runtime = await Runtime.create({
    name: `lqx-${id}`,
    runDir: join(dir, 'run'),
    source: 'kubernetes',
    logger,
    launch: { netns: ns },
  });
  const mode = new K8sMode(settings(id, lease), server.serviceAccountKubeConfig(NS, 'cluster-b'), runtime, logger);
  modes.push(mode);
  await mode.start();
  return mode;
}

/** Requests the RBAC refused (403). */
const forbidden = (): string[] => server.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`);

const label = (pod: string): string | undefined =>
  server.getObject('v1', 'pods', NS, pod)?.metadata.labels?.[ACTIVE_GATEWAY_LABEL];

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'lqx-k8s-'));
  server = await FakeApiServer.start();
  load(server);
  mkdirSync(join(dir, 'keys'));
  // The mounted keys Secret: one file per data key, raw bytes.
  const secret = liqoResources().secrets[0]!;
  writeFileSync(join(dir, 'keys', 'privateKey'), Buffer.from(secret.data!['privateKey']!, 'base64'));
}, 60_000);

afterAll(async () => {
  for (const m of modes) await m.stop().catch(() => {});
  await server?.stop();
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)("weft k8s as the pod of Liqo's gateway template", () => {
  test("the template arguments parse into Liqo's identity, Lease name and pod", () => {
    const s = settings('b');
    expect(s.liqo).toEqual({ name: 'cluster-b', namespace: NS, mode: 'server', gatewayUid: gsUid });
    expect(s.leaseName).toBe(`cluster-b.${NS}.server.connections.liqo.io`);
    expect(s.leaseName).toBe(leaseName({ name: 'cluster-b', namespace: NS, mode: 'server' }));
    expect(s.identity).toBe('cluster-b-pod-b');
    expect(s.clusterId).toBeUndefined();
    expect(s.name).toBe('lqx-b');
  });

  test("leader: cluster ID from the ConfigMap, key from the mounted file, Liqo's Connection, active label; standby unlabelled; takeover relabels", async () => {
    const b = await startMode('b');
    await waitFor('b leads', () => b.runtime.active, 15_000);
    expect(b.runtime.status().cluster.id).toBe('cluster-a');
    expect(server.requests.some((r) => r.path.includes('/secrets'))).toBe(false);
    expect(forbidden()).toEqual([]);
    await waitFor('active label on b', () => label('cluster-b-pod-b') === 'true', 10_000);

    await waitFor(
      'Connection gw-cluster-b',
      () => server.getObject(NET, 'connections', NS, 'gw-cluster-b')?.['status'] !== undefined,
      10_000,
    );
    const conn = server.getObject(NET, 'connections', NS, 'gw-cluster-b')!;
    expect(server.getObject(NET, 'connections', NS, 'cluster-b')).toBeUndefined();
    expect(conn.metadata.labels).toEqual({ 'liqo.io/remote-cluster-id': 'cluster-b' });
    expect(conn.metadata['ownerReferences']).toEqual([
      { apiVersion: NET, kind: 'GatewayServer', name: 'cluster-b', uid: gsUid },
    ]);
    expect(conn['spec']).toEqual({
      type: 'Server',
      gatewayRef: { apiVersion: NET, kind: 'WgGatewayServer', name: 'cluster-b', namespace: NS, uid: gsUid },
    });
    expect((conn['status'] as { value: string }).value).toBe('Connecting');

    const c = await startMode('c');
    await new Promise((r) => setTimeout(r, 2000));
    expect(c.runtime.active).toBe(false);
    expect(label('cluster-b-pod-c')).toBeUndefined();
    await b.stop(); // releases the Lease and drops its label
    await waitFor('c takes over', () => c.runtime.active, 15_000);
    await waitFor(
      'active label moves to c',
      () => label('cluster-b-pod-c') === 'true' && label('cluster-b-pod-b') === undefined,
      10_000,
    );
    const lease = server.getObject(
      'coordination.k8s.io/v1',
      'leases',
      NS,
      `cluster-b.${NS}.server.connections.liqo.io`,
    )!;
    expect((lease['spec'] as { holderIdentity: string }).holderIdentity).toBe('cluster-b-pod-c');
  });

  test("a crashed leader keeps its active label until the new leader removes it, as Liqo's gateway does", async () => {
    const c = modes[1]!;
    expect(label('cluster-b-pod-c')).toBe('true');
    const d = await startMode('d');
    await new Promise((r) => setTimeout(r, 1500));
    expect(d.runtime.active).toBe(false);
    // c crashes as a SIGKILL would leave it: no Lease renewal or status write, nothing released,
    // label still set.
    const dead = c as unknown as { elector: { stop(): Promise<void> }; stopStatus(): void };
    await dead.elector.stop();
    dead.stopStatus();
    await c.runtime.stopDataPlane();
    expect(label('cluster-b-pod-c')).toBe('true');
    await waitFor('d takes over', () => d.runtime.active, 15_000);
    await waitFor(
      "d labelled, c's stale label removed",
      () => label('cluster-b-pod-d') === 'true' && label('cluster-b-pod-c') === undefined,
      10_000,
    );
    // Two replicas never both carry it once d has claimed it; another gateway's pod is untouched.
    expect(['b', 'c', 'd'].filter((x) => label(`cluster-b-pod-${x}`) === 'true')).toEqual(['d']);
    expect(label('cluster-z-pod')).toBe('true');
    // Done with the pods list the ClusterRole grants (the replicas by app.kubernetes.io/name).
    expect(
      server.requests.some(
        (r) => r.method === 'GET' && r.path.startsWith(`/api/v1/namespaces/${NS}/pods?labelSelector=app.kubernetes.io`),
      ),
    ).toBe(true);
    expect(forbidden()).toEqual([]);
  }, 40_000);

  const FAST: LeaseTimes = { leaseDurationMs: 1500, leaseRenewDeadlineMs: 1000, leaseRetryPeriodMs: 250 };
  const LEASE = `cluster-b.${NS}.server.connections.liqo.io`;
  const lease = () => server.getObject('coordination.k8s.io/v1', 'leases', NS, LEASE);
  const msgs = (id: string, pred: (l: { level: number; msg: string; err?: string }) => boolean) =>
    logs.get(id)!.filter(pred);

  test('a deleted Connection is named as such when it is created again', async () => {
    await modes[2]!.stop(); // d releases the Lease; e (fast Lease timing) takes over
    const from = server.requests.length;
    const e = await startMode('e', FAST);
    await waitFor('e leads', () => e.runtime.active, 15_000);
    // e's writer has read the Connection d left (a GET answered 200 once d is gone): only a
    // Connection its writer has seen counts as re-created when it has to create it again.
    await waitFor(
      'Connection read by e',
      () =>
        server.requests
          .slice(from)
          .some((r) => r.method === 'GET' && r.status === 200 && r.path.endsWith(`/connections/gw-cluster-b`)),
      10_000,
    );
    server.remove(NET, 'connections', NS, 'gw-cluster-b');
    await waitFor(
      'Connection back',
      () => server.getObject(NET, 'connections', NS, 'gw-cluster-b') !== undefined,
      10_000,
    );
    // The DELETED event's handler logs after a short delay (the owner's event first), while a
    // status write may already have created the Connection again (404 → create).
    await waitFor('the deleted Connection logged', () => msgs('e', (l) => l.msg.includes('was deleted')).length > 0);
    expect(msgs('e', (l) => l.msg.includes('was deleted')).map((l) => l.msg)).toEqual([
      `Connection ${NS}/gw-cluster-b was deleted: creating it again (it reports on ${NS}/cluster-b)`,
    ]);
  });

  test('an API server outage of 12 s: the leader keeps forwarding, the standby stays standby; after it nothing flaps', async () => {
    const e = modes[3]!;
    const f = await startMode('f', FAST);
    await new Promise((r) => setTimeout(r, 2000));
    expect(f.runtime.active).toBe(false);
    // The Lease is owned by the GatewayServer, as the Connection.
    expect(lease()!.metadata['ownerReferences']).toEqual([
      { apiVersion: NET, kind: 'GatewayServer', name: 'cluster-b', uid: gsUid },
    ]);
    let leaderDown = 0;
    let standbyUp = 0;
    const sample = setInterval(() => {
      if (!e.runtime.active) leaderDown++;
      if (f.runtime.active) standbyUp++;
    }, 50);
    try {
      await server.outage(12_000);
      // Recovery: several lease durations with the API server back.
      await new Promise((r) => setTimeout(r, 6000));
    } finally {
      clearInterval(sample);
    }
    expect(leaderDown).toBe(0);
    expect(standbyUp).toBe(0);
    expect(msgs('e', (l) => l.msg === 'data plane stopped' || l.msg.includes('lost the Lease'))).toEqual([]);
    expect(msgs('e', (l) => l.msg.startsWith('Lease not renewed for'))).toHaveLength(1);
    expect(msgs('f', (l) => l.msg.startsWith('leader'))).toEqual([]);
    const spec = lease()!['spec'] as { holderIdentity: string; renewTime: string };
    expect(spec.holderIdentity).toBe('cluster-b-pod-e');
    expect(Date.now() - Date.parse(spec.renewTime)).toBeLessThan(3000);
    expect(label('cluster-b-pod-e')).toBe('true');
    expect(label('cluster-b-pod-f')).toBeUndefined();
  }, 60_000);

  test('revoked credentials (the ServiceAccount deleted): said once per replica and in weft show; forwarding continues', async () => {
    const [e, f] = [modes[3]!, modes[4]!];
    server.revokeServiceAccount(NS, 'cluster-b');
    for (const m of [e, f])
      await waitFor(
        'weft show names the credentials',
        () => (m.runtime.status().errors ?? []).some((x) => x.message === CREDENTIALS_REJECTED),
        10_000,
      );
    // About 16 Lease rounds per replica, plus informer retries and status writes.
    await new Promise((r) => setTimeout(r, 4000));
    for (const id of ['e', 'f']) {
      expect(msgs(id, (l) => l.msg === CREDENTIALS_REJECTED)).toHaveLength(1);
      expect(
        msgs(id, (l) => l.level >= 40 && l.msg !== CREDENTIALS_REJECTED && (l.err ?? l.msg).includes('401')),
      ).toEqual([]);
    }
    // …while the requests went on being refused: two replicas' Lease rounds alone are about 32.
    expect(server.requests.filter((r) => r.status === 401).length).toBeGreaterThan(20);
    expect(formatStatus(e.runtime.status(), Date.now())).toContain(CREDENTIALS_REJECTED);
    expect(e.runtime.active).toBe(true);
    expect(f.runtime.active).toBe(false);
  }, 30_000);

  test('unpeer: deleting the GatewayServer removes the WgGatewayServer and the Connection', async () => {
    expect(server.getObject(NET, 'connections', NS, 'gw-cluster-b')).toBeDefined();
    server.remove(NET, 'gatewayservers', NS, 'cluster-b');
    await waitFor(
      'Connection collected',
      () => server.getObject(NET, 'connections', NS, 'gw-cluster-b') === undefined,
      10_000,
    );
    expect(server.getObject(NET, 'wggatewayservers', NS, 'cluster-b')).toBeUndefined();
    // The Lease goes with it (its ownerReference; the garbage collector).
    expect(lease()).toBeUndefined();
    // The gateway does not create it again: its GatewayServer is gone.
    await new Promise((r) => setTimeout(r, 1500));
    expect(server.getObject(NET, 'connections', NS, 'gw-cluster-b')).toBeUndefined();
    expect(forbidden()).toEqual([]);
  });
});

describe('node role: the source address towards a gateway pod', () => {
  test("is the kernel route's source (loopback for a loopback address)", async () => {
    expect(await routeSourceFor('127.0.0.1')).toBe('127.0.0.1');
    expect(await routeSourceFor('127.0.0.2')).toBe('127.0.0.1');
  });
});
