/**
 * Scaling of the WireGuard data path over worker threads, in process (no TUN, no sockets, no
 * iperf3). The owner thread completes handshakes between a device A and N peers B0…B(N−1)
 * (shared session slots), publishes their snapshots, and N worker threads each run, for a
 * fixed time after a common start, one of:
 *
 *   transport  ShardEngine A.encrypt then ShardEngine B.receive on the worker's own buffers,
 *              64 packets a batch. `peers`: worker i sends to and receives from peer Bi (the
 *              placement the product parallelizes: a peer's datagrams reach one socket).
 *              `shared`: every worker under B0's one session (the shared send counter and
 *              replay window written by both threads: the worst case). `duplex`: one peer,
 *              A → B0 on worker 0 and B0 → A on worker 1 (one worker: both, packet by packet),
 *              as one flow each way: each keypair's send counter written by one thread while
 *              the other runs its replay window.
 *   path       worker i's WireGuardPort A → loopback socket → WireGuardPort Bi → sink
 *              (bench/workers-path.ts): the pipeline of a weft-wg worker without the kernel.
 *
 * Reported per N: packets per second over all workers (sealed, sent, opened and delivered),
 * the ratio to N = 1 measured in the same rounds, and process CPU time per packet (from the
 * common start to the last worker's end; worker start-up excluded). Runs alternate N = 1 and
 * N = 2 (WEFT_BENCH_WORKERS) per round; medians over rounds.
 *
 * In `shared` mode a worker descheduled between taking a counter and opening its packet for
 * longer than the other workers take to send a replay window's worth (8184 counters) finds its
 * counter behind the window: the receiver drops it, as wireguard-go or the kernel would. Those
 * are counted and reported as "late"; any other failure aborts the bench.
 *
 * Run: npm run --silent build && node dist/bench/workers.js [seconds-per-run=2] [rounds=3]
 *   WEFT_BENCH_MODES=transport-peers,transport-shared,transport-duplex,path  WEFT_BENCH_SIZES=64,1400
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker, parentPort, workerData } from 'node:worker_threads';
import { getCryptoBackend } from '../src/crypto/select.js';
import { withNativeAead } from '../src/io/native-aead.js';
import { parsePrefix } from '../src/packet/addr.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../src/wireguard/device.js';
import { DROP_REPLAYED_COUNTER } from '../src/wireguard/drops.js';
import { TRANSPORT_COUNTER_OFFSET, readU32LE } from '../src/wireguard/messages.js';
import type { Endpoint, Peer } from '../src/wireguard/peer.js';
import { OutgoingMessage } from '../src/wireguard/pool.js';
import {
  SHARED_REPLAY_WINDOW,
  allocateSharedSessions,
  sendCounterIndex,
  type SharedSessionBuffers,
} from '../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../src/wireguard/shard.js';
import type { ShardPeer } from '../src/wireguard/shard-peer.js';
import type { ShardSnapshot } from '../src/wireguard/shard-owner.js';
import { ShardSlots } from '../src/wireguard/shard-slots.js';
import { pathLoop, udpHeader } from './workers-path.js';

const BATCH = 64;
const MODES = ['transport-peers', 'transport-shared', 'transport-duplex', 'path'] as const;
type Mode = (typeof MODES)[number];

interface Side {
  shared: SharedSessionBuffers;
  snap: ShardSnapshot;
}

interface Job {
  mode: Mode;
  index: number;
  workers: number;
  size: number;
  ms: number;
  a: Side;
  /** The peer this worker receives as. */
  b: Side;
  /** Inner destination (in b's allowed IPs on A). */
  dst: number[];
  epA: Endpoint;
  epB: Endpoint;
  /** Int32[0]: 0 until the owner starts every worker at once. */
  go: SharedArrayBuffer;
}

interface Outcome {
  packets: number;
  /** This thread's time on a CPU and runnable but waiting for one, during the run (ns). */
  runNs: number;
  waitNs: number;
  late: number;
  bad: number;
  why: string;
}

const noLink = { handoff: () => false, underLoad: () => false, confirmed: () => {}, roamed: () => {} };

/** Worker side: waits for the common start, then runs job.mode for job.ms. */
export async function benchWorkerMain(): Promise<void> {
  const job = workerData as Job;
  const backend = withNativeAead(getCryptoBackend('auto')).backend;
  const ea = new ShardEngine(backend, job.a.shared, job.index, noLink);
  const eb = new ShardEngine(backend, job.b.shared, job.index, noLink);
  ea.apply(job.a.snap);
  eb.apply(job.b.snap);
  const go = new Int32Array(job.go);
  const t: Tally = { packets: 0, late: 0, bad: 0, why: '' };
  const step = job.mode === 'path' ? await pathStep(job, ea, eb, t) : transportStep(job, ea, eb, t);
  // Warm-up (the JIT compiles the loop here, not in the measured run), then the common start.
  for (const end = Date.now() + WARMUP_MS; Date.now() < end;) step();
  if (t.bad > 0) throw new Error(`warm-up: ${t.bad} packets failed: ${t.why}`);
  t.packets = 0;
  t.late = 0;
  parentPort!.postMessage({ ready: true });
  Atomics.wait(go, 0, 0);
  const sched0 = schedstat();
  for (const end = Date.now() + job.ms; Date.now() < end;) step();
  const sched = schedstat();
  parentPort!.postMessage({ ...t, runNs: sched[0] - sched0[0], waitNs: sched[1] - sched0[1] });
}

const WARMUP_MS = 300;

type Tally = Omit<Outcome, 'runNs' | 'waitNs'>;

/** This thread's [ns on a CPU, ns waiting on a run queue] (the kernel's schedstat). */
function schedstat(): number[] {
  return readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ', 2).map(Number);
}

async function pathStep(job: Job, ea: ShardEngine, eb: ShardEngine, t: Tally): Promise<() => void> {
  const loop = await pathLoop(ea, eb, job.epA, job.epB, job.size, job.dst, BATCH);
  return () => {
    const got = loop.batch();
    t.packets += got;
    if (got < BATCH) {
      t.bad += BATCH - got;
      t.why = loop.losses();
    }
  };
}

function transportStep(job: Job, ea: ShardEngine, eb: ShardEngine, t: Tally): () => void {
  const size = job.size;
  const slot = 16 + size + 48;
  const buf = new Uint8Array(slot * BATCH);
  const eo = new EncryptResult<ShardPeer>();
  const ro = new ReceiveResult<ShardPeer>();
  /** One direction: sealed by `enc`, opened by `dec` as from `from`; its header and send counter word. */
  const direction = (enc: ShardEngine, dec: ShardEngine, from: Endpoint, src: number[], dst: number[], side: Side) => {
    const hdr = udpHeader(size, src, dst);
    const peer = side.snap.peers.find((p) => side === job.b || sameDst(p, dst))!;
    // The send counter word (for classifying late drops).
    return { enc, dec, from, hdr, words: new Uint32Array(side.shared.keypairs), at: sendCounterIndex(peer.send!.slot) };
  };
  const ab = direction(ea, eb, job.epA, [10, 1, 0, 1], job.dst, job.a);
  const ba = direction(eb, ea, job.epB, job.dst, [10, 1, 0, 1], job.b);
  const dirs = job.mode !== 'transport-duplex' ? [ab] : job.workers === 1 ? [ab, ba] : job.index === 0 ? [ab] : [ba];
  return () => {
    const now = Date.now();
    for (let i = 0; i < BATCH; i++) {
      const d = dirs[i % dirs.length];
      const off = i * slot + 16;
      buf.fill(0, off + 20, off + size);
      buf.set(d.hdr, off);
      if (d.enc.encrypt(buf, off, size, now, eo) !== ENCRYPT_SEND) {
        t.bad++;
        t.why = `encrypt: ${eo.action} reason ${eo.reason}`;
      } else if (d.dec.receive(buf, eo.start, eo.length, d.from, now, false, ro) === RECEIVE_DELIVER) {
        t.packets++;
      } else {
        const c = readU32LE(buf, eo.start + TRANSPORT_COUNTER_OFFSET);
        if (ro.reason === DROP_REPLAYED_COUNTER && Atomics.load(d.words, d.at) - c > SHARED_REPLAY_WINDOW - 8) t.late++;
        else {
          t.bad++;
          t.why = `receive: reason ${ro.reason}, counter ${c}, send word ${Atomics.load(d.words, d.at)}`;
        }
      }
    }
  };
}

function sameDst(p: ShardSnapshot['peers'][number], dst: readonly number[]): boolean {
  return p.allowedIps.some((a) => a.addr.length === 4 && a.addr[0] === dst[0] && a.addr[1] === dst[1]);
}

/** Device A with peers B0…B(n−1), each handshaken; snapshots for n workers. */
function owner(n: number, now: number) {
  const backend = getCryptoBackend('auto');
  const sa = new ShardSlots(allocateSharedSessions(n, n + 2, 2 * n + 4));
  const a = new Device({ backend, sessionSlots: sa });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  const epA = { address: '192.0.2.1', port: 51820 };
  const out = new OutgoingMessage<Peer>();
  const rr = new ReceiveResult();
  const pump = (from: Device, to: Device, src: Endpoint): void => {
    while (from.popOutgoing(out)) {
      to.receive(out.buf, out.start, out.length, src, now, false, rr);
      from.releaseOutgoing(out.slot);
    }
  };
  const bs: { side: () => Side; dst: number[]; epB: Endpoint }[] = [];
  for (let i = 0; i < n; i++) {
    const sb = new ShardSlots(allocateSharedSessions(n, 2, 4));
    const b = new Device({ backend, sessionSlots: sb });
    b.setPrivateKey(new Uint8Array(32).fill(2 + i));
    const pab = a.addPeer(b.publicKey!);
    const pba = b.addPeer(a.publicKey!);
    a.addAllowedIp(pab, parsePrefix(`10.${2 + i}.0.0/16`));
    b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
    const epB = { address: `192.0.2.${2 + i}`, port: 51820 };
    a.setEndpoint(pab, epB);
    b.setEndpoint(pba, epA);
    a.initiateHandshake(pab, now);
    pump(a, b, epA);
    pump(b, a, epB);
    pump(a, b, epA);
    // B (responder) confirmed A's session with the keepalive: both sides have current keypairs.
    bs.push({
      side: () => ({ shared: sb.buffers, snap: b.shardSnapshot(1, (p) => sb.peerSlot(p), now) }),
      dst: [10, 2 + i, 0, 1],
      epB,
    });
  }
  return { a: { shared: sa.buffers, snap: a.shardSnapshot(1, (p) => sa.peerSlot(p), now) }, bs, epA };
}

async function run(
  mode: Mode,
  n: number,
  size: number,
  ms: number,
): Promise<{ pps: number; cpuUsPerPacket: number; workerUsPerPacket: number; waitShare: number; late: number }> {
  const o = owner(n, Date.now());
  const go = new SharedArrayBuffer(4);
  const entry = import.meta.url;
  const workers: Worker[] = [];
  const ready: Promise<void>[] = [];
  const done: Promise<Outcome>[] = [];
  for (let index = 0; index < n; index++) {
    const b = o.bs[mode === 'transport-shared' || mode === 'transport-duplex' ? 0 : index];
    const job: Job = { mode, index, workers: n, size, ms, a: o.a, b: b.side(), dst: b.dst, epA: o.epA, epB: b.epB, go };
    const w = new Worker(`import(${JSON.stringify(entry)}).then((m) => m.benchWorkerMain())`, {
      eval: true,
      workerData: job,
    });
    workers.push(w);
    let onReady!: () => void;
    ready.push(new Promise<void>((res) => (onReady = res)));
    done.push(
      new Promise<Outcome>((resolve, reject) => {
        w.on('message', (m: Outcome | { ready: true }) => ('ready' in m ? onReady() : resolve(m)));
        w.once('error', reject);
      }),
    );
  }
  await Promise.all(ready);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  Atomics.store(new Int32Array(go), 0, 1);
  Atomics.notify(new Int32Array(go), 0);
  const results = await Promise.all(done);
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  for (const w of workers) void w.terminate();
  const packets = results.reduce((s, r) => s + r.packets, 0);
  const bad = results.reduce((s, r) => s + r.bad, 0);
  if (bad > 0)
    throw new Error(`${mode}: ${bad} packets failed to seal or open: ${results.map((r) => r.why).join('; ')}`);
  const runNs = results.reduce((s, r) => s + r.runNs, 0);
  const waitNs = results.reduce((s, r) => s + r.waitNs, 0);
  return {
    pps: packets / secs,
    cpuUsPerPacket: (cpu.user + cpu.system) / packets,
    workerUsPerPacket: runNs / 1000 / packets,
    waitShare: waitNs / (runNs + waitNs),
    late: results.reduce((s, r) => s + r.late, 0),
  };
}

async function main(): Promise<void> {
  const ms = Number(process.argv[2] ?? 2) * 1000;
  const rounds = Number(process.argv[3] ?? 3);
  const counts = (process.env.WEFT_BENCH_WORKERS ?? '1,2').split(',').map(Number);
  const modes = (process.env.WEFT_BENCH_MODES ?? MODES.join(',')).split(',') as Mode[];
  for (const m of modes)
    if (!MODES.includes(m)) throw new Error(`WEFT_BENCH_MODES: ${m} is not one of ${MODES.join(', ')}`);
  const sizes = (process.env.WEFT_BENCH_SIZES ?? '64,1400').split(',').map(Number);
  const load = (): string =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  console.log(`# worker scaling: ${cpus().length} CPUs, ${ms / 1000} s per run, load average before ${load()}`);
  const median = (v: number[]): number => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
  for (const mode of modes) {
    for (const size of sizes) {
      const got = new Map<number, { pps: number[]; cpu: number[]; thread: number[]; wait: number[]; late: number }>();
      for (let r = 0; r < rounds; r++) {
        for (const n of r % 2 === 0 ? counts : [...counts].reverse()) {
          const x = await run(mode, n, size, ms);
          const g = got.get(n) ?? { pps: [], cpu: [], thread: [], wait: [], late: 0 };
          g.pps.push(x.pps);
          g.cpu.push(x.cpuUsPerPacket);
          g.thread.push(x.workerUsPerPacket);
          g.wait.push(x.waitShare);
          g.late += x.late;
          got.set(n, g);
        }
      }
      const anchor = got.get(counts[0])!.pps;
      const base = median(anchor);
      for (const n of counts) {
        const g = got.get(n)!;
        const pps = median(g.pps);
        const ratios = g.pps.map((p, i) => (p / anchor[i]).toFixed(2)).join(' ');
        console.log(
          `${mode} ${size} B, ${n} worker(s): ${(pps / 1e3).toFixed(0)} k packets/s, ` +
            `${(pps / base).toFixed(2)}x of ${counts[0]} (per round ${ratios}), ${median(g.cpu).toFixed(2)} µs CPU/packet ` +
            `(runs: ${g.pps.map((p) => (p / 1e3).toFixed(0)).join(' ')} k; ${g.cpu.map((c) => c.toFixed(2)).join(' ')} µs); ` +
            `worker threads ${median(g.thread).toFixed(2)} µs on CPU/packet, runnable but waiting for a CPU ` +
            `${g.wait.map((w) => (100 * w).toFixed(0)).join(' ')} % of their time` +
            (g.late > 0 ? `, ${g.late} late` : ''),
        );
      }
    }
  }
  console.log(`# load average after ${load()}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) void main();
