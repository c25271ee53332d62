/**
 * `weft demo`: two clusters on this machine (src/demo/run.ts runDemo). As root in network
 * namespaces with real gateway and node-agent processes; without root, the same clusters in
 * one process over a simulated network. Exit 0 when every check passed, 1 otherwise.
 */
import { EXIT_OK, fail, optFlag, optInt, optString, parseArgs, UsageError, type CliIo } from './common.js';

export const DEMO_HELP = `Usage: weft demo [--keep] [--cleanup] [--simulate] [--prefix P] [--iperf-seconds N]

Builds two clusters (a gateway, two nodes and four pods each; both use pod CIDR 10.0.0.0/16,
so each sees the other through remapped CIDRs) in network namespaces, runs "weft up" for every
gateway and node agent, and prints cross-cluster results: ping, HTTP, throughput, host-network
SNAT, the source address a remote pod sees. Everything is removed afterwards (also on Ctrl-C).
Without root it runs the same clusters in one process over a simulated network.
  --keep             leave everything running for inspection (prints how to look and clean up)
  --cleanup          remove what an earlier (crashed or --keep) run left behind
  --simulate         the in-process simulation even as root
  --prefix P         namespace name prefix (default wd)
  --iperf-seconds N  throughput test duration (default 3)
`;

export async function runDemoCommand(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const args = parseArgs(argv, [
      { name: 'keep', value: false },
      { name: 'cleanup', value: false },
      { name: 'simulate', value: false },
      { name: 'prefix', value: true },
      { name: 'iperf-seconds', value: true },
    ]);
    if (args.help) {
      io.out(DEMO_HELP);
      return EXIT_OK;
    }
    if (args.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
    if (optFlag(args, 'keep') && optFlag(args, 'cleanup'))
      throw new UsageError('--keep and --cleanup exclude each other');
    const prefix = optString(args, 'prefix');
    if (prefix !== undefined && !/^[a-z][a-z0-9]{0,3}$/.test(prefix))
      throw new UsageError(
        '--prefix: 1-4 lowercase letters/digits, starting with a letter (namespace names stay short)',
      );
    const iperfSeconds = optInt(args, 'iperf-seconds', 1, 60);
    const { runDemo } = await import('../../demo/run.js');
    const report = await runDemo({
      keep: optFlag(args, 'keep'),
      cleanup: optFlag(args, 'cleanup'),
      simulate: optFlag(args, 'simulate'),
      out: (t) => io.out(t),
      ...(prefix !== undefined ? { prefix } : {}),
      ...(iperfSeconds !== undefined ? { iperfSeconds } : {}),
    });
    return report.exitCode;
  } catch (e) {
    return fail(io, 'demo', e, DEMO_HELP);
  }
}
