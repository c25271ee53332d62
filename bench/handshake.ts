/**
 * Handshakes per second through the Device API (bench/wireguard.ts's `handshake`: initiation at
 * A, consumption + response at B, consumption of the response + first keepalive at A), one
 * backend at a time, beside a same-run anchor: a bare node:crypto X25519 diffieHellman with both
 * KeyObjects made beforehand (the cheapest DH node:crypto offers). A handshake costs 6 X25519
 * DHs (the static-static DH is precomputed per peer) and 2 public-key derivations; with peer
 * tables 2 of the 6 DHs are fixed-base multiplications, like the public keys. Variants (default set first): 'openssl' (what 'auto' picks: X25519
 * through OpenSSL's ossl_x25519, whole handshake steps in the addon, peer tables),
 * 'openssl-notables' (the same without peer tables), 'openssl-steps' (ossl_x25519
 * with noise.ts's step-by-step code), 'openssl-ladder' (steps, the addon's C ladder: the state
 * before the native handshake steps and peer tables), 'openssl-evpx25519' (steps, EVP_PKEY X25519), 'node';
 * 'openssl+io' is 'openssl' with the daemon's transport AEAD in the I/O addon (the keepalive);
 * also 'openssl-keyobject' (node.ts's KeyObject X25519 and EVP hashing, the path before EVP_PKEY
 * X25519) and 'openssl-evphash' (EVP_PKEY X25519 without the native BLAKE2s addon). Each row names
 * its X25519. `loop` mode prints CPU time per handshake (process.cpuUsage).
 *
 * Run: npm run bench -- handshake
 * Profile: npx tsc -p tsconfig.build.json && node --cpu-prof dist/bench/handshake.js loop openssl 3000
 */
import { diffieHellman, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { CryptoBackend } from '../src/crypto/backend.js';
import { createEvpHashing } from '../src/crypto/evp-hash.js';
import { createNodeBackend } from '../src/crypto/node.js';
import { createOpensslBackend } from '../src/crypto/openssl.js';
import { createPureBackend } from '../src/crypto/pure.js';
import { withNativeAead } from '../src/io/native-aead.js';
import { handshake, makePair } from './wireguard.js';

function backendByName(name: string): CryptoBackend {
  if (name === 'openssl') return createOpensslBackend();
  if (name === 'openssl-evpx25519') return createOpensslBackend({ nativeX25519: false });
  if (name === 'openssl-ladder') return createOpensslBackend({ nativeX25519: 'ladder' });
  if (name === 'openssl-steps') return createOpensslBackend({ nativeNoise: false });
  if (name === 'openssl-notables') {
    // Native steps, but every DH on the ladder: no peer tables.
    const b = createOpensslBackend();
    if (b.noise === undefined) throw new Error('no native handshake steps here');
    return { ...b, noise: { ...b.noise, buildTable: () => false } };
  }
  if (name === 'openssl+io') {
    // As the daemon runs it (src/gateway/wg-daemon.ts): transport AEAD (here the keepalive) in
    // the native I/O addon instead of through koffi.
    const r = withNativeAead(createOpensslBackend());
    if (r.reason !== null) throw new Error(r.reason);
    return r.backend;
  }
  if (name === 'node') return createNodeBackend();
  if (name === 'openssl-evphash' || name === 'openssl-keyobject') {
    // The openssl backend with EVP hashing instead of the native addon (the first handshake speed-up), and
    // also with node's KeyObject X25519 instead of EVP_PKEY (the slowest path).
    const evp = createEvpHashing(() => {
      throw new Error('empty HMAC key');
    });
    if (typeof evp === 'string') throw new Error(evp);
    const b: CryptoBackend = {
      ...createOpensslBackend({ nativeX25519: false }),
      hash: (out, ...parts) => evp.hash(out, parts),
      mac: (out, key, ...parts) => evp.mac(out, key, parts),
      hmac: (out, key, ...parts) => evp.hmac(out, key, parts),
    };
    delete b.kdf;
    if (name === 'openssl-evphash') return b;
    const node = createNodeBackend();
    return { ...b, dh: node.dh, publicKey: node.publicKey };
  }
  if (name === 'pure') return createPureBackend();
  throw new Error(`unknown backend ${name}`);
}

/** The X25519 of a variant, and whether it runs the native steps and peer tables. */
function describe(name: string, backend: CryptoBackend): string {
  const steps =
    backend.noise === undefined
      ? ''
      : name === 'openssl-notables'
        ? '; native handshake steps, no peer tables'
        : '; native handshake steps, peer tables';
  return `${backend.x25519Impl ?? `${backend.name} backend default`}${steps}`;
}

/** Runs `fn` in batches for about `ms` milliseconds; returns [calls, elapsed ms]. */
export function slice(fn: () => void, ms: number): [number, number] {
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    for (let i = 0; i < 8; i++) fn();
    n += 8;
    t = performance.now();
  }
  return [n, t - t0];
}

/**
 * CPU time of the main (JavaScript) thread alone, in us, from /proc (Linux; 10 ms ticks, so
 * only meaningful over seconds): process.cpuUsage() also counts V8's GC and compiler threads.
 */
function mainThreadCpuUs(): number {
  try {
    const f = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
    return (Number(rest[11]) + Number(rest[12])) * 10_000; // utime, stime (fields 14, 15) in 1/100 s
  } catch {
    return Number.NaN;
  }
}

function median(xs: number[]): number {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/**
 * Each round interleaves 50 ms slices of the anchor and of every variant (anchor, a, b, …,
 * anchor, a, b, …) for about `timeMs` per task, so that load from other work on this shared
 * machine hits all of them alike; rates are per round, ratios are within a round, and the
 * table shows medians over rounds.
 */
export async function runHandshakeBench(
  timeMs = 600,
  rounds = 5,
  names = ['openssl', 'openssl+io', 'openssl-notables', 'openssl-steps', 'openssl-ladder', 'openssl-evpx25519', 'node'],
): Promise<string> {
  const a = generateKeyPairSync('x25519');
  const b = generateKeyPairSync('x25519');
  const anchor = (): void => {
    diffieHellman({ privateKey: a.privateKey, publicKey: b.publicKey });
  };
  const tasks: [string, () => void][] = [['anchor', anchor]];
  const impls = new Map<string, string>();
  for (const n of names) {
    const backend = backendByName(n);
    impls.set(n, describe(n, backend));
    const p = makePair(backend);
    for (let i = 0; i < 50; i++) handshake(p); // warm up
    tasks.push([n, () => handshake(p)]);
  }
  const rates = new Map<string, number[]>();
  const ratios = new Map<string, number[]>();
  const SLICE_MS = 50;
  for (let r = 0; r < rounds; r++) {
    const calls = new Map<string, number>();
    const ms = new Map<string, number>();
    for (let k = 0; k < Math.max(1, Math.round(timeMs / SLICE_MS)); k++) {
      for (const [n, fn] of tasks) {
        const [c, t] = slice(fn, SLICE_MS);
        calls.set(n, (calls.get(n) ?? 0) + c);
        ms.set(n, (ms.get(n) ?? 0) + t);
      }
    }
    const rate = (n: string): number => (calls.get(n)! * 1000) / ms.get(n)!;
    for (const [n] of tasks) {
      (rates.get(n) ?? rates.set(n, []).get(n)!).push(rate(n));
      (ratios.get(n) ?? ratios.set(n, []).get(n)!).push(rate(n) / rate('anchor'));
    }
  }
  const anchors = rates.get('anchor')!;
  const lines = [
    `node ${process.version}, OpenSSL ${process.versions.openssl}; ${rounds} rounds of ${timeMs} ms per task in interleaved 50 ms slices; medians`,
    '',
    `${'task'.padEnd(40)}${'ops/s'.padStart(10)}${'x anchor'.padStart(10)}`,
    `${'anchor node:crypto X25519 dh'.padEnd(40)}${median(anchors).toFixed(0).padStart(10)}${'1.000'.padStart(10)}`,
  ];
  for (const n of names) {
    lines.push(
      `${`${n} handshake (Device API)`.padEnd(40)}${median(rates.get(n)!).toFixed(0).padStart(10)}${median(ratios.get(n)!).toFixed(3).padStart(10)}   X25519: ${impls.get(n)}`,
    );
  }
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [mode, name = 'openssl', count = '3000'] = process.argv.slice(2);
  if (mode === 'loop') {
    // For --cpu-prof: a fixed number of handshakes and nothing else.
    // CPU time (user + system of this process) per handshake: the "one core" figure
    // (4,000/s on one core = 250 us of CPU each), less sensitive to other load than wall time.
    const backend = backendByName(name);
    const p = makePair(backend);
    console.log(`${name}: X25519 ${describe(name, backend)}`);
    for (let i = 0; i < 200; i++) handshake(p); // warm up
    const n = Number(count);
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const m0 = mainThreadCpuUs();
    for (let i = 0; i < n; i++) handshake(p);
    const c = process.cpuUsage(c0);
    const main = (mainThreadCpuUs() - m0) / n;
    const wall = performance.now() - t0;
    const cpuUs = (c.user + c.system) / n;
    console.log(
      `${name}: ${n} handshakes, ${((n * 1000) / wall).toFixed(0)}/s wall, ${cpuUs.toFixed(1)} us CPU each` +
        ` (${(1e6 / cpuUs).toFixed(0)}/s per core; main thread alone ${main.toFixed(1)} us, ${(1e6 / main).toFixed(0)}/s)`,
    );
  } else {
    runHandshakeBench(600, 5, mode === undefined ? undefined : [mode]).then(
      (t) => console.log(t),
      (e) => {
        console.error(e);
        process.exitCode = 1;
      },
    );
  }
}
