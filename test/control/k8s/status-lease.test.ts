import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConnectionStatusWriter } from '../../../src/control/k8s/connection.js';
import { LeaderElector } from '../../../src/control/k8s/lease.js';
import { loadCrds, validate } from '../../k8s-fake/schema.js';
import { FakeApiServer, LIQO_CRD_DIR } from '../../k8s-fake/server.js';
import { until } from '../../util/wait.js';

let server: FakeApiServer;
beforeAll(async () => {
  server = await FakeApiServer.start();
});
afterAll(async () => {
  await server.stop();
});

describe('ConnectionStatusWriter', () => {
  const connCrd = loadCrds(LIQO_CRD_DIR).find((c) => c.kind === 'Connection')!;
  const mk = (updateIntervalMs = 10_000) =>
    new ConnectionStatusWriter({
      kubeConfig: server.kubeConfig(),
      namespace: 'liqo-tenant-b',
      name: 'gw-b',
      remoteClusterId: 'cluster-b',
      type: 'Server',
      gatewayRef: {
        apiVersion: 'networking.liqo.io/v1beta1',
        kind: 'GatewayServer',
        name: 'gw-b',
        namespace: 'liqo-tenant-b',
      },
      updateIntervalMs,
    });

  test('creates the Connection if missing, then patches status like Liqo', async () => {
    const w = mk();
    const t0 = new Date('2025-06-01T10:00:00Z');
    await w.ensure(t0);
    let c = server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!;
    expect(validate(c, connCrd.schema, 'strict')).toEqual([]);
    expect(c.metadata.labels).toEqual({ 'liqo.io/remote-cluster-id': 'cluster-b' });
    expect(c['spec']).toEqual({
      type: 'Server',
      gatewayRef: {
        apiVersion: 'networking.liqo.io/v1beta1',
        kind: 'GatewayServer',
        name: 'gw-b',
        namespace: 'liqo-tenant-b',
      },
    });
    expect(c['status']).toEqual({ value: 'Connecting', latency: { value: 'N/A', timestamp: '2025-06-01T10:00:00Z' } });

    expect(await w.report('Connected', 2.4, new Date('2025-06-01T10:00:02Z'))).toBe(true);
    c = server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!;
    expect(c['status']).toEqual({ value: 'Connected', latency: { value: '2ms', timestamp: '2025-06-01T10:00:02Z' } });
    const patch = server.requests.filter((r) => r.method === 'PATCH').at(-1)!;
    expect(patch.path).toBe('/apis/networking.liqo.io/v1beta1/namespaces/liqo-tenant-b/connections/gw-b/status');
    expect(patch.contentType).toBe('application/merge-patch+json');

    // Same value within the update interval: no write. After the interval: latency refreshed.
    expect(await w.report('Connected', 0.85, new Date('2025-06-01T10:00:04Z'))).toBe(false);
    expect(await w.report('Connected', 0.85, new Date('2025-06-01T10:00:12.5Z'))).toBe(true);
    c = server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!;
    expect((c['status'] as { latency: { value: string } }).latency.value).toBe('850μs');
    // A value change is written at once.
    expect(await w.report('Error', 0, new Date('2025-06-01T10:00:13Z'))).toBe(true);
    expect(
      (
        server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!['status'] as {
          value: string;
        }
      ).value,
    ).toBe('Error');
    expect(
      validate(
        server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b'),
        connCrd.schema,
        'strict',
      ),
    ).toEqual([]);
  });

  test('an existing Connection is reused, its spec untouched', async () => {
    const w = mk();
    const before = server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!;
    await w.ensure();
    const after = server.getObject('networking.liqo.io/v1beta1', 'connections', 'liqo-tenant-b', 'gw-b')!;
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after['status']).toEqual(before['status']);
    // It knows the stored value: reporting the same value soon after the stored timestamp is skipped.
    expect(await w.report('Error', 0, new Date('2025-06-01T10:00:14Z'))).toBe(false);
  });

  test("a stale spec.gatewayRef (uid of an earlier peering) is replaced, as Liqo's gateway does", async () => {
    const NET = 'networking.liqo.io/v1beta1';
    const cur = server.getObject(NET, 'connections', 'liqo-tenant-b', 'gw-b')!;
    server.put(NET, 'connections', {
      ...cur,
      spec: {
        type: 'Server',
        gatewayRef: {
          apiVersion: NET,
          kind: 'GatewayServer',
          name: 'gw-b',
          namespace: 'liqo-tenant-b',
          uid: 'old-peering',
        },
      },
    });
    await mk().ensure();
    const after = server.getObject(NET, 'connections', 'liqo-tenant-b', 'gw-b')!;
    expect(after.metadata.uid).toBe(cur.metadata.uid);
    expect(after['spec']).toEqual({
      type: 'Server',
      gatewayRef: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-b', namespace: 'liqo-tenant-b' },
    });
  });
});

describe('ConnectionStatusWriter against real-server behaviour', () => {
  const NET = 'networking.liqo.io/v1beta1';
  const gwObj = () => server.getObject(NET, 'gatewayservers', 'liqo-tenant-c', 'gw-c')!;
  const mk = (onRecreated?: () => void) =>
    new ConnectionStatusWriter({
      kubeConfig: server.kubeConfig(),
      namespace: 'liqo-tenant-c',
      name: 'gw-c',
      remoteClusterId: 'cluster-c',
      type: 'Server',
      gatewayRef: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-c', namespace: 'liqo-tenant-c' },
      owner: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-c', uid: gwObj().metadata.uid! },
      updateIntervalMs: 10_000,
      ...(onRecreated !== undefined ? { onRecreated } : {}),
    });
  beforeAll(() => {
    // Created as a client would: the real server drops status on create for this kind.
    const created = server.create(NET, 'gatewayservers', {
      apiVersion: NET,
      kind: 'GatewayServer',
      metadata: { name: 'gw-c', namespace: 'liqo-tenant-c' },
      spec: { endpoint: { port: 51840 }, mtu: 1340 },
      status: { endpoint: { addresses: ['172.18.0.9'] } },
    });
    expect(created['status']).toBeUndefined();
  });

  test('the Connection is owned by its gateway object and goes with it', async () => {
    const w = mk();
    await w.ensure();
    const c = server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')!;
    expect(c.metadata['ownerReferences']).toEqual([
      { apiVersion: NET, kind: 'GatewayServer', name: 'gw-c', uid: gwObj().metadata.uid },
    ]);
    // An older Connection without the reference is adopted (other owners kept).
    const bare = structuredClone(c);
    bare.metadata['ownerReferences'] = [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'other' }];
    server.put(NET, 'connections', bare);
    await mk().ensure();
    expect(
      (
        server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')!.metadata['ownerReferences'] as { uid: string }[]
      ).map((r) => r.uid),
    ).toEqual(['other', gwObj().metadata.uid]);
  });

  test('deleted under a running gateway, the Connection is created again by the next write', async () => {
    const w = mk();
    await w.ensure(new Date('2025-06-01T10:00:00Z'));
    expect(await w.report('Connected', 1, new Date('2025-06-01T10:00:01Z'))).toBe(true);
    server.remove(NET, 'connections', 'liqo-tenant-c', 'gw-c');
    // The next due write (interval elapsed) meets 404: create, then write.
    expect(await w.report('Connected', 1, new Date('2025-06-01T10:00:20Z'))).toBe(true);
    const c = server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')!;
    expect(c['status']).toEqual({ value: 'Connected', latency: { value: '1ms', timestamp: '2025-06-01T10:00:20Z' } });
    expect(c.metadata['ownerReferences']).toHaveLength(1);
    // recreate() (an informer saw DELETED) restores the last value at once.
    server.remove(NET, 'connections', 'liqo-tenant-c', 'gw-c');
    await w.recreate(new Date('2025-06-01T10:00:21Z'));
    expect((server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')!['status'] as { value: string }).value).toBe(
      'Connected',
    );
  });

  test('a writer that only found its Connection (a new leader, value unchanged) reports its re-creation once', async () => {
    let recreated = 0;
    const first = mk();
    await first.ensure(new Date('2025-06-01T10:00:00Z'));
    await first.report('Connected', 1, new Date('2025-06-01T10:00:01Z'));
    // The next leader finds the Connection as the last one left it: nothing to write.
    const w = mk(() => recreated++);
    await w.ensure(new Date('2025-06-01T10:00:02Z'));
    expect(await w.report('Connected', 1, new Date('2025-06-01T10:00:03Z'))).toBe(false);
    expect(w.writes).toBe(0);
    server.remove(NET, 'connections', 'liqo-tenant-c', 'gw-c');
    await w.recreate(new Date('2025-06-01T10:00:04Z'));
    expect(recreated).toBe(1);
    expect(server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')).toBeDefined();
    // A writer that never saw it exist creates it without calling it a re-creation.
    server.remove(NET, 'connections', 'liqo-tenant-c', 'gw-c');
    let fresh = 0;
    await mk(() => fresh++).ensure(new Date('2025-06-01T10:00:05Z'));
    expect(fresh).toBe(0);
  });

  test('its owner gone (unpeering), the Connection is not created again — not by a write, not by recreate()', async () => {
    const owner = server.create(NET, 'gatewayservers', {
      apiVersion: NET,
      kind: 'GatewayServer',
      metadata: { name: 'gw-d', namespace: 'liqo-tenant-c' },
      spec: { endpoint: { port: 51841 }, mtu: 1340 },
    });
    const w = new ConnectionStatusWriter({
      kubeConfig: server.kubeConfig(),
      namespace: 'liqo-tenant-c',
      name: 'gw-d',
      remoteClusterId: 'cluster-d',
      type: 'Server',
      gatewayRef: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-d', namespace: 'liqo-tenant-c' },
      owner: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-d', uid: owner.metadata.uid! },
      updateIntervalMs: 10_000,
    });
    expect(await w.ensure(new Date('2025-06-01T10:00:00Z'))).not.toBeNull();
    expect(await w.report('Connected', 1, new Date('2025-06-01T10:00:01Z'))).toBe(true);
    // The gateway's cache has not seen the GatewayServer go yet: it still writes, meets 404, and
    // must not create a Connection the garbage collector would only delete again.
    server.remove(NET, 'gatewayservers', 'liqo-tenant-c', 'gw-d');
    expect(server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-d')).toBeUndefined();
    expect(await w.report('Connected', 1, new Date('2025-06-01T10:00:20Z'))).toBe(false);
    expect(w.ownerGone).toBe(true);
    await w.recreate(new Date('2025-06-01T10:00:21Z'));
    expect(server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-d')).toBeUndefined();
    // An owner of the same name but another uid (a new peering) is not ours either.
    server.create(NET, 'gatewayservers', {
      apiVersion: NET,
      kind: 'GatewayServer',
      metadata: { name: 'gw-d', namespace: 'liqo-tenant-c' },
      spec: { endpoint: { port: 51841 }, mtu: 1340 },
    });
    const again = new ConnectionStatusWriter({
      kubeConfig: server.kubeConfig(),
      namespace: 'liqo-tenant-c',
      name: 'gw-d',
      remoteClusterId: 'cluster-d',
      type: 'Server',
      gatewayRef: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-d', namespace: 'liqo-tenant-c' },
      owner: { apiVersion: NET, kind: 'GatewayServer', name: 'gw-d', uid: owner.metadata.uid! },
    });
    expect(await again.ensure()).toBeNull();
    expect(server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-d')).toBeUndefined();
  });

  test('markDown reports Error (a stopped gateway), and deleting the gateway object removes the Connection', async () => {
    const w = mk();
    await w.ensure();
    await w.markDown();
    expect((server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')!['status'] as { value: string }).value).toBe(
      'Error',
    );
    server.remove(NET, 'gatewayservers', 'liqo-tenant-c', 'gw-c');
    expect(server.getObject(NET, 'connections', 'liqo-tenant-c', 'gw-c')).toBeUndefined();
  });
});

describe('LeaderElector', () => {
  const opts = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100 };
  const candidate = (identity: string, log: string[], name = 'weft-gw', o: typeof opts = opts) =>
    new LeaderElector({
      kubeConfig: server.kubeConfig(),
      namespace: 'liqo-tenant-b',
      name,
      identity,
      ...o,
      onStartedLeading: () => log.push(`${identity} started`),
      onStoppedLeading: () => log.push(`${identity} stopped`),
    });

  test('one leader; standby takes over after the leader stops renewing (crash)', async () => {
    const log: string[] = [];
    const a = candidate('gw-0', log);
    const b = candidate('gw-1', log);
    a.start();
    await until(() => a.isLeader, 'gw-0 leading');
    b.start();
    // b keeps observing a renewing lease: it must stay standby for longer than a lease duration.
    await new Promise((r) => setTimeout(r, 2000));
    expect(b.isLeader).toBe(false);
    const lease = server.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw')!;
    expect((lease['spec'] as { holderIdentity: string }).holderIdentity).toBe('gw-0');
    // Crash: a stops without releasing.
    await a.stop();
    await until(() => b.isLeader, 'gw-1 takes over');
    const after = server.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw')!['spec'] as {
      holderIdentity: string;
      leaseTransitions: number;
    };
    expect(after.holderIdentity).toBe('gw-1');
    expect(after.leaseTransitions).toBe(1);
    await b.stop();
    expect(log).toEqual(['gw-0 started', 'gw-0 stopped', 'gw-1 started', 'gw-1 stopped']);
  });

  test('graceful release hands over without waiting for expiry', async () => {
    // A 120 s lease: if b had to wait for it to lapse, the 10 s wait below would fail.
    const long = { leaseDurationMs: 120_000, renewDeadlineMs: 60_000, retryPeriodMs: 100 };
    const log: string[] = [];
    const a = candidate('gw-0', log, 'weft-gw-2', long);
    a.start();
    await until(() => a.isLeader, 'gw-0 leading');
    const b = candidate('gw-1', log, 'weft-gw-2', long);
    b.start();
    await new Promise((r) => setTimeout(r, 300));
    expect(b.isLeader).toBe(false);
    await a.stop({ release: true });
    await until(() => b.isLeader, 'gw-1 leading after release');
    expect(
      (
        server.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw-2')!['spec'] as {
          holderIdentity: string;
        }
      ).holderIdentity,
    ).toBe('gw-1');
    await b.stop();
    expect(log).toEqual(['gw-0 started', 'gw-0 stopped', 'gw-1 started', 'gw-1 stopped']);
  });

  test('a leader that reads another holder steps down', async () => {
    const log: string[] = [];
    const a = candidate('gw-0', log, 'weft-gw-3');
    a.start();
    await until(() => a.isLeader, 'leading');
    // Another writer steals the lease record (e.g. an operator edit): a's renewals now lose.
    const l = server.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw-3')!;
    (l['spec'] as Record<string, unknown>)['holderIdentity'] = 'intruder';
    (l['spec'] as Record<string, unknown>)['leaseDurationSeconds'] = 3600;
    server.put('coordination.k8s.io/v1', 'leases', l);
    await until(() => !a.isLeader, 'step down');
    expect(log).toEqual(['gw-0 started', 'gw-0 stopped']);
    await a.stop();
  });

  test('an API server outage of 12 s: the leader keeps leading, the standby stays standby, nothing flaps after', async () => {
    const own = await FakeApiServer.start();
    const fast = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 250 };
    const log: string[] = [];
    const errors: string[] = [];
    const overdue: number[] = [];
    const mk = (identity: string) =>
      new LeaderElector({
        kubeConfig: own.kubeConfig(),
        namespace: 'liqo-tenant-b',
        name: 'weft-gw-outage',
        identity,
        ...fast,
        onStartedLeading: () => log.push(`${identity} started`),
        onStoppedLeading: () => log.push(`${identity} stopped`),
        onError: (e) => errors.push(`${identity}: ${(e as Error).message}`),
        onRecovered: () => log.push(`${identity} recovered`),
        onRenewOverdue: (ms) => overdue.push(ms),
      });
    const a = mk('gw-0');
    const b = mk('gw-1');
    try {
      a.start();
      await until(() => a.isLeader, 'gw-0 leading');
      b.start();
      await new Promise((r) => setTimeout(r, 2000));
      await own.outage(12_000);
      // Through the outage: the leader never stopped, the standby never started.
      expect(log).toEqual(['gw-0 started']);
      expect(a.isLeader).toBe(true);
      expect(b.isLeader).toBe(false);
      // Reported once per replica, not per attempt (about 48 attempts each).
      expect(errors).toHaveLength(2);
      expect(overdue).toHaveLength(1);
      const lease = () =>
        own.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw-outage')!['spec'] as {
          holderIdentity: string;
          renewTime: string;
          leaseTransitions: number;
        };
      const before = lease().renewTime;
      // After recovery: renewed by the same leader; for several lease durations no change of hands.
      await until(() => lease().renewTime !== before, 'renewed after the outage', 5000);
      await new Promise((r) => setTimeout(r, 5000));
      expect(lease().holderIdentity).toBe('gw-0');
      expect(lease().leaseTransitions).toBe(0);
      expect(a.isLeader).toBe(true);
      expect(b.isLeader).toBe(false);
      expect(log.filter((l) => !l.endsWith('recovered'))).toEqual(['gw-0 started']);
    } finally {
      await a.stop();
      await b.stop();
      await own.stop();
    }
  }, 40_000);

  test('a black-holed API server (requests never answered): requests time out, the leader keeps leading', async () => {
    const own = await FakeApiServer.start();
    const log: string[] = [];
    const errors: string[] = [];
    const a = new LeaderElector({
      kubeConfig: own.kubeConfig(),
      namespace: 'liqo-tenant-b',
      name: 'weft-gw-hole',
      identity: 'gw-0',
      leaseDurationMs: 1500,
      renewDeadlineMs: 1000,
      retryPeriodMs: 250,
      onStartedLeading: () => log.push('started'),
      onStoppedLeading: () => log.push('stopped'),
      onError: (e) => errors.push((e as Error).message),
    });
    try {
      a.start();
      await until(() => a.isLeader, 'leading');
      own.setBlackHole(true);
      await new Promise((r) => setTimeout(r, 5000));
      expect(a.isLeader).toBe(true);
      // One report for the episode: the read that got no answer within the renew deadline.
      expect(errors).toHaveLength(1);
      expect(errors[0]).toContain('no answer within 1000 ms');
      const renewed = () =>
        (
          own.getObject('coordination.k8s.io/v1', 'leases', 'liqo-tenant-b', 'weft-gw-hole')!['spec'] as {
            renewTime: string;
          }
        ).renewTime;
      const before = renewed();
      own.setBlackHole(false);
      // Rounds were not stuck behind a request that never ends: it renews within a few rounds.
      await until(() => renewed() !== before, 'renewed after the black hole', 5000);
      expect(log).toEqual(['started']);
    } finally {
      own.setBlackHole(false);
      await a.stop();
      await own.stop();
    }
  }, 30_000);
});
