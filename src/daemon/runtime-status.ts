/**
 * `weft show`'s status (status.ts WeftStatus) assembled from what a Runtime holds: the
 * process, the configuration, the running gateway's or node agent's stats, the connection
 * check's view of each peer, the rules in force, the node's fabric and the problems the control
 * plane reported. Apart from the runtime because it is a pure read of that state into the
 * status schema, made on each `weft show`, while the runtime owns the lifecycle.
 */
import type { GatewayConfig, NodeConfig, WeftConfig } from '../control/config.js';
import type { PeerCheckStatus } from '../control/conncheck.js';
import { keyToBase64 } from '../crypto/keys.js';
import type { RulesAttachment } from '../rules/attach.js';
import type { FabricPathStatus } from './k8s-fabric.js';
import type { RunningDataPlane } from './launch.js';
import type { WeftPeerStatus, WeftStatus, WeftTunnelStatus } from './status.js';
import { WEFT_VERSION } from './version.js';
import { HOST_LANE_SOCKETS_EFFECT } from '../pipelines/host-lane-effect.js';

/** What the runtime reads of a rules attachment. */
export type RulesCounterSource = Pick<RulesAttachment, 'counterSamples' | 'generalSamples' | 'runtime'>;

/** The runtime's state a status is made of. */
export interface StatusInputs {
  /** Instance name and configuration source (`weft show`'s header). */
  readonly name: string;
  readonly source: string;
  readonly startedAt: Date;
  readonly config: WeftConfig | null;
  readonly dp: RunningDataPlane | null;
  /** Compiled rules in force, null: none. */
  readonly rules: RulesCounterSource | null;
  readonly fabric: (() => FabricPathStatus) | null;
  /** Problems by topic. */
  readonly problems: ReadonlyMap<string, { message: string; since: string }>;
  /** The in-tunnel check's view of a peer, when a runner checks it. */
  checkStatus(clusterId: string): PeerCheckStatus | undefined;
  /** The Geneve check's view of each tunnel, by tunnel name. */
  geneveStatuses(): ReadonlyMap<string, PeerCheckStatus>;
  /** Gateway: why the data path is down although the in-tunnel check may answer (null: it is not). */
  dataPathProblem(): string | null;
  /** MSS clamps by Liqo mode's rules (the gateway's own are in its stats). */
  liqoMssClamped(): number;
}

/** What `weft show` prints (see status.ts). */
export function runtimeStatus(x: StatusInputs): WeftStatus {
  const r = x.rules;
  const st0 = dataPlaneStatus(x);
  const st1 =
    r === null
      ? st0
      : {
          ...st0,
          rules: {
            statelessShortcut: r.runtime.statelessShortcut,
            counters: r.counterSamples(),
            general: r.generalSamples(),
          },
        };
  const st = x.fabric === null ? st1 : { ...st1, fabric: x.fabric() };
  if (x.problems.size === 0) return st;
  return { ...st, errors: [...x.problems].map(([topic, p]) => ({ topic, message: p.message, since: p.since })) };
}

function dataPlaneStatus(x: StatusInputs): WeftStatus {
  const cfg = x.config;
  const base: WeftStatus = {
    weft: {
      version: WEFT_VERSION,
      name: x.name,
      role: cfg?.role ?? 'gateway',
      pid: process.pid,
      startedAt: x.startedAt.toISOString(),
      source: x.source,
      active: x.dp !== null,
    },
    cluster: { id: cfg?.cluster.id ?? '' },
    geneve: { port: cfg?.geneve.port ?? 0, tunnels: [] },
    drops: {},
    queues: {},
  };
  const dp = x.dp;
  if (dp === null || cfg === null) return base;
  if (dp.role === 'gateway') return gatewayStatus(x, base, dp.gateway, cfg as GatewayConfig);
  return nodeStatus(x, base, dp.node, cfg as NodeConfig);
}

function gatewayStatus(
  x: StatusInputs,
  base: WeftStatus,
  gw: Extract<RunningDataPlane, { role: 'gateway' }>['gateway'],
  cfg: GatewayConfig,
): WeftStatus {
  const st = gw.stats();
  const byName = new Map(gw.current.peers.map((p) => [p.name, p] as const));
  const pub = gw.device.publicKey;
  const down = x.dataPathProblem();
  const geneve = x.geneveStatuses();
  const peers: WeftPeerStatus[] = st.peers.map((p) => {
    const c = byName.get(p.name);
    const check = x.checkStatus(p.clusterId);
    return {
      name: p.name,
      clusterId: p.clusterId,
      publicKey: c?.publicKey ?? '',
      hasPresharedKey: c?.presharedKey !== undefined,
      endpoint: p.endpoint,
      allowedIPs: p.allowedIps,
      remappedCIDRs: c === undefined ? [] : [...c.remapped.podCIDRs, ...c.remapped.externalCIDRs],
      latestHandshake: p.lastHandshakeAtMs === undefined ? null : new Date(p.lastHandshakeAtMs).toISOString(),
      rxBytes: p.rxBytes,
      txBytes: p.txBytes,
      ...(p.rxPackets !== undefined ? { rxPackets: p.rxPackets } : {}),
      ...(p.txPackets !== undefined ? { txPackets: p.txPackets } : {}),
      handshakes: p.handshakes,
      persistentKeepalive: c?.persistentKeepalive ?? 0,
      ...(p.tunnel !== null ? { tunnelAddress: p.tunnel.remote, localTunnelAddress: p.tunnel.local } : {}),
      ...(check !== undefined ? { connection: connectionStatus(check, down) } : {}),
      ...(p.wgTunnels !== undefined
        ? {
            tunnels: p.wgTunnels.map((t) => ({
              index: t.index,
              interface: t.interface,
              listenPort: t.listenPort,
              endpoint: t.endpoint,
              tunnelAddress: t.remote,
              localTunnelAddress: t.local,
              inSpread: t.inSpread,
              weight: t.weight,
              connection: { value: t.check, latencyMs: t.latencyMs },
              latestHandshake: t.lastHandshakeAtMs === null ? null : new Date(t.lastHandshakeAtMs).toISOString(),
              rxBytes: t.rxBytes,
              txBytes: t.txBytes,
              rxPackets: t.rxPackets,
              txPackets: t.txPackets,
            })),
          }
        : {}),
    };
  });
  const hl = st.hostLane;
  return {
    ...base,
    hostLane:
      hl.mode === 'tun'
        ? { mode: 'tun' }
        : {
            mode: 'sockets',
            ...(hl.reason !== null ? { reason: hl.reason } : {}),
            effect: HOST_LANE_SOCKETS_EFFECT,
            answered: hl.answered ?? 0,
            flows: hl.flows ?? {},
            expired: hl.expired ?? {},
            handlers: Object.fromEntries(Object.entries(hl.handlers ?? {}).map(([k, v]) => [String(k), v])),
            icmpEchoUnavailable: hl.icmpEchoUnavailable ?? null,
          },
    interface: interfaceStatus(st.tun),
    wireguard: {
      publicKey: pub === null ? '' : keyToBase64(pub),
      listenPort: st.ports.wireguard,
      crypto: gw.device.backend.name,
      ...(gw.device.backend.x25519Impl !== undefined ? { x25519: gw.device.backend.x25519Impl } : {}),
      peers,
      unknownSession: {
        initiations: gw.device.unknownSessionInitiations,
        suppressed: gw.device.unknownSessionSuppressed,
      },
    },
    geneve: {
      port: st.ports.geneve,
      tunnels: st.tunnels.map((t) => tunnelStatus(t, geneve.get(t.name))),
    },
    ...(st.offloads === null ? {} : { offloads: st.offloads }),
    nat: (() => {
      // On the compiled rules (YAML mode's default) the connections and the clamps are the rules' (Gateway.stats);
      // Liqo mode's clamps are added (its translations are the rules' counters, not these).
      const n = st.nat;
      return {
        entries: n.conntrack.entries,
        forwarded: n.forwarded,
        replies: n.replies,
        mssClamped: n.mssClamped + x.liqoMssClamped(),
      };
    })(),
    forwarding: {
      in: { ...st.routed },
      out: { toNodes: st.forwarded.toGeneve, toHost: st.forwarded.toTun, toPeers: st.forwarded.toWireguard },
    },
    drops: st.drops,
    ...(st.ipv6LinkLocal > 0 ? { ignored: { ipv6_link_local: st.ipv6LinkLocal } } : {}),
    queues: st.queues,
    cluster: { id: cfg.cluster.id },
  };
}

function nodeStatus(
  x: StatusInputs,
  base: WeftStatus,
  node: Extract<RunningDataPlane, { role: 'node' }>['node'],
  cfg: NodeConfig,
): WeftStatus {
  const st = node.stats();
  const drops = prefixed('geneve_', st.geneve.drops);
  const g = st.geneve;
  const put = (k: string, v: number): void => {
    if (v > 0) drops[k] = v;
  };
  put('geneve_tx_no_tunnel', g.txNoTunnel);
  put('geneve_tx_no_headroom', g.txNoHeadroom);
  put('geneve_tx_send_failed', g.txSendFailures);
  put('geneve_tx_no_socket', g.txNoSocket);
  put('tun_write_failed', st.tun.txErrors);
  return {
    ...base,
    interface: interfaceStatus(st.tun),
    geneve: {
      port: node.geneve.port,
      tunnels: st.tunnels.map((t) => tunnelStatus(t, x.geneveStatuses().get(t.name))),
    },
    offloads: st.offloads,
    drops,
    ...(st.ipv6LinkLocal > 0 ? { ignored: { ipv6_link_local: st.ipv6LinkLocal } } : {}),
    cluster: { id: cfg.cluster.id },
    // Liqo mode: the fabric rules run in process may clamp too.
    ...(x.rules !== null ? { mssClamped: x.liqoMssClamped() } : {}),
  };
}

/** The TUN device's part of a status: just the fields the schema names. */
function interfaceStatus(t: NonNullable<WeftStatus['interface']>): NonNullable<WeftStatus['interface']> {
  return { name: t.name, mtu: t.mtu, rxPackets: t.rxPackets, txPackets: t.txPackets };
}

/** One Geneve tunnel's part of a status: just the fields the schema names, and its check. */
function tunnelStatus(t: WeftTunnelStatus, check: PeerCheckStatus | undefined): WeftTunnelStatus {
  return {
    vni: t.vni,
    name: t.name,
    remoteUnderlay: t.remoteUnderlay,
    rxPackets: t.rxPackets,
    txPackets: t.txPackets,
    drops: t.drops,
    ...(check !== undefined ? { check: { value: check.value, latencyMs: check.latencyMs } } : {}),
  };
}

/** A peer's Connection as `weft show` reports it: the check's value, Error when the data path is down. */
export function connectionStatus(
  check: PeerCheckStatus,
  dataPathProblem: string | null,
): NonNullable<WeftPeerStatus['connection']> {
  if (dataPathProblem !== null) return { value: 'Error', latencyMs: check.latencyMs, reason: dataPathProblem };
  if (check.value === 'Error')
    return { value: 'Error', latencyMs: 0, reason: 'no reply to the in-tunnel connection check' };
  return { value: check.value, latencyMs: check.latencyMs };
}

/** Counters above zero, their names prefixed (the node role's Geneve drops as status and metrics name them). */
export function prefixed(prefix: string, rec: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(rec)) if (v > 0) out[`${prefix}${k}`] = v;
  return out;
}
