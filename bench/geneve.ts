/**
 * Geneve engine benchmark: encapsulate and decapsulate per second at 64- and 1400-byte inner
 * packets, beside anchors measured in the same run:
 *   - copy:  a plain Uint8Array.set of the same inner packet into another buffer (the cost of
 *            touching the bytes once, which a zero-copy engine should stay near or below);
 *   - naive: an allocate-and-concat encapsulation (new 8-byte header + Buffer.concat) and an
 *            allocate-and-copy decapsulation (Buffer.from(slice)), the obvious way without headroom.
 *
 * Run: npx tsc -p tsconfig.build.json && node dist/bench/geneve.js
 *
 * Each task call processes BATCH packets so tinybench's per-call overhead is amortised;
 * packets/s = BATCH × calls/s. The engine encapsulates in place (headers written into the
 * headroom of the same buffer each time) and decapsulates a pre-built datagram (a view, no
 * copy). L2 rows include the inner Ethernet header and the peer-MAC lookup.
 */

import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { GeneveEngine } from '../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../src/geneve/result.js';
import { GENEVE_HEADER_LEN, GENEVE_PROTO_IPV4, writeGeneveHeader } from '../src/geneve/header.js';
import { GENEVE_MAX_HEADROOM } from '../src/geneve/mtu.js';
import { GeneveTunnelTable } from '../src/geneve/table.js';
import type { GeneveTunnel } from '../src/geneve/tunnel.js';
import { IP_PROTO_UDP, writeIpv4Header } from '../src/packet/ipv4.js';

const BATCH = 256;
let sink = 0;

/** A valid IPv4/UDP packet of `size` bytes at `headroom` in a fresh buffer. */
function innerPacket(size: number, headroom: number): Uint8Array {
  const buf = new Uint8Array(headroom + size);
  writeIpv4Header(
    buf,
    headroom,
    new Uint8Array([10, 0, 0, 1]),
    0,
    new Uint8Array([10, 1, 0, 1]),
    0,
    IP_PROTO_UDP,
    size - 20,
  );
  for (let i = headroom + 20; i < buf.length; i++) buf[i] = i & 0xff;
  return buf;
}

interface Row {
  label: string;
  hz: number;
}

function fmt(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return n.toFixed(0);
}

async function measure(size: number, timeMs: number): Promise<Row[]> {
  const table = new GeneveTunnelTable();
  const l3 = table.add({
    vni: 1,
    remoteUnderlay: '192.0.2.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
  });
  const l2 = table.add({
    vni: 2,
    remoteUnderlay: '192.0.2.3',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.3',
    mode: 'l2',
    remoteMac: '02:00:00:00:00:03',
  });
  const engine = new GeneveEngine(table);
  const res = new GeneveResult();
  const h = GENEVE_MAX_HEADROOM;

  const encBuf = innerPacket(size, h);
  const encL2Buf = innerPacket(size, h);
  // Pre-built datagrams (UDP payloads) for decapsulation, as a socket would hand them over.
  const decL3 = innerPacket(size, h);
  engine.encapsulate(decL3, h, size, l3, 0, res);
  const decL3Off = res.off;
  const decL3Len = res.len;
  const decL2 = innerPacket(size, h);
  engine.encapsulate(decL2, h, size, l2, 0, res);
  const decL2Off = res.off;
  const decL2Len = res.len;
  // Decapsulating an L2 frame for us requires our MAC as destination: flip the built frame around.
  const eth = decL2Off + GENEVE_HEADER_LEN;
  for (let i = 0; i < 6; i++) {
    decL2[eth + i] = l2.localMac[i]!;
    decL2[eth + 6 + i] = l2.remoteMac[i]!;
  }

  const copyDst = new Uint8Array(h + size);
  const src = innerPacket(size, 0);

  const enc = (t: GeneveTunnel, buf: Uint8Array): void => {
    for (let i = 0; i < BATCH; i++) {
      if (engine.encapsulate(buf, h, size, t, i, res) !== GeneveVerdict.Send) throw new Error('encapsulate failed');
      sink ^= res.srcPort;
    }
  };
  const dec = (buf: Uint8Array, off: number, len: number, from: string): void => {
    for (let i = 0; i < BATCH; i++) {
      if (engine.decapsulate(buf, off, len, from, i, res) !== GeneveVerdict.Deliver)
        throw new Error('decapsulate failed');
      sink ^= res.len;
    }
  };

  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs / 2), iterations: 10 });
  bench
    .add('anchor: copy', () => {
      for (let i = 0; i < BATCH; i++) {
        copyDst.set(src, h);
        sink ^= copyDst[h + (i & 15)]!;
      }
    })
    .add('naive encap (alloc+concat)', () => {
      for (let i = 0; i < BATCH; i++) {
        const hdr = new Uint8Array(GENEVE_HEADER_LEN);
        writeGeneveHeader(hdr, 0, 1, GENEVE_PROTO_IPV4, 0, false, false);
        const out = Buffer.concat([hdr, src]);
        sink ^= out.length;
      }
    })
    .add('naive decap (alloc+copy)', () => {
      for (let i = 0; i < BATCH; i++) {
        const out = Buffer.from(decL3.subarray(decL3Off + GENEVE_HEADER_LEN, decL3Off + decL3Len));
        sink ^= out.length;
      }
    })
    .add('encapsulate l3', () => enc(l3, encBuf))
    .add('decapsulate l3', () => dec(decL3, decL3Off, decL3Len, '192.0.2.2'))
    .add('encapsulate l2', () => enc(l2, encL2Buf))
    .add('decapsulate l2', () => dec(decL2, decL2Off, decL2Len, '192.0.2.3'));
  await bench.run();
  return bench.tasks.map((t) => {
    const r = t.result;
    const hz = r !== undefined && 'throughput' in r ? r.throughput.mean : 0;
    return { label: t.name, hz: hz * BATCH };
  });
}

/**
 * Allocation check: count garbage collections (PerformanceObserver 'gc' entries) during `n`
 * route lookups + encapsulations + decapsulations of 1400-byte packets after a warm-up. The
 * young generation is a few MiB, so zero collections over millions of packets means the path
 * allocates nothing per packet.
 */
async function gcDuringPackets(n: number): Promise<number> {
  const table = new GeneveTunnelTable();
  const t = table.add({
    vni: 1,
    remoteUnderlay: '192.0.2.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
  });
  table.addPodRoute('10.1.0.0/16', '10.80.0.2');
  const engine = new GeneveEngine(table);
  const res = new GeneveResult();
  const rx = new GeneveResult();
  const h = GENEVE_MAX_HEADROOM;
  const buf = innerPacket(1400, h);
  const run = (count: number): void => {
    for (let i = 0; i < count; i++) {
      const tunnel = table.lookupSend(buf, h, 1400);
      if (tunnel === undefined || engine.encapsulate(buf, h, 1400, tunnel, i, res) !== GeneveVerdict.Send)
        throw new Error('encapsulate failed');
      if (engine.decapsulate(buf, res.off, res.len, '192.0.2.2', i, rx) !== GeneveVerdict.Deliver)
        throw new Error('decapsulate failed');
    }
  };
  run(200_000);
  await new Promise((r) => setTimeout(r, 50));
  let gcs = 0;
  const obs = new PerformanceObserver((list) => {
    gcs += list.getEntries().length;
  });
  obs.observe({ entryTypes: ['gc'] });
  run(n);
  await new Promise((r) => setTimeout(r, 50)); // let the observer deliver
  obs.disconnect();
  return gcs;
}

/** Run the benchmark and return the printed table (also used by the combined bench runner). */
export async function runGeneveBench(timeMs = 1000): Promise<string> {
  const lines = [
    `geneve engine (packets/s; ratios vs the copy anchor and the naive alloc+concat/copy path, same run; batch ${BATCH})`,
    `${'inner'.padEnd(7)}${'task'.padEnd(30)}${'packets/s'.padStart(12)}${'vs copy'.padStart(10)}${'vs naive'.padStart(10)}`,
  ];
  for (const size of [64, 1400]) {
    const rows = await measure(size, timeMs);
    const get = (l: string): number => rows.find((r) => r.label === l)?.hz ?? 0;
    const copy = get('anchor: copy');
    for (const r of rows) {
      const naive = r.label.startsWith('encap')
        ? get('naive encap (alloc+concat)')
        : r.label.startsWith('decap')
          ? get('naive decap (alloc+copy)')
          : 0;
      lines.push(
        `${`${size} B`.padEnd(7)}${r.label.padEnd(30)}${fmt(r.hz).padStart(12)}${`${(r.hz / copy).toFixed(2)}x`.padStart(10)}${(naive > 0 ? `${(r.hz / naive).toFixed(2)}x` : '').padStart(10)}`,
      );
    }
  }
  const n = 2_000_000;
  lines.push(
    `garbage collections during ${n / 1e6}M lookupSend+encapsulate+decapsulate (1400 B): ${await gcDuringPackets(n)}`,
  );
  lines.push(`(sink ${sink & 1})`);
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runGeneveBench().then(
    (table) => console.log(table),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
