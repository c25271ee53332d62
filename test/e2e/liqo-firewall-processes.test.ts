/**
 * Issue 11 end to end with real processes (root): two clusters with the SAME pod CIDR
 * (10.0.0.0/16) and external CIDR (10.70.0.0/16) — the demo's topology (src/demo: gateways
 * joined by a veth WAN, two nodes per cluster bridged to their gateway, two pods per node) —
 * where every Weft data plane is a `weft k8s --liqo-firewall` process: per cluster the gateway
 * (a: GatewayServer side, b: GatewayClient side) started with the argv/env of deploy/liqo's
 * rendered WgGateway template under its ServiceAccount, and a node agent per node with the
 * fabric DaemonSet's, under weft-fabric. Each cluster's API server (test/k8s-fake, RBAC
 * enforced, reached through a relay at 127.0.0.1:6443 in each namespace) holds only what Liqo's
 * controllers and Helm chart create for the peering (test/k8s-fake/liqo-peering.ts with every
 * FirewallConfiguration and RouteConfiguration from test/rules/liqo-peering-objects.ts), so
 * every translation and forwarding decision comes from those objects; Weft's own NAT stays
 * unused (`weft show --json`: no conntrack entry, nothing translated, no SYN clamped).
 *
 * Shown: pod ⇄ pod both ways (ping; HTTP with the source each side sees); node A1's host
 * network → pod B3, the reply back at the node (masquerade bypass to the unknown-source IP, ct
 * mark → fwmark route at the gateway); an IP-mapped non-pod address (192.168.61.10 on a's
 * worker-1, exposed as 10.70.0.5, reached from B4 as 10.72.0.5); a user FirewallConfiguration
 * created LIVE once the tunnel is up drops TCP 8081 (its counter counts) while 8080 passes, and
 * its deletion lets 8081 through again; deleting the gateway's or the nodes' RouteConfiguration
 * live cuts pod → pod and restoring it heals (no route of Weft's own); after SIGKILL of gateway
 * a's leader process a standby replica takes the Lease and pod ⇄ pod resumes; SYNs clamped to the Helm MSS (1200, not the tunnel's
 * 1300); tshark on every hop (pods, node underlays, WAN): no bad checksum.
 * Namespaces ex-a-… / ex-b-… (demo plan prefix `ex`), removed by name; processes by PID.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { httpCheck, ping } from '../../src/demo/checks.js';
import { inNs, runCommand } from '../../src/demo/host.js';
import {
  buildPlan,
  findPod,
  otherCluster,
  planNamespaces,
  remotePodAddress,
  type DemoCluster,
} from '../../src/demo/plan.js';
import { buildTopology, destroyTopology } from '../../src/demo/topology.js';
import type { FakeApiServer } from '../k8s-fake/server.js';
import {
  LIQO_NAMESPACE,
  liqoFirewallConfigurations,
  liqoPeeringSide,
  rulesSide,
  tenantNamespace,
  type PeeringSide,
} from '../k8s-fake/liqo-peering.js';
import { userDropPort } from '../rules/liqo-peering-objects.js';
import { ensureBuilt, runWeft, WEFT_BIN } from '../cli/helpers.js';
import { needs } from '../util/requirements.js';
import { Topology, waitFor, type Spawned } from '../util/netns.js';
import {
  NET,
  forbiddenRequests,
  gatewayObject,
  weftPid,
  gatewayPodCommand,
  hostRelay,
  nodeAgentCommand,
  relayIn,
  saKubeconfig,
  startLiqoApiServer,
} from './liqo-processes.js';
import { expectCleanCaptures, liqoCapturePoints } from './fabric-captures.js';
import { txChecksumOff } from './tx-checksum.js';

const PYTHON = '/usr/bin/python3';
const plan = buildPlan('ex');
const topo = new Topology('ex');
const reason = needs({
  root: true,
  commands: ['ip', 'ping', 'timeout', 'tshark', 'tcpdump'],
  nativeAddon: true,
  other: [existsSync(PYTHON) ? null : `${PYTHON} not installed: apt-get install python3`],
});
/** networking.gateway.mssclamp.value; not Liqo's default (0: the route's MTU): a fixed value below the tunnel's shows the clamp. */
const MSS = 1200;
const DROP_PORT = 8081;
const MAPPED = { name: 'db', real: '192.168.61.10', remapped: '10.70.0.5' };
const LIFETIME_S = 200;

interface Cluster {
  c: DemoCluster;
  side: PeeringSide;
  server: FakeApiServer;
  tenant: string;
  /** Process name → its run dir (weft show). */
  runDirs: Map<string, string>;
  /** runDirs key of the gateway replica holding the Lease. */
  active: string;
}
const clusters: Cluster[] = [];
const relays: Server[] = [];
const procs = new Map<string, Spawned>();
interface Capture {
  name: string;
  file: string;
  proc: Spawned;
}
const captures: Capture[] = [];
let dir = '';

const diag = (): string => [...procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-2000)}`).join('\n');

async function show(runDir: string, instance: string): Promise<WeftStatus> {
  const r = await runWeft(['show', instance, '--json', '--run-dir', runDir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`weft show ${instance} (${runDir}): ${r.code} ${r.stderr}`);
  return JSON.parse(r.stdout) as WeftStatus;
}

const gatewayShow = (k: Cluster): Promise<WeftStatus> => show(k.runDirs.get(k.active)!, 'k8s-gateway');

function spawnWeft(k: Cluster, name: string, netns: string, args: string[], env: Record<string, string>): void {
  const runDir = join(dir, `run-${k.c.key}-${name}`);
  k.runDirs.set(name, runDir);
  procs.set(
    `${k.c.key}-${name}`,
    topo.spawnIn(netns, `weft-${k.c.key}-${name}`, [process.execPath, WEFT_BIN, ...args, `--run-dir=${runDir}`], {
      lifetimeS: LIFETIME_S,
      env,
    }),
  );
}

/**
 * Gateway replica N of the template's Deployment as a process in the gateway namespace (every
 * replica shares the pod network namespace: one pod IP, as the InternalFabric sees one gateway).
 * Only the first keeps --metrics-listen (one port per namespace).
 */
function startGateway(k: Cluster, replica: number): string {
  const { c, server, tenant } = k;
  const o = otherCluster(plan, c);
  const mode = k.side.side;
  const pod = `${o.id}-${replica}`;
  const cmd = gatewayPodCommand(mode, gatewayObject(server, mode, tenant, o.id), pod, c.nodes[0]!.name);
  // The gateway pod (its labels and IP are what the node agents' source detectors look for).
  server.put('v1', 'pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod, namespace: tenant, labels: cmd.labels },
    spec: {
      nodeName: c.nodes[0]!.name,
      serviceAccountName: cmd.serviceAccount,
      containers: [{ name: 'gateway', image: 'weft' }],
    },
    status: { phase: 'Running', podIP: c.gatewayUnderlay, hostIP: c.nodes[0]!.underlay },
  });
  const kc = saKubeconfig(server, join(dir, `${c.key}-gateway.kubeconfig`), tenant, cmd.serviceAccount);
  const argv = cmd.args
    .filter((a) => replica === 1 || !a.startsWith('--metrics-listen='))
    .map((a) => (a.startsWith('--wireguard-key-dir=') ? `--wireguard-key-dir=${join(dir, `keys-${c.key}`)}` : a));
  const name = replica === 1 ? 'gateway' : `gateway-${replica}`;
  spawnWeft(k, name, c.gatewayNs, [...argv, `--kubeconfig=${kc}`], cmd.env);
  return pod;
}

/** One cluster: its API server with Liqo's objects, relays, the node agents and the gateway as processes. */
async function startCluster(c: DemoCluster, keys: Record<'a' | 'b', { priv: string; pub: string }>): Promise<Cluster> {
  const o = otherCluster(plan, c);
  const mode = c.key === 'a' ? 'server' : 'client';
  const side: PeeringSide = {
    local: c.id,
    remote: o.id,
    side: mode,
    privateKey: keys[c.key].priv,
    publicKey: keys[c.key].pub,
    remotePublicKey: keys[o.key].pub,
    endpoint: { address: plan.a.wanAddress, port: plan.wireguardPort },
    gatewayPod: { ip: c.gatewayUnderlay, node: c.nodes[0]!.name },
    nodes: c.nodes.map((n) => ({ name: n.name, pods: n.pods.map((p) => ({ name: p.name.toLowerCase(), ip: p.ip })) })),
    mtu: plan.mtu,
    liqoMode: { mss: MSS, ...(c.key === 'a' ? { ipMappings: [{ ...MAPPED, node: c.nodes[0]!.name }] } : {}) },
  };
  const tenant = tenantNamespace(o.id);
  const server = await startLiqoApiServer({
    clusterId: c.id,
    res: liqoPeeringSide(side),
    extra: [{ plural: 'firewallconfigurations', objects: liqoFirewallConfigurations(side) }],
    gateway: { namespace: tenant, name: o.id },
  });
  const k: Cluster = { c, side, server, tenant, runDirs: new Map(), active: 'gateway' };
  clusters.push(k);
  const sock = join(dir, `${c.key}-api.sock`);
  relays.push(await hostRelay(server, sock));
  for (const ns of [c.gatewayNs, ...c.nodes.map((n) => n.ns)]) relayIn(topo, ns, sock, LIFETIME_S);
  for (const n of c.nodes) {
    const cmd = nodeAgentCommand(c.id, n.name, `weft-fabric-${n.label}`, n.underlay);
    const kc = saKubeconfig(server, join(dir, `${c.key}-${n.name}.kubeconfig`), LIQO_NAMESPACE, cmd.serviceAccount);
    spawnWeft(k, n.name, n.ns, [...cmd.args, `--kubeconfig=${kc}`], cmd.env);
  }
  const keyDir = join(dir, `keys-${c.key}`);
  mkdirSync(keyDir);
  writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[c.key].priv, 'base64'));
  startGateway(k, 1);
  return k;
}

const connection = (k: Cluster): string | undefined =>
  (
    k.server.getObject(NET, 'connections', k.tenant, `gw-${otherCluster(plan, k.c).id}`)?.['status'] as
      { value?: string } | undefined
  )?.value;

describe.skipIf(reason !== null)(
  "`weft k8s --liqo-firewall` processes, two clusters with conflicting pod CIDRs, driven only by Liqo's objects",
  () => {
    const A1 = findPod(plan, 'A1');
    const A2 = findPod(plan, 'A2');
    const B3 = findPod(plan, 'B3');
    const B4 = findPod(plan, 'B4');
    const b3AtA = remotePodAddress(plan, plan.a, B3);
    const a1AtB = remotePodAddress(plan, plan.b, A1);
    const a2AtB = remotePodAddress(plan, plan.b, A2);

    beforeAll(async () => {
      ensureBuilt(['src/cli/weft.js', 'src/daemon/k8s-mode.js', 'src/control/k8s/firewall-watch.js']);
      await destroyTopology(plan);
      dir = mkdtempSync(join(tmpdir(), 'weft-e2e-exfw-'));
      await buildTopology(plan);
      for (const ns of planNamespaces(plan)) await txChecksumOff(ns);
      await runCommand(['ip', '-n', plan.a.nodes[0]!.ns, 'addr', 'add', `${MAPPED.real}/32`, 'dev', 'lo']);

      for (const [name, ns, ifName] of liqoCapturePoints(plan)) {
        const file = join(dir, `${name}.pcap`);
        captures.push({
          name,
          file,
          proc: topo.spawnIn(
            ns,
            `tcpdump-${name}`,
            ['tcpdump', '-n', '-U', '-s', '0', '-Z', 'root', '-i', ifName, '-w', file],
            { lifetimeS: LIFETIME_S },
          ),
        });
      }
      for (const c of captures)
        await waitFor(`tcpdump on ${c.name}`, () => c.proc.output().includes('listening on'), 10_000, 50);

      const backend = getCryptoBackend('auto');
      const keys = Object.fromEntries(
        (['a', 'b'] as const).map((l) => {
          const priv = generatePrivateKeyBase64(backend);
          return [l, { priv, pub: publicKeyBase64(backend, priv) }];
        }),
      ) as Record<'a' | 'b', { priv: string; pub: string }>;
      const t0 = Date.now();
      for (const c of [plan.a, plan.b]) await startCluster(c, keys);
      try {
        await waitFor(
          'Connected on both sides',
          () => clusters.every((k) => connection(k) === 'Connected'),
          60_000,
          200,
        );
        // The first packet through the nodes also waits for the gateways' node tunnels (nodeIP written by the agents).
        await waitFor(
          'first reply A1 → B3',
          async () => (await ping(A1.ns, b3AtA, 1, 0.2)).received === 1,
          30_000,
          200,
        );
      } catch (e) {
        console.log(diag());
        throw e;
      }
      console.log(`[ex] 6 weft k8s processes: first A1 → B3 reply ${Date.now() - t0} ms after start`);
    }, 120_000);

    afterAll(async () => {
      await topo.cleanup();
      for (const r of relays) r.close();
      for (const k of clusters) await k.server.stop();
      await destroyTopology(plan);
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it('every process runs in Liqo mode with every object accepted; no request refused (RBAC)', async () => {
      for (const k of clusters) {
        expect(forbiddenRequests(k.server), k.c.id).toEqual([]);
        for (const [name, runDir] of k.runDirs) {
          const st = await show(runDir, name.startsWith('gateway') ? 'k8s-gateway' : 'k8s-node');
          expect(st.weft.active, `${k.c.key} ${name}`).toBe(true);
          expect(st.errors ?? [], `${k.c.key} ${name}`).toEqual([]);
          expect(st.rules, `${k.c.key} ${name}: rules in force`).toBeDefined();
        }
      }
    }, 60_000);

    it('pod ⇄ pod both ways: ping A1 → B3 and B4 → A2; HTTP B3 ← A1 sees A1 as B remaps it', async () => {
      expect((await ping(A1.ns, b3AtA, 5, 0.1)).received).toBe(5);
      expect((await ping(B4.ns, a2AtB, 5, 0.1)).received).toBe(5);
      const h = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, 8080);
      expect(h.error).toBeUndefined();
      expect(h.seenSource).toBe(a1AtB);
      const back = await httpCheck(A2.ns, A2.ip, B4.ns, a2AtB, 8080);
      expect(back.seenSource).toBe(remotePodAddress(plan, plan.a, B4));
    }, 60_000);

    it("host network: node A1 reaches B3, B3 sees A's unknown-source IP as B remaps it, the reply reaches the node", async () => {
      const h = await httpCheck(B3.ns, B3.ip, plan.a.nodes[0]!.ns, b3AtA, 8082);
      expect(h.status).toBe(200);
      expect(h.seenSource).toBe('10.72.0.0'); // 10.70.0.0 (GetUnknownSourceIP) in B's 10.72.0.0/16 view
    }, 60_000);

    it('an IP-mapped non-pod address: B4 reaches 192.168.61.10 on node A1 as 10.72.0.5', async () => {
      const h = await httpCheck(plan.a.nodes[0]!.ns, MAPPED.real, B4.ns, '10.72.0.5', 8083);
      expect(h.status).toBe(200);
      expect(h.seenSource).toBe(remotePodAddress(plan, plan.a, B4));
    }, 60_000);

    it(`a user FirewallConfiguration created live drops TCP ${DROP_PORT} (counted) while ${DROP_PORT - 1} passes; deleting it lets ${DROP_PORT} through`, async () => {
      const a = clusters[0]!;
      const obj = userDropPort(rulesSide(a.side), DROP_PORT);
      const key = `${a.tenant}/user-drop-port`;
      const counter = async (): Promise<number | undefined> =>
        (await gatewayShow(a)).rules?.counters.find((x) => x.object === key && x.rule === `drop-tcp-${DROP_PORT}`)
          ?.packets;
      // Before: the port passes.
      expect((await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT, 5000)).status).toBe(200);
      a.server.put(NET, 'firewallconfigurations', obj);
      await waitFor(
        'the user FirewallConfiguration in force at gateway a',
        async () => (await counter()) !== undefined,
        15_000,
        200,
      );
      const dropped = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT, 2000);
      expect(dropped.ok).toBe(false);
      expect((await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT - 1, 5000)).status).toBe(200);
      expect(await counter()).toBeGreaterThan(0);
      expect((await gatewayShow(a)).errors ?? []).toEqual([]);
      a.server.remove(NET, 'firewallconfigurations', a.tenant, 'user-drop-port');
      await waitFor(
        'the user FirewallConfiguration gone from gateway a',
        async () => (await counter()) === undefined,
        15_000,
        200,
      );
      expect((await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT, 5000)).status).toBe(200);
    }, 90_000);

    it("forwarding follows the RouteConfigurations live: deleting the gateway's `-gw-ext` or the nodes' `-node-gw` cuts A1 → B3, restoring it heals", async () => {
      const a = clusters[0]!;
      const nodeNs = plan.a.nodes[0]!.ns;
      const answers = async (): Promise<boolean> => (await ping(A1.ns, b3AtA, 1, 0.2)).received === 1;
      const nodeRoutes = async (): Promise<string> => (await runCommand(['ip', '-n', nodeNs, 'route', 'show'])).stdout;
      expect(await answers()).toBe(true);
      for (const [name, ns] of [
        [`${otherCluster(plan, plan.a).id}-gw-ext`, a.tenant],
        [`${otherCluster(plan, plan.a).id}-node-gw`, a.tenant],
      ] as const) {
        const stored = a.server.getObject(NET, 'routeconfigurations', ns, name)!;
        const again = {
          apiVersion: NET,
          kind: 'RouteConfiguration',
          metadata: { name, namespace: ns, labels: stored.metadata.labels },
          spec: stored['spec'],
        };
        a.server.remove(NET, 'routeconfigurations', ns, name);
        await waitFor(`A1 → B3 cut without ${name}`, async () => !(await answers()), 15_000, 200);
        // Without the fabric's route the node kernel has none towards the remapped peer (Weft adds none of its own).
        if (name.endsWith('-node-gw')) expect(await nodeRoutes()).not.toContain('10.71.0.0/16');
        a.server.put(NET, 'routeconfigurations', again);
        await waitFor(`A1 → B3 back with ${name}`, answers, 15_000, 200);
        if (name.endsWith('-node-gw')) expect(await nodeRoutes()).toContain('10.71.0.0/16');
      }
    }, 90_000);

    it("the node's kernel state from Liqo's objects is kept: its policy rules, route tables and nftables tables removed by hand are back in < 1 s with one log line", async () => {
      const n = plan.a.nodes[0]!;
      const ns = n.ns;
      const proc = procs.get(`a-${n.name}`)!;
      const restoreLines = (): number =>
        proc
          .output()
          .split('\n')
          .filter((l) => l.includes('kernel state: restored what was missing')).length;
      // Rules without their preference (a restored rule without `pref` may get another one).
      const rules = async (): Promise<string[]> =>
        (await runCommand(['ip', '-n', ns, 'rule', 'show'])).stdout
          .split('\n')
          .filter((l) => /lookup \d+/.test(l))
          .map((l) => l.replace(/^\d+:\s*/, ''))
          .sort();
      const prefs = async (): Promise<string[]> =>
        (await runCommand(['ip', '-n', ns, 'rule', 'show'])).stdout
          .split('\n')
          .filter((l) => /lookup \d+/.test(l))
          .map((l) => /^(\d+):/.exec(l)![1]!);
      // The reference is the whole state of the node's RouteConfigurations: the previous test
      // re-created one, and its routes can be in before its policy rules (a loaded machine showed
      // none yet). Whole: every table the node agent's specs give rules has some, on two reads.
      const fabricRoutes = async (): Promise<NonNullable<WeftStatus['fabric']>['routes']> =>
        (await show(clusters[0]!.runDirs.get(n.name)!, 'k8s-node')).fabric!.routes;
      let wantRules: string[] = [];
      await waitFor(
        "the node's policy rules for every table of its RouteConfigurations, unchanged over 0.5 s",
        async () => {
          const first = await rules();
          await new Promise((r) => setTimeout(r, 500));
          wantRules = await rules();
          const tablesWithRules = (await fabricRoutes()).filter((r) => r.rules > 0).map((r) => String(r.tableId));
          return (
            wantRules.length > 0 &&
            JSON.stringify(first) === JSON.stringify(wantRules) &&
            tablesWithRules.every((id) => wantRules.some((l) => l.includes(`lookup ${id}`)))
          );
        },
        20_000,
        100,
      );
      const ids = [...new Set(wantRules.map((l) => /lookup (\d+)/.exec(l)![1]!))];
      const routes = async (): Promise<string> =>
        (await Promise.all(ids.map((id) => runCommand(['ip', '-n', ns, 'route', 'show', 'table', id]))))
          .map((r) => r.stdout.trim())
          .join('\n');
      const wantRoutes = await routes();
      expect(wantRoutes).not.toBe('');
      const fabric = (await show(clusters[0]!.runDirs.get(n.name)!, 'k8s-node')).fabric!;
      const kernelTables = fabric.chains.flatMap((c) => (c.kernelTable === undefined ? [] : [c.kernelTable]));
      const tables = async (): Promise<string> =>
        (await runCommand(inNs(ns, ['nft', 'list', 'tables']))).stdout
          .split('\n')
          .filter((l) => kernelTables.some((t) => l === `table ip ${t}`))
          .sort()
          .join('\n');
      const wantTables = await tables();
      const before = restoreLines();

      // Everything removed by one shell, in a few milliseconds: usually one resync tick sees it all.
      const script = [
        ...(await prefs()).map((p) => `ip rule del pref ${p}`),
        ...ids.map((id) => `ip route flush table ${id}`),
        ...[...new Set(kernelTables)].map((t) => `nft delete table ip ${t}`),
      ].join(' && ');
      // Every delete succeeded (runCommand throws otherwise): all of it was gone at that moment.
      // Reading the rules afterwards would race the node agent, which may have restored them.
      await runCommand(inNs(ns, ['sh', '-c', script]));
      const t0 = Date.now();
      await waitFor(
        'rules, routes and tables back',
        async () =>
          JSON.stringify(await rules()) === JSON.stringify(wantRules) &&
          (await routes()) === wantRoutes &&
          (await tables()) === wantTables,
        5000,
        10,
      );
      const ms = Date.now() - t0;
      console.log(
        `[ex] node kernel state (${wantRules.length} rules, tables ${ids.join(' ')}, nft ${kernelTables.length}) back in ${ms} ms`,
      );
      expect(ms).toBeLessThan(1000);
      expect((await ping(A1.ns, b3AtA, 3, 0.2)).received).toBe(3);
      const logged = restoreLines() - before;
      // One line per resync that restored something: 1, or 2 when the removal straddled a tick.
      expect(logged, proc.output().slice(-3000)).toBeGreaterThanOrEqual(1);
      expect(logged).toBeLessThanOrEqual(2);
      await new Promise((r) => setTimeout(r, 1500)); // later ticks find nothing more to restore, log nothing
      expect(restoreLines() - before).toBe(logged);
    }, 60_000);

    it("SIGKILL of gateway a's leader process: the standby takes the Lease and runs Liqo mode from the objects; pod ⇄ pod resumes", async () => {
      const a = clusters[0]!;
      const remote = otherCluster(plan, plan.a).id;
      const lease = (): string | undefined =>
        (
          a.server.getObject(
            'coordination.k8s.io/v1',
            'leases',
            a.tenant,
            `${remote}.${a.tenant}.server.connections.liqo.io`,
          )?.['spec'] as { holderIdentity?: string } | undefined
        )?.holderIdentity;
      expect(lease()).toBe(`${remote}-1`);
      const standby = startGateway(a, 2);
      await waitFor(
        'the standby is up, not active',
        async () => {
          try {
            return (await show(a.runDirs.get('gateway-2')!, 'k8s-gateway')).weft.active === false;
          } catch {
            return false;
          }
        },
        20_000,
        200,
      );
      const leader = procs.get('a-gateway')!;
      const t0 = Date.now();
      process.kill(weftPid(leader), 'SIGKILL');
      await waitFor('standby holds the Lease', () => lease() === standby, 20_000, 100);
      const tLease = Date.now() - t0;
      a.active = 'gateway-2';
      await waitFor(
        'pod ⇄ pod answers again',
        async () => (await ping(B4.ns, a2AtB, 1, 0.2)).received === 1,
        30_000,
        200,
      );
      console.log(
        `[ex] leader SIGKILLed: Lease taken after ${tLease} ms; B4 → A2 answered again after ${Date.now() - t0} ms`,
      );
      expect((await ping(A1.ns, b3AtA, 5, 0.1)).received).toBeGreaterThanOrEqual(4);
      const h = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, 8084);
      expect(h.seenSource).toBe(a1AtB);
      const st = await gatewayShow(a);
      expect(st.weft.active).toBe(true);
      expect(st.errors ?? []).toEqual([]);
      expect(st.rules?.counters.length).toBeGreaterThan(0);
      await waitFor(
        'both Connections Connected again',
        () => clusters.every((k) => connection(k) === 'Connected'),
        30_000,
        200,
      );
    }, 90_000);

    it(`Weft derived nothing itself; tshark on every hop: no bad checksum; SYNs towards the tunnel clamped to ${MSS}`, async () => {
      // Weft's own remap/masquerade NAT (conntrack entries) never ran: every translation came from the
      // objects' chains. `mss clamped` counts every clamp, the Helm object's included: each gateway
      // lowered the SYN or SYN-ACK it sent into the tunnel (checked on the pods below).
      for (const k of clusters) {
        const st = await gatewayShow(k);
        const { mssClamped, ...translated } = st.nat!;
        expect(translated, `${k.c.id}: built-in NAT`).toEqual({ entries: 0, forwarded: 0, replies: 0 });
        expect(mssClamped, `${k.c.id}: mss clamped`).toBeGreaterThan(0);
        expect(st.forwarding!.out.toPeers, `${k.c.id}: forwarded to the peer`).toBeGreaterThan(0);
      }
      for (const c of captures) await topo.stop(c.proc);
      await expectCleanCaptures(captures, { wireguardPort: plan.wireguardPort, mss: MSS, a1AtB, b3AtA });
    }, 120_000);
  },
);
