/**
 * Reading a running two-cluster fabric from the outside, for the soak (bench/soak.ts) and the
 * chaos e2e test: `weft show --json` of every instance in a run directory, the RSS of each
 * weft process, the kernel's UDP drop counters of a namespace, ping stalls, and the per-stage
 * counter balance "sent = received + counted drops".
 *
 * Contract: every function here only reads (procfs, control sockets, command output); nothing
 * is started or changed. Root is needed for `ip netns exec`.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { WeftStatus } from '../src/daemon/status.js';

/** Every instance's status in `runDir` (`weft show --json --run-dir DIR`), by instance name. */
export function showAll(weftBin: string, runDir: string): Map<string, WeftStatus> {
  const r = spawnSync(process.execPath, [weftBin, 'show', '--json', '--run-dir', runDir], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  if (r.status !== 0) throw new Error(`weft show --json --run-dir ${runDir} failed (${r.status}): ${r.stderr}`);
  const list = JSON.parse(r.stdout) as WeftStatus[];
  return new Map(list.map((s) => [s.weft.name, s] as const));
}

/** Resident set size of a process in KiB (VmRSS), or null when it is gone. */
export function rssKiB(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/**
 * The kernel's UDP receive-side drops in a namespace (/proc/net/snmp Udp: InErrors, RcvbufErrors,
 * InCsumErrors, and NoPorts: datagrams to a port nobody listens on).
 */
export function kernelUdpDrops(ns: string): {
  inErrors: number;
  rcvbufErrors: number;
  inCsumErrors: number;
  noPorts: number;
} {
  const r = spawnSync('ip', ['netns', 'exec', ns, 'cat', '/proc/net/snmp'], { encoding: 'utf8', timeout: 10_000 });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('Udp:'));
  if (lines.length < 2) throw new Error(`no Udp: lines in /proc/net/snmp of namespace ${ns}: ${r.stderr}`);
  const keys = lines[0]!.split(/\s+/).slice(1);
  const vals = lines[1]!.split(/\s+/).slice(1).map(Number);
  const get = (k: string): number => vals[keys.indexOf(k)] ?? 0;
  return {
    inErrors: get('InErrors'),
    rcvbufErrors: get('RcvbufErrors'),
    inCsumErrors: get('InCsumErrors'),
    noPorts: get('NoPorts'),
  };
}

/** TCP segments a namespace's kernel dropped for a bad checksum (/proc/net/snmp Tcp: InCsumErrors). */
export function kernelTcpCsumErrors(ns: string): number {
  const r = spawnSync('ip', ['netns', 'exec', ns, 'cat', '/proc/net/snmp'], { encoding: 'utf8', timeout: 10_000 });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('Tcp:'));
  if (lines.length < 2) throw new Error(`no Tcp: lines in /proc/net/snmp of namespace ${ns}`);
  const keys = lines[0]!.split(/\s+/);
  const vals = lines[1]!.split(/\s+/);
  return Number(vals[keys.indexOf('InCsumErrors')] ?? 0);
}

export interface PingSummary {
  transmitted: number;
  received: number;
  /** Longest time between two consecutive replies (ms); the nominal value is the interval. */
  longestGapMs: number;
  /** Gaps longer than 1 s: [start ISO, length ms]. */
  stalls: Array<[string, number]>;
}

/**
 * Parses the output of `ping -D -n -i INTERVAL` (each reply line starts with "[epoch.micro]").
 * The first reply starts the clock: time before it is the handshake, not a stall.
 */
export function pingSummary(text: string): PingSummary {
  const times: number[] = [];
  for (const m of text.matchAll(/^\[(\d+\.\d+)\] \d+ bytes from /gm)) times.push(Number(m[1]) * 1000);
  let longest = 0;
  const stalls: Array<[string, number]> = [];
  for (let i = 1; i < times.length; i++) {
    const gap = times[i]! - times[i - 1]!;
    if (gap > longest) longest = gap;
    if (gap > 1000) stalls.push([new Date(times[i - 1]!).toISOString(), Math.round(gap)]);
  }
  const tx = /(\d+) packets transmitted/.exec(text);
  const rx = /(\d+) received/.exec(text);
  return {
    transmitted: tx ? Number(tx[1]) : 0,
    received: rx ? Number(rx[1]) : times.length,
    longestGapMs: Math.round(longest),
    stalls,
  };
}

export interface StageBalance {
  stage: string;
  sent: number;
  received: number;
  /** Counted drops by reason (weft's own, and the kernel's UDP receive drops where the stage crosses a socket). */
  drops: Record<string, number>;
  /** sent − received − Σ drops: 0 when every packet is accounted for. */
  unaccounted: number;
  /** The unit of the counters ("packets", or "bytes" where only bytes are exposed). */
  unit: string;
}

function sum(r: Record<string, number>): number {
  let t = 0;
  for (const v of Object.values(r)) t += v;
  return t;
}

function pick(drops: Record<string, number>, keep: (k: string) => boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(drops)) if (keep(k) && v > 0) out[k] = v;
  return out;
}

export function balance(
  stage: string,
  sent: number,
  received: number,
  drops: Record<string, number>,
  unit = 'packets',
): StageBalance {
  return { stage, sent, received, drops, unaccounted: sent - received - sum(drops), unit };
}

/** Geneve receive-side drops of an instance (every geneve_* reason except the transmit ones). */
export function geneveRxDrops(s: WeftStatus): Record<string, number> {
  return pick(s.drops, (k) => k.startsWith('geneve_') && !k.startsWith('geneve_tx_'));
}

/** WireGuard receive-side drops of a gateway (wg_* reasons of the receive path). */
export function wireguardRxDrops(s: WeftStatus): Record<string, number> {
  const tx = new Set([
    'wg_outbound_invalid',
    'wg_no_route',
    'wg_no_endpoint',
    'wg_packet_too_big',
    'wg_staged_queue_full',
    'wg_staged_flushed',
    'wg_outbox_full',
    'wg_send_failed',
    'wg_no_socket',
    'wg_handshake_queue_full',
  ]);
  return pick(s.drops, (k) => k.startsWith('wg_') && !tx.has(k));
}

/**
 * A Geneve underlay in one direction, towards the instance `to` (a gateway and its nodes):
 * Geneve packets the senders sent on their tunnels to `to` = packets `to` received on those
 * tunnels + `to`'s counted Geneve receive drops + the kernel's UDP receive drops in `to`'s
 * namespace. Exact once the fabric is idle. Drops are per instance, so every sender that
 * reaches `to` must be listed.
 */
export function geneveStage(
  stage: string,
  senders: ReadonlyArray<[WeftStatus, number]>,
  to: WeftStatus,
  toVnis: readonly number[],
  kernelDrops: number,
): StageBalance {
  let sent = 0;
  for (const [from, vni] of senders) {
    const t = from.geneve.tunnels.find((x) => x.vni === vni);
    if (t === undefined) throw new Error(`${stage}: no tunnel with VNI ${vni} in ${from.weft.name}`);
    sent += t.txPackets;
  }
  let received = 0;
  for (const vni of toVnis) {
    const t = to.geneve.tunnels.find((x) => x.vni === vni);
    if (t === undefined) throw new Error(`${stage}: no tunnel with VNI ${vni} in ${to.weft.name}`);
    received += t.rxPackets;
  }
  return balance(stage, sent, received, {
    ...geneveRxDrops(to),
    ...(kernelDrops > 0 ? { kernel_udp_in_errors: kernelDrops } : {}),
  });
}

/**
 * WireGuard between two gateways, `from` → `to`: datagrams `from` queued for its peer = datagrams
 * `to` authenticated from its peer + `to`'s counted WireGuard receive drops + `from`'s send
 * failures + the kernel's UDP receive drops in `to`'s namespace (+ `extra`: drops counted outside
 * both, e.g. by a relay on the WAN). Needs the per-peer packet counters (`rxPackets`/`txPackets`).
 */
export function wireguardStage(
  stage: string,
  from: WeftStatus,
  to: WeftStatus,
  kernelDrops: number,
  extra: Record<string, number> = {},
): StageBalance {
  const p = from.wireguard?.peers[0];
  const q = to.wireguard?.peers[0];
  if (p?.txPackets === undefined || q?.rxPackets === undefined)
    throw new Error(
      `${stage}: ${from.weft.name} or ${to.weft.name} has no peer packet counters (weft show --json peers[].txPackets/rxPackets)`,
    );
  const sendFailed = pick(from.drops, (k) => k === 'wg_send_failed' || k === 'wg_no_socket');
  const drops: Record<string, number> = { ...wireguardRxDrops(to), ...extra };
  for (const [k, v] of Object.entries(sendFailed)) drops[`sender_${k}`] = v;
  if (kernelDrops > 0) drops['kernel_udp_in_errors'] = kernelDrops;
  return balance(stage, p.txPackets, q.rxPackets, drops);
}

const NODE_TX_DROPS = new Set(['geneve_bad_inner_packet', 'geneve_too_big', 'geneve_no_peer_mac', 'geneve_no_room']);

/** A node agent's egress: packets read from its TUN = Geneve packets sent + counted transmit drops. */
export function nodeEgressStage(stage: string, node: WeftStatus): StageBalance {
  const sent = node.interface?.rxPackets ?? 0;
  let out = 0;
  for (const t of node.geneve.tunnels) out += t.txPackets;
  return balance(
    stage,
    sent,
    out,
    pick(node.drops, (k) => k.startsWith('geneve_tx_') || NODE_TX_DROPS.has(k)),
  );
}

/** A node agent's ingress: Geneve packets received on its tunnels = packets written to its TUN + write failures. */
export function nodeIngressStage(stage: string, node: WeftStatus): StageBalance {
  let got = 0;
  for (const t of node.geneve.tunnels) got += t.rxPackets;
  return balance(
    stage,
    got,
    node.interface?.txPackets ?? 0,
    pick(node.drops, (k) => k === 'tun_write_failed'),
  );
}

/**
 * A gateway's router: packets in (from nodes, the host, the peers) = packets out (to nodes, the
 * host, the peers) + route_/nat_ drops. An ICMP error the router generates is an output without
 * an input (none in steady traffic; it would show as a negative `unaccounted`).
 */
export function gatewayRouterStage(stage: string, gw: WeftStatus): StageBalance {
  const f = gw.forwarding;
  if (f === undefined)
    throw new Error(`${stage}: ${gw.weft.name} reports no forwarding counters (weft show --json forwarding)`);
  return balance(
    stage,
    f.in.fromNodes + f.in.fromHost + f.in.fromPeers,
    f.out.toNodes + f.out.toHost + f.out.toPeers,
    pick(gw.drops, (k) => k.startsWith('route_') || k.startsWith('nat_')),
  );
}
