/**
 * Which `weft` subcommands run as long-lived packet daemons: bin/weft gives those, and only
 * those, the daemon V8 tiering (./v8-tiering.ts) before it loads the command.
 *
 * Why only the daemons: the tiering pays off in a process that carries light traffic for hours
 * (a gateway's idle pod-to-pod pings and connection checks, a fresh gateway after a failover).
 * The other commands (show, version, genkey, …) end within a second, before V8's own tiering
 * would matter, and would only pay for the earlier compiles and the feedback vectors. `demo`
 * starts its data planes as `weft up` children (which get the tiering); `bench` keeps V8's
 * defaults so its figures stay comparable. `up --help` gets the flags too: harmless.
 */

/** The subcommands that run until SIGINT/SIGTERM forwarding packets. */
export const DAEMON_COMMANDS: readonly string[] = ['up', 'k8s'];

/** Whether `weft` with `argv` (without the program name) runs a daemon. */
export function isDaemonCommand(argv: readonly string[]): boolean {
  return argv.length > 0 && DAEMON_COMMANDS.includes(argv[0]!);
}
