// `weft k8s --role node --liqo-firewall` (K8sMode + Runtime in-process, the node agent in
// namespace nxk-node) against the fake API server with Liqo's resources and the fabric objects
// Liqo creates for node worker-1 (test/rules/liqo-peering-objects.ts): the wiring of k8s.ts —
// the kernel part appears in the node's kernel (nft tables, ip rules in Liqo's table ids), each
// chain's path and the RouteConfigurations in `weft show`, a RouteConfiguration the kernel
// refuses in `weft show` and as a Warning Event, and stop() removes what was installed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { K8sMode } from '../../src/daemon/k8s-mode.js';
import { K8S_SPEC, parseK8sArgs } from '../../src/cli/commands/k8s-args.js';
import { LEASE_DEFAULTS } from '../../src/daemon/k8s-settings.js';
import { parseArgs } from '../../src/cli/commands/common.js';
import { Runtime } from '../../src/daemon/runtime.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { KINDS, type LiqoResourceName } from '../../src/control/k8s/resources.js';
import { createLogger } from '../../src/control/log.js';
import { liqoTableId } from '../../src/rules/routes.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { NS } from '../control/k8s/liqo-fixtures.js';
import { fabricObjects, type PeeringSide } from '../rules/liqo-peering-objects.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';
import { loadLiqo } from '../control/k8s/helpers.js';

const skip = e2eUnavailableReason(['ip', 'nft'], { nativeAddon: true });
const topo = new Topology('nxk');
const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
let dir = '';
let mode: K8sMode | undefined;

// As the fixtures' cluster-a sees its peering with cluster-b (InternalFabric node interface liqo.cluster-b).
const SIDE: PeeringSide = {
  cfg: 'cluster-b',
  remoteId: 'cluster-b',
  namespace: NS,
  mode: 'server',
  remotePod: { real: '10.0.0.0/16', remapped: '10.71.0.0/16' },
  remoteExt: { real: '10.70.0.0/16', remapped: '10.72.0.0/16' },
  nodes: [{ name: 'worker-1', internalIP: '10.80.0.2', gatewayIf: 'liqo.worker-1', pods: [] }],
  mss: 1340,
  localPod: '10.0.0.0/16',
  localExt: '10.70.0.0/16',
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: 'liqo.cluster-b',
  gatewayPod: { ip: '10.244.1.7', node: 'worker-1' },
  liqoNamespace: NS,
};
/** Liqo's own namespace: a refused object there gets its Warning Event there. */
const LIQO_NS = 'liqo';

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'nxk-'));
  server = await FakeApiServer.start();
  loadLiqo(server);
}, 60_000);

afterAll(async () => {
  await mode?.stop().catch(() => {});
  await server?.stop();
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('weft k8s --role node --liqo-firewall', () => {
  test("the fabric objects' kernel part installed, shown, a refusal reported, everything removed at stop", async () => {
    const ns = topo.addNamespace('-node');
    // The node's own address (InternalNode status.nodeIP.local), where the agent binds Geneve.
    topo.exec(ns, ['ip', 'link', 'add', 'nxkv0', 'type', 'veth', 'peer', 'name', 'nxkv1']);
    topo.exec(ns, ['ip', 'addr', 'add', '10.244.1.1/24', 'dev', 'nxkv0']);
    topo.exec(ns, ['ip', 'link', 'set', 'nxkv0', 'up']);
    topo.exec(ns, ['ip', 'link', 'set', 'nxkv1', 'up']);
    // As the fabric DaemonSet runs it: no --namespace.
    const args = [
      '--role',
      'node',
      '--cluster-id',
      'cluster-a',
      '--node-name',
      'worker-1',
      '--liqo-firewall',
      '--no-conncheck',
    ];
    const s = {
      ...parseK8sArgs(parseArgs(args, K8S_SPEC), {}),
      runDir: join(dir, 'run'),
      name: 'nxk',
      logLevel: 'silent' as const,
      leaseDurationMs: LEASE_DEFAULTS.durationMs,
      leaseRenewDeadlineMs: LEASE_DEFAULTS.renewDeadlineMs,
      leaseRetryPeriodMs: LEASE_DEFAULTS.retryPeriodMs,
    };
    const logger = createLogger({ level: 'silent', env: {} });
    const runtime = await Runtime.create({
      name: 'nxk',
      runDir: join(dir, 'run'),
      source: 'kubernetes',
      logger,
      conncheck: false,
      launch: { netns: ns },
    });
    mode = new K8sMode(s, server.kubeConfig(), runtime, logger);
    await mode.start();
    const agent = (await waitFor('the node agent', () => runtime.nodeAgent(), 10_000))!;
    const objs = fabricObjects(SIDE);
    for (const o of [...objs.firewall, ...objs.routes])
      server.put(NET, o.kind === 'FirewallConfiguration' ? 'firewallconfigurations' : 'routeconfigurations', o);
    const id = liqoTableId('cluster-b-node-gw');
    const nft = (): string => topo.exec(ns, ['nft', 'list', 'tables'], { allowFail: true });
    const rules = (): string => topo.exec(ns, ['ip', 'rule', 'show'], { allowFail: true });
    // The status records a RouteConfiguration once all of it (rules, then routes) is in: wait for that too.
    const routesLine = `  routes ${NS}/cluster-b-node-gw: node kernel, table cluster-b-node-gw (id ${id}), 3 rules, 3 routes`;
    await waitFor(
      'the kernel tables and rules',
      () =>
        nft().includes('worker-1-gw-masquerade-bypass') &&
        nft().includes('cluster-b-masquerade-bypass') &&
        rules().includes(`to 10.72.0.0/16 lookup ${id}`) &&
        formatStatus(runtime.status(), Date.now()).includes(routesLine),
      10_000,
    );
    expect(topo.exec(ns, ['ip', '-o', 'route', 'get', '10.71.0.9'])).toMatch(
      new RegExp(`via 10\\.80\\.0\\.1 dev ${agent.tun.name} table ${id}`),
    );
    const shown = formatStatus(runtime.status(), Date.now());
    expect(shown).toContain(
      `  chain ${NS}/cluster-b-masquerade-bypass cluster-b-masquerade-bypass/pre-postrouting: node kernel (nft table ip cluster-b-masquerade-bypass)`,
    );
    expect(shown).toContain(
      `  chain ${NS}/worker-1-gw-masquerade-bypass worker-1-gw-masquerade-bypass/pre-postrouting: node kernel`,
    );
    expect(shown).toContain(routesLine);
    expect(shown).not.toContain('error (');

    // A RouteConfiguration the kernel refuses: weft show and a Warning Event; the rest stays.
    server.put(NET, 'routeconfigurations', {
      apiVersion: NET,
      kind: 'RouteConfiguration',
      metadata: { name: 'user-bad', namespace: LIQO_NS, labels: { 'networking.liqo.io/route-category': 'fabric' } },
      spec: {
        table: {
          name: 'user-bad',
          rules: [{ dst: '10.99.0.0/16', routes: [{ dst: '10.99.0.0/16', dev: 'nxknothere' }] }],
        },
      },
    });
    await waitFor(
      'the problem in weft show',
      () => (runtime.status().errors ?? []).some((e) => e.topic === 'fabric-kernel' && e.message.includes('user-bad')),
      10_000,
    );
    expect(formatStatus(runtime.status(), Date.now())).toMatch(
      /error \(fabric-kernel.*RouteConfiguration liqo\/user-bad rule #0 route #0: dev: the node's kernel refused it/,
    );
    // The node agent has no --namespace: the Event goes to the object's own namespace.
    type Ev = { metadata: { namespace: string }; involvedObject: { name: string; namespace: string }; type: string };
    const ev = await waitFor(
      'the Event',
      () =>
        server
          .listObjects('v1', 'events')
          .map((e) => e as unknown as Ev)
          .find((e) => e.involvedObject.name === 'user-bad'),
      10_000,
    );
    expect([ev!.metadata.namespace, ev!.involvedObject.namespace, ev!.type]).toEqual([LIQO_NS, LIQO_NS, 'Warning']);
    expect(rules()).toContain(`to 10.72.0.0/16 lookup ${id}`);

    await mode.stop();
    mode = undefined;
    expect(nft()).not.toMatch(/masquerade-bypass/);
    expect(rules()).not.toContain(`lookup ${id}`);
    expect(topo.exec(ns, ['ip', 'route', 'show', 'table', String(id)], { allowFail: true }).trim()).toBe('');
  }, 60_000);
});
