/**
 * `weft-wg [-f|--foreground] IFNAME` — a drop-in for `wireguard-go`: creates the TUN interface,
 * serves /var/run/wireguard/IFNAME.sock for `wg`, and forwards until SIGINT/SIGTERM.
 *
 * Like wireguard-go it detaches into the background unless -f is given or the environment has
 * WG_PROCESS_FOREGROUND=1; the parent exits 0 only after the child reports that the interface
 * and the UAPI socket are up (so `weft-wg wg0 && wg set wg0 …` works), else 1 with the error.
 * Logs go to stderr: LOG_LEVEL=error (default; wireguard-go's names: silent, error, verbose)
 * or debug/verbose for more. WEFT_CRYPTO selects the crypto backend (auto, openssl, node, pure).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { getCryptoBackend, parseCryptoBackendName } from '../crypto/select.js';
import { WgDaemon } from '../gateway/wg-daemon.js';
import { DROP_LOG_INTERVAL_MS, DropDelta, formatDrops, wgDaemonDrops } from '../gateway/wg-drops.js';
import { DROP_REASON_NAMES } from '../wireguard/drops.js';
import { applyBusyPoll } from '../io/busy-poll.js';
import { parseWorkerCount } from '../gateway/wg-workers.js';
import { warmUpBudget } from '../pipelines/wireguard-warmup.js';
import { WEFT_VERSION } from '../daemon/version.js';

const USAGE = `Usage: weft-wg [-f/--foreground] INTERFACE-NAME
       weft-wg --version

A userspace WireGuard daemon (Weft), configured with wg(8) through /var/run/wireguard/INTERFACE-NAME.sock.
Environment: LOG_LEVEL=silent|error|verbose|debug, WEFT_CRYPTO=auto|openssl|node|pure,
WG_PROCESS_FOREGROUND=1 (same as -f), WG_TUN_MTU (default 1420), WEFT_NATIVE_AEAD=0 (transport
AEAD through the selected backend instead of the native addon), WEFT_OFFLOAD=0 (no TUN TSO/USO
and no UDP GSO/GRO; the offloads in effect are logged at LOG_LEVEL=info),
WEFT_V8_INTERRUPT_BUDGET (V8 tier-up threshold, default 1024; "default" keeps V8's own tiering),
WEFT_EAGER_HANDSHAKE=0 (wait for data before the first handshake, as wireguard-go does, instead of
initiating towards every configured endpoint when a peer is set), WEFT_WARMUP_MS (upper bound
of the start-up warm-up: the data path on synthetic packets, then the TUN/UDP I/O on a private
loopback tunnel, each until its work target; with workers, every worker does both at once;
default 1000; 0 = off), WEFT_WORKERS (worker threads
carrying the data path, each with its own TUN queue and UDP socket; "auto": the CPUs this
process may use, cgroup quota included; default 1 = everything on the main thread),
WEFT_BUSY_POLL_US (0..1000: keep polling the TUN and sockets that long after packets, yielding
the CPU, before sleeping: lower latency on a lightly used tunnel for CPU; default 0 = off).
At LOG_LEVEL=info the counters of dropped packets that grew are logged once a minute, and the
totals when the daemon stops.
`;

type Level = 'error' | 'info' | 'debug';
const RANK: Record<Level | 'silent', number> = { silent: 0, error: 1, info: 2, debug: 3 };

function logLevel(): Level | 'silent' {
  const v = (process.env.LOG_LEVEL ?? 'error').toLowerCase();
  if (v === 'silent') return 'silent';
  if (v === 'verbose' || v === 'debug') return 'debug';
  if (v === 'info') return 'info';
  return 'error';
}

export async function main(argv: string[]): Promise<number | undefined> {
  let foreground = process.env.WG_PROCESS_FOREGROUND === '1';
  const rest: string[] = [];
  for (const a of argv) {
    if (a === '-f' || a === '--foreground') foreground = true;
    else if (a === '--version' || a === '-v') {
      process.stdout.write(`weft-wg v${WEFT_VERSION}\n`);
      return 0;
    } else if (a === '-h' || a === '--help') {
      process.stdout.write(USAGE);
      return 0;
    } else rest.push(a);
  }
  if (rest.length !== 1) {
    process.stderr.write(USAGE);
    return 2;
  }
  const ifname = rest[0];

  if (!foreground) return detach(argv);

  const level = logLevel();
  const log = (l: Level, msg: string): void => {
    if (RANK[l] <= RANK[level])
      process.stderr.write(`${l.toUpperCase()}: (${ifname}) ${new Date().toISOString()} ${msg}\n`);
  };
  const backend = getCryptoBackend(parseCryptoBackendName(process.env.WEFT_CRYPTO));
  const mtu = process.env.WG_TUN_MTU ? Number(process.env.WG_TUN_MTU) : undefined;
  // WEFT_NATIVE_AEAD=0 keeps transport AEAD on the selected backend (for A/B measurements).
  const nativeAead = process.env.WEFT_NATIVE_AEAD === '0' ? false : undefined;
  const offload = process.env.WEFT_OFFLOAD !== '0';
  const eagerHandshake = process.env.WEFT_EAGER_HANDSHAKE !== '0';
  const warmUpMs = warmUpBudget(process.env.WEFT_WARMUP_MS);
  let workers: number;
  let busyPollUs: number;
  try {
    workers = parseWorkerCount(process.env.WEFT_WORKERS);
    busyPollUs = applyBusyPoll(process.env);
  } catch (e) {
    process.stderr.write(`weft-wg: ${(e as Error).message}\n`);
    return 2;
  }
  const daemon = await WgDaemon.start({
    ifname,
    backend,
    mtu,
    log,
    nativeAead,
    offload,
    eagerHandshake,
    warmUpMs,
    workers,
  });
  if (busyPollUs > 0) log('info', `busy polling ${busyPollUs} µs after each wake-up with packets`);
  log('info', 'device started');
  notifyParentReady();
  const dropDelta = new DropDelta();
  const dropLog = setInterval(() => {
    const grew = dropDelta.since(wgDaemonDrops(daemon));
    if (grew !== null) log('info', `dropped in the last ${DROP_LOG_INTERVAL_MS / 1000} s: ${formatDrops(grew)}`);
  }, DROP_LOG_INTERVAL_MS);
  dropLog.unref();

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (sig: string): void => {
      if (stopping) return;
      stopping = true;
      log('info', `${sig}: shutting down`);
      resolve();
    };
    // `on`, not `once`: supervisors repeat the signal (timeout(1) sends it to the child and then
    // to its whole process group), and a second SIGTERM without a listener would kill Node
    // before the UAPI socket is removed.
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
  clearInterval(dropLog);
  const total = wgDaemonDrops(daemon);
  if (Object.keys(total).length > 0) log('info', `dropped since start: ${formatDrops(total)}`);
  if (daemon.workers !== null) {
    const w = daemon.workers;
    if (w.handshakesSteered)
      log('info', `this thread's sockets received ${w.ownReceived} datagrams (every message but transport)`);
    for (const s of await w.stats()) {
      const drops = Object.fromEntries([...s.drops].map(([k, n]) => [DROP_REASON_NAMES[k] ?? `reason_${k}`, n]));
      log(
        'info',
        `worker ${s.worker}: handed over ${s.handoffs} (refused ${s.refused}); dropped: ${formatDrops(drops) || 'nothing'}`,
      );
    }
  }
  await daemon.stop();
  log('info', 'device closed');
  return 0;
}

/** Re-runs this program in the background with WG_PROCESS_FOREGROUND=1 and waits for "ready". */
async function detach(argv: string[]): Promise<number> {
  const entry = fileURLToPath(new URL('../../../bin/weft-wg', import.meta.url));
  const child = spawn(process.execPath, [entry, ...argv], {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: { ...process.env, WG_PROCESS_FOREGROUND: '1', WEFT_WG_NOTIFY: '1' },
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString('utf8');
  });
  const ok = await new Promise<boolean>((resolve) => {
    child.once('message', (m) => resolve(m === 'ready'));
    child.once('exit', () => resolve(false));
  });
  if (!ok) {
    process.stderr.write(err || 'weft-wg: the background process failed to start\n');
    return 1;
  }
  child.stderr?.destroy();
  child.disconnect();
  child.unref();
  return 0;
}

function notifyParentReady(): void {
  if (process.env.WEFT_WG_NOTIFY === '1' && typeof process.send === 'function') {
    process.send('ready');
    process.disconnect();
    // The parent has gone; stderr was its pipe: from now on log nowhere rather than die on EPIPE.
    process.stderr.on('error', () => {});
  }
}
