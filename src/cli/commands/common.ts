/**
 * What every `weft` subcommand shares: the exit-code contract, the argument parser, the I/O
 * seam (so tests run commands in-process with captured output), and the mapping from typed
 * errors to exit codes.
 *
 * Exit codes (documented in `weft --help`; scripts may rely on them):
 *   0 ok · 1 runtime failure · 2 usage error · 3 configuration error · 4 needs root / a capability.
 */
import { ConfigError } from '../../control/config-error.js';
import { CryptoBackendError } from '../../crypto/errors.js';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_CONFIG = 3;
export const EXIT_PERMISSION = 4;

export const EXIT_CODES_HELP = `Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 configuration error,
4 needs root or a capability (CAP_NET_ADMIN for TUN devices).`;

/** Bad command line: the message says what is wrong; the command prints its usage hint. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The process seam. `processIo()` is the real one; tests pass their own. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** All of standard input as UTF-8 (pubkey). */
  readStdin(): Promise<string>;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Whether stdout is a regular file other users may read (genkey's umask warning). */
  stdoutWorldReadable(): boolean;
}

export function processIo(): CliIo {
  return {
    out: (t) => {
      process.stdout.write(t);
    },
    err: (t) => {
      process.stderr.write(t);
    },
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const c of process.stdin) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    env: process.env,
    stdoutWorldReadable: () => stdoutWorldReadable(),
  };
}

function stdoutWorldReadable(): boolean {
  try {
    // fstat of fd 1 without importing fs at module top (no side effects on import).
    const fs = process.getBuiltinModule?.('node:fs') as typeof import('node:fs') | undefined;
    if (fs === undefined) return false;
    const st = fs.fstatSync(1);
    return st.isFile() && (st.mode & 0o007) !== 0;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Argument parsing

export interface OptionSpec {
  /** Long name without dashes ("config"). */
  readonly name: string;
  /** One-letter alias without the dash ("c"). */
  readonly short?: string;
  /** true: `--name VALUE` / `--name=VALUE`; false: a flag. */
  readonly value: boolean;
  /** May be given several times (values collected in order). */
  readonly repeatable?: boolean;
}

export interface ParsedArgs {
  /** Flags map to true; valued options to their (last) value. */
  readonly options: ReadonlyMap<string, string | true>;
  /** All values of repeatable options. */
  readonly lists: ReadonlyMap<string, readonly string[]>;
  readonly positionals: readonly string[];
  readonly help: boolean;
}

/**
 * Parses `argv` against `spec`. `-h`/`--help` are always accepted. `--` ends the options.
 * Throws UsageError for unknown options, missing values and values given to flags.
 */
export function parseArgs(argv: readonly string[], spec: readonly OptionSpec[]): ParsedArgs {
  const byLong = new Map(spec.map((s) => [s.name, s] as const));
  const byShort = new Map(spec.filter((s) => s.short !== undefined).map((s) => [s.short!, s] as const));
  const options = new Map<string, string | true>();
  const lists = new Map<string, string[]>();
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a === '-h' || a === '--help') {
      help = true;
      continue;
    }
    let s: OptionSpec | undefined;
    let inline: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      if (eq >= 0) inline = a.slice(eq + 1);
      s = byLong.get(name);
      if (s === undefined) throw new UsageError(`unknown option --${name}`);
    } else if (a.startsWith('-') && a.length > 1) {
      s = byShort.get(a.slice(1, 2));
      if (s === undefined) throw new UsageError(`unknown option ${a.slice(0, 2)}`);
      if (a.length > 2) inline = a.slice(2);
    } else {
      positionals.push(a);
      continue;
    }
    let v: string | true = true;
    if (s.value) {
      if (inline !== undefined) v = inline;
      else if (i + 1 < argv.length) v = argv[++i]!;
      else throw new UsageError(`option --${s.name} needs a value`);
    } else if (inline !== undefined) {
      throw new UsageError(`option --${s.name} takes no value`);
    }
    if (!s.repeatable && options.has(s.name)) throw new UsageError(`option --${s.name} given twice`);
    options.set(s.name, v);
    if (typeof v === 'string') {
      const l = lists.get(s.name) ?? [];
      l.push(v);
      lists.set(s.name, l);
    }
  }
  return { options, lists, positionals, help };
}

/** The value of a valued option, or undefined. */
export function optString(args: ParsedArgs, name: string): string | undefined {
  const v = args.options.get(name);
  return typeof v === 'string' ? v : undefined;
}

export function optFlag(args: ParsedArgs, name: string): boolean {
  return args.options.get(name) === true;
}

/** An option parsed as an integer in [min, max]; UsageError otherwise. */
export function optInt(args: ParsedArgs, name: string, min: number, max: number): number | undefined {
  const v = optString(args, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !(n >= min && n <= max))
    throw new UsageError(`--${name} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Errors → exit codes
//
// Errors from modules that are expensive to load (koffi, prom-client, pino, client-node) are
// recognised by their `name`, so `weft genkey` does not load the Kubernetes client.

const CONFIG_ERROR_NAMES = new Set([
  'ConfigError',
  'LogLevelError',
  'CryptoBackendError',
  'WireGuardConfigError',
  'GeneveConfigError',
  'NatConfigError',
]);
const PERMISSION_ERROR_NAMES = new Set(['TunPermissionError']);

function errnoCode(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

/** True for errors that mean "run as root / grant CAP_NET_ADMIN". */
export function isPermissionError(e: unknown): boolean {
  if (e instanceof Error && PERMISSION_ERROR_NAMES.has(e.name)) return true;
  const code = errnoCode(e);
  if (code === 'EPERM' || code === 'EACCES') return true;
  // UdpError carries a numeric errno (EPERM 1, EACCES 13: a port below 1024 without root).
  const errno = (e as { errno?: unknown } | null)?.errno;
  if (e instanceof Error && e.name === 'UdpError' && (errno === 1 || errno === 13)) return true;
  // `ip` refused a route or address change.
  if (e instanceof Error && e.name === 'RouteCommandError' && /Operation not permitted/i.test(e.message)) return true;
  const msg = e instanceof Error ? e.message : '';
  return /\b(EPERM|EACCES)\b/.test(msg);
}

/** The exit code for an error that ended a command. */
export function exitCodeFor(e: unknown): number {
  if (e instanceof UsageError || (e instanceof Error && e.name === 'InstanceNameError')) return EXIT_USAGE;
  if (e instanceof ConfigError || e instanceof CryptoBackendError) return EXIT_CONFIG;
  if (e instanceof Error && CONFIG_ERROR_NAMES.has(e.name)) return EXIT_CONFIG;
  if (isPermissionError(e)) return EXIT_PERMISSION;
  return EXIT_FAILURE;
}

/** One line (or the ConfigError's list) for stderr, prefixed with the command. */
export function describeError(command: string, e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const hint =
    isPermissionError(e) && !(e instanceof UsageError)
      ? '\n(run as root, or grant CAP_NET_ADMIN: it is needed to create TUN devices and set routes)'
      : '';
  if (e instanceof ConfigError) return `weft ${command}: invalid configuration:\n${msg}\n`;
  return `weft ${command}: ${msg}${hint}\n`;
}

/** Reports `e` on stderr and returns its exit code. */
export function fail(io: CliIo, command: string, e: unknown, usageHint?: string): number {
  io.err(describeError(command, e));
  if (e instanceof UsageError && usageHint !== undefined) io.err(usageHint);
  return exitCodeFor(e);
}

/** --host-lane tun|sockets|auto (UsageError otherwise); `def` when absent. */
export function parseHostLane(text: string | undefined, def: 'tun' | 'sockets' | 'auto'): 'tun' | 'sockets' | 'auto' {
  if (text === undefined) return def;
  if (text === 'tun' || text === 'sockets' || text === 'auto') return text;
  throw new UsageError(`--host-lane ${JSON.stringify(text)}: use tun, sockets or auto`);
}
