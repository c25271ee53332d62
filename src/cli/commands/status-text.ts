/**
 * The text `weft show` prints for a running weft's status (src/daemon/status.ts), in the style
 * of `wg show`.
 */
import type { RuleCounterSample } from '../../control/metrics.js';
import type { WeftStatus } from '../../daemon/status.js';

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
  if (st.hostLane?.mode === 'sockets') {
    const h = st.hostLane;
    lines.push(`  host lane: in process, without a host device${h.reason !== undefined ? ` (${h.reason})` : ''}`);
    if (h.effect !== undefined) lines.push(`    ${h.effect}`);
    const flows = Object.entries(h.flows ?? {})
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    lines.push(
      `    answered in process: ${h.answered ?? 0}; flows: ${flows === '' ? 'none' : flows}; ICMP echo relay: ${
        h.icmpEchoUnavailable == null ? 'on' : `off (${h.icmpEchoUnavailable})`
      }`,
    );
  }
  lines.push(`  geneve port: ${st.geneve.port}`);
  if (st.offloads !== undefined)
    lines.push(`  offloads: tun ${onOff(st.offloads.tun)}, geneve udp ${onOff(st.offloads.geneve)}`);
  if (st.mssClamped !== undefined) lines.push(`  mss clamped: ${st.mssClamped}`);
  if (st.nat !== undefined)
    lines.push(
      `  nat entries: ${st.nat.entries}${st.nat.forwarded !== undefined ? `, forwarded ${st.nat.forwarded}, replies ${st.nat.replies ?? 0}, mss clamped ${st.nat.mssClamped ?? 0}` : ''}`,
    );
  const wake = st.wireguard?.unknownSession;
  if (wake !== undefined && (wake.initiations > 0 || wake.suppressed > 0))
    lines.push(`  unknown-session handshakes: ${wake.initiations} initiated, ${wake.suppressed} held back`);
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
        `  connection: ${p.connection.value}${p.connection.value === 'Connected' ? `, latency ${p.connection.latencyMs.toFixed(3)} ms` : ''}${p.connection.reason !== undefined ? ` (${p.connection.reason})` : ''}`,
      );
    }
    for (const t of p.tunnels ?? []) {
      const c = t.connection;
      const check =
        c.value === ''
          ? 'not checked yet'
          : c.value === 'Connected'
            ? `Connected, ${c.latencyMs.toFixed(3)} ms`
            : c.value;
      lines.push(
        `  tunnel ${t.index} (${t.interface}, port ${t.listenPort}${t.endpoint !== null ? ` → ${t.endpoint}` : ''}): ${t.inSpread ? 'in spread' : 'out of spread'}, weight ${t.weight}, ${check}; ${formatBytes(t.rxBytes)} received, ${formatBytes(t.txBytes)} sent`,
      );
    }
  }
  for (const t of st.geneve.tunnels) {
    lines.push('');
    lines.push(`geneve tunnel: vni ${t.vni} (${t.name})`);
    lines.push(`  remote underlay: ${t.remoteUnderlay}`);
    lines.push(`  packets: ${t.rxPackets} received, ${t.txPackets} sent${t.drops > 0 ? `, ${t.drops} dropped` : ''}`);
    if (t.check !== undefined)
      lines.push(
        `  check: ${t.check.value}${t.check.value === 'Connected' ? `, latency ${t.check.latencyMs.toFixed(3)} ms` : ''}`,
      );
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
