/**
 * The status a running weft reports over its control socket (`weft show --json` prints it
 * as is); src/cli/commands/status-text.ts renders it as text.
 *
 * The JSON shape is a contract for scripts: fields are only ever added. It never carries a
 * private or preshared key (only `hasPresharedKey`).
 */
import type { RuleCounterSample } from '../control/metrics.js';
import type { FabricPathStatus } from './k8s-fabric.js';

export interface WeftPeerStatus {
  /** Peer name in the configuration (the remote cluster ID in Kubernetes mode). */
  name: string;
  clusterId: string;
  /** base64 public key. */
  publicKey: string;
  hasPresharedKey: boolean;
  /** Current endpoint ("addr:port", IPv6 "[addr]:port"); roams with the peer. null = unknown yet. */
  endpoint: string | null;
  /** The peer's real CIDRs (WireGuard allowed IPs). */
  allowedIPs: string[];
  /** How this cluster addresses the peer (remapped CIDRs). */
  remappedCIDRs: string[];
  /** ISO time of the last completed handshake, or null. */
  latestHandshake: string | null;
  rxBytes: number;
  txBytes: number;
  /** Datagrams behind rxBytes / txBytes (handshake and transport messages). */
  rxPackets?: number;
  txPackets?: number;
  /** Handshakes completed with this peer since start (each rekey is one). */
  handshakes?: number;
  /** Seconds, 0 = off. */
  persistentKeepalive: number;
  /** The peer's in-tunnel address (the connection check's destination), when it has one. */
  tunnelAddress?: string;
  /** This gateway's in-tunnel address towards the peer (the check's source). */
  localTunnelAddress?: string;
  /**
   * In-tunnel connection check (Liqo's conncheck), when running: tunnel 0's, as Liqo reports it. `value` is what the Connection
   * says: Error, with `reason`, also when the check answers but the data path is down (every
   * Geneve tunnel to the nodes down); `reason` also explains an Error of the check itself.
   */
  connection?: { value: string; latencyMs: number; reason?: string };
  /** Several WireGuard tunnels (Liqo's spec.endpoint.ports): each one, tunnel 0 first. */
  tunnels?: WeftWireguardTunnelStatus[];
}

/** One of a peer's WireGuard tunnels (Liqo's interface liqo-tunnel, liqo-tunnel1, …). */
export interface WeftWireguardTunnelStatus {
  index: number;
  interface: string;
  listenPort: number;
  endpoint: string | null;
  tunnelAddress: string | null;
  localTunnelAddress: string | null;
  /** Whether flows spread onto it: it has a session and its connection check is not Error. */
  inSpread: boolean;
  /** Its share of the spread (kernel weight: RouteConfiguration nextHops weight + 1; default 1). */
  weight: number;
  /** Its connection check ('' before the first report). */
  connection: { value: string; latencyMs: number };
  latestHandshake: string | null;
  rxBytes: number;
  txBytes: number;
  rxPackets: number;
  txPackets: number;
}

export interface WeftTunnelStatus {
  vni: number;
  /** Node name (gateway) or gateway name (node agent). */
  name: string;
  remoteUnderlay: string;
  rxPackets: number;
  txPackets: number;
  drops: number;
  /** Liqo's Geneve health check over this tunnel (UDP 54321 between the inner addresses), when it runs. */
  check?: { value: string; latencyMs: number };
}

/** The heartbeat link between gateway replicas (k8s-heartbeat.ts), as `weft show --json` gives it. */
export interface HeartbeatStats {
  port: number;
  state: 'active' | 'standby' | 'leaving';
  sent: number;
  received: number;
  /** Verified but refused: our own, replayed/reordered, or clock skew beyond the limit. */
  refused: number;
  dropped: Partial<Record<string, number>>;
  peers: string[];
  lastActive: string | undefined;
}

export interface WeftStatus {
  weft: {
    version: string;
    name: string;
    role: 'gateway' | 'node';
    pid: number;
    /** ISO start time. */
    startedAt: string;
    /** Configuration file path, or "kubernetes". */
    source: string;
    /** false on a standby replica (Kubernetes HA) whose data plane is not running. */
    active: boolean;
  };
  cluster: { id: string };
  /**
   * Gateway: what its host lane (packets for the gateway itself, routes out of its own
   * interface) runs on — `tun` (the local TUN and the kernel) or `sockets` (in process, no host
   * device: `effect` says what that changes; `reason` why; flows relayed by handler).
   */
  hostLane?: {
    mode: 'tun' | 'sockets';
    reason?: string;
    effect?: string;
    answered?: number;
    flows?: Record<string, number>;
    /** Flows closed for idleness so far, by handler. */
    expired?: Record<string, number>;
    handlers?: Record<string, string>;
    icmpEchoUnavailable?: string | null;
  };
  /** The local TUN device, when one is open (with a host lane in process: the lane's counters). */
  interface?: { name: string; mtu: number; rxPackets: number; txPackets: number };
  wireguard?: {
    publicKey: string;
    listenPort: number;
    crypto: string;
    x25519?: string;
    peers: WeftPeerStatus[];
    /** Handshakes started because transport data arrived for a session this process does not have, and those held back. */
    unknownSession?: { initiations: number; suppressed: number };
  };
  geneve: { port: number; tunnels: WeftTunnelStatus[] };
  /** Offloads in effect on the local TUN and the Geneve UDP socket (false: off or refused by the kernel). */
  offloads?: { tun: { csum: boolean; tso: boolean; uso: boolean }; geneve: { gso: boolean; gro: boolean } };
  /**
   * Gateway: Weft's built-in remap/masquerade NAT — conntrack entries, packets it translated
   * (forwarded out, replies back) — and every SYN / SYN-ACK whose MSS was clamped (the built-in
   * NAT's and any tcpmssclamp rule's, Liqo mode's included). Entries, forwarded and replies stay
   * 0 in Liqo mode (--liqo-firewall), where the FirewallConfigurations' chains translate instead.
   */
  nat?: { entries: number; forwarded?: number; replies?: number; mssClamped?: number };
  /** Node role, Liqo mode: SYN / SYN-ACK segments whose MSS the fabric rules run in process clamped. */
  mssClamped?: number;
  /** Gateway: packets into its router by input, and out of it by output (the rest are route_/nat_ drops). */
  forwarding?: {
    in: { fromNodes: number; fromHost: number; fromPeers: number };
    out: { toNodes: number; toHost: number; toPeers: number };
  };
  /** "stage.reason" → count (only non-zero). */
  drops: Record<string, number>;
  /**
   * Packets read from the TUN and deliberately not forwarded, which are not drops (only
   * non-zero): `ipv6_link_local`, the kernel's own IPv6 link-local control (router
   * solicitations, MLD, neighbour discovery) on a TUN that carries IPv6.
   */
  ignored?: Record<string, number>;
  queues: Record<string, number>;
  /**
   * Compiled firewall rules in force (Liqo mode, both roles): rules with `counter` and chain
   * policies (packets, bytes), rules on the general matcher (packets matched), and whether the
   * stateless remap shortcut is in force. Absent when no rules run.
   */
  rules?: { statelessShortcut: boolean; counters: RuleCounterSample[]; general: RuleCounterSample[] };
  /** Node role, Liqo mode: where each fabric chain is enforced, and the RouteConfigurations in the kernel. */
  fabric?: FabricPathStatus;
  /**
   * Gateway HA (Liqo template, leader election): the heartbeat link between the replicas — our
   * state as sent, heartbeats sent/received/refused (replayed, skewed), datagrams dropped by
   * reason, where they go and the replica last heard as active. Absent without heartbeats.
   */
  ha?: HeartbeatStats;
  /** Problems in force (a rejected Kubernetes object, resources not usable yet…); absent when none. */
  errors?: { topic: string; message: string; since: string }[];
}
