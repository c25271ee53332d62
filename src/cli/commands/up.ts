/**
 * `weft up -c FILE`: runs a gateway or a node agent (by the file's `role`) until SIGINT/SIGTERM.
 *
 * - The file is validated first: a bad file exits 3 with `file:line: field.path: what is
 *   expected` on stderr, before anything is opened.
 * - Reload: SIGHUP re-reads the file at once; a change of the file (or of its directory entry:
 *   editors and ConfigMap mounts swap files) is picked up by the ConfigReloader. Only the diff is
 *   applied (peers keep sessions, counters and roamed endpoints). A bad file or a change that
 *   needs a restart is logged and the old configuration stays in force.
 * - Logs: pino JSON on stderr, level from --log-level, else LOG_LEVEL, else logging.level
 *   (default warn: quiet).
 * - `weft show` reads RUNDIR/NAME.sock; metrics are served when metrics.listen is set.
 * - Exit: 0 after a clean stop; 1 runtime failure; 2 usage; 3 configuration; 4 needs root /
 *   CAP_NET_ADMIN (TUN devices, routes).
 */
import type { HostLaneChoice } from '../../gateway/gateway-io.js';
import { basename } from 'node:path';
import type { Logger } from 'pino';
import type { WeftConfig } from '../../control/config.js';
import { createLogger, resolveLogLevel } from '../../control/log.js';
import { ConfigReloader } from '../../control/reloader.js';
import type { CryptoBackend } from '../../crypto/backend.js';
import { getCryptoBackend, parseCryptoBackendName } from '../../crypto/select.js';
import { LOG_LEVELS, parseLogLevel, type LogLevel } from '../../control/log-level.js';
import {
  EXIT_OK,
  fail,
  optFlag,
  optInt,
  optString,
  parseArgs,
  parseHostLane,
  UsageError,
  type CliIo,
} from './common.js';
import { checkInstanceName, defaultRunDir } from '../../daemon/control-socket.js';
import { errText } from '../../daemon/err-text.js';
import { Runtime } from '../../daemon/runtime.js';
import { daemonTieringInForce } from '../v8-tiering.js';
import { busyPollInForce } from '../../io/busy-poll.js';

export const UP_HELP = `Usage: weft up -c FILE [--name NAME] [--run-dir DIR] [--log-level LEVEL] [--no-watch] [--no-conncheck]

Runs a Weft gateway (role: gateway) or node agent (role: node) from a YAML configuration
(see examples/) until SIGINT or SIGTERM. SIGHUP or a change of FILE reloads it: only what
changed is applied.
  -c, --config FILE    the configuration (required)
  --name NAME          instance name for "weft show" (default: FILE's base name)
  --run-dir DIR        control socket directory (default /run/weft as root; env WEFT_RUN_DIR)
  --log-level LEVEL    fatal|error|warn|info|debug|trace|silent (default: LOG_LEVEL, else
                       logging.level, else warn); logs are JSON lines on stderr
  --no-watch           reload only on SIGHUP, not on file changes
  --no-conncheck       gateway: do not run Liqo's in-tunnel connection check (by default
                       every 2 s a UDP 12345 PING between the tunnel addresses 169.254.18.1
                       (server) and .2 (client), or wireguard/peers[].tunnelAddress; Connected,
                       Error after 5 missed replies; latency in show and liqo_peer_*); without
                       it, "connected" follows the handshake. --conncheck is accepted (default)
  --conncheck-interval MS
                       the check's PING interval (default 2000; Error after 5 missed replies)
  --host-lane tun|sockets|auto
                       gateway: the host lane (packets for the gateway itself, routes out of its
                       own interface) on the local TUN (tun, default), in process through UDP
                       and ICMP sockets with no TUN and no capability (sockets), or the TUN and
                       sockets when /dev/net/tun cannot be opened (auto)
Environment: WEFT_CRYPTO=auto|openssl|node|pure overrides wireguard.cryptoBackend;
WEFT_V8_INTERRUPT_BUDGET=N runs with weft-wg's V8 tiering at tier-up budget N (weft-wg: 1024;
unset or "default": V8's own tiering), logged at info as v8Tiering; WEFT_BUSY_POLL_US=N
(0..1000) keeps polling the TUN and sockets N µs after packets before sleeping (default 0),
logged as busyPollUs.
Creating TUN devices and routes needs root or CAP_NET_ADMIN (exit 4 otherwise; a gateway with
--host-lane sockets needs neither).
`;

/** The default instance name: the file's base name without .yaml/.yml/.json, made name-safe. */
export function defaultInstanceName(file: string): string {
  const base = basename(file)
    .replace(/\.(ya?ml|json)$/i, '')
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '');
  return base === '' ? 'weft' : base.slice(0, 63);
}

function parseLevel(text: string): LogLevel {
  const level = parseLogLevel(text);
  if (level === undefined)
    throw new UsageError(`--log-level ${JSON.stringify(text)}: use one of ${LOG_LEVELS.join(', ')}`);
  return level;
}

/** WEFT_CRYPTO when set, else undefined (the configuration's choice applies). */
function backendOverride(env: CliIo['env']): CryptoBackend | undefined {
  const v = env['WEFT_CRYPTO'];
  if (v === undefined || v.trim() === '') return undefined;
  return getCryptoBackend(parseCryptoBackendName(v));
}

export async function runUp(argv: readonly string[], io: CliIo): Promise<number> {
  let file: string;
  let name: string;
  let runDir: string;
  let levelOpt: LogLevel | undefined;
  let watch: boolean;
  let conncheck: boolean;
  let conncheckIntervalMs: number | undefined;
  let hostLane: HostLaneChoice = 'tun';
  try {
    const args = parseArgs(argv, [
      { name: 'config', short: 'c', value: true },
      { name: 'name', value: true },
      { name: 'run-dir', value: true },
      { name: 'log-level', value: true },
      { name: 'no-watch', value: false },
      { name: 'conncheck', value: false },
      { name: 'no-conncheck', value: false },
      { name: 'conncheck-interval', value: true },
      { name: 'host-lane', value: true },
    ]);
    if (args.help) {
      io.out(UP_HELP);
      return EXIT_OK;
    }
    if (args.positionals.length > 0)
      throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])} (the file goes after -c)`);
    const c = optString(args, 'config');
    if (c === undefined) throw new UsageError('missing -c FILE (the YAML configuration)');
    file = c;
    name = checkInstanceName(optString(args, 'name') ?? defaultInstanceName(file));
    runDir = optString(args, 'run-dir') ?? defaultRunDir(io.env);
    const l = optString(args, 'log-level');
    levelOpt = l === undefined ? undefined : parseLevel(l);
    watch = !optFlag(args, 'no-watch');
    if (optFlag(args, 'conncheck') && optFlag(args, 'no-conncheck'))
      throw new UsageError('--conncheck and --no-conncheck contradict each other');
    conncheck = !optFlag(args, 'no-conncheck');
    conncheckIntervalMs = optInt(args, 'conncheck-interval', 10, 3_600_000);
    hostLane = parseHostLane(optString(args, 'host-lane'), 'tun');
  } catch (e) {
    return fail(io, 'up', e, UP_HELP);
  }

  let logger: Logger | undefined;
  let runtime: Runtime | undefined;
  const reloader = new ConfigReloader({
    path: file,
    applier: { apply: async (ops, next) => runtime?.apply(ops, next) },
    onError: (e) => logger?.error({ err: errText(e) }, 'reload rejected; the previous configuration stays in force'),
  });
  const signals: [NodeJS.Signals, () => void][] = [];
  const off = (): void => {
    for (const [s, h] of signals) process.removeListener(s, h);
  };
  try {
    const config: WeftConfig = await reloader.start(watch);
    const level = levelOpt ?? resolveLogLevel(config.logging.level, io.env);
    logger = createLogger({ level, name: 'weft', env: {} });
    const backend = backendOverride(io.env);
    runtime = await Runtime.create({
      name,
      runDir,
      source: file,
      logger,
      conncheck,
      ...(conncheckIntervalMs !== undefined ? { conncheckIntervalMs } : {}),
      ...(backend !== undefined ? { backend } : {}),
      launch: { hostLane },
    });
    await runtime.startDataPlane(config);
    logger.info(
      {
        file,
        instance: name,
        socket: runtime.socketPath,
        role: config.role,
        v8Tiering: daemonTieringInForce(),
        busyPollUs: busyPollInForce(),
      },
      'weft up: running',
    );

    const rt = runtime;
    const log = logger;
    await new Promise<void>((resolve) => {
      const stop = (sig: string) => (): void => {
        log.info(`${sig}: stopping`);
        resolve();
      };
      const hup = (): void => {
        void reloader.reload().then((r) => {
          if (r.status === 'applied') log.info({ ops: r.ops.length }, 'SIGHUP: configuration reloaded');
          else if (r.status === 'unchanged') log.info('SIGHUP: configuration unchanged');
        });
      };
      signals.push(['SIGINT', stop('SIGINT')], ['SIGTERM', stop('SIGTERM')], ['SIGHUP', hup]);
      for (const [s, h] of signals) process.on(s, h);
    });
    off();
    reloader.stop();
    await reloader.whenIdle();
    await rt.stop();
    return EXIT_OK;
  } catch (e) {
    off();
    reloader.stop();
    await runtime?.stop().catch(() => {});
    return fail(io, 'up', e, UP_HELP);
  }
}
