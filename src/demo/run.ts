/**
 * `weft demo`: two clusters on this machine, and what crosses between them.
 *
 * As root: builds the plan's network namespaces (src/demo/plan.ts: two clusters with the same
 * pod CIDR, a gateway and two nodes with two pods each), writes every process's YAML and the
 * gateways' keys into a private directory, starts each gateway and node agent as a child process
 * (`node bin/weft up -c FILE` under a hard lifetime, in its own process group), waits for the
 * WireGuard handshake, runs the cross-cluster checks (src/demo/checks.ts) and prints a table.
 * Everything is removed afterwards — also on errors and on Ctrl-C (SIGINT/SIGTERM) — unless
 * `keep` is set; `cleanup` removes what an earlier run left (stable names, see plan.ts).
 *
 * Without root: the same two clusters in ONE process over a simulated network (src/demo/sim.ts:
 * the real protocol engines, in-memory queues instead of TUN/UDP), with what can be measured
 * there.
 *
 * Output: one line per step while setting up, then the table. The returned report carries the
 * same rows for programs (the e2e tests use the lower-level functions of data-plane.ts
 * directly). The checks and their table are cross-checks.ts's.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { haveCommand, isRoot, listNamespaces } from './host.js';
import {
  DEMO_DEFAULT_PREFIX,
  buildPlan,
  describePlan,
  findPod,
  planNamespaces,
  remotePodAddress,
  type DemoRow,
} from './plan.js';
import {
  DemoError,
  defaultDemoDir,
  findWeftBin,
  startDataPlane,
  stopDataPlane,
  waitForFirstReply,
  weftUpCommand,
  writeDemoFiles,
  type RunningProcess,
} from './data-plane.js';
import { formatTable, runChecks } from './cross-checks.js';
import { generateDemoKeys } from './keys.js';
import { buildTopology, destroyTopology } from './topology.js';

export interface DemoOptions {
  /** Leave namespaces and processes running (they still stop after `lifetimeS`). */
  keep?: boolean;
  /** Only remove what an earlier run left behind. */
  cleanup?: boolean;
  /** Run the in-process simulation even as root. */
  simulate?: boolean;
  /** Namespace prefix (default "wd"). */
  prefix?: string;
  /** Hard lifetime of every started process, seconds. Default 300, with `keep` 3600. */
  lifetimeS?: number;
  /** iperf3 duration, seconds. Default 3. */
  iperfSeconds?: number;
  /** Where configuration files, keys and logs go. Default <tmpdir>/weft-demo-<prefix>. */
  dir?: string;
  /** Path of bin/weft. Default: found from this module's location. */
  weftBin?: string;
  /** Output (progress lines and the table). Default: process.stdout. */
  out?: (text: string) => void;
  /** Install SIGINT/SIGTERM handlers that clean up before exiting. Default true. */
  handleSignals?: boolean;
}

export interface DemoReport {
  mode: 'namespaces' | 'simulated' | 'cleanup';
  rows: DemoRow[];
  /** Every check passed (informational rows do not count). */
  ok: boolean;
  /** 0 when ok, 1 otherwise (the CLI's exit code). */
  exitCode: number;
  /** Where the configuration files and logs are (namespaces mode). */
  dir?: string;
}

/** The demo was interrupted by a signal (everything was cleaned up). */
export class DemoAbortedError extends Error {
  override readonly name = 'DemoAbortedError';
  constructor(readonly signal: NodeJS.Signals) {
    super(`interrupted by ${signal}; everything was removed`);
  }
}

export async function runDemo(opts: DemoOptions = {}): Promise<DemoReport> {
  const out =
    opts.out ??
    ((t: string) => {
      process.stdout.write(t);
    });
  const prefix = opts.prefix ?? DEMO_DEFAULT_PREFIX;
  const plan = buildPlan(prefix);
  const dir = opts.dir ?? defaultDemoDir(prefix);
  const t0 = Date.now();
  const step = (s: string): void => {
    out(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${s}\n`);
  };

  if (opts.cleanup) {
    if (!isRoot())
      throw new DemoError('weft demo --cleanup needs root (it deletes network namespaces); run it with sudo');
    const removed = await destroyTopology(plan);
    const hadDir = existsSync(dir);
    rmSync(dir, { recursive: true, force: true });
    out(
      removed.length === 0 && !hadDir
        ? `nothing to clean up (no ${prefix}-a-*/${prefix}-b-* namespaces, no ${dir})\n`
        : `removed ${removed.length} namespaces${removed.length ? ` (${removed.join(' ')})` : ''}${hadDir ? ` and ${dir}` : ''}\n`,
    );
    return { mode: 'cleanup', rows: [], ok: true, exitCode: 0 };
  }

  const simulated = opts.simulate === true || !isRoot();
  out(`${describePlan(plan, simulated)}\n\n`);
  if (simulated) {
    if (!opts.simulate)
      out(
        'weft demo: not running as root, so no network namespaces, veth or TUN devices can be created.\nRunning the same two clusters in ONE process over a simulated network instead (sudo weft demo for the real thing).\n\n',
      );
    const { runSimulatedDemo } = await import('./sim.js');
    const rows = await runSimulatedDemo(plan, step);
    out(`\n${formatTable(rows)}\n`);
    const ok = rows.every((r) => r.ok !== false);
    out(
      ok
        ? '\nall checks passed (simulated network)\n'
        : `\n${rows.filter((r) => r.ok === false).length} check(s) failed\n`,
    );
    return { mode: 'simulated', rows, ok, exitCode: ok ? 0 : 1 };
  }

  for (const cmd of ['ip', 'ping', 'ss', 'timeout']) {
    if (!haveCommand(cmd))
      throw new DemoError(
        `${cmd} is not installed; run scripts/setup.sh (Debian: apt-get install iproute2 iputils-ping coreutils)`,
      );
  }
  const weftBin = opts.weftBin ?? findWeftBin();
  const lifetimeS = opts.lifetimeS ?? (opts.keep ? 3600 : 300);
  const procs: RunningProcess[] = [];
  let cleaned = false;
  /** Stops everything; the directory (configuration, logs) is kept when something went wrong. */
  const cleanupAll = async (keepDir: boolean): Promise<void> => {
    if (cleaned) return;
    cleaned = true;
    step(
      `cleaning up: stopping ${procs.length} processes, deleting ${planNamespaces(plan).length} namespaces${keepDir ? '' : `, removing ${dir}`}`,
    );
    await stopDataPlane(procs);
    await destroyTopology(plan);
    if (keepDir) out(`configuration and logs kept in ${dir} (node ${weftBin} demo --cleanup removes them)\n`);
    else rmSync(dir, { recursive: true, force: true });
  };
  // Ctrl-C / SIGTERM: the set-up notices at its next step (every command it waits for is
  // bounded), cleans up and then re-raises the signal so the process ends as the signal says.
  // If it has not finished within 20 s, the handler cleans up itself.
  let aborted: NodeJS.Signals | null = null;
  let forceTimer: NodeJS.Timeout | undefined;
  const reraise = (sig: NodeJS.Signals): void => {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.kill(process.pid, sig);
  };
  function onSignal(sig: NodeJS.Signals): void {
    if (aborted !== null) return;
    aborted = sig;
    out(`\n${sig}: stopping the demo\n`);
    forceTimer = setTimeout(() => {
      void cleanupAll(false).finally(() => reraise(sig));
    }, 20_000);
  }
  const checkpoint = (s: string): void => {
    if (aborted !== null) throw new DemoAbortedError(aborted);
    step(s);
  };
  if (opts.handleSignals ?? true) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }

  try {
    const existing = await listNamespaces();
    const left = planNamespaces(plan).filter((n) => existing.has(n));
    if (left.length > 0) {
      checkpoint(
        `removing ${left.length} namespaces left by an earlier run (${left.slice(0, 3).join(' ')}${left.length > 3 ? ' …' : ''})`,
      );
      await destroyTopology(plan);
    }
    checkpoint(`generating gateway keys and writing 6 configuration files to ${dir}`);
    const files = writeDemoFiles(plan, generateDemoKeys(), dir);
    try {
      await buildTopology(plan, checkpoint);
    } catch (e) {
      if (e instanceof DemoAbortedError) throw e;
      throw new DemoError(`building the namespaces failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    await startDataPlane(plan, files, dir, weftUpCommand(weftBin), lifetimeS, checkpoint, procs);
    const A1 = findPod(plan, 'A1');
    const B3 = findPod(plan, 'B3');
    const b3AtA = remotePodAddress(plan, plan.a, B3);
    checkpoint(`waiting for the WireGuard handshake (ping ${A1.name} → ${B3.name} as ${b3AtA})`);
    const handshakeMs = await waitForFirstReply(A1.ns, b3AtA);
    const rows = await runChecks(plan, { iperfSeconds: opts.iperfSeconds ?? 3, handshakeMs }, checkpoint);
    if (aborted !== null) throw new DemoAbortedError(aborted);
    for (const p of procs) {
      if (p.daemon.exitStatus !== null)
        rows.push({
          check: 'process',
          path: p.file.label,
          result: `exited (${p.daemon.exitStatus}) during the checks`,
          ok: false,
        });
    }
    out(`\n${formatTable(rows)}\n\n`);
    const ok = rows.every((r) => r.ok !== false);
    out(
      ok ? 'all checks passed\n' : `${rows.filter((r) => r.ok === false).length} check(s) failed; logs: ${dir}/*.log\n`,
    );
    if (opts.keep) {
      for (const p of procs) p.daemon.detach();
      out(
        `\n--keep: everything stays up for ${lifetimeS} s. Try:\n` +
          `  ip netns exec ${A1.ns} ping ${b3AtA}\n` +
          `  WEFT_RUN_DIR=${join(dir, 'run')} node ${weftBin} show gateway-a\n` +
          `  configuration and logs: ${dir}\n` +
          `  remove it all: node ${weftBin} demo --cleanup${prefix === DEMO_DEFAULT_PREFIX ? '' : ` --prefix ${prefix}`}\n`,
      );
    } else {
      await cleanupAll(!ok);
    }
    return { mode: 'namespaces', rows, ok, exitCode: ok ? 0 : 1, dir };
  } catch (e) {
    await cleanupAll(!(e instanceof DemoAbortedError));
    if (e instanceof DemoAbortedError && (opts.handleSignals ?? true)) {
      clearTimeout(forceTimer);
      reraise(e.signal);
    }
    throw e;
  } finally {
    clearTimeout(forceTimer);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}
