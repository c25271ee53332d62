/**
 * I/O mechanism benchmark: which way of moving packets between Node and the kernel is fastest,
 * for TUN (read and write, 64 B and 1400 B IP packets) and UDP (receive and send, 64 B and
 * 1400 B payloads). Root only: it builds a network namespace `wio-bench` for the TUN.
 *
 * Files: io-measure.ts (packet source, measurement frame), io-tun.ts, io-tun-read.ts,
 * io-tun-write.ts, io-udp.ts (the mechanisms); this file runs the cases and writes the tables.
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
import { pathToFileURL } from 'node:url';
import { loadNativeIo } from '../src/io/native.js';
import { deleteNs, setupNs } from './io-tun.js';
import { DRAIN_QUEUE, tunRead, type ReadKind } from './io-tun-read.js';
import { tunWrite } from './io-tun-write.js';
import { udpRecv, udpSend } from './io-udp.js';

const SIZES = [64, 1400];

interface Row {
  mechanism: string;
  size: number;
  pps: number;
  cpuUs?: number;
  note?: string;
}

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
    deleteNs();
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
