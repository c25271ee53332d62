/**
 * Small YAML-mode clusters for the e2e tests that run `weft` data planes as child processes
 * started from dist/ (ipv6-remap.test.ts, overlapping-peers.test.ts): per cluster X a gateway
 * namespace Xg (underlay 198.18.0.1) joined to a node namespace Xn (198.18.0.2, forwarding) and a
 * pod namespace Xp behind the node (10.0.1.0/24, routing 10.0.0.0/8 through it); the gateway and
 * node agent run from configs written as JSON (JSON is YAML: the loader reads it as is), and a
 * TCP echo server in the pod answers each connection with the address it came from.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { GatewayStats } from '../../src/gateway/gateway-stats.js';
import { waitFor, type Spawned, type Topology } from '../util/netns.js';
import { launchArgv, statsOf, waitReady } from './fabric-topology.js';

const ROOT = resolve(import.meta.dirname, '../..');
const ECHO_PORT = 8080;

/** A node script answering every TCP connection on ECHO_PORT at `host` with the address it came from. */
function echoServerJs(host: string): string {
  return `require('net').createServer((s) => s.end(s.remoteAddress + '\\n')).listen(${ECHO_PORT}, '${host}')`;
}

/** A node script printing what the echo server at `addr` answers ('error <code>' or 'timeout' else). */
function tcpClientJs(addr: string): string {
  return (
    `const s = require('net').connect(${ECHO_PORT}, '${addr}'); let b = ''; s.on('data', (d) => b += d); s.on('end', () => { console.log(b.trim()); process.exit(0); });` +
    ` s.on('error', (e) => { console.log('error ' + e.code); process.exit(1); }); setTimeout(() => { console.log('timeout'); process.exit(1); }, 5000);`
  );
}

export interface ClusterNamespaces {
  gw: string;
  node: string;
  pod: string;
}

/** A WireGuard key pair per cluster letter. */
export function clusterKeys(letters: readonly string[]): Record<string, { priv: string; pub: string }> {
  const backend = getCryptoBackend('auto');
  const keys: Record<string, { priv: string; pub: string }> = {};
  for (const c of letters) {
    const priv = generatePrivateKeyBase64(backend);
    keys[c] = { priv, pub: publicKeyBase64(backend, priv) };
  }
  return keys;
}

/** Cluster `c`'s node-agent config: node-0 at 198.18.0.2, Geneve VNI 1 to the gateway at 198.18.0.1. */
export function nodeConfig(
  c: string,
  o: {
    podCIDRs: string[];
    internalCIDR: string;
    tunName: string;
    gatewayInternalAddress: string;
    localInternalAddress: string;
    remoteCIDRs: string[];
  },
): Record<string, unknown> {
  return {
    role: 'node',
    cluster: { id: `cluster-${c}`, podCIDRs: o.podCIDRs, internalCIDR: o.internalCIDR },
    node: {
      name: 'node-0',
      underlayAddress: '198.18.0.2',
      tunName: o.tunName,
      mtu: 1340,
      gateways: [
        {
          name: 'gateway',
          vni: 1,
          gatewayUnderlay: '198.18.0.1',
          gatewayInternalAddress: o.gatewayInternalAddress,
          localInternalAddress: o.localInternalAddress,
          remoteCIDRs: o.remoteCIDRs,
        },
      ],
    },
  };
}

/** The clusters of one test: their namespaces (`ns[c]`) and processes (`procs`). */
export class YamlClusters {
  readonly procs: Record<string, Spawned> = {};
  readonly ns: Record<string, ClusterNamespaces> = {};

  constructor(readonly topo: Topology) {}

  /** Cluster `c`'s gateway, node and pod namespaces (the pod at `podAddr`, a /24 CIDR). */
  add(c: string, podAddr: string): ClusterNamespaces {
    const { topo } = this;
    const gw = topo.addNamespace(`${c}g`);
    const node = topo.addNamespace(`${c}n`);
    const pod = topo.addNamespace(`${c}p`);
    topo.link(gw, `${c}g-n`, '198.18.0.1/24', node, `${c}n-g`, '198.18.0.2/24');
    topo.link(node, `${c}n-p`, '10.0.1.1/24', pod, `${c}p-n`, podAddr);
    topo.exec(node, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    topo.exec(pod, ['ip', 'route', 'add', '10.0.0.0/8', 'via', '10.0.1.1']);
    return (this.ns[c] = { gw, node, pod });
  }

  /**
   * Writes cluster `c`'s configs to `dir` and starts its gateway, node agent and pod echo server
   * (`procs[cgw]`, `procs[cnode]`, `procs[cecho]`), each bounded by `lifetimeS`.
   */
  start(o: { c: string; dir: string; gw: unknown; node: unknown; echoHost: string; lifetimeS: number }): void {
    const { c, dir } = o;
    const ns = this.ns[c]!;
    writeFileSync(join(dir, `${c}-gw.yaml`), JSON.stringify(o.gw));
    writeFileSync(join(dir, `${c}-node.yaml`), JSON.stringify(o.node));
    this.procs[`${c}gw`] = this.topo.spawnIn(ns.gw, `gateway-${c}`, launchArgv(ROOT, join(dir, `${c}-gw.yaml`)), {
      lifetimeS: o.lifetimeS,
    });
    this.procs[`${c}node`] = this.topo.spawnIn(ns.node, `node-${c}`, launchArgv(ROOT, join(dir, `${c}-node.yaml`)), {
      lifetimeS: o.lifetimeS,
    });
    this.procs[`${c}echo`] = this.topo.spawnIn(ns.pod, `echo-${c}`, ['node', '-e', echoServerJs(o.echoHost)], {
      lifetimeS: o.lifetimeS,
    });
  }

  /**
   * Every gateway and node agent ready (one that exits fails with its output); gateway a
   * (`procs.agw`) connected to `peers` peers (`label`); every pod's echo server listening.
   */
  async ready(o: { peers: number; label: string }): Promise<void> {
    const { topo, procs, ns } = this;
    for (const p of Object.values(procs).filter((x) => x.name.startsWith('gateway') || x.name.startsWith('node')))
      await waitReady(p);
    await waitFor(
      o.label,
      async () => {
        const st = await statsOf<GatewayStats>(procs.agw!);
        return st.peers.length === o.peers && st.peers.every((p) => p.connected);
      },
      15_000,
      300,
    );
    for (const c of Object.keys(ns))
      await waitFor(
        `echo server in ${c}`,
        () => topo.exec(ns[c]!.pod, ['ss', '-Hlnt'], { allowFail: true }).includes(`:${ECHO_PORT}`),
        10_000,
      );
  }

  /** What the echo server at `to` answers the pod of cluster `from` (the address it saw). */
  readonly client = (from: string, to: string): string =>
    this.topo.exec(this.ns[from]!.pod, ['node', '-e', tcpClientJs(to)], { allowFail: true, timeoutMs: 8000 }).trim();
}
