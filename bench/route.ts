/**
 * Route lookup benchmark: PrefixTable.lookup vs a naive linear scan, in the same run, at 10,
 * 10k and 100k IPv4 prefixes and 10k IPv6 prefixes.
 *
 * Run: npx tsc -p tsconfig.build.json && node dist/bench/route.js
 *
 * Each task call performs a batch of lookups over pre-generated destination addresses stored
 * back to back in one buffer (as they would be in packets), so tinybench's per-call overhead is
 * amortised; lookups/s = batch × calls/s. Prefix lengths follow a routing-table-like mix (mostly
 * /16–/24, some short and host routes); half the probes fall inside a stored prefix.
 */

import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { PrefixTable } from '../src/route/table.js';

/** mulberry32, so runs are reproducible. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

interface Prefixes {
  addrs: Uint8Array[];
  lens: number[];
}

function v4Len(r: () => number): number {
  const x = (r() % 1000) / 1000;
  if (x < 0.55) return 24;
  if (x < 0.7) return 22 + (r() % 2);
  if (x < 0.85) return 16 + (r() % 6);
  if (x < 0.93) return 8 + (r() % 8);
  return 25 + (r() % 8);
}

function v6Len(r: () => number): number {
  const x = (r() % 1000) / 1000;
  if (x < 0.5) return 48;
  if (x < 0.75) return 32 + (r() % 16);
  if (x < 0.9) return 49 + (r() % 16);
  if (x < 0.95) return 64;
  return 128;
}

function makePrefixes(family: 4 | 6, n: number, seed: number): Prefixes {
  const r = rng(seed);
  const bytes = family === 4 ? 4 : 16;
  const addrs: Uint8Array[] = [];
  const lens: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = new Uint8Array(bytes);
    for (let j = 0; j < bytes; j++) a[j] = r() & 0xff;
    if (family === 6) a[0] = 0x20 | (a[0]! & 0x0f); // 2000::/4 like global unicast
    const len = family === 4 ? v4Len(r) : v6Len(r);
    for (let j = 0; j < bytes; j++) {
      const b = len - j * 8;
      if (b < 8) a[j] = b <= 0 ? 0 : a[j]! & (0xff00 >>> b);
    }
    addrs.push(a);
    lens.push(len);
  }
  return { addrs, lens };
}

/** `count` destination addresses back to back; half inside a random stored prefix. */
function makeProbes(p: Prefixes, bytes: number, count: number, seed: number): Uint8Array {
  const r = rng(seed);
  const out = new Uint8Array(count * bytes);
  for (let i = 0; i < count; i++) {
    const o = i * bytes;
    for (let j = 0; j < bytes; j++) out[o + j] = r() & 0xff;
    if (r() & 1) {
      const k = r() % p.addrs.length;
      const a = p.addrs[k]!;
      const len = p.lens[k]!;
      for (let j = 0; j < bytes; j++) {
        const b = len - j * 8;
        if (b >= 8) out[o + j] = a[j]!;
        else if (b > 0) out[o + j] = (a[j]! & (0xff00 >>> b)) | (out[o + j]! & (0xff >>> b));
      }
    }
  }
  return out;
}

/** The naive reference: a linear scan keeping the longest match (typed arrays, no allocation). */
class LinearTable {
  private readonly nets: Uint8Array;
  private readonly lens: Int32Array;
  private readonly values: Int32Array;
  private readonly bytes: number;
  constructor(p: Prefixes, bytes: number) {
    this.bytes = bytes;
    const n = p.addrs.length;
    this.nets = new Uint8Array(n * bytes);
    this.lens = new Int32Array(n);
    this.values = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      this.nets.set(p.addrs[i]!, i * bytes);
      this.lens[i] = p.lens[i]!;
      this.values[i] = i + 1;
    }
  }
  lookup(buf: Uint8Array, off: number): number {
    let bestLen = -1;
    let best = 0;
    const { nets, lens, bytes } = this;
    for (let i = 0; i < lens.length; i++) {
      const len = lens[i]!;
      if (len <= bestLen) continue;
      const base = i * bytes;
      let ok = true;
      const full = len >>> 3;
      for (let j = 0; j < full; j++) {
        if (buf[off + j] !== nets[base + j]) {
          ok = false;
          break;
        }
      }
      if (ok && (len & 7) !== 0) ok = (buf[off + full]! & (0xff00 >>> (len & 7)) & 0xff) === nets[base + full];
      if (ok) {
        bestLen = len;
        best = this.values[i]!;
      }
    }
    return best;
  }
}

interface Row {
  label: string;
  trie: number;
  naive: number;
  nodes: number;
  mb: number;
}

/** Sink so the JIT cannot drop the lookups. */
let sink = 0;

async function measure(family: 4 | 6, size: number, timeMs: number): Promise<Row> {
  const bytes = family === 4 ? 4 : 16;
  const p = makePrefixes(family, size, 0x5eed + size + family);
  const table = new PrefixTable<number>(family);
  for (let i = 0; i < size; i++) table.insert(p.addrs[i]!, p.lens[i]!, i + 1);
  const linear = new LinearTable(p, bytes);
  const probeCount = 4096;
  const probes = makeProbes(p, bytes, probeCount, 0xabc + size);
  // Sanity: both implementations agree on every probe (a benchmark of a wrong answer is worthless).
  for (let i = 0; i < probeCount; i++) {
    const a = table.lookup(probes, i * bytes) ?? 0;
    const b = linear.lookup(probes, i * bytes);
    // Duplicate random prefixes: the table keeps the last inserted value, the scan the first.
    if (a !== b && !(a !== 0 && b !== 0 && p.lens[a - 1] === p.lens[b - 1])) {
      throw new Error(`route bench: trie and linear scan disagree at probe ${i} (${a} vs ${b})`);
    }
  }
  const trieBatch = probeCount;
  // Keep a naive call around 1-5 ms at most: fewer lookups per call for bigger tables.
  const naiveBatch = Math.max(1, Math.min(probeCount, Math.floor(2_000_000 / (size * (family === 4 ? 1 : 2)))));
  let pos = 0;
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs / 2), iterations: 10 });
  bench.add('trie', () => {
    let s = 0;
    for (let i = 0; i < trieBatch; i++) s += table.lookup(probes, i * bytes) ?? 0;
    sink ^= s;
  });
  bench.add('naive', () => {
    let s = 0;
    for (let i = 0; i < naiveBatch; i++) {
      s += linear.lookup(probes, pos * bytes);
      pos = pos + 1 === probeCount ? 0 : pos + 1;
    }
    sink ^= s;
  });
  await bench.run();
  const hz = (name: string): number => {
    const t = bench.tasks.find((x) => x.name === name);
    const mean = t?.result?.latency.mean; // ms per call
    if (mean === undefined || !(mean > 0)) throw new Error(`route bench: task ${name} produced no result`);
    return 1000 / mean;
  };
  return {
    label: `IPv${family} ${size}`,
    trie: hz('trie') * trieBatch,
    naive: hz('naive') * naiveBatch,
    nodes: table.nodeUsage,
    mb: table.memoryBytes / 1e6,
  };
}

function fmt(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return n.toFixed(0);
}

/** Run the benchmark and return the printed table (also used by the combined bench runner). */
export async function runRouteBench(timeMs = 1000): Promise<string> {
  const rows: Row[] = [];
  for (const [family, size] of [
    [4, 10],
    [4, 10_000],
    [4, 100_000],
    [6, 10_000],
  ] as const) {
    rows.push(await measure(family, size, timeMs));
  }
  const lines = [
    'route lookup (PrefixTable multibit trie vs linear scan, same run)',
    `${'table'.padEnd(14)}${'trie lookups/s'.padStart(16)}${'naive lookups/s'.padStart(17)}${'trie/naive'.padStart(12)}${'trie nodes'.padStart(12)}${'trie MB'.padStart(9)}`,
  ];
  for (const r of rows) {
    lines.push(
      `${r.label.padEnd(14)}${fmt(r.trie).padStart(16)}${fmt(r.naive).padStart(17)}${`${(r.trie / r.naive).toFixed(1)}x`.padStart(12)}${String(r.nodes).padStart(12)}${r.mb.toFixed(1).padStart(9)}`,
    );
  }
  lines.push(`(sink ${sink & 1})`);
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runRouteBench().then(
    (table) => console.log(table),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
