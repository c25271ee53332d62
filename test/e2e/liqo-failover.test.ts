// Gateway failover between `weft k8s` replicas started from deploy/liqo's templates (root): the
// heartbeat takeover after a SIGKILL (server side, client side), the handover on SIGTERM, a
// partition between the two replicas while both reach the API server, both API servers
// unreachable for 30 s (cluster a's stopped: connections refused; cluster b's hung: requests
// never answered), and restarts of a node agent (the fabric DaemonSet's pod) after SIGKILL and
// SIGTERM.
//
// Topology, per cluster X (a: GatewayServer side, b: GatewayClient side), built like a cluster's
// node rather than like one shared pod (so that two replicas can be active at once, as in a
// partition, and the takeover has to move traffic as Kubernetes moves it):
//   app pod lfXp 10.0.1.5 ─veth─ node worker-1 lfXn (host network: bridge 10.244.0.1/24, the
//   fabric DaemonSet's node agent, Geneve 6091)
//     ├─ bridge ─ gateway pod lfXg0 10.244.0.10 (replica 0: `weft k8s` from the template)
//     └─ bridge ─ gateway pod lfXg1 10.244.0.11 (replica 1)
//   node lfan 192.168.77.1 ═ WAN ═ 192.168.77.2 node lfbn.
// What Kubernetes and Liqo's controllers do when the active label moves, the test does here,
// polling the API server every 10 ms:
// - Liqo's InternalFabric controller sets spec.gatewayIP to the active pod's IP (the node agents
//   follow it with a live Geneve change);
// - kube-proxy points the gateway Service at the active pod: on the server side the endpoint
//   192.168.77.1:51840 (spec.endpoint, a NodePort-like address on the node) is translated
//   statelessly (nft `notrack`; `ip daddr set` before routing, `ip saddr set` for the replies
//   after it) to the labelled pod, so a change takes effect with the next packet — kube-proxy too flushes the UDP conntrack entries of a changed endpoint, but
//   only after its own sync (tens of ms to seconds on a real cluster, which this test leaves out);
// - the client side's node masquerades its pods' traffic to the WAN (a pod's egress).
// Each replica reaches the API server through a relay at 127.0.0.1:6443 in its own namespace, so
// blocking the heartbeat port between the two gateway namespaces leaves both on the API.
// Traffic: pod b pings pod a (10.71.1.5, Liqo's remapping) every 20 ms; a TCP stream (a Node
// client in pod b writing 1 KiB every 10 ms to a server in pod a) runs through the SIGKILL runs.
// Gaps are the longest time between two ping replies (ping -D timestamps).
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import { requestStatus } from '../../src/daemon/control-socket.js';
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
import { e2eUnavailableReason, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, WEFT_BIN } from '../cli/helpers.js';
import {
  NET,
  gatewayObject,
  weftPid,
  gatewayPodCommand,
  hostRelay,
  nodeAgentCommand,
  relayIn,
  saKubeconfig,
  startLiqoApiServer,
} from './liqo-processes.js';

const skip = e2eUnavailableReason(['ip', 'ping', 'timeout', 'nft']);
const topo = new Topology('lf');
const WAN = { a: '192.168.77.1', b: '192.168.77.2' } as const;
const GW_IPS = ['10.244.0.10', '10.244.0.11'] as const;
const NODE_HOST_IP = '10.244.0.1';
const POD_IP = '10.0.1.5';
const POD_IP_REMOTE = '10.71.1.5';
const WG_PORT = 51840;
const HEARTBEAT_PORT = 9474;
/** The template's defaults this test relies on (deploy/liqo, k8s-settings.ts). */
const RENEW_MS = 1000;

type Letter = 'a' | 'b';
interface Replica {
  slot: 0 | 1;
  pod: string;
  proc: Spawned;
  runDir: string;
}
interface Cluster {
  letter: Letter;
  id: string;
  remote: string;
  server: FakeApiServer;
  ns: string;
  gw: GatewayObject;
  sock: string;
  keyDir: string;
  replicas: [Replica | null, Replica | null];
  /** The pod the "Service" and the InternalFabric point at. */
  routedTo: string | undefined;
  /** The node agent's process (the fabric DaemonSet's pod on worker-1). */
  nodeAgent?: Spawned;
}
const clusters = new Map<Letter, Cluster>();
const relays: Server[] = [];
const procs = new Map<string, Spawned>();
let dir = '';
let controller: NodeJS.Timeout | undefined;

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
    endpoint: { address: WAN.a, port: WG_PORT },
    gatewayPod: { ip: GW_IPS[0], node: 'worker-1' },
    nodes: [{ name: 'worker-1', pods: [{ name: 'app', ip: POD_IP }] }],
    liqoMode: { mss: 1300 },
  };
  const res: LiqoResources = liqoPeeringSide(side);
  const ns = tenantNamespace(remote);
  const server = await startLiqoApiServer({
    clusterId: id,
    res,
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
  mkdirSync(keyDir, { recursive: true });
  writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[letter].priv, 'base64'));
  const c: Cluster = { letter, id, remote, server, ns, gw, sock, keyDir, replicas: [null, null], routedTo: undefined };
  clusters.set(letter, c);
  return c;
}

const podName = (c: Cluster, slot: 0 | 1) => `${c.remote}-r${slot}`;
const gwNs = (c: Cluster, slot: 0 | 1) => topo.ns(`${c.letter}g${slot}`);
const podNs = (l: Letter) => topo.ns(`${l}p`);
const activeLabel = (c: Cluster, pod: string) =>
  c.server.getObject('v1', 'pods', c.ns, pod)?.metadata.labels?.['networking.liqo.io/active'];

/** Replica `slot` of the gateway Deployment: the pod Liqo renders from the template, as a process. */
function startReplica(c: Cluster, slot: 0 | 1): Replica {
  const pod = podName(c, slot);
  const cmd = gatewayPodCommand(c.letter === 'a' ? 'server' : 'client', c.gw, pod, 'worker-1');
  const existing = c.server.getObject('v1', 'pods', c.ns, pod);
  if (existing === undefined)
    c.server.put('v1', 'pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pod, namespace: c.ns, labels: cmd.labels },
      spec: { nodeName: 'worker-1', serviceAccountName: cmd.serviceAccount, containers: [{ name: 'gateway' }] },
      status: { phase: 'Running', podIP: GW_IPS[slot], hostIP: NODE_HOST_IP },
    });
  const argv = cmd.args
    .filter((a) => !a.startsWith('--metrics-listen='))
    .map((a) => (a.startsWith('--wireguard-key-dir=') ? `--wireguard-key-dir=${c.keyDir}` : a));
  const kc = saKubeconfig(
    c.server,
    join(dir, `${c.letter}-${cmd.serviceAccount}.kubeconfig`),
    c.ns,
    cmd.serviceAccount,
  );
  const runDir = join(dir, `run-${pod}`);
  // A container restarted in its pod (same name, same IP) after a kill, as the kubelet does.
  const proc = topo.spawnIn(
    gwNs(c, slot),
    `gw-${pod}`,
    [process.execPath, WEFT_BIN, ...argv, `--kubeconfig=${kc}`, `--run-dir=${runDir}`],
    { lifetimeS: 400, env: cmd.env },
  );
  procs.set(`${pod}#${proc.pid}`, proc);
  const r: Replica = { slot, pod, proc, runDir };
  c.replicas[slot] = r;
  return r;
}

const nodeRunDir = (c: Cluster) => join(dir, `run-node-${c.letter}`);

/** The fabric DaemonSet's pod on worker-1, as a process (started again as the kubelet restarts it). */
function startNodeAgent(c: Cluster): Spawned {
  const cmd = nodeAgentCommand(c.id, 'worker-1', 'weft-fabric-w1', NODE_HOST_IP);
  const kc = saKubeconfig(c.server, join(dir, `${c.letter}-fabric.kubeconfig`), LIQO_NAMESPACE, cmd.serviceAccount);
  const proc = topo.spawnIn(
    topo.ns(`${c.letter}n`),
    `node-${c.letter}`,
    [process.execPath, WEFT_BIN, ...cmd.args, `--kubeconfig=${kc}`, `--run-dir=${nodeRunDir(c)}`],
    { lifetimeS: 400, env: cmd.env },
  );
  procs.set(`node-${c.letter}#${proc.pid}`, proc);
  c.nodeAgent = proc;
  return proc;
}

/** `weft show --json` of a replica or node agent, through its control socket (what `weft show` asks). */
async function show(r: { runDir: string }): Promise<WeftStatus | undefined> {
  try {
    const sock = readdirSync(r.runDir).find((f) => f.endsWith('.sock'));
    if (sock === undefined) return undefined;
    return (await requestStatus(join(r.runDir, sock), 2000)) as WeftStatus;
  } catch {
    return undefined;
  }
}

/** The server side's "Service": 192.168.77.1:51840 on the node ⇄ the active pod, stateless. */
function routeService(c: Cluster, ip: string): void {
  topo.exec(topo.ns(`${c.letter}n`), ['nft', '-f', '-'], {
    input: `table ip lfsvc {}
flush table ip lfsvc
table ip lfsvc {
  chain pre {
    type filter hook prerouting priority raw; policy accept;
    iifname "lf${c.letter}n-w" ip daddr ${WAN[c.letter]} udp dport ${WG_PORT} notrack ip daddr set ${ip}
    ip saddr 10.244.0.0/24 udp sport ${WG_PORT} notrack
  }
  chain post {
    type filter hook postrouting priority srcnat; policy accept;
    oifname "lf${c.letter}n-w" ip saddr 10.244.0.0/24 udp sport ${WG_PORT} ip saddr set ${WAN[c.letter]}
  }
}
`,
  });
}

/** What Liqo's InternalFabric controller and kube-proxy do when the active label moves. */
function follow(c: Cluster): void {
  const active = ([0, 1] as const).map((s) => podName(c, s)).find((p) => activeLabel(c, p) === 'true');
  if (active === undefined || active === c.routedTo) return;
  c.routedTo = active;
  const ip = GW_IPS[active.endsWith('r0') ? 0 : 1];
  if (c.letter === 'a') routeService(c, ip);
  const fabric = c.server.getObject(NET, 'internalfabrics', c.ns, c.remote)!;
  (fabric['spec'] as { gatewayIP: string }).gatewayIP = ip;
  c.server.put(NET, 'internalfabrics', fabric);
}

const activeReplica = (c: Cluster): Replica => c.replicas.find((r) => r !== null && r.pod === c.routedTo)!;
const standbyReplica = (c: Cluster): Replica => c.replicas.find((r) => r !== null && r.pod !== c.routedTo)!;

/** Both replicas hear each other: the standby knows the active one (it can take over by heartbeat). */
async function waitPaired(c: Cluster): Promise<void> {
  const act = activeReplica(c);
  const sb = standbyReplica(c);
  await waitFor(
    `${c.id}: standby ${sb.pod} hears ${act.pod} active, and is heard`,
    async () => {
      const [s, a] = [await show(sb), await show(act)];
      return (
        s?.ha?.lastActive === act.pod && s.weft.active === false && a?.weft.active === true && a.ha?.state === 'active'
      );
    },
    30_000,
    100,
  );
}

/** ping -D every 20 ms from the pod of cluster `from` (default b) to the other cluster's pod. */
function startPinger(from: Letter = 'b', lifetimeS = 120): Spawned {
  return topo.spawnIn(podNs(from), `ping-${from}`, ['ping', '-n', '-D', '-i', '0.02', '-W', '1', POD_IP_REMOTE], {
    lifetimeS,
  });
}
const replyTimes = (p: Spawned): number[] =>
  [...p.output().matchAll(/^\[(\d+\.\d+)\] .*icmp_seq=\d+ /gm)].map((m) => Number(m[1]) * 1000);
function longestGap(times: number[]): number {
  let g = 0;
  for (let i = 1; i < times.length; i++) g = Math.max(g, times[i]! - times[i - 1]!);
  return g;
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

/**
 * One failover: pings running, `signal` to the active replica's weft process; waits until the
 * other replica is routed to and pings have flowed for a second after; restarts the stopped one
 * (the container restart) and waits until the pair is formed again. Returns the longest gap.
 */
async function failover(c: Cluster, signal: 'SIGKILL' | 'SIGTERM', label: string): Promise<number> {
  const act = activeReplica(c);
  const sb = standbyReplica(c);
  const pinger = startPinger();
  try {
    await waitFor('pings answered before', () => replyTimes(pinger).length >= 20, 10_000, 20);
    const pid = weftPid(act.proc);
    const t0 = Date.now();
    process.kill(pid, signal);
    await waitFor(`${c.id}: ${sb.pod} routed to`, () => c.routedTo === sb.pod, 15_000, 10);
    const tRouted = Date.now() - t0;
    await waitFor(
      'pings flowing again for a second',
      () => replyTimes(pinger).filter((t) => t > t0 + tRouted).length >= 40,
      20_000,
      50,
    );
    await topo.stop(pinger);
    const gap = longestGap(replyTimes(pinger));
    console.log(
      `[lf] ${label}: ${act.pod} → ${sb.pod}: label moved ${tRouted} ms after the ${signal}; longest ping gap ${gap.toFixed(0)} ms`,
    );
    await act.proc.exited;
    startReplica(c, act.slot);
    await waitPaired(c);
    return gap;
  } finally {
    await topo.stop(pinger);
  }
}

const TCP_SERVER = `const n=require('net');let b=0;n.createServer(s=>{s.on('data',d=>{b+=d.length});s.on('close',()=>console.log('closed'));s.on('error',e=>console.log('error',e.code))}).listen(7000);setInterval(()=>console.log('bytes',b),200)`;
const TCP_CLIENT = `const s=require('net').connect(7000,process.argv[1]);const k=Buffer.alloc(1024,7);s.on('connect',()=>{console.log('connected');setInterval(()=>s.write(k),10)});s.on('error',e=>console.log('error',e.code));s.on('close',()=>console.log('closed'))`;
const tcpBytes = (p: Spawned): number => Number([...p.output().matchAll(/^bytes (\d+)$/gm)].pop()?.[1] ?? 0);

/** The holder of cluster `c`'s gateway Lease (the only Lease in the tenant namespace). */
function leaseHolder(c: Cluster): string | undefined {
  const l = c.server.listObjects('coordination.k8s.io/v1', 'leases').filter((x) => x.metadata.namespace === c.ns);
  if (l.length !== 1) throw new Error(`${c.id}: expected one Lease in ${c.ns}, found ${l.length}`);
  return (l[0]!['spec'] as { holderIdentity?: string }).holderIdentity;
}

/** Who is what in cluster `c`, as the API server, the "Service" and the replicas themselves say. */
async function roles(c: Cluster): Promise<string> {
  const parts = [`lease=${leaseHolder(c)}`, `routed=${c.routedTo}`];
  for (const r of c.replicas)
    if (r !== null) parts.push(`${r.pod}: label=${activeLabel(c, r.pod)} active=${(await show(r))?.weft.active}`);
  return parts.join(' ');
}

/** The node namespace's routing state: policy rules, every table's routes, nft tables (sorted lines). */
function kernelState(c: Cluster): string {
  const ns = topo.ns(`${c.letter}n`);
  return [
    topo.exec(ns, ['ip', '-4', 'rule', 'show']),
    topo.exec(ns, ['ip', '-4', 'route', 'show', 'table', 'all']),
    topo.exec(ns, ['nft', 'list', 'tables']),
  ]
    .join('\n')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .sort()
    .join('\n');
}

/**
 * One node agent restart: pings every 20 ms from cluster `c`'s pod to the remote pod, `signal` to
 * the node agent's weft process, started again as soon as it has exited (the kubelet restarting
 * the DaemonSet's container); waits until pings have flowed for a second after the new start.
 * Returns the longest gap.
 */
async function restartNodeAgent(c: Cluster, signal: 'SIGKILL' | 'SIGTERM', label: string): Promise<number> {
  const pinger = startPinger(c.letter);
  try {
    await waitFor('pings answered before', () => replyTimes(pinger).length >= 20, 10_000, 20);
    const old = c.nodeAgent!;
    const t0 = Date.now();
    process.kill(weftPid(old), signal);
    await old.exited;
    const tExit = Date.now() - t0;
    startNodeAgent(c);
    await waitFor(
      'pings flowing again for a second',
      () => replyTimes(pinger).filter((t) => t > t0 + tExit).length >= 40,
      20_000,
      20,
    );
    await topo.stop(pinger);
    const times = replyTimes(pinger);
    const gap = longestGap(times);
    const firstAfter = times.find((t) => t > t0 + tExit);
    // The new process's own time stamp for its data plane running the kept configuration.
    const warm = /"time":(\d+),[^\n]*forwarding with the last configuration/.exec(c.nodeAgent!.output());
    console.log(
      `[lf] ${label}: exited ${tExit} ms after the ${signal}, started again; forwarding from its last configuration at ` +
        `${warm === null ? '?' : Number(warm[1]) - t0} ms, first reply after it at ` +
        `${firstAfter === undefined ? '?' : (firstAfter - t0).toFixed(0)} ms; longest ping gap ${gap.toFixed(0)} ms`,
    );
    return gap;
  } finally {
    await topo.stop(pinger);
  }
}

const diag = (): string => [...procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-1200)}`).join('\n');

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/daemon/k8s-heartbeat.js']);
  dir = mkdtempSync(join(tmpdir(), 'lf-'));
  for (const l of ['a', 'b'] as const) {
    const n = topo.addNamespace(`${l}n`);
    const p = topo.addNamespace(`${l}p`);
    topo.exec(n, ['ip', 'link', 'add', `lf${l}br`, 'type', 'bridge']);
    topo.exec(n, ['ip', 'addr', 'add', `${NODE_HOST_IP}/24`, 'dev', `lf${l}br`]);
    topo.exec(n, ['ip', 'link', 'set', `lf${l}br`, 'up']);
    for (const slot of [0, 1] as const) {
      const g = topo.addNamespace(`${l}g${slot}`);
      topo.link(g, `${l}g${slot}-n`, `${GW_IPS[slot]}/24`, n, `${l}n-g${slot}`, null);
      topo.exec(n, ['ip', 'link', 'set', `lf${l}n-g${slot}`, 'master', `lf${l}br`]);
      topo.exec(g, ['ip', 'route', 'add', 'default', 'via', NODE_HOST_IP]);
    }
    topo.link(n, `${l}n-p`, '10.0.1.1/24', p, `${l}p-n`, `${POD_IP}/24`);
    topo.exec(n, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    topo.exec(p, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
  }
  topo.link(topo.ns('an'), 'an-w', `${WAN.a}/24`, topo.ns('bn'), 'bn-w', `${WAN.b}/24`);
  // The client side's pods reach the WAN through their node's masquerade.
  topo.exec(topo.ns('bn'), ['nft', '-f', '-'], {
    input: `table ip lfnat {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "lfbn-w" ip saddr 10.244.0.0/24 masquerade
  }
}
`,
  });
}, 120_000);

afterAll(async () => {
  if (controller !== undefined) clearInterval(controller);
  await topo.cleanup();
  for (const r of relays) r.close();
  for (const c of clusters.values()) await c.server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)(
  'Liqo gateway failover between templated replicas (processes, one node per cluster)',
  () => {
    let tcpServer: Spawned;
    let tcpClient: Spawned;

    test('two replicas per side: one active (label, Service, InternalFabric), one warm standby hearing it', async () => {
      const backend = getCryptoBackend('auto');
      const keys = Object.fromEntries(
        (['a', 'b'] as const).map((l) => {
          const priv = generatePrivateKeyBase64(backend);
          return [l, { priv, pub: publicKeyBase64(backend, priv) }];
        }),
      ) as Record<Letter, { priv: string; pub: string }>;
      const ca = await startCluster('a', keys);
      const cb = await startCluster('b', keys);
      controller = setInterval(() => {
        for (const c of clusters.values()) follow(c);
      }, 10);
      try {
        for (const c of [ca, cb]) {
          relayIn(topo, topo.ns(`${c.letter}n`), c.sock);
          for (const slot of [0, 1] as const) relayIn(topo, gwNs(c, slot), c.sock);
          startNodeAgent(c);
          startReplica(c, 0);
        }
        for (const c of [ca, cb])
          await waitFor(`${c.id}: replica 0 active`, () => c.routedTo === podName(c, 0), 45_000);
        for (const c of [ca, cb]) startReplica(c, 1);
        for (const c of [ca, cb]) await waitPaired(c);
        await waitFor(
          'pod b → pod a answers',
          () =>
            topo
              .exec(podNs('b'), ['ping', '-n', '-c', '1', '-W', '1', POD_IP_REMOTE], { allowFail: true })
              .includes('1 received'),
          30_000,
          200,
        );
        for (const c of [ca, cb]) {
          const st = await show(standbyReplica(c));
          console.log(`[lf] ${c.id} standby: ${JSON.stringify(st?.ha)}`);
          expect(st?.ha?.dropped).toEqual({});
          expect(activeLabel(c, standbyReplica(c).pod)).toBeUndefined();
        }
        tcpServer = topo.spawnIn(podNs('a'), 'tcp-server', [process.execPath, '-e', TCP_SERVER], { lifetimeS: 300 });
        // Listening once it reports (a fixed wait lost to a loaded machine: ECONNREFUSED).
        await waitFor('TCP server listening', () => /^bytes /m.test(tcpServer.output()), 15_000, 20);
        tcpClient = topo.spawnIn(podNs('b'), 'tcp-client', [process.execPath, '-e', TCP_CLIENT, POD_IP_REMOTE], {
          lifetimeS: 300,
        });
        procs.set('tcp-server', tcpServer);
        procs.set('tcp-client', tcpClient);
        await waitFor('TCP stream flowing', () => tcpBytes(tcpServer) > 50_000, 15_000, 100);
      } catch (e) {
        console.log(diag());
        throw e;
      }
    }, 150_000);

    for (const side of ['a', 'b'] as const) {
      test(`SIGKILL of the active ${side === 'a' ? 'server' : 'client'}-side gateway, 5 runs: median longest gap < 2 s; the TCP stream survives`, async () => {
        const c = clusters.get(side)!;
        try {
          const gaps: number[] = [];
          for (let i = 1; i <= 5; i++) gaps.push(await failover(c, 'SIGKILL', `${c.id} SIGKILL run ${i}`));
          console.log(
            `[lf] ${c.id} SIGKILL gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms; median ${median(gaps).toFixed(0)} ms`,
          );
          // Target < 2 s on both sides (docs/liqo.md: measured).
          expect(median(gaps)).toBeLessThan(2000);
          const before = tcpBytes(tcpServer);
          await waitFor('TCP stream still flowing', () => tcpBytes(tcpServer) > before + 50_000, 15_000, 100);
          expect(tcpClient.output()).not.toMatch(/error|closed/);
          expect(tcpServer.output()).not.toMatch(/error|closed/);
        } catch (e) {
          console.log(diag());
          throw e;
        }
      }, 180_000);
    }

    test('SIGTERM of the active server-side gateway, 3 runs: handed over (the leaving replica forwards until the standby is active); median gap < 0.5 s', async () => {
      const c = clusters.get('a')!;
      try {
        const gaps: number[] = [];
        for (let i = 1; i <= 3; i++) gaps.push(await failover(c, 'SIGTERM', `${c.id} SIGTERM run ${i}`));
        console.log(`[lf] ${c.id} SIGTERM gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms`);
        // Target < 500 ms: the leaving replica forwards until the standby is labelled, so the gap
        // is the Service and the node agent moving to the new replica (docs/liqo.md: measured).
        expect(median(gaps)).toBeLessThan(500);
        // The leaving replica handed over (it did not set the Connection to Error).
        expect(diag()).toMatch(/handed over to cluster-b-r\d in \d+ ms/);
      } catch (e) {
        console.log(diag());
        throw e;
      }
    }, 120_000);

    test('partition between the two server-side replicas, both on the API server: two actives forward for at most the renew interval', async () => {
      const c = clusters.get('a')!;
      const act = activeReplica(c);
      const sb = standbyReplica(c);
      const pinger = startPinger();
      const samples: { t: number; a: WeftStatus | undefined; s: WeftStatus | undefined }[] = [];
      try {
        await waitFor('pings answered before', () => replyTimes(pinger).length >= 20, 10_000, 20);
        // The standby's namespace drops heartbeats both ways; the API relay (loopback) is untouched.
        const t0 = Date.now();
        topo.exec(gwNs(c, sb.slot), ['nft', '-f', '-'], {
          input: `table inet lfpart {
  chain in { type filter hook input priority 0; policy accept; udp dport ${HEARTBEAT_PORT} drop; }
  chain out { type filter hook output priority 0; policy accept; udp dport ${HEARTBEAT_PORT} drop; }
}
`,
        });
        const until = t0 + 4000;
        while (Date.now() < until) {
          const [a, s] = await Promise.all([show(act), show(sb)]);
          samples.push({ t: Date.now() - t0, a, s });
          await sleep(25);
        }
        const out = (st: WeftStatus | undefined) =>
          st?.forwarding === undefined ? undefined : st.forwarding.out.toPeers + st.forwarding.out.toNodes;
        // Both active (the data plane running in both) and both forwarding (counters moving in both).
        let bothActiveMs = 0;
        let bothForwardMs = 0;
        for (let i = 1; i < samples.length; i++) {
          const [p, q] = [samples[i - 1]!, samples[i]!];
          const dt = q.t - p.t;
          if (p.a?.weft.active && p.s?.weft.active && q.a?.weft.active && q.s?.weft.active) bothActiveMs += dt;
          const moved = (x: WeftStatus | undefined, y: WeftStatus | undefined) =>
            out(x) !== undefined && out(y) !== undefined && out(y)! > out(x)!;
          if (moved(p.a, q.a) && moved(p.s, q.s)) bothForwardMs += dt;
        }
        const tookOver = samples.find((x) => x.s?.weft.active)?.t;
        const stoodDown = samples.find((x) => x.t > (tookOver ?? 0) && x.a?.weft.active === false)?.t;
        console.log(
          `[lf] partition: standby active at ${tookOver} ms, old leader stood down at ${stoodDown} ms; ` +
            `both active ${bothActiveMs} ms, both forwarding ${bothForwardMs} ms (bound: renew interval ${RENEW_MS} ms)`,
        );
        for (const x of samples.filter((_, i) => i % 8 === 0))
          console.log(
            `[lf]   t=${x.t} ms  ${act.pod}: active=${x.a?.weft.active} out=${out(x.a)}  ${sb.pod}: active=${x.s?.weft.active} out=${out(x.s)}`,
          );
        expect(tookOver, 'the standby took over while partitioned').toBeDefined();
        expect(stoodDown, 'the old leader stood down').toBeDefined();
        // One renew interval, plus one Lease request and the sampling step.
        expect(bothActiveMs).toBeLessThanOrEqual(RENEW_MS + 300);
        expect(bothForwardMs).toBeLessThanOrEqual(RENEW_MS + 300);
        expect(c.routedTo).toBe(sb.pod);
        // Still partitioned, the old leader does not take the Lease back from a leader it cannot hear.
        await sleep(2000);
        expect((await show(act))?.weft.active).toBe(false);
        expect((await show(sb))?.weft.active).toBe(true);
        await topo.stop(pinger);
        const gap = longestGap(replyTimes(pinger));
        console.log(`[lf] partition: longest ping gap ${gap.toFixed(0)} ms`);
      } catch (e) {
        console.log(diag());
        throw e;
      } finally {
        topo.exec(gwNs(c, sb.slot), ['nft', 'delete', 'table', 'inet', 'lfpart'], { allowFail: true });
        await topo.stop(pinger);
      }
      await waitPaired(c);
    }, 90_000);

    test('both API servers unreachable for 30 s under traffic (a: stopped, connections refused; b: hung, requests unanswered): no gap, no role change, nothing flaps after', async () => {
      const all = [...clusters.values()];
      for (const c of all) await waitPaired(c);
      const before = new Map<Letter, string>();
      for (const c of all) before.set(c.letter, await roles(c));
      const holders = new Map(all.map((c) => [c.letter, leaseHolder(c)]));
      for (const c of all) expect(holders.get(c.letter)).toBe(c.routedTo);
      // Each process's log from here on.
      const mark = new Map([...procs].map(([n, p]) => [n, p.output().length]));
      const pingers = [startPinger('b', 90), startPinger('a', 90)];
      const changes: string[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          for (const c of all) {
            const now = await roles(c);
            if (now !== before.get(c.letter)) changes.push(`${Date.now()} ${c.id}: ${now}`);
          }
          await sleep(100);
        }
      })();
      try {
        await waitFor('pings answered before', () => pingers.every((p) => replyTimes(p).length >= 20), 10_000, 20);
        const bytes0 = tcpBytes(tcpServer);
        const t0 = Date.now();
        await clusters.get('a')!.server.beginOutage();
        clusters.get('b')!.server.setBlackHole(true);
        await sleep(30_000);
        const bytesDuring = tcpBytes(tcpServer);
        await clusters.get('a')!.server.endOutage();
        clusters.get('b')!.server.setBlackHole(false);
        const tBack = Date.now() - t0;
        // After it: several retry periods, every replica back on the API.
        await sleep(5000);
        sampling = false;
        await sampler;
        for (const p of pingers) await topo.stop(p);
        const gaps = pingers.map((p) => longestGap(replyTimes(p)));
        console.log(
          `[lf] API outage ${tBack} ms: longest ping gap pod b → pod a ${gaps[0]!.toFixed(0)} ms, pod a → pod b ${gaps[1]!.toFixed(0)} ms; ` +
            `TCP bytes ${bytes0} → ${bytesDuring} (end of outage) → ${tcpBytes(tcpServer)}`,
        );
        for (const c of all) console.log(`[lf]   ${c.id} after: ${await roles(c)}`);
        const logs = [...procs].map(([n, p]) => [n, p.output().slice(mark.get(n) ?? 0)] as const);
        for (const [n, text] of logs) {
          const lines = text.split('\n').filter((l) => l.trim() !== '');
          console.log(`[lf]   ${n}: ${lines.length} log lines during and after the outage`);
          for (const l of lines.filter((x) => /"level":(40|50)/.test(x)).slice(0, 4))
            console.log(`[lf]     ${l.slice(0, 300)}`);
        }
        expect(changes, 'labels, Lease holders and active states unchanged throughout').toEqual([]);
        // Forwarding never stopped: no gap near what a takeover costs (a second or more). Gaps
        // are 75–110 ms with this file alone and reached 225 ms with the other test lane
        // loading the machine (both directions at once: the machine, not the data plane).
        for (const g of gaps) expect(g).toBeLessThan(500);
        expect(bytesDuring).toBeGreaterThan(bytes0 + 100_000);
        expect(tcpClient.output()).not.toMatch(/error|closed/);
        expect(tcpServer.output()).not.toMatch(/error|closed/);
        for (const [n, text] of logs) {
          expect(text, n).not.toMatch(
            /data plane stopped|lost the Lease|; standby|leader: starting|takeover from|stopping anyway/,
          );
        }
        for (const c of all) {
          // The leader renewed after the outage (it renews first: nothing moved).
          const spec = c.server
            .listObjects('coordination.k8s.io/v1', 'leases')
            .find((x) => x.metadata.namespace === c.ns)!['spec'] as { holderIdentity: string; renewTime: string };
          expect(spec.holderIdentity).toBe(holders.get(c.letter));
          expect(Date.now() - Date.parse(spec.renewTime)).toBeLessThan(3000);
          // One warning from the leader, once its renew deadline passed.
          const act = activeReplica(c);
          const leaderLog = logs.find(([n]) => n === `${act.pod}#${act.proc.pid}`)![1];
          expect(leaderLog.match(/Lease not renewed for/g) ?? []).toHaveLength(1);
        }
        for (const c of all) await waitPaired(c);
      } catch (e) {
        console.log(diag());
        throw e;
      } finally {
        sampling = false;
        await sampler;
        await clusters.get('a')!.server.endOutage();
        clusters.get('b')!.server.setBlackHole(false);
        for (const p of pingers) await topo.stop(p);
      }
    }, 90_000);

    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      test(`node agent restart (${signal}, then started again as the DaemonSet does), 3 runs: that node's pod loses < 1 s (median); tunnels and routes back`, async () => {
        const c = clusters.get('a')!;
        const state = kernelState(c);
        try {
          const gaps: number[] = [];
          for (let i = 1; i <= 3; i++) {
            gaps.push(await restartNodeAgent(c, signal, `${c.id} node agent ${signal} run ${i}`));
            // It forwarded from the configuration its predecessor kept, then took the API server's.
            expect(c.nodeAgent!.output()).toMatch(/forwarding with the last configuration/);
            await waitFor(
              "the restarted node agent on the API server's configuration",
              () => c.nodeAgent!.output().includes('the last configuration converged'),
              20_000,
              50,
            );
            await waitFor(
              'the node agent active with its Geneve tunnel',
              async () => {
                const st = await show({ runDir: nodeRunDir(c) });
                return st?.weft.active === true && st.geneve.tunnels.length === 1;
              },
              15_000,
              50,
            );
            await waitFor('routes, rules and nft tables as before', () => kernelState(c) === state, 15_000, 100);
          }
          console.log(
            `[lf] ${c.id} node agent ${signal} gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms; median ${median(gaps).toFixed(0)} ms`,
          );
          expect(median(gaps)).toBeLessThan(1000);
        } catch (e) {
          console.log(diag());
          console.log(`--- kernel state before\n${state}\n--- now\n${kernelState(c)}`);
          throw e;
        }
      }, 90_000);
    }
  },
);
