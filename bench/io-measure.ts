/**
 * The I/O benchmark's packet source and measurement frame: a child process blasting UDP
 * datagrams with the addon's sendmmsg (optionally inside a namespace), a read measurement (the
 * source runs for warmup + window, the counter is sampled at both edges) and a timed write loop,
 * each with this process's CPU time per packet.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function addonPath(): string {
  if (process.env.WEFT_IO_ADDON) return process.env.WEFT_IO_ADDON;
  for (const rel of ['../../native/build/Release/weft_io.node', '../native/build/Release/weft_io.node']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new Error('native addon not built: run `node native/build.mjs`');
}

export function sh(cmd: string[], allowFail = false): string {
  const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0 && !allowFail) throw new Error(`${cmd.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------------
// The packet source: a child process sending UDP datagrams with sendmmsg as fast as it can.

const BLASTER = `
const addon = require(process.argv[1]);
const [dst, port, payload, ms] = [process.argv[2], +process.argv[3], +process.argv[4], +process.argv[5]];
const r = addon.udpOpen(4, null, 0, 0, 4 << 20, 0);
if (typeof r === 'number') { console.error('udpOpen', r); process.exit(1); }
const fd = r[0];
const N = 64;
const arena = new Uint8Array(2048);
for (let i = 0; i < arena.length; i++) arena[i] = i & 0xff;
const offs = new Uint32Array(N), lens = new Uint32Array(N).fill(payload), idx = new Uint32Array(N);
const rec = new Uint8Array(24);
rec[0] = 4; rec[2] = port >> 8; rec[3] = port & 0xff;
dst.split('.').forEach((o, i) => { rec[4 + i] = +o; });
let sent = 0, loops = 0;
const t0 = Date.now();
const end = t0 + ms;
for (;;) {
  sent += addon.sendBatch(fd, 4, arena, offs, lens, rec, idx, N);
  if ((++loops & 15) === 0 && Date.now() >= end) break;
}
console.log(JSON.stringify({ sent, pps: sent / ((Date.now() - t0) / 1000) }));
`;

export interface Blaster {
  child: ChildProcess;
  result: Promise<{ sent: number; pps: number }>;
}

export function startBlaster(ns: string | null, dst: string, port: number, payload: number, ms: number): Blaster {
  const argv = [
    'timeout',
    '-k',
    '2',
    String(Math.ceil(ms / 1000) + 10),
    ...(ns ? ['ip', 'netns', 'exec', ns] : []),
    process.execPath,
    '-e',
    BLASTER,
    addonPath(),
    dst,
    String(port),
    String(payload),
    String(ms),
  ];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const result = new Promise<{ sent: number; pps: number }>((resolve, reject) => {
    child.on('exit', (code) => {
      try {
        resolve(JSON.parse(out) as { sent: number; pps: number });
      } catch {
        reject(new Error(`blaster exited ${code}: ${err}`));
      }
    });
  });
  return { child, result };
}

// ------------------------------------------------------------------------------------------
// Measurement frame: a source runs for warmup + window; the counter is sampled at both edges.
/**
 * Rate plus this process's CPU time (all threads: main, libuv threadpool, workers; user + sys)
 * per packet. On 2 cores the packet source competes for CPU, so rates are often source-bound;
 * CPU µs per packet is the fair comparison of the mechanisms' cost.
 */
export interface ReadResult {
  pps: number;
  sourcePps: number;
  cpuUs: number;
  drained?: number;
}

export async function measureRead(
  size: number,
  windowMs: number,
  counter: () => number,
  source: () => Blaster,
): Promise<ReadResult> {
  const warmup = 300;
  const b = source();
  await sleep(warmup);
  const c0 = counter();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(windowMs);
  const c1 = counter();
  const cpu = process.cpuUsage(cpu0);
  const t1 = performance.now();
  const src = await b.result;
  const n = c1 - c0;
  return { pps: n / ((t1 - t0) / 1000), sourcePps: src.pps, cpuUs: n > 0 ? (cpu.user + cpu.system) / n : NaN };
}

export interface WriteResult {
  pps: number;
  cpuUs: number;
}

export async function timeLoop(ms: number, step: () => number): Promise<WriteResult> {
  // Runs `step` (returns packets done) in slices of ~5 ms, yielding to the event loop between.
  let n = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + ms;
  while (performance.now() < end) {
    const sliceEnd = performance.now() + 5;
    while (performance.now() < sliceEnd) n += step();
    await new Promise<void>((r) => setImmediate(r));
  }
  const cpu = process.cpuUsage(cpu0);
  return { pps: n / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / n };
}
