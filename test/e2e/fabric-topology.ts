/**
 * Namespace topologies for the fabric tests and bench: one or two "clusters", each a gateway
 * namespace with node namespaces joined to it by veth underlays (Geneve 6091), and one pod
 * namespace per node (veth to its node; the node forwards). Two clusters are joined by a "WAN"
 * veth between the gateways (WireGuard 51840). Both clusters use pod CIDR 10.0.0.0/16; each sees
 * the other's pods as 10.71.0.0/16 and its external CIDR (10.70.0.0/16) as 10.72.0.0/16.
 *
 * Addresses (cluster index c = 0, 1; node index i = 0, 1, ...):
 *   underlay gateway side 198.18.(16c+i+1).1/24, node side .2
 *   pod 10.0.(i+1).2/24 on node 10.0.(i+1).1; pods route 10.0.0.0/8 via their node
 *   internal: gateway 10.80.0.1, node i 10.80.0.(i+2)
 *   WAN gateway c: 198.19.0.(c+1)/24
 * Names: namespaces `wf<cluster letter><g|n<i>|p<i>>`, interfaces ≤ 15 characters.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { parseConfig, type GatewayConfig, type NodeConfig } from '../../src/control/config.js';
import { waitFor, type Spawned, type Topology } from '../util/netns.js';

export interface FabricCluster {
  letter: string;
  gwNs: string;
  nodeNs: string[];
  podNs: string[];
  /** Real pod addresses, by node. */
  podAddr: string[];
  /** Node underlay addresses (node side). */
  nodeUnderlay: string[];
  gatewayUnderlay: string[];
  /** Interface names on the gateway side of each node underlay (for captures). */
  gwUnderlayIf: string[];
  gatewayConfig: GatewayConfig;
  gatewayConfigPath: string;
  nodeConfigs: NodeConfig[];
  nodeConfigPaths: string[];
  privateKey: string;
  publicKey: string;
}

export interface FabricOptions {
  clusters: 1 | 2;
  nodesPerCluster: number;
  /** Underlay MTU. Default 1500. */
  underlayMtu?: number;
  /** TUN/WireGuard MTU (Liqo 1340). Default 1340. */
  mtu?: number;
}

export const REMAPPED_PODS = '10.71.0.0/16';
export const REMAPPED_EXTERNAL = '10.72.0.0/16';
export const GATEWAY_INTERNAL = '10.80.0.1';

export function podAddress(i: number): string {
  return `10.0.${i + 1}.2`;
}

/** The remote cluster's view of a pod address (10.0.x.y → 10.71.x.y). */
export function remapped(podAddr: string): string {
  return podAddr.replace(/^10\.0\./, '10.71.');
}

/** Builds the namespaces and writes YAML-equivalent configs (validated through parseConfig). */
export function buildFabric(topo: Topology, opts: FabricOptions): FabricCluster[] {
  const backend = getCryptoBackend('auto');
  const dir = mkdtempSync(join(tmpdir(), 'weft-fabric-'));
  const mtu = opts.mtu ?? 1340;
  const underMtu = opts.underlayMtu ?? 1500;
  const clusters: FabricCluster[] = [];
  const keys = Array.from({ length: opts.clusters }, () => {
    const priv = generatePrivateKeyBase64(backend);
    return { priv, pub: publicKeyBase64(backend, priv) };
  });
  for (let c = 0; c < opts.clusters; c++) {
    const L = String.fromCharCode(97 + c);
    const gwNs = topo.addNamespace(`${L}g`);
    const cl: FabricCluster = {
      letter: L,
      gwNs,
      nodeNs: [],
      podNs: [],
      podAddr: [],
      nodeUnderlay: [],
      gatewayUnderlay: [],
      gwUnderlayIf: [],
      gatewayConfig: undefined as unknown as GatewayConfig,
      gatewayConfigPath: '',
      nodeConfigs: [],
      nodeConfigPaths: [],
      privateKey: keys[c]!.priv,
      publicKey: keys[c]!.pub,
    };
    for (let i = 0; i < opts.nodesPerCluster; i++) {
      const nodeNs = topo.addNamespace(`${L}n${i}`);
      const podNs = topo.addNamespace(`${L}p${i}`);
      const net = 16 * c + i + 1;
      topo.link(gwNs, `${L}g-n${i}`, `198.18.${net}.1/24`, nodeNs, `${L}n${i}-g`, `198.18.${net}.2/24`, underMtu);
      topo.link(nodeNs, `${L}n${i}-p`, `10.0.${i + 1}.1/24`, podNs, `${L}p${i}-n`, `10.0.${i + 1}.2/24`);
      topo.exec(nodeNs, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      topo.exec(podNs, ['ip', 'route', 'add', '10.0.0.0/8', 'via', `10.0.${i + 1}.1`]);
      cl.nodeNs.push(nodeNs);
      cl.podNs.push(podNs);
      cl.podAddr.push(podAddress(i));
      cl.nodeUnderlay.push(`198.18.${net}.2`);
      cl.gatewayUnderlay.push(`198.18.${net}.1`);
      cl.gwUnderlayIf.push(`${topo.prefix}${L}g-n${i}`);
    }
    clusters.push(cl);
  }
  if (opts.clusters === 2) {
    topo.link(clusters[0]!.gwNs, 'ag-wan', '198.19.0.1/24', clusters[1]!.gwNs, 'bg-wan', '198.19.0.2/24', underMtu);
  }
  for (let c = 0; c < opts.clusters; c++) {
    const cl = clusters[c]!;
    const other = opts.clusters === 2 ? clusters[1 - c]! : undefined;
    const n = opts.nodesPerCluster;
    const raw = {
      role: 'gateway',
      cluster: {
        id: `cluster-${cl.letter}`,
        podCIDRs: ['10.0.0.0/16'],
        externalCIDR: '10.70.0.0/16',
        internalCIDR: '10.80.0.0/16',
      },
      wireguard: { privateKey: cl.privateKey, listenPort: 51840, mtu, interfaceName: `${topo.prefix}${cl.letter}gt` },
      peers:
        other === undefined
          ? []
          : [
              {
                name: `cluster-${other.letter}`,
                clusterId: `cluster-${other.letter}`,
                publicKey: other.publicKey,
                endpoint: `198.19.0.${2 - c}:51840`,
                remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
                remapped: { podCIDRs: [REMAPPED_PODS], externalCIDRs: [REMAPPED_EXTERNAL] },
              },
            ],
      geneve: {
        tunnels: Array.from({ length: n }, (_, i) => ({
          id: i + 1,
          nodeName: `node-${i}`,
          remoteUnderlay: cl.nodeUnderlay[i],
          localInternalAddress: GATEWAY_INTERNAL,
          remoteInternalAddress: `10.80.0.${i + 2}`,
        })),
        podRoutes: Array.from({ length: n }, (_, i) => ({
          podCIDR: `10.0.${i + 1}.0/24`,
          nodeInternalAddress: `10.80.0.${i + 2}`,
        })),
      },
    };
    cl.gatewayConfig = parseConfig(raw, `${cl.letter}-gateway`) as GatewayConfig;
    cl.gatewayConfigPath = join(dir, `${cl.letter}-gateway.yaml`);
    writeFileSync(cl.gatewayConfigPath, JSON.stringify(raw));
    for (let i = 0; i < n; i++) {
      const remote = [
        ...Array.from({ length: n }, (_, j) => j)
          .filter((j) => j !== i)
          .map((j) => `10.0.${j + 1}.0/24`),
        ...(other === undefined ? [] : [REMAPPED_PODS, REMAPPED_EXTERNAL]),
      ];
      const nraw = {
        role: 'node',
        cluster: { id: `cluster-${cl.letter}`, podCIDRs: [`10.0.${i + 1}.0/24`], internalCIDR: '10.80.0.0/16' },
        node: {
          name: `node-${i}`,
          underlayAddress: cl.nodeUnderlay[i],
          tunName: `${topo.prefix}${cl.letter}n${i}t`,
          mtu,
          gateways: [
            {
              name: 'gateway',
              vni: i + 1,
              gatewayUnderlay: cl.gatewayUnderlay[i],
              gatewayInternalAddress: GATEWAY_INTERNAL,
              localInternalAddress: `10.80.0.${i + 2}`,
              remoteCIDRs: remote,
            },
          ],
        },
      };
      cl.nodeConfigs.push(parseConfig(nraw, `${cl.letter}-node-${i}`) as NodeConfig);
      // JSON is YAML: the loader reads it as is.
      const p = join(dir, `${cl.letter}-node-${i}.yaml`);
      writeFileSync(p, JSON.stringify(nraw));
      cl.nodeConfigPaths.push(p);
    }
  }
  return clusters;
}

/** argv that runs a data plane from a config file until SIGTERM (prints "ready <role>"). */
export function launchArgv(root: string, configPath: string): string[] {
  const entry = join(root, 'dist/src/daemon/launch.js');
  return [
    'node',
    '--input-type=module',
    '-e',
    `const m = await import(${JSON.stringify(entry)}); process.exitCode = await m.runUntilSignal(${JSON.stringify(configPath)});`,
  ];
}

/** Waits for a data plane started with launchArgv to print "ready <role>"; one that exits fails with its output. */
export async function waitReady(p: Spawned): Promise<void> {
  await waitFor(
    `${p.name} ready`,
    () =>
      /ready (gateway|node)/.test(p.output()) || (p.child.exitCode !== null && Promise.reject(new Error(p.output()))),
    15_000,
  );
}

/**
 * Asks a data plane started with launchArgv for its stats (SIGUSR1 → one "stats <json>" line)
 * and returns the parsed object of the newest line.
 */
export async function statsOf<T = Record<string, unknown>>(p: {
  pid: number;
  output(): string;
  child: { pid?: number };
}): Promise<T> {
  const complete = (): string[] => {
    const all = p.output().split('\n');
    all.pop();
    return all.filter((l) => l.startsWith('stats '));
  };
  const before = complete().length;
  // The launcher runs under `timeout … ip netns exec … node`: signal the node process itself.
  const { execFileSync } = await import('node:child_process');
  const pids = execFileSync('pgrep', ['-P', String(p.pid)], { encoding: 'utf8' })
    .trim()
    .split(/\s+/);
  let target = Number(pids[0]);
  for (let depth = 0; depth < 3; depth++) {
    let kids: string[] = [];
    try {
      kids = execFileSync('pgrep', ['-P', String(target)], { encoding: 'utf8' })
        .trim()
        .split(/\s+/)
        .filter(Boolean);
    } catch {
      kids = [];
    }
    if (kids.length === 0) break;
    target = Number(kids[0]);
  }
  process.kill(target, 'SIGUSR1');
  const deadline = Date.now() + 5000;
  for (;;) {
    const lines = complete();
    if (lines.length > before) return JSON.parse(lines[lines.length - 1]!.slice(6)) as T;
    if (Date.now() > deadline) throw new Error(`no stats line from ${p.pid}: ${p.output().slice(-500)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
