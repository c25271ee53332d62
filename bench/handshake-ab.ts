/**
 * Handshakes of this tree against another checkout of Weft (e.g. the tree before a change), in
 * one process: interleaved 50 ms slices with bench/handshake.ts's anchor (node:crypto X25519),
 * 5 rounds, medians; then CPU per handshake of each, process-wide and of the main thread alone
 * (/proc, Linux). Both trees use their 'openssl' backend through their own Device API.
 *
 * Run: git archive <commit> | tar -x -C /tmp/before && (cd /tmp/before && ln -s <this>/node_modules
 *      && npx tsc -p tsconfig.build.json && node native/build.mjs)
 *      node --expose-gc dist/bench/handshake-ab.js /tmp/before [handshakes]
 */
import { diffieHellman, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { slice } from './handshake.js';

interface Tree {
  createOpensslBackend(): unknown;
}
interface Bench {
  makePair(b: unknown): unknown;
  handshake(p: unknown): void;
}

function mainThreadUs(): number {
  const f = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const r = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(r[11]) + Number(r[12])) * 10_000;
}

function median(xs: number[]): number {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

async function pairOf(root: string): Promise<() => void> {
  const { createOpensslBackend } = (await import(`${root}/dist/src/crypto/openssl.js`)) as Tree;
  const w = (await import(`${root}/dist/bench/wireguard.js`)) as Bench;
  const p = w.makePair(createOpensslBackend());
  for (let i = 0; i < 300; i++) w.handshake(p);
  return () => w.handshake(p);
}

const [other, count = '5000'] = process.argv.slice(2);
if (other === undefined) throw new Error('usage: handshake-ab.js <other weft tree> [handshakes]');
const here = fileURLToPath(new URL('../..', import.meta.url));
const a = generateKeyPairSync('x25519');
const b = generateKeyPairSync('x25519');
const tasks: [string, () => void][] = [
  [
    'anchor',
    () => {
      diffieHellman({ privateKey: a.privateKey, publicKey: b.publicKey });
    },
  ],
  ['other', await pairOf(other)],
  ['this', await pairOf(here)],
];
const rates = new Map<string, number[]>();
const ratios = new Map<string, number[]>();
for (let r = 0; r < 5; r++) {
  const calls = new Map<string, number>();
  const ms = new Map<string, number>();
  for (let k = 0; k < 12; k++) {
    for (const [n, fn] of tasks) {
      const [c, t] = slice(fn, 50);
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
for (const [n] of tasks) {
  console.log(
    `${n.padEnd(8)}${median(rates.get(n)!).toFixed(0).padStart(8)}/s ${median(ratios.get(n)!).toFixed(3)} x anchor`,
  );
}
const n = Number(count);
for (let rep = 0; rep < 2; rep++) {
  for (const [name, fn] of tasks.slice(1)) {
    const c0 = process.cpuUsage();
    const m0 = mainThreadUs();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    const d = process.cpuUsage(c0);
    const cpu = (d.user + d.system) / n;
    const main = (mainThreadUs() - m0) / n;
    console.log(
      `${name}: ${n} handshakes, ${((n * 1000) / (performance.now() - t0)).toFixed(0)}/s wall, ` +
        `${cpu.toFixed(1)} us CPU each (${(1e6 / cpu).toFixed(0)}/s per core), main thread ${main.toFixed(1)} us (${(1e6 / main).toFixed(0)}/s)`,
    );
  }
}
