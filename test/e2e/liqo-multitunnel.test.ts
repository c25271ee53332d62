// Several WireGuard tunnels per peering (Liqo's spec.endpoint.ports, one tunnel per port, the same
// keys), every Weft component a `weft k8s` process started from deploy/liqo as Kubernetes would
// start it (root); the same topology as liqo-pods.test.ts (namespaces lqmXg / lqmXn / lqmXp), with
// ports [51840, 51841, 51842] on both sides. Proves: three tunnels up on each gateway (weft show
// --json); iperf3 -P 8 pod a → pod b spreads over all three (each tunnel's byte counter grows by
// megabytes); tunnel 1's UDP dropped by nftables in gateway a's namespace: both gateways take it
// out of the spread within the connection check's failure time (5 × 2 s) and the transfer goes on
// over tunnels 0 and 2; unblocked, it answers again and carries its share again.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { asStored, helmMssClamp } from '../k8s-fake/helm-mssclamp.js';
import type { FakeApiServer } from '../k8s-fake/server.js';
import type { GatewayObject } from '../k8s-fake/liqo-render.js';
import {
  LIQO_NAMESPACE,
  liqoFirewallConfigurations,
  liqoPeeringSide,
  tenantNamespace,
  type PeeringSide,
} from '../k8s-fake/liqo-peering.js';
import { e2eUnavailableReason, ping, run, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, runWeft, WEFT_BIN } from '../cli/helpers.js';
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

const skip = e2eUnavailableReason(['ip', 'ping', 'timeout', 'iperf3', 'ss', 'nft']);
const topo = new Topology('lqm');
const WAN = { a: '192.168.77.1', b: '192.168.77.2' } as const;
const GW_POD_IP = '10.244.0.10';
const NODE_HOST_IP = '10.244.0.1';
const POD_IP = '10.0.1.5';
/** How the other cluster addresses POD_IP (Configuration.status.remote.cidr.pod 10.71.0.0/16). */
const POD_IP_REMOTE = '10.71.1.5';
const PORTS = [51840, 51841, 51842];

type Letter = 'a' | 'b';
interface Cluster {
  letter: Letter;
  id: string;
  remote: string;
  server: FakeApiServer;
  /** Tenant namespace and gateway (GatewayServer/Client) name. */
  ns: string;
  gw: GatewayObject;
  sock: string;
  keyDir: string;
}
const clusters = new Map<Letter, Cluster>();
const relays: Server[] = [];
const procs = new Map<string, Spawned>();
let dir = '';

async function startCluster(letter: Letter, keys: Record<Letter, { priv: string; pub: string }>): Promise<Cluster> {
  const other: Letter = letter === 'a' ? 'b' : 'a';
  const id = `cluster-${letter}`;
  const remote = `cluster-${other}`;
  const side: PeeringSide = {
    local: id,
    remote,
    side: letter === 'a' ? 'server' : 'client',
    privateKey: keys[letter].priv,
    publicKey: keys[letter].pub,
    remotePublicKey: keys[other].pub,
    // Liqo's multi-port form on both sides: three tunnels, 51840 (Liqo's default) and the next two.
    endpoint: { address: WAN.a, port: 51840 },
    ports: PORTS,
    gatewayPod: { ip: GW_POD_IP, node: 'worker-1' },
    nodes: [{ name: 'worker-1', pods: [{ name: 'app', ip: POD_IP }] }],
    // deploy/liqo runs Liqo mode: the Firewall- and RouteConfigurations Liqo creates are the contract.
    // (Its MSS clamp is replaced below by the Helm chart's default object.)
    liqoMode: { mss: 1300 },
  };
  const res: LiqoResources = liqoPeeringSide(side);
  const ns = tenantNamespace(remote);
  // deploy/liqo's RBAC: the gateway role (Liqo's controller-manager binds it to the gateway's
  // ServiceAccount, named like the gateway) and the fabric DaemonSet's own objects.
  const server = await startLiqoApiServer({
    clusterId: id,
    res,
    // The MSS clamp as a default Liqo install renders it: value "0", the tunnel route's MTU (rt mtu).
    extra: [
      {
        plural: 'firewallconfigurations',
        objects: liqoFirewallConfigurations(side).map((o) =>
          (o as { metadata?: { name?: string } }).metadata?.name === 'gw-mss-clamping'
            ? asStored(helmMssClamp(LIQO_NAMESPACE))
            : o,
        ),
      },
    ],
    gateway: { namespace: ns, name: remote },
  });
  const gw = gatewayObject(server, letter === 'a' ? 'server' : 'client', ns, remote);
  const sock = join(dir, `${letter}-api.sock`);
  relays.push(await hostRelay(server, sock));
  const keyDir = join(dir, `keys-${letter}`);
  rmSync(keyDir, { recursive: true, force: true });
  mkdirSync(keyDir);
  writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[letter].priv, 'base64'));
  const c: Cluster = { letter, id, remote, server, ns, gw, sock, keyDir };
  clusters.set(letter, c);
  return c;
}

/** A gateway replica: the pod Liqo renders from deploy/liqo's template, as a process in lqXg. */
function startGateway(c: Cluster, replica: string): { pod: string; proc: Spawned } {
  const pod = `${c.remote}-${replica}`;
  const cmd = gatewayPodCommand(c.letter === 'a' ? 'server' : 'client', c.gw, pod, 'worker-1');
  c.server.put('v1', 'pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod, namespace: c.ns, labels: cmd.labels },
    spec: {
      nodeName: 'worker-1',
      serviceAccountName: cmd.serviceAccount,
      containers: [{ name: 'gateway', image: 'weft' }],
    },
    status: { phase: 'Running', podIP: GW_POD_IP, hostIP: NODE_HOST_IP },
  });
  const argv = cmd.args
    .filter((a) => !a.startsWith('--metrics-listen='))
    .map((a) => (a.startsWith('--wireguard-key-dir=') ? `--wireguard-key-dir=${c.keyDir}` : a));
  const kc = saKubeconfig(
    c.server,
    join(dir, `${c.letter}-${c.ns}-${cmd.serviceAccount}.kubeconfig`),
    c.ns,
    cmd.serviceAccount,
  );
  const proc = topo.spawnIn(
    topo.ns(`${c.letter}g`),
    `gw-${pod}`,
    [process.execPath, WEFT_BIN, ...argv, `--kubeconfig=${kc}`, `--run-dir=${join(dir, `run-${pod}`)}`],
    { lifetimeS: 400, env: cmd.env },
  );
  procs.set(pod, proc);
  return { pod, proc };
}

/** The node agent the fabric DaemonSet runs on worker-1, as a process in lqXn (host network). */
function startNodeAgent(c: Cluster): Spawned {
  const cmd = nodeAgentCommand(c.id, 'worker-1', 'weft-fabric-w1', NODE_HOST_IP);
  const kc = saKubeconfig(
    c.server,
    join(dir, `${c.letter}-${LIQO_NAMESPACE}-${cmd.serviceAccount}.kubeconfig`),
    LIQO_NAMESPACE,
    cmd.serviceAccount,
  );
  const proc = topo.spawnIn(
    topo.ns(`${c.letter}n`),
    `node-${c.letter}`,
    [process.execPath, WEFT_BIN, ...cmd.args, `--kubeconfig=${kc}`, `--run-dir=${join(dir, `run-node-${c.letter}`)}`],
    { lifetimeS: 400, env: cmd.env },
  );
  procs.set(`node-${c.letter}`, proc);
  return proc;
}

/**
 * A bounded iperf3 TCP transfer (2 s, `streams` parallel connections) from the pod in nsClient to
 * the pod in nsServer, dialled at its remapped address; Gbit/s received.
 */
async function tcpTransfer(nsServer: string, nsClient: string, streams: number, cport?: number): Promise<number> {
  const port = String(5201 + Math.floor(Math.random() * 500));
  const server = topo.spawnIn(nsServer, 'iperf3-server', ['iperf3', '-s', '-1', '-p', port], { lifetimeS: 40 });
  await waitFor(
    'iperf3 server',
    () => topo.exec(nsServer, ['ss', '-Hltn', `sport = :${port}`], { allowFail: true }).trim().length > 0,
    5000,
  );
  const out = topo.exec(
    nsClient,
    [
      'iperf3',
      '-c',
      POD_IP_REMOTE,
      '-p',
      port,
      '-t',
      '2',
      '-P',
      String(streams),
      '-J',
      '--connect-timeout',
      '3000',
      ...(cport === undefined ? [] : ['--cport', String(cport)]),
    ],
    { timeoutMs: 25_000, allowFail: true },
  );
  await topo.stop(server);
  const j = JSON.parse(out) as { end?: { sum_received?: { bits_per_second?: number } }; error?: string };
  if (j.error) throw new Error(`iperf3: ${j.error}`);
  return (j.end?.sum_received?.bits_per_second ?? 0) / 1e9;
}

const status = (c: Cluster) =>
  c.server.getObject(NET, 'connections', c.ns, `gw-${c.remote}`)?.['status'] as
    { value?: string; latency?: { value?: string } } | undefined;
const activeLabel = (c: Cluster, pod: string) =>
  c.server.getObject('v1', 'pods', c.ns, pod)?.metadata.labels?.['networking.liqo.io/active'];
const forbidden = (c: Cluster) => forbiddenRequests(c.server);
const podNs = (l: Letter) => topo.ns(`${l}p`);

/** `weft show --json` of a process by its run dir (the one control socket there). */
async function show(runDir: string): Promise<WeftStatus> {
  const sock = readdirSync(runDir).find((f) => f.endsWith('.sock'));
  if (sock === undefined) throw new Error(`no control socket in ${runDir}`);
  const r = await runWeft(['show', sock.slice(0, -5), '--json', '--run-dir', runDir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`weft show (${runDir}): ${r.code} ${r.stderr}`);
  return JSON.parse(r.stdout) as WeftStatus;
}

const diag = (): string => [...procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-1500)}`).join('\n');

/** Gateway `c`'s per-tunnel status towards its peer (weft show --json). */
async function tunnels(c: Cluster): Promise<NonNullable<WeftStatus['wireguard']>['peers'][number]['tunnels']> {
  const st = await show(join(dir, `run-${c.remote}-1`));
  return st.wireguard?.peers[0]?.tunnels;
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/control/k8s/liqo-gateway.js', 'src/control/k8s/watcher.js']);
  dir = mkdtempSync(join(tmpdir(), 'lqm-tunnels-'));
  for (const l of ['a', 'b'] as const) {
    const g = topo.addNamespace(`${l}g`);
    const n = topo.addNamespace(`${l}n`);
    const p = topo.addNamespace(`${l}p`);
    topo.link(g, `m${l}g-n`, `${GW_POD_IP}/24`, n, `m${l}n-g`, `${NODE_HOST_IP}/24`);
    topo.link(n, `m${l}n-p`, '10.0.1.1/24', p, `m${l}p-n`, `${POD_IP}/24`);
    topo.exec(n, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    topo.exec(p, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
  }
  topo.link(topo.ns('ag'), 'mag-w', `${WAN.a}/24`, topo.ns('bg'), 'mbg-w', `${WAN.b}/24`);
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  for (const r of relays) r.close();
  for (const c of clusters.values()) await c.server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('Liqo-shaped clusters with three WireGuard tunnels per peering (processes)', () => {
  test('three tunnels up; iperf3 -P 8 spreads over all; a blocked tunnel leaves the spread and returns', async () => {
    const backend = getCryptoBackend('auto');
    const keys = Object.fromEntries(
      (['a', 'b'] as const).map((l) => {
        const priv = generatePrivateKeyBase64(backend);
        return [l, { priv, pub: publicKeyBase64(backend, priv) }];
      }),
    ) as Record<Letter, { priv: string; pub: string }>;
    const ca = await startCluster('a', keys);
    const cb = await startCluster('b', keys);
    for (const c of [ca, cb]) {
      relayIn(topo, topo.ns(`${c.letter}g`), c.sock);
      relayIn(topo, topo.ns(`${c.letter}n`), c.sock);
      startNodeAgent(c);
      startGateway(c, '1');
    }
    try {
      await waitFor(
        'Connected on both sides',
        () => status(ca)?.value === 'Connected' && status(cb)?.value === 'Connected',
        40_000,
      );
      // Gateway a listens on every port; each side has three tunnels, each with a session and in the spread.
      const listening = topo.exec(topo.ns('ag'), ['ss', '-Hlun'], { allowFail: true });
      for (const p of PORTS) expect(listening).toMatch(new RegExp(`:${p}\\b`));
      for (const c of [ca, cb])
        await waitFor(
          `${c.id}: three tunnels in the spread, each checked`,
          async () => {
            const t = await tunnels(c);
            return t?.length === 3 && t.every((x) => x.inSpread && x.connection.value === 'Connected');
          },
          30_000,
        );
      const ta = (await tunnels(ca))!;
      expect(ta.map((t) => [t.interface, t.listenPort, t.localTunnelAddress, t.tunnelAddress])).toEqual([
        ['liqo-tunnel', 51840, '169.254.18.1', '169.254.18.2'],
        ['liqo-tunnel1', 51841, '169.254.18.5', '169.254.18.6'],
        ['liqo-tunnel2', 51842, '169.254.18.9', '169.254.18.10'],
      ]);
      const tb = (await tunnels(cb))!;
      expect(tb.map((t) => t.endpoint)).toEqual(PORTS.map((p) => `${WAN.a}:${p}`));

      // iperf3 -P 8 pod a → pod b: every tunnel carries a share of the data (gateway a sends it).
      const txA = async (): Promise<number[]> => ((await tunnels(ca)) ?? []).map((t) => t.txBytes);
      const deltas = async (f: () => Promise<number>): Promise<{ rate: number; bytes: number[] }> => {
        const before = await txA();
        const rate = await f();
        return { rate, bytes: (await txA()).map((x, i) => x - before[i]!) };
      };
      // Eight flows land on three tunnels by their hash: some client port ranges leave a tunnel
      // without a flow (about one run in nine), so a run is repeated with other ports, at most 4 times.
      const spreadRun = async (label: string): Promise<{ rate: number; bytes: number[] }> => {
        let r = { rate: 0, bytes: [0, 0, 0] };
        for (let attempt = 0; attempt < 4; attempt++) {
          const cport = 20_000 + Math.floor(Math.random() * 30_000);
          r = await deltas(() => tcpTransfer(podNs('b'), podNs('a'), 8, cport));
          console.log(
            `[lqm] ${label} -P 8 (client ports ${cport}..${cport + 7}): ${r.rate.toFixed(2)} Gbit/s; bytes sent per tunnel by a ${r.bytes.join(', ')}`,
          );
          if (r.bytes.every((n) => n > 1_000_000)) break;
        }
        return r;
      };
      const spread = await spreadRun('spread');
      expect(spread.rate).toBeGreaterThan(0);
      for (const n of spread.bytes) expect(n).toBeGreaterThan(1_000_000);

      // Tunnel 1's UDP dropped in gateway a's namespace, both directions.
      const block = [
        'add table inet lqmblock',
        'add chain inet lqmblock in { type filter hook input priority -10; policy accept; }',
        'add chain inet lqmblock out { type filter hook output priority -10; policy accept; }',
        'add rule inet lqmblock in udp dport 51841 drop',
        'add rule inet lqmblock out udp sport 51841 drop',
      ].join('\n');
      topo.exec(topo.ns('ag'), ['nft', '-f', '-'], { input: block });
      const tBlock = Date.now();
      await waitFor(
        'tunnel 1 out of the spread on both sides',
        async () => (await tunnels(ca))?.[1]?.inSpread === false && (await tunnels(cb))?.[1]?.inSpread === false,
        20_000,
        250,
      );
      const outAfter = Date.now() - tBlock;
      console.log(`[lqm] tunnel 1 blocked: out of the spread on both sides after ${outAfter} ms`);
      expect(outAfter).toBeLessThan(14_000); // 5 missed checks at 2 s, plus one status round
      const blocked = await deltas(() => tcpTransfer(podNs('b'), podNs('a'), 8));
      console.log(
        `[lqm] blocked: ${blocked.rate.toFixed(2)} Gbit/s; bytes sent per tunnel by a ${blocked.bytes.join(', ')}`,
      );
      expect(blocked.rate).toBeGreaterThan(0);
      // Only its connection check's PINGs and handshake attempts (a few hundred bytes) still go to tunnel 1.
      expect(blocked.bytes[1]).toBeLessThan(20_000);
      expect(blocked.bytes[0]! + blocked.bytes[2]!).toBeGreaterThan(1_000_000);

      // Unblocked: tunnel 1 answers again and carries again.
      topo.exec(topo.ns('ag'), ['nft', 'delete', 'table', 'inet', 'lqmblock']);
      const tOpen = Date.now();
      await waitFor(
        'tunnel 1 back in the spread on both sides',
        async () => (await tunnels(ca))?.[1]?.inSpread === true && (await tunnels(cb))?.[1]?.inSpread === true,
        30_000,
        250,
      );
      console.log(`[lqm] unblocked: tunnel 1 back in the spread after ${Date.now() - tOpen} ms`);
      const back = await spreadRun('unblocked');
      for (const n of back.bytes) expect(n).toBeGreaterThan(1_000_000);
      // The Connection reports tunnel 0's check, as Liqo's does.
      for (const c of [ca, cb]) expect(status(c)?.value).toBe('Connected');
    } catch (e) {
      console.log(diag());
      throw e;
    }
  }, 240_000);
});
