/**
 * Weft's typed configuration model: one zod v4 schema for a gateway and for a node agent.
 *
 * The model is the single contract between the control plane (YAML file, Liqo CRDs) and the data
 * plane. Everything the data plane receives has been validated and normalised:
 * - CIDRs and addresses are canonical text ("10.0.0.0/16", "fd00::/64", RFC 5952 for IPv6);
 *   parse them with src/packet/addr.ts parsePrefix/parseAddress.
 * - WireGuard keys are standard base64 of exactly 32 bytes (what `wg genkey` prints); decode
 *   with `decodeKey()` below.
 * - Endpoints are "host:port" with IPv6 literals in brackets; parse with cidr.ts parseEndpoint.
 * - Defaults follow Liqo (shared/liqo/README.md): WireGuard 51840/UDP, MTU 1340, Geneve 6091,
 *   external CIDR 10.70.0.0/16, internal CIDR 10.80.0.0/16.
 *
 * Vocabulary (Liqo): a peer's `remote` CIDRs are its REAL CIDRs (Configuration.spec.remote.cidr);
 * `remapped` CIDRs are how the local cluster addresses it (Configuration.status.remote.cidr).
 * remapped[i] ↔ remote[i] is a 1:1 prefix translation, so both have the same length and family.
 *
 * Failure kind: every validation problem is a `ConfigError` naming the source (file), the field
 * path (e.g. `peers[1].remote.podCIDRs[0]`) and what is expected. No I/O happens here: reading
 * `wireguard.privateKeyFile` is the loader's job (yaml.ts), which fills `privateKey` first.
 */
import { z } from 'zod';
import {
  AddressParseError,
  formatAddress,
  parseAddress,
  parsePrefix,
  prefixContains,
  prefixContainsPrefix,
  prefixesOverlap,
  type Prefix,
} from '../packet/addr.js';
import { LIQO_TUNNEL_SERVER_ADDRESS } from './tunnel-address.js';
import { EndpointParseError, canonicalCidr, formatEndpoint, parseEndpoint } from './cidr.js';

// ---------------------------------------------------------------------------------------------
// Errors

/** One validation problem. `path` is formatted like `peers[1].remote.podCIDRs[0]` ('' = root). */
export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
  /** 1-based line in the source file, when known (YAML loader). */
  readonly line?: number | undefined;
}

/**
 * A configuration that cannot be used. The message lists every problem as
 * `<source>: <field path>: <what is expected>`, one per line.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly source: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    super(
      issues
        .map((i) => {
          const where = i.line === undefined ? source : `${source}:${i.line}`;
          return `${where}: ${i.path === '' ? '(root)' : i.path}: ${i.message}`;
        })
        .join('\n'),
    );
  }
}

/** Format a zod/our path array as `a.b[2].c`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Leaf schemas

/** Liqo's defaults (shared/liqo/README.md). */
export const DEFAULTS = {
  externalCIDR: '10.70.0.0/16',
  internalCIDR: '10.80.0.0/16',
  wireguardPort: 51840,
  mtu: 1340,
  genevePort: 6091,
  wireguardInterface: 'liqo-tunnel',
  tunName: 'weft0',
  logLevel: 'warn',
} as const;

/** zod error map for a leaf: distinguishes "missing" from "wrong type". */
function expected(what: string): { error: (iss: { input?: unknown }) => string } {
  return { error: (iss) => (iss.input === undefined ? `required: ${what}` : `expected ${what}`) };
}

const cidrText = z.string(expected('a CIDR string like "10.0.0.0/16"')).transform((s, ctx) => {
  try {
    return canonicalCidr(s);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: `expected a CIDR like "10.0.0.0/16": ${reasonOf(e)}` });
    return z.NEVER;
  }
});

const ipText = z.string(expected('an IP address string like "10.80.0.1"')).transform((s, ctx) => {
  try {
    return formatAddress(parseAddress(s));
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: `expected an IP address like "10.80.0.1": ${reasonOf(e)}` });
    return z.NEVER;
  }
});

const endpointText = z.string(expected('"host:port" (IPv6 as "[addr]:port")')).transform((s, ctx) => {
  try {
    return formatEndpoint(parseEndpoint(s));
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: `expected "host:port" (IPv6 as "[addr]:port"): ${reasonOf(e)}` });
    return z.NEVER;
  }
});

const KEY_B64 = /^[A-Za-z0-9+/]{43}=$/;
const keyText = z
  .string(expected('a base64 WireGuard key (44 characters, 32 bytes)'))
  .transform((s) => s.trim())
  .refine((s) => KEY_B64.test(s), {
    message: 'expected a base64 WireGuard key of 32 bytes (44 characters ending in "=", as printed by `wg genkey`)',
  });

/** Kubernetes label-value shaped identifier (Liqo cluster IDs are used as label values). */
const idText = z.string(expected('a name')).regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/, {
  message: 'expected 1-63 characters [A-Za-z0-9-_.], starting and ending alphanumeric',
});

const port = z.number(expected('a port number')).int().min(1).max(65535);
const mtu = z.number(expected('an MTU (number)')).int().min(576, { message: 'MTU must be at least 576' }).max(65535);
/** RFC 8926 §3.4: the VNI is 24 bits. Liqo allocates GeneveTunnel.spec.id from 0. */
const vni = z
  .number(expected('a VNI (number)'))
  .int()
  .min(0)
  .max(0xffffff, { message: 'a Geneve VNI is 24 bits (0..16777215)' });
const ifName = z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/, { message: 'expected an interface name of 1-15 characters' });

function reasonOf(e: unknown): string {
  if (e instanceof AddressParseError || e instanceof EndpointParseError) return e.reason;
  return e instanceof Error ? e.message : String(e);
}

// ---------------------------------------------------------------------------------------------
// Sections

export const ClusterSchema = z.strictObject({
  /** Liqo cluster ID of the local cluster. */
  id: idText,
  podCIDRs: z.array(cidrText).default([]),
  /** Liqo external CIDR; its first address is the SNAT source for node/host traffic to remote pods. */
  externalCIDR: cidrText.default(DEFAULTS.externalCIDR),
  /** Liqo internal CIDR (one /32 per node and per gateway for the Geneve fabric). */
  internalCIDR: cidrText.default(DEFAULTS.internalCIDR),
  serviceCIDRs: z.array(cidrText).default([]),
});

export const WireguardSchema = z.strictObject({
  /** Base64 of the 32-byte X25519 private key. The YAML loader fills it from privateKeyFile. */
  privateKey: keyText.optional(),
  /** Path of a file holding the base64 private key (relative to the config file). */
  privateKeyFile: z.string().min(1).optional(),
  /** Bind address for the WireGuard UDP socket (default: all). */
  listenAddress: ipText.optional(),
  listenPort: port.default(DEFAULTS.wireguardPort),
  mtu: mtu.default(DEFAULTS.mtu),
  interfaceName: ifName.default(DEFAULTS.wireguardInterface),
  /** 'auto' picks the measured-fastest backend (src/crypto/select.ts). */
  cryptoBackend: z.enum(['auto', 'openssl', 'node', 'pure']).default('auto'),
  /**
   * This gateway's address inside the tunnel (the connection check's source). Default per peer,
   * as Liqo: 169.254.18.1 towards a peer without endpoint (we are the server), .2 otherwise.
   */
  tunnelAddress: ipText.optional(),
});

export const PeerCidrsSchema = z.strictObject({
  podCIDRs: z.array(cidrText).default([]),
  externalCIDRs: z.array(cidrText).default([]),
});

export const PeerSchema = z.strictObject({
  /** Local name of the peer (unique); in Kubernetes mode the remote cluster ID. */
  name: idText,
  /** Liqo cluster ID of the remote cluster (unique). */
  clusterId: idText,
  publicKey: keyText,
  presharedKey: keyText.optional(),
  /** Initial endpoint; absent on a server side that learns it from the first handshake. */
  endpoint: endpointText.optional(),
  /** Seconds, 1..65535; absent = off (Liqo uses none). */
  persistentKeepalive: z.number().int().min(1).max(65535).optional(),
  /**
   * The peer's address inside the tunnel (the connection check's destination). Default, as
   * Liqo: 169.254.18.1 for a peer with an endpoint (a server), 169.254.18.2 without.
   */
  tunnelAddress: ipText.optional(),
  /** The peer's REAL CIDRs (Liqo Configuration.spec.remote.cidr). */
  remote: PeerCidrsSchema.prefault({}),
  /**
   * How the local cluster addresses the peer (Configuration.status.remote.cidr); index i maps
   * 1:1 onto remote[i]. An absent list defaults to the real one (no remapping).
   */
  remapped: z
    .strictObject({
      podCIDRs: z.array(cidrText).optional(),
      externalCIDRs: z.array(cidrText).optional(),
    })
    .optional(),
});

/** One Geneve tunnel from this gateway to a node (Liqo GeneveTunnel + InternalNode). */
export const GeneveTunnelSchema = z.strictObject({
  /** VNI (GeneveTunnel.spec.id). */
  id: vni,
  nodeName: idText,
  /** Underlay (node) address the encapsulated packets are sent to. */
  remoteUnderlay: ipText,
  /** This end's address inside the internal CIDR (InternalFabric.spec.interface.gateway.ip). */
  localInternalAddress: ipText,
  /** The node's address inside the internal CIDR (InternalNode.spec.interface.node.ip). */
  remoteInternalAddress: ipText,
  /** 'l3': inner IP packets (Geneve protocol type = IPv4/IPv6); 'l2': inner Ethernet (0x6558). */
  mode: z.enum(['l3', 'l2']).default('l3'),
});

/** Pods of `podCIDR` (a node's pod range, or a single pod /32) are reached via that node's tunnel. */
export const PodRouteSchema = z.strictObject({
  podCIDR: cidrText,
  nodeInternalAddress: ipText,
});

export const GeneveSchema = z.strictObject({
  port: port.default(DEFAULTS.genevePort),
  /** Bind address of the Geneve UDP socket (default: all). */
  listenAddress: ipText.optional(),
  tunnels: z.array(GeneveTunnelSchema).default([]),
  podRoutes: z.array(PodRouteSchema).default([]),
});

/** Liqo IP resource: `externalAddress` (in the local external CIDR, IP.status.ip) ↔ `realAddress` (IP.spec.ip). */
export const IpMappingSchema = z.strictObject({
  externalAddress: ipText,
  realAddress: ipText,
});

/** One gateway as seen by a node agent (Liqo InternalFabric + GeneveTunnel + InternalNode). */
export const NodeGatewaySchema = z.strictObject({
  /** InternalFabric name, usually the remote cluster ID. */
  name: idText,
  vni,
  /** Underlay address of the gateway (InternalFabric.spec.gatewayIP). */
  gatewayUnderlay: ipText,
  /** The gateway's internal address (InternalFabric.spec.interface.gateway.ip). */
  gatewayInternalAddress: ipText,
  /** This node's internal address (InternalNode.spec.interface.node.ip). */
  localInternalAddress: ipText,
  /** Remote CIDRs routed to this gateway (InternalFabric.spec.remoteCIDRs: remapped peer CIDRs). */
  remoteCIDRs: z.array(cidrText).default([]),
  mode: z.enum(['l3', 'l2']).default('l3'),
});

export const NodeAgentSchema = z.strictObject({
  /** Kubernetes node name. */
  name: idText,
  /** This node's underlay address (Geneve source; default: chosen by the kernel). */
  underlayAddress: ipText.optional(),
  tunName: ifName.default(DEFAULTS.tunName),
  mtu: mtu.default(DEFAULTS.mtu),
  gateways: z.array(NodeGatewaySchema).default([]),
});

export const MetricsSchema = z.strictObject({
  /** "host:port" of the Prometheus endpoint; absent = no endpoint. */
  listen: endpointText.optional(),
});

export const LogLevelSchema = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
export const LoggingSchema = z.strictObject({
  level: LogLevelSchema.default(DEFAULTS.logLevel),
});

const common = {
  cluster: ClusterSchema,
  geneve: GeneveSchema.prefault({}),
  metrics: MetricsSchema.prefault({}),
  logging: LoggingSchema.prefault({}),
};

const GatewayRawSchema = z.strictObject({
  role: z.literal('gateway'),
  ...common,
  wireguard: WireguardSchema,
  peers: z.array(PeerSchema).default([]),
  ipMappings: z.array(IpMappingSchema).default([]),
});

const NodeRawSchema = z.strictObject({
  role: z.literal('node'),
  ...common,
  node: NodeAgentSchema,
});

// ---------------------------------------------------------------------------------------------
// Output types (what the data plane consumes). Written out rather than inferred so that the
// public contract is readable and stable; `assertSameShape` below keeps them equal to the schema.

export type CryptoBackendChoice = 'auto' | 'openssl' | 'node' | 'pure';
export type GeneveMode = 'l3' | 'l2';
export type LogLevel = z.output<typeof LogLevelSchema>;

export interface ClusterConfig {
  id: string;
  podCIDRs: string[];
  externalCIDR: string;
  internalCIDR: string;
  serviceCIDRs: string[];
}

export interface WireguardConfig {
  /** Always set after loading (resolved from privateKeyFile by the loader). */
  privateKey: string;
  privateKeyFile?: string;
  listenAddress?: string;
  listenPort: number;
  mtu: number;
  interfaceName: string;
  cryptoBackend: CryptoBackendChoice;
  /** This gateway's in-tunnel address (src/control/tunnel-address.ts; default by role). */
  tunnelAddress?: string;
}

export interface PeerCidrs {
  podCIDRs: string[];
  externalCIDRs: string[];
}

export interface PeerConfig {
  name: string;
  clusterId: string;
  publicKey: string;
  presharedKey?: string;
  endpoint?: string;
  persistentKeepalive?: number;
  /** The peer's in-tunnel address (src/control/tunnel-address.ts; default by role). */
  tunnelAddress?: string;
  /** Real CIDRs of the peer. */
  remote: PeerCidrs;
  /** Always complete after validation: defaults to `remote` list by list. */
  remapped: PeerCidrs;
}

export interface GeneveTunnelConfig {
  id: number;
  nodeName: string;
  remoteUnderlay: string;
  localInternalAddress: string;
  remoteInternalAddress: string;
  mode: GeneveMode;
}

export interface PodRouteConfig {
  podCIDR: string;
  nodeInternalAddress: string;
}

export interface GeneveConfig {
  port: number;
  listenAddress?: string;
  tunnels: GeneveTunnelConfig[];
  podRoutes: PodRouteConfig[];
}

export interface IpMappingConfig {
  externalAddress: string;
  realAddress: string;
}

export interface NodeGatewayConfig {
  name: string;
  vni: number;
  gatewayUnderlay: string;
  gatewayInternalAddress: string;
  localInternalAddress: string;
  remoteCIDRs: string[];
  mode: GeneveMode;
}

export interface NodeAgentConfig {
  name: string;
  underlayAddress?: string;
  tunName: string;
  mtu: number;
  gateways: NodeGatewayConfig[];
}

export interface MetricsConfig {
  listen?: string;
}

export interface LoggingConfig {
  level: LogLevel;
}

interface CommonConfig {
  cluster: ClusterConfig;
  geneve: GeneveConfig;
  metrics: MetricsConfig;
  logging: LoggingConfig;
}

export interface GatewayConfig extends CommonConfig {
  role: 'gateway';
  wireguard: WireguardConfig;
  peers: PeerConfig[];
  ipMappings: IpMappingConfig[];
}

export interface NodeConfig extends CommonConfig {
  role: 'node';
  node: NodeAgentConfig;
}

/** A validated configuration. */
export type WeftConfig = GatewayConfig | NodeConfig;

/** What a YAML file / translator may contain before defaults (zod input type). */
export type WeftConfigInput = z.input<typeof GatewayRawSchema> | z.input<typeof NodeRawSchema>;

// Compile-time check that the written-out types match what the schema produces (modulo the
// two normalisations done in `finish`: privateKey required, remapped completed).
type RawGateway = z.output<typeof GatewayRawSchema>;
type RawNode = z.output<typeof NodeRawSchema>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const assertSameShape: [
  Same<Omit<RawGateway, 'wireguard' | 'peers'>, Omit<GatewayConfig, 'wireguard' | 'peers'>>,
  Same<Omit<RawGateway['wireguard'], 'privateKey'>, Omit<WireguardConfig, 'privateKey'>>,
  Same<Omit<RawGateway['peers'][number], 'remapped'>, Omit<PeerConfig, 'remapped'>>,
  Same<RawNode, NodeConfig>,
] = [true, true, true, true];
void assertSameShape;

// ---------------------------------------------------------------------------------------------
// Cross-field validation

interface Ctx {
  issue(path: PropertyKey[], message: string): void;
}

interface NamedCidr {
  path: PropertyKey[];
  what: string;
  text: string;
  cidr: Prefix;
}

function named(path: PropertyKey[], what: string, text: string): NamedCidr {
  return { path, what, text, cidr: parsePrefix(text, true) };
}

function localCidrs(cluster: ClusterConfig): NamedCidr[] {
  const out: NamedCidr[] = [];
  cluster.podCIDRs.forEach((t, i) => out.push(named(['cluster', 'podCIDRs', i], 'local pod CIDR', t)));
  cluster.serviceCIDRs.forEach((t, i) => out.push(named(['cluster', 'serviceCIDRs', i], 'local service CIDR', t)));
  out.push(named(['cluster', 'externalCIDR'], 'local external CIDR', cluster.externalCIDR));
  out.push(named(['cluster', 'internalCIDR'], 'local internal CIDR', cluster.internalCIDR));
  return out;
}

/**
 * Report entries of `set` from index `from` on that overlap an earlier entry: one issue per
 * entry, naming everything it overlaps (each pair is reported once, on the later entry).
 */
function checkNoOverlap(ctx: Ctx, set: NamedCidr[], from = 0): void {
  for (let i = from; i < set.length; i++) {
    const b = set[i]!;
    const hits = set.slice(0, i).filter((a) => prefixesOverlap(a.cidr, b.cidr));
    if (hits.length === 0) continue;
    const list = hits.map((a) => `${a.what} ${a.text} (at ${formatPath(a.path)})`).join(', ');
    ctx.issue(
      b.path,
      `${b.what} ${b.text} overlaps ${list}; choose a non-overlapping prefix (remap the peer if its real CIDR collides)`,
    );
  }
}

function checkUnique<T>(
  ctx: Ctx,
  items: readonly T[],
  key: (t: T) => string | number,
  path: (i: number) => PropertyKey[],
  what: string,
): void {
  const seen = new Map<string | number, number>();
  items.forEach((it, i) => {
    const k = key(it);
    const prev = seen.get(k);
    if (prev !== undefined)
      ctx.issue(path(i), `duplicate ${what} ${JSON.stringify(k)} (also at index ${prev}); must be unique`);
    else seen.set(k, i);
  });
}

function checkInside(
  ctx: Ctx,
  path: PropertyKey[],
  addr: string,
  outer: Prefix,
  outerText: string,
  what: string,
): void {
  const a = parseAddress(addr);
  if (a.length !== outer.addr.length || !prefixContains(outer, a, 0))
    ctx.issue(path, `${what} ${addr} must lie inside ${outerText}`);
}

function completePeer(p: RawGateway['peers'][number]): PeerConfig {
  const { remapped, ...rest } = p;
  return {
    ...rest,
    remapped: {
      podCIDRs: remapped?.podCIDRs ?? [...p.remote.podCIDRs],
      externalCIDRs: remapped?.externalCIDRs ?? [...p.remote.externalCIDRs],
    },
  };
}

function validateGateway(ctx: Ctx, c: GatewayConfig): void {
  const local = localCidrs(c.cluster);
  checkNoOverlap(ctx, local);

  checkUnique(
    ctx,
    c.peers,
    (p) => p.name,
    (i) => ['peers', i, 'name'],
    'peer name',
  );
  checkUnique(
    ctx,
    c.peers,
    (p) => p.clusterId,
    (i) => ['peers', i, 'clusterId'],
    'peer clusterId',
  );
  checkUnique(
    ctx,
    c.peers,
    (p) => p.publicKey,
    (i) => ['peers', i, 'publicKey'],
    'peer publicKey',
  );
  if (c.cluster.id !== '') {
    c.peers.forEach((p, i) => {
      if (p.clusterId === c.cluster.id)
        ctx.issue(['peers', i, 'clusterId'], `a peer cannot have the local cluster ID ${p.clusterId}`);
    });
  }

  // 1:1 prefix translation: remapped[i] ↔ remote[i], same family and size.
  const remappedAll: NamedCidr[] = [];
  c.peers.forEach((p, i) => {
    for (const kind of ['podCIDRs', 'externalCIDRs'] as const) {
      const real = p.remote[kind];
      const rem = p.remapped[kind];
      if (real.length !== rem.length) {
        ctx.issue(
          ['peers', i, 'remapped', kind],
          `expected ${real.length} entries, one per remote.${kind} entry (1:1 prefix remapping); got ${rem.length}`,
        );
        continue;
      }
      rem.forEach((t, j) => {
        const a = parsePrefix(real[j]!, true);
        const b = parsePrefix(t, true);
        if (a.family !== b.family || a.prefixLen !== b.prefixLen) {
          ctx.issue(
            ['peers', i, 'remapped', kind, j],
            `remapped ${t} must have the same family and prefix length as remote.${kind}[${j}] ${real[j]}`,
          );
        }
        remappedAll.push(named(['peers', i, 'remapped', kind, j], `peer ${p.name} remapped CIDR`, t));
      });
    }
  });
  // No overlap between local CIDRs and any remapped peer CIDR, nor between peers.
  checkNoOverlap(ctx, [...local, ...remappedAll], local.length);
  validateTunnelAddresses(ctx, c, local, remappedAll);

  // Geneve towards nodes.
  const internal = parsePrefix(c.cluster.internalCIDR, true);
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.id,
    (i) => ['geneve', 'tunnels', i, 'id'],
    'tunnel id (VNI)',
  );
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.nodeName,
    (i) => ['geneve', 'tunnels', i, 'nodeName'],
    'tunnel nodeName',
  );
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.remoteInternalAddress,
    (i) => ['geneve', 'tunnels', i, 'remoteInternalAddress'],
    'remoteInternalAddress',
  );
  c.geneve.tunnels.forEach((t, i) => {
    checkInside(
      ctx,
      ['geneve', 'tunnels', i, 'localInternalAddress'],
      t.localInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    checkInside(
      ctx,
      ['geneve', 'tunnels', i, 'remoteInternalAddress'],
      t.remoteInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
  });
  const nodeAddrs = new Set(c.geneve.tunnels.map((t) => t.remoteInternalAddress));
  checkUnique(
    ctx,
    c.geneve.podRoutes,
    (r) => r.podCIDR,
    (i) => ['geneve', 'podRoutes', i, 'podCIDR'],
    'podRoute podCIDR',
  );
  c.geneve.podRoutes.forEach((r, i) => {
    if (!nodeAddrs.has(r.nodeInternalAddress)) {
      ctx.issue(
        ['geneve', 'podRoutes', i, 'nodeInternalAddress'],
        `${r.nodeInternalAddress} is not the remoteInternalAddress of any geneve.tunnels entry`,
      );
    }
    const pc = parsePrefix(r.podCIDR, true);
    if (
      c.cluster.podCIDRs.length > 0 &&
      !c.cluster.podCIDRs.some((t) => prefixContainsPrefix(parsePrefix(t, true), pc))
    ) {
      ctx.issue(
        ['geneve', 'podRoutes', i, 'podCIDR'],
        `${r.podCIDR} must lie inside one of cluster.podCIDRs (${c.cluster.podCIDRs.join(', ')})`,
      );
    }
  });

  // Liqo IP resources: the external address must be in the local external CIDR, not its first
  // address (reserved as the SNAT source for host traffic), and unique.
  const ext = parsePrefix(c.cluster.externalCIDR, true);
  const first = formatAddress(ext.addr);
  checkUnique(
    ctx,
    c.ipMappings,
    (m) => m.externalAddress,
    (i) => ['ipMappings', i, 'externalAddress'],
    'externalAddress',
  );
  c.ipMappings.forEach((m, i) => {
    checkInside(
      ctx,
      ['ipMappings', i, 'externalAddress'],
      m.externalAddress,
      ext,
      c.cluster.externalCIDR,
      'externalAddress',
    );
    if (m.externalAddress === first) {
      ctx.issue(
        ['ipMappings', i, 'externalAddress'],
        `${first} is the first address of the external CIDR, reserved as the SNAT source`,
      );
    }
  });
}

/**
 * Explicit in-tunnel addresses (wireguard.tunnelAddress, peers[].tunnelAddress): they travel
 * without NAT, so they must not lie in any CIDR the gateway routes or translates; peers' must be
 * distinct, differ from ours and have our tunnel address's family. Defaults (Liqo's
 * 169.254.18.1/.2) are not checked here: src/control/tunnel-address.ts leaves a peer whose
 * default collides out of the check and says which field to set.
 */
function validateTunnelAddresses(
  ctx: Ctx,
  c: GatewayConfig,
  local: readonly NamedCidr[],
  remapped: readonly NamedCidr[],
): void {
  const routed: NamedCidr[] = [...local, ...remapped];
  c.peers.forEach((p, i) => {
    for (const kind of ['podCIDRs', 'externalCIDRs'] as const) {
      p.remote[kind].forEach((t, j) =>
        routed.push(named(['peers', i, 'remote', kind, j], `peer ${p.name} real CIDR`, t)),
      );
    }
  });
  const check = (path: PropertyKey[], addr: string): void => {
    const a = parseAddress(addr);
    const hit = routed.find((r) => r.cidr.addr.length === a.length && prefixContains(r.cidr, a, 0));
    if (hit !== undefined) {
      ctx.issue(
        path,
        `tunnel address ${addr} lies inside ${hit.what} ${hit.text} (at ${formatPath(hit.path)}); use an address outside every routed CIDR (Liqo: 169.254.18.0/30)`,
      );
    }
  };
  const ours = c.wireguard.tunnelAddress;
  if (ours !== undefined) check(['wireguard', 'tunnelAddress'], ours);
  const ourFamily = parseAddress(ours ?? LIQO_TUNNEL_SERVER_ADDRESS).length;
  const seen = new Map<string, number>();
  c.peers.forEach((p, i) => {
    const addr = p.tunnelAddress;
    if (addr === undefined) return;
    const prev = seen.get(addr);
    if (prev !== undefined)
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `duplicate peer tunnelAddress ${addr} (also at peers[${prev}]); must be unique`,
      );
    else seen.set(addr, i);
    check(['peers', i, 'tunnelAddress'], addr);
    if (addr === ours)
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `${addr} is this gateway's own wireguard.tunnelAddress; the peer needs another`,
      );
    if (parseAddress(addr).length !== ourFamily) {
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `${addr} must have the family of this gateway's tunnel address (${ours ?? `default ${LIQO_TUNNEL_SERVER_ADDRESS}, IPv4`})`,
      );
    }
  });
}

function validateNode(ctx: Ctx, c: NodeConfig): void {
  const local = localCidrs(c.cluster);
  checkNoOverlap(ctx, local);
  if (c.geneve.tunnels.length > 0)
    ctx.issue(
      ['geneve', 'tunnels'],
      'geneve.tunnels is for gateways; a node agent lists its tunnels under node.gateways',
    );
  if (c.geneve.podRoutes.length > 0)
    ctx.issue(['geneve', 'podRoutes'], 'geneve.podRoutes is for gateways; remove it from a node configuration');
  const gws = c.node.gateways;
  checkUnique(
    ctx,
    gws,
    (g) => g.name,
    (i) => ['node', 'gateways', i, 'name'],
    'gateway name',
  );
  checkUnique(
    ctx,
    gws,
    (g) => g.vni,
    (i) => ['node', 'gateways', i, 'vni'],
    'gateway vni',
  );
  const internal = parsePrefix(c.cluster.internalCIDR, true);
  const remotes: NamedCidr[] = [];
  gws.forEach((g, i) => {
    checkInside(
      ctx,
      ['node', 'gateways', i, 'gatewayInternalAddress'],
      g.gatewayInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    checkInside(
      ctx,
      ['node', 'gateways', i, 'localInternalAddress'],
      g.localInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    g.remoteCIDRs.forEach((t, j) =>
      remotes.push(named(['node', 'gateways', i, 'remoteCIDRs', j], `gateway ${g.name} remote CIDR`, t)),
    );
  });
  checkNoOverlap(ctx, [...local, ...remotes], local.length);
}

// ---------------------------------------------------------------------------------------------
// Public entry points

const RawSchema = z.discriminatedUnion('role', [GatewayRawSchema, NodeRawSchema], {
  error: 'expected role: "gateway" or "node"',
});

/**
 * Validate and normalise `input` (parsed YAML/JSON or a translator's output).
 * `source` names where it came from (file path, "kubernetes") and prefixes every message.
 * Throws ConfigError listing all problems found. Pure: no I/O.
 */
export function parseConfig(input: unknown, source = '<config>'): WeftConfig {
  const res = RawSchema.safeParse(input);
  if (!res.success) {
    throw new ConfigError(
      source,
      res.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message })),
    );
  }
  const issues: ConfigIssue[] = [];
  const ctx: Ctx = { issue: (path, message) => issues.push({ path: formatPath(path), message }) };
  let cfg: WeftConfig;
  if (res.data.role === 'gateway') {
    const raw = res.data;
    const { privateKey, ...wgRest } = raw.wireguard;
    if (privateKey === undefined) {
      ctx.issue(
        ['wireguard', 'privateKey'],
        'expected a base64 private key: set wireguard.privateKey or wireguard.privateKeyFile',
      );
      throw new ConfigError(source, issues);
    }
    const gw: GatewayConfig = { ...raw, wireguard: { privateKey, ...wgRest }, peers: raw.peers.map(completePeer) };
    validateGateway(ctx, gw);
    cfg = gw;
  } else {
    const node: NodeConfig = res.data;
    validateNode(ctx, node);
    cfg = node;
  }
  if (issues.length > 0) throw new ConfigError(source, issues);
  return cfg;
}

/** Decode a validated base64 key into 32 new bytes. Throws TypeError on API misuse (not a key). */
export function decodeKey(b64: string): Uint8Array {
  if (!KEY_B64.test(b64)) throw new TypeError('decodeKey: expected 44-character base64 of a 32-byte key');
  const buf = Buffer.from(b64, 'base64');
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength).slice();
}

/** Base64 of 32 key bytes (the representation used in the model). */
export function encodeKey(key: Uint8Array): string {
  if (key.length !== 32) throw new TypeError(`encodeKey: expected 32 bytes, got ${key.length}`);
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('base64');
}
