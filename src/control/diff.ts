/**
 * Minimal operations between two validated configurations, so the data plane can apply a reload
 * without tearing down what did not change.
 *
 * Contract:
 * - Peers are identified by `name`. A changed `publicKey` is a different WireGuard identity
 *   (no session can survive it), so it yields `peer.remove` + `peer.add`; any other change yields
 *   one `peer.update` carrying ONLY the fields whose configured value changed. In particular an
 *   endpoint that did not change in the file is absent from the update, so a peer that roamed
 *   (its live endpoint differs from the file) keeps its roamed endpoint, sessions and counters.
 * - In `changes`, `null` means "the optional field was removed"; a missing key means unchanged.
 * - Geneve tunnels are identified by `id` (VNI), pod routes by `podCIDR`, IP mappings by
 *   `externalAddress`, node-agent gateways by `name`.
 * - Order: removals first, then updates, then additions (so a CIDR or key moving from one peer to
 *   another never exists twice at once), each group in configuration order.
 * - A role change (gateway ↔ node) cannot be applied live: the only op is `restart`.
 * - diff(a, a) is [].
 */
import type {
  ClusterConfig,
  GatewayConfig,
  GeneveTunnelConfig,
  IpMappingConfig,
  NodeConfig,
  NodeGatewayConfig,
  PeerCidrs,
  PeerConfig,
  PodRouteConfig,
  WeftConfig,
  WireguardConfig,
} from './config.js';
import type { LogLevel } from './log-level.js';

/** Changed fields of a peer (only those that changed; null = optional field removed). */
export interface PeerChanges {
  clusterId?: string;
  presharedKey?: string | null;
  endpoint?: string | null;
  /** Tunnel ports at the endpoint (not live: the gateway asks for a restart). */
  endpointPorts?: number[] | null;
  persistentKeepalive?: number | null;
  /** The peer's in-tunnel address (null: back to the default). */
  tunnelAddress?: string | null;
  /** New real CIDRs (full lists). */
  remote?: PeerCidrs;
  /** New remapped CIDRs (full lists): the prefix NAT for this peer changes. */
  remapped?: PeerCidrs;
}

export type WireguardChanges = {
  [K in keyof WireguardConfig]?: undefined extends WireguardConfig[K]
    ? Exclude<WireguardConfig[K], undefined> | null
    : WireguardConfig[K];
};
export type ClusterChanges = Partial<ClusterConfig>;
export type TunnelChanges = Partial<Omit<GeneveTunnelConfig, 'id'>>;
export type NodeGatewayChanges = Partial<Omit<NodeGatewayConfig, 'name'>>;
export interface GeneveSettingsChanges {
  port?: number;
  listenAddress?: string | null;
}
export interface NodeSettingsChanges {
  name?: string;
  underlayAddress?: string | null;
  tunName?: string;
  mtu?: number;
}

export type ConfigOp =
  | { kind: 'restart'; reason: string }
  | { kind: 'cluster.update'; changes: ClusterChanges }
  | { kind: 'wireguard.update'; changes: WireguardChanges }
  | { kind: 'peer.remove'; name: string; publicKey: string }
  | { kind: 'peer.update'; name: string; publicKey: string; changes: PeerChanges }
  | { kind: 'peer.add'; peer: PeerConfig }
  | { kind: 'geneve.update'; changes: GeneveSettingsChanges }
  | { kind: 'tunnel.remove'; id: number; tunnel: GeneveTunnelConfig }
  | { kind: 'tunnel.update'; id: number; changes: TunnelChanges }
  | { kind: 'tunnel.add'; tunnel: GeneveTunnelConfig }
  | { kind: 'podRoute.remove'; route: PodRouteConfig }
  | { kind: 'podRoute.update'; podCIDR: string; nodeInternalAddress: string }
  | { kind: 'podRoute.add'; route: PodRouteConfig }
  | { kind: 'ipMapping.remove'; mapping: IpMappingConfig }
  | { kind: 'ipMapping.update'; externalAddress: string; realAddress: string }
  | { kind: 'ipMapping.add'; mapping: IpMappingConfig }
  | { kind: 'node.update'; changes: NodeSettingsChanges }
  | { kind: 'nodeGateway.remove'; name: string; vni: number }
  | { kind: 'nodeGateway.update'; name: string; changes: NodeGatewayChanges }
  | { kind: 'nodeGateway.add'; gateway: NodeGatewayConfig }
  | { kind: 'metrics.update'; listen: string | null }
  | { kind: 'logging.update'; level: LogLevel };

export type ConfigOpKind = ConfigOp['kind'];

/** Structural equality for the plain JSON-like values of the model. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => deepEqual(v, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
  for (const k of keys) if (!deepEqual(ao[k], bo[k])) return false;
  return true;
}

/**
 * Fields of `b` that differ from `a`, for the listed keys. An optional field present in `a` and
 * absent in `b` is reported as null. Returns undefined when nothing changed.
 */
function changedFields<T extends object, K extends keyof T>(
  a: T,
  b: T,
  keys: readonly K[],
): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  let any = false;
  for (const k of keys) {
    if (!deepEqual(a[k], b[k])) {
      out[k as string] = b[k] === undefined ? null : b[k];
      any = true;
    }
  }
  return any ? out : undefined;
}

/** Remove/update/add ops for a keyed list. */
function diffKeyed<T, K extends string | number>(
  before: readonly T[],
  after: readonly T[],
  key: (t: T) => K,
  onRemove: (t: T) => ConfigOp[],
  onUpdate: (a: T, b: T) => ConfigOp[],
  onAdd: (t: T) => ConfigOp[],
): { removes: ConfigOp[]; updates: ConfigOp[]; adds: ConfigOp[] } {
  const beforeBy = new Map(before.map((t) => [key(t), t] as const));
  const afterKeys = new Set(after.map(key));
  const removes: ConfigOp[] = [];
  const updates: ConfigOp[] = [];
  const adds: ConfigOp[] = [];
  for (const t of before) if (!afterKeys.has(key(t))) removes.push(...onRemove(t));
  for (const t of after) {
    const old = beforeBy.get(key(t));
    if (old === undefined) adds.push(...onAdd(t));
    else updates.push(...onUpdate(old, t));
  }
  return { removes, updates, adds };
}

const PEER_FIELDS = [
  'clusterId',
  'presharedKey',
  'endpoint',
  'endpointPorts',
  'persistentKeepalive',
  'tunnelAddress',
  'remote',
  'remapped',
] as const;
const WG_FIELDS = [
  'privateKey',
  'privateKeyFile',
  'listenAddress',
  'listenPort',
  'listenPorts',
  'mtu',
  'interfaceName',
  'cryptoBackend',
  'tunnelAddress',
] as const;
const CLUSTER_FIELDS = ['id', 'podCIDRs', 'externalCIDR', 'internalCIDR', 'serviceCIDRs'] as const;
const TUNNEL_FIELDS = ['nodeName', 'remoteUnderlay', 'localInternalAddress', 'remoteInternalAddress', 'mode'] as const;
const NODE_GW_FIELDS = [
  'vni',
  'gatewayUnderlay',
  'gatewayInternalAddress',
  'localInternalAddress',
  'remoteCIDRs',
  'mode',
] as const;
const NODE_FIELDS = ['name', 'underlayAddress', 'tunName', 'mtu'] as const;

function diffPeers(
  a: readonly PeerConfig[],
  b: readonly PeerConfig[],
): { removes: ConfigOp[]; updates: ConfigOp[]; adds: ConfigOp[] } {
  return diffKeyed(
    a,
    b,
    (p) => p.name,
    (p) => [{ kind: 'peer.remove', name: p.name, publicKey: p.publicKey }],
    (x, y) => {
      if (x.publicKey !== y.publicKey) {
        // A new identity: sessions cannot be kept.
        return [
          { kind: 'peer.remove', name: x.name, publicKey: x.publicKey },
          { kind: 'peer.add', peer: y },
        ];
      }
      const changes = changedFields(x, y, PEER_FIELDS);
      return changes === undefined
        ? []
        : [{ kind: 'peer.update', name: y.name, publicKey: y.publicKey, changes: changes as PeerChanges }];
    },
    (p) => [{ kind: 'peer.add', peer: p }],
  );
}

function diffGateway(
  a: GatewayConfig,
  b: GatewayConfig,
): { removes: ConfigOp[]; updates: ConfigOp[]; adds: ConfigOp[] } {
  const removes: ConfigOp[] = [];
  const updates: ConfigOp[] = [];
  const adds: ConfigOp[] = [];
  const wg = changedFields(a.wireguard, b.wireguard, WG_FIELDS);
  if (wg !== undefined) updates.push({ kind: 'wireguard.update', changes: wg as WireguardChanges });

  const peers = diffPeers(a.peers, b.peers);
  // peer.update that came from a key change is split into remove+add: route them accordingly.
  for (const op of peers.updates)
    (op.kind === 'peer.remove' ? removes : op.kind === 'peer.add' ? adds : updates).push(op);
  removes.push(...peers.removes);
  adds.push(...peers.adds);

  const tunnels = diffKeyed(
    a.geneve.tunnels,
    b.geneve.tunnels,
    (t) => t.id,
    (t) => [{ kind: 'tunnel.remove', id: t.id, tunnel: t }],
    (x, y) => {
      const c = changedFields(x, y, TUNNEL_FIELDS);
      return c === undefined ? [] : [{ kind: 'tunnel.update', id: y.id, changes: c as TunnelChanges }];
    },
    (t) => [{ kind: 'tunnel.add', tunnel: t }],
  );
  const routes = diffKeyed(
    a.geneve.podRoutes,
    b.geneve.podRoutes,
    (r) => r.podCIDR,
    (r) => [{ kind: 'podRoute.remove', route: r }],
    (x, y) =>
      x.nodeInternalAddress === y.nodeInternalAddress
        ? []
        : [{ kind: 'podRoute.update', podCIDR: y.podCIDR, nodeInternalAddress: y.nodeInternalAddress }],
    (r) => [{ kind: 'podRoute.add', route: r }],
  );
  const maps = diffKeyed(
    a.ipMappings,
    b.ipMappings,
    (m) => m.externalAddress,
    (m) => [{ kind: 'ipMapping.remove', mapping: m }],
    (x, y) =>
      x.realAddress === y.realAddress
        ? []
        : [{ kind: 'ipMapping.update', externalAddress: y.externalAddress, realAddress: y.realAddress }],
    (m) => [{ kind: 'ipMapping.add', mapping: m }],
  );
  // Routes depend on tunnels: remove routes before their tunnel, add them after.
  removes.push(...routes.removes, ...tunnels.removes, ...maps.removes);
  updates.push(...tunnels.updates, ...routes.updates, ...maps.updates);
  adds.push(...tunnels.adds, ...routes.adds, ...maps.adds);
  return { removes, updates, adds };
}

function diffNode(a: NodeConfig, b: NodeConfig): { removes: ConfigOp[]; updates: ConfigOp[]; adds: ConfigOp[] } {
  const updates: ConfigOp[] = [];
  const n = changedFields(a.node, b.node, NODE_FIELDS);
  if (n !== undefined) updates.push({ kind: 'node.update', changes: n as NodeSettingsChanges });
  const gws = diffKeyed(
    a.node.gateways,
    b.node.gateways,
    (g) => g.name,
    (g) => [{ kind: 'nodeGateway.remove', name: g.name, vni: g.vni }],
    (x, y) => {
      const c = changedFields(x, y, NODE_GW_FIELDS);
      return c === undefined ? [] : [{ kind: 'nodeGateway.update', name: y.name, changes: c as NodeGatewayChanges }];
    },
    (g) => [{ kind: 'nodeGateway.add', gateway: g }],
  );
  return { removes: gws.removes, updates: [...updates, ...gws.updates], adds: gws.adds };
}

/** The operations that turn `before` into `after` (see the module contract). */
export function diffConfig(before: WeftConfig, after: WeftConfig): ConfigOp[] {
  if (before.role !== after.role) {
    return [{ kind: 'restart', reason: `role changed from ${before.role} to ${after.role}` }];
  }
  const head: ConfigOp[] = [];
  const cluster = changedFields(before.cluster, after.cluster, CLUSTER_FIELDS);
  if (cluster !== undefined) head.push({ kind: 'cluster.update', changes: cluster as ClusterChanges });
  const geneve = changedFields(before.geneve, after.geneve, ['port', 'listenAddress'] as const);
  if (geneve !== undefined) head.push({ kind: 'geneve.update', changes: geneve as GeneveSettingsChanges });
  const tail: ConfigOp[] = [];
  if (before.metrics.listen !== after.metrics.listen)
    tail.push({ kind: 'metrics.update', listen: after.metrics.listen ?? null });
  if (before.logging.level !== after.logging.level) tail.push({ kind: 'logging.update', level: after.logging.level });

  const parts =
    before.role === 'gateway' ? diffGateway(before, after as GatewayConfig) : diffNode(before, after as NodeConfig);
  return [...parts.removes, ...head, ...parts.updates, ...parts.adds, ...tail];
}
