// `weft k8s` (K8sMode + Runtime, in-process) against the fake API server, data planes inside
// namespaces k8x* (root): what a real API server showed to matter —
// a live MTU change reaches the TUN, a rejected object is visible in `weft show`, as a Warning
// Event and as Connection Error, a deleted Connection comes back, a clean stop leaves the
// Connection at Error, LOG_LEVEL=debug gives debug lines, and Lease takeover times.
// Figures (takeover, time to visibility) are printed, not asserted: the only timing bounds are
// generous waits that the old behaviour (16 s takeover) would exceed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { K8sMode } from '../../src/daemon/k8s-mode.js';
import { LEASE_DEFAULTS, HEARTBEAT_DEFAULTS, type K8sSettings } from '../../src/daemon/k8s-settings.js';
import { Runtime } from '../../src/daemon/runtime.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import type { LeaderElector } from '../../src/control/k8s/lease.js';
import { createLogger } from '../../src/control/log.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { NS } from '../control/k8s/liqo-fixtures.js';
import { loadLiqo } from '../control/k8s/helpers.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';

const skip = e2eUnavailableReason(['ip']);
const topo = new Topology('k8x');
const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
let dir = '';
const modes: K8sMode[] = [];
/** Log lines (pino JSON) per identity. */
const logs = new Map<string, { level: number; msg: string }[]>();

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
    leaseName: lease ? 'weft-gw-k8x' : undefined,
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
    name: `k8x-${identity}`,
    runDir: join(dir, 'run'),
    logLevel: 'debug',
  };
}

async function startMode(identity: string, lease: boolean, wait = true): Promise<K8sMode> {
  const ns = topo.addNamespace(identity);
  const lines: { level: number; msg: string }[] = [];
  logs.set(identity, lines);
  // What LOG_LEVEL=debug gives the CLI (resolveLogLevel reads it from this env).
  const logger = createLogger({
    env: { LOG_LEVEL: 'debug' },
    destination: {
      write: (s: string) => {
        for (const l of s.split('\n')) if (l !== '') lines.push(JSON.parse(l) as { level: number; msg: string });
      },
    },
  });
  const runtime = await Runtime.create({
    name: `k8x-${identity}`,
    runDir: join(dir, 'run'),
    source: 'kubernetes',
    logger,
    launch: { netns: ns },
  });
  const mode = new K8sMode(settings(identity, lease), server.kubeConfig(), runtime, logger);
  modes.push(mode);
  if (wait) await mode.start();
  else void mode.start();
  return mode;
}

const conn = () => server.getObject(NET, 'connections', NS, 'cluster-b');
const connValue = () => (conn()?.['status'] as { value?: string } | undefined)?.value;
const linkMtu = (ns: string) =>
  Number(/ mtu (\d+)/.exec(topo.exec(ns, ['ip', '-o', 'link', 'show', 'liqo-tunnel']))?.[1]);

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'k8x-'));
  server = await FakeApiServer.start();
  loadLiqo(server);
}, 60_000);

afterAll(async () => {
  for (const m of modes) await m.stop().catch(() => {});
  await server?.stop();
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('weft k8s against real-server behaviour (k8x namespaces)', () => {
  test('a live GatewayServer spec.mtu change reaches the TUN and weft show', async () => {
    const m = await startMode('a', false);
    const ns = topo.ns('a');
    expect(linkMtu(ns)).toBe(1340);
    const gw = server.getObject(NET, 'gatewayservers', NS, 'cluster-b')!;
    (gw['spec'] as { mtu: number }).mtu = 1300;
    server.put(NET, 'gatewayservers', gw);
    await waitFor('MTU applied', () => m.runtime.status().interface?.mtu === 1300, 10_000);
    expect(linkMtu(ns)).toBe(1300);
    expect(formatStatus(m.runtime.status(), Date.now())).toContain('(mtu 1300)');
    // Live, not by a restart of the data plane.
    expect(logs.get('a')!.some((l) => l.msg.includes('restarting'))).toBe(false);
    // LOG_LEVEL=debug: debug lines (pino level 20) about the change.
    expect(
      logs
        .get('a')!
        .filter((l) => l.level === 20)
        .map((l) => l.msg),
    ).toContainEqual(expect.stringContaining('configuration change: wireguard.update'));
  });

  test('the Connection is owned by the GatewayServer and comes back after kubectl delete', async () => {
    await waitFor('Connection', () => conn() !== undefined, 10_000);
    const gw = server.getObject(NET, 'gatewayservers', NS, 'cluster-b')!;
    expect(conn()!.metadata['ownerReferences']).toEqual([
      { apiVersion: NET, kind: 'GatewayServer', name: 'cluster-b', uid: gw.metadata.uid },
    ]);
    const uid = conn()!.metadata.uid;
    server.remove(NET, 'connections', NS, 'cluster-b');
    const t0 = Date.now();
    // Recreated on the DELETED event (or, failing that, by the next due status write: 10 s).
    await waitFor('Connection recreated', () => conn() !== undefined && conn()!.metadata.uid !== uid, 15_000);
    console.log(`Connection recreated ${Date.now() - t0} ms after delete`);
    expect(logs.get('a')!.some((l) => l.msg.includes('was deleted: creating it again'))).toBe(true);
    // Created first (the server drops status on create), then its status written.
    await waitFor('status written again', () => connValue() === 'Connecting', 5000);
  });

  test('a rejected PublicKey is visible in weft show, as a Warning Event and as Connection Error; then clears', async () => {
    const m = modes[0]!;
    const pk = server.getObject(NET, 'publickeies', NS, 'gw-cluster-b')!;
    const good = structuredClone(pk);
    (pk['spec'] as { publicKey: string }).publicKey = Buffer.alloc(31, 7).toString('base64');
    const t0 = Date.now();
    server.put(NET, 'publickeies', pk);
    await waitFor('weft show error', () => (m.runtime.status().errors ?? []).length > 0, 10_000);
    const tShow = Date.now() - t0;
    const text = formatStatus(m.runtime.status(), Date.now());
    expect(text).toContain(`PublicKey ${NS}/gw-cluster-b: spec.publicKey`);
    await waitFor('Connection Error', () => connValue() === 'Error', 10_000);
    const tConn = Date.now() - t0;
    const events = () =>
      server.listObjects('v1', 'events').filter((e) => (e['involvedObject'] as { kind: string }).kind === 'PublicKey');
    await waitFor('Event', () => events().length > 0, 10_000);
    const tEvent = Date.now() - t0;
    console.log(`bad PublicKey visible: weft show ${tShow} ms, Connection ${tConn} ms, Event ${tEvent} ms`);
    const ev = events()[0]!;
    expect(ev).toMatchObject({
      type: 'Warning',
      reason: 'InvalidConfiguration',
      involvedObject: { name: 'gw-cluster-b', namespace: NS, uid: pk.metadata.uid },
    });
    expect(ev['message']).toContain('spec.publicKey');
    // The data plane keeps the previous configuration.
    expect(m.runtime.active).toBe(true);

    server.put(NET, 'publickeies', good);
    await waitFor('error cleared', () => m.runtime.status().errors === undefined, 10_000);
    await waitFor('Connection no longer Error', () => connValue() === 'Connecting', 10_000);
  });

  test('a rejected private key in the Secret names the Secret', async () => {
    const m = modes[0]!;
    const sec = server.getObject('v1', 'secrets', NS, 'gw-keys')!;
    const good = structuredClone(sec);
    (sec['data'] as Record<string, string>)['privateKey'] = Buffer.from('not a key').toString('base64');
    server.put('v1', 'secrets', sec);
    await waitFor('weft show error', () => (m.runtime.status().errors ?? []).length > 0, 10_000);
    expect(m.runtime.status().errors![0]!.message).toContain(`Secret ${NS}/gw-keys: data.privateKey`);
    await waitFor(
      'Event on the Secret',
      () => server.listObjects('v1', 'events').some((e) => (e['involvedObject'] as { kind: string }).kind === 'Secret'),
      10_000,
    );
    server.put('v1', 'secrets', good);
    await waitFor('error cleared', () => m.runtime.status().errors === undefined, 10_000);
  });

  test('a clean stop leaves the Connection at Error (the gateway is down)', async () => {
    const m = modes[0]!;
    await waitFor('Connecting', () => connValue() === 'Connecting', 10_000);
    await m.stop();
    expect(connValue()).toBe('Error');
    expect(topo.exec(topo.ns('a'), ['ip', '-o', 'link'])).not.toContain('liqo-tunnel');
  });

  test('Lease takeover with the default timing: after a crash (no release) and after SIGTERM (release)', async () => {
    const b = await startMode('b', true);
    await waitFor('b leads', () => b.runtime.active, 15_000);
    const c = await startMode('c', true);
    await new Promise((r) => setTimeout(r, 1500));
    expect(c.runtime.active).toBe(false);
    // Crash of b as the Lease sees a SIGKILL: renewals stop, nothing is released.
    const t0 = Date.now();
    await (b as unknown as { elector: LeaderElector }).elector.stop();
    await waitFor('c takes over after the crash', () => c.runtime.active, 12_000);
    const tKill = Date.now() - t0;
    await waitFor('Connection written by c', () => connValue() === 'Connecting', 10_000);

    const d = await startMode('d', true);
    await new Promise((r) => setTimeout(r, 1500));
    expect(d.runtime.active).toBe(false);
    const t1 = Date.now();
    await c.stop(); // what SIGTERM runs
    await waitFor('d takes over after SIGTERM', () => d.runtime.active, 12_000);
    const tTerm = Date.now() - t1;
    console.log(
      `takeover (defaults ${LEASE_DEFAULTS.durationMs / 1000}/${LEASE_DEFAULTS.renewDeadlineMs / 1000}/${LEASE_DEFAULTS.retryPeriodMs / 1000} s): after crash ${tKill} ms, after SIGTERM ${tTerm} ms`,
    );
    // SIGTERM: the release is logged at info, never as "lost the Lease" (warning).
    const cl = logs.get('c')!;
    expect(cl.some((l) => l.msg === 'released the Lease' && l.level === 30)).toBe(true);
    expect(cl.some((l) => l.msg.includes('lost the Lease'))).toBe(false);
    await d.stop();
  }, 60_000);

  test('at start-up, "not usable yet" is visible in weft show and as an Event; it clears once usable', async () => {
    const sec = server.getObject('v1', 'secrets', NS, 'gw-keys')!;
    const good = structuredClone(sec);
    (sec['data'] as Record<string, string>)['privateKey'] = Buffer.from('still not a key').toString('base64');
    server.put('v1', 'secrets', sec);
    const eventsOnSecret = () =>
      server
        .listObjects('v1', 'events')
        .filter(
          (e) =>
            (e['involvedObject'] as { kind: string }).kind === 'Secret' &&
            String(e['message']).includes('data.privateKey'),
        ).length;
    const before = eventsOnSecret();
    const e = await startMode('e', false, false);
    await waitFor('weft show error', () => (e.runtime.status().errors ?? []).length > 0, 10_000);
    const text = formatStatus(e.runtime.status(), Date.now());
    expect(text).toContain('Liqo resources not usable yet');
    expect(text).toContain(`Secret ${NS}/gw-keys: data.privateKey`);
    await waitFor('Event', () => eventsOnSecret() > before, 10_000);
    server.put('v1', 'secrets', good);
    // The start-up retry (5 s) picks the fixed Secret up.
    await waitFor('started', () => e.runtime.active, 15_000);
    expect(e.runtime.status().errors).toBeUndefined();
    await e.stop();
  }, 30_000);
});
