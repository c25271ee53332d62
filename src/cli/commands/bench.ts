/**
 * `weft bench [NAME...]`: runs the in-process benchmarks (dist/bench/run.js) in a child Node.js
 * with --expose-gc (the benchmarks count collections), forwarding its output and exit code.
 * The tunnel benchmark against wireguard-go needs namespaces and root: `npm run bench:tunnel`.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, fail, parseArgs, type CliIo } from './common.js';

export const BENCH_HELP = `Usage: weft bench [NAME ...]

Runs the in-process benchmarks (all, or the ones named: crypto, wireguard, route, nat, geneve,
io …; an unknown name lists them) and prints one table each. Every table carries its own anchor
measured in the same run, so read the ratios, not the absolute numbers.
`;

/** dist/bench/run.js, relative to this file (dist/src/cli/commands/bench.js). */
export function benchEntry(): string {
  return fileURLToPath(new URL('../../../bench/run.js', import.meta.url));
}

export async function runBench(argv: readonly string[], io: CliIo): Promise<number> {
  let names: readonly string[];
  try {
    const args = parseArgs(argv, []);
    if (args.help) {
      io.out(BENCH_HELP);
      return EXIT_OK;
    }
    names = args.positionals;
  } catch (e) {
    return fail(io, 'bench', e, BENCH_HELP);
  }
  const entry = benchEntry();
  if (!existsSync(entry)) {
    io.err(`weft bench: ${entry} not found; build first (npm run build)\n`);
    return EXIT_FAILURE;
  }
  return new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', entry, ...names], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => io.out(d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => io.err(d.toString('utf8')));
    child.once('error', (e) => {
      io.err(`weft bench: ${e.message}\n`);
      resolve(EXIT_FAILURE);
    });
    // run.js exits 2 for unknown benchmark names: keep the usage meaning.
    child.once('close', (code) => resolve(code === 2 ? EXIT_USAGE : (code ?? EXIT_FAILURE)));
  });
}
