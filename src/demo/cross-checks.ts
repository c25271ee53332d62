/**
 * The cross-cluster checks of the namespace demo, in the order they are shown (handshake, ping
 * both ways, HTTP, UDP echo, traceroute, SNAT source, iperf3), as table rows, and the table
 * they print as. Apart from run.ts, which sets the clusters up and tears them down: this is
 * what is measured once they run.
 */
import { httpCheck, iperfCheck, ping, traceroute, udpEchoCheck } from './checks.js';
import { haveCommand } from './host.js';
import { checkedPods, type DemoPlan, type DemoRow } from './plan.js';

function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '—';
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
}

function fmtRate(bps: number): string {
  return bps >= 1e9 ? `${(bps / 1e9).toFixed(2)} Gbit/s` : `${(bps / 1e6).toFixed(0)} Mbit/s`;
}

/** Renders rows as an aligned text table. */
export function formatTable(rows: readonly DemoRow[]): string {
  const head = ['', 'check', 'path', 'result'];
  const cells = rows.map((r) => [r.ok === null ? ' ' : r.ok ? '✓' : '✗', r.check, r.path, r.result]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]): string =>
    c
      .map((x, i) => x.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(head), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

/** The cross-cluster checks of the namespace demo, as table rows. */
export async function runChecks(
  plan: DemoPlan,
  opts: { iperfSeconds: number; handshakeMs: number },
  report: (s: string) => void,
): Promise<DemoRow[]> {
  const rows: DemoRow[] = [];
  const { A1, A2, A3, B1, B3, B4, b3AtA, a1AtB, a2AtB, a3AtB, b1AtA, snatAtB } = checkedPods(plan);
  const nodeA1 = plan.a.nodes[0]!;

  rows.push({
    check: 'WireGuard handshake',
    path: `gateway A ${plan.a.wanAddress} → gateway B ${plan.b.wanAddress}:${plan.wireguardPort}`,
    result: `first reply after ${fmtMs(opts.handshakeMs)}`,
    ok: true,
  });

  report(`ping ${A1.name} → ${B3.name} as ${b3AtA}`);
  const p1 = await ping(A1.ns, b3AtA, 10, 0.1);
  rows.push({
    check: 'ping',
    path: `${A1.name} ${A1.ip} → ${B3.name} as ${b3AtA}`,
    result: `${p1.received}/${p1.sent}, rtt avg ${fmtMs(p1.avgMs)} (min ${fmtMs(p1.minMs)}, max ${fmtMs(p1.maxMs)})`,
    ok: p1.received === p1.sent && p1.sent > 0,
  });

  report(`ping ${B4.name} → ${A2.name} as ${a2AtB} (the other way)`);
  const p2 = await ping(B4.ns, a2AtB, 5, 0.1);
  rows.push({
    check: 'ping (B → A)',
    path: `${B4.name} ${B4.ip} → ${A2.name} as ${a2AtB}`,
    result: `${p2.received}/${p2.sent}, rtt avg ${fmtMs(p2.avgMs)}`,
    ok: p2.received === p2.sent && p2.sent > 0,
  });

  report(`HTTP ${A1.name} → ${B3.name}:8080 (node http server in ${B3.ns})`);
  const h = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, 8080);
  rows.push({
    check: 'HTTP GET',
    path: `${A1.name} → ${B3.name} ${b3AtA}:8080`,
    result: h.ok ? `${h.status} in ${fmtMs(h.ms)}` : `failed: ${h.error ?? h.status}`,
    ok: h.ok,
  });
  rows.push({
    check: `source seen by ${B3.name}`,
    path: `${A1.name} ${A1.ip} (remapped by B)`,
    result: `${h.seenSource ?? '—'} (expected ${a1AtB})`,
    ok: h.seenSource === a1AtB,
  });

  report(`UDP echo ${A3.name} → ${B1.name} as ${b1AtA}`);
  const u = await udpEchoCheck(B1.ns, B1.ip, A3.ns, b1AtA, 9090, 10, 512);
  rows.push({
    check: 'UDP echo',
    path: `${A3.name} → ${B1.name} ${b1AtA}:9090`,
    result: `${u.received}/${u.sent} echoed, ${B1.name} saw ${u.seenSource ?? '—'} (expected ${a3AtB})`,
    ok: u.received === u.sent && u.seenSource === a3AtB,
  });

  if (haveCommand('iperf3')) {
    report(`iperf3 TCP ${opts.iperfSeconds} s ${A1.name} → ${B3.name}`);
    const t = await iperfCheck(B3.ns, B3.ip, A1.ns, b3AtA, opts.iperfSeconds);
    rows.push({
      check: `iperf3 TCP ${opts.iperfSeconds} s`,
      path: `${A1.name} → ${B3.name} ${b3AtA}`,
      result: t.error
        ? `failed: ${t.error}`
        : `${fmtRate(t.bitsPerSecond)}${t.retransmits === null ? '' : `, ${t.retransmits} retransmits`}`,
      ok: !t.error && t.bitsPerSecond > 0,
    });
  } else {
    rows.push({
      check: 'iperf3 TCP',
      path: '—',
      result: 'skipped: iperf3 not installed (apt-get install iperf3)',
      ok: null,
    });
  }

  report(`host network: ${nodeA1.ns} → ${B3.name} (SNAT to ${plan.a.snatAddress})`);
  const hp = await ping(nodeA1.ns, b3AtA, 3, 0.1);
  const hh = await httpCheck(B3.ns, B3.ip, nodeA1.ns, b3AtA, 8081);
  rows.push({
    check: 'host-network SNAT',
    path: `node A/${nodeA1.name} → ${B3.name} ${b3AtA}`,
    result: `ping ${hp.received}/${hp.sent}; HTTP ${hh.ok ? hh.status : 'failed'}; ${B3.name} saw ${hh.seenSource ?? '—'} (expected ${snatAtB} = A's ${plan.a.snatAddress} remapped)`,
    ok: hp.received === hp.sent && hh.ok && hh.seenSource === snatAtB,
  });

  report(`traceroute (ping -t 1..8) ${A1.name} → ${B3.name}`);
  const hops = await traceroute(A1.ns, b3AtA, 8);
  const last = hops[hops.length - 1];
  // A hop past gateway A answered (B's gateway or node): ping shows an error only when its
  // quote is its own echo request, translated back (the errors come from B3's address as A
  // sees it, as the kernel's NAT presents errors about a translated connection).
  const translatedHop = hops.some((x) => x.kind === 'time-exceeded' && x.ttl > 2);
  rows.push({
    check: 'traceroute',
    path: `${A1.name} → ${B3.name} ${b3AtA}`,
    result: hops.map((x) => x.from ?? '*').join(' → '),
    ok: last?.kind === 'reached' && last.from === b3AtA && translatedHop,
  });
  return rows;
}

/**
 * Runs the demo (see the module header). Resolves with the report; set-up failures throw
 * DemoError / HostCommandError after cleaning up.
 */
