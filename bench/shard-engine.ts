/**
 * What a worker's engine costs per packet against the one-thread Device, on one thread (no
 * other thread touches the shared words, no I/O): device A → device B, each packet sealed by
 * A's encrypt and opened by B's receive, 64 a batch, for
 *
 *   device  two Devices without shared session slots (weft-wg with WEFT_WORKERS unset);
 *   shard   two ShardEngines on the snapshots of Devices with shared slots (a worker's engine:
 *           shared send counter, shared replay window, activity rows, shared endpoint and
 *           confirmed-session words).
 *
 * Runs alternate the two (the order flips every round); reported per size: this thread's CPU
 * time per packet (/proc/thread-self/schedstat), median and minimum over the rounds, and the
 * ratio shard / device. The difference is the per-packet cost of sharing a session between
 * threads when one thread uses it (the single-flow case of a multi-threaded weft-wg).
 *
 * Run: npm run --silent build && node --interrupt-budget=1024 dist/bench/shard-engine.js [ms-per-run=300] [rounds=12]
 *   WEFT_BENCH_SIZES=64,1400   (the flag is what weft-wg sets, src/cli/v8-tiering.ts)
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { getCryptoBackend } from '../src/crypto/select.js';
import { withNativeAead } from '../src/io/native-aead.js';
import { parsePrefix } from '../src/packet/addr.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../src/wireguard/device.js';
import type { Endpoint } from '../src/wireguard/peer.js';
import { handshakeInMemory } from '../src/wireguard/memory-handshake.js';
import { allocateSharedSessions } from '../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../src/wireguard/shard.js';
import { ShardSlots } from '../src/wireguard/shard-slots.js';
import { udpHeader } from './workers-path.js';

const BATCH = 64;
const backend = withNativeAead(getCryptoBackend('auto')).backend;
const noLink = { handoff: () => false, underLoad: () => false, confirmed: () => {}, roamed: () => {} };

interface Engine {
  encrypt(buf: Uint8Array, off: number, len: number, now: number, out: EncryptResult<never>): number;
  receive(
    buf: Uint8Array,
    off: number,
    len: number,
    from: Endpoint,
    now: number,
    underLoad: boolean,
    out: ReceiveResult<never>,
  ): number;
}

/** A and B handshaken (with shared slots when `shard`); the engines that carry A → B. */
function pair(shard: boolean, now: number): { a: Engine; b: Engine; epA: Endpoint } {
  const sa = shard ? new ShardSlots(allocateSharedSessions(1, 4, 8)) : null;
  const sb = shard ? new ShardSlots(allocateSharedSessions(1, 4, 8)) : null;
  const a = new Device(sa === null ? { backend } : { backend, sessionSlots: sa });
  const b = new Device(sb === null ? { backend } : { backend, sessionSlots: sb });
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
  handshakeInMemory(a, pab, b, epA, epB, now);
  if (sa === null || sb === null) return { a: a as Engine, b: b as Engine, epA };
  const ea = new ShardEngine(backend, sa.buffers, 0, noLink);
  const eb = new ShardEngine(backend, sb.buffers, 0, noLink);
  ea.apply(a.shardSnapshot(1, (p) => sa.peerSlot(p), now));
  eb.apply(b.shardSnapshot(1, (p) => sb.peerSlot(p), now));
  return { a: ea as Engine, b: eb as Engine, epA };
}

/** One batch A → B; throws on anything but seal-and-deliver. */
function stepper(e: { a: Engine; b: Engine; epA: Endpoint }, size: number): () => number {
  const slot = 16 + size + 48;
  const buf = new Uint8Array(slot * BATCH);
  const eo = new EncryptResult<never>();
  const ro = new ReceiveResult<never>();
  const hdr = udpHeader(size, [10, 1, 0, 1], [10, 2, 0, 1]);
  return () => {
    const now = Date.now();
    for (let i = 0; i < BATCH; i++) {
      const off = i * slot + 16;
      buf.set(hdr, off);
      if (e.a.encrypt(buf, off, size, now, eo) !== ENCRYPT_SEND) throw new Error(`encrypt: reason ${eo.reason}`);
      if (e.b.receive(buf, eo.start, eo.length, e.epA, now, false, ro) !== RECEIVE_DELIVER)
        throw new Error(`receive: reason ${ro.reason}`);
    }
    return BATCH;
  };
}

function cpuNs(): number {
  return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ', 1)[0]);
}

function main(): void {
  const ms = Number(process.argv[2] ?? 300);
  const rounds = Number(process.argv[3] ?? 12);
  const sizes = (process.env.WEFT_BENCH_SIZES ?? '64,1400').split(',').map(Number);
  const median = (v: number[]): number => [...v].sort((x, y) => x - y)[v.length >> 1];
  console.log(
    `# Device vs ShardEngine, one thread, ${ms} ms per run, ${rounds} rounds; load ${loadavg()[0].toFixed(2)}`,
  );
  for (const size of sizes) {
    const now = Date.now();
    const kinds = { device: stepper(pair(false, now), size), shard: stepper(pair(true, now), size) };
    const got: Record<keyof typeof kinds, number[]> = { device: [], shard: [] };
    for (const k of ['device', 'shard'] as const) for (const end = Date.now() + 300; Date.now() < end;) kinds[k]();
    for (let r = 0; r < rounds; r++) {
      for (const k of r % 2 === 0 ? (['device', 'shard'] as const) : (['shard', 'device'] as const)) {
        let n = 0;
        const c0 = cpuNs();
        for (const end = Date.now() + ms; Date.now() < end;) n += kinds[k]();
        got[k].push((cpuNs() - c0) / n);
      }
    }
    const d = median(got.device);
    const s = median(got.shard);
    console.log(
      `${size} B: device ${d.toFixed(0)} ns/packet (min ${Math.min(...got.device).toFixed(0)}), ` +
        `shard ${s.toFixed(0)} ns/packet (min ${Math.min(...got.shard).toFixed(0)}), shard/device ${(s / d).toFixed(3)}`,
    );
  }
  console.log(`# load average after ${loadavg()[0].toFixed(2)}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main();
