/**
 * The data-plane processes of the namespace demo: each process's YAML and key files written
 * into a private directory, every gateway and node agent started as a child process inside its
 * namespace and waited for until it serves, stopped in reverse order, and the first reply across
 * (which carries the WireGuard handshake). Apart from run.ts because the e2e tests and the soak
 * bench drive these steps themselves, without the demo's checks and table.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WaitAbort, inNs, runCommand, sleep, startDaemon, waitFor, type Daemon } from './host.js';
import { keyFileName, renderConfigs, type DemoConfigFile, type DemoKeys, type DemoPlan } from './plan.js';

/** Set-up failures of the demo itself (missing tools, a process that died); the message says what to do. */
export class DemoError extends Error {
  override readonly name = 'DemoError';
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

/** Where a demo with namespace prefix `prefix` keeps its files by default. */
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
