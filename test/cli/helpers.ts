/**
 * Shared by the CLI, library and packaging tests: an in-memory CliIo, building dist/ when it
 * is missing or older than the sources these tests exercise, and running bin/weft.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliIo } from '../../src/cli/commands/common.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const WEFT_BIN = join(ROOT, 'bin/weft');

export interface CapturedIo extends CliIo {
  readonly stdout: string;
  readonly stderr: string;
}

export function captureIo(
  opts: { stdin?: string; env?: Record<string, string | undefined>; worldReadable?: boolean } = {},
): CapturedIo {
  let out = '';
  let err = '';
  return {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    readStdin: async () => opts.stdin ?? '',
    env: opts.env ?? {},
    stdoutWorldReadable: () => opts.worldReadable ?? false,
    get stdout() {
      return out;
    },
    get stderr() {
      return err;
    },
  };
}

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (e.name.endsWith('.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

/**
 * Builds dist/ (tsc -p tsconfig.build.json) unless every output in `outputs` (paths relative
 * to dist/) exists and is newer than every .ts file under src/. Type errors elsewhere in the
 * tree do not stop tsc from emitting, so the outputs are checked again afterwards.
 *
 * Test files run in parallel: the build holds an flock(1) on a lock file of this checkout, and
 * looks at freshness again once it holds it, so one file builds while the others wait and then
 * find dist/ fresh (nobody reads dist/ while tsc rewrites it).
 */
export function ensureBuilt(outputs: readonly string[]): void {
  const src = newest(join(ROOT, 'src'));
  const fresh = () =>
    outputs.every((o) => existsSync(join(ROOT, 'dist', o)) && statSync(join(ROOT, 'dist', o)).mtimeMs >= src);
  if (fresh()) return;
  const lock = join(tmpdir(), `weft-build-${createHash('sha256').update(ROOT).digest('hex').slice(0, 16)}.lock`);
  const script = `
    const { existsSync, statSync } = require('node:fs');
    const { spawnSync } = require('node:child_process');
    const [root, src, ...outputs] = process.argv.slice(1);
    const fresh = outputs.every((o) => existsSync(root + '/dist/' + o) && statSync(root + '/dist/' + o).mtimeMs >= Number(src));
    if (!fresh) spawnSync(process.execPath, [root + '/node_modules/typescript/bin/tsc', '-p', root + '/tsconfig.build.json'], { cwd: root, stdio: 'ignore' });`;
  const r = spawnSync(
    'flock',
    [lock, process.execPath, '-e', script, ROOT.replace(/\/$/, ''), String(src), ...outputs],
    {
      cwd: ROOT,
      stdio: 'ignore',
      timeout: 300_000,
    },
  );
  if (r.error) throw new Error(`cannot run flock (util-linux) to build dist/: ${r.error.message}`);
  for (const o of outputs) {
    if (!existsSync(join(ROOT, 'dist', o))) throw new Error(`build did not produce dist/${o}`);
  }
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `node bin/weft ARGS` to completion (bounded by `timeoutMs`). */
export function runWeft(
  args: readonly string[],
  opts: { stdin?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WEFT_BIN, ...args], {
      cwd: opts.cwd ?? ROOT,
      env: opts.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('utf8');
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(opts.stdin ?? '');
  });
}
