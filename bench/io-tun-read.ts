/**
 * TUN read mechanisms of the I/O benchmark: node:fs read on the threadpool, koffi poll + read,
 * a worker thread filling a SharedArrayBuffer ring, the native addon's batch read; each measured
 * streaming (with the source running) or draining a full queue (read capacity).
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { PacketBatch } from '../src/io/batch.js';
import type { NativeIo } from '../src/io/native.js';
import type { TunDevice } from '../src/io/tun.js';
import { measureRead, sh, sleep, startBlaster, type Blaster, type ReadResult } from './io-measure.js';
import { NS, TUN_NAME, TUN_PEER, tunOpen } from './io-tun.js';

export const DRAIN_QUEUE = 20000;

/** Atomics.waitAsync (V8 ≥ 8.7, Node ≥ 16) is missing from the ES2022 lib typings. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number, t: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

const tunSource = (size: number, ms: number) => (): Blaster => startBlaster(NS, TUN_PEER, 9, size - 28, ms);

export type ReadKind = 'fs' | 'koffi' | 'worker' | 'native';

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
export async function tunRead(
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
