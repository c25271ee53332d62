/**
 * The objects Liqo's components create in ONE cluster for one peering, for tests that start Weft
 * the way a Liqo cluster would (test/e2e/liqo-pods.test.ts). Each object is shaped as the named
 * component of Liqo makes it (read from github:liqotech/liqo, snapshot 557c199cf41a; re-stated,
 * not copied):
 * - ipam Networks pod-cidr-… / service-cidr / external-cidr / internal-cidr in the Liqo namespace:
 *   the Helm chart's liqo-ipam-networks.yaml rendered (test/k8s-fake/helm-render.ts), status
 *   filled by the ipam;
 * - Configuration REMOTE (tenant namespace liqo-tenant-REMOTE): `liqoctl network` /
 *   the peering; status.remote.cidr (how this cluster addresses the peer) by the remapping
 *   controller (external-network/remapping);
 * - GatewayServer or GatewayClient REMOTE: `liqoctl network connect`; the server's
 *   status.endpoint (from its Service) and status.internalEndpoint (the active gateway pod's IP
 *   and node) by the WgGatewayServer controller (external-network/wireguard);
 * - keys Secret and the peer's PublicKey gw-REMOTE (labelled liqo.io/remote-cluster-id);
 * - InternalFabric named like the remote cluster (utils/internalfabric.go ForgeInternalFabricName)
 *   by internal-network/server-controller or client-controller: spec.gatewayIP = the gateway's
 *   status.internalEndpoint.ip, mtu = the gateway's, interface.gateway.ip from the fabric IPAM
 *   (internal CIDR), interface.node.name "liqo.<random>", remoteCIDRs = status.remote pod ++
 *   external; controlled by the GatewayServer/GatewayClient;
 * - InternalNode per node (cluster-scoped) by internal-network/node-controller:
 *   spec.interface.node.ip from the fabric IPAM, interface.gateway.name "liqo.<random>"; its
 *   status.nodeIP is left to the fabric's source detector (Weft's node agent writes it);
 * - GeneveTunnel FABRIC-NODE per (InternalFabric, InternalNode) by
 *   internalfabric-controller/genevetunnel.go: labels networking.liqo.io/internal-fabric-name and
 *   internal-node-name, spec.id from the tunnel-id allocator (from 0), refs, controlled by the fabric;
 * - RouteConfiguration FABRIC-node-gw (fabric namespace, label route-category=fabric) by
 *   internalfabric-controller/route.go: the nodes' routes to the gateway (gateway internal /32 via
 *   the node interface, every remote CIDR via the gateway internal address);
 * - RouteConfiguration NODE-gw-node in the Liqo namespace (labels route-category=gateway,
 *   route-subcategory=fabric) by internal-network/route/pod_k8s.go, owned by the InternalNode:
 *   rule 0 the node's internal /32 via the gateway interface, rule 1 (iif liqo-tunnel) one route
 *   POD_IP/32 via the node's internal address per pod on that node (targetRef the pod).
 * Fabric IPAM allocations are taken in order from the internal CIDR (gateway first, then nodes).
 * Owner references are left out (the test server assigns uids when the objects are stored).
 * The RouteConfigurations (and in Liqo mode, `liqoMode`, every RouteConfiguration and, from
 * liqoFirewallConfigurations, every FirewallConfiguration of the peering) come from the one
 * generator test/rules/liqo-peering-objects.ts, documented there against Liqo's source.
 */
import { emptyResources, type LiqoResources } from '../../src/control/k8s/resources.js';
import { renderLiqoChart } from './helm-render.js';
import { fabricObjects, gatewayObjects, type PeeringSide as RulesSide } from '../rules/liqo-peering-objects.js';

const NET = 'networking.liqo.io/v1beta1';
const RID = 'liqo.io/remote-cluster-id';

export interface PeeringNode {
  name: string;
  /** Application pods on this node (real addresses in the local pod CIDR). */
  pods: { name: string; ip: string }[];
}

export interface PeeringSide {
  local: string;
  remote: string;
  side: 'server' | 'client';
  /** Base64 raw keys: this cluster's pair and the peer's public key. */
  privateKey: string;
  publicKey: string;
  remotePublicKey: string;
  /** The server's reachable endpoint (server: its status.endpoint; client: its spec.endpoint). */
  endpoint: { address: string; port: number };
  /** Several ports (spec.endpoint.ports, Liqo's multi-tunnel form) in place of spec.endpoint.port. */
  ports?: number[];
  /** IP and node of the active gateway pod (status.internalEndpoint). */
  gatewayPod: { ip: string; node: string };
  nodes: PeeringNode[];
  mtu?: number;
  /**
   * Liqo mode: also every RouteConfiguration of the peering (not only the two kinds Weft's own
   * translation reads) and liqoFirewallConfigurations; the Helm MSS clamp value and ipam IP
   * mappings (a non-pod `real` address exposed as `remapped` in the external CIDR, behind `node`).
   */
  liqoMode?: {
    mss: number;
    /** spec.masquerade: the nodes masquerade what they forward to `real` (Liqo's ip-mapping fabric object). */
    ipMappings?: { name: string; real: string; remapped: string; node: string; masquerade?: boolean }[];
  };
}

/** Liqo's namespace (the namespace `liqoctl install` releases the chart in). */
export const LIQO_NAMESPACE = 'liqo';
/** Both clusters' pod CIDR (the same on purpose: Liqo remaps it); not a Liqo default. */
export const POD_CIDR = '10.0.0.0/16';
/** kubeadm's default service CIDR (what `liqoctl install` finds on a kubeadm cluster). */
export const SERVICE_CIDR = '10.96.0.0/12';
/** Liqo's default external CIDR (chart: ipam.externalCIDR empty → 10.70.0.0/16). */
export const EXTERNAL_CIDR = '10.70.0.0/16';
/** Liqo's default internal CIDR (chart: ipam.internalCIDR empty → 10.80.0.0/16). */
export const INTERNAL_CIDR = '10.80.0.0/16';
/** How each cluster addresses the peer's pods / external CIDR (both use the same real CIDRs); Liqo's IPAM picks such from its pools (10.0.0.0/8 …). */
export const REMAPPED_POD_CIDR = '10.71.0.0/16';
export const REMAPPED_EXTERNAL_CIDR = '10.72.0.0/16';

export function tenantNamespace(remote: string): string {
  return `liqo-tenant-${remote}`;
}

/** The fabric IPAM's allocation i (0: the gateway's InternalFabric, then the nodes in order). */
export function internalAddress(i: number): string {
  return `10.80.0.${i + 1}`;
}

/** A deterministic stand-in for Liqo's random "liqo.xxxxxxxx" interface names. */
function ifName(seed: string): string {
  let h = 0;
  for (const ch of seed) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return `liqo.${h.toString(36).padStart(8, '0').slice(0, 8)}`;
}

function portsOf(p: PeeringSide): { port: number } | { ports: number[] } {
  return p.ports !== undefined ? { ports: [...p.ports] } : { port: p.endpoint.port };
}

export function liqoPeeringSide(p: PeeringSide): LiqoResources {
  const ns = tenantNamespace(p.remote);
  const L = { [RID]: p.remote };
  const mtu = p.mtu ?? 1340; // Liqo's default MTU (liqoctl network/peer --mtu)
  const kind = p.side === 'server' ? 'GatewayServer' : 'GatewayClient';
  const r = emptyResources();
  // The chart's Networks (liqo-ipam-networks.yaml) as a `liqoctl install` renders them for this
  // cluster's pod and service CIDRs, status.cidr as Liqo's IPAM fills it in (the CIDR asked for).
  r.networks = renderLiqoChart({ ipam: { podCIDRs: [POD_CIDR], serviceCIDR: SERVICE_CIDR } })
    .map(({ obj }) => obj)
    .filter((o) => o.kind === 'Network')
    .map((o) => {
      const spec = o['spec'] as { cidr: string };
      return { ...o, status: { cidr: spec.cidr } };
    }) as unknown as LiqoResources['networks'];
  r.configurations = [
    {
      apiVersion: NET,
      kind: 'Configuration',
      metadata: { name: p.remote, namespace: ns, labels: { ...L } },
      spec: {
        local: { cidr: { pod: [POD_CIDR], external: [EXTERNAL_CIDR] } },
        remote: { cidr: { pod: [POD_CIDR], external: [EXTERNAL_CIDR] } },
      },
      status: { remote: { cidr: { pod: [REMAPPED_POD_CIDR], external: [REMAPPED_EXTERNAL_CIDR] } } },
    },
  ];
  const internalEndpoint = { ip: p.gatewayPod.ip, node: p.gatewayPod.node };
  if (p.side === 'server') {
    r.gatewayServers = [
      {
        apiVersion: NET,
        kind,
        metadata: { name: p.remote, namespace: ns, labels: { ...L } },
        spec: { endpoint: { ...portsOf(p), serviceType: 'NodePort' }, mtu, secretRef: { name: `gw-keys-${p.remote}` } },
        status: {
          endpoint: { addresses: [p.endpoint.address], port: p.endpoint.port, protocol: 'UDP' },
          internalEndpoint,
        },
      },
    ];
  } else {
    r.gatewayClients = [
      {
        apiVersion: NET,
        kind,
        metadata: { name: p.remote, namespace: ns, labels: { ...L } },
        spec: {
          endpoint: { addresses: [p.endpoint.address], ...portsOf(p), protocol: 'UDP' },
          mtu,
          secretRef: { name: `gw-keys-${p.remote}` },
        },
        status: { internalEndpoint },
      },
    ];
  }
  r.secrets = [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `gw-keys-${p.remote}`, namespace: ns, labels: { ...L } },
      data: { privateKey: p.privateKey, publicKey: p.publicKey },
    },
  ];
  r.publicKeys = [
    {
      apiVersion: NET,
      kind: 'PublicKey',
      metadata: { name: `gw-${p.remote}`, namespace: ns, labels: { ...L } },
      spec: { publicKey: p.remotePublicKey },
    },
  ];

  const fabricName = p.remote;
  const gwInternal = internalAddress(0);
  const fabricIf = ifName(`fabric-${p.local}-${fabricName}`);
  const remoteCIDRs = [REMAPPED_POD_CIDR, REMAPPED_EXTERNAL_CIDR];
  r.internalFabrics = [
    {
      apiVersion: NET,
      kind: 'InternalFabric',
      metadata: { name: fabricName, namespace: ns, labels: { ...L } },
      spec: {
        gatewayIP: p.gatewayPod.ip,
        interface: { gateway: { ip: gwInternal }, node: { name: fabricIf } },
        mtu,
        remoteCIDRs,
      },
    },
  ];
  r.internalNodes = p.nodes.map((n, i) => ({
    apiVersion: NET,
    kind: 'InternalNode',
    metadata: { name: n.name, labels: {} },
    spec: {
      interface: { gateway: { name: ifName(`node-${p.local}-${n.name}`) }, node: { ip: internalAddress(i + 1) } },
    },
  }));
  r.geneveTunnels = p.nodes.map((n, i) => ({
    apiVersion: NET,
    kind: 'GeneveTunnel',
    metadata: {
      name: `${fabricName}-${n.name}`,
      namespace: ns,
      labels: {
        'networking.liqo.io/internal-fabric-name': fabricName,
        'networking.liqo.io/internal-node-name': n.name,
      },
    },
    spec: { id: i, internalFabricRef: { name: fabricName, namespace: ns }, internalNodeRef: { name: n.name } },
  }));
  // Routes (and, in Liqo mode, every FirewallConfiguration): one generator, test/rules/liqo-peering-objects.ts.
  const side = rulesSide(p);
  const names = new Set([`${fabricName}-node-gw`, ...p.nodes.map((n) => `${n.name}-gw-node`)]);
  const routes = [...fabricObjects(side).routes, ...gatewayObjects(side).routes].filter(
    (o) => p.liqoMode !== undefined || names.has(nameOf(o)),
  );
  // Liqo's routes carry fields Weft's reduced types leave out (scope, targetRef): typed loosely.
  r.routeConfigurations = routes as LiqoResources['routeConfigurations'];
  return r;
}

const nameOf = (o: Record<string, unknown>): string => (o['metadata'] as { name: string }).name;

/** This side as the FirewallConfiguration/RouteConfiguration generator sees it. */
export function rulesSide(p: PeeringSide): RulesSide {
  return {
    cfg: p.remote,
    remoteId: p.remote,
    namespace: tenantNamespace(p.remote),
    liqoNamespace: LIQO_NAMESPACE,
    mode: p.side,
    remotePod: { real: POD_CIDR, remapped: REMAPPED_POD_CIDR },
    remoteExt: { real: EXTERNAL_CIDR, remapped: REMAPPED_EXTERNAL_CIDR },
    nodes: p.nodes.map((n, i) => ({
      name: n.name,
      internalIP: internalAddress(i + 1),
      gatewayIf: ifName(`node-${p.local}-${n.name}`),
      pods: n.pods.map((x) => x.ip),
      podNames: n.pods.map((x) => x.name),
    })),
    // Not Liqo's default (0: the route's MTU); a fixed value shows the clamp in captures.
    mss: p.liqoMode?.mss ?? 1300,
    localPod: POD_CIDR,
    localExt: EXTERNAL_CIDR,
    ...(p.liqoMode?.ipMappings !== undefined ? { ipMappings: p.liqoMode.ipMappings } : {}),
    gatewayInternalIP: internalAddress(0),
    nodeSideIf: ifName(`fabric-${p.local}-${p.remote}`),
  };
}

/**
 * Liqo mode (`weft k8s --liqo-firewall`): every FirewallConfiguration Liqo's controllers (and
 * its Helm chart) create in this cluster for the peering, gateway and fabric categories.
 */
export function liqoFirewallConfigurations(p: PeeringSide): Record<string, unknown>[] {
  const side = rulesSide(p);
  return [...gatewayObjects(side).firewall, ...fabricObjects(side).firewall];
}
