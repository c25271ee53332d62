/**
 * Weft's typed configuration model: the validated types for a gateway and for a node agent, the
 * error that lists what is wrong, and `parseConfig`, which runs the zod schemas
 * (config-schema.ts) and then the cross-field checks (config-checks.ts).
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
 * Failure kind: every validation problem is a `ConfigError` (config-error.ts) naming the source
 * (file), the field path (e.g. `peers[1].remote.podCIDRs[0]`) and what is expected. No I/O
 * happens here: reading `wireguard.privateKeyFile` is the loader's job (yaml.ts), which fills
 * `privateKey` first.
 */
import type { z } from 'zod';
import {
  KEY_B64,
  RawSchema,
  type GatewayRawSchema,
  type NodeRawSchema,
  type RawGateway,
  type RawNode,
} from './config-schema.js';
import { formatPath, validateGateway, validateNode, type IssueSink } from './config-checks.js';
import { ConfigError, type ConfigIssue } from './config-error.js';
import type { LogLevel } from './log-level.js';

// ---------------------------------------------------------------------------------------------
// Output types (what the data plane consumes). Written out rather than inferred so that the
// public contract is readable and stable; `assertSameShape` below keeps them equal to the schemas
// of config-schema.ts.

export type CryptoBackendChoice = 'auto' | 'openssl' | 'node' | 'pure';
export type GeneveMode = 'l3' | 'l2';

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
  /** Every tunnel's listen port (Liqo's spec.endpoint.ports); [0] is listenPort. */
  listenPorts?: number[];
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
  /** Every tunnel's port at the endpoint's host; [0] is the endpoint's port. */
  endpointPorts?: number[];
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
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const assertSameShape: [
  Same<Omit<RawGateway, 'wireguard' | 'peers'>, Omit<GatewayConfig, 'wireguard' | 'peers'>>,
  Same<Omit<RawGateway['wireguard'], 'privateKey'>, Omit<WireguardConfig, 'privateKey'>>,
  Same<Omit<RawGateway['peers'][number], 'remapped'>, Omit<PeerConfig, 'remapped'>>,
  Same<RawNode, NodeConfig>,
] = [true, true, true, true];
void assertSameShape;

/** A peer whose `remapped` was left out addresses the peer by its real CIDRs. */
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

// ---------------------------------------------------------------------------------------------
// Public entry points

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
  const ctx: IssueSink = { issue: (path, message) => issues.push({ path: formatPath(path), message }) };
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
