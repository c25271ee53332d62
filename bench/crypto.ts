/**
 * Crypto backend benchmark: per backend (openssl, node, pure), ChaCha20-Poly1305 seal and open per second at 64 and
 * 1420 bytes, XChaCha20-Poly1305 (cookie-sized), X25519, BLAKE2s hash, keyed-BLAKE2s mac and
 * HMAC-BLAKE2s per second. The anchor, measured in the same run, is a bare node:crypto one-shot
 * createCipheriv('chacha20-poly1305') + update + final + getAuthTag per packet, with no copy into
 * a caller's buffer and no argument checks; it is measured first and again last, and ratios use
 * the mean of the two so that drift (other load on the machine) shows instead of skewing ratios.
 *
 * Run: npx tsc -p tsconfig.build.json && node dist/bench/crypto.js   (or `npm run bench -- crypto`)
 *
 * Each task call performs a batch of operations so that tinybench's per-call overhead is
 * amortised; ops/s = batch × calls/s. Seal runs in place in a packet buffer with 16 bytes of
 * headroom, as the WireGuard engine does; open runs from a fixed sealed packet into a separate
 * buffer (in place it would destroy its own input). The nonce is fixed: its value does not
 * change the cost. Rows also measure the alternatives behind the node backend's choices:
 * node.hash/hmac (OpenSSL) against pure (noble), node.xseal (noble HChaCha20 + OpenSSL AEAD)
 * against pure.xseal (noble), openssl.hash/mac/hmac (EVP through koffi) against both, and node.dh
 * with and without the KeyObject cache.
 */
import { createCipheriv } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import type { CryptoBackend } from '../src/crypto/backend.js';
import { createNodeBackend } from '../src/crypto/node.js';
import { createOpensslBackend } from '../src/crypto/openssl.js';
import { createPureBackend } from '../src/crypto/pure.js';
import { getCryptoBackend } from '../src/crypto/select.js';

/** mulberry32, so runs are reproducible. */
function bytes(seed: number, n: number): Uint8Array {
  let s = seed >>> 0;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) & 0xff;
  }
  return out;
}

const HEADROOM = 16;
const TAG = 16;
/** Sink so the JIT cannot drop work. */
let sink = 0;

interface Row {
  group: string;
  label: string;
  batch: number;
  fn: () => void;
  /** Which anchor the ratio is taken against: the same payload size, or 64 bytes for non-AEAD rows. */
  anchor: 64 | 1420;
  opsPerSec?: number;
}

function anchorTask(size: number): () => void {
  const key = bytes(1, 32);
  const nonce = bytes(2, 12);
  const pt = bytes(3, size);
  return () => {
    const c = createCipheriv('chacha20-poly1305', key, nonce, { authTagLength: TAG });
    const ct = c.update(pt);
    c.final();
    sink ^= ct[0]! ^ c.getAuthTag()[0]!;
  };
}

function aeadRows(b: CryptoBackend, size: number): Row[] {
  const key = bytes(10, 32);
  const nonce = bytes(11, 12);
  const packet = new Uint8Array(HEADROOM + size + TAG + 16);
  packet.set(bytes(12, size), HEADROOM);
  const sealed = new Uint8Array(size + TAG);
  b.seal(key, nonce, null, packet, HEADROOM, size, sealed, 0);
  const plain = new Uint8Array(size);
  const batch = size <= 64 ? 32 : 8;
  return [
    {
      group: `seal ${size} B`,
      label: `${b.name}.seal`,
      batch,
      anchor: size === 64 ? 64 : 1420,
      fn: () => {
        for (let i = 0; i < batch; i++) b.seal(key, nonce, null, packet, HEADROOM, size, packet, HEADROOM);
        sink ^= packet[HEADROOM]!;
      },
    },
    {
      group: `open ${size} B`,
      label: `${b.name}.open`,
      batch,
      anchor: size === 64 ? 64 : 1420,
      fn: () => {
        for (let i = 0; i < batch; i++)
          if (!b.open(key, nonce, null, sealed, 0, size + TAG, plain, 0)) throw new Error('open failed');
        sink ^= plain[0]!;
      },
    },
  ];
}

function otherRows(b: CryptoBackend, tag: string = b.name): Row[] {
  const key = bytes(20, 32);
  const xnonce = bytes(21, 24);
  const cookie = new Uint8Array(16 + TAG); // cookie reply: a 16-byte cookie, mac1 as AD
  const mac1 = bytes(22, 16);
  const priv = b.generatePrivateKey();
  const peerPub = new Uint8Array(32);
  b.publicKey(peerPub, b.generatePrivateKey());
  const shared = new Uint8Array(32);
  const out32 = new Uint8Array(32);
  const out16 = new Uint8Array(16);
  const h = bytes(23, 32);
  const x = bytes(24, 32);
  const msg116 = bytes(25, 116); // mac1 covers the first 116 bytes of a handshake initiation
  return [
    {
      group: 'xseal 16 B (cookie)',
      label: `${tag}.xseal`,
      batch: 16,
      anchor: 64,
      fn: () => {
        for (let i = 0; i < 16; i++) b.xseal(key, xnonce, mac1, cookie, 0, 16, cookie, 0);
        sink ^= cookie[0]!;
      },
    },
    {
      group: 'x25519 dh',
      label: `${tag}.dh`,
      batch: 1,
      anchor: 64,
      fn: () => {
        if (!b.dh(shared, priv, peerPub)) throw new Error('dh failed');
        sink ^= shared[0]!;
      },
    },
    {
      group: 'x25519 public key',
      label: `${tag}.publicKey`,
      batch: 1,
      anchor: 64,
      fn: () => {
        // A fresh key each time (as for a handshake ephemeral), so no cache can help.
        const k = b.generatePrivateKey();
        b.publicKey(out32, k);
        sink ^= out32[0]!;
      },
    },
    {
      group: 'hash 64 B (H := HASH(H ‖ x))',
      label: `${tag}.hash`,
      batch: 32,
      anchor: 64,
      fn: () => {
        for (let i = 0; i < 32; i++) b.hash(h, h, x);
        sink ^= h[0]!;
      },
    },
    {
      group: 'mac 116 B (mac1)',
      label: `${tag}.mac`,
      batch: 32,
      anchor: 64,
      fn: () => {
        for (let i = 0; i < 32; i++) b.mac(out16, key, msg116);
        sink ^= out16[0]!;
      },
    },
    {
      group: 'hmac 32 B (KDF step)',
      label: `${tag}.hmac`,
      batch: 32,
      anchor: 64,
      fn: () => {
        for (let i = 0; i < 32; i++) b.hmac(out32, key, x);
        sink ^= out32[0]!;
      },
    },
  ];
}

function fmt(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return n.toFixed(0);
}

interface Pair {
  ratio: number;
  ops: number;
  anchorOps: number;
}

/** Ops/s of a batch task from tinybench's mean latency. */
function opsOf(bench: Bench, name: string, batch: number, label: string): number {
  const mean = bench.tasks.find((t) => t.name === name)?.result?.latency.mean; // ms per call
  if (mean === undefined || !(mean > 0)) throw new Error(`crypto bench: ${label} produced no result`);
  return (1000 / mean) * batch;
}

/** Measures `row` right after its anchor, so both see the same machine load. */
async function measurePair(anchor: Row, row: Row, timeMs: number): Promise<Pair> {
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(100, timeMs / 2), iterations: 10 });
  bench.add('anchor', anchor.fn);
  bench.add('row', row.fn);
  await bench.run();
  const anchorOps = opsOf(bench, 'anchor', anchor.batch, anchor.group);
  const ops = opsOf(bench, 'row', row.batch, `${row.label} (${row.group})`);
  return { ratio: ops / anchorOps, ops, anchorOps };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function anchorRow(size: 64 | 1420): Row {
  const one = anchorTask(size);
  const batch = size === 64 ? 32 : 8;
  return {
    group: `anchor ${size} B`,
    label: 'node:crypto one-shot',
    batch,
    anchor: size,
    fn: () => {
      for (let i = 0; i < batch; i++) one();
    },
  };
}

/**
 * Run the benchmark and return the printed table (also used by the combined bench runner).
 * `rounds` passes over all rows; each row is measured paired with its anchor in every round and
 * the table shows medians (ops/s, and the ratio of each pair).
 */
export async function runCryptoBench(timeMs = 150, rounds = 3): Promise<string> {
  const node = createNodeBackend();
  const nodeNoCache = createNodeBackend({ keyCache: false });
  const openssl = createOpensslBackend();
  const pure = createPureBackend();

  // Sanity: all backends produce the same packet (a benchmark of a wrong answer is worthless).
  for (const size of [64, 1420]) {
    const ref = new Uint8Array(size + TAG);
    pure.seal(bytes(1, 32), bytes(2, 12), null, bytes(3, size), 0, size, ref, 0);
    for (const b of [node, openssl]) {
      const c = new Uint8Array(size + TAG);
      b.seal(bytes(1, 32), bytes(2, 12), null, bytes(3, size), 0, size, c, 0);
      if (Buffer.compare(ref, c) !== 0)
        throw new Error(`crypto bench: ${b.name} and pure seal disagree at ${size} bytes`);
    }
  }

  const anchors = { 64: anchorRow(64), 1420: anchorRow(1420) } as const;
  const rows: Row[] = [];
  for (const size of [64, 1420]) {
    const o = aeadRows(openssl, size);
    const n = aeadRows(node, size);
    const p = aeadRows(pure, size);
    rows.push(o[0]!, n[0]!, p[0]!, o[1]!, n[1]!, p[1]!);
  }
  // openssl shares X25519 with node (rows 1 and 2 of otherRows); the rest differ.
  const opensslOther = otherRows(openssl);
  const nodeOther = otherRows(node);
  const pureOther = otherRows(pure);
  const noCacheDh = otherRows(nodeNoCache, 'node, no key cache')[1]!;
  for (let i = 0; i < nodeOther.length; i++) {
    if (i !== 1 && i !== 2) rows.push(opensslOther[i]!);
    rows.push(nodeOther[i]!, pureOther[i]!);
    if (i === 1) rows.push(noCacheDh);
  }

  const pairs: Pair[][] = rows.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < rows.length; i++) pairs[i]!.push(await measurePair(anchors[rows[i]!.anchor], rows[i]!, timeMs));
  }

  const lines = [
    `crypto backends (Node ${process.version}, OpenSSL ${process.versions.openssl}, ${rounds} rounds x ${timeMs} ms per task); ` +
      `'auto' picks: ${getCryptoBackend('auto').name}`,
    'each row is measured right after its anchor (a bare node:crypto one-shot chacha20-poly1305 seal of the same size;',
    '64 B for non-AEAD rows); ops/s and x anchor are medians over the rounds',
    `${'operation'.padEnd(30)}${'implementation'.padEnd(26)}${'ops/s'.padStart(11)}${'x anchor'.padStart(10)}`,
  ];
  for (const size of [64, 1420] as const) {
    const all = rows.flatMap((row, i) => (row.anchor === size ? pairs[i]!.map((p) => p.anchorOps) : []));
    lines.push(
      `${`anchor ${size} B`.padEnd(30)}${'node:crypto one-shot'.padEnd(26)}${fmt(median(all)).padStart(11)}` +
        `${'1.000'.padStart(10)}   (range ${fmt(Math.min(...all))} to ${fmt(Math.max(...all))} over ${all.length} runs)`,
    );
  }
  rows.forEach((row, i) => {
    const ps = pairs[i]!;
    lines.push(
      `${row.group.padEnd(30)}${row.label.padEnd(26)}${fmt(median(ps.map((p) => p.ops))).padStart(11)}` +
        `${median(ps.map((p) => p.ratio))
          .toFixed(3)
          .padStart(10)}`,
    );
  });
  lines.push(`(sink ${sink & 1})`);
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runCryptoBench().then(
    (table) => console.log(table),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
