/**
 * The status a running weft reports over its control socket (`weft show --json` prints it
 * as is) and its text rendering in the style of `wg show`.
 *
 * The JSON shape is a contract for scripts: fields are only ever added. It never carries a
 * private or preshared key (only `hasPresharedKey`).
 */
import type { RuleCounterSample } from '../../control/metrics.js';
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
  /** In-tunnel connection check (Liqo's conncheck), when running. */
  connection?: { value: string; latencyMs: number };
}

export interface WeftTunnelStatus {
  vni: number;
  /** Node name (gateway) or gateway name (node agent). */
  name: string;
  remoteUnderlay: string;
  rxPackets: number;
  txPackets: number;
  drops: number;
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
  /** The local TUN device, when one is open. */
  interface?: { name: string; mtu: number; rxPackets: number; txPackets: number };
  wireguard?: { publicKey: string; listenPort: number; crypto: string; x25519?: string; peers: WeftPeerStatus[] };
  geneve: { port: number; tunnels: WeftTunnelStatus[] };
  /** Offloads in effect on the local TUN and the Geneve UDP socket (false: off or refused by the kernel). */
  offloads?: { tun: { csum: boolean; tso: boolean; uso: boolean }; geneve: { gso: boolean; gro: boolean } };
  /**
   * Gateway: Weft's built-in remap/masquerade NAT — conntrack entries, packets it translated
   * (forwarded out, replies back) and SYNs whose MSS it clamped. All stay 0 in Liqo mode
   * (--liqo-firewall), where the FirewallConfigurations' chains translate instead.
   */
  nat?: { entries: number; forwarded?: number; replies?: number; mssClamped?: number };
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
  /** Problems in force (a rejected Kubernetes object, resources not usable yet…); absent when none. */
  errors?: { topic: string; message: string; since: string }[];
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes as wg prints them: "1.23 KiB", "0 B". */
export function formatBytes(n: number): string {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(2)} ${UNITS[i]}`;
}

/** "1 hour, 2 minutes, 3 seconds" (zero parts omitted; "0 seconds" for 0). */
export function formatDuration(totalSeconds: number): string {
  let s = Math.max(0, Math.floor(totalSeconds));
  const parts: string[] = [];
  const units: [number, string][] = [
    [365 * 86400, 'year'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
    [1, 'second'],
  ];
  for (const [size, name] of units) {
    const q = Math.floor(s / size);
    s -= q * size;
    if (q > 0) parts.push(`${q} ${name}${q === 1 ? '' : 's'}`);
  }
  return parts.length === 0 ? '0 seconds' : parts.join(', ');
}

/** "csum tso" (the features that are on) or "off". */
function onOff(r: Record<string, boolean>): string {
  const on = Object.keys(r).filter((k) => r[k]);
  return on.length === 0 ? 'off' : on.join(' ');
}

/** The text of `weft show` for one instance. `now` in Unix ms. */
export function formatStatus(st: WeftStatus, now: number): string {
  const lines: string[] = [];
  const w = st.weft;
  const up = formatDuration((now - Date.parse(w.startedAt)) / 1000);
  lines.push(`${w.role}: ${w.name}${w.active ? '' : ' (standby)'}`);
  lines.push(`  cluster: ${st.cluster.id}`);
  lines.push(`  source: ${w.source}`);
  lines.push(`  process: pid ${w.pid}, weft ${w.version}, up ${up}`);
  if (st.wireguard !== undefined) {
    lines.push(`  public key: ${st.wireguard.publicKey}`);
    lines.push(`  listening port: ${st.wireguard.listenPort}`);
    lines.push(
      `  crypto: ${st.wireguard.crypto}${st.wireguard.x25519 !== undefined ? ` (X25519: ${st.wireguard.x25519})` : ''}`,
    );
  }
  if (st.interface !== undefined) {
    lines.push(
      `  interface: ${st.interface.name} (mtu ${st.interface.mtu}), ${st.interface.rxPackets} packets read, ${st.interface.txPackets} written`,
    );
  }
  lines.push(`  geneve port: ${st.geneve.port}`);
  if (st.offloads !== undefined)
    lines.push(`  offloads: tun ${onOff(st.offloads.tun)}, geneve udp ${onOff(st.offloads.geneve)}`);
  if (st.nat !== undefined)
    lines.push(
      `  nat entries: ${st.nat.entries}${st.nat.forwarded !== undefined ? `, forwarded ${st.nat.forwarded}, replies ${st.nat.replies ?? 0}, mss clamped ${st.nat.mssClamped ?? 0}` : ''}`,
    );
  for (const e of st.errors ?? []) {
    const [first, ...rest] = e.message.split('\n');
    lines.push(`  error (${e.topic}, since ${formatDuration((now - Date.parse(e.since)) / 1000)} ago): ${first}`);
    for (const r of rest) lines.push(`    ${r}`);
  }

  for (const p of st.wireguard?.peers ?? []) {
    lines.push('');
    lines.push(`peer: ${p.publicKey}`);
    lines.push(`  name: ${p.name}${p.clusterId !== p.name ? ` (cluster ${p.clusterId})` : ''}`);
    if (p.hasPresharedKey) lines.push('  preshared key: (hidden)');
    if (p.endpoint !== null) lines.push(`  endpoint: ${p.endpoint}`);
    lines.push(`  allowed ips: ${p.allowedIPs.length > 0 ? p.allowedIPs.join(', ') : '(none)'}`);
    if (p.remappedCIDRs.length > 0 && p.remappedCIDRs.join() !== p.allowedIPs.join())
      lines.push(`  remapped as: ${p.remappedCIDRs.join(', ')}`);
    if (p.latestHandshake !== null)
      lines.push(`  latest handshake: ${formatDuration((now - Date.parse(p.latestHandshake)) / 1000)} ago`);
    if (p.rxBytes > 0 || p.txBytes > 0)
      lines.push(`  transfer: ${formatBytes(p.rxBytes)} received, ${formatBytes(p.txBytes)} sent`);
    if (p.persistentKeepalive > 0) lines.push(`  persistent keepalive: every ${formatDuration(p.persistentKeepalive)}`);
    if (p.tunnelAddress !== undefined)
      lines.push(
        `  tunnel address: ${p.tunnelAddress}${p.localTunnelAddress !== undefined ? ` (ours ${p.localTunnelAddress})` : ''}`,
      );
    if (p.connection !== undefined) {
      lines.push(
        `  connection: ${p.connection.value}${p.connection.value === 'Connected' ? `, latency ${p.connection.latencyMs.toFixed(3)} ms` : ''}`,
      );
    }
  }
  for (const t of st.geneve.tunnels) {
    lines.push('');
    lines.push(`geneve tunnel: vni ${t.vni} (${t.name})`);
    lines.push(`  remote underlay: ${t.remoteUnderlay}`);
    lines.push(`  packets: ${t.rxPackets} received, ${t.txPackets} sent${t.drops > 0 ? `, ${t.drops} dropped` : ''}`);
  }
  if (st.rules !== undefined) {
    const r = st.rules;
    lines.push('');
    lines.push(
      `rules: ${r.counters.length} counters, ${r.general.length} on the general matcher, remap shortcut ${r.statelessShortcut ? 'on' : 'off'}`,
    );
    const name = (c: RuleCounterSample): string => `${c.object} ${c.table}/${c.chain}/${c.rule}`;
    for (const c of r.counters) lines.push(`  counter ${name(c)}: ${c.packets} packets, ${formatBytes(c.bytes ?? 0)}`);
    for (const c of r.general) lines.push(`  general ${name(c)}: ${c.packets} matches`);
  }
  if (st.fabric !== undefined) {
    lines.push('');
    lines.push('fabric objects (node role):');
    for (const c of st.fabric.chains)
      lines.push(
        `  chain ${c.object} ${c.table}/${c.chain}: ${c.path === 'tun' ? 'in process (TUN traffic only)' : `node kernel (nft table ip ${c.kernelTable ?? c.table})`}`,
      );
    for (const r of st.fabric.routes)
      lines.push(
        `  routes ${r.object}: node kernel, table ${r.table} (id ${r.tableId}), ${r.rules} rules, ${r.routes} routes`,
      );
  }
  const drops = Object.entries(st.drops)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  lines.push('');
  if (drops.length === 0) {
    lines.push('drops: none');
  } else {
    lines.push('drops:');
    for (const [reason, n] of drops) lines.push(`  ${reason}: ${n}`);
  }
  const ignored = Object.entries(st.ignored ?? {}).filter(([, n]) => n > 0);
  if (ignored.length > 0) lines.push(`not forwarded (not drops): ${ignored.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  const queues = Object.entries(st.queues).filter(([, n]) => n > 0);
  if (queues.length > 0) lines.push(`queues: ${queues.map(([q, n]) => `${q} ${n}`).join(', ')}`);
  return `${lines.join('\n')}\n`;
}
