// `weft k8s --liqo-firewall` (K8sMode + Runtime, in-process, gateway in namespace lw-k8s-*)
// against the fake API server with Liqo's resources: Liqo mode steers the running gateway's
// Router with the node tunnels named as Liqo's InternalNodes name them, Geneve defaults to L2,
// objects are watched in every namespace (one in Liqo's own namespace is enforced), and a
// FirewallConfiguration the parser refuses is named (object, chain, rule, field) in
// `weft show` and in a Warning Event on it, while a good one is enforced; nothing a default
// Liqo install creates (test/k8s-fake/helm-render.ts) is refused.
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
import { fabricNodeDevices, liqoNodeConfig, nodeRulesOptions } from '../../src/daemon/k8s-liqo.js';
import type { NodeConfig } from '../../src/control/config.js';
import { translate } from '../../src/control/k8s/translate.js';
import { parseRouteObjects } from '../../src/rules/steering.js';
import { liqoPeeringSide } from '../k8s-fake/liqo-peering.js';
import { KEYS } from '../control/fixtures.js';
import { createLogger } from '../../src/control/log.js';
import { createMetricsRegistry } from '../../src/control/metrics.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { renderLiqoChart } from '../k8s-fake/helm-render.js';
import { NS, liqoResources } from '../control/k8s/liqo-fixtures.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';
import { loadLiqo } from '../control/k8s/helpers.js';

const skip = e2eUnavailableReason([], { nativeAddon: true });
/**
 * The Liqo objects of a default install (the DaemonSet is not an API the fake server serves); its
 * IPAM Networks take the place of the fixtures' (status.cidr as Liqo's IPAM fills it in).
 */
const defaultInstall = renderLiqoChart()
  .map(({ obj }) => obj)
  .filter((o) => o.apiVersion.includes('liqo.io'))
  .map((o) => (o.kind === 'Network' ? { ...o, status: { cidr: (o['spec'] as { cidr: string }).cidr } } : o));
const topo = new Topology('lw-k8s');
const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
let dir = '';
let mode: K8sMode | undefined;

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'lw-k8s-'));
  server = await FakeApiServer.start();
  const r = liqoResources();
  r.networks = [];
  loadLiqo(server, r);
  // Beside the controllers' objects, what a default Liqo install creates (its chart rendered with its defaults).
  for (const o of defaultInstall) server.put(o.apiVersion, `${o.kind.toLowerCase()}s`, o);
}, 60_000);

afterAll(async () => {
  await mode?.stop().catch(() => {});
  await server?.stop();
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('weft k8s --liqo-firewall', () => {
  test('Geneve L2 by default, steering with InternalNode interface names, a refused object in weft show and an Event', async () => {
    const args = [
      '--role',
      'gateway',
      '--cluster-id',
      'cluster-a',
      '--namespace',
      NS,
      '--node-name',
      'worker-1',
      '--remote-cluster-id',
      'cluster-b',
      '--liqo-firewall',
      '--no-conncheck',
    ];
    const s = {
      ...parseK8sArgs(parseArgs(args, K8S_SPEC), {}),
      runDir: join(dir, 'run'),
      name: 'lw-k8s',
      logLevel: 'silent' as const,
      leaseDurationMs: LEASE_DEFAULTS.durationMs,
      leaseRenewDeadlineMs: LEASE_DEFAULTS.renewDeadlineMs,
      leaseRetryPeriodMs: LEASE_DEFAULTS.retryPeriodMs,
    };
    expect(s.geneveMode).toBe('l2');
    expect(
      parseK8sArgs(
        parseArgs(
          args.filter((a) => a !== '--liqo-firewall'),
          K8S_SPEC,
        ),
        {},
      ).geneveMode,
    ).toBe('l3');
    const ns = topo.addNamespace('gw');
    topo.exec(ns, ['ip', 'link', 'set', 'lo', 'up']);
    const logger = createLogger({ level: 'silent', env: {} });
    const runtime = await Runtime.create({
      name: 'lw-k8s',
      runDir: join(dir, 'run'),
      source: 'kubernetes',
      logger,
      conncheck: false,
      launch: { netns: ns },
    });
    mode = new K8sMode(s, server.kubeConfig(), runtime, logger);
    await mode.start();
    const gw = runtime.gateway()!;
    expect(gw.current.geneve.tunnels.map((t) => t.mode)).toEqual(['l2', 'l2']);
    const st = gw.router.steered!;
    expect(st).not.toBeNull();
    expect(gw.nodeTunnels().map((t) => [t.nodeName, st.nodeDevice(t.tunnel)])).toEqual([
      ['worker-1', 'liqo.worker-1'],
      ['worker-2', 'liqo.worker-2'],
    ]);

    const fc = (name: string, action: string): Record<string, unknown> => ({
      apiVersion: NET,
      kind: 'FirewallConfiguration',
      metadata: {
        name,
        namespace: NS,
        labels: {
          'networking.liqo.io/firewall-category': 'gateway',
          'networking.liqo.io/firewall-unique': 'cluster-b',
        },
      },
      spec: {
        table: {
          name,
          family: 'IPV4',
          chains: [
            {
              name: 'pre',
              type: 'filter',
              hook: 'prerouting',
              priority: 0,
              policy: 'accept',
              rules: {
                filterRules: [
                  {
                    name: 'r1',
                    counter: true,
                    action,
                    match: [{ op: 'eq', proto: { value: 'udp' }, port: { position: 'dst', value: '7777' } }],
                  },
                ],
              },
            },
          ],
        },
      },
    });
    server.put(NET, 'firewallconfigurations', fc('user-good', 'drop'));
    // The default install's MSS clamp (put in beforeAll) is in Liqo's own namespace, not --namespace: watched all the same.
    server.put(NET, 'firewallconfigurations', fc('user-bad', 'tcpmssclamp')); // no value before routing: refused
    await waitFor(
      'the problem in weft show',
      () => (runtime.status().errors ?? []).some((e) => e.topic === 'liqo-firewall' && e.message.includes('user-bad')),
      10_000,
    );
    const shown = formatStatus(runtime.status(), Date.now());
    expect(shown).toContain('error (liqo-firewall');
    expect(shown).toMatch(new RegExp(`${NS}/user-bad chain pre rule r1: \\S+: `));
    await waitFor(
      'the Event',
      () =>
        server
          .listObjects('v1', 'events')
          .some((e) => (e as unknown as { involvedObject: { name: string } }).involvedObject.name === 'user-bad'),
      10_000,
    );
    const ev = server
      .listObjects('v1', 'events')
      .map((e) => e as unknown as { involvedObject: { kind: string; name: string }; reason: string; message: string })
      .filter((e) => e.involvedObject.name === 'user-bad');
    expect(ev.map((e) => [e.involvedObject.kind, e.reason])).toEqual([
      ['FirewallConfiguration', 'InvalidConfiguration'],
    ]);
    expect(ev[0]!.message).toContain(`${NS}/user-bad chain pre rule r1`);
    // Nothing a default Liqo install creates is refused: no error names it, no Event is about it.
    const installed = defaultInstall.map((o) => `${o.metadata.namespace}/${o.metadata.name}`);
    expect(installed).toContain('liqo/gw-mss-clamping');
    expect(
      (runtime.status().errors ?? [])
        .flatMap((e) => e.message.split('; '))
        .filter((m) => installed.some((k) => m.includes(` ${k} `))),
    ).toEqual([]);
    expect(
      server
        .listObjects('v1', 'events')
        .map((e) => e as unknown as { involvedObject: { namespace?: string; name: string }; message: string })
        .filter((e) => installed.includes(`${e.involvedObject.namespace}/${e.involvedObject.name}`))
        .map((e) => e.message),
    ).toEqual([]);
    // Its counter (rule with `counter`) is in weft show and the metrics.
    expect(runtime.status().rules?.counters).toContainEqual({
      object: `${NS}/user-good`,
      table: 'user-good',
      chain: 'pre',
      rule: 'r1',
      packets: 0,
      bytes: 0,
    });
    expect(shown).toContain(`counter ${NS}/user-good user-good/pre/r1: 0 packets`);
    expect(await createMetricsRegistry(runtime.statsSource()).metrics()).toContain(
      `weft_rule_packets_total{object="${NS}/user-good",table="user-good",chain="pre",rule="r1"} 0`,
    );
    // The good one is in force (and the bad one, never accepted, is not).
    const tables = (): string[] =>
      [
        ...(mode as unknown as { liqoRules: { attachment: { tables(): Map<string, unknown> } } }).liqoRules.attachment
          .tables()
          .keys(),
      ].sort();
    // Each label set has its own informer: the one in Liqo's namespace may land in a later (debounced) update.
    await waitFor('both good objects in force', () => tables().length === 2, 10_000);
    expect(tables()).toEqual([`${NS}/user-good`, 'liqo/gw-mss-clamping']);
  }, 60_000);
});

describe('weft k8s --liqo-firewall, node role', () => {
  test("selects as Liqo's fabric does for its node and names the node-side Geneve interface from the InternalFabric", () => {
    // 1340: the node agent's TUN MTU (Liqo's default fabric MTU), the route MTU of `rt mtu`.
    const o = nodeRulesOptions('worker-1', liqoResources(), 1340);
    expect(o.selectors.firewall).toEqual([
      'networking.liqo.io/firewall-category=fabric,networking.liqo.io/firewall-subcategory=all-nodes',
      'networking.liqo.io/firewall-category=fabric,networking.liqo.io/firewall-subcategory=ip-mapping',
      'networking.liqo.io/firewall-category=fabric,networking.liqo.io/firewall-subcategory=single-node,networking.liqo.io/firewall-unique=worker-1',
    ]);
    expect(o.selectors.routes).toEqual(['networking.liqo.io/route-category=fabric']);
    expect(o.devices).toEqual({ node: 'liqo.cluster-b', pathMtu: 1340 });
    expect(nodeRulesOptions('worker-1', undefined, 1340).devices).toEqual({ pathMtu: 1340 });
  });

  test('the gateways carry what the fabric RouteConfigurations route to them, not InternalFabric.spec.remoteCIDRs', () => {
    const res = liqoPeeringSide({
      local: 'cluster-a',
      remote: 'cluster-b',
      side: 'server',
      privateKey: KEYS.aPriv,
      publicKey: KEYS.aPub,
      remotePublicKey: KEYS.bPub,
      endpoint: { address: '192.168.77.1', port: 51840 },
      gatewayPod: { ip: '10.244.0.10', node: 'worker-1' },
      nodes: [{ name: 'worker-1', pods: [] }],
      liqoMode: { mss: 1200 },
    });
    // A CIDR only the InternalFabric names: Liqo's fabric would not route it (no RouteConfiguration does).
    res.internalFabrics[0]!.spec!.remoteCIDRs = [...res.internalFabrics[0]!.spec!.remoteCIDRs!, '10.60.0.0/16'];
    const cfg = translate(res, { role: 'node', clusterId: 'cluster-a', nodeName: 'worker-1', geneveMode: 'l2' })
      .config as NodeConfig;
    expect(cfg.node.gateways.map((g) => g.remoteCIDRs)).toEqual([['10.71.0.0/16', '10.72.0.0/16', '10.60.0.0/16']]);
    const devs = fabricNodeDevices(res);
    const nodeGw = res.routeConfigurations.filter((o) => o.metadata?.name === 'cluster-b-node-gw');
    const { specs, errors } = parseRouteObjects(nodeGw, new Map());
    expect(errors).toEqual([]);
    const shaped = liqoNodeConfig(cfg, [...specs.values()], devs);
    expect(shaped.node.gateways.map((g) => [g.name, g.remoteCIDRs])).toEqual([
      ['cluster-b', ['10.71.0.0/16', '10.72.0.0/16']],
    ]);
    // Everything else of the gateway is kept; the input is not changed.
    expect({ ...shaped.node.gateways[0]!, remoteCIDRs: [] }).toEqual({ ...cfg.node.gateways[0]!, remoteCIDRs: [] });
    expect(cfg.node.gateways[0]!.remoteCIDRs).toContain('10.60.0.0/16');
    // No RouteConfiguration (yet, or deleted): the gateway carries nothing.
    expect(liqoNodeConfig(cfg, [], devs).node.gateways[0]!.remoteCIDRs).toEqual([]);
    // Routes via another gateway's address or out of another interface are not this gateway's; on-link out of its interface is.
    const other = {
      ...nodeGw[0]!,
      metadata: { ...nodeGw[0]!.metadata, name: 'other' },
      spec: {
        table: {
          name: 'other',
          rules: [
            { dst: '10.50.0.0/16', routes: [{ dst: '10.50.0.0/16', gw: '10.80.9.9' }] },
            { dst: '10.51.0.0/16', routes: [{ dst: '10.51.0.0/16', dev: 'liqo.elsewhere', scope: 'link' }] },
            { dst: '10.52.0.0/16', routes: [{ dst: '10.52.0.0/16', dev: devs.get('cluster-b')!, scope: 'link' }] },
          ],
        },
      },
    };
    const more = parseRouteObjects([other], new Map());
    expect(more.errors).toEqual([]);
    expect(liqoNodeConfig(cfg, [...more.specs.values()], devs).node.gateways[0]!.remoteCIDRs).toEqual(['10.52.0.0/16']);
  });
});
