/**
 * The two-cluster topology of the Liqo gateway failover tests (liqo-failover.test.ts,
 * liqo-failover-wgpeer.test.ts) and what they do on it: `weft k8s` gateway replicas and node
 * agents started from deploy/liqo's templates (liqo-processes.ts), the Service and InternalFabric
 * moves Kubernetes and Liqo's controllers make when the active label moves, the pinger and the
 * TCP stream between the clusters' pods, and one failover measured as the longest ping gap.
 *
 * Per cluster X (a: GatewayServer side, b: GatewayClient side), built like a cluster's node:
 *   app pod Xp 10.0.1.5 ─veth─ node worker-1 Xn (host network: bridge 10.244.0.1/24)
 *     ├─ bridge ─ gateway pod Xg0 10.244.0.10 (replica 0)
 *     └─ bridge ─ gateway pod Xg1 10.244.0.11 (replica 1)
 *   node an 192.168.77.1 ═ WAN ═ 192.168.77.2 node bn
 * (every name carries the rig's prefix). The client side's node masquerades its pods' traffic to
 * the WAN (a pod's egress). A cluster started with startCluster runs Weft: an API server holding
 * Liqo's objects for the peering, its node agent and the gateway replicas; `follow` does what
 * Liqo's InternalFabric controller and kube-proxy do when the active label moves:
 * - spec.gatewayIP of the InternalFabric set to the active pod's IP (the node agent follows it);
 * - on the server side the endpoint 192.168.77.1:51840 (spec.endpoint, a NodePort-like address on
 *   the node) translated statelessly (nft `notrack`; `ip daddr set` before routing, `ip saddr
 *   set` for the replies after it) to the labelled pod, so a change takes effect with the next
 *   packet — kube-proxy too flushes the UDP conntrack entries of a changed endpoint, but only
 *   after its own sync (tens of ms to seconds on a real cluster, which these tests leave out).
 * Each replica reaches its API server through a relay at 127.0.0.1:6443 in its own namespace.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import { Topology, waitFor, type Spawned } from '../util/netns.js';
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

export const WAN = { a: '192.168.77.1', b: '192.168.77.2' } as const;
export const GW_IPS = ['10.244.0.10', '10.244.0.11'] as const;
export const NODE_HOST_IP = '10.244.0.1';
export const POD_IP = '10.0.1.5';
/** The other cluster's pod as each cluster addresses it (Liqo's remapping of the same pod CIDR). */
export const POD_IP_REMOTE = '10.71.1.5';
export const WG_PORT = 51840;
export const HEARTBEAT_PORT = 9474;

export type Letter = 'a' | 'b';
export type Keys = Record<Letter, { priv: string; pub: string }>;
export interface Replica {
  slot: 0 | 1;
  pod: string;
  proc: Spawned;
  runDir: string;
}
export interface Cluster {
  letter: Letter;
  id: string;
  remote: string;
  side: PeeringSide;
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

/** A fresh WireGuard key pair per cluster. */
export function generateKeys(): Keys {
  const backend = getCryptoBackend('auto');
  const pair = () => {
    const priv = generatePrivateKeyBase64(backend);
    return { priv, pub: publicKeyBase64(backend, priv) };
  };
  return { a: pair(), b: pair() };
}

/** Cluster `letter`'s side of the peering (one node, one app pod), as Liqo's objects describe it. */
export function peeringSide(letter: Letter, keys: Keys): PeeringSide {
  const other: Letter = letter === 'a' ? 'b' : 'a';
  return {
    local: `cluster-${letter}`,
    remote: `cluster-${other}`,
    side: letter === 'a' ? 'server' : 'client',
    privateKey: keys[letter].priv,
    publicKey: keys[letter].pub,
    remotePublicKey: keys[other].pub,
    endpoint: { address: WAN.a, port: WG_PORT },
    gatewayPod: { ip: GW_IPS[0], node: 'worker-1' },
    nodes: [{ name: 'worker-1', pods: [{ name: 'app', ip: POD_IP }] }],
    liqoMode: { mss: 1300 },
  };
}

/** The FirewallConfigurations of `side` as a Liqo install holds them (gw-mss-clamping from the Helm chart). */
export function firewallObjects(side: PeeringSide): Record<string, unknown>[] {
  return liqoFirewallConfigurations(side).map((o) =>
    (o as { metadata?: { name?: string } }).metadata?.name === 'gw-mss-clamping'
      ? asStored(helmMssClamp(LIQO_NAMESPACE))
      : o,
  );
}

/** ping -D output → reply times (ms since the epoch). */
export const replyTimes = (p: Spawned): number[] =>
  [...p.output().matchAll(/^\[(\d+\.\d+)\] .*icmp_seq=\d+ /gm)].map((m) => Number(m[1]) * 1000);
export function longestGap(times: number[]): number {
  let g = 0;
  for (let i = 1; i < times.length; i++) g = Math.max(g, times[i]! - times[i - 1]!);
  return g;
}
export const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

const TCP_SERVER = `const n=require('net');let b=0;n.createServer(s=>{s.on('data',d=>{b+=d.length});s.on('close',()=>console.log('closed'));s.on('error',e=>console.log('error',e.code))}).listen(7000);setInterval(()=>console.log('bytes',b),200)`;
const TCP_CLIENT = `const s=require('net').connect(7000,process.argv[1]);const k=Buffer.alloc(1024,7);s.on('connect',()=>{console.log('connected');setInterval(()=>s.write(k),10)});s.on('error',e=>console.log('error',e.code));s.on('close',()=>console.log('closed'))`;
export const tcpBytes = (p: Spawned): number => Number([...p.output().matchAll(/^bytes (\d+)$/gm)].pop()?.[1] ?? 0);

/** `weft show --json` of a replica or node agent, through its control socket (what `weft show` asks). */
export async function show(r: { runDir: string }): Promise<WeftStatus | undefined> {
  try {
    const sock = readdirSync(r.runDir).find((f) => f.endsWith('.sock'));
    if (sock === undefined) return undefined;
    return (await requestStatus(join(r.runDir, sock), 2000)) as WeftStatus;
  } catch {
    return undefined;
  }
}

export class FailoverRig {
  readonly topo: Topology;
  readonly clusters = new Map<Letter, Cluster>();
  /** Every process whose log the diagnostics show, by name#pid. */
  readonly procs = new Map<string, Spawned>();
  private readonly relays: Server[] = [];
  private controller: NodeJS.Timeout | undefined;
  dir = '';
  tcpServer: Spawned | undefined;
  tcpClient: Spawned | undefined;

  /** `prefix`: of every namespace and interface name (unique to the test file); `tag`: of log lines. */
  constructor(
    readonly prefix: string,
    readonly tag: string,
  ) {
    this.topo = new Topology(prefix);
  }

  gwNs = (l: Letter, slot: 0 | 1): string => this.topo.ns(`${l}g${slot}`);
  podNs = (l: Letter): string => this.topo.ns(`${l}p`);
  nodeNs = (l: Letter): string => this.topo.ns(`${l}n`);
  /** The node's WAN interface and the gateway pod's interface on the node bridge. */
  wanIf = (l: Letter): string => `${this.prefix}${l}n-w`;
  gwIf = (l: Letter, slot: 0 | 1): string => `${this.prefix}${l}g${slot}-n`;
  log = (line: string): void => console.log(`[${this.tag}] ${line}`);

  /** Namespaces, links, bridges and the client side's masquerade (beforeAll). */
  build(): void {
    ensureBuilt(['src/cli/weft.js', 'src/daemon/k8s-heartbeat.js']);
    this.dir = mkdtempSync(join(tmpdir(), `${this.prefix}-`));
    const topo = this.topo;
    for (const l of ['a', 'b'] as const) {
      const n = topo.addNamespace(`${l}n`);
      const p = topo.addNamespace(`${l}p`);
      const br = `${this.prefix}${l}br`;
      topo.exec(n, ['ip', 'link', 'add', br, 'type', 'bridge']);
      topo.exec(n, ['ip', 'addr', 'add', `${NODE_HOST_IP}/24`, 'dev', br]);
      topo.exec(n, ['ip', 'link', 'set', br, 'up']);
      for (const slot of [0, 1] as const) {
        const g = topo.addNamespace(`${l}g${slot}`);
        topo.link(g, `${l}g${slot}-n`, `${GW_IPS[slot]}/24`, n, `${l}n-g${slot}`, null);
        topo.exec(n, ['ip', 'link', 'set', `${this.prefix}${l}n-g${slot}`, 'master', br]);
        topo.exec(g, ['ip', 'route', 'add', 'default', 'via', NODE_HOST_IP]);
      }
      topo.link(n, `${l}n-p`, '10.0.1.1/24', p, `${l}p-n`, `${POD_IP}/24`);
      topo.exec(n, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      topo.exec(p, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
    }
    topo.link(this.nodeNs('a'), 'an-w', `${WAN.a}/24`, this.nodeNs('b'), 'bn-w', `${WAN.b}/24`);
    topo.exec(this.nodeNs('b'), ['nft', '-f', '-'], {
      input: `table ip lfnat {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "${this.wanIf('b')}" ip saddr 10.244.0.0/24 masquerade
  }
}
`,
    });
  }

  /** Stops every process (by PID), deletes the namespaces, stops the API servers (afterAll). */
  async cleanup(): Promise<void> {
    if (this.controller !== undefined) clearInterval(this.controller);
    await this.topo.cleanup();
    for (const r of this.relays) r.close();
    for (const c of this.clusters.values()) await c.server.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Cluster `letter` runs Weft: its API server (Liqo's objects, RBAC, firewall configurations) and the gateway's key. */
  async startCluster(letter: Letter, keys: Keys): Promise<Cluster> {
    const side = peeringSide(letter, keys);
    const id = side.local;
    const remote = side.remote;
    const res: LiqoResources = liqoPeeringSide(side);
    const ns = tenantNamespace(remote);
    const server = await startLiqoApiServer({
      clusterId: id,
      res,
      extra: [{ plural: 'firewallconfigurations', objects: firewallObjects(side) }],
      gateway: { namespace: ns, name: remote },
    });
    const gw = gatewayObject(server, letter === 'a' ? 'server' : 'client', ns, remote);
    const sock = join(this.dir, `${letter}-api.sock`);
    this.relays.push(await hostRelay(server, sock));
    const keyDir = join(this.dir, `keys-${letter}`);
    mkdirSync(keyDir, { recursive: true });
    writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[letter].priv, 'base64'));
    const c: Cluster = {
      letter,
      id,
      remote,
      side,
      server,
      ns,
      gw,
      sock,
      keyDir,
      replicas: [null, null],
      routedTo: undefined,
    };
    this.clusters.set(letter, c);
    return c;
  }

  podName = (c: Cluster, slot: 0 | 1): string => `${c.remote}-r${slot}`;
  activeLabel = (c: Cluster, pod: string): string | undefined =>
    c.server.getObject('v1', 'pods', c.ns, pod)?.metadata.labels?.['networking.liqo.io/active'];

  /** Replica `slot` of the gateway Deployment: the pod Liqo renders from the template, as a process. */
  startReplica(c: Cluster, slot: 0 | 1): Replica {
    const pod = this.podName(c, slot);
    const cmd = gatewayPodCommand(c.letter === 'a' ? 'server' : 'client', c.gw, pod, 'worker-1');
    if (c.server.getObject('v1', 'pods', c.ns, pod) === undefined)
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
      join(this.dir, `${c.letter}-${cmd.serviceAccount}.kubeconfig`),
      c.ns,
      cmd.serviceAccount,
    );
    const runDir = join(this.dir, `run-${pod}`);
    // A container restarted in its pod (same name, same IP) after a kill, as the kubelet does.
    const proc = this.topo.spawnIn(
      this.gwNs(c.letter, slot),
      `gw-${pod}`,
      [process.execPath, WEFT_BIN, ...argv, `--kubeconfig=${kc}`, `--run-dir=${runDir}`],
      { lifetimeS: 400, env: cmd.env },
    );
    this.procs.set(`${pod}#${proc.pid}`, proc);
    const r: Replica = { slot, pod, proc, runDir };
    c.replicas[slot] = r;
    return r;
  }

  nodeRunDir = (c: Cluster): string => join(this.dir, `run-node-${c.letter}`);

  /** The fabric DaemonSet's pod on worker-1, as a process (started again as the kubelet restarts it). */
  startNodeAgent(c: Cluster): Spawned {
    const cmd = nodeAgentCommand(c.id, 'worker-1', 'weft-fabric-w1', NODE_HOST_IP);
    const kc = saKubeconfig(
      c.server,
      join(this.dir, `${c.letter}-fabric.kubeconfig`),
      LIQO_NAMESPACE,
      cmd.serviceAccount,
    );
    const proc = this.topo.spawnIn(
      this.nodeNs(c.letter),
      `node-${c.letter}`,
      [process.execPath, WEFT_BIN, ...cmd.args, `--kubeconfig=${kc}`, `--run-dir=${this.nodeRunDir(c)}`],
      { lifetimeS: 400, env: cmd.env },
    );
    this.procs.set(`node-${c.letter}#${proc.pid}`, proc);
    c.nodeAgent = proc;
    return proc;
  }

  /** The server side's "Service": 192.168.77.1:51840 on node `l` ⇄ the pod at `ip`, stateless. */
  routeService(l: Letter, ip: string): void {
    this.topo.exec(this.nodeNs(l), ['nft', '-f', '-'], {
      input: `table ip lfsvc {}
flush table ip lfsvc
table ip lfsvc {
  chain pre {
    type filter hook prerouting priority raw; policy accept;
    iifname "${this.wanIf(l)}" ip daddr ${WAN[l]} udp dport ${WG_PORT} notrack ip daddr set ${ip}
    ip saddr 10.244.0.0/24 udp sport ${WG_PORT} notrack
  }
  chain post {
    type filter hook postrouting priority srcnat; policy accept;
    oifname "${this.wanIf(l)}" ip saddr 10.244.0.0/24 udp sport ${WG_PORT} ip saddr set ${WAN[l]}
  }
}
`,
    });
  }

  /** What Liqo's InternalFabric controller and kube-proxy do when the active label moves. */
  private follow(c: Cluster): void {
    const active = ([0, 1] as const).map((s) => this.podName(c, s)).find((p) => this.activeLabel(c, p) === 'true');
    if (active === undefined || active === c.routedTo) return;
    c.routedTo = active;
    const ip = GW_IPS[active.endsWith('r0') ? 0 : 1];
    if (c.letter === 'a') this.routeService('a', ip);
    const fabric = c.server.getObject(NET, 'internalfabrics', c.ns, c.remote)!;
    (fabric['spec'] as { gatewayIP: string }).gatewayIP = ip;
    c.server.put(NET, 'internalfabrics', fabric);
  }

  activeReplica = (c: Cluster): Replica => c.replicas.find((r) => r !== null && r.pod === c.routedTo)!;
  standbyReplica = (c: Cluster): Replica => c.replicas.find((r) => r !== null && r.pod !== c.routedTo)!;

  /** Both replicas hear each other: the standby knows the active one (it can take over by heartbeat). */
  async waitPaired(c: Cluster): Promise<void> {
    const act = this.activeReplica(c);
    const sb = this.standbyReplica(c);
    await waitFor(
      `${c.id}: standby ${sb.pod} hears ${act.pod} active, and is heard`,
      async () => {
        const [s, a] = [await show(sb), await show(act)];
        return (
          s?.ha?.lastActive === act.pod &&
          s.weft.active === false &&
          a?.weft.active === true &&
          a.ha?.state === 'active'
        );
      },
      30_000,
      100,
    );
  }

  /**
   * Starts the Weft clusters: relays, node agent and replica 0 each, the label followed every
   * 10 ms; once replica 0 is active, replica 1 as the warm standby; waits until they are paired.
   */
  async startWeftGateways(cs: Cluster[]): Promise<void> {
    this.controller ??= setInterval(() => {
      for (const c of this.clusters.values()) this.follow(c);
    }, 10);
    for (const c of cs) {
      relayIn(this.topo, this.nodeNs(c.letter), c.sock);
      for (const slot of [0, 1] as const) relayIn(this.topo, this.gwNs(c.letter, slot), c.sock);
      this.startNodeAgent(c);
      this.startReplica(c, 0);
    }
    for (const c of cs) await waitFor(`${c.id}: replica 0 active`, () => c.routedTo === this.podName(c, 0), 45_000);
    for (const c of cs) this.startReplica(c, 1);
    for (const c of cs) await this.waitPaired(c);
  }

  /** Waits until pod b's pings reach pod a, then starts the TCP stream pod b → pod a and waits until it flows. */
  async startTraffic(): Promise<void> {
    await waitFor(
      'pod b → pod a answers',
      () =>
        this.topo
          .exec(this.podNs('b'), ['ping', '-n', '-c', '1', '-W', '1', POD_IP_REMOTE], { allowFail: true })
          .includes('1 received'),
      30_000,
      200,
    );
    const server = this.topo.spawnIn(this.podNs('a'), 'tcp-server', [process.execPath, '-e', TCP_SERVER], {
      lifetimeS: 300,
    });
    this.tcpServer = server;
    this.procs.set('tcp-server', server);
    // Listening once it reports (a fixed wait lost to a loaded machine: ECONNREFUSED).
    await waitFor('TCP server listening', () => /^bytes /m.test(server.output()), 15_000, 20);
    this.tcpClient = this.topo.spawnIn(
      this.podNs('b'),
      'tcp-client',
      [process.execPath, '-e', TCP_CLIENT, POD_IP_REMOTE],
      { lifetimeS: 300 },
    );
    this.procs.set('tcp-client', this.tcpClient);
    await waitFor('TCP stream flowing', () => tcpBytes(server) > 50_000, 15_000, 100);
  }

  /** Waits until the TCP stream has carried 50 kB more, and neither end saw an error or a close. */
  async tcpStillFlowing(): Promise<string[]> {
    const before = tcpBytes(this.tcpServer!);
    await waitFor('TCP stream still flowing', () => tcpBytes(this.tcpServer!) > before + 50_000, 15_000, 100);
    return [this.tcpClient!.output(), this.tcpServer!.output()];
  }

  /** ping -D every 20 ms from the pod of cluster `from` (default b) to the other cluster's pod. */
  startPinger(from: Letter = 'b', lifetimeS = 120): Spawned {
    return this.topo.spawnIn(
      this.podNs(from),
      `ping-${from}`,
      ['ping', '-n', '-D', '-i', '0.02', '-W', '1', POD_IP_REMOTE],
      { lifetimeS },
    );
  }

  /**
   * One failover: pings running, `signal` to the active replica's weft process; waits until the
   * other replica is routed to and pings have flowed for a second after; restarts the stopped one
   * (the container restart) and waits until the pair is formed again. Returns the longest gap.
   */
  async failover(c: Cluster, signal: 'SIGKILL' | 'SIGTERM', label: string): Promise<number> {
    const act = this.activeReplica(c);
    const sb = this.standbyReplica(c);
    const pinger = this.startPinger();
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
      await this.topo.stop(pinger);
      const gap = longestGap(replyTimes(pinger));
      this.log(
        `${label}: ${act.pod} → ${sb.pod}: label moved ${tRouted} ms after the ${signal}; longest ping gap ${gap.toFixed(0)} ms`,
      );
      await act.proc.exited;
      this.startReplica(c, act.slot);
      await this.waitPaired(c);
      return gap;
    } finally {
      await this.topo.stop(pinger);
    }
  }

  /** `runs` failovers of cluster `c`'s active replica by `signal`; logs and returns the gaps. */
  async failovers(c: Cluster, signal: 'SIGKILL' | 'SIGTERM', runs: number): Promise<number[]> {
    const gaps: number[] = [];
    for (let i = 1; i <= runs; i++) gaps.push(await this.failover(c, signal, `${c.id} ${signal} run ${i}`));
    this.log(
      `${c.id} ${signal} gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms; median ${median(gaps).toFixed(0)} ms`,
    );
    return gaps;
  }

  /** The holder of cluster `c`'s gateway Lease (the only Lease in the tenant namespace). */
  leaseHolder(c: Cluster): string | undefined {
    const l = c.server.listObjects('coordination.k8s.io/v1', 'leases').filter((x) => x.metadata.namespace === c.ns);
    if (l.length !== 1) throw new Error(`${c.id}: expected one Lease in ${c.ns}, found ${l.length}`);
    return (l[0]!['spec'] as { holderIdentity?: string }).holderIdentity;
  }

  /** Who is what in cluster `c`, as the API server, the "Service" and the replicas themselves say. */
  async roles(c: Cluster): Promise<string> {
    const parts = [`lease=${this.leaseHolder(c)}`, `routed=${c.routedTo}`];
    for (const r of c.replicas)
      if (r !== null)
        parts.push(`${r.pod}: label=${this.activeLabel(c, r.pod)} active=${(await show(r))?.weft.active}`);
    return parts.join(' ');
  }

  /** The last lines of every process's log. */
  diag = (): string => [...this.procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-1200)}`).join('\n');
}
