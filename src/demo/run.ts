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
 * same rows for programs (the e2e test uses the lower-level functions directly).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { httpCheck, iperfCheck, ping, traceroute, udpEchoCheck } from './checks.js';
import {
  WaitAbort,
  haveCommand,
  inNs,
  isRoot,
  listNamespaces,
  runCommand,
  sleep,
  startDaemon,
  waitFor,
  type Daemon,
} from './host.js';
import {
  DEMO_DEFAULT_PREFIX,
  buildPlan,
  describePlan,
  findPod,
  keyFileName,
  planNamespaces,
  remotePodAddress,
  remoteSnatAddress,
  renderConfigs,
  type DemoConfigFile,
  type DemoKeys,
  type DemoPlan,
  type DemoRow,
} from './plan.js';
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

/** Set-up failures of the demo itself (missing tools, a process that died); the message says what to do. */
export class DemoError extends Error {
  override readonly name = 'DemoError';
}

/** The demo was interrupted by a signal (everything was cleaned up). */
export class DemoAbortedError extends Error {
  override readonly name = 'DemoAbortedError';
  constructor(readonly signal: NodeJS.Signals) {
    super(`interrupted by ${signal}; everything was removed`);
  }
}

/** The package's bin/weft, found by walking up from this file to Weft's package.json. */
export function findWeftBin(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        const j = JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string };
        if (j.name === 'weft') return join(dir, 'bin', 'weft');
      } catch {
        /* not ours */
      }
    }
    dir = dirname(dir);
  }
  throw new DemoError('cannot find bin/weft from the demo module; pass weftBin');
}

export function defaultDemoDir(prefix: string): string {
  return join(tmpdir(), `weft-demo-${prefix}`);
}

/** Writes the YAML files and key files (0600) into `dir` (created 0700, emptied first). */
export function writeDemoFiles(plan: DemoPlan, keys: DemoKeys, dir: string): DemoConfigFile[] {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, keyFileName(plan.a)), `${keys.a.privateKey}\n`, { mode: 0o600 });
  writeFileSync(join(dir, keyFileName(plan.b)), `${keys.b.privateKey}\n`, { mode: 0o600 });
  const files = renderConfigs(plan, keys);
  for (const f of files) writeFileSync(join(dir, f.file), f.yaml, { mode: 0o600 });
  return files;
}

/** How a gateway / node agent process is started for a configuration file (argv), and how to call it in progress lines. */
export interface DataPlaneCommand {
  (configPath: string): string[];
  readonly label: string;
}

/** `node <weftBin> up -c FILE`: the product's way (default). */
export function weftUpCommand(weftBin: string): DataPlaneCommand {
  return Object.assign((configPath: string) => [process.execPath, weftBin, 'up', '-c', configPath], {
    label: 'weft up -c',
  });
}

/**
 * `node -e` running the data-plane launch helper of a built tree (dist/src/cli/launch.js
 * runUntilSignal): the same Gateway / NodeAgent without the CLI's reload, metrics and control
 * socket. Used by tests when the CLI is not built.
 */
export function launchModuleCommand(launchJs: string): DataPlaneCommand {
  const script =
    'import(process.argv[1]).then((m) => m.runUntilSignal(process.argv[2])).then((c) => { process.exitCode = c; }, (e) => { console.error(e); process.exitCode = 1; });';
  return Object.assign((configPath: string) => [process.execPath, '-e', script, launchJs, configPath], {
    label: 'launch.runUntilSignal',
  });
}

export interface RunningProcess {
  readonly file: DemoConfigFile;
  readonly daemon: Daemon;
  readonly logFile: string;
}

/** Log file of a configuration's process. */
function logFileOf(dir: string, f: DemoConfigFile): string {
  return join(dir, f.file.replace(/\.yaml$/, '.log'));
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Starts every gateway and node agent (`node <weftBin> up -c FILE` inside its namespace), gateways
 * first, and waits until each is serving: the gateway's WireGuard and Geneve sockets are bound,
 * the node's TUN device and its route to the remote pods exist. Throws DemoError with the log tail
 * of a process that exits or does not come up. Each started process is pushed onto `procs` at
 * once (the caller's array, so it can stop them even when this throws half-way).
 */
export async function startDataPlane(
  plan: DemoPlan,
  files: readonly DemoConfigFile[],
  dir: string,
  command: DataPlaneCommand,
  lifetimeS: number,
  report: (s: string) => void = () => {},
  procs: RunningProcess[] = [],
): Promise<RunningProcess[]> {
  const ordered = [...files.filter((f) => f.role === 'gateway'), ...files.filter((f) => f.role === 'node')];
  for (const f of ordered) {
    report(`starting ${f.label} in ${f.ns}: ${command.label} ${f.file}`);
    const logFile = logFileOf(dir, f);
    // One control-socket directory for the whole demo (instance names are the files' base
    // names, all distinct), so `WEFT_RUN_DIR=<dir>/run weft show` lists every process.
    const runDir = join(dir, 'run');
    mkdirSync(runDir, { recursive: true, mode: 0o700 });
    const daemon = startDaemon(f.ns, f.label, command(join(dir, f.file)), {
      lifetimeS,
      logFile,
      env: { WEFT_RUN_DIR: runDir },
    });
    procs.push({ file: f, daemon, logFile });
  }
  const tunOf = new Map<string, string>();
  for (const c of [plan.a, plan.b]) for (const n of c.nodes) tunOf.set(n.ns, n.tunName);
  for (const p of procs) {
    const f = p.file;
    try {
      await waitFor(
        `${f.label} to come up`,
        async () => {
          if (p.daemon.exitStatus !== null) throw new WaitAbort(`${f.label} exited (${p.daemon.exitStatus})`);
          if (f.role === 'gateway') {
            const ss = await runCommand(inNs(f.ns, ['ss', '-Hlun']), { allowFail: true });
            return ss.stdout.includes(`:${plan.wireguardPort} `) && ss.stdout.includes(`:${plan.genevePort} `);
          }
          const r = await runCommand(inNs(f.ns, ['ip', '-4', 'route', 'show', 'dev', tunOf.get(f.ns)!]), {
            allowFail: true,
          });
          return r.ok && r.stdout.includes(plan.a.remappedPeerPodCIDR);
        },
        20_000,
        100,
      );
    } catch (e) {
      throw new DemoError(
        `${e instanceof Error ? e.message : String(e)}\n--- ${p.logFile} (last lines) ---\n${tail(p.logFile)}`,
      );
    }
  }
  return procs;
}

export async function stopDataPlane(procs: readonly RunningProcess[]): Promise<void> {
  // Node agents first (they remove their routes), then the gateways.
  for (const p of [...procs].reverse()) await p.daemon.stop();
}

/**
 * Pings until the first reply (the first packet triggers the WireGuard handshake); returns the
 * time to that reply in milliseconds. Throws DemoError after `timeoutMs`.
 */
export async function waitForFirstReply(fromNs: string, addr: string, timeoutMs = 20_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const r = await runCommand(inNs(fromNs, ['ping', '-n', '-c', '1', '-W', '1', addr]), {
      allowFail: true,
      timeoutMs: 5000,
    });
    if (/1 received/.test(r.stdout)) return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs)
      throw new DemoError(`no reply from ${addr} (from ${fromNs}) within ${timeoutMs} ms`);
    await sleep(100);
  }
}

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
  const A1 = findPod(plan, 'A1');
  const A2 = findPod(plan, 'A2');
  const A3 = findPod(plan, 'A3');
  const B1 = findPod(plan, 'B1');
  const B3 = findPod(plan, 'B3');
  const B4 = findPod(plan, 'B4');
  const b3AtA = remotePodAddress(plan, plan.a, B3);
  const a1AtB = remotePodAddress(plan, plan.b, A1);
  const a2AtB = remotePodAddress(plan, plan.b, A2);
  const a3AtB = remotePodAddress(plan, plan.b, A3);
  const b1AtA = remotePodAddress(plan, plan.a, B1);
  const snatAtB = remoteSnatAddress(plan, plan.b);
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
