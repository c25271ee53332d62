/**
 * Two Liqo-shaped clusters as root e2e tests run them (liqo-pods.test.ts, liqo-multitunnel.test.ts,
 * liqo-rootless.test.ts): per cluster X (a: GatewayServer side, b: GatewayClient side) the
 * namespaces Xg / Xn / Xp of `topo`,
 *   app pod Xp 10.0.1.5 ─veth─ node worker-1 Xn (the fabric DaemonSet's node agent) ─veth─
 *   gateway pod Xg 10.244.0.10 (the gateway template's pod) ═ WAN veth ═ the other gateway pod,
 * one test API server per cluster with the peering's objects (liqo-processes.ts), a relay to it
 * per cluster, and the gateway and node-agent processes started from deploy/liqo's manifests with
 * only --kubeconfig and --run-dir added (and what a test passes). Each cluster sees the other's
 * pods as 10.71.0.0/16 (Liqo's remapping).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { join } from 'node:path';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { FakeApiServer } from '../k8s-fake/server.js';
import type { GatewayObject } from '../k8s-fake/liqo-render.js';
import { asStored, helmMssClamp } from '../k8s-fake/helm-mssclamp.js';
import {
  LIQO_NAMESPACE,
  liqoFirewallConfigurations,
  liqoPeeringSide,
  tenantNamespace,
  type PeeringSide,
} from '../k8s-fake/liqo-peering.js';
import type { Spawned, Topology } from '../util/netns.js';
import { WEFT_BIN } from '../cli/helpers.js';
import {
  NET,
  gatewayObject,
  gatewayPodCommand,
  hostRelay,
  nodeAgentCommand,
  saKubeconfig,
  startLiqoApiServer,
  type PodCommand,
} from './liqo-processes.js';

export const GW_POD_IP = '10.244.0.10';
export const NODE_HOST_IP = '10.244.0.1';
export const POD_IP = '10.0.1.5';
/** How the other cluster addresses POD_IP (Configuration.status.remote.cidr.pod 10.71.0.0/16). */
export const POD_IP_REMOTE = '10.71.1.5';

export type Letter = 'a' | 'b';
export type PeeringKeys = Record<Letter, { priv: string; pub: string }>;

export interface LiqoCluster {
  letter: Letter;
  side: PeeringSide;
  id: string;
  remote: string;
  server: FakeApiServer;
  /** Tenant namespace and gateway (GatewayServer/Client) name. */
  ns: string;
  gw: GatewayObject;
  sock: string;
  keyDir: string;
}

/** A WireGuard key pair per cluster. */
export function peeringKeys(): PeeringKeys {
  const backend = getCryptoBackend('auto');
  return Object.fromEntries(
    (['a', 'b'] as const).map((l) => {
      const priv = generatePrivateKeyBase64(backend);
      return [l, { priv, pub: publicKeyBase64(backend, priv) }];
    }),
  ) as PeeringKeys;
}

/** Two clusters' namespaces, API servers and processes; `dir` (set by the test) holds their files. */
export class LiqoPair {
  readonly clusters = new Map<Letter, LiqoCluster>();
  readonly relays: Server[] = [];
  readonly procs = new Map<string, Spawned>();
  dir = '';

  constructor(readonly topo: Topology) {}

  /**
   * The namespaces of both clusters and the WAN link (gateway a `wan.a`, gateway b `wan.b`).
   * Interface names are `${ifPrefix}ag-n` etc. (after the Topology's own prefix).
   */
  addNamespaces(wan: { a: string; b: string }, ifPrefix = ''): void {
    const { topo } = this;
    for (const l of ['a', 'b'] as const) {
      const g = topo.addNamespace(`${l}g`);
      const n = topo.addNamespace(`${l}n`);
      const p = topo.addNamespace(`${l}p`);
      topo.link(g, `${ifPrefix}${l}g-n`, `${GW_POD_IP}/24`, n, `${ifPrefix}${l}n-g`, `${NODE_HOST_IP}/24`);
      topo.link(n, `${ifPrefix}${l}n-p`, '10.0.1.1/24', p, `${ifPrefix}${l}p-n`, `${POD_IP}/24`);
      topo.exec(n, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      topo.exec(p, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
    }
    topo.link(topo.ns('ag'), `${ifPrefix}ag-w`, `${wan.a}/24`, topo.ns('bg'), `${ifPrefix}bg-w`, `${wan.b}/24`);
  }

  /**
   * Cluster `letter`'s API server with the peering's objects (`side` completes the PeeringSide
   * the pair fixes: ids, keys, one gateway pod and one app pod on worker-1), the relay to it and
   * the gateway's key directory. `extra(side, ns)` adds networking.liqo.io objects by plural.
   */
  async startCluster(
    letter: Letter,
    keys: PeeringKeys,
    o: {
      side: Pick<PeeringSide, 'endpoint' | 'ports' | 'liqoMode'>;
      extra?: (side: PeeringSide, ns: string) => { plural: string; objects: Record<string, unknown>[] }[];
    },
  ): Promise<LiqoCluster> {
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
      gatewayPod: { ip: GW_POD_IP, node: 'worker-1' },
      nodes: [{ name: 'worker-1', pods: [{ name: 'app', ip: POD_IP }] }],
      ...o.side,
    };
    const ns = tenantNamespace(remote);
    // deploy/liqo's RBAC: the gateway role (Liqo's controller-manager binds it to the gateway's
    // ServiceAccount, named like the gateway) and the fabric DaemonSet's own objects.
    const server = await startLiqoApiServer({
      clusterId: id,
      res: liqoPeeringSide(side),
      extra: o.extra?.(side, ns) ?? [],
      gateway: { namespace: ns, name: remote },
    });
    const gw = gatewayObject(server, letter === 'a' ? 'server' : 'client', ns, remote);
    const sock = join(this.dir, `${letter}-api.sock`);
    this.relays.push(await hostRelay(server, sock));
    const keyDir = join(this.dir, `keys-${letter}`);
    rmSync(keyDir, { recursive: true, force: true });
    mkdirSync(keyDir);
    writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[letter].priv, 'base64'));
    const c: LiqoCluster = { letter, side, id, remote, server, ns, gw, sock, keyDir };
    this.clusters.set(letter, c);
    return c;
  }

  /**
   * A gateway replica: the pod Liqo renders from deploy/liqo's template (`template`, default the
   * TUN one) for pod `${remote}-${replica}`, registered as a Running pod and run as a process in
   * Xg without --metrics-listen (replicas may share one pod network namespace) and with the
   * cluster's key directory. `prefix` comes before node (e.g. setpriv), `args` after the
   * manifest's. The process is `procs.get(name)` (default: the pod's name).
   */
  startGateway(
    c: LiqoCluster,
    o: {
      replica?: string;
      template?: string;
      check?: (cmd: PodCommand) => void;
      prefix?: string[];
      args?: string[];
      runDir?: string;
      env?: Record<string, string>;
      name?: string;
      lifetimeS?: number;
    } = {},
  ): { pod: string; proc: Spawned } {
    const pod = `${c.remote}-${o.replica ?? '1'}`;
    const cmd = gatewayPodCommand(c.letter === 'a' ? 'server' : 'client', c.gw, pod, 'worker-1', o.template);
    o.check?.(cmd);
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
      join(this.dir, `${c.letter}-${c.ns}-${cmd.serviceAccount}.kubeconfig`),
      c.ns,
      cmd.serviceAccount,
    );
    const runDir = o.runDir ?? join(this.dir, `run-${pod}`);
    const name = o.name ?? pod;
    const proc = this.topo.spawnIn(
      this.topo.ns(`${c.letter}g`),
      o.name ?? `gw-${pod}`,
      [
        ...(o.prefix ?? []),
        process.execPath,
        WEFT_BIN,
        ...argv,
        ...(o.args ?? []),
        `--kubeconfig=${kc}`,
        `--run-dir=${runDir}`,
      ],
      { lifetimeS: o.lifetimeS ?? 400, env: { ...cmd.env, ...o.env } },
    );
    this.procs.set(name, proc);
    return { pod, proc };
  }

  /** The node agent the fabric DaemonSet runs on worker-1, as a process in Xn (host network): `procs.get('node-X')`. */
  startNodeAgent(c: LiqoCluster, o: { args?: string[]; lifetimeS?: number } = {}): Spawned {
    const cmd = nodeAgentCommand(c.id, 'worker-1', 'weft-fabric-w1', NODE_HOST_IP);
    const kc = saKubeconfig(
      c.server,
      join(this.dir, `${c.letter}-${LIQO_NAMESPACE}-${cmd.serviceAccount}.kubeconfig`),
      LIQO_NAMESPACE,
      cmd.serviceAccount,
    );
    const proc = this.topo.spawnIn(
      this.topo.ns(`${c.letter}n`),
      `node-${c.letter}`,
      [
        process.execPath,
        WEFT_BIN,
        ...cmd.args,
        ...(o.args ?? []),
        `--kubeconfig=${kc}`,
        `--run-dir=${join(this.dir, `run-node-${c.letter}`)}`,
      ],
      { lifetimeS: o.lifetimeS ?? 400, env: cmd.env },
    );
    this.procs.set(`node-${c.letter}`, proc);
    return proc;
  }

  // Arrow properties: a test may take them out of the pair (`const { status, podNs } = pair`).

  /** Cluster c's Connection status (as the gateway wrote it). */
  readonly status = (c: LiqoCluster): { value?: string; latency?: { value?: string } } | undefined =>
    c.server.getObject(NET, 'connections', c.ns, `gw-${c.remote}`)?.['status'] as
      { value?: string; latency?: { value?: string } } | undefined;

  /** The `networking.liqo.io/active` label of gateway pod `pod` in cluster c. */
  readonly activeLabel = (c: LiqoCluster, pod: string): string | undefined =>
    c.server.getObject('v1', 'pods', c.ns, pod)?.metadata.labels?.['networking.liqo.io/active'];

  readonly podNs = (l: Letter): string => this.topo.ns(`${l}p`);

  /** The last `chars` of every process's output, for a failed test's log. */
  readonly diag = (chars = 1500): string =>
    [...this.procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-chars)}`).join('\n');

  /** Relays, API servers and `dir` (the Topology is the test's to clean up). */
  async stop(): Promise<void> {
    for (const r of this.relays) r.close();
    for (const c of this.clusters.values()) await c.server.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The peering deploy/liqo runs (Liqo mode: the Firewall- and RouteConfigurations Liqo creates are
 * the contract) with gateway a's endpoint at `endpoint` and spec.endpoint.ports `ports`, and the
 * MSS clamp as a default Liqo install renders it (Helm's object: value "0", the tunnel route's MTU)
 * instead of the generated one.
 */
export function helmClampPeering(endpoint: string, ports: number[]): Parameters<LiqoPair['startCluster']>[2] {
  return {
    side: { endpoint: { address: endpoint, port: ports[0]! }, ports, liqoMode: { mss: 1300 } },
    extra: (side) => [
      {
        plural: 'firewallconfigurations',
        objects: liqoFirewallConfigurations(side).map((o) =>
          (o as { metadata?: { name?: string } }).metadata?.name === 'gw-mss-clamping'
            ? asStored(helmMssClamp(LIQO_NAMESPACE))
            : o,
        ),
      },
    ],
  };
}
