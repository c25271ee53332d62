/**
 * Scaling of WireGuard transport over worker threads, in process (no TUN, no sockets, no
 * iperf3): the owner thread completes a handshake between two Devices with shared session
 * slots (A sends, B receives), publishes their snapshots, and N worker threads each run
 * ShardEngine A.encrypt (a counter from the shared Atomics word) then ShardEngine B.receive
 * (the shared lock-free replay window) on their own buffers, batch after batch, for a fixed
 * time. Reported per N: transport round trips (seal + open) per second over all workers, the
 * ratio to N = 1, and CPU microseconds per packet (process CPU time / packets). Runs
 * alternate N = 1 and N = 2 (and more with WEFT_BENCH_WORKERS) to share the machine's noise.
 *
 * Run: npm run --silent build && node dist/bench/workers.js [seconds-per-run=3] [rounds=3]
 */
import { cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker, parentPort, workerData } from 'node:worker_threads';
import { getCryptoBackend } from '../src/crypto/select.js';
import { withNativeAead } from '../src/io/native-aead.js';
import { parsePrefix } from '../src/packet/addr.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../src/wireguard/device.js';
import type { Endpoint, Peer } from '../src/wireguard/peer.js';
import { OutgoingMessage } from '../src/wireguard/pool.js';
import { allocateSharedSessions, type SharedSessionBuffers } from '../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../src/wireguard/shard.js';
import type { ShardPeer } from '../src/wireguard/shard-peer.js';
import type { ShardSnapshot } from '../src/wireguard/shard-owner.js';
import { ShardSlots } from '../src/wireguard/shard-slots.js';

const NOW = Date.now();
const BATCH = 64;

interface Job {
  index: number;
  size: number;
  ms: number;
  a: { shared: SharedSessionBuffers; snap: ShardSnapshot };
  b: { shared: SharedSessionBuffers; snap: ShardSnapshot };
  epA: Endpoint;
}

const noLink = { handoff: () => false, confirmed: () => {}, roamed: () => {} };

/** Worker side: seal + open for job.ms, returns packets. */
export function benchWorkerMain(): void {
  const job = workerData as Job;
  const backend = withNativeAead(getCryptoBackend('auto')).backend;
  const ea = new ShardEngine(backend, job.a.shared, job.index, noLink);
  const eb = new ShardEngine(backend, job.b.shared, job.index, noLink);
  ea.apply(job.a.snap);
  eb.apply(job.b.snap);
  const slot = 16 + job.size + 32 + 16;
  const buf = new Uint8Array(slot * BATCH);
  const eo = new EncryptResult<ShardPeer>();
  const ro = new ReceiveResult<ShardPeer>();
  const fill = (off: number): void => {
    buf.fill(0, off, off + job.size);
    buf[off] = 0x45;
    buf[off + 2] = job.size >> 8;
    buf[off + 3] = job.size & 0xff;
    buf[off + 8] = 64;
    buf[off + 9] = 17;
    buf.set([10, 1, 0, 1, 10, 2, 0, 1], off + 12);
  };
  let packets = 0;
  let bad = 0;
  const end = Date.now() + job.ms;
  while (Date.now() < end) {
    const now = Date.now();
    for (let i = 0; i < BATCH; i++) {
      const off = i * slot + 16;
      fill(off);
      if (ea.encrypt(buf, off, job.size, now, eo) !== ENCRYPT_SEND) bad++;
      else if (eb.receive(buf, eo.start, eo.length, job.epA, now, false, ro) !== RECEIVE_DELIVER) bad++;
      else packets++;
    }
  }
  parentPort!.postMessage({ packets, bad });
}

function owner(n: number) {
  const backend = getCryptoBackend('auto');
  const sa = new ShardSlots(allocateSharedSessions(n, 4, 8));
  const sb = new ShardSlots(allocateSharedSessions(n, 4, 8));
  const a = new Device({ backend, sessionSlots: sa });
  const b = new Device({ backend, sessionSlots: sb });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const pab = a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  a.addAllowedIp(pab, parsePrefix('10.2.0.0/16'));
  b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
  const epA = { address: '192.0.2.1', port: 51820 };
  const epB = { address: '192.0.2.2', port: 51820 };
  a.setEndpoint(pab, epB);
  b.setEndpoint(pba, epA);
  const out = new OutgoingMessage<Peer>();
  const rr = new ReceiveResult();
  const pump = (from: Device, to: Device, src: Endpoint): void => {
    while (from.popOutgoing(out)) {
      to.receive(out.buf, out.start, out.length, src, NOW, false, rr);
      from.releaseOutgoing(out.slot);
    }
  };
  a.initiateHandshake(pab, NOW);
  pump(a, b, epA);
  pump(b, a, epB);
  pump(a, b, epA);
  // B (responder) confirmed A's session with the keepalive: both sides have shared current keypairs.
  return {
    a: { shared: sa.buffers, snap: a.shardSnapshot(1, (p) => sa.peerSlot(p), NOW) },
    b: { shared: sb.buffers, snap: b.shardSnapshot(1, (p) => sb.peerSlot(p), NOW) },
    epA,
  };
}

async function run(n: number, size: number, ms: number): Promise<{ pps: number; cpuUsPerPacket: number }> {
  const o = owner(n);
  const entry = import.meta.url;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: n }, (_, index) => {
      const job: Job = { index, size, ms, ...o };
      const w = new Worker(`import(${JSON.stringify(entry)}).then((m) => m.benchWorkerMain())`, {
        eval: true,
        workerData: job,
      });
      return new Promise<{ packets: number; bad: number }>((resolve, reject) => {
        w.once('message', (m: { packets: number; bad: number }) => {
          void w.terminate();
          resolve(m);
        });
        w.once('error', reject);
      });
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const packets = results.reduce((s, r) => s + r.packets, 0);
  const bad = results.reduce((s, r) => s + r.bad, 0);
  if (bad > 0) throw new Error(`${bad} packets failed to seal or open`);
  return { pps: packets / secs, cpuUsPerPacket: (cpu.user + cpu.system) / packets };
}

async function main(): Promise<void> {
  const ms = Number(process.argv[2] ?? 3) * 1000;
  const rounds = Number(process.argv[3] ?? 3);
  const counts = (process.env.WEFT_BENCH_WORKERS ?? '1,2').split(',').map(Number);
  console.log(
    `# worker scaling: ${cpus().length} CPUs, load average before ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  for (const size of [64, 1400]) {
    const got = new Map<number, { pps: number[]; cpu: number[] }>();
    for (let r = 0; r < rounds; r++) {
      for (const n of r % 2 === 0 ? counts : [...counts].reverse()) {
        const x = await run(n, size, ms);
        const g = got.get(n) ?? { pps: [], cpu: [] };
        g.pps.push(x.pps);
        g.cpu.push(x.cpuUsPerPacket);
        got.set(n, g);
      }
    }
    const median = (v: number[]): number => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
    const base = median(got.get(counts[0])!.pps);
    for (const n of counts) {
      const g = got.get(n)!;
      const pps = median(g.pps);
      console.log(
        `${size} B, ${n} worker(s): ${(pps / 1e3).toFixed(0)} k round trips/s (seal+open), ` +
          `${(pps / base).toFixed(2)}x of ${counts[0]}, ${median(g.cpu).toFixed(2)} µs CPU/packet ` +
          `(runs: ${g.pps.map((p) => (p / 1e3).toFixed(0)).join(' ')} k)`,
      );
    }
  }
  console.log(
    `# load average after ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) void main();
