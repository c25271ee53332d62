/**
 * `weft show [NAME] [--json] [--run-dir DIR]`: the state of running weft instances, read from
 * their control sockets (control-socket.ts). Without NAME every instance in the run directory
 * is shown; stale sockets (instance gone) are reported and skipped.
 *
 * Exit: 0 when every requested instance answered; 1 when one named is not running or none is
 * (or, with --active, when one is a standby); 2 on usage errors. `--json` prints one JSON document: the status object for `show NAME`,
 * an array of them otherwise.
 */
import { EXIT_FAILURE, EXIT_OK, fail, optFlag, optString, parseArgs, UsageError, type CliIo } from './common.js';
import { defaultRunDir, listInstances, requestStatus, socketPathFor } from '../../daemon/control-socket.js';
import type { WeftStatus } from '../../daemon/status.js';
import { formatStatus } from './status-text.js';

export const SHOW_HELP = `Usage: weft show [NAME] [--json] [--active] [--run-dir DIR]

Shows what a running "weft up" or "weft k8s" is doing: WireGuard peers (endpoint, allowed IPs,
latest handshake, transfer, connection check), Geneve tunnels, NAT entries, drops by reason.
  NAME           the instance (its --name; default: every instance in the run directory)
  --json         machine-readable output
  --active       exit 1 unless every instance shown forwards (not a standby replica):
                 a readiness probe for Kubernetes HA
  --run-dir DIR  where the control sockets are (default /run/weft as root; env WEFT_RUN_DIR)
`;

export async function runShow(argv: readonly string[], io: CliIo): Promise<number> {
  let json: boolean;
  let active: boolean;
  let runDir: string;
  let names: string[];
  let explicit: boolean;
  try {
    const args = parseArgs(argv, [
      { name: 'json', value: false },
      { name: 'active', value: false },
      { name: 'run-dir', value: true },
    ]);
    if (args.help) {
      io.out(SHOW_HELP);
      return EXIT_OK;
    }
    if (args.positionals.length > 1) throw new UsageError(`expected at most one NAME, got ${args.positionals.length}`);
    json = optFlag(args, 'json');
    active = optFlag(args, 'active');
    runDir = optString(args, 'run-dir') ?? defaultRunDir(io.env);
    explicit = args.positionals.length === 1;
    names = explicit ? [args.positionals[0]!] : listInstances(runDir);
    for (const n of names) socketPathFor(runDir, n); // validates NAME
  } catch (e) {
    return fail(io, 'show', e, SHOW_HELP);
  }
  if (names.length === 0) {
    io.err(`weft show: no running weft in ${runDir} (start one with "weft up -c FILE", or pass --run-dir)\n`);
    return EXIT_FAILURE;
  }
  const found: WeftStatus[] = [];
  let failed = false;
  for (const n of names) {
    try {
      found.push((await requestStatus(socketPathFor(runDir, n))) as WeftStatus);
    } catch (e) {
      // An unnamed scan skips stale sockets quietly unless nothing answers at all.
      if (explicit) {
        io.err(`weft show: ${n}: ${e instanceof Error ? e.message : String(e)}\n`);
        failed = true;
      }
    }
  }
  if (found.length === 0 && !failed) {
    io.err(`weft show: no running weft in ${runDir} (only stale sockets: ${names.join(', ')})\n`);
    return EXIT_FAILURE;
  }
  if (json) {
    io.out(`${JSON.stringify(explicit ? (found[0] ?? null) : found, null, 2)}\n`);
  } else {
    io.out(found.map((s) => formatStatus(s, Date.now())).join('\n'));
  }
  if (active && found.some((st) => !st.weft.active)) return EXIT_FAILURE;
  return failed ? EXIT_FAILURE : EXIT_OK;
}
