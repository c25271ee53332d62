/**
 * `weft` — the command-line entry point (bin/weft calls main(argv) and exits with its result).
 *
 * Every subcommand lives in ./commands/ and is imported only when it runs, so `weft genkey` does
 * not load the Kubernetes client or the data plane. Exit codes are the contract in
 * ./commands/common.ts (0 ok, 1 runtime, 2 usage, 3 configuration, 4 needs root/capability).
 */
import { EXIT_CODES_HELP, EXIT_OK, EXIT_USAGE, processIo, type CliIo } from './commands/common.js';
import { WEFT_VERSION } from '../daemon/version.js';

export const MAIN_HELP = `Usage: weft COMMAND [OPTIONS]

Weft: a userspace network fabric for multi-cluster Kubernetes (Liqo's data plane: WireGuard
between clusters, Geneve between nodes and the gateway, prefix NAT and routing in one process).

Commands:
  up -c FILE      run a gateway or a node agent from a YAML configuration
  k8s             run from Liqo's Kubernetes resources (in a cluster)
  show [NAME]     peers, handshakes, transfer, Geneve tunnels, NAT and drops of a running weft
  genkey          print a new private key (as wg genkey)
  pubkey          print the public key of the private key on stdin (as wg pubkey)
  genpsk          print a new preshared key (as wg genpsk)
  demo            two clusters in network namespaces on this machine
  bench           in-process benchmarks
  version         print the version

Run "weft COMMAND --help" for the options of a command.
${EXIT_CODES_HELP}
`;

type Runner = (argv: readonly string[], io: CliIo) => Promise<number> | number;

const COMMANDS: Readonly<Record<string, () => Promise<Runner>>> = {
  up: async () => (await import('./commands/up.js')).runUp,
  k8s: async () => (await import('./commands/k8s.js')).runK8s,
  show: async () => (await import('./commands/show.js')).runShow,
  genkey: async () => {
    const m = await import('./commands/keys.js');
    return (a, io) => m.runKeyCommand('genkey', a, io);
  },
  pubkey: async () => {
    const m = await import('./commands/keys.js');
    return (a, io) => m.runKeyCommand('pubkey', a, io);
  },
  genpsk: async () => {
    const m = await import('./commands/keys.js');
    return (a, io) => m.runKeyCommand('genpsk', a, io);
  },
  demo: async () => (await import('./commands/demo.js')).runDemoCommand,
  bench: async () => (await import('./commands/bench.js')).runBench,
  version: async () => (await import('./commands/version.js')).runVersion,
};

/** Runs `weft` with `argv` (without the program name); resolves with the exit code. */
export async function main(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined) {
    io.err(MAIN_HELP);
    return EXIT_USAGE;
  }
  if (cmd === '-h' || cmd === '--help' || cmd === 'help') {
    if (rest.length > 0 && rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0])) {
      return main([rest[0], '--help'], io);
    }
    io.out(MAIN_HELP);
    return EXIT_OK;
  }
  if (cmd === '-V' || cmd === '--version') {
    io.out(`weft ${WEFT_VERSION}\n`);
    return EXIT_OK;
  }
  if (!Object.hasOwn(COMMANDS, cmd)) {
    io.err(`weft: unknown command ${JSON.stringify(cmd)}\n\n${MAIN_HELP}`);
    return EXIT_USAGE;
  }
  const run = await COMMANDS[cmd]!();
  return run(rest, io);
}
