/**
 * WireGuard engine benchmark, through the Device API only (what the daemon calls):
 *  - handshakes/s: initiation (A) → receive + response (B) → receive of the response + keepalive (A),
 *    i.e. 4 X25519 on each side plus all hashing, macs and index bookkeeping;
 *  - transport round trips/s at 64- and 1420-byte IP packets: A.encrypt (in place) then
 *    B.receive (decrypt in place, replay window, allowed-IPs check) on the same buffer.
 * for each crypto backend, beside an anchor measured in the same run: a bare node:crypto
 * ChaCha20-Poly1305 one-shot seal + open of the same packet size (createCipheriv/createDecipheriv
 * per packet, no engine). Ratios are engine rate / anchor rate at the same size.
 * Also reported: heap bytes allocated per transport round trip (approximate, from heapUsed
 * deltas over a long loop with GC between runs when --expose-gc is given).
 *
 * Run: npx tsc -p tsconfig.build.json && node --expose-gc dist/bench/wireguard.js
 *      (or `npm run bench -- wireguard`)
 */
import { createCipheriv, createDecipheriv } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import type { CryptoBackend } from '../src/crypto/backend.js';
import { createNodeBackend } from '../src/crypto/node.js';
import { createOpensslBackend } from '../src/crypto/openssl.js';
import { createPureBackend } from '../src/crypto/pure.js';
import { parsePrefix } from '../src/packet/addr.js';
import { REKEY_TIMEOUT } from '../src/wireguard/constants.js';
import {
  Device,
  ENCRYPT_SEND,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_HANDSHAKE,
  ReceiveResult,
} from '../src/wireguard/device.js';
import type { Peer } from '../src/wireguard/peer.js';
import { OutgoingMessage } from '../src/wireguard/pool.js';

const EP_A = { address: '192.0.2.1', port: 51820 };
const EP_B = { address: '192.0.2.2', port: 51820 };
const SIZES = [64, 1420];
const BATCH = 64;

export interface Pair {
  a: Device;
  b: Device;
  peerAB: Peer;
  now: number;
}

export function makePair(backend: CryptoBackend): Pair {
  const a = new Device({ backend, random: () => 0.5 });
  const b = new Device({ backend, random: () => 0.5 });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const peerAB = a.addPeer(b.publicKey!);
  const peerBA = b.addPeer(a.publicKey!);
  a.addAllowedIp(peerAB, parsePrefix('10.2.0.0/16'));
  b.addAllowedIp(peerBA, parsePrefix('10.1.0.0/16'));
  a.setEndpoint(peerAB, EP_B);
  b.setEndpoint(peerBA, EP_A);
  return { a, b, peerAB, now: 1_700_000_000_000 };
}

const out = new OutgoingMessage<Peer>();
const rr = new ReceiveResult();

/** Moves every queued message of `from` into `to`. Returns how many were handshakes consumed. */
function pump(from: Device, to: Device, source: { address: string; port: number }, now: number): number {
  let hs = 0;
  while (from.popOutgoing(out)) {
    if (to.receive(out.buf, out.start, out.length, source, now, false, rr) === RECEIVE_HANDSHAKE) hs++;
    from.releaseOutgoing(out.slot);
  }
  return hs;
}

/** One complete handshake A→B→A. Time moves by Rekey-Timeout so pacing, flood and TAI64N allow it. */
export function handshake(p: Pair): void {
  p.now += REKEY_TIMEOUT + 1;
  p.a.initiateHandshake(p.peerAB, p.now);
  if (pump(p.a, p.b, EP_A, p.now) !== 1) throw new Error('initiation not consumed');
  if (pump(p.b, p.a, EP_B, p.now) !== 1) throw new Error('response not consumed');
  pump(p.a, p.b, EP_A, p.now); // the keepalive confirming the session
}

function ipv4(len: number): Uint8Array {
  const buf = new Uint8Array(16 + len + 32);
  const o = 16;
  buf[o] = 0x45;
  buf[o + 2] = len >> 8;
  buf[o + 3] = len & 0xff;
  buf[o + 9] = 17;
  buf.set([10, 1, 0, 1], o + 12);
  buf.set([10, 2, 0, 1], o + 16);
  for (let i = 20; i < len; i++) buf[o + i] = i & 0xff;
  return buf;
}

const er = new EncryptResult();

/** One transport round trip: encrypt in place at A, decrypt in place at B (restores the packet). */
function roundTrip(p: Pair, buf: Uint8Array, len: number): void {
  if (p.a.encrypt(buf, 16, len, p.now, er) !== ENCRYPT_SEND) throw new Error(`encrypt failed (reason ${er.reason})`);
  if (p.b.receive(buf, er.start, er.length, EP_A, p.now, false, rr) !== RECEIVE_DELIVER)
    throw new Error(`receive failed (reason ${rr.reason})`);
}

function anchorRoundTrip(key: Uint8Array, nonce: Uint8Array, pkt: Uint8Array): void {
  const c = createCipheriv('chacha20-poly1305', key, nonce, { authTagLength: 16 });
  const ct = c.update(pkt);
  c.final();
  const tag = c.getAuthTag();
  const d = createDecipheriv('chacha20-poly1305', key, nonce, { authTagLength: 16 });
  d.setAuthTag(tag);
  d.update(ct);
  d.final();
}

function gcIfExposed(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) g();
}

/** Approximate heap bytes allocated per round trip (engine + backend). */
function bytesPerRoundTrip(p: Pair, len: number): number {
  const buf = ipv4(len);
  for (let i = 0; i < 20_000; i++) roundTrip(p, buf, len); // warm up (JIT, pools)
  const n = 200_000;
  gcIfExposed();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < n; i++) roundTrip(p, buf, len);
  const after = process.memoryUsage().heapUsed;
  return Math.max(0, (after - before) / n);
}

/** Median of a non-empty list. */
function median(xs: number[]): number {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/**
 * Run the benchmark and return the printed table (also used by the combined bench runner).
 * The machine is small and shared, so each round measures the anchor and every task close
 * together in time; ratios are taken within a round and the table shows medians over rounds.
 */
export async function runWireguardBench(timeMs = 250, rounds = 5): Promise<string> {
  const backends: [string, CryptoBackend][] = [
    ['openssl', createOpensslBackend()],
    ['node', createNodeBackend()],
    ['pure', createPureBackend()],
  ];
  const key = new Uint8Array(32).fill(7);
  const nonce = new Uint8Array(12);
  const anchorPkts = new Map(SIZES.map((s) => [s, new Uint8Array(s).fill(3)]));
  const pairs = new Map<string, Pair>();
  const hsPairs = new Map<string, Pair>();
  for (const [name, backend] of backends) {
    hsPairs.set(name, makePair(backend));
    const tp = makePair(backend);
    handshake(tp);
    pairs.set(name, tp);
  }
  const rates = new Map<string, number[]>();
  const ratios = new Map<string, number[]>();
  const push = (m: Map<string, number[]>, k: string, v: number): void => {
    (m.get(k) ?? m.set(k, []).get(k)!).push(v);
  };
  for (let round = 0; round < rounds; round++) {
    const bench = new Bench({ time: timeMs, warmupTime: Math.min(100, timeMs / 2) });
    for (const size of SIZES) {
      const pkt = anchorPkts.get(size)!;
      bench.add(`anchor ${size}`, () => {
        for (let i = 0; i < BATCH; i++) anchorRoundTrip(key, nonce, pkt);
      });
    }
    for (const [name] of backends) {
      const hp = hsPairs.get(name)!;
      bench.add(`${name} handshake`, () => handshake(hp));
      const tp = pairs.get(name)!;
      for (const size of SIZES) {
        const buf = ipv4(size);
        bench.add(`${name} transport ${size}`, () => {
          for (let i = 0; i < BATCH; i++) roundTrip(tp, buf, size);
        });
      }
    }
    await bench.run();
    const rate = (task: string, batch: number): number => {
      const t = bench.tasks.find((x) => x.name === task);
      const mean = t?.result?.latency.mean; // ms per call
      if (mean === undefined || mean <= 0) throw new Error(`no result for ${task}`);
      return (1000 / mean) * batch;
    };
    for (const size of SIZES) push(rates, `anchor ${size}`, rate(`anchor ${size}`, BATCH));
    for (const [name] of backends) {
      push(rates, `${name} handshake`, rate(`${name} handshake`, 1));
      for (const size of SIZES) {
        const r = rate(`${name} transport ${size}`, BATCH);
        push(rates, `${name} transport ${size}`, r);
        push(ratios, `${name} transport ${size}`, r / rate(`anchor ${size}`, BATCH));
      }
    }
  }
  const lines: string[] = [];
  lines.push(`node ${process.version}; ${BATCH} packets per call; ${rounds} rounds of ${timeMs} ms per task; medians`);
  lines.push('');
  lines.push(`${'task'.padEnd(26)}${'ops/s'.padStart(14)}${'vs anchor'.padStart(12)}${'heap B/op'.padStart(12)}`);
  for (const size of SIZES) {
    lines.push(
      `${`anchor seal+open ${size}`.padEnd(26)}${fmt(median(rates.get(`anchor ${size}`)!)).padStart(14)}${'1.00'.padStart(12)}${''.padStart(12)}`,
    );
  }
  for (const [name] of backends) {
    lines.push(
      `${`${name} handshake`.padEnd(26)}${fmt(median(rates.get(`${name} handshake`)!)).padStart(14)}${''.padStart(12)}${''.padStart(12)}`,
    );
    for (const size of SIZES) {
      const k = `${name} transport ${size}`;
      const heap = bytesPerRoundTrip(pairs.get(name)!, size);
      lines.push(
        `${k.padEnd(26)}${fmt(median(rates.get(k)!)).padStart(14)}${median(ratios.get(k)!).toFixed(2).padStart(12)}${heap.toFixed(0).padStart(12)}`,
      );
    }
  }
  lines.push('');
  lines.push('transport = one encrypt (A) + one receive (B) through the Device API; anchor = one node:crypto');
  lines.push('createCipheriv + createDecipheriv one-shot pair of the same size; handshake = initiation +');
  lines.push('response + response consumption + keepalive. heap B/op: heapUsed growth per round trip.');
  return lines.join('\n');
}

function fmt(x: number): string {
  return x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)}k` : x.toFixed(0);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runWireguardBench().then(
    (table) => console.log(table),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
