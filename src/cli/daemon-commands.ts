/**
 * Which `weft` subcommands run as long-lived packet daemons: bin/weft applies the daemon V8
 * tiering (./v8-tiering.ts: WEFT_V8_INTERRUPT_BUDGET, unset = V8's own for these, see
 * FABRIC_INTERRUPT_BUDGET) to those, and only those, before it loads the command.
 *
 * Why only the daemons: the tiering is for a process that carries light traffic for hours
 * (a gateway's idle pod-to-pod pings and connection checks). The other commands (show,
 * version, genkey, …) end within a second, before V8's own tiering would matter, and would
 * only pay for the earlier compiles and the feedback vectors. `demo` starts its data planes as
 * `weft up` children (which take the variable); `bench` keeps V8's defaults so its figures
 * stay comparable. `up --help` gets the flags too: harmless.
 */

/** The subcommands that run until SIGINT/SIGTERM forwarding packets. */
export const DAEMON_COMMANDS: readonly string[] = ['up', 'k8s'];

/** Whether `weft` with `argv` (without the program name) runs a daemon. */
export function isDaemonCommand(argv: readonly string[]): boolean {
  return argv.length > 0 && DAEMON_COMMANDS.includes(argv[0]!);
}
