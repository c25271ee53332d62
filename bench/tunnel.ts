/**
 * Tunnel benchmark: Debian's wireguard-go against our weft-wg, in ONE run, over the same
 * topology and the same traffic (the comparison of /work/shared/bench/wg-netns-compare.sh,
 * restricted to the tunnel and run for both daemons side by side).
 *
 * Run (root):  npm run bench:tunnel          (= build, then node dist/bench/tunnel.js)
 * Knobs (environment):
 *   RUNS=3            rounds; each round measures every daemon once, in alternating order
 *                     (wireguard-go, weft, then weft, wireguard-go, …) so drift hits both
 *   DUR=10            seconds per iperf3 test (TCP and UDP)
 *   PINGS=20          pings per RTT test; PING_INTERVAL=0.05 (seconds)
 *   DAEMONS=wireguard-go,weft   which daemons, by label
 *   WG_UPSTREAM=/path/wireguard-go   adds upstream wireguard-go (with its offloads, built by
 *                     ../shared/bench/build-upstream-wireguard-go.sh) as daemon wg-upstream; it is
 *                     then the anchor of the ratios
 *   TESTS=ping,tcp1,udp64   which measurements, in this order (also: tcp4 = TCP with 4 streams;
 *                     pingload = PINGS pings while a TCP 1-stream test runs; tcp1flood = TCP 1
 *                     stream while bench/flood.ts sends FLOOD_RATE handshake initiations/s with a
 *                     valid mac1 to B's daemon from a separate process in ns wp-a; run it after
 *                     tcp1: the table shows tcp1flood / tcp1 of each run; tcp1floodctl = the
 *                     same flood sent to a closed port of B instead of the daemon: what the flood
 *                     traffic alone costs this machine, the ceiling for any daemon)
 *   FLOOD_RATE=30000  initiations per second for tcp1flood
 *   HOG=1             a busy node: one CPU hog (a spinning process pinned to core 0 with taskset)
 *                     runs through every daemon's whole measurement, set-up included, and is
 *                     stopped after it; every daemon meets the same hog (HOG_CPU=0 picks the core)
 *   WEFT_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"   extra node flags for weft-wg
 *   WEFT_ENV="WEFT_CRYPTO=node"  extra environment for weft-wg (space separated K=V)
 *   WEFT_VARIANTS="evp:WEFT_NATIVE_AEAD_MODE=evp;koffi:WEFT_NATIVE_AEAD=0"   more weft-wg daemons in
 *                     the same run, labelled weft-evp, weft-koffi, each with its extra environment
 *                     (space separated K=V); they take part in the alternation like the others.
 *                     WEFT_WG=/path/bin/weft-wg in a variant's environment runs that build instead
 *                     (before/after comparisons in one run)
 *   WEFT_WG=/path/to/launcher.mjs   another weft-wg entry point (default bin/weft-wg)
 *   RESULTS_DIR=…     raw iperf3 JSON + results.json (default: a new temp dir)
 *
 * Topology per measurement, built from scratch and torn down afterwards:
 *   ns wp-a (daemon, wp-wga 100.64.5.1/24)  ══ veth wp-va 198.18.5.1/24 ↔ wp-vb 198.18.5.2/24 ══
 *   ns wp-b (daemon, wp-wgb 100.64.5.2/24); both tunnels MTU 1420, configured with `wg set`.
 *   iperf3 client in wp-a, server in wp-b; traffic A→B. No default route anywhere: nothing can
 *   leave the two namespaces.
 *
 * Measured: TCP 1 stream (Gbit/s received, retransmits), UDP 64-byte datagrams at unlimited
 * rate (delivered packets/s = received − lost), ping RTT avg/max, and the CPU each daemon used
 * during each iperf3 test (utime+stime of all its threads from /proc/PID/stat, in % of one
 * core), plus drops at the UDP receive buffers (UdpRcvbufErrors) and the TUN queues.
 * Printed: medians over RUNS per daemon, min–max, and the ratio of each weft daemon's median to
 * the anchor's (wg-upstream when it takes part, else Debian's wireguard-go), measured in the same run.
 *
 * Safety: only processes started here are signalled (by process group of the timeout(1)
 * wrapper we spawned, or the PIDs living inside our own wp-* namespaces); every command is
 * bounded by a timeout; the namespaces are deleted on exit, SIGINT and SIGTERM.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cpuSeconds,
  daemonSpecs,
  inNs,
  intEnv,
  live,
  machineLine,
  median,
  need,
  pingTimes,
  quantile,
  runToEnd,
  setupTunnel,
  setupUnderlay,
  sh,
  sleep,
  slot,
  spawnIn,
  stopProc,
  teardown as teardownSlot,
  WG_MTU,
  WG_PORT,
  type DaemonSpec,
  type Tunnel,
} from './tunnel-netns.js';

const S = slot(0);
const { NS_A, NS_B, WG_A, WG_B, U_B, T_B } = S;
const IPERF_PORT = 5201;

const RUNS = intEnv('RUNS', 3);
const DUR = intEnv('DUR', 10);
const PINGS = intEnv('PINGS', 20);
const PING_INTERVAL = process.env.PING_INTERVAL ?? '0.05';
const TESTS = (process.env.TESTS ?? 'ping,tcp1,udp64')
  .split(',')
  .map((t) => t.trim())
  .filter(Boolean);
const KNOWN_TESTS = ['ping', 'pingload', 'tcp1', 'tcp4', 'udp64', 'tcp1flood', 'tcp1floodctl'];
for (const t of TESTS)
  if (!KNOWN_TESTS.includes(t)) throw new Error(`TESTS: unknown test ${t} (${KNOWN_TESTS.join(', ')})`);
const FLOOD_RATE = intEnv('FLOOD_RATE', 30_000);
const HOG = process.env.HOG === '1';
const HOG_CPU = intEnv('HOG_CPU', 0);

const FLOOD_JS = fileURLToPath(new URL('./flood.js', import.meta.url));

// ------------------------------------------------------------------------------------------
// Measurements

const teardown = (): void => teardownSlot(S);

type Metrics = Record<string, number>;

function dropCounters(): { tunA: number; tunB: number; udpA: number; udpB: number } {
  const txDropped = (ns: string, dev: string): number => {
    try {
      const j = JSON.parse(sh(['ip', '-n', ns, '-j', '-s', 'link', 'show', dev], { allowFail: true })) as {
        stats64?: { tx?: { dropped?: number } };
      }[];
      return j[0]?.stats64?.tx?.dropped ?? 0;
    } catch {
      return 0;
    }
  };
  const rcvbuf = (ns: string): number => {
    const m = /UdpRcvbufErrors\s+(\d+)/.exec(inNs(ns, ['nstat', '-asz', 'UdpRcvbufErrors'], { allowFail: true }));
    return m ? Number(m[1]) : 0;
  };
  return { tunA: txDropped(NS_A, WG_A), tunB: txDropped(NS_B, WG_B), udpA: rcvbuf(NS_A), udpB: rcvbuf(NS_B) };
}

interface IperfJson {
  error?: string;
  end?: {
    sum_sent?: { bits_per_second?: number; retransmits?: number; packets?: number; seconds?: number };
    sum_received?: {
      bits_per_second?: number;
      packets?: number;
      lost_packets?: number;
      seconds?: number;
      lost_percent?: number;
    };
  };
}

async function runIperf(t: Tunnel, tag: string, dir: string, m: Metrics, args: string[]): Promise<IperfJson | null> {
  const server = spawnIn(NS_B, ['iperf3', '-s', '-1', '-B', T_B, '-p', String(IPERF_PORT)], DUR + 40);
  for (let i = 0; i < 50; i++) {
    if (inNs(NS_B, ['ss', '-Hltn', `sport = :${IPERF_PORT}`], { allowFail: true }).trim()) break;
    await sleep(100);
  }
  const d0 = dropCounters();
  const a0 = cpuSeconds(t.pidA);
  const b0 = cpuSeconds(t.pidB);
  const t0 = performance.now();
  // Asynchronous: pingload pings while this runs, and a spawnSync here would block the event
  // loop (no timer, no ping started) until iperf3 had finished — pings after the load, not under it.
  const r = await runToEnd(
    [
      'ip',
      'netns',
      'exec',
      NS_A,
      'iperf3',
      '-c',
      T_B,
      '-p',
      String(IPERF_PORT),
      '-t',
      String(DUR),
      '-J',
      '--connect-timeout',
      '3000',
      ...args,
    ],
    (DUR + 30) * 1000,
  );
  const wall = (performance.now() - t0) / 1000;
  const a1 = cpuSeconds(t.pidA);
  const b1 = cpuSeconds(t.pidB);
  await Promise.race([server.exited, sleep(3000)]);
  await stopProc(server);
  const d1 = dropCounters();
  fs.writeFileSync(path.join(dir, `${tag}.json`), r.stdout ?? '');
  m[`${tag}_cpu_a`] = ((a1 - a0) / wall) * 100;
  m[`${tag}_cpu_b`] = ((b1 - b0) / wall) * 100;
  m[`${tag}_tunA_txdrop`] = d1.tunA - d0.tunA;
  m[`${tag}_udpB_rcvbuf`] = d1.udpB - d0.udpB;
  m[`${tag}_udpA_rcvbuf`] = d1.udpA - d0.udpA;
  let j: IperfJson;
  try {
    j = JSON.parse(r.stdout) as IperfJson;
  } catch {
    j = { error: `no JSON: ${(r.stderr ?? '').slice(0, 300)}` };
  }
  if (j.error || !j.end?.sum_sent) {
    console.error(`  ${tag} failed: ${j.error ?? 'no summary'}`);
    return null;
  }
  return j;
}

async function measureTcp(t: Tunnel, tag: string, dir: string, m: Metrics, extra: string[] = []): Promise<void> {
  const j = await runIperf(t, tag, dir, m, extra);
  if (!j) return;
  m[`${tag}_gbps`] = (j.end!.sum_received?.bits_per_second ?? 0) / 1e9;
  m[`${tag}_retr`] = j.end!.sum_sent?.retransmits ?? 0;
  const cpu = m[`${tag}_cpu_a`] + m[`${tag}_cpu_b`];
  if (m[`${tag}_gbps`] > 0) m[`${tag}_cpu_per_gbps`] = cpu / m[`${tag}_gbps`];
}

async function measureUdp(t: Tunnel, tag: string, dir: string, m: Metrics): Promise<void> {
  const j = await runIperf(t, tag, dir, m, ['-u', '-l', '64', '-b', '0']);
  if (!j) return;
  const s = j.end!.sum_sent!;
  const rcv = j.end!.sum_received!;
  m[`${tag}_tx_pps`] = (s.packets ?? 0) / (s.seconds || 1);
  m[`${tag}_rx_pps`] = ((rcv.packets ?? 0) - (rcv.lost_packets ?? 0)) / (rcv.seconds || 1);
  m[`${tag}_loss_pct`] = rcv.lost_percent ?? 0;
}

const PING_ARGS = ['ping', '-n', '-c', String(PINGS), '-i', PING_INTERVAL, '-W', '1', T_B];

function measurePing(m: Metrics): void {
  const out = inNs(NS_A, PING_ARGS, { timeoutMs: (PINGS * Number(PING_INTERVAL) + 15) * 1000, allowFail: true });
  parsePing(out, m, 'ping');
}

function parsePing(out: string, m: Metrics, prefix: string): void {
  const each = pingTimes(out).sort((x, y) => x - y);
  if (each.length > 0) {
    m[`${prefix}_p50_ms`] = median(each);
    m[`${prefix}_p90_ms`] = quantile(each, 0.9);
  }
  const rtt = /= ([\d.]+)\/([\d.]+)\/([\d.]+)\/([\d.]+) ms/.exec(out);
  const loss = /([\d.]+)% packet loss/.exec(out);
  if (rtt) {
    m[`${prefix}_min_ms`] = Number(rtt[1]);
    m[`${prefix}_avg_ms`] = Number(rtt[2]);
    m[`${prefix}_max_ms`] = Number(rtt[3]);
  } else {
    console.error(`  ${prefix} failed: ${out.trim()}`);
  }
  if (loss) m[`${prefix}_loss_pct`] = Number(loss[1]);
}

/** Ping RTT while a TCP 1-stream iperf3 test loads the tunnel (pings start 1 s into it). */
async function measurePingUnderLoad(t: Tunnel, dir: string, m: Metrics): Promise<void> {
  const lm: Metrics = {};
  const tcp = measureTcp(t, 'pingload_tcp1', dir, lm);
  await sleep(1500);
  const ping = spawnIn(NS_A, PING_ARGS, PINGS * Number(PING_INTERVAL) + 15);
  await Promise.race([ping.exited, sleep((PINGS * Number(PING_INTERVAL) + 15) * 1000)]);
  await stopProc(ping);
  await tcp;
  parsePing(ping.out(), m, 'pingload');
}

/**
 * TCP 1 stream while bench/flood.ts floods B's daemon with valid-mac1 initiations (tag
 * tcp1flood), or the same flood to a closed port of B (tag tcp1floodctl: the control).
 */
async function measureTcpUnderFlood(
  t: Tunnel,
  dir: string,
  m: Metrics,
  tag: 'tcp1flood' | 'tcp1floodctl',
): Promise<void> {
  const port = tag === 'tcp1flood' ? WG_PORT : 9;
  const flood = spawnIn(
    NS_A,
    [process.execPath, FLOOD_JS, U_B, String(port), t.pubB, String(FLOOD_RATE), String(DUR + 3)],
    DUR + 40,
  );
  await sleep(1000); // the responder reaches its under-load state before TCP starts
  await measureTcp(t, tag, dir, m);
  await Promise.race([flood.exited, sleep(10_000)]);
  await stopProc(flood);
  const r = /flood sent=(\d+) replies=(\d+) seconds=([\d.]+)/.exec(flood.out());
  if (tag === 'tcp1floodctl') {
    if (m.tcp1_gbps > 0 && m.tcp1floodctl_gbps !== undefined) m.tcp1floodctl_ratio = m.tcp1floodctl_gbps / m.tcp1_gbps;
    return;
  }
  if (r) {
    m.flood_sent_per_s = Number(r[1]) / Number(r[3]);
    m.flood_replies_per_s = Number(r[2]) / Number(r[3]);
  } else {
    console.error(`  flood: no summary: ${flood.out().slice(-300)}`);
  }
  if (m.tcp1_gbps > 0 && m.tcp1flood_gbps !== undefined) m.tcp1flood_ratio = m.tcp1flood_gbps / m.tcp1_gbps;
}

async function measureDaemon(spec: DaemonSpec, dir: string): Promise<Metrics> {
  const m: Metrics = {};
  teardown();
  setupUnderlay(S);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-keys-'));
  let t: Tunnel | null = null;
  // The hog spins in its own process; bounded by spawnIn's timeout as well as stopped below.
  const hog = HOG
    ? spawnIn(NS_A, ['taskset', '-c', String(HOG_CPU), process.execPath, '-e', 'for(;;){}'], DUR * 8 + 300)
    : null;
  try {
    t = await setupTunnel(spec, S, tmp, DUR * 6 + 300);
    for (const test of TESTS) {
      if (test === 'ping') measurePing(m);
      else if (test === 'pingload') await measurePingUnderLoad(t, dir, m);
      else if (test === 'tcp1flood' || test === 'tcp1floodctl') await measureTcpUnderFlood(t, dir, m, test);
      else if (test === 'tcp1') await measureTcp(t, 'tcp1', dir, m);
      else if (test === 'tcp4') await measureTcp(t, 'tcp4', dir, m, ['-P', '4']);
      else await measureUdp(t, 'udp64', dir, m);
      if (test !== 'ping') await sleep(1000);
    }
  } finally {
    if (t) {
      await stopProc(t.a);
      await stopProc(t.b);
    }
    if (hog) await stopProc(hog);
    teardown();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return m;
}

// ------------------------------------------------------------------------------------------
// Summary

interface Row {
  key: string;
  label: string;
  unit: string;
  scale: number;
  digits: number;
  better: 'higher' | 'lower' | '';
}

const ROWS: Row[] = [
  { key: 'tcp1_gbps', label: 'TCP 1 stream', unit: 'Gbit/s', scale: 1, digits: 3, better: 'higher' },
  { key: 'tcp1_retr', label: 'TCP 1 stream retransmits', unit: 'count', scale: 1, digits: 0, better: '' },
  { key: 'tcp1_cpu_a', label: 'TCP 1: daemon CPU, sender side', unit: '%core', scale: 1, digits: 0, better: '' },
  { key: 'tcp1_cpu_b', label: 'TCP 1: daemon CPU, receiver side', unit: '%core', scale: 1, digits: 0, better: '' },
  {
    key: 'tcp1_cpu_per_gbps',
    label: 'TCP 1: daemon CPU (both) per Gbit/s',
    unit: '%core',
    scale: 1,
    digits: 0,
    better: 'lower',
  },
  { key: 'tcp1_udpB_rcvbuf', label: 'TCP 1: UDP rcvbuf drops in B', unit: 'count', scale: 1, digits: 0, better: '' },
  { key: 'tcp4_gbps', label: 'TCP 4 streams', unit: 'Gbit/s', scale: 1, digits: 3, better: 'higher' },
  { key: 'tcp4_cpu_a', label: 'TCP 4: daemon CPU, sender side', unit: '%core', scale: 1, digits: 0, better: '' },
  { key: 'tcp4_cpu_b', label: 'TCP 4: daemon CPU, receiver side', unit: '%core', scale: 1, digits: 0, better: '' },
  { key: 'udp64_rx_pps', label: 'UDP 64B delivered', unit: 'kpps', scale: 1e-3, digits: 1, better: 'higher' },
  { key: 'udp64_tx_pps', label: 'UDP 64B offered (iperf3 sender)', unit: 'kpps', scale: 1e-3, digits: 1, better: '' },
  { key: 'udp64_loss_pct', label: 'UDP 64B loss', unit: '%', scale: 1, digits: 1, better: 'lower' },
  { key: 'udp64_cpu_a', label: 'UDP 64B: daemon CPU, sender side', unit: '%core', scale: 1, digits: 0, better: '' },
  { key: 'udp64_cpu_b', label: 'UDP 64B: daemon CPU, receiver side', unit: '%core', scale: 1, digits: 0, better: '' },
  { key: 'udp64_tunA_txdrop', label: 'UDP 64B: TUN queue drops in A', unit: 'count', scale: 1, digits: 0, better: '' },
  { key: 'udp64_udpB_rcvbuf', label: 'UDP 64B: UDP rcvbuf drops in B', unit: 'count', scale: 1, digits: 0, better: '' },
  { key: 'ping_avg_ms', label: 'ping RTT avg', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'ping_max_ms', label: 'ping RTT max', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'ping_p50_ms', label: 'ping RTT median (of each run)', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'ping_p90_ms', label: 'ping RTT p90 (of each run)', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'pingload_avg_ms', label: 'ping RTT avg under TCP load', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'pingload_p90_ms', label: 'ping RTT p90 under TCP load', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  { key: 'pingload_max_ms', label: 'ping RTT max under TCP load', unit: 'ms', scale: 1, digits: 3, better: 'lower' },
  {
    key: 'tcp1flood_gbps',
    label: 'TCP 1 stream under initiation flood',
    unit: 'Gbit/s',
    scale: 1,
    digits: 3,
    better: 'higher',
  },
  {
    key: 'tcp1flood_ratio',
    label: 'TCP 1 under flood / TCP 1 (same run)',
    unit: 'x',
    scale: 1,
    digits: 2,
    better: 'higher',
  },
  {
    key: 'tcp1floodctl_ratio',
    label: 'control: TCP 1 under flood to a closed port / TCP 1',
    unit: 'x',
    scale: 1,
    digits: 2,
    better: 'higher',
  },
  {
    key: 'tcp1flood_cpu_b',
    label: 'TCP 1 under flood: daemon CPU, flooded side',
    unit: '%core',
    scale: 1,
    digits: 0,
    better: '',
  },
  { key: 'flood_sent_per_s', label: 'flood: initiations sent', unit: '/s', scale: 1, digits: 0, better: '' },
  { key: 'flood_replies_per_s', label: 'flood: cookie replies received', unit: '/s', scale: 1, digits: 0, better: '' },
];

function summarize(labels: string[], results: Map<string, Metrics[]>): string {
  const lines: string[] = [];
  const head = ['metric', 'unit', ...labels.map((l) => `${l} median (min–max)`)];
  // Upstream wireguard-go is the anchor when it takes part, else Debian's.
  const ANCHOR = labels.includes('wg-upstream') ? 'wg-upstream' : 'wireguard-go';
  const compared = labels.includes(ANCHOR) ? labels.filter((l) => l !== ANCHOR) : [];
  for (const l of compared) head.push(`${l} / ${ANCHOR}`);
  lines.push(`| ${head.join(' | ')} |`);
  lines.push(`|${head.map(() => '---').join('|')}|`);
  for (const r of ROWS) {
    const med = new Map<string, number>();
    const cells: string[] = [];
    let any = false;
    for (const l of labels) {
      const vals = (results.get(l) ?? [])
        .map((m) => m[r.key])
        .filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
      if (vals.length === 0) {
        cells.push('–');
        continue;
      }
      any = true;
      const md = median(vals) * r.scale;
      med.set(l, md);
      const lo = Math.min(...vals) * r.scale;
      const hi = Math.max(...vals) * r.scale;
      cells.push(`${md.toFixed(r.digits)} (${lo.toFixed(r.digits)}–${hi.toFixed(r.digits)})`);
    }
    if (!any) continue;
    const row = [r.label, r.unit, ...cells];
    const g = med.get(ANCHOR);
    for (const l of compared) {
      const w = med.get(l);
      row.push(w !== undefined && g !== undefined && g !== 0 ? `${(w / g).toFixed(2)}x` : '–');
    }
    lines.push(`| ${row.join(' | ')} |`);
  }
  return lines.join('\n');
}

// ------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  need(['iperf3', 'nstat', 'ss', ...(HOG ? ['taskset'] : [])]);
  const specs = daemonSpecs();
  const outDir = process.env.RESULTS_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'wp-tunnel-'));
  fs.mkdirSync(outDir, { recursive: true });
  const onSignal = (): void => {
    for (const p of live) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    teardown();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const machine = machineLine();
  console.log(
    `# tunnel: ${specs.map((s) => s.label).join(' vs ')}; RUNS=${RUNS} DUR=${DUR}s PINGS=${PINGS}x${PING_INTERVAL}s TESTS=${TESTS.join(',')}; MTU ${WG_MTU}${HOG ? `; CPU hog on core ${HOG_CPU}` : ''}`,
  );
  console.log(`# ${machine}`);
  const results = new Map<string, Metrics[]>(specs.map((s) => [s.label, []]));
  try {
    for (let r = 1; r <= RUNS; r++) {
      // Alternate the order every round: A B, B A, A B … so slow drift biases neither daemon.
      const order = r % 2 === 1 ? specs : [...specs].reverse();
      for (const spec of order) {
        const dir = path.join(outDir, `run${r}-${spec.label}`);
        fs.mkdirSync(dir, { recursive: true });
        process.stderr.write(`[tunnel] run ${r}/${RUNS}: ${spec.label}\n`);
        const m = await measureDaemon(spec, dir);
        fs.writeFileSync(path.join(dir, 'metrics.json'), JSON.stringify(m, null, 1));
        process.stderr.write(
          `[tunnel]   tcp1 ${fmt(m.tcp1_gbps, 3)} Gbit/s, udp64 ${fmt(m.udp64_rx_pps / 1e3, 1)} kpps, ` +
            `ping ${fmt(m.ping_avg_ms, 3)}/${fmt(m.ping_max_ms, 3)} ms, cpu tcp1 ${fmt(m.tcp1_cpu_a, 0)}/${fmt(m.tcp1_cpu_b, 0)} %, ` +
            `flood ${fmt(m.tcp1flood_ratio, 2)}x (control ${fmt(m.tcp1floodctl_ratio, 2)}x)\n`,
        );
        results.get(spec.label)!.push(m);
      }
    }
  } finally {
    for (const p of live) await stopProc(p);
    teardown();
  }
  const table = summarize(
    specs.map((s) => s.label),
    results,
  );
  fs.writeFileSync(
    path.join(outDir, 'results.json'),
    JSON.stringify({ machine, RUNS, DUR, results: Object.fromEntries(results) }, null, 1),
  );
  console.log('');
  console.log(table);
  console.log(`\n(raw iperf3 JSON and metrics: ${outDir})`);
  return 0;
}

function fmt(v: number | undefined, d: number): string {
  return v === undefined || !Number.isFinite(v) ? 'NA' : v.toFixed(d);
}

main().then(
  (c) => {
    process.exitCode = c;
  },
  (e) => {
    console.error(`bench/tunnel: ${e instanceof Error ? e.message : String(e)}`);
    teardown();
    process.exitCode = 1;
  },
);
