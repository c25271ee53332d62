/**
 * The kernel's connection table through the `conntrack` tool (conntrack-tools; execFile, no
 * shell), for the rare flushes a new notrack rule asks for — never per packet.
 */
import { execFile } from 'node:child_process';

export class ConntrackCommandError extends Error {
  override readonly name = 'ConntrackCommandError';
  constructor(
    readonly args: readonly string[],
    readonly stderr: string,
  ) {
    super(`conntrack ${args.join(' ')} failed: ${stderr.trim() || 'no output'}`);
  }
}

/** Runs `conntrack ARGS` (in `netns` if given); resolves with stdout. */
export type ConntrackRunner = (args: readonly string[], netns?: string) => Promise<string>;

export const runConntrack: ConntrackRunner = (args, netns) => {
  const argv = netns === undefined ? ['conntrack', ...args] : ['ip', 'netns', 'exec', netns, 'conntrack', ...args];
  return new Promise((resolve, reject) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { timeout: 10_000, encoding: 'utf8', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        // -D of an entry that went meanwhile: "0 flow entries have been deleted" with status 1.
        if (err === null || /0 flow entries/.test(stderr)) {
          resolve(stdout);
          return;
        }
        const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
        reject(new ConntrackCommandError(args, missing ? 'conntrack: not found (ENOENT)' : stderr || err.message));
      },
    );
  });
};
