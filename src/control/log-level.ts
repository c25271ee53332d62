/**
 * Log levels (pino's names), without the configuration schemas: the CLI and the logger check a
 * level before anything else is loaded, and a restarted node agent must not wait for zod to do it.
 */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

/** `text` as a level (case-insensitive), or undefined when it names none. */
export function parseLogLevel(text: string): LogLevel | undefined {
  const t = text.toLowerCase();
  return (LOG_LEVELS as readonly string[]).includes(t) ? (t as LogLevel) : undefined;
}
