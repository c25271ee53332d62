/**
 * Soak (`npm run soak`, root, not in CI): the demo's two-cluster fabric (src/demo: two gateways
 * over WireGuard, four node agents over Geneve, eight pods, every data plane a real
 * `weft up -c FILE`) under steady mixed traffic for SOAK_MINUTES (default 30):
 *   - a rate-limited TCP stream A1 → B3 (iperf3 -b SOAK_TCP_RATE, default 20M),
 *   - UDP A3 → B1 (iperf3 -u -b 2M, 1000-byte datagrams),
 *   - a continuous ping B4 → A2 at 5/s (the other direction),
 * through the natural WireGuard rekeys (REKEY_AFTER_TIME, 120 s).
 *
 * Every 10 s: `weft show --json` of every instance, the RSS of each weft process (its pid from
 * the status), the peers' handshake counters, the load average. At the end, once the traffic
 * has stopped and the fabric is idle: the balance of every stage (sent = received + counted
 * drops, see bench/fabric-observe.ts).
 *
 * Goals checked (the exit code is 1 when one is missed): RSS growth after the warm-up ≤ 10% for
 * every process; no ping gap over 1 s; ≥ one rekey per 120 s of run (15 in 30 min, minus one
 * for the first 120 s); every stage balanced; no weft process exited.
 *
 * Output: SOAK_OUT (default /tmp/weft-soak-<time>/) gets soak.json and soak.md; the markdown is
 * printed too. Namespaces are `chs-*`; every process has a hard lifetime and is stopped by its
 * process group; the namespaces are deleted on exit, on SIGINT and on SIGTERM.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { startDaemon, type Daemon, sleep, waitFor, runCommand, inNs } from '../src/demo/host.js';
import { generateDemoKeys } from '../src/demo/keys.js';
import { buildPlan, findPod, remotePodAddress, type DemoPlan } from '../src/demo/plan.js';
import {
  findWeftBin,
  startDataPlane,
  stopDataPlane,
  waitForFirstReply,
  weftUpCommand,
  writeDemoFiles,
  type RunningProcess,
} from '../src/demo/data-plane.js';
import { buildTopology, destroyTopology } from '../src/demo/topology.js';
import type { WeftStatus } from '../src/daemon/status.js';
import {
  gatewayRouterStage,
  geneveStage,
  kernelUdpDrops,
  nodeEgressStage,
  nodeIngressStage,
  pingSummary,
  rssKiB,
  showAll,
  wireguardStage,
  type PingSummary,
  type StageBalance,
} from './fabric-observe.js';

const SAMPLE_MS = 10_000;
/** Commands the soak runs, and the Debian package of each. */
const TOOLS: ReadonlyArray<[string, string]> = [
  ['ip', 'iproute2'],
  ['ss', 'iproute2'],
  ['ping', 'iputils-ping'],
  ['iperf3', 'iperf3'],
  ['timeout', 'coreutils'],
];
const REKEY_S = 120;

interface Sample {
  t: number;
  load1: number;
  rssKiB: Record<string, number | null>;
  /** Completed handshakes of each gateway's peer. */
  handshakes: Record<string, number>;
  latestHandshake: Record<string, string | null>;
}

interface ProcessRss {
  name: string;
  pid: number;
  baselineKiB: number;
  finalKiB: number;
  maxKiB: number;
  growthPct: number;
}

export interface SoakResult {
  startedAt: string;
  minutes: number;
  warmupS: number;
  command: string;
  loadAverage: { start: number[]; end: number[]; mean1: number; max1: number };
  rss: ProcessRss[];
  ping: PingSummary;
  rekeys: { gateway: string; handshakes: number; expectedAtLeast: number }[];
  tcp: { bitsPerSecond: number; retransmits: number; bytes: number } | null;
  udp: { bitsPerSecond: number; lostPercent: number; packets: number } | null;
  stages: StageBalance[];
  exited: string[];
  goals: Record<string, boolean>;
  samples: Sample[];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

function envNumber(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}=${v}: expected a positive number`);
  return n;
}

/** Stage balances of the idle fabric (node ↔ gateway underlays, the WAN both ways, node TUNs). */
function stagesOf(plan: DemoPlan, st: Map<string, WeftStatus>): StageBalance[] {
  const get = (n: string): WeftStatus => {
    const s = st.get(n);
    if (s === undefined) throw new Error(`no status for ${n}`);
    return s;
  };
  const out: StageBalance[] = [];
  const gw = { a: get('gateway-a'), b: get('gateway-b') };
  const udp = (ns: string): number => kernelUdpDrops(ns).inErrors;
  for (const c of [plan.a, plan.b]) {
    const g = gw[c.key];
    const nodes = c.nodes.map((n) => [get(`node-${c.key}-${n.name}`), n] as const);
    out.push(
      geneveStage(
        `underlay ${c.label}: nodes → gateway (Geneve)`,
        nodes.map(([s, n]) => [s, n.vni] as [WeftStatus, number]),
        g,
        c.nodes.map((n) => n.vni),
        udp(c.gatewayNs),
      ),
    );
    for (const [s, n] of nodes) {
      out.push(geneveStage(`underlay ${c.label}: gateway → ${n.name} (Geneve)`, [[g, n.vni]], s, [n.vni], udp(n.ns)));
      out.push(nodeEgressStage(`node ${c.label}/${n.name}: TUN → Geneve`, s));
      out.push(nodeIngressStage(`node ${c.label}/${n.name}: Geneve → TUN`, s));
    }
  }
  for (const c of [plan.a, plan.b])
    out.push(gatewayRouterStage(`gateway ${c.label}: router (Geneve, TUN, WireGuard in → out)`, gw[c.key]));
  out.push(wireguardStage('WAN: gateway A → gateway B (WireGuard)', gw.a, gw.b, udp(plan.b.gatewayNs)));
  out.push(wireguardStage('WAN: gateway B → gateway A (WireGuard)', gw.b, gw.a, udp(plan.a.gatewayNs)));
  return out;
}

function markdown(r: SoakResult): string {
  const L: string[] = [];
  L.push(`### Soak: ${r.minutes} min, started ${r.startedAt}`, '');
  L.push(
    `Command: \`${r.command}\`. Load average (1 min) mean ${r.loadAverage.mean1.toFixed(2)}, max ${r.loadAverage.max1.toFixed(2)} (start ${r.loadAverage.start.map((x) => x.toFixed(2)).join(' ')}, end ${r.loadAverage.end.map((x) => x.toFixed(2)).join(' ')}); 2 cores shared with other work.`,
    '',
  );
  L.push('| goal | result |', '|---|---|');
  for (const [k, v] of Object.entries(r.goals)) L.push(`| ${k} | ${v ? 'met' : '**missed**'} |`);
  L.push(
    '',
    `| process | pid | RSS after ${r.warmupS} s warm-up | RSS at end | max | growth |`,
    '|---|---|---|---|---|---|',
  );
  for (const p of r.rss)
    L.push(
      `| ${p.name} | ${p.pid} | ${(p.baselineKiB / 1024).toFixed(1)} MiB | ${(p.finalKiB / 1024).toFixed(1)} MiB | ${(p.maxKiB / 1024).toFixed(1)} MiB | ${p.growthPct.toFixed(1)}% |`,
    );
  L.push(
    '',
    `Ping B4 → A2 every 0.2 s: ${r.ping.received}/${r.ping.transmitted} replies, longest gap between replies ${r.ping.longestGapMs} ms, gaps over 1 s: ${r.ping.stalls.length === 0 ? 'none' : r.ping.stalls.map(([t, ms]) => `${t} (${ms} ms)`).join(', ')}.`,
  );
  L.push(
    `Handshakes completed (weft show --json peers[].handshakes; the first is the initial one, the rest are rekeys): ${r.rekeys.map((k) => `${k.gateway} ${k.handshakes} (goal ≥ ${k.expectedAtLeast})`).join(', ')}.`,
  );
  if (r.tcp)
    L.push(
      `TCP A1 → B3: ${(r.tcp.bitsPerSecond / 1e6).toFixed(1)} Mbit/s, ${(r.tcp.bytes / 1e9).toFixed(2)} GB, ${r.tcp.retransmits} retransmits.`,
    );
  if (r.udp)
    L.push(
      `UDP A3 → B1: ${(r.udp.bitsPerSecond / 1e6).toFixed(2)} Mbit/s, ${r.udp.packets} datagrams, ${r.udp.lostPercent.toFixed(3)}% lost.`,
    );
  L.push('', '| stage | unit | sent | received | counted drops | unaccounted |', '|---|---|---|---|---|---|');
  for (const s of r.stages) {
    const d =
      Object.entries(s.drops)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || '0';
    L.push(`| ${s.stage} | ${s.unit} | ${s.sent} | ${s.received} | ${d} | ${s.unaccounted} |`);
  }
  if (r.exited.length > 0) L.push('', `Exited during the run: ${r.exited.join(', ')}`);
  return `${L.join('\n')}\n`;
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    console.error('soak: needs root (network namespaces, TUN devices)');
    return 2;
  }
  for (const [cmd, pkg] of TOOLS) {
    if (spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd], { stdio: 'ignore' }).status !== 0) {
      console.error(
        `soak: ${cmd} not installed: apt-get install --no-install-recommends ${pkg} (or run scripts/setup.sh)`,
      );
      return 2;
    }
  }
  const minutes = envNumber('SOAK_MINUTES', 30);
  // RSS of a Node process saws by ~10 MiB between collections: growth compares one-minute
  // medians, after the warm-up and at the end, which needs at least two minutes.
  if (minutes < 2) {
    console.error(
      `soak: SOAK_MINUTES=${minutes}: use at least 2 (RSS is compared over one-minute windows after a warm-up)`,
    );
    return 2;
  }
  const durationS = Math.round(minutes * 60);
  const warmupS = Math.min(300, Math.max(30, Math.round(durationS / 6)));
  const tcpRate = process.env['SOAK_TCP_RATE'] ?? '20M';
  const startedAt = new Date().toISOString();
  const outDir = process.env['SOAK_OUT'] ?? join('/tmp', `weft-soak-${startedAt.replace(/[:.]/g, '-')}`);
  mkdirSync(outDir, { recursive: true });
  const plan = buildPlan('chs');
  const weftBin = findWeftBin();
  const procs: RunningProcess[] = [];
  const traffic: Daemon[] = [];
  let cleaning: Promise<void> | null = null;
  const cleanup = (): Promise<void> => {
    cleaning ??= (async () => {
      for (const d of traffic) await d.stop();
      await stopDataPlane(procs);
      await destroyTopology(plan);
    })();
    return cleaning;
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`soak: ${sig}: stopping and removing the namespaces`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    await destroyTopology(plan); // a crashed earlier run
    await buildTopology(plan);
    const cfgDir = join(outDir, 'config');
    const files = writeDemoFiles(plan, generateDemoKeys(), cfgDir);
    const lifetimeS = durationS + 900;
    // --no-conncheck: the in-tunnel check would keep the fabric busy while the final counters are read.
    const up = weftUpCommand(weftBin);
    const command = Object.assign((file: string) => [...up(file), '--no-conncheck'], {
      label: `${up.label} --no-conncheck`,
    });
    await startDataPlane(plan, files, cfgDir, command, lifetimeS, (s) => console.error(`soak: ${s}`), procs);
    const runDir = join(cfgDir, 'run');
    const [A1, A2, A3, B1, B3, B4] = ['A1', 'A2', 'A3', 'B1', 'B3', 'B4'].map((n) => findPod(plan, n));
    await waitForFirstReply(A1!.ns, remotePodAddress(plan, plan.a, B3!), 30_000);
    console.error(`soak: fabric up; ${minutes} min of traffic, warm-up ${warmupS} s, output in ${outDir}`);

    // Traffic: each bounded by its own duration and a hard lifetime.
    const iperfServer = (ns: string, bind: string, port: number): Daemon =>
      startDaemon(ns, `iperf3 -s ${port}`, ['iperf3', '-s', '-1', '-B', bind, '-p', String(port)], { lifetimeS });
    traffic.push(iperfServer(B3!.ns, B3!.ip, 5301), iperfServer(B1!.ns, B1!.ip, 5302));
    for (const [ns, port] of [
      [B3!.ns, 5301],
      [B1!.ns, 5302],
    ] as const) {
      await waitFor(
        `iperf3 server :${port}`,
        async () =>
          (await runCommand(inNs(ns, ['ss', '-Hltn', `sport = :${port}`]), { allowFail: true })).stdout.trim() !== '',
        10_000,
      );
    }
    // Outputs go to files: a 30-minute run writes megabytes (a Daemon keeps only the last 64 KiB).
    const log = (n: string): string => join(outDir, n);
    const tcp = startDaemon(
      A1!.ns,
      'iperf3 TCP',
      [
        'iperf3',
        '-c',
        remotePodAddress(plan, plan.a, B3!),
        '-p',
        '5301',
        '-t',
        String(durationS),
        '-b',
        tcpRate,
        '-i',
        '10',
        '-J',
        '--connect-timeout',
        '5000',
      ],
      { lifetimeS, logFile: log('iperf3-tcp.json') },
    );
    const udp = startDaemon(
      A3!.ns,
      'iperf3 UDP',
      [
        'iperf3',
        '-c',
        remotePodAddress(plan, plan.a, B1!),
        '-p',
        '5302',
        '-u',
        '-b',
        '2M',
        '-l',
        '1000',
        '-t',
        String(durationS),
        '-i',
        '10',
        '-J',
      ],
      { lifetimeS, logFile: log('iperf3-udp.json') },
    );
    const ping = startDaemon(
      B4!.ns,
      'ping',
      ['ping', '-D', '-n', '-i', '0.2', '-W', '1', '-w', String(durationS), remotePodAddress(plan, plan.b, A2!)],
      { lifetimeS, logFile: log('ping.txt') },
    );
    traffic.push(tcp, udp, ping);

    const samples: Sample[] = [];
    const pids = new Map<string, number>();
    const t0 = Date.now();
    while (Date.now() - t0 < durationS * 1000) {
      const st = showAll(weftBin, runDir);
      const s: Sample = {
        t: Math.round((Date.now() - t0) / 1000),
        load1: loadavg()[0]!,
        rssKiB: {},
        handshakes: {},
        latestHandshake: {},
      };
      for (const [name, status] of st) {
        pids.set(name, status.weft.pid);
        s.rssKiB[name] = rssKiB(status.weft.pid);
        const peer = status.wireguard?.peers[0];
        if (peer !== undefined) {
          s.handshakes[name] = peer.handshakes ?? -1;
          s.latestHandshake[name] = peer.latestHandshake;
        }
      }
      samples.push(s);
      if (samples.length % 6 === 0)
        console.error(
          `soak: ${s.t} s, load ${s.load1.toFixed(2)}, RSS ${Object.entries(s.rssKiB)
            .map(([k, v]) => `${k} ${((v ?? 0) / 1024).toFixed(0)}M`)
            .join(' ')}, handshakes ${JSON.stringify(s.handshakes)}`,
        );
      await sleep(SAMPLE_MS - ((Date.now() - t0) % SAMPLE_MS));
    }
    // Let the traffic finish, then let the fabric go idle (WireGuard's passive keepalive comes 10 s after the last data).
    for (const d of [tcp, udp, ping]) await Promise.race([d.exited, sleep(30_000)]);
    await sleep(12_000);
    const last = showAll(weftBin, runDir);
    const stages = stagesOf(plan, last);
    const endLoad = loadavg();

    const rss: ProcessRss[] = [];
    for (const [name, pid] of pids) {
      const series = samples
        .map((x) => [x.t, x.rssKiB[name]] as const)
        .filter((x): x is readonly [number, number] => x[1] !== null && x[1] !== undefined);
      const base = median(series.filter(([t]) => t >= warmupS && t < warmupS + 60).map(([, v]) => v));
      const fin = median(series.slice(-6).map(([, v]) => v));
      rss.push({
        name,
        pid,
        baselineKiB: base,
        finalKiB: fin,
        maxKiB: Math.max(...series.map(([, v]) => v)),
        growthPct: (fin / base - 1) * 100,
      });
    }
    const rekeys = ['gateway-a', 'gateway-b'].map((g) => ({
      gateway: g,
      handshakes: last.get(g)?.wireguard?.peers[0]?.handshakes ?? 0,
      expectedAtLeast: Math.max(1, Math.floor(durationS / REKEY_S)),
    }));
    const readJson = (f: string): unknown => {
      try {
        return JSON.parse(readFileSync(log(f), 'utf8'));
      } catch {
        return {};
      }
    };
    const tcpJson = readJson('iperf3-tcp.json') as {
      end?: { sum_received?: { bits_per_second?: number; bytes?: number }; sum_sent?: { retransmits?: number } };
    };
    const udpJson = readJson('iperf3-udp.json') as {
      end?: { sum?: { bits_per_second?: number; lost_percent?: number; packets?: number } };
    };
    const pingSum = pingSummary(readFileSync(log('ping.txt'), 'utf8'));
    const exited = procs
      .filter((p) => p.daemon.exitStatus !== null)
      .map((p) => `${p.file.label} (${p.daemon.exitStatus})`);
    const loads = samples.map((x) => x.load1);
    const result: SoakResult = {
      startedAt,
      minutes,
      warmupS,
      command: `SOAK_MINUTES=${minutes} nice -n 5 npm run soak`,
      loadAverage: {
        start: samples.length > 0 ? [samples[0]!.load1] : [],
        end: endLoad,
        mean1: loads.reduce((a, b) => a + b, 0) / Math.max(1, loads.length),
        max1: Math.max(...loads),
      },
      rss,
      ping: pingSum,
      rekeys,
      tcp: tcpJson.end?.sum_received
        ? {
            bitsPerSecond: tcpJson.end.sum_received.bits_per_second ?? 0,
            bytes: tcpJson.end.sum_received.bytes ?? 0,
            retransmits: tcpJson.end.sum_sent?.retransmits ?? 0,
          }
        : null,
      udp: udpJson.end?.sum
        ? {
            bitsPerSecond: udpJson.end.sum.bits_per_second ?? 0,
            lostPercent: udpJson.end.sum.lost_percent ?? 0,
            packets: udpJson.end.sum.packets ?? 0,
          }
        : null,
      stages,
      exited,
      goals: {
        'RSS growth after warm-up ≤ 10% (every weft process)': rss.length === 6 && rss.every((p) => p.growthPct <= 10),
        'no ping gap over 1 s': pingSum.received > 0 && pingSum.stalls.length === 0,
        [`handshakes ≥ ${Math.max(1, Math.floor(durationS / REKEY_S))} (one per ${REKEY_S} s of run)`]: rekeys.every(
          (k) => k.handshakes >= k.expectedAtLeast,
        ),
        'every stage balanced (sent = received + counted drops)': stages.every((s) => s.unaccounted === 0),
        'no weft process exited': exited.length === 0,
      },
      samples,
    };
    const md = markdown(result);
    writeFileSync(join(outDir, 'soak.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(join(outDir, 'soak.md'), md);
    process.stdout.write(md);
    console.error(`soak: results in ${join(outDir, 'soak.json')} and soak.md`);
    return Object.values(result.goals).every(Boolean) ? 0 : 1;
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(`soak: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exitCode = 1;
  },
);
