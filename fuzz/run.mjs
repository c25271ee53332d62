#!/usr/bin/env node
// `npm run fuzz`: runs every fuzz target (fuzz/targets/*.ts, built to dist/fuzz/targets/*.js)
// under @jazzer.js/core for a fixed number of executions, one after the other, and writes the
// executions, coverage (libFuzzer's cov/ft) and time of each into FUZZING.md.
//
//   FUZZ_RUNS=1000000      executions per target (default 1,000,000)
//   FUZZ_TARGETS=rules,uapi  only these targets (default: all)
//   FUZZ_MAX_SECONDS=600   also stop a target after this long (libFuzzer -max_total_time; default none)
//   FUZZ_NO_REPORT=1       do not rewrite FUZZING.md
//
// Coverage feedback: jazzer instruments our compiled code only (-i dist/src/, node_modules
// excluded), through its ESM loader hook; the harnesses under dist/fuzz/ are not instrumented,
// so cov/ft count edges of Weft itself. Inputs that add coverage go to fuzz/corpus/<target>/
// (committed; libFuzzer keeps only inputs that add features and shrinks them as it goes);
// a crash or invariant failure is written to fuzz/crashes/<target>/ and stops that target.
// test/fuzz/replay.test.ts replays both directories on every test run.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env.FUZZ_RUNS ?? 1_000_000);
if (!Number.isInteger(RUNS) || RUNS < 1)
  throw new Error(`FUZZ_RUNS must be a positive integer, got ${process.env.FUZZ_RUNS}`);
const ALL = readdirSync(join(ROOT, 'fuzz/targets'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .sort();
const only = process.env.FUZZ_TARGETS ? process.env.FUZZ_TARGETS.split(',').map((s) => s.trim()) : ALL;
const MAX_SECONDS = process.env.FUZZ_MAX_SECONDS === undefined ? 0 : Number(process.env.FUZZ_MAX_SECONDS);
if (!Number.isInteger(MAX_SECONDS) || MAX_SECONDS < 0)
  throw new Error(`FUZZ_MAX_SECONDS must be a whole number of seconds, got ${process.env.FUZZ_MAX_SECONDS}`);
for (const t of only) if (!ALL.includes(t)) throw new Error(`FUZZ_TARGETS: no target ${t} (have ${ALL.join(', ')})`);
/** Inputs longer than this are not generated (packets up to a jumbo-ish MTU; edit programs are short). */
const MAX_LEN = { 'k8s-translate': 256, rules: 256, 'config-yaml': 1024, uapi: 1024 };

function jazzer(target) {
  const corpus = join(ROOT, 'fuzz/corpus', target);
  const crashes = join(ROOT, 'fuzz/crashes', target);
  mkdirSync(corpus, { recursive: true });
  mkdirSync(crashes, { recursive: true });
  const args = [
    join(ROOT, 'node_modules/@jazzer.js/core/dist/cli.js'),
    join(ROOT, 'dist/fuzz/targets', `${target}.js`),
    corpus,
    '--sync',
    '-i',
    'dist/src/',
    '-e',
    'node_modules',
    '--timeout',
    '10000',
    // jazzer's bug detectors (command injection, path traversal, prototype pollution) hook
    // child_process, fs and Object.prototype and halve the speed; no target reaches a process
    // or a file (config-yaml injects its key-file reader), and the invariants are the oracle.
    '--disableBugDetectors',
    '.*',
    '--',
    `-runs=${RUNS}`,
    `-max_len=${MAX_LEN[target] ?? 4096}`,
    `-artifact_prefix=${crashes}/`,
    '-print_final_stats=1',
    ...(MAX_SECONDS > 0 ? [`-max_total_time=${MAX_SECONDS}`] : []),
  ];
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const keep = (chunk) => {
      process.stderr.write(chunk);
      tail = (tail + chunk.toString()).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('close', (code) => {
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const stat = (name) => Number((tail.match(new RegExp(`stat::${name}:\\s+(\\d+)`)) ?? [])[1] ?? NaN);
      const lines = tail.split('\n').filter((l) => /^#\d+/.test(l));
      const last = lines[lines.length - 1] ?? '';
      const cov = Number((last.match(/cov: (\d+)/) ?? [])[1] ?? NaN);
      const ft = Number((last.match(/ft: (\d+)/) ?? [])[1] ?? NaN);
      // libFuzzer's final stats, else its "Done N runs", else the last status line (#N DONE …):
      // output after the status lines (the recommended dictionary) can be cut off at exit.
      const execs =
        stat('number_of_executed_units') ||
        Number((tail.match(/Done (\d+) runs/) ?? [])[1] ?? NaN) ||
        Number((last.match(/^#(\d+)/) ?? [])[1] ?? NaN);
      const crash = (tail.match(/Test unit written to (\S+)/) ?? [])[1] ?? null;
      resolve({ target, code, execs, cov, ft, seconds, corpus: readdirSync(corpus).length, crash });
    });
  });
}

function report(results) {
  const file = join(ROOT, 'FUZZING.md');
  const start = '<!-- fuzz-results:start -->';
  const end = '<!-- fuzz-results:end -->';
  const rows = results.map(
    (r) =>
      `| ${r.target} | ${r.execs.toLocaleString('en-US')} | ${r.cov} | ${r.ft} | ${r.corpus} | ${r.seconds.toFixed(0)} | ${Math.round(r.execs / r.seconds).toLocaleString('en-US')} | ${r.crash ? `crash: ${r.crash.replace(`${ROOT}/`, '')}` : r.code === 0 ? (r.execs < RUNS ? `stopped at the ${MAX_SECONDS} s cap` : 'ok') : `exit ${r.code}`} |`,
  );
  const table = [
    start,
    `Run of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, \`${process.env.FUZZ_COMMAND ?? 'npm run fuzz'}\`, FUZZ_RUNS=${RUNS}${MAX_SECONDS > 0 ? `, FUZZ_MAX_SECONDS=${MAX_SECONDS}` : ''}, node ${process.version}, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join('/')} at the end:`,
    '',
    '| target | executions | cov | ft | corpus files | seconds | exec/s | result |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    ...rows,
    end,
  ].join('\n');
  let text = existsSync(file) ? readFileSync(file, 'utf8') : `# Fuzzing\n\n${start}\n${end}\n`;
  if (!text.includes(start)) text += `\n${start}\n${end}\n`;
  const old = text.slice(text.indexOf(start), text.indexOf(end) + end.length);
  // Targets not run this time keep their previous row.
  const keptRows = old
    .split('\n')
    .filter(
      (l) => l.startsWith('| ') && !l.startsWith('| target') && !results.some((r) => l.startsWith(`| ${r.target} |`)),
    );
  const merged = keptRows.length === 0 ? table : table.replace(`\n${end}`, `\n${keptRows.join('\n')}\n${end}`);
  writeFileSync(file, text.replace(old, merged));
}

const results = [];
for (const t of only) {
  process.stderr.write(`\n=== fuzz ${t}: ${RUNS} executions ===\n`);
  results.push(await jazzer(t));
}
for (const r of results)
  console.log(
    `${r.target}: ${r.execs} executions, cov ${r.cov}, ft ${r.ft}, ${r.seconds.toFixed(1)} s, corpus ${r.corpus}${r.crash ? `, CRASH ${r.crash}` : ''}`,
  );
if (!process.env.FUZZ_NO_REPORT) report(results);
process.exitCode = results.some((r) => r.code !== 0) ? 1 : 0;
