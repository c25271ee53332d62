/**
 * The zod schemas of Weft's configuration model: leaf values (CIDRs, addresses, endpoints, keys,
 * names, ports), the sections a gateway and a node agent share or own, and the role-discriminated
 * raw schema with Liqo's defaults. They check each field on its own and canonicalise its text;
 * checks that relate fields to each other are config-checks.ts's, and the validated types the
 * data plane consumes are written out in config.ts (kept equal to these schemas there).
 */
import { z } from 'zod';
import { AddressParseError, formatAddress, parseAddress } from '../packet/addr.js';
import { EndpointParseError, canonicalCidr, formatEndpoint, parseEndpoint } from './cidr.js';
import { LOG_LEVELS } from './log-level.js';

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

/** A WireGuard key as the model holds it: standard base64 of 32 bytes. */
export const KEY_B64 = /^[A-Za-z0-9+/]{43}=$/;
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
  /**
   * Several tunnels (Liqo's GatewayServer spec.endpoint.ports, up to 64): tunnel i listens on
   * listenPorts[i]; listenPorts[0] is listenPort. One WireGuard session per tunnel, same keys.
   */
  listenPorts: z.array(port).min(1).max(64).optional(),
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
  /**
   * Several tunnels to this peer (Liqo's GatewayClient spec.endpoint.ports, up to 64): tunnel i
   * goes to the endpoint's host at endpointPorts[i]; endpointPorts[0] is the endpoint's port.
   */
  endpointPorts: z.array(port).min(1).max(64).optional(),
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

export const LogLevelSchema = z.enum(LOG_LEVELS);
export const LoggingSchema = z.strictObject({
  level: LogLevelSchema.default(DEFAULTS.logLevel),
});

const common = {
  cluster: ClusterSchema,
  geneve: GeneveSchema.prefault({}),
  metrics: MetricsSchema.prefault({}),
  logging: LoggingSchema.prefault({}),
};

export const GatewayRawSchema = z.strictObject({
  role: z.literal('gateway'),
  ...common,
  wireguard: WireguardSchema,
  peers: z.array(PeerSchema).default([]),
  ipMappings: z.array(IpMappingSchema).default([]),
});

export const NodeRawSchema = z.strictObject({
  role: z.literal('node'),
  ...common,
  node: NodeAgentSchema,
});

/** The whole file before cross-field checks: a gateway or a node agent, chosen by `role`. */
export const RawSchema = z.discriminatedUnion('role', [GatewayRawSchema, NodeRawSchema], {
  error: 'expected role: "gateway" or "node"',
});

export type RawGateway = z.output<typeof GatewayRawSchema>;
export type RawNode = z.output<typeof NodeRawSchema>;
