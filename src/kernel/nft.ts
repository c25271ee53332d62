/**
 * nftables in the node's kernel through the `nft` tool (execFile, script on stdin, no shell),
 * as iproute.ts does with `ip`: these calls happen when a FirewallConfiguration changes, never
 * per packet. A script is one nft transaction: it applies whole or not at all.
 * Every failure is an NftCommandError carrying what nft printed (its `file:line:col: Error:`
 * lines locate the offending line of the script).
 */
import { execFile } from 'node:child_process';

export class NftCommandError extends Error {
  override readonly name = 'NftCommandError';
  constructor(
    readonly stderr: string,
    readonly netns: string | undefined,
  ) {
    super(`nft -f failed${netns === undefined ? '' : ` in netns ${netns}`}: ${stderr.trim() || 'no output'}`);
  }

  /** 0-based script lines nft names in its errors. */
  lines(): number[] {
    const out: number[] = [];
    for (const m of this.stderr.matchAll(/^[^:\n]*:(\d+):\d+(?:-\d+)?: Error/gm)) out.push(Number(m[1]) - 1);
    return out;
  }
}

/** Runs one nft script (`nft -f -`), in `netns` if given. Rejects with NftCommandError. */
export type NftRunner = (script: string, netns?: string) => Promise<void>;

export const runNft: NftRunner = (script, netns) => {
  const argv = netns === undefined ? ['nft', '-f', '-'] : ['ip', 'netns', 'exec', netns, 'nft', '-f', '-'];
  return new Promise((resolve, reject) => {
    const child = execFile(argv[0]!, argv.slice(1), { timeout: 10_000, encoding: 'utf8' }, (err, _out, stderr) => {
      if (err === null) {
        resolve();
        return;
      }
      const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
      reject(new NftCommandError(missing ? `${argv[0]}: not found (ENOENT)` : stderr || err.message, netns));
    });
    child.stdin?.end(script);
  });
};
