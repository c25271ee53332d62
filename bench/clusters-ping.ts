/**
 * Idle ping RTT pod → remote pod across two clusters, with the daemons' V8 tiering
 * (src/cli/v8-tiering.ts) against V8's own, in the same run (root):
 *
 *   pod A1 ─ node agent ─Geneve─ gateway A ══WireGuard══ gateway B ─Geneve─ node agent ─ pod B3
 *
 * One copy of the demo's two clusters (src/demo) per variant, namespace prefixes wcq0, wcq1, …;
 * every data plane a real `weft up -c FILE --log-level info` (gateways and the node agents of A1
 * and B3). A round, for each variant in turn: start its data planes (gateways, then node
 * agents), wait for the first reply A1 → B3 (the WireGuard handshake), then COLD pings at once,
 * alone on the machine but for the earlier variants' idle daemons: the cold start. Then the idle
 * figure: PINGS pings in every fabric at once, the k-th started k/n of an interval after the
 * first, as bench/ping-ab.ts, so load and frequency drift hit the variants alike; an echo within
 * 1 ms of another fabric's is left out with it (bench/ping-echoes.ts). The copy each variant
 * runs in and the order they start in rotate every round. Each daemon's start log is checked to
 * carry the variant's tiering (v8Tiering), so the comparison is the one intended.
 *
 * Run (root, after `npm run --silent build`):  node dist/bench/clusters-ping.js
 * Knobs: TIERING_VARIANTS=1024,off (an integer N: WEFT_V8_INTERRUPT_BUDGET=N, the daemon tiering
 *        at budget N; off: WEFT_V8_INTERRUPT_BUDGET=default; unset: the variable removed, what
 *        the daemons run with by default; v8:FLAG+FLAG…: those V8 flags on node's command line
 *        and WEFT_V8_INTERRUPT_BUDGET=default); ROUNDS=2; COLD=50; PINGS=250 (idle); IDLE_AFTER=0
 *        (s to wait before the idle pings, the daemons left to the connection checks);
 *        RESTART_GATEWAYS=1 (the cold start is that of both gateways restarted behind node
 *        agents that carried COLD pings: a failover); PING_INTERVAL=0.02 (s); VERBOSE=1 (each
 *        cold ping and each daemon's CPU). The first variant is the numerator of the ratios.
 *        About 20 s per round with two variants; single rounds leave the order unrotated.
 * Namespaces are deleted at the end (also on failure); every process has a hard lifetime and is
 * stopped by its process group. No namespace has a default route.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { daemonTieringFlags, FABRIC_INTERRUPT_BUDGET } from '../src/cli/v8-tiering.js';
import { haveCommand, isRoot } from '../src/demo/host.js';
import { generateDemoKeys } from '../src/demo/keys.js';
import {
  buildPlan,
  findPod,
  nodeOfPod,
  remotePodAddress,
  type DemoConfigFile,
  type DemoPlan,
} from '../src/demo/plan.js';
import {
  findWeftBin,
  startDataPlane,
  stopDataPlane,
  waitForFirstReply,
  writeDemoFiles,
  type DataPlaneCommand,
  type RunningProcess,
} from '../src/demo/data-plane.js';
import { buildTopology, destroyTopology } from '../src/demo/topology.js';
import { nodePids, sh, ticksOf } from './netns-iperf.js';
import { clean, echoes, figures, type Echo, type RttFigures } from './ping-echoes.js';
import { intEnv, live, median, sleep, spawnIn, stopProc, type Proc } from './tunnel-netns.js';

const ROUNDS = intEnv('ROUNDS', 2);
const COLD = intEnv('COLD', 50);
const PINGS = intEnv('PINGS', 250);
const IDLE_AFTER = intEnv('IDLE_AFTER', 0);
const RESTART_GATEWAYS = process.env.RESTART_GATEWAYS === '1';
const PING_INTERVAL = process.env.PING_INTERVAL ?? '0.02';
const INTERVAL_MS = Number(PING_INTERVAL) * 1000;
if (!(INTERVAL_MS >= 2)) throw new Error(`PING_INTERVAL=${PING_INTERVAL}: expected seconds ≥ 0.002`);

interface Variant {
  label: string;
  /** WEFT_V8_INTERRUPT_BUDGET for the daemons; undefined: unset. */
  budget: string | undefined;
  /** V8 flags on node's command line (with budget "default": these alone). */
  nodeFlags: string[];
}

function variants(): Variant[] {
  const out = (process.env.TIERING_VARIANTS ?? '1024,off')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
    .map((label): Variant => {
      if (label === 'unset') return { label, budget: undefined, nodeFlags: [] };
      if (label === 'off') return { label, budget: 'default', nodeFlags: [] };
      if (/^\d+$/.test(label)) return { label, budget: label, nodeFlags: [] };
      if (label.startsWith('v8:')) return { label, budget: 'default', nodeFlags: label.slice(3).split('+') };
      throw new Error(
        `TIERING_VARIANTS: ${JSON.stringify(label)} is not unset, off, an integer budget or v8:FLAG+FLAG…`,
      );
    });
  if (out.length < 2) throw new Error('TIERING_VARIANTS: name at least two of unset, off, <budget>');
  return out;
}

/** `weft up -c FILE --log-level info` with the variant's WEFT_V8_INTERRUPT_BUDGET (env(1): set or removed). */
function upCommand(weftBin: string, v: Variant): DataPlaneCommand {
  const env =
    v.budget === undefined
      ? ['env', '-u', 'WEFT_V8_INTERRUPT_BUDGET']
      : ['env', `WEFT_V8_INTERRUPT_BUDGET=${v.budget}`];
  return Object.assign(
    (path: string) => [...env, process.execPath, ...v.nodeFlags, weftBin, 'up', '-c', path, '--log-level', 'info'],
    {
      label: `weft up (${v.label}) -c`,
    },
  );
}

/** What a daemon of variant `v` must log as v8Tiering. */
function expectedTiering(v: Variant): string {
  const flags = daemonTieringFlags(v.budget, FABRIC_INTERRUPT_BUDGET);
  return flags.length === 0 ? 'V8 defaults' : flags.join(' ');
}

/** The v8Tiering of a process's last "weft up: running" log line (its log file is appended to every round). */
function loggedTiering(p: RunningProcess): string {
  const line = readFileSync(p.logFile, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"weft up: running"'))
    .at(-1);
  if (line === undefined) throw new Error(`${p.file.label}: no "weft up: running" line in ${p.logFile}`);
  return String((JSON.parse(line) as { v8Tiering?: unknown }).v8Tiering);
}

interface Fabric {
  plan: DemoPlan;
  dir: string;
  gateways: DemoConfigFile[];
  nodes: DemoConfigFile[];
  fromNs: string;
  to: string;
}

function fabric(i: number, root: string): Fabric {
  const plan = buildPlan(`wcq${i}`);
  const A1 = findPod(plan, 'A1');
  const B3 = findPod(plan, 'B3');
  const nodeNs = [nodeOfPod(plan, A1).ns, nodeOfPod(plan, B3).ns];
  const dir = join(root, `f${i}`);
  const files = writeDemoFiles(plan, generateDemoKeys(), dir);
  return {
    plan,
    dir,
    gateways: files.filter((f) => f.role === 'gateway'),
    nodes: files.filter((f) => f.role === 'node' && nodeNs.includes(f.ns)),
    fromNs: A1.ns,
    to: remotePodAddress(plan, plan.a, B3),
  };
}

interface RoundResult {
  cold: RttFigures[];
  idle: RttFigures[];
  firstReplyMs: number[];
  /** CPU seconds of the variant's four daemons from their start to the end of the cold pings. */
  startCpuS: number[];
  dropped: number;
  pooledCold: number[][];
  pooledIdle: number[][];
}

/** `count` pings from the fabric's pod A1 to B3 at PING_INTERVAL. */
function ping(f: Fabric, count: number): Proc {
  return spawnIn(
    f.fromNs,
    ['ping', '-D', '-n', '-c', String(count), '-i', PING_INTERVAL, '-W', '1', f.to],
    count * Number(PING_INTERVAL) + 30,
  );
}

async function ended(p: Proc, count: number): Promise<void> {
  await Promise.race([p.exited, sleep((count * Number(PING_INTERVAL) + 30) * 1000)]);
}

async function round(r: number, vs: Variant[], fabrics: Fabric[], weftBin: string): Promise<RoundResult> {
  // Variant k runs in fabric (k + r) mod n and starts k-th after the first one (rotated).
  const order = vs.map((_, j) => (j + r) % vs.length);
  const fabricOf = vs.map((_, k) => fabrics[(k + r) % fabrics.length]!);
  const procs: RunningProcess[][] = vs.map(() => []);
  const cold: Echo[][] = vs.map(() => []);
  const firstReplyMs: number[] = vs.map(() => 0);
  const startCpuS: number[] = vs.map(() => 0);
  try {
    // Cold start, one variant at a time (the others' daemons, started before, idle meanwhile):
    // start its data planes, the first reply (the handshake), then COLD pings at once.
    for (const k of order) {
      const v = vs[k]!;
      const f = fabricOf[k]!;
      // The gateways serving before the node agents start (bench/clusters.ts says why).
      await startDataPlane(f.plan, f.gateways, f.dir, upCommand(weftBin, v), 120, () => {}, procs[k]);
      await startDataPlane(f.plan, f.nodes, f.dir, upCommand(weftBin, v), 120, () => {}, procs[k]);
      firstReplyMs[k] = await waitForFirstReply(f.fromNs, f.to, 20_000);
      if (RESTART_GATEWAYS) {
        // A failover's fresh gateways behind node agents that already carried traffic.
        await ended(ping(f, COLD), COLD);
        const gws = procs[k]!.filter((d) => d.file.role === 'gateway');
        for (const d of gws) await d.daemon.stop();
        procs[k] = procs[k]!.filter((d) => d.file.role !== 'gateway');
        await startDataPlane(f.plan, f.gateways, f.dir, upCommand(weftBin, v), 120, () => {}, procs[k]);
        firstReplyMs[k] = await waitForFirstReply(f.fromNs, f.to, 20_000);
      }
      const p = ping(f, COLD);
      await ended(p, COLD);
      cold[k] = echoes(p.out());
      if (process.env.VERBOSE === '1')
        process.stderr.write(
          `[clusters-ping] ${v.label} cold RTTs: ${cold[k]!.map((e) => e.rtt).join(' ')}; CPU s by daemon: ${procs[
            k
          ]!.map(
            (d) => `${d.file.label} ${(nodePids(d.file.ns).reduce((a, pid) => a + ticksOf(pid), 0) / 100).toFixed(2)}`,
          ).join(', ')}\n`,
        );
      startCpuS[k] =
        [...new Set(procs[k]!.map((d) => d.file.ns))].flatMap(nodePids).reduce((a, pid) => a + ticksOf(pid), 0) / 100;
      for (const d of procs[k]!) {
        const got = loggedTiering(d);
        if (got !== expectedTiering(v))
          throw new Error(`${v.label}: ${d.file.label} runs with "${got}", expected "${expectedTiering(v)}"`);
      }
    }
    // Idle: every fabric pinged at once, the starts spread over one interval.
    await sleep(IDLE_AFTER * 1000);
    const pings = new Map<number, Proc>();
    for (const [j, k] of order.entries()) {
      if (j > 0) await sleep(INTERVAL_MS / vs.length);
      pings.set(k, ping(fabricOf[k]!, PINGS));
    }
    await Promise.all([...pings.values()].map((p) => ended(p, PINGS)));
    const { kept, dropped } = clean(vs.map((_, k) => echoes(pings.get(k)!.out())));
    const rtts = (es: Echo[]): number[] => es.map((e) => e.rtt);
    return {
      cold: cold.map((es) => figures(rtts(es))),
      idle: kept.map((es) => figures(rtts(es))),
      pooledCold: cold.map(rtts),
      pooledIdle: kept.map(rtts),
      firstReplyMs,
      startCpuS,
      dropped,
    };
  } finally {
    for (const ps of procs) await stopDataPlane(ps);
  }
}

/** Runs the benchmark; returns a Markdown report. */
export async function runClustersPing(): Promise<string> {
  if (!isRoot()) throw new Error('must run as root (network namespaces, TUN)');
  for (const c of ['ip', 'ping', 'ss', 'timeout', 'env']) if (!haveCommand(c)) throw new Error(`${c} is not installed`);
  const vs = variants();
  const load0 = loadavg();
  const root = mkdtempSync(join(tmpdir(), 'weft-bench-clusters-ping-'));
  const weftBin = findWeftBin();
  const fabrics = vs.map((_, i) => fabric(i, root));
  const results: RoundResult[] = [];
  const t0 = performance.now();
  const cleanup = async (): Promise<void> => {
    for (const p of live) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    for (const f of fabrics) await destroyTopology(f.plan);
    rmSync(root, { recursive: true, force: true }); // the configs hold private keys
  };
  try {
    for (const f of fabrics) {
      await destroyTopology(f.plan); // a crashed earlier run
      await buildTopology(f.plan);
    }
    for (let r = 0; r < ROUNDS; r++) {
      const res = await round(r, vs, fabrics, weftBin);
      results.push(res);
      process.stderr.write(
        `[clusters-ping] round ${r + 1}/${ROUNDS}: ` +
          vs
            .map(
              (v, k) =>
                `${v.label} cold avg ${res.cold[k]!.avg.toFixed(3)} p50 ${res.cold[k]!.p50.toFixed(3)}, idle p50 ${res.idle[k]!.p50.toFixed(3)} p90 ${res.idle[k]!.p90.toFixed(3)} ms (${res.cold[k]!.n}+${res.idle[k]!.n} echoes, first reply ${res.firstReplyMs[k]} ms)`,
            )
            .join('; ') +
          `; ${res.dropped} left out\n`,
      );
    }
  } finally {
    for (const p of live) await stopProc(p, 5000);
    await cleanup();
  }
  const load1 = loadavg();
  const med = (k: number, f: (x: RoundResult) => number): number => median(results.map(f));
  type Row = [string, (x: RoundResult, k: number) => number];
  const rows: Row[] = [
    [`cold: mean RTT of pings 1–${COLD} (median of rounds)`, (x, k) => x.cold[k]!.avg],
    [`cold: median RTT of pings 1–${COLD} (median of rounds)`, (x, k) => x.cold[k]!.p50],
    [`idle: median RTT (median of rounds)`, (x, k) => x.idle[k]!.p50],
    [`idle: p90 RTT (median of rounds)`, (x, k) => x.idle[k]!.p90],
    [`idle: mean RTT (median of rounds)`, (x, k) => x.idle[k]!.avg],
  ];
  const pooled = (k: number, cold: boolean): RttFigures =>
    figures(results.flatMap((x) => (cold ? x.pooledCold[k]! : x.pooledIdle[k]!)));
  const ref = vs[0]!.label;
  const others = vs.slice(1);
  const head = ['metric (ms)', ...vs.map((v) => v.label), ...others.map((v) => `${ref} / ${v.label}`)];
  const line = (name: string, val: (k: number) => number): string => {
    const xs = vs.map((_, k) => val(k));
    return `| ${name} | ${xs.map((x) => x.toFixed(3)).join(' | ')} | ${others.map((_, j) => `${(xs[0]! / xs[j + 1]!).toFixed(2)}x`).join(' | ')} |`;
  };
  const perRound = (f: (x: RoundResult, k: number) => number): string =>
    others
      .map((v, j) => `${ref}/${v.label} ${results.map((x) => (f(x, 0) / f(x, j + 1)).toFixed(2)).join(' ')}`)
      .join('; ');
  return [
    `# clusters-ping: pod A1 → pod B3 (node agent ─ Geneve ─ gateway ═ WireGuard ═ gateway ─ Geneve ─ node agent), ` +
      `V8 tiering ${vs.map((v) => `${v.label} (${expectedTiering(v)})`).join(' / ')}; ` +
      `ROUNDS=${ROUNDS} COLD=${COLD} PINGS=${PINGS} IDLE_AFTER=${IDLE_AFTER}${RESTART_GATEWAYS ? ' RESTART_GATEWAYS=1' : ''}, every ${PING_INTERVAL} s; node ${process.version}; ` +
      `load ${load0.map((x) => x.toFixed(2)).join(' ')} before, ${load1.map((x) => x.toFixed(2)).join(' ')} after; ` +
      `${((performance.now() - t0) / 1000).toFixed(0)} s`,
    '',
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map(([name, f]) => line(name, (k) => med(k, (x) => f(x, k)))),
    line(`cold: median RTT (all rounds' echoes)`, (k) => pooled(k, true).p50),
    line(`idle: median RTT (all rounds' echoes)`, (k) => pooled(k, false).p50),
    line(`idle: p90 RTT (all rounds' echoes)`, (k) => pooled(k, false).p90),
    line(`first reply after start (ms, median of rounds)`, (k) => med(k, (x) => x.firstReplyMs[k]!)),
    line(`CPU of the 4 daemons, start to end of cold pings (s, median of rounds)`, (k) =>
      med(k, (x) => x.startCpuS[k]!),
    ),
    '',
    `per round, cold mean: ${perRound((x, k) => x.cold[k]!.avg)}`,
    `per round, idle median: ${perRound((x, k) => x.idle[k]!.p50)}`,
    `per round, idle p90: ${perRound((x, k) => x.idle[k]!.p90)}`,
    `echoes left out (near another fabric's): ${results.map((x) => x.dropped).join(', ')}`,
  ].join('\n');
}

runClustersPing().then(
  (out) => console.log(out),
  (e) => {
    console.error(`bench/clusters-ping: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 1;
  },
);
