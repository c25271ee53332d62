// `weft k8s` (K8sMode + Runtime, in-process) against the fake Kubernetes API server with Liqo's
// resources: the gateway data plane starts from the translated configuration (inside namespace
// wc-k8s-*, so its TUN device, routes and sockets stay there), the Connection is created and its
// status written, a change of a Liqo resource is applied live, and two replicas fail over
// through the Lease.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { K8sMode } from '../../src/daemon/k8s-mode.js';
import { LEASE_DEFAULTS, HEARTBEAT_DEFAULTS, type K8sSettings } from '../../src/daemon/k8s-settings.js';
import { Runtime } from '../../src/daemon/runtime.js';
import { KINDS, type LiqoResourceName } from '../../src/control/k8s/resources.js';
import { createLogger } from '../../src/control/log.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { NS } from '../control/k8s/liqo-fixtures.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';
import { loadLiqo } from '../control/k8s/helpers.js';

const skip = e2eUnavailableReason();
const topo = new Topology('wc-k8s');
let server: FakeApiServer;
let dir = '';
const modes: K8sMode[] = [];
const NET = 'networking.liqo.io/v1beta1';

function settings(identity: string, lease: boolean): K8sSettings {
  return {
    role: 'gateway',
    clusterId: 'cluster-a',
    kubeconfig: undefined,
    namespace: NS,
    ipamNamespace: undefined,
    liqoNamespace: 'liqo',
    liqo: undefined,
    podName: undefined,
    wireguardKeyDir: undefined,
    remoteClusterIds: ['cluster-b'],
    nodeName: 'worker-1',
    leaseName: lease ? 'weft-gateway' : undefined,
    identity,
    leaseDurationMs: LEASE_DEFAULTS.durationMs,
    leaseRenewDeadlineMs: LEASE_DEFAULTS.renewDeadlineMs,
    leaseRetryPeriodMs: LEASE_DEFAULTS.retryPeriodMs,
    heartbeatPort: 0,
    heartbeatIntervalMs: HEARTBEAT_DEFAULTS.intervalMs,
    takeoverWindowMs: HEARTBEAT_DEFAULTS.windowMs,
    handoverTimeoutMs: HEARTBEAT_DEFAULTS.handoverMs,
    podCIDRs: [],
    geneveMode: 'l3',
    metricsListen: undefined,
    conncheck: false,
    statusIntervalMs: 10_000,
    name: `k8s-${identity}`,
    runDir: join(dir, 'run'),
    logLevel: 'silent',
  };
}

async function startMode(identity: string, lease: boolean): Promise<K8sMode> {
  const ns = topo.addNamespace(identity);
  topo.exec(ns, ['ip', 'link', 'set', 'lo', 'up']);
  const logger = createLogger({ level: 'silent', env: {} });
  const runtime = await Runtime.create({
    name: `k8s-${identity}`,
    runDir: join(dir, 'run'),
    source: 'kubernetes',
    logger,
    launch: { netns: ns },
  });
  const mode = new K8sMode(settings(identity, lease), server.kubeConfig(), runtime, logger);
  modes.push(mode);
  await mode.start();
  return mode;
}

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'wc-k8s-'));
  server = await FakeApiServer.start();
  loadLiqo(server);
}, 60_000);

afterAll(async () => {
  for (const m of modes) await m.stop().catch(() => {});
  await server?.stop();
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('weft k8s: Liqo resources → gateway, Connection status, Lease failover', () => {
  test('the gateway starts from the translated resources and its Connection is created and reported', async () => {
    const m = await startMode('a', false);
    expect(m.runtime.active).toBe(true);
    const st = m.runtime.status();
    expect(st.weft).toMatchObject({ role: 'gateway', source: 'kubernetes', active: true });
    expect(st.cluster.id).toBe('cluster-a');
    expect(st.wireguard!.peers.map((p) => [p.name, p.allowedIPs, p.remappedCIDRs])).toEqual([
      ['cluster-b', ['10.0.0.0/16', '10.70.0.0/16'], ['10.71.0.0/16', '10.72.0.0/16']],
    ]);
    expect(st.geneve.tunnels.map((t) => [t.vni, t.name])).toEqual([
      [0, 'worker-1'],
      [1, 'worker-2'],
    ]);
    expect(topo.exec(topo.ns('a'), ['ip', '-o', 'link'])).toContain('liqo-tunnel');

    await waitFor(
      'Connection status',
      () => server.getObject(NET, 'connections', NS, 'cluster-b')?.['status'] !== undefined,
      10_000,
    );
    const conn = server.getObject(NET, 'connections', NS, 'cluster-b')!;
    expect(conn.metadata.labels).toEqual({ 'liqo.io/remote-cluster-id': 'cluster-b' });
    expect(conn['spec']).toMatchObject({
      type: 'Server',
      gatewayRef: { kind: 'GatewayServer', name: 'cluster-b', namespace: NS },
    });
    // No handshake with the (absent) peer: Connecting, as Liqo reports before the first pong.
    expect((conn['status'] as { value: string }).value).toBe('Connecting');
  });

  test('a changed Configuration (new remapping) is applied to the running gateway', async () => {
    const m = modes[0]!;
    const conf = server.getObject(NET, 'configurations', NS, 'cluster-b')!;
    const next = structuredClone(conf) as typeof conf & { status: { remote: { cidr: { pod: string[] } } } };
    next.status.remote.cidr.pod = ['10.73.0.0/16'];
    delete (next.metadata as { resourceVersion?: string }).resourceVersion;
    server.put(NET, 'configurations', next as unknown as Record<string, unknown>);
    await waitFor(
      'remapping applied',
      () => m.runtime.status().wireguard!.peers[0]!.remappedCIDRs[0] === '10.73.0.0/16',
      10_000,
    );
    // The kernel route for the remapped CIDR moved with it.
    await waitFor('route', () => topo.exec(topo.ns('a'), ['ip', '-4', 'route']).includes('10.73.0.0/16'), 5000);
    expect(m.runtime.active).toBe(true);
    await m.stop();
    expect(topo.exec(topo.ns('a'), ['ip', '-o', 'link'])).not.toContain('liqo-tunnel');
  });

  test('two replicas with a Lease: one forwards, the other takes over when it stops', async () => {
    const b = await startMode('b', true);
    await waitFor('b leads', () => b.runtime.active, 15_000);
    const c = await startMode('c', true);
    // c watches (its caches are warm) but does not forward while b holds the Lease.
    await new Promise((r) => setTimeout(r, 2500));
    expect(c.runtime.active).toBe(false);
    expect(c.runtime.status().weft.active).toBe(false);
    expect(topo.exec(topo.ns('c'), ['ip', '-o', 'link'])).not.toContain('liqo-tunnel');
    const lease = server.getObject('coordination.k8s.io/v1', 'leases', NS, 'weft-gateway')!;
    expect((lease['spec'] as { holderIdentity: string }).holderIdentity).toBe('b');
    await b.stop(); // releases the Lease
    await waitFor('c takes over', () => c.runtime.active, 15_000);
    expect(
      (server.getObject('coordination.k8s.io/v1', 'leases', NS, 'weft-gateway')!['spec'] as { holderIdentity: string })
        .holderIdentity,
    ).toBe('c');
    expect(topo.exec(topo.ns('c'), ['ip', '-o', 'link'])).toContain('liqo-tunnel');
  });
});
