/**
 * The demo's contact with the host: running `ip` and friends with a time limit, network
 * namespaces, and daemons started with a hard lifetime and stopped by their process-group id.
 *
 * Safety contract:
 * - every command has a time limit; nothing waits forever;
 * - namespaces are created and deleted only by the names the caller passes (the demo plan's
 *   stable names), never by pattern;
 * - daemons run under `timeout -k 3 <lifetime>` in their own process group (detached), so the
 *   lifetime holds even if this process dies, and `stop()` signals exactly that group.
 *
 * Failure kind: a command that fails is a `HostCommandError` naming the command, its exit status
 * and stderr.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

export class HostCommandError extends Error {
  override readonly name = 'HostCommandError';
  constructor(
    readonly cmd: readonly string[],
    readonly status: number | string | null,
    readonly stderr: string,
  ) {
    super(`command failed (${status ?? 'no status'}): ${cmd.join(' ')}${stderr.trim() ? `\n${stderr.trim()}` : ''}`);
  }
}

export interface RunOptions {
  timeoutMs?: number;
  /** Return the output instead of throwing when the command fails. */
  allowFail?: boolean;
  input?: string;
  /** Extra environment variables. */
  env?: NodeJS.ProcessEnv;
}

export interface RunResult {
  ok: boolean;
  status: number | string | null;
  stdout: string;
  stderr: string;
}

/** Runs a command (no shell) with a time limit; resolves with its output or throws HostCommandError. */
export function runCommand(cmd: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd[0]!,
      cmd.slice(1),
      {
        encoding: 'utf8',
        timeout: opts.timeoutMs ?? 15_000,
        killSignal: 'SIGKILL',
        maxBuffer: 16 * 1024 * 1024,
        ...(opts.env === undefined ? {} : { env: { ...process.env, ...opts.env } }),
      },
      (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: number | string; signal?: string; killed?: boolean }) | null;
        const status =
          e === null
            ? 0
            : e.killed
              ? 'timeout'
              : (e.signal ?? (typeof e.code === 'number' ? e.code : (e.code ?? 'error')));
        const res: RunResult = {
          ok: e === null,
          status,
          stdout: stdout ?? '',
          stderr: `${stderr ?? ''}${e !== null && typeof e.code === 'string' ? String(e.message) : ''}`,
        };
        if (!res.ok && !opts.allowFail) reject(new HostCommandError(cmd, status, res.stderr));
        else resolve(res);
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    else child.stdin?.end();
  });
}

/** `cmd` inside network namespace `ns` (`ip netns exec`). */
export function inNs(ns: string, cmd: readonly string[]): string[] {
  return ['ip', 'netns', 'exec', ns, ...cmd];
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd], { stdio: 'ignore' }).status === 0;
}

/** Names of the network namespaces that exist now. */
export async function listNamespaces(): Promise<Set<string>> {
  const r = await runCommand(['ip', '-o', 'netns', 'list'], { allowFail: true });
  const names = new Set<string>();
  for (const line of r.stdout.split('\n')) {
    const name = line.trim().split(/\s+/)[0];
    if (name) names.add(name);
  }
  return names;
}

/**
 * Deletes the named namespaces (those that exist), first killing every process still inside
 * them (by PID, as listed by `ip netns pids`: only processes in namespaces we own).
 * Returns the names that were removed.
 */
export async function deleteNamespaces(names: readonly string[]): Promise<string[]> {
  const existing = await listNamespaces();
  const present = names.filter((ns) => existing.has(ns));
  // SIGTERM first (a Weft process removes its routes and sockets), SIGKILL what is left after 2 s.
  for (const sig of ['SIGTERM', 'SIGKILL'] as const) {
    let signalled = 0;
    for (const ns of present) {
      for (const pid of await pidsIn(ns)) {
        try {
          process.kill(pid, sig);
          signalled++;
        } catch {
          /* already gone */
        }
      }
    }
    if (signalled === 0) break;
    if (sig === 'SIGTERM') {
      const deadline = Date.now() + 2000;
      while (Date.now() < deadline) {
        let left = 0;
        for (const ns of present) left += (await pidsIn(ns)).length;
        if (left === 0) break;
        await sleep(100);
      }
    }
  }
  const removed: string[] = [];
  for (const ns of present) {
    await runCommand(['ip', 'netns', 'del', ns], { allowFail: true });
    removed.push(ns);
  }
  return removed;
}

/** PIDs of the processes inside namespace `ns` (never our own, never init). */
async function pidsIn(ns: string): Promise<number[]> {
  const out = (await runCommand(['ip', 'netns', 'pids', ns], { allowFail: true })).stdout;
  return out
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 1 && n !== process.pid);
}

export interface DaemonOptions {
  /** Hard lifetime in seconds (timeout(1) sends SIGTERM, then SIGKILL 3 s later). */
  lifetimeS: number;
  /** Append stdout+stderr to this file (it stays readable after we exit); default: kept in memory. */
  logFile?: string;
  env?: NodeJS.ProcessEnv;
}

/** A long-running child in its own process group. */
export class Daemon {
  readonly pid: number;
  readonly exited: Promise<number | string>;
  private out = '';
  private exitValue: number | string | null = null;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    if (child.pid === undefined) throw new HostCommandError(child.spawnargs, 'spawn-error', `could not start ${name}`);
    this.pid = child.pid;
    const keep = (d: Buffer): void => {
      this.out += d.toString('utf8');
      if (this.out.length > 65536) this.out = this.out.slice(-65536);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.exitValue = code ?? signal ?? 'unknown';
        resolve(this.exitValue);
      });
      child.on('error', () => {
        this.exitValue = 'spawn-error';
        resolve(this.exitValue);
      });
    });
  }

  /** Output kept in memory (when not logging to a file). */
  output(): string {
    return this.out;
  }

  /** Exit code or signal once it ended, else null. */
  get exitStatus(): number | string | null {
    return this.exitValue;
  }

  /** Lets this process exit without waiting for the daemon (used by `--keep`). */
  detach(): void {
    this.child.unref();
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
  }

  /** SIGTERM to the daemon's process group, SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exitValue !== null) return;
    signalGroup(this.pid, 'SIGTERM');
    const done = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      signalGroup(this.pid, 'SIGKILL');
      await Promise.race([this.exited, sleep(1000)]);
    }
  }
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    /* group already gone */
  }
}

/** Starts `cmd` in namespace `ns` (null: here) under a hard lifetime, in its own process group. */
export function startDaemon(ns: string | null, name: string, cmd: readonly string[], opts: DaemonOptions): Daemon {
  const lifetime = String(Math.max(1, Math.ceil(opts.lifetimeS)));
  const argv = ['timeout', '-k', '3', lifetime, ...(ns === null ? cmd : inNs(ns, cmd))];
  let fd: number | undefined;
  if (opts.logFile !== undefined) fd = openSync(opts.logFile, 'a', 0o600);
  try {
    const child = spawn(argv[0]!, argv.slice(1), {
      stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
      env: { ...process.env, ...opts.env },
      detached: true,
    });
    return new Daemon(name, child);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Thrown by a waitFor() check to stop waiting at once (e.g. the process it waits for has exited). */
export class WaitAbort extends Error {
  override readonly name = 'WaitAbort';
}

/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws, naming
 * `what`). Other errors thrown by `check` count as "not yet"; a WaitAbort ends the wait at once.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      if (e instanceof WaitAbort) throw e;
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last instanceof Error ? last.message : String(last)}` : ''}`,
      );
    await sleep(intervalMs);
  }
}
