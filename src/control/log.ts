/**
 * Logging: pino to stderr, quiet by default ('warn'). The level comes from the LOG_LEVEL
 * environment variable when set (so an operator can turn on debug without editing the
 * configuration), else from the configuration's logging.level, else 'warn'.
 * Never log per packet: the data plane counts drops instead (see metrics.ts).
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { LOG_LEVELS, parseLogLevel, type LogLevel } from './log-level.js';

export type { Logger };

/** LOG_LEVEL holds something pino does not know. */
export class LogLevelError extends Error {
  override readonly name = 'LogLevelError';
}

export interface LoggerOptions {
  /** From the configuration (logging.level). */
  level?: LogLevel;
  /** Component name added to every line. */
  name?: string;
  /** Environment to read LOG_LEVEL from (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Output (default: stderr, fd 2, synchronous so that lines before an exit are not lost). */
  destination?: DestinationStream;
}

/** The effective level: LOG_LEVEL, else the configured one, else 'warn'. Throws LogLevelError. */
export function resolveLogLevel(
  configured: LogLevel | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): LogLevel {
  const fromEnv = env['LOG_LEVEL'];
  if (fromEnv !== undefined && fromEnv !== '') {
    const level = parseLogLevel(fromEnv);
    if (level === undefined)
      throw new LogLevelError(`LOG_LEVEL=${JSON.stringify(fromEnv)} is not one of ${LOG_LEVELS.join(', ')}`);
    return level;
  }
  return configured ?? 'warn';
}

/**
 * A pino logger at the level resolveLogLevel() picks. Writes synchronously to stderr (fd 2) unless
 * `opts.destination` is given, so the last lines before an exit are not lost.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = resolveLogLevel(opts.level, opts.env);
  return pino(
    { level, ...(opts.name !== undefined ? { name: opts.name } : {}) },
    opts.destination ?? pino.destination({ fd: 2, sync: true }),
  );
}
