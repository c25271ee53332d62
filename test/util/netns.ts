/**
 * Test harness for end-to-end tests in network namespaces (root only).
 *
 * Safety contract (DEVELOPERS.md, "Real parts, not mocks"):
 * - every namespace and veth this harness creates carries the caller's prefix and is deleted by
 *   `cleanup()`, which tests call in afterAll (also after failures);
 * - processes are started through `spawnIn()` and killed by PID (process group of the child we
 *   spawned), never by name; each has a hard lifetime through timeout(1);
 * - addresses are the test's own (198.18.0.0/15 benchmark range, 100.64/10, 10.x inside the
 *   namespaces); namespaces have no default route, so nothing can leave the machine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { needs, type Needs } from './requirements.js';
import { sleep, waitFor } from './wait.js';

export { haveCommand, isRoot } from './requirements.js';
export { sleep, waitFor } from './wait.js';

/**
 * Why e2e tests cannot run here (non-root: the reason to skip), or null when they can.
 * As root a missing tool throws, naming the package to install (see requirements.ts).
 */
export function e2eUnavailableReason(
  commands: string[] = [],
  more: Omit<Needs, 'root' | 'commands'> = {},
): string | null {
  return needs({ root: true, commands, ...more });
}

/**
 * The environment of a process started in a namespace: this one's, without NODE_EXTRA_CA_CERTS.
 * That variable makes every Node process parse a CA bundle at start (65 ms on this machine), which
 * a Weft pod's environment does not carry (deploy/ sets none) and no test process needs: the API
 * servers' certificates come with the kubeconfigs. Restart and failover times then measure Weft.
 */
function daemonEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_EXTRA_CA_CERTS'];
  return env;
}

export class CommandError extends Error {
  constructor(
    readonly cmd: string[],
    readonly status: number | null,
    readonly stderr: string,
  ) {
    super(`command failed (${status}): ${cmd.join(' ')}\n${stderr.trim()}`);
  }
}

/** Runs a command synchronously with a time limit; throws CommandError on failure. */
export function run(cmd: string[], opts: { timeoutMs?: number; allowFail?: boolean; input?: string } = {}): string {
  const r = spawnSync(cmd[0], cmd.slice(1), {
    encoding: 'utf8',
    timeout: opts.timeoutMs ?? 15_000,
    input: opts.input,
  });
  if ((r.status !== 0 || r.error) && !opts.allowFail) {
    throw new CommandError(cmd, r.status, `${r.stderr ?? ''}${r.error ? String(r.error) : ''}`);
  }
  return r.stdout ?? '';
}

export interface Spawned {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly name: string;
  output(): string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  readonly exited: Promise<number | string>;
}

export class Topology {
  private readonly namespaces: string[] = [];
  private readonly procs: Spawned[] = [];

  /** `prefix` keeps names of parallel test files apart; keep it short (interface names ≤ 15 chars). */
  constructor(readonly prefix: string) {}

  ns(name: string): string {
    return `${this.prefix}${name}`;
  }

  addNamespace(name: string): string {
    const ns = this.ns(name);
    run(['ip', 'netns', 'del', ns], { allowFail: true });
    run(['ip', 'netns', 'add', ns]);
    this.namespaces.push(ns);
    run(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /**
   * Joins two namespaces with a veth pair and gives each end an address (CIDR notation).
   * Interface names are `${prefix}${ifA}` etc. and must fit 15 characters.
   */
  link(
    nsA: string,
    ifA: string,
    addrA: string | null,
    nsB: string,
    ifB: string,
    addrB: string | null,
    mtu = 1500,
  ): void {
    const a = `${this.prefix}${ifA}`;
    const b = `${this.prefix}${ifB}`;
    if (a.length > 15 || b.length > 15) throw new Error(`interface name too long: ${a} / ${b}`);
    run([
      'ip',
      'link',
      'add',
      a,
      'mtu',
      String(mtu),
      'netns',
      nsA,
      'type',
      'veth',
      'peer',
      'name',
      b,
      'mtu',
      String(mtu),
      'netns',
      nsB,
    ]);
    if (addrA) run(['ip', '-n', nsA, 'addr', 'add', addrA, 'dev', a, ...(addrA.includes(':') ? ['nodad'] : [])]);
    if (addrB) run(['ip', '-n', nsB, 'addr', 'add', addrB, 'dev', b, ...(addrB.includes(':') ? ['nodad'] : [])]);
    run(['ip', '-n', nsA, 'link', 'set', a, 'up']);
    run(['ip', '-n', nsB, 'link', 'set', b, 'up']);
  }

  /** Runs a command inside a namespace (synchronously, bounded). */
  exec(ns: string, cmd: string[], opts: { timeoutMs?: number; allowFail?: boolean; input?: string } = {}): string {
    return run(['ip', 'netns', 'exec', ns, ...cmd], opts);
  }

  /**
   * Starts a long-running process inside a namespace, with a hard lifetime (timeout -k).
   * Its output (stdout+stderr) is kept (last 64 KiB) for diagnostics.
   */
  spawnIn(
    ns: string | null,
    name: string,
    cmd: string[],
    opts: { lifetimeS?: number; env?: NodeJS.ProcessEnv } = {},
  ): Spawned {
    const lifetime = String(opts.lifetimeS ?? 300);
    const argv = ns
      ? ['timeout', '-k', '3', lifetime, 'ip', 'netns', 'exec', ns, ...cmd]
      : ['timeout', '-k', '3', lifetime, ...cmd];
    const child = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...daemonEnv(), ...opts.env },
      detached: true, // own process group: cleanup kills the group by its PID
    });
    let out = '';
    const keep = (d: Buffer): void => {
      out += d.toString('utf8');
      if (out.length > 65536) out = out.slice(-65536);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const exited = new Promise<number | string>((resolve) => {
      child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
      child.on('error', () => resolve('spawn-error'));
    });
    if (child.pid === undefined) throw new Error(`could not start ${name}: ${cmd.join(' ')}`);
    const s: Spawned = { child, pid: child.pid, name, output: () => out, exited };
    this.procs.push(s);
    return s;
  }

  /** Stops one spawned process: SIGTERM to its group, SIGKILL after `graceMs`. */
  async stop(s: Spawned, graceMs = 3000): Promise<void> {
    if (s.child.exitCode !== null || s.child.signalCode !== null) return;
    try {
      process.kill(-s.pid, 'SIGTERM');
    } catch {
      /* already gone */
    }
    const done = await Promise.race([s.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      try {
        process.kill(-s.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
      await Promise.race([s.exited, sleep(1000)]);
    }
  }

  /** Kills every process this topology started, then deletes its namespaces (their veths go with them). */
  async cleanup(): Promise<void> {
    for (const p of this.procs.splice(0)) await this.stop(p);
    for (const ns of this.namespaces.splice(0)) {
      // Anything still inside a namespace we created was started by this test.
      const pids = run(['ip', 'netns', 'pids', ns], { allowFail: true }).split(/\s+/).filter(Boolean);
      for (const pid of pids) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      run(['ip', 'netns', 'del', ns], { allowFail: true });
    }
  }
}

/** Pings from a namespace; returns the parsed summary. Bounded by count × interval + slack. */
export function ping(
  topo: Topology,
  ns: string,
  addr: string,
  count = 3,
  intervalS = 0.2,
): { received: number; avgMs: number } {
  const out = topo.exec(ns, ['ping', '-n', '-q', '-c', String(count), '-i', String(intervalS), '-W', '1', addr], {
    timeoutMs: (count * intervalS + 5) * 1000,
    allowFail: true,
  });
  const rx = /(\d+) received/.exec(out);
  const rtt = /= [\d.]+\/([\d.]+)\//.exec(out);
  return { received: rx ? Number(rx[1]) : 0, avgMs: rtt ? Number(rtt[1]) : NaN };
}

/**
 * Runs a bounded iperf3 TCP test from nsClient to a server in nsServer bound to `addr`; returns
 * Gbit/s received. The client dials `dialAddr` (another address that reaches the server, e.g. a
 * remapped one), `addr` by default.
 */
export async function iperfTcp(
  topo: Topology,
  nsServer: string,
  nsClient: string,
  addr: string,
  seconds = 2,
  extra: string[] = [],
  dialAddr = addr,
): Promise<number> {
  const port = String(5201 + Math.floor(Math.random() * 500));
  const server = topo.spawnIn(nsServer, 'iperf3-server', ['iperf3', '-s', '-1', '-B', addr, '-p', port], {
    lifetimeS: seconds + 30,
  });
  await waitFor(
    'iperf3 server',
    () => topo.exec(nsServer, ['ss', '-Hltn', `sport = :${port}`], { allowFail: true }).trim().length > 0,
    5000,
  );
  const out = topo.exec(
    nsClient,
    ['iperf3', '-c', dialAddr, '-p', port, '-t', String(seconds), '-J', '--connect-timeout', '3000', ...extra],
    {
      timeoutMs: (seconds + 20) * 1000,
      allowFail: true,
    },
  );
  await topo.stop(server);
  const j = JSON.parse(out) as { end?: { sum_received?: { bits_per_second?: number } }; error?: string };
  if (j.error) throw new Error(`iperf3: ${j.error}`);
  return (j.end?.sum_received?.bits_per_second ?? 0) / 1e9;
}
