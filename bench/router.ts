/**
 * Router benchmark: what the router costs per packet, and what a stage set at its hook points
 * adds.
 *
 * Anchor, measured in the same run on the same packets: the bare router (no stage at any hook):
 * parse once into the IpView, own-address and tunnel checks, the peer by remapped CIDR (out) or
 * by the decrypting link (in), TTL − 1 with an incremental checksum, the tunnel MTU check and the
 * lane push. `+ 5 hooks` attaches one accept-all stage at each hook point (the per-stage call
 * cost a rule set adds before it matches anything); `+ compiled rules` is the gateway's YAML
 * data path: the NAT configuration's rules (src/rules/nat-router.ts; here the remap of the
 * peer's pod CIDR both ways) — the translation any gateway must do.
 *
 * Packets: 92-byte UDP, pod → a peer's remapped pod and back. Each call handles a batch; the
 * buffer is restored from a pristine copy before each packet on both sides (same copy cost), so
 * every call does the full work.
 *
 * Run: npm run bench -- router
 */
import { Bench } from 'tinybench';
import { GeneveTunnelTable } from '../src/geneve/table.js';
import type { GeneveTunnel } from '../src/geneve/tunnel.js';
import { parseAddress } from '../src/packet/addr.js';
import { writeIpv4UdpHeaders } from '../src/packet/udp.js';
import { HOOK_COUNT, VERDICT_ACCEPT } from '../src/router/hooks.js';
import { RouterLanes } from '../src/router/lanes.js';
import { NatRouter } from '../src/rules/nat-router.js';

const BATCH = 256;
const HEAD = 128;
const LEN = 92;

function packet(src: string, dst: string): Uint8Array {
  const buf = new Uint8Array(HEAD + LEN + 64);
  writeIpv4UdpHeaders(buf, HEAD, parseAddress(src), parseAddress(dst), 1000, 2000, LEN - 28, true);
  return buf;
}

type Stages = 'none' | 'hooks' | 'rules';

function setup(stages: Stages) {
  const table = new GeneveTunnelTable();
  table.add({
    vni: 1,
    remoteUnderlay: '192.168.0.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l3',
    name: 'n1',
  });
  table.addPodRoute('10.0.1.0/24', '10.80.0.2');
  const nat = new NatRouter<object, GeneveTunnel>(
    { localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' },
    table,
  );
  const router = nat.router;
  const link = {};
  nat.addPeer(
    {
      name: 'b',
      remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] },
      remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
    },
    link,
  );
  router.setLocalAddresses(['10.80.0.1']);
  if (stages !== 'rules') nat.rules.detachFrom(router);
  if (stages === 'hooks')
    for (let h = 0; h < HOOK_COUNT; h++) router.attach(h, { name: 'accept', process: () => VERDICT_ACCEPT });
  return { router, link };
}

async function best(fn: () => void, timeMs: number): Promise<number> {
  const b = new Bench({ time: timeMs, warmupTime: 100, iterations: 5 });
  b.add('x', fn);
  await b.run();
  const mean = b.tasks[0]?.result?.latency.mean;
  if (mean === undefined || !(mean > 0)) throw new Error('router bench: no result');
  return (1000 / mean) * BATCH;
}

export async function runRouterBench(timeMs = 600): Promise<string> {
  const out = packet('10.0.1.11', '10.71.2.23');
  const back = packet('10.0.2.23', '10.0.1.11');
  const pristineOut = out.slice();
  const pristineBack = back.slice();
  const offs = Uint32Array.of(HEAD);
  const lens = Uint32Array.of(LEN);
  const rows: string[] = ['| path (92 B UDP) | router Mpps | bare router Mpps | router / bare |', '|---|---|---|---|'];
  const a = setup('none'); // the anchor: no stage at the hooks
  const L = new RouterLanes<object, GeneveTunnel>(1);
  const outOf = (r: ReturnType<typeof setup>) => () => {
    for (let i = 0; i < BATCH; i++) {
      out.set(pristineOut);
      r.router.fromNodes(out, offs, lens, 1, 0, L);
      L.clear();
    }
  };
  const inOf = (r: ReturnType<typeof setup>) => {
    const links = [r.link];
    return () => {
      for (let i = 0; i < BATCH; i++) {
        back.set(pristineBack);
        r.router.fromPeers(back, offs, lens, links, 1, 0, L);
        L.clear();
      }
    };
  };
  for (const stages of ['hooks', 'rules'] as const) {
    const r = setup(stages);
    for (const [label, ours, anchor] of [
      ['node → peer', outOf(r), outOf(a)],
      ['peer → node', inOf(r), inOf(a)],
    ] as const) {
      // Alternate rounds, keep each side's best (a busy machine only ever slows a round down).
      let rb = 0;
      let nb = 0;
      for (let round = 0; round < 3; round++) {
        rb = Math.max(rb, await best(ours, timeMs / 3));
        nb = Math.max(nb, await best(anchor, timeMs / 3));
      }
      if (r.router.drops.some((d) => d !== 0) || a.router.drops.some((d) => d !== 0))
        throw new Error('router bench: unexpected drops');
      rows.push(
        `| ${label} + ${stages === 'hooks' ? '5 hooks' : 'compiled rules'} | ${(rb / 1e6).toFixed(2)} | ${(nb / 1e6).toFixed(2)} | ${(rb / nb).toFixed(2)}x |`,
      );
    }
  }
  return rows.join('\n');
}
