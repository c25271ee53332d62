/**
 * The namespace topology and process handling shared by bench/tunnel.ts (one tunnel at a time)
 * and bench/ping-ab.ts (several tunnels up at once, pinged interleaved).
 *
 * A slot is one tunnel: namespaces NS_A/NS_B joined by a veth underlay, a daemon in each on
 * interfaces WG_A/WG_B (their UAPI sockets in /var/run/wireguard are global, so every slot has
 * its own interface names). Slot 0 keeps the names bench/tunnel.ts always used.
 *
 * Safety: only processes started here are signalled (by process group of the timeout(1) wrapper
 * spawned here, or the PIDs living inside the slot's own namespaces); every command is bounded
 * by a timeout; teardown() deletes the slot's namespaces.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const WG_PORT = 51820;
export const WG_MTU = 1420;
const UAPI_DIR = '/var/run/wireguard';
const HZ = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

export interface Slot {
  NS_A: string;
  NS_B: string;
  VETH_A: string;
  VETH_B: string;
  WG_A: string;
  WG_B: string;
  U_A: string;
  U_B: string;
  T_A: string;
  T_B: string;
}

/** Slot 0: wp-a/wp-b, the names of every earlier bench/tunnel.ts run; slot i > 0: wp<i>-a/… */
export function slot(i: number): Slot {
  const p = i === 0 ? 'wp-' : `wp${i}-`;
  return {
    NS_A: `${p}a`,
    NS_B: `${p}b`,
    VETH_A: `${p}va`,
    VETH_B: `${p}vb`,
    WG_A: `${p}wga`,
    WG_B: `${p}wgb`,
    // Each slot has its own namespaces, so the addresses may repeat; they do not, to keep captures readable.
    U_A: `198.18.${5 + i}.1`,
    U_B: `198.18.${5 + i}.2`,
    T_A: `100.64.${5 + i}.1`,
    T_B: `100.64.${5 + i}.2`,
  };
}

export interface DaemonSpec {
  label: string;
  cmd: string[];
  env: Record<string, string>;
}

export function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const kv of text.split(/\s+/).filter(Boolean)) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new Error(`expected K=V, got ${kv}`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return env;
}

export function intEnv(name: string, dflt: number, min = 1): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${v}: expected an integer ≥ ${min}`);
  return n;
}

function findRoot(): string {
  // dist/bench/x.js → ../..; bench/x.ts (tsx) → ..
  for (const rel of ['../..', '..']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (fs.existsSync(path.join(p, 'bin/weft-wg'))) return p;
  }
  throw new Error('cannot find bin/weft-wg next to this benchmark');
}

export const WEFT_WG = process.env.WEFT_WG ?? path.join(findRoot(), 'bin/weft-wg');

/**
 * The daemons to compare: Debian's wireguard-go, weft-wg, and WEFT_VARIANTS
 * ("name:K=V K=V;name2:…", each a weft-wg with that environment, WEFT_WG=… another build),
 * filtered and ordered by DAEMONS; WEFT_NODE_ARGS and WEFT_ENV apply to every weft-wg.
 */
export function daemonSpecs(): DaemonSpec[] {
  const nodeArgs = (process.env.WEFT_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const weftEnv = parseEnv(process.env.WEFT_ENV ?? '');
  const weftCmd = [process.execPath, ...nodeArgs, WEFT_WG, '-f'];
  const all: DaemonSpec[] = [
    { label: 'wireguard-go', cmd: ['wireguard-go', '-f'], env: {} },
    { label: 'weft', cmd: weftCmd, env: weftEnv },
  ];
  // Upstream wireguard-go with its offloads (built by ../shared/bench/build-upstream-wireguard-go.sh).
  const upstream = process.env.WG_UPSTREAM;
  if (upstream) {
    if (!fs.existsSync(upstream)) throw new Error(`WG_UPSTREAM=${upstream}: no such file (build it first)`);
    all.push({ label: 'wg-upstream', cmd: [upstream, '-f'], env: {} });
  }
  for (const v of (process.env.WEFT_VARIANTS ?? '')
    .split(';')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const c = v.indexOf(':');
    const name = c < 0 ? v : v.slice(0, c);
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`WEFT_VARIANTS: bad label ${name}`);
    const env = { ...weftEnv, ...parseEnv(c < 0 ? '' : v.slice(c + 1)) };
    const cmd = env.WEFT_WG ? [process.execPath, ...nodeArgs, env.WEFT_WG, '-f'] : weftCmd;
    all.push({ label: `weft-${name}`, cmd, env });
  }
  const want = (process.env.DAEMONS ?? all.map((d) => d.label).join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const specs = want.map((w) => {
    const s = all.find((d) => d.label === w);
    if (!s) throw new Error(`DAEMONS: unknown daemon ${w} (known: ${all.map((d) => d.label).join(', ')})`);
    return s;
  });
  if (specs.length === 0) throw new Error('DAEMONS is empty');
  return specs;
}

// ------------------------------------------------------------------------------------------
// Small process helpers (every command bounded)

export function sh(cmd: string[], opts: { timeoutMs?: number; allowFail?: boolean; input?: string } = {}): string {
  const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8', timeout: opts.timeoutMs ?? 15_000, input: opts.input });
  if ((r.status !== 0 || r.error) && !opts.allowFail) {
    throw new Error(
      `command failed (${r.status}): ${cmd.join(' ')}\n${(r.stderr ?? '').trim()}${r.error ? String(r.error) : ''}`,
    );
  }
  return r.stdout ?? '';
}

export function inNs(
  ns: string,
  cmd: string[],
  opts: { timeoutMs?: number; allowFail?: boolean; input?: string } = {},
): string {
  return sh(['ip', 'netns', 'exec', ns, ...cmd], opts);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `cmd` to completion without blocking the event loop (SIGKILL after timeoutMs). */
export function runToEnd(
  cmd: string[],
  timeoutMs: number,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString('utf8');
    });
    child.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString('utf8')).slice(-16384);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      resolve({ status: null, stdout, stderr: String(err) });
    });
  });
}

export interface Proc {
  child: ChildProcess;
  pid: number;
  exited: Promise<void>;
  out: () => string;
}

/** Every process spawnIn started that has not exited yet. */
export const live = new Set<Proc>();

/** Starts `cmd` in `ns` under timeout(1), in its own process group (so we can stop exactly it). */
export function spawnIn(ns: string, cmd: string[], lifetimeS: number, env: Record<string, string> = {}): Proc {
  // -k 15: timeout(1) also SIGKILLs its child that long after forwarding our SIGTERM; a daemon
  // writing a --cpu-prof profile on its way out needs a few seconds.
  const argv = ['timeout', '-k', '15', String(lifetimeS), 'ip', 'netns', 'exec', ns, ...cmd];
  const child = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    detached: true,
  });
  if (child.pid === undefined) throw new Error(`cannot start ${cmd.join(' ')}`);
  let out = '';
  const keep = (d: Buffer): void => {
    out = (out + d.toString('utf8')).slice(-16384);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((r) => {
    child.on('exit', () => r());
    child.on('error', () => r());
  });
  const p: Proc = { child, pid: child.pid, exited, out: () => out };
  live.add(p);
  void exited.then(() => live.delete(p));
  return p;
}

export async function stopProc(p: Proc, graceMs = 20_000): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  try {
    process.kill(-p.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  const done = await Promise.race([p.exited.then(() => true), sleep(graceMs).then(() => false)]);
  if (!done) {
    try {
      process.kill(-p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await Promise.race([p.exited, sleep(1000)]);
  }
}

/** The daemon's PID: timeout → ip netns exec → (env) → daemon is an exec chain, so it is timeout's only child. */
async function childPid(wrapperPid: number): Promise<number> {
  for (let i = 0; i < 50; i++) {
    try {
      const c = fs.readFileSync(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8').trim().split(/\s+/)[0];
      if (c) {
        // Wait until the exec chain has reached the daemon (no longer `ip`).
        const comm = fs.readFileSync(`/proc/${c}/comm`, 'utf8').trim();
        if (comm !== 'ip') return Number(c);
      }
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  throw new Error(`no child of ${wrapperPid}`);
}

/** utime+stime of all threads, in seconds; 0 if the process is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / HZ; // fields 14 and 15 of proc(5)
  } catch {
    return 0;
  }
}

// ------------------------------------------------------------------------------------------
// Topology

export function teardown(s: Slot): void {
  for (const ns of [s.NS_A, s.NS_B]) {
    const list = sh(['ip', 'netns', 'list'], { allowFail: true });
    if (!new RegExp(`^${ns}( |$)`, 'm').test(list)) continue;
    // Anything still inside our own namespaces was started by this benchmark.
    for (const pid of sh(['ip', 'netns', 'pids', ns], { allowFail: true }).split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    sh(['ip', 'netns', 'del', ns], { allowFail: true });
  }
  sh(['ip', 'link', 'del', s.VETH_A], { allowFail: true });
  for (const ifc of [s.WG_A, s.WG_B]) fs.rmSync(path.join(UAPI_DIR, `${ifc}.sock`), { force: true });
}

export function setupUnderlay(s: Slot): void {
  sh(['ip', 'netns', 'add', s.NS_A]);
  sh(['ip', 'netns', 'add', s.NS_B]);
  sh(['ip', 'link', 'add', s.VETH_A, 'netns', s.NS_A, 'type', 'veth', 'peer', 'name', s.VETH_B, 'netns', s.NS_B]);
  sh(['ip', '-n', s.NS_A, 'addr', 'add', `${s.U_A}/24`, 'dev', s.VETH_A]);
  sh(['ip', '-n', s.NS_B, 'addr', 'add', `${s.U_B}/24`, 'dev', s.VETH_B]);
  for (const [ns, dev] of [
    [s.NS_A, s.VETH_A],
    [s.NS_B, s.VETH_B],
  ]) {
    sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
    sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
  }
  inNs(s.NS_A, ['ping', '-n', '-q', '-c', '2', '-i', '0.2', '-W', '1', s.U_B], { timeoutMs: 10_000 });
}

export interface Tunnel {
  a: Proc;
  b: Proc;
  pidA: number;
  pidB: number;
  pubB: string;
}

async function startDaemon(
  spec: DaemonSpec,
  ns: string,
  ifc: string,
  lifetimeS: number,
): Promise<{ proc: Proc; pid: number }> {
  const proc = spawnIn(ns, [...spec.cmd, ifc], lifetimeS, {
    LOG_LEVEL: 'error',
    WG_PROCESS_FOREGROUND: '1',
    ...spec.env,
  });
  const pid = await childPid(proc.pid);
  const sock = path.join(UAPI_DIR, `${ifc}.sock`);
  for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await sleep(100);
  if (!fs.existsSync(sock)) throw new Error(`${spec.label}: no UAPI socket ${sock}: ${proc.out()}`);
  return { proc, pid };
}

/** Both daemons of slot `s` started, keyed with `wg set`, addressed, and warmed up by 100 pings. */
export async function setupTunnel(spec: DaemonSpec, s: Slot, tmp: string, lifetimeS: number): Promise<Tunnel> {
  const keyA = path.join(tmp, `${s.WG_A}.key`);
  const keyB = path.join(tmp, `${s.WG_B}.key`);
  fs.writeFileSync(keyA, sh(['wg', 'genkey']), { mode: 0o600 });
  fs.writeFileSync(keyB, sh(['wg', 'genkey']), { mode: 0o600 });
  const pubA = sh(['wg', 'pubkey'], { input: fs.readFileSync(keyA, 'utf8') }).trim();
  const pubB = sh(['wg', 'pubkey'], { input: fs.readFileSync(keyB, 'utf8') }).trim();
  const a = await startDaemon(spec, s.NS_A, s.WG_A, lifetimeS);
  const b = await startDaemon(spec, s.NS_B, s.WG_B, lifetimeS);
  inNs(
    s.NS_A,
    [
      'wg',
      'set',
      s.WG_A,
      'listen-port',
      String(WG_PORT),
      'private-key',
      keyA,
      'peer',
      pubB,
      'endpoint',
      `${s.U_B}:${WG_PORT}`,
      'allowed-ips',
      `${s.T_B}/32`,
    ],
    { timeoutMs: 10_000 },
  );
  inNs(
    s.NS_B,
    [
      'wg',
      'set',
      s.WG_B,
      'listen-port',
      String(WG_PORT),
      'private-key',
      keyB,
      'peer',
      pubA,
      'endpoint',
      `${s.U_A}:${WG_PORT}`,
      'allowed-ips',
      `${s.T_A}/32`,
    ],
    { timeoutMs: 10_000 },
  );
  sh(['ip', '-n', s.NS_A, 'addr', 'add', `${s.T_A}/24`, 'dev', s.WG_A]);
  sh(['ip', '-n', s.NS_B, 'addr', 'add', `${s.T_B}/24`, 'dev', s.WG_B]);
  sh(['ip', '-n', s.NS_A, 'link', 'set', s.WG_A, 'mtu', String(WG_MTU), 'up']);
  sh(['ip', '-n', s.NS_B, 'link', 'set', s.WG_B, 'mtu', String(WG_MTU), 'up']);
  let ok = false;
  for (let i = 0; i < 10 && !ok; i++) {
    ok =
      spawnSync('ip', ['netns', 'exec', s.NS_A, 'ping', '-n', '-q', '-c', '1', '-W', '1', s.T_B], {
        stdio: 'ignore',
        timeout: 3000,
      }).status === 0;
  }
  if (!ok) throw new Error(`${spec.label}: the tunnel does not pass traffic\nA: ${a.proc.out()}\nB: ${b.proc.out()}`);
  // Warm-up, the same for every daemon: TUNNEL_WARM_PINGS (default 100) pings over ~1 s, so a
  // JIT-compiled daemon is measured warm (as it runs in production) rather than on its first
  // packets; 0 measures the first packets after the handshake (the daemon's own start-up warm-up).
  const warmPings = intEnv('TUNNEL_WARM_PINGS', 100, 0);
  if (warmPings > 0)
    inNs(s.NS_A, ['ping', '-n', '-q', '-c', String(warmPings), '-i', '0.01', '-W', '1', s.T_B], {
      timeoutMs: 10_000,
      allowFail: true,
    });
  return { a: a.proc, b: b.proc, pidA: a.pid, pidB: b.pid, pubB };
}

// ------------------------------------------------------------------------------------------
// Figures

export function median(v: number[]): number {
  const s = [...v].sort((x, y) => x - y);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** The q-quantile of ascending `sorted` (the value at index ⌊n·q⌋). */
export function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];
}

/** The per-echo RTTs (ms) of ping(8)'s output, in the order printed. */
export function pingTimes(out: string): number[] {
  return [...out.matchAll(/time=([\d.]+) ms/g)].map((x) => Number(x[1]));
}

export function need(extra: string[] = []): void {
  if (process.getuid?.() !== 0) throw new Error('must run as root (network namespaces, veth, TUN)');
  for (const c of ['ip', 'ping', 'wg', 'wireguard-go', 'timeout', ...extra]) {
    if (spawnSync('sh', ['-c', `command -v ${c}`], { stdio: 'ignore' }).status !== 0)
      throw new Error(`missing command: ${c}`);
  }
  if (!process.env.WEFT_WG && !fs.existsSync(path.join(path.dirname(WEFT_WG), '../dist/src/cli/weft-wg.js'))) {
    throw new Error('weft-wg is not built (npm run build)');
  }
  if (!fs.existsSync(WEFT_WG)) throw new Error(`WEFT_WG: ${WEFT_WG} does not exist`);
}

/** CPU, kernel, Node, wireguard-go and iperf3 versions: the first lines of every result. */
export function machineLine(): string {
  const cpu = /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
  const wgv = sh(['wireguard-go', '--version'], { allowFail: true }).split('\n')[0];
  return (
    `${cpu} x ${os.cpus().length}, kernel ${os.release()}, node ${process.version}, ${wgv}, ` +
    `${sh(['iperf3', '--version'], { allowFail: true }).split('\n')[0]}`
  );
}
