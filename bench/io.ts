/**
 * I/O mechanism benchmark: which way of moving packets between Node and the kernel is fastest,
 * for TUN (read and write, 64 B and 1400 B IP packets) and UDP (receive and send, 64 B and
 * 1400 B payloads). Root only: it builds a network namespace `wio-bench` for the TUN.
 *
 * Run:  npx tsc -p tsconfig.build.json && node dist/bench/io.js [seconds-per-case [repeats]]
 *       (needs the addon: `node native/build.mjs`; results go to stdout as Markdown)
 *
 * Mechanisms measured in the same run (ratios are against the first row of each table):
 * TUN read
 *   fs.read       (a)  blocking fd, node:fs read on libuv's threadpool, one read in flight
 *   koffi-poll    (a') poll() on the threadpool via a koffi async call, then non-blocking koffi
 *                      read() on the main thread until EAGAIN (TunDevice mechanism 'koffi')
 *   worker+SAB    (b)  a worker thread does poll()+read() through koffi into a SharedArrayBuffer
 *                      ring; the main thread consumes with Atomics.waitAsync
 *   native        (c)  addon: uv_poll_t readiness, read() until EAGAIN in one call (TunDevice 'native')
 * TUN write: fs.write (async, one in flight), fs.writeSync, koffi write(), native write1,
 *   native writeBatch (64 per call).
 * UDP receive: node:dgram ('message' per datagram) vs native recvmmsg batches (UdpSocket).
 * UDP send: node:dgram send (≤ 4096 in flight) vs native sendmmsg (64 per call).
 *
 * Packet source for TUN reads and UDP receives: a separate process (`node -e`, in the
 * namespace for the TUN) blasting with the addon's sendmmsg; its own send rate is reported, a
 * reader close to it is source-limited. TUN reads are measured twice: "drain" (the source
 * fills a 20000-packet TUN queue, stops, then the reader empties it alone: read capacity with
 * full batches) and "stream" (source and reader share the 2 cores). Every row also reports
 * this process's CPU time per packet (all threads), the figure least disturbed by other load.
 * Traffic stays inside wio-bench (TUN: 198.18.0.0/24) or on 127.0.0.1.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { PacketBatch } from '../src/io/batch.js';
import { getLibc } from '../src/io/libc.js';
import { loadNativeIo, type NativeIo } from '../src/io/native.js';
import { TunDevice } from '../src/io/tun.js';
import { UdpSocket, encodeAddress } from '../src/io/udp.js';

const NS = 'wio-bench';
const TUN_NAME = 'wio-bt';
const TUN_LOCAL = '198.18.0.1';
const TUN_PEER = '198.18.0.2';
const SIZES = [64, 1400];

function addonPath(): string {
  if (process.env.WEFT_IO_ADDON) return process.env.WEFT_IO_ADDON;
  for (const rel of ['../../native/build/Release/weft_io.node', '../native/build/Release/weft_io.node']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (fs.existsSync(p)) return p;
  }
  throw new Error('native addon not built: run `node native/build.mjs`');
}

function sh(cmd: string[], allowFail = false): string {
  const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0 && !allowFail) throw new Error(`${cmd.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Atomics.waitAsync (V8 ≥ 8.7, Node ≥ 16) is missing from the ES2022 lib typings. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number, t: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

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

interface Blaster {
  child: ChildProcess;
  result: Promise<{ sent: number; pps: number }>;
}

function startBlaster(ns: string | null, dst: string, port: number, payload: number, ms: number): Blaster {
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

interface Row {
  mechanism: string;
  size: number;
  pps: number;
  cpuUs?: number;
  note?: string;
}

/**
 * Rate plus this process's CPU time (all threads: main, libuv threadpool, workers; user + sys)
 * per packet. On 2 cores the packet source competes for CPU, so rates are often source-bound;
 * CPU µs per packet is the fair comparison of the mechanisms' cost.
 */
interface ReadResult {
  pps: number;
  sourcePps: number;
  cpuUs: number;
  drained?: number;
}

const DRAIN_QUEUE = 20000;

async function measureRead(
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

// ------------------------------------------------------------------------------------------
// TUN

function setupNs(): void {
  sh(['ip', 'netns', 'del', NS], true);
  sh(['ip', 'netns', 'add', NS]);
  sh(['ip', '-n', NS, 'link', 'set', 'lo', 'up']);
}

function tunOpen(mechanism: 'native' | 'koffi'): TunDevice {
  const dev = TunDevice.open({ name: TUN_NAME, mtu: 1420, netns: NS, mechanism });
  sh(['ip', '-n', NS, 'addr', 'add', `${TUN_LOCAL}/24`, 'dev', TUN_NAME]);
  sh(['ip', '-n', NS, 'link', 'set', TUN_NAME, 'txqueuelen', '1000']);
  return dev;
}

const tunSource = (size: number, ms: number) => (): Blaster => startBlaster(NS, TUN_PEER, 9, size - 28, ms);

type ReadKind = 'fs' | 'koffi' | 'worker' | 'native';

/** A running reader: packets counted, time of the first possible and of the last read. */
interface Reader {
  n: number;
  first: number;
  last: number;
  cpu0: NodeJS.CpuUsage;
  stop(): Promise<void>;
}

function readerDevice(dev: TunDevice): Reader {
  const r: Reader = {
    n: 0,
    first: performance.now(),
    last: 0,
    cpu0: process.cpuUsage(),
    stop: () => Promise.resolve(dev.stop()),
  };
  dev.start(new PacketBatch({ maxLen: 1420, capacity: 64 }), (b) => {
    r.n += b.count;
    r.last = performance.now();
  });
  return r;
}

function readerFs(dev: TunDevice, native: NativeIo): Reader {
  native.setNonBlocking(dev.fd, false);
  let stop = false;
  const buf = Buffer.alloc(2048);
  let done!: () => void;
  const finished = new Promise<void>((res) => {
    done = res;
  });
  const r: Reader = {
    n: 0,
    first: performance.now(),
    last: 0,
    cpu0: process.cpuUsage(),
    stop: async () => {
      stop = true;
      // The read in flight blocks until a packet arrives: send a few more to release it.
      const b = startBlaster(NS, TUN_PEER, 9, 36, 50);
      await Promise.race([finished, sleep(2000)]);
      await b.result.catch(() => undefined);
    },
  };
  const next = (): void => {
    fs.read(dev.fd, buf, 16, 1420, null, (err) => {
      if (err || stop) {
        done();
        return;
      }
      r.n++;
      r.last = performance.now();
      next();
    });
  };
  next();
  return r;
}

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
const koffi = require(workerData.koffi);
const lib = koffi.load('libc.so.6');
const read = lib.func('long read(int fd, void *buf, size_t count)');
const poll = lib.func('int poll(void *fds, unsigned long nfds, int timeout)');
const { fd, sab, slots, slotSize } = workerData;
const hdr = new Int32Array(sab, 0, 4);           // head, tail, dropped, stop
const lens = new Int32Array(sab, 16, slots);
const data = new Uint8Array(sab, 16 + 4 * slots);
const views = []; for (let i = 0; i < slots; i++) views.push(data.subarray(i * slotSize, i * slotSize + 1420));
const pfd = new Uint8Array(8); new DataView(pfd.buffer).setInt32(0, fd, true); pfd[4] = 1;
let head = 0;
parentPort.postMessage('ready');
while (Atomics.load(hdr, 3) === 0) {
  if (poll(pfd, 1, 100) <= 0) continue;
  let got = 0;
  for (;;) {
    const tail = Atomics.load(hdr, 1);
    if (head - tail >= slots) { Atomics.add(hdr, 2, 1); Atomics.wait(hdr, 1, tail, 1); continue; }
    const r = read(fd, views[head % slots], 1420);
    if (r < 0) break;
    lens[head % slots] = r;
    head++;
    if (++got % 64 === 0) { Atomics.store(hdr, 0, head); Atomics.notify(hdr, 0); }
  }
  Atomics.store(hdr, 0, head); Atomics.notify(hdr, 0);
}
`;

async function readerWorker(dev: TunDevice): Promise<Reader> {
  const slots = 1024;
  const slotSize = 1472;
  const sab = new SharedArrayBuffer(16 + 4 * slots + slots * slotSize);
  const hdr = new Int32Array(sab, 0, 4);
  const lens = new Int32Array(sab, 16, slots);
  // A .cjs file rather than eval: an eval worker inherits the parent's module type.
  const workerFile = `${(await import('node:os')).tmpdir()}/wio-bench-worker-${process.pid}.cjs`;
  fs.writeFileSync(workerFile, WORKER);
  const worker = new Worker(workerFile, {
    workerData: { fd: dev.fd, sab, slots, slotSize, koffi: createRequire(import.meta.url).resolve('koffi') },
  });
  await new Promise<void>((res, rej) => {
    worker.once('message', () => res());
    worker.once('error', rej);
  });
  let running = true;
  let bytes = 0;
  const r: Reader = {
    n: 0,
    first: performance.now(),
    last: 0,
    cpu0: process.cpuUsage(),
    stop: async () => {
      running = false;
      Atomics.store(hdr, 3, 1);
      // A pending waitAsync does not keep Node's loop alive: wake the consumer before awaiting it.
      Atomics.notify(hdr, 0);
      await consumer;
      await worker.terminate();
      fs.rmSync(workerFile, { force: true });
      void bytes;
    },
  };
  const consume = async (): Promise<void> => {
    let tail = 0;
    while (running) {
      const head = Atomics.load(hdr, 0);
      if (head === tail) {
        const w = waitAsync(hdr, 0, head, 200);
        if (w.async) await w.value;
        continue;
      }
      for (; tail < head; tail++) {
        bytes += lens[tail % slots];
        r.n++;
      }
      r.last = performance.now();
      Atomics.store(hdr, 1, tail);
      Atomics.notify(hdr, 1);
    }
  };
  const consumer = consume();
  return r;
}

async function startReader(kind: ReadKind, dev: TunDevice, native: NativeIo): Promise<Reader> {
  switch (kind) {
    case 'fs':
      return readerFs(dev, native);
    case 'worker':
      return readerWorker(dev);
    default:
      return readerDevice(dev);
  }
}

/**
 * stream: the source runs while we read (rate is often source-bound on 2 cores).
 * drain: the source first fills a 20000-packet TUN queue and stops; then the reader empties it
 *   alone on the machine: its rate with full batches is the mechanism's read capacity.
 */
async function tunRead(
  kind: ReadKind,
  size: number,
  ms: number,
  mode: 'stream' | 'drain',
  native: NativeIo,
): Promise<ReadResult> {
  const dev = tunOpen(kind === 'koffi' ? 'koffi' : 'native');
  try {
    if (mode === 'stream') {
      const r = await startReader(kind, dev, native);
      try {
        return await measureRead(size, ms, () => r.n, tunSource(size, ms + 500));
      } finally {
        await r.stop();
      }
    }
    sh(['ip', '-n', NS, 'link', 'set', TUN_NAME, 'txqueuelen', String(DRAIN_QUEUE)]);
    const src = await startBlaster(NS, TUN_PEER, 9, size - 28, 400).result;
    const r = await startReader(kind, dev, native);
    let prev = -1;
    const deadline = performance.now() + 30_000;
    while (r.n !== prev && performance.now() < deadline) {
      prev = r.n;
      await sleep(100);
    }
    const cpu = process.cpuUsage(r.cpu0);
    await r.stop();
    return {
      pps: r.n / ((r.last - r.first) / 1000),
      sourcePps: src.pps,
      cpuUs: (cpu.user + cpu.system) / r.n,
      drained: r.n,
    };
  } finally {
    await dev.close();
  }
}

/** Writes IPv4/UDP packets 198.18.0.2:1234 → 198.18.0.1:9 (delivered locally, port closed). */
function buildTunPackets(size: number, n: number): PacketBatch {
  const b = new PacketBatch({ maxLen: 1420, capacity: n });
  for (let i = 0; i < n; i++) {
    const o = b.offs[i];
    const p = b.buf;
    p[o] = 0x45;
    p[o + 2] = size >> 8;
    p[o + 3] = size & 0xff;
    p[o + 8] = 64;
    p[o + 9] = 17;
    p.set([198, 18, 0, 2], o + 12);
    p.set([198, 18, 0, 1], o + 16);
    let s = 0;
    for (let k = 0; k < 20; k += 2) s += (p[o + k] << 8) | p[o + k + 1];
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    const c = ~s & 0xffff;
    p[o + 10] = c >> 8;
    p[o + 11] = c & 0xff;
    p[o + 20] = 0x04;
    p[o + 21] = 0xd2;
    p[o + 22] = 0;
    p[o + 23] = 9;
    p[o + 24] = (size - 20) >> 8;
    p[o + 25] = (size - 20) & 0xff; // UDP checksum 0: none
    b.lens[i] = size;
  }
  b.count = n;
  return b;
}

interface WriteResult {
  pps: number;
  cpuUs: number;
}

async function timeLoop(ms: number, step: () => number): Promise<WriteResult> {
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

async function tunWrite(mech: string, size: number, ms: number, native: NativeIo): Promise<WriteResult> {
  const dev = tunOpen(mech === 'koffi write()' ? 'koffi' : 'native');
  const pk = buildTunPackets(size, 64);
  const libc = getLibc();
  const one = pk.buf.subarray(pk.offs[0], pk.offs[0] + size);
  const buf = Buffer.from(one);
  try {
    switch (mech) {
      case 'fs.write (async, 1 in flight)': {
        let n = 0;
        let stop = false;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await new Promise<void>((resolve) => {
          const next = (): void => {
            if (stop) {
              resolve();
              return;
            }
            fs.write(dev.fd, buf, 0, size, null, () => {
              n++;
              next();
            });
          };
          next();
          setTimeout(() => {
            stop = true;
          }, ms);
        });
        const cpu = process.cpuUsage(cpu0);
        return { pps: n / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / n };
      }
      case 'fs.writeSync':
        return await timeLoop(ms, () => {
          fs.writeSync(dev.fd, buf, 0, size);
          return 1;
        });
      case 'koffi write()':
        return await timeLoop(ms, () => (libc.write(dev.fd, one, size) >= 0 ? 1 : 0));
      case 'native write1':
        return await timeLoop(ms, () => (native.write1(dev.fd, pk.buf, pk.offs[0], size) >= 0 ? 1 : 0));
      case 'native writeBatch ×64':
        return await timeLoop(ms, () => native.writeBatch(dev.fd, pk.buf, pk.offs, pk.lens, 64));
      default:
        throw new Error(mech);
    }
  } finally {
    await dev.close();
  }
}

// ------------------------------------------------------------------------------------------
// UDP on loopback

async function udpRecv(mechanism: 'dgram' | 'native', size: number, ms: number): Promise<ReadResult> {
  const s = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism });
  let n = 0;
  s.onBatch(new PacketBatch({ maxLen: 1500, capacity: 64, withAddresses: true }), (b) => {
    n += b.count;
  });
  try {
    return await measureRead(
      size,
      ms,
      () => n,
      () => startBlaster(null, '127.0.0.1', s.port, size, ms + 500),
    );
  } finally {
    await s.close();
  }
}

async function udpSend(
  mechanism: 'dgram' | 'native',
  size: number,
  ms: number,
  native: NativeIo,
): Promise<WriteResult> {
  // Sink: a bound socket nobody reads (the kernel drops once its buffer is full).
  const sink = native.udpOpen(4, new Uint8Array([127, 0, 0, 1]), 0, 0, 0, 0) as number[];
  const s = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism });
  const b = new PacketBatch({ maxLen: 1500, capacity: 64, withAddresses: true });
  for (let i = 0; i < 64; i++) b.lens[i] = size;
  encodeAddress('127.0.0.1', sink[1], b.addrs, 0);
  const idx = new Uint32Array(64);
  try {
    if (mechanism === 'native') return await timeLoop(ms, () => s.sendBatch(b.buf, b.offs, b.lens, b.addrs, idx, 64));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const end = t0 + ms;
    while (performance.now() < end) {
      s.sendBatch(b.buf, b.offs, b.lens, b.addrs, idx, 64); // bounded: beyond 4096 in flight are dropped
      await new Promise<void>((r) => setImmediate(r));
    }
    const elapsed = (performance.now() - t0) / 1000;
    await sleep(200); // let the last completions arrive (counted sends only)
    const cpu = process.cpuUsage(cpu0);
    return { pps: s.stats.txPackets / elapsed, cpuUs: (cpu.user + cpu.system) / s.stats.txPackets };
  } finally {
    await s.close();
    fs.closeSync(sink[0]);
  }
}

// ------------------------------------------------------------------------------------------

function table(title: string, rows: Row[]): string {
  const out = [
    `### ${title}`,
    '',
    '| mechanism | size (B) | packets/s | × first row | CPU µs/packet (this process) | CPU cost × first row | note |',
    '|---|---:|---:|---:|---:|---:|---|',
  ];
  for (const size of SIZES) {
    const rs = rows.filter((r) => r.size === size);
    const anchor = rs[0]?.pps ?? 1;
    const cpuAnchor = rs[0]?.cpuUs ?? NaN;
    for (const r of rs) {
      out.push(
        `| ${r.mechanism} | ${r.size} | ${Math.round(r.pps).toLocaleString('en-US')} | ${(r.pps / anchor).toFixed(2)} | ` +
          `${r.cpuUs?.toFixed(2) ?? ''} | ${r.cpuUs !== undefined ? (r.cpuUs / cpuAnchor).toFixed(2) : ''} | ${r.note ?? ''} |`,
      );
    }
  }
  return out.join('\n');
}

interface Case {
  table: number;
  mechanism: string;
  size: number;
  run: () => Promise<{ pps: number; cpuUs: number; sourcePps?: number; drained?: number }>;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * Every case runs `repeats` times, the cases interleaved round-robin so that background load
 * (other processes on this 2-core machine) spreads over all mechanisms; the table shows medians.
 */
export async function runIoBench(seconds = 2, repeats = 3): Promise<string> {
  if (process.getuid?.() !== 0) return '_skipped: the I/O benchmark needs root (network namespace, TUN)_';
  const native = loadNativeIo();
  if (!native)
    return '_skipped: the native addon is not built (node native/build.mjs); it also drives the packet source_';
  const os = await import('node:os');
  const ms = seconds * 1000;
  const cases: Case[] = [];
  for (const size of SIZES) {
    const kinds: [ReadKind, string][] = [
      ['fs', '(a) fs.read, threadpool, 1 in flight'],
      ['koffi', "(a') koffi: poll() on threadpool + koffi read() drain"],
      ['worker', '(b) worker: koffi poll()+read() → SAB ring'],
      ['native', '(c) native: uv_poll + read() batch'],
    ];
    for (const [k, label] of kinds)
      cases.push({ table: 0, size, mechanism: label, run: () => tunRead(k, size, ms, 'drain', native) });
    for (const [k, label] of kinds)
      cases.push({ table: 4, size, mechanism: label, run: () => tunRead(k, size, ms, 'stream', native) });
    for (const m of [
      'fs.write (async, 1 in flight)',
      'fs.writeSync',
      'koffi write()',
      'native write1',
      'native writeBatch ×64',
    ]) {
      cases.push({ table: 1, size, mechanism: m, run: () => tunWrite(m, size, ms, native) });
    }
    cases.push({ table: 2, size, mechanism: "node:dgram 'message'", run: () => udpRecv('dgram', size, ms) });
    cases.push({ table: 2, size, mechanism: 'native recvmmsg batch', run: () => udpRecv('native', size, ms) });
    cases.push({
      table: 3,
      size,
      mechanism: 'node:dgram send (≤4096 in flight)',
      run: () => udpSend('dgram', size, ms, native),
    });
    cases.push({ table: 3, size, mechanism: 'native sendmmsg ×64', run: () => udpSend('native', size, ms, native) });
  }
  const results = cases.map(() => ({
    pps: [] as number[],
    cpu: [] as number[],
    src: [] as number[],
    drained: [] as number[],
  }));
  const load0 = os.loadavg()[0];
  setupNs();
  try {
    for (let r = 0; r < repeats; r++) {
      for (let i = 0; i < cases.length; i++) {
        const m = await cases[i].run();
        results[i].pps.push(m.pps);
        results[i].cpu.push(m.cpuUs);
        if (m.sourcePps !== undefined) results[i].src.push(m.sourcePps);
        if (m.drained !== undefined) results[i].drained.push(m.drained);
      }
    }
  } finally {
    sh(['ip', 'netns', 'del', NS], true);
  }
  const titles = [
    `TUN read capacity: drain a full ${DRAIN_QUEUE}-packet TUN queue with the source stopped, netns`,
    'TUN write (Node → kernel), netns',
    'UDP receive while a sendmmsg source runs, loopback',
    'UDP send, loopback',
    'TUN read while the source runs (source-bound on 2 cores; CPU µs/packet is the comparable figure), netns',
  ];
  const parts = [
    `node ${process.version}, ${new Date().toISOString()}, ${os.cpus().length} CPUs, ${seconds}s per case, ` +
      `median of ${repeats} interleaved runs, load average ${load0.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`,
  ];
  for (const t of [0, 4, 1, 2, 3]) {
    const rows: Row[] = [];
    cases.forEach((c, i) => {
      if (c.table !== t) return;
      const rs = results[i];
      rows.push({
        mechanism: c.mechanism,
        size: c.size,
        pps: median(rs.pps),
        cpuUs: median(rs.cpu),
        note: rs.drained.length
          ? `${Math.round(median(rs.drained)).toLocaleString('en-US')} packets drained`
          : rs.src.length
            ? `source ${Math.round(median(rs.src)).toLocaleString('en-US')}/s`
            : undefined,
      });
    });
    parts.push(table(titles[t], rows));
  }
  return parts.join('\n\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const seconds = Number(process.argv[2] ?? 2);
  const repeats = Number(process.argv[3] ?? 3);
  runIoBench(seconds, repeats).then(
    (s) => {
      console.log(s);
    },
    (e) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
