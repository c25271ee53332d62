/**
 * Two builds of the gateway's translation (the router with the NAT configuration's compiled
 * rules, src/rules/nat-router.ts) in ONE process, alternated: the fairest before/after
 * comparison on a noisy machine (both see the same load at the same moments). Each round times
 * 200k stateless remap translations per build (a pristine copy of the packet restored before
 * each, one packet from a node through the router), rounds alternate the order; the first two
 * rounds warm up.
 *
 * Run: node dist/bench/nat-ab.js <other checkout>/dist/src [this checkout's dist/src]
 * Prints ns per translation for each build and the pairwise ratio B/A (median, min, max).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

interface Build {
  nat: typeof import('../src/rules/nat-router.js');
  lanes: typeof import('../src/router/lanes.js');
  udp: typeof import('../src/packet/udp.js');
  addr: typeof import('../src/packet/addr.js');
}

async function load(dir: string): Promise<Build> {
  const u = (p: string) => pathToFileURL(resolve(dir, p)).href;
  return {
    nat: await import(u('rules/nat-router.js')),
    lanes: await import(u('router/lanes.js')),
    udp: await import(u('packet/udp.js')),
    addr: await import(u('packet/addr.js')),
  };
}

function translator(m: Build, size: number): () => void {
  const n = new m.nat.NatRouter<string, string>(
    { localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' },
    { lookupDestination: () => undefined },
  );
  n.addPeer(
    {
      name: 'b',
      remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] },
      remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
    },
    'link',
  );
  const L = new m.lanes.RouterLanes<string, string>(1);
  const offs = Uint32Array.of(0);
  const lens = Uint32Array.of(size);
  const buf = new Uint8Array(size);
  m.udp.writeIpv4UdpHeaders(
    buf,
    0,
    m.addr.parseAddress('10.0.1.11'),
    m.addr.parseAddress('10.71.2.23'),
    1000,
    2000,
    size - 28,
    true,
  );
  const pristine = buf.slice();
  return () => {
    buf.set(pristine);
    n.router.fromNodes(buf, offs, lens, 1, 0, L);
    if (L.toPeers.count !== 1) throw new Error('nat-ab: unexpected drop');
    L.clear();
  };
}

async function main(): Promise<void> {
  const [aDir, bDir = resolve(import.meta.dirname, '../src')] = process.argv.slice(2);
  if (aDir === undefined)
    throw new Error('usage: node dist/bench/nat-ab.js <dist/src of build A> [dist/src of build B]');
  const builds = { A: await load(aDir), B: await load(bDir) };
  for (const size of [92, 1300]) {
    const fns = { A: translator(builds.A, size), B: translator(builds.B, size) };
    const N = 200_000;
    const t: Record<'A' | 'B', number[]> = { A: [], B: [] };
    for (let r = 0; r < 12; r++) {
      for (const k of (r % 2 ? ['A', 'B'] : ['B', 'A']) as ('A' | 'B')[]) {
        const f = fns[k];
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < N; i++) f();
        t[k].push(Number(process.hrtime.bigint() - t0) / N);
      }
    }
    const a = t.A.slice(2);
    const b = t.B.slice(2);
    const med = (x: number[]) => [...x].sort((p, q) => p - q)[x.length >> 1]!;
    const ratios = b.map((v, i) => v / a[i]!).sort((p, q) => p - q);
    console.log(
      `${size} B stateless remap: A ${med(a).toFixed(1)} ns, B ${med(b).toFixed(1)} ns per translation; B/A pairwise median ${med(ratios).toFixed(3)} (min ${ratios[0]!.toFixed(3)}, max ${ratios[ratios.length - 1]!.toFixed(3)})`,
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
