/** The snapshot Gateway.stats() returns (what `weft show` and the launcher's SIGUSR1 line print). */
import type { PeerStatsSample } from '../control/metrics.js';
import { GENEVE_DROP_NAMES } from '../geneve/reasons.js';
import type { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import type { PacketDevice } from '../io/device.js';
import type { FlowStats } from '../nat/flows.js';
import { NAT_DROP_MIN, natResultName } from '../nat/results.js';
import {
  coalescerStats,
  fabricOffloads,
  segmenterStats,
  type CoalescerCounts,
  type FabricOffloads,
  type SegmenterCounts,
} from '../pipelines/fabric-offload.js';
import type { GenevePort } from '../pipelines/geneve-port.js';
import type { WireGuardPort } from '../pipelines/wireguard-port.js';
import type { PeerTable } from '../router/peer-table.js';
import { ROUTER_DROP_NAMES } from '../router/drops.js';
import type { Router } from '../router/router.js';
import type { RulesRuntime } from '../rules/runtime.js';
import type { Device } from '../wireguard/device.js';
import { DROP_REASON_COUNT, DROP_REASON_NAMES } from '../wireguard/drops.js';
import type { Peer } from '../wireguard/peer.js';
import { formatAddress } from '../packet/addr.js';
import { tunnelOf } from './config-values.js';
import type { GatewayIo } from './gateway-io.js';
import type { GatewayPeers, PeerState } from './gateway-peers.js';
import { tunnelInterfaceName } from '../control/tunnel-address.js';
import { HOST_LANE_DROPS, type HostLaneDevice } from '../pipelines/host-lane.js';

/** The translation's numbers: the peer table's (tunnel MTU) and the configuration's rules' (connections, clamps). */
export interface NatStats {
  /** Packets the peer table let through towards a peer. */
  forwarded: number;
  /** Fragmentation Needed / Packet Too Big sent in a packet's place. */
  replies: number;
  mssClamped: number;
  drops: Record<string, number>;
  /** The rules' connection table (zeros when Liqo mode detached the configuration's rules). */
  conntrack: FlowStats;
}

/** One of a peer's WireGuard tunnels (Liqo: liqo-tunnel, liqo-tunnel1, …). */
export interface TunnelDetail {
  index: number;
  /** Liqo's interface name for it. */
  interface: string;
  /** The UDP port it listens on (a client's further tunnels: the kernel's pick). */
  listenPort: number;
  endpoint: string | null;
  /** In-tunnel addresses (ours, the peer's), null when it has none. */
  local: string | null;
  remote: string | null;
  /** Whether flows spread onto it (false: its connection check says Error). */
  inSpread: boolean;
  /** The kernel weight of the spread (Liqo nextHops weight + 1; 1 by default). */
  weight: number;
  /** Its connection check, when one reported ('' none yet). */
  check: string;
  latencyMs: number;
  rxBytes: number;
  txBytes: number;
  rxPackets: number;
  txPackets: number;
  lastHandshakeAtMs: number | null;
}

/** Everything `weft show` prints (a snapshot; allocates). */
export interface GatewayStats {
  peers: (PeerStatsSample & {
    name: string;
    endpoint: string | null;
    allowedIps: string[];
    /** In-tunnel addresses (ours, the peer's), null when the peer has none (tunnel-address.ts). */
    tunnel: { local: string; remote: string } | null;
    /** Several tunnels (Liqo's ports): each one's detail, tunnel 0 first; absent with one. */
    wgTunnels?: TunnelDetail[];
  })[];
  tunnels: {
    name: string;
    vni: number;
    remoteUnderlay: string;
    remoteInternal: string;
    txPackets: number;
    rxPackets: number;
    drops: number;
  }[];
  podRoutes: { podCIDR: string; nodeInternalAddress: string; resolved: boolean }[];
  nat: NatStats;
  drops: Record<string, number>;
  queues: Record<string, number>;
  tun: { name: string; mtu: number; rxPackets: number; txPackets: number; txErrors: number };
  offloads: FabricOffloads | null;
  gso: SegmenterCounts;
  gro: CoalescerCounts;
  ports: { geneve: number; wireguard: number };
  forwarded: { toWireguard: number; toGeneve: number; toTun: number };
  /** Packets handed to the router, by input: routed = forwarded + route_/nat_ drops + ipv6LinkLocal − generated ICMP errors. */
  routed: { fromNodes: number; fromHost: number; fromPeers: number };
  /** Of fromHost: the kernel's IPv6 link-local control (RS, MLD, ND), set apart unrouted; not a drop. */
  ipv6LinkLocal: number;
  /** The host lane: the local TUN, or in process without a host device (what works, flows, why). */
  hostLane: HostLaneStats;
}

export interface HostLaneStats {
  mode: 'tun' | 'sockets';
  /** Why sockets (the choice, or the TUN failure); null with a TUN. */
  reason: string | null;
  /** Sockets mode: packets answered in process (echo to own addresses, local UDP), flows by handler, handlers by IP protocol. */
  answered?: number;
  flows?: Record<string, number>;
  /** Sockets mode: flows closed for idleness so far, by handler. */
  expired?: Record<string, number>;
  handlers?: Record<number, string>;
  /** Sockets mode: why ICMP echo to other hosts is not relayed (null: it is). */
  icmpEchoUnavailable?: string | null;
}

/** Drops by reason from every stage of a gateway (non-zero only), prefixed by stage (allocates). */
export function collectDrops(
  router: Router<Peer, GeneveTunnel>,
  peers: PeerTable,
  devices: readonly Device[],
  geneve: GenevePort | undefined,
  wgs: readonly WireGuardPort[],
  tun: PacketDevice | undefined,
  lane: HostLaneDevice | null = null,
): Record<string, number> {
  const d: Record<string, number> = {};
  const put = (k: string, v: number): void => {
    if (v > 0) d[k] = (d[k] ?? 0) + v;
  };
  for (let i = 0; i < ROUTER_DROP_NAMES.length; i++) put(`route_${ROUTER_DROP_NAMES[i]!}`, router.drops[i]!);
  const g = geneve?.engine.counters.drops;
  if (g !== undefined) for (let i = 1; i < g.length; i++) put(`geneve_${GENEVE_DROP_NAMES[i]!}`, g[i]!);
  for (let i = NAT_DROP_MIN; i < peers.drops.length; i++) put(`nat_${natResultName(i)}`, peers.drops[i]!);
  for (const device of devices)
    for (let i = 0; i < DROP_REASON_COUNT; i++) put(`wg_${DROP_REASON_NAMES[i]!}`, device.drops[i]!);
  if (geneve !== undefined) {
    const s = geneve.stats;
    put('geneve_tx_no_tunnel', s.txNoTunnel);
    put('geneve_tx_no_headroom', s.txNoHeadroom);
    put('geneve_tx_send_failed', s.txSendFailures);
    put('geneve_tx_no_socket', s.txNoSocket);
  }
  for (const wg of wgs) {
    const w = wg.stats;
    put('wg_handshake_queue_full', w.handshakesDroppedQueueFull);
    put('wg_send_failed', w.sendFailures);
    put('wg_no_socket', w.noSocketForFamily);
  }
  if (tun !== undefined) put('tun_write_failed', tun.stats.txErrors);
  if (lane !== null) for (const r of HOST_LANE_DROPS) put(r, lane.drops[r]);
  return d;
}

/** The NAT numbers of `weft show`: the peer table's, and the connections and clamps of `rules` (the runtime in force, null when detached). */
export function natStats(peers: PeerTable, rules: RulesRuntime | null): NatStats {
  const p = peers.stats();
  const r = rules?.stats();
  return {
    forwarded: p.forwarded,
    replies: p.replies,
    mssClamped: r?.mssClamped ?? 0,
    drops: p.drops,
    conntrack: r?.flows ?? { entries: 0, capacity: 0, created: 0, evicted: 0, expired: 0, clashes: 0 },
  };
}

/** What Gateway.stats() assembles a snapshot from. */
export interface GatewayStatsParts {
  readonly peers: GatewayPeers;
  readonly now: number;
  readonly table: GeneveTunnelTable;
  readonly io: GatewayIo;
  readonly router: Router<Peer, GeneveTunnel>;
  readonly rules: RulesRuntime | null;
  readonly drops: Record<string, number>;
  readonly queues: Record<string, number>;
  readonly forwarded: GatewayStats['forwarded'];
  readonly routed: GatewayStats['routed'];
  /** The WireGuard interface name (Liqo's liqo-tunnel), base of the tunnels' names. */
  readonly interfaceName: string;
}

/** A full snapshot for `weft show` / logs (allocates). */
export function gatewayStats(x: GatewayStatsParts): GatewayStats {
  const samples = x.peers.samples(x.now);
  let i = 0;
  const peers: GatewayStats['peers'] = [];
  for (const s of x.peers.byName.values()) {
    const ep = s.wg.endpoint;
    peers.push({
      ...samples[i++]!,
      name: s.cfg.name,
      endpoint:
        ep === null ? null : ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`,
      allowedIps: [...s.cfg.remote.podCIDRs, ...s.cfg.remote.externalCIDRs],
      tunnel: tunnelOf(x.peers.plan, s.cfg.name),
      ...(s.tunnels.length > 1 ? { wgTunnels: tunnelDetails(x, s) } : {}),
    });
  }
  const { tun, geneve, wg } = x.io;
  const t = tun?.stats;
  return {
    peers,
    tunnels: [...x.table.tunnels()].map((g) => ({
      name: g.name,
      vni: g.vni,
      remoteUnderlay: g.remoteUnderlayText,
      remoteInternal: formatAddress(g.remoteInternal),
      txPackets: g.txPackets,
      rxPackets: g.rxPackets,
      drops: g.drops,
    })),
    podRoutes: x.table.podRoutes().map((r) => ({
      podCIDR: `${formatAddress(r.prefix.addr)}/${r.prefix.prefixLen}`,
      nodeInternalAddress: r.nodeInternalAddress,
      resolved: r.tunnel !== null,
    })),
    nat: natStats(x.router.peerTable, x.rules),
    drops: x.drops,
    queues: x.queues,
    tun: {
      name: tun?.name ?? '',
      mtu: tun?.mtu ?? 0,
      rxPackets: t?.rxPackets ?? 0,
      txPackets: t?.txPackets ?? 0,
      txErrors: t?.txErrors ?? 0,
    },
    offloads: tun === null || geneve === null ? null : fabricOffloads(tun, geneve),
    gso: segmenterStats(x.io.segmenter),
    gro: coalescerStats(x.io.tunWriter?.coalescer ?? null),
    ports: { geneve: geneve?.port ?? -1, wireguard: wg?.port ?? -1 },
    forwarded: { ...x.forwarded },
    routed: { ...x.routed },
    ipv6LinkLocal: x.router.ipv6LinkLocal,
    hostLane: hostLaneStats(x.io),
  };
}

function hostLaneStats(io: GatewayIo): HostLaneStats {
  const lane = io.lane;
  if (lane === null) return { mode: io.hostLane.mode, reason: io.hostLane.reason };
  return {
    mode: 'sockets',
    reason: io.hostLane.reason,
    answered: lane.answered,
    flows: lane.flows(),
    expired: lane.expiredFlows(),
    handlers: lane.handlers(),
    icmpEchoUnavailable: lane.icmpEchoUnavailable,
  };
}

function endpointText(p: Peer): string | null {
  const ep = p.endpoint;
  return ep === null ? null : ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`;
}

/** Each tunnel of peer `s`: counters, spread state, check. */
function tunnelDetails(x: GatewayStatsParts, s: PeerState): TunnelDetail[] {
  const spread = s.rp.spread;
  return s.tunnels.map((p, i) => {
    const t = x.peers.plan.peers.find((e) => e.name === s.cfg.name && e.tunnel === i);
    const c = s.checks[i]!;
    return {
      index: i,
      interface: tunnelInterfaceName(x.interfaceName, i),
      listenPort: x.io.wgs[i]?.port ?? -1,
      endpoint: endpointText(p),
      local: t?.local ?? null,
      remote: t?.remote ?? null,
      inSpread: spread === null || spread.isUp(i),
      weight: spread === null ? 1 : spread.weight(i),
      check: c.value,
      latencyMs: c.latencyMs,
      rxBytes: p.rxBytes,
      txBytes: p.txBytes,
      rxPackets: p.rxPackets,
      txPackets: p.txPackets,
      lastHandshakeAtMs: p.lastHandshakeMs === 0 ? null : p.lastHandshakeMs,
    };
  });
}
