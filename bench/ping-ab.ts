/**
 * Idle ping RTT of several WireGuard daemons measured at the same time: every daemon's tunnel
 * is up at once (one namespace pair each, bench/tunnel-netns.ts slots), and one ping(8) per
 * tunnel runs concurrently at the same interval, the k-th started k/n of an interval after the
 * first, so the echoes interleave (A, B, A, B, …) instead of taking turns by minutes as in
 * bench/tunnel.ts. Load and frequency drift of a shared machine then hit every daemon alike,
 * which the sequential ping test cannot promise (its run-to-run spread was larger than the
 * differences it had to tell apart).
 *
 * Run (root):  npm run bench:ping          (= build, then node dist/bench/ping-ab.js)
 * Knobs: ROUNDS=5 (fresh tunnels each round; the start order of the pings and the slot of
 *        each daemon rotate every round), PINGS=300, PING_INTERVAL=0.02 (s),
 *        DAEMONS / WEFT_VARIANTS / WEFT_ENV / WEFT_NODE_ARGS / WEFT_WG as bench/tunnel.ts,
 *        TUNNEL_WARM_PINGS=100 (pings before the measured ones; 0: the first pings after start,
 *        e.g. a daemon's start-up warm-up against WEFT_WARMUP_MS=0).
 * Printed per daemon: the median over rounds of each round's median, p90 and mean RTT, the
 * same over all echoes pooled, each weft daemon's ratio to the anchor (upstream wireguard-go
 * when WG_UPSTREAM is set, else Debian's), and both sides' daemon CPU over the pings (a share
 * of one core: the cost of WEFT_BUSY_POLL_US, e.g.).
 * The pings drift against each other over a round: an echo that came within COLLIDE_MS = 1 ms
 * of another tunnel's (ping -D timestamps) is left out, with that one, and counted; the
 * figures are the daemons' alone on the machine.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  cpuSeconds,
  daemonSpecs,
  intEnv,
  live,
  machineLine,
  median,
  need,
  quantile,
  setupTunnel,
  setupUnderlay,
  sleep,
  slot,
  spawnIn,
  stopProc,
  teardown,
  type DaemonSpec,
  type Proc,
  type Slot,
  type Tunnel,
} from './tunnel-netns.js';
import { clean, echoes, figures, type RttFigures as RoundFigures } from './ping-echoes.js';

const ROUNDS = intEnv('ROUNDS', 5);
const PINGS = intEnv('PINGS', 300);
const PING_INTERVAL = process.env.PING_INTERVAL ?? '0.02';
const INTERVAL_MS = Number(PING_INTERVAL) * 1000;
if (!(INTERVAL_MS >= 2)) throw new Error(`PING_INTERVAL=${PING_INTERVAL}: expected seconds ≥ 0.002`);

async function round(
  r: number,
  specs: DaemonSpec[],
  tmp: string,
): Promise<{ rtts: Map<string, number[]>; dropped: number; cpu: Map<string, number> }> {
  // Rotate both the slot each daemon gets and the order the pings start in.
  const order = specs.map((_, i) => specs[(i + r) % specs.length]);
  const slots = new Map<string, Slot>(order.map((s, i) => [s.label, slot(i)]));
  const tunnels: Tunnel[] = [];
  try {
    for (const s of order) {
      teardown(slots.get(s.label)!);
      setupUnderlay(slots.get(s.label)!);
      tunnels.push(await setupTunnel(s, slots.get(s.label)!, tmp, PINGS * Number(PING_INTERVAL) + 300));
    }
    await sleep(500);
    // Both daemons' CPU over the pings, as a share of one core.
    const cpuOf = (k: number): number => cpuSeconds(tunnels[k].pidA) + cpuSeconds(tunnels[k].pidB);
    const cpu0 = order.map((_, k) => cpuOf(k));
    const t0 = performance.now();
    const pings: Proc[] = [];
    for (const [k, s] of order.entries()) {
      const sl = slots.get(s.label)!;
      if (k > 0) await sleep(INTERVAL_MS / order.length);
      pings.push(
        spawnIn(
          sl.NS_A,
          ['ping', '-D', '-n', '-c', String(PINGS), '-i', PING_INTERVAL, '-W', '1', sl.T_B],
          PINGS * Number(PING_INTERVAL) + 30,
        ),
      );
    }
    await Promise.all(pings.map((p) => Promise.race([p.exited, sleep((PINGS * Number(PING_INTERVAL) + 30) * 1000)])));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = new Map(order.map((s, k) => [s.label, (100 * (cpuOf(k) - cpu0[k])) / seconds]));
    const { kept, dropped } = clean(pings.map((p) => echoes(p.out())));
    return { rtts: new Map<string, number[]>(order.map((s, k) => [s.label, kept[k].map((e) => e.rtt)])), dropped, cpu };
  } finally {
    for (const t of tunnels) {
      await stopProc(t.a);
      await stopProc(t.b);
    }
    for (const s of order) teardown(slots.get(s.label)!);
  }
}

async function main(): Promise<number> {
  need();
  const specs = daemonSpecs();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-pingab-'));
  const cleanup = (): void => {
    for (const p of live) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    for (let i = 0; i < specs.length; i++) teardown(slot(i));
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  process.once('SIGTERM', () => {
    cleanup();
    process.exit(143);
  });
  console.log(
    `# ping-ab: ${specs.map((s) => s.label).join(' / ')} interleaved; ROUNDS=${ROUNDS} PINGS=${PINGS}x${PING_INTERVAL}s; load ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log(`# ${machineLine()}`);
  const perRound = new Map<string, RoundFigures[]>(specs.map((s) => [s.label, []]));
  const pooled = new Map<string, number[]>(specs.map((s) => [s.label, []]));
  const cpus = new Map<string, number[]>(specs.map((s) => [s.label, []]));
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const { rtts, dropped, cpu } = await round(r, specs, tmp);
      const parts: string[] = [];
      for (const s of specs) {
        const f = figures(rtts.get(s.label)!);
        perRound.get(s.label)!.push(f);
        pooled.get(s.label)!.push(...rtts.get(s.label)!);
        cpus.get(s.label)!.push(cpu.get(s.label)!);
        parts.push(
          `${s.label} p50 ${f.p50.toFixed(3)} p90 ${f.p90.toFixed(3)} avg ${f.avg.toFixed(3)} ms (${f.n} echoes), cpu ${cpu.get(s.label)!.toFixed(1)} %`,
        );
      }
      process.stderr.write(
        `[ping-ab] round ${r + 1}/${ROUNDS}: ${parts.join('; ')}; ${dropped} echoes left out (near another tunnel's)\n`,
      );
    }
  } finally {
    cleanup();
  }
  // Upstream wireguard-go (with its offloads) when it runs, else Debian's.
  const ANCHOR = specs.some((s) => s.label === 'wg-upstream') ? 'wg-upstream' : 'wireguard-go';
  const rows: [string, (l: string) => number][] = [
    ['median RTT (median of rounds)', (l) => median(perRound.get(l)!.map((f) => f.p50))],
    ['p90 RTT (median of rounds)', (l) => median(perRound.get(l)!.map((f) => f.p90))],
    ['mean RTT (median of rounds)', (l) => median(perRound.get(l)!.map((f) => f.avg))],
    ['median RTT (all echoes)', (l) => figures(pooled.get(l)!).p50],
    ['p90 RTT (all echoes)', (l) => figures(pooled.get(l)!).p90],
    [
      'p99 RTT (all echoes)',
      (l) =>
        quantile(
          [...pooled.get(l)!].sort((x, y) => x - y),
          0.99,
        ),
    ],
  ];
  const labels = specs.map((s) => s.label);
  const compared = labels.includes(ANCHOR) ? labels.filter((l) => l !== ANCHOR && l.startsWith('weft')) : [];
  const head = ['metric (ms)', ...labels, ...compared.map((l) => `${l} / ${ANCHOR}`)];
  console.log(`\n| ${head.join(' | ')} |\n|${head.map(() => '---').join('|')}|`);
  for (const [name, f] of rows) {
    const v = new Map(labels.map((l) => [l, f(l)]));
    const ratios = compared.map((l) => `${(v.get(l)! / v.get(ANCHOR)!).toFixed(2)}x`);
    console.log(`| ${name} | ${labels.map((l) => v.get(l)!.toFixed(3)).join(' | ')} | ${ratios.join(' | ')} |`);
  }
  console.log(
    `\ndaemon CPU (both sides) during the pings, % of one core, median of rounds: ${labels
      .map((l) => `${l} ${median(cpus.get(l)!).toFixed(1)}`)
      .join(', ')}`,
  );
  // Per round ratios: how often weft is ahead, not only the medians.
  for (const l of compared) {
    const rs = perRound.get(l)!.map((f, i) => f.p50 / perRound.get(ANCHOR)![i].p50);
    const ps = perRound.get(l)!.map((f, i) => f.p90 / perRound.get(ANCHOR)![i].p90);
    console.log(
      `\n${l} / ${ANCHOR} per round: median ${rs.map((x) => x.toFixed(2)).join(' ')}; p90 ${ps.map((x) => x.toFixed(2)).join(' ')}`,
    );
  }
  console.log(
    `# load after: ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  return 0;
}

main().then(
  (c) => {
    process.exitCode = c;
  },
  (e) => {
    console.error(`bench/ping-ab: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 1;
  },
);
