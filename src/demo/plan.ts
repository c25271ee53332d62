/**
 * The demo's addressing plan: two Liqo-like clusters, each with one gateway and two nodes with two
 * pods each, and the configuration files (YAML, role gateway / node) every process is started
 * with. Pure: no I/O, no randomness (keys are passed in), so tests can check the plan and the
 * generated files against the configuration schema without root.
 *
 * The plan (cluster A and B are mirror images; every name below is stable so that a crashed run
 * can be cleaned up by name, `weft demo --cleanup`):
 *
 *   A1 10.0.1.11 ─┐                                                      ┌─ B1 10.0.1.21
 *   A2 10.0.1.12 ─┴─ worker-1 172.18.0.2 ─┐              ┌─ worker-1 172.19.0.2 ─┴─ B2 10.0.1.22
 *                                         ├─ gateway A ══ WAN ══ gateway B ─┤
 *   A3 10.0.2.13 ─┬─ worker-2 172.18.0.3 ─┘  198.18.0.1    198.18.0.2  └─ worker-2 172.19.0.3 ─┬─ B3 10.0.2.23
 *   A4 10.0.2.14 ─┘                                                      └─ B4 10.0.2.24
 *
 * - Both clusters use the SAME pod CIDR 10.0.0.0/16 (worker-1 10.0.1.0/24, worker-2 10.0.2.0/24),
 *   Liqo's default external CIDR 10.70.0.0/16 and internal CIDR 10.80.0.0/16 (gateway .1,
 *   worker-1 .2, worker-2 .3). Host parts differ between the clusters (A pods .1x, B pods .2x) so
 *   that a packet wrongly delivered inside its own cluster finds no pod instead of a twin.
 * - Remapping (Liqo Configuration.status.remote.cidr), symmetric: EACH cluster addresses the
 *   other's pods as 10.71.0.0/16 and the other's external CIDR as 10.72.0.0/16. So A reaches B3
 *   (10.0.2.23) as 10.71.2.23, and B3 sees A1 (10.0.1.11) as 10.71.1.11. Host-network traffic of
 *   a node of A is SNATed by gateway A to its external CIDR's first address 10.70.0.0, which B
 *   addresses as 10.72.0.0: that is the source a B pod sees.
 * - Underlay (Geneve, UDP 6091, one tunnel per node, VNI 0 and 1): a bridge in the gateway's
 *   namespace, A 172.18.0.0/24, B 172.19.0.0/24, gateway .1.
 * - WAN (WireGuard, UDP 51840, MTU 1340): a veth between the gateways, 198.18.0.1 (A, the
 *   client: it has B's endpoint) and 198.18.0.2 (B, the server: it learns A's endpoint), inside
 *   the benchmarking range 198.18.0.0/15 so nothing is ever routed off the machine.
 * - Pods reach their node Calico-style: the pod has its /32 and a route for 10.0.0.0/8 (no
 *   default route) via 169.254.1.1, an address of the node's end of the pod veth; the node has a
 *   /32 route per pod and forwards.
 */
import { stringify } from 'yaml';
import type { WeftConfigInput } from '../control/config.js';

export type ClusterKey = 'a' | 'b';

export interface DemoPod {
  /** "A1" .. "B4". */
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  /** Interface inside the pod's namespace. */
  readonly podIf: string;
  /** The pod veth's other end, inside the node's namespace. */
  readonly nodeIf: string;
}

export interface DemoNode {
  /** Kubernetes node name ("worker-1"). */
  readonly name: string;
  /** Short label used in interface names ("n1"). */
  readonly label: string;
  readonly ns: string;
  /** Underlay address (Geneve source) and its prefix length. */
  readonly underlay: string;
  /** Node's underlay interface, and the gateway-side port of that veth (bridged). */
  readonly underlayIf: string;
  readonly gatewayPortIf: string;
  /** The node's address in the internal CIDR (its TUN address). */
  readonly internal: string;
  /** Geneve VNI of the gateway ↔ node tunnel (GeneveTunnel.spec.id). */
  readonly vni: number;
  readonly podCIDR: string;
  readonly pods: readonly DemoPod[];
  /** Name of the node agent's TUN device. */
  readonly tunName: string;
}

export interface DemoCluster {
  readonly key: ClusterKey;
  /** Liqo cluster ID. */
  readonly id: string;
  /** "A" or "B" (for pod names and output). */
  readonly label: string;
  readonly gatewayNs: string;
  readonly podCIDR: string;
  readonly externalCIDR: string;
  readonly internalCIDR: string;
  /** First address of the external CIDR: the SNAT source of this cluster's host traffic. */
  readonly snatAddress: string;
  readonly gatewayInternal: string;
  readonly gatewayUnderlay: string;
  readonly underlayPrefixLen: number;
  /** Bridge in the gateway namespace that joins the underlay veths. */
  readonly bridgeIf: string;
  readonly wanIf: string;
  readonly wanAddress: string;
  readonly nodes: readonly DemoNode[];
  readonly pods: readonly DemoPod[];
  /** How THIS cluster addresses the OTHER cluster's pod / external CIDR. */
  readonly remappedPeerPodCIDR: string;
  readonly remappedPeerExternalCIDR: string;
}

export interface DemoPlan {
  readonly prefix: string;
  readonly a: DemoCluster;
  readonly b: DemoCluster;
  readonly wanPrefixLen: number;
  readonly wireguardPort: number;
  readonly genevePort: number;
  /** Tunnel MTU (Liqo's 1340) for WireGuard. */
  readonly mtu: number;
  /** Address the node side of every pod veth holds (the pods' default gateway). */
  readonly podGateway: string;
}

/** The keys of both gateways (base64, as `wg genkey` / `wg pubkey` print them). */
export interface DemoKeys {
  readonly a: { readonly privateKey: string; readonly publicKey: string };
  readonly b: { readonly privateKey: string; readonly publicKey: string };
}

/** Errors in what the caller asked for (bad prefix). */
export class DemoPlanError extends Error {
  override readonly name = 'DemoPlanError';
}

const MAX_IFNAME = 15;
/** Namespace prefixes are kept short and plain: they become part of every namespace name. */
const PREFIX_RE = /^[a-z][a-z0-9]{0,5}$/;

export const DEMO_DEFAULT_PREFIX = 'wd';
/** The remapped CIDRs each cluster uses for the other (see the file header). */
export const REMAPPED_POD_CIDR = '10.71.0.0/16';
export const REMAPPED_EXTERNAL_CIDR = '10.72.0.0/16';

interface ClusterSeed {
  key: ClusterKey;
  label: string;
  /** Third octet of the underlay /24 (172.18 / 172.19). */
  underlayNet: string;
  wanAddress: string;
  /** Host part base of the pods: A pods are .11-.14, B pods .21-.24. */
  podHostBase: number;
}

const SEEDS: readonly ClusterSeed[] = [
  { key: 'a', label: 'A', underlayNet: '172.18.0', wanAddress: '198.18.0.1', podHostBase: 10 },
  { key: 'b', label: 'B', underlayNet: '172.19.0', wanAddress: '198.18.0.2', podHostBase: 20 },
];

function buildCluster(prefix: string, s: ClusterSeed): DemoCluster {
  const nodes: DemoNode[] = [];
  const pods: DemoPod[] = [];
  let podIndex = 0;
  for (let n = 1; n <= 2; n++) {
    const nodePods: DemoPod[] = [];
    for (let p = 0; p < 2; p++) {
      podIndex++;
      const pod: DemoPod = {
        name: `${s.label}${podIndex}`,
        ns: `${prefix}-${s.key}-p${podIndex}`,
        ip: `10.0.${n}.${s.podHostBase + podIndex}`,
        podIf: 'eth0',
        nodeIf: `pod${podIndex}`,
      };
      nodePods.push(pod);
      pods.push(pod);
    }
    nodes.push({
      name: `worker-${n}`,
      label: `n${n}`,
      ns: `${prefix}-${s.key}-n${n}`,
      underlay: `${s.underlayNet}.${n + 1}`,
      underlayIf: 'eth0',
      gatewayPortIf: `n${n}`,
      internal: `10.80.0.${n + 1}`,
      vni: n - 1,
      podCIDR: `10.0.${n}.0/24`,
      pods: nodePods,
      tunName: 'weft0',
    });
  }
  const c: DemoCluster = {
    key: s.key,
    id: `cluster-${s.key}`,
    label: s.label,
    gatewayNs: `${prefix}-${s.key}-gw`,
    podCIDR: '10.0.0.0/16',
    externalCIDR: '10.70.0.0/16',
    internalCIDR: '10.80.0.0/16',
    snatAddress: '10.70.0.0',
    gatewayInternal: '10.80.0.1',
    gatewayUnderlay: `${s.underlayNet}.1`,
    underlayPrefixLen: 24,
    bridgeIf: 'br0',
    wanIf: 'wan',
    wanAddress: s.wanAddress,
    nodes,
    pods,
    remappedPeerPodCIDR: REMAPPED_POD_CIDR,
    remappedPeerExternalCIDR: REMAPPED_EXTERNAL_CIDR,
  };
  for (const n of c.nodes) {
    for (const name of [n.underlayIf, n.gatewayPortIf, n.tunName, ...n.pods.flatMap((p) => [p.podIf, p.nodeIf])]) {
      if (name.length > MAX_IFNAME)
        throw new DemoPlanError(`interface name ${name} is longer than ${MAX_IFNAME} characters`);
    }
  }
  return c;
}

/**
 * The plan for namespace prefix `prefix` (default "wd" for `weft demo`; tests use their own so a
 * test never touches a running demo). Throws DemoPlanError for a prefix that is not 1-6
 * lowercase letters/digits starting with a letter.
 */
export function buildPlan(prefix: string = DEMO_DEFAULT_PREFIX): DemoPlan {
  if (!PREFIX_RE.test(prefix)) {
    throw new DemoPlanError(
      `namespace prefix ${JSON.stringify(prefix)} must be 1-6 lowercase letters or digits, starting with a letter`,
    );
  }
  return {
    prefix,
    a: buildCluster(prefix, SEEDS[0]!),
    b: buildCluster(prefix, SEEDS[1]!),
    wanPrefixLen: 24,
    wireguardPort: 51840,
    genevePort: 6091,
    mtu: 1340,
    podGateway: '169.254.1.1',
  };
}

/** Every namespace of the plan, gateways first (the order they are created in). */
export function planNamespaces(plan: DemoPlan): string[] {
  const out: string[] = [];
  for (const c of [plan.a, plan.b]) {
    out.push(c.gatewayNs);
    for (const n of c.nodes) out.push(n.ns);
    for (const p of c.pods) out.push(p.ns);
  }
  return out;
}

export function otherCluster(plan: DemoPlan, c: DemoCluster): DemoCluster {
  return c.key === 'a' ? plan.b : plan.a;
}

/** Replace the network part of `addr` (inside `from`, a /16 here) by `to`'s: 1:1 prefix translation. */
export function translateAddress(addr: string, from: string, to: string): string {
  const [fromNet, fromLenText] = from.split('/');
  const [toNet, toLenText] = to.split('/');
  const len = Number(fromLenText);
  if (len !== Number(toLenText) || !fromNet || !toNet)
    throw new DemoPlanError(`cannot translate between ${from} and ${to}`);
  const a = ipv4ToInt(addr);
  const f = ipv4ToInt(fromNet);
  const t = ipv4ToInt(toNet);
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  if ((a & mask) >>> 0 !== (f & mask) >>> 0) throw new DemoPlanError(`${addr} is not inside ${from}`);
  return intToIpv4(((t & mask) | (a & ~mask)) >>> 0);
}

function ipv4ToInt(text: string): number {
  const parts = text.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
    throw new DemoPlanError(`not an IPv4 address: ${text}`);
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

function intToIpv4(v: number): string {
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

/** How cluster `viewer` addresses `pod` of the other cluster (its remapped address). */
export function remotePodAddress(plan: DemoPlan, viewer: DemoCluster, pod: DemoPod): string {
  const owner = otherCluster(plan, viewer);
  if (!owner.pods.includes(pod))
    throw new DemoPlanError(`pod ${pod.name} is not in the cluster peered with ${viewer.id}`);
  return translateAddress(pod.ip, owner.podCIDR, viewer.remappedPeerPodCIDR);
}

/** The source address a pod of `viewer` sees for host-network traffic from a node of the other cluster. */
export function remoteSnatAddress(plan: DemoPlan, viewer: DemoCluster): string {
  const owner = otherCluster(plan, viewer);
  return translateAddress(owner.snatAddress, owner.externalCIDR, viewer.remappedPeerExternalCIDR);
}

export function findPod(plan: DemoPlan, name: string): DemoPod {
  for (const c of [plan.a, plan.b]) {
    const p = c.pods.find((x) => x.name === name);
    if (p) return p;
  }
  throw new DemoPlanError(`no pod named ${name} in the plan`);
}

/** The pods the demo's checks use, and the addresses the other cluster knows them (and B's node SNAT) by. */
export function checkedPods(plan: DemoPlan) {
  const A1 = findPod(plan, 'A1');
  const A2 = findPod(plan, 'A2');
  const A3 = findPod(plan, 'A3');
  const B1 = findPod(plan, 'B1');
  const B3 = findPod(plan, 'B3');
  const B4 = findPod(plan, 'B4');
  return {
    A1,
    A2,
    A3,
    B1,
    B3,
    B4,
    b3AtA: remotePodAddress(plan, plan.a, B3),
    b1AtA: remotePodAddress(plan, plan.a, B1),
    a1AtB: remotePodAddress(plan, plan.b, A1),
    a2AtB: remotePodAddress(plan, plan.b, A2),
    a3AtB: remotePodAddress(plan, plan.b, A3),
    snatAtB: remoteSnatAddress(plan, plan.b),
  };
}

export function clusterOfPod(plan: DemoPlan, pod: DemoPod): DemoCluster {
  return plan.a.pods.includes(pod) ? plan.a : plan.b;
}

export function nodeOfPod(plan: DemoPlan, pod: DemoPod): DemoNode {
  for (const c of [plan.a, plan.b]) for (const n of c.nodes) if (n.pods.includes(pod)) return n;
  throw new DemoPlanError(`pod ${pod.name} has no node`);
}

// ---------------------------------------------------------------------------------------------
// Configuration files

export interface ConfigOptions {
  /** Reference the key by file (written next to the YAML, mode 0600) instead of inline. Default true. */
  keyFile?: boolean;
  logLevel?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Crypto backend for the gateways; default 'auto'. */
  cryptoBackend?: 'auto' | 'node' | 'pure';
}

/** File name of a gateway's private key, relative to the configuration directory. */
export function keyFileName(c: DemoCluster): string {
  return `gateway-${c.key}.key`;
}

/** The gateway configuration of cluster `c` (before schema defaults: what the YAML file holds). */
export function gatewayConfig(
  plan: DemoPlan,
  c: DemoCluster,
  keys: DemoKeys,
  opts: ConfigOptions = {},
): WeftConfigInput {
  const peer = otherCluster(plan, c);
  const own = keys[c.key];
  const peerKeys = keys[peer.key];
  const useFile = opts.keyFile ?? true;
  return {
    role: 'gateway',
    cluster: clusterSection(c),
    wireguard: {
      ...(useFile ? { privateKeyFile: keyFileName(c) } : { privateKey: own.privateKey }),
      listenPort: plan.wireguardPort,
      mtu: plan.mtu,
      ...(opts.cryptoBackend ? { cryptoBackend: opts.cryptoBackend } : {}),
    },
    peers: [
      {
        name: peer.id,
        clusterId: peer.id,
        publicKey: peerKeys.publicKey,
        // A is the WireGuard client (Liqo GatewayClient): it knows the server's endpoint. B, the
        // server, learns A's endpoint from the first handshake.
        ...(c.key === 'a' ? { endpoint: `${peer.wanAddress}:${plan.wireguardPort}` } : {}),
        remote: { podCIDRs: [peer.podCIDR], externalCIDRs: [peer.externalCIDR] },
        remapped: { podCIDRs: [c.remappedPeerPodCIDR], externalCIDRs: [c.remappedPeerExternalCIDR] },
      },
    ],
    geneve: {
      port: plan.genevePort,
      tunnels: c.nodes.map((n) => ({
        id: n.vni,
        nodeName: n.name,
        remoteUnderlay: n.underlay,
        localInternalAddress: c.gatewayInternal,
        remoteInternalAddress: n.internal,
        mode: 'l3' as const,
      })),
      podRoutes: c.nodes.map((n) => ({ podCIDR: n.podCIDR, nodeInternalAddress: n.internal })),
    },
    logging: { level: opts.logLevel ?? 'warn' },
  };
}

/** The `cluster` section of cluster `c`'s configurations (gateway and nodes alike). */
function clusterSection(c: DemoCluster): WeftConfigInput['cluster'] {
  return { id: c.id, podCIDRs: [c.podCIDR], externalCIDR: c.externalCIDR, internalCIDR: c.internalCIDR };
}

/** The node agent configuration of node `n` of cluster `c`. */
export function nodeConfig(plan: DemoPlan, c: DemoCluster, n: DemoNode, opts: ConfigOptions = {}): WeftConfigInput {
  const peer = otherCluster(plan, c);
  return {
    role: 'node',
    cluster: clusterSection(c),
    node: {
      name: n.name,
      underlayAddress: n.underlay,
      tunName: n.tunName,
      gateways: [
        {
          name: peer.id,
          vni: n.vni,
          gatewayUnderlay: c.gatewayUnderlay,
          gatewayInternalAddress: c.gatewayInternal,
          localInternalAddress: n.internal,
          remoteCIDRs: [c.remappedPeerPodCIDR, c.remappedPeerExternalCIDR],
          mode: 'l3',
        },
      ],
    },
    geneve: { port: plan.genevePort },
    logging: { level: opts.logLevel ?? 'warn' },
  };
}

export interface DemoConfigFile {
  /** File name inside the configuration directory ("gateway-a.yaml", "node-a-worker-1.yaml"). */
  readonly file: string;
  /** Namespace the process runs in. */
  readonly ns: string;
  readonly role: 'gateway' | 'node';
  readonly cluster: ClusterKey;
  /** Human label for progress lines ("gateway A", "node A/worker-1"). */
  readonly label: string;
  readonly yaml: string;
  readonly config: WeftConfigInput;
}

/** YAML text of a configuration object with a comment header. */
export function renderYaml(header: string, config: WeftConfigInput): string {
  const comment = header
    .split('\n')
    .map((l) => `# ${l}`.trimEnd())
    .join('\n');
  return `${comment}\n${stringify(config, { lineWidth: 0 })}`;
}

/** Every process's configuration file: two gateways, then the four node agents. */
export function renderConfigs(plan: DemoPlan, keys: DemoKeys, opts: ConfigOptions = {}): DemoConfigFile[] {
  const out: DemoConfigFile[] = [];
  for (const c of [plan.a, plan.b]) {
    const peer = otherCluster(plan, c);
    const config = gatewayConfig(plan, c, keys, opts);
    out.push({
      file: `gateway-${c.key}.yaml`,
      ns: c.gatewayNs,
      role: 'gateway',
      cluster: c.key,
      label: `gateway ${c.label}`,
      config,
      yaml: renderYaml(
        `weft demo: gateway of ${c.id} (namespace ${c.gatewayNs}), peered with ${peer.id}.\n` +
          `${peer.id}'s pods ${peer.podCIDR} are addressed here as ${c.remappedPeerPodCIDR}, its external CIDR as ${c.remappedPeerExternalCIDR}.\n` +
          'Demo keys, generated for this run only.',
        config,
      ),
    });
  }
  for (const c of [plan.a, plan.b]) {
    for (const n of c.nodes) {
      const config = nodeConfig(plan, c, n, opts);
      out.push({
        file: `node-${c.key}-${n.name}.yaml`,
        ns: n.ns,
        role: 'node',
        cluster: c.key,
        label: `node ${c.label}/${n.name}`,
        config,
        yaml: renderYaml(
          `weft demo: node agent of ${c.id}/${n.name} (namespace ${n.ns}), pods ${n.pods.map((p) => `${p.name} ${p.ip}`).join(', ')}.`,
          config,
        ),
      });
    }
  }
  return out;
}

/** A few lines saying what the demo builds (printed before the progress lines). */
export function describePlan(plan: DemoPlan, simulated = false): string {
  const { a, b } = plan;
  return [
    `Two clusters, ${a.id} and ${b.id}, each with a gateway, two nodes and four pods (${simulated ? 'simulated in one process' : `namespaces ${plan.prefix}-a-*, ${plan.prefix}-b-*`}):`,
    `  both use pod CIDR ${a.podCIDR}, external CIDR ${a.externalCIDR}, internal CIDR ${a.internalCIDR};`,
    `  each addresses the other's pods as ${a.remappedPeerPodCIDR} and the other's external CIDR as ${a.remappedPeerExternalCIDR};`,
    `  gateways: WireGuard on UDP ${plan.wireguardPort} over a veth "WAN" (${a.wanAddress} ⇄ ${b.wanAddress}), MTU ${plan.mtu};`,
    `  nodes ⇄ their gateway: Geneve on UDP ${plan.genevePort} (A ${a.gatewayUnderlay}/${a.underlayPrefixLen}, B ${b.gatewayUnderlay}/${b.underlayPrefixLen}).`,
  ].join('\n');
}

/** One row of the demo's result table. */
export interface DemoRow {
  check: string;
  path: string;
  result: string;
  /** null: informational (no pass/fail). */
  ok: boolean | null;
}
