// Several WireGuard tunnels per peering (Liqo's spec.endpoint.ports, one tunnel per port, the same
// keys), every Weft component a `weft k8s` process started from deploy/liqo as Kubernetes would
// start it (root); the same topology as liqo-pods.test.ts (namespaces lqmXg / lqmXn / lqmXp), with
// ports [51840, 51841, 51842] on both sides. Proves: three tunnels up on each gateway (weft show
// --json); iperf3 -P 8 pod a → pod b spreads over all three (each tunnel's byte counter grows by
// megabytes); tunnel 1's UDP dropped by nftables in gateway a's namespace: both gateways take it
// out of the spread within the connection check's failure time (5 × 2 s) and the transfer goes on
// over tunnels 0 and 2; unblocked, it answers again and carries its share again.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import { e2eUnavailableReason, iperfTcp, Topology, waitFor } from '../util/netns.js';
import { ensureBuilt } from '../cli/helpers.js';
import { relayIn, showRunDir } from './liqo-processes.js';
import { LiqoPair, POD_IP, POD_IP_REMOTE, peeringKeys, helmClampPeering, type LiqoCluster } from './liqo-topology.js';

const skip = e2eUnavailableReason(['ip', 'ping', 'timeout', 'iperf3', 'ss', 'nft']);
const topo = new Topology('lqm');
const pair = new LiqoPair(topo);
const { status, podNs, diag } = pair;
const WAN = { a: '192.168.77.1', b: '192.168.77.2' } as const;
const PORTS = [51840, 51841, 51842];
/** Liqo's multi-port form on both sides: three tunnels, 51840 (Liqo's default) and the next two; Helm's default MSS clamp. */
const PEERING = helmClampPeering(WAN.a, PORTS);

/**
 * A bounded iperf3 TCP transfer (2 s, `streams` parallel connections) from the pod in nsClient to
 * the pod in nsServer, dialled at its remapped address; Gbit/s received.
 */
const tcpTransfer = (nsServer: string, nsClient: string, streams: number, cport?: number) =>
  iperfTcp(
    topo,
    nsServer,
    nsClient,
    POD_IP,
    2,
    ['-P', String(streams), ...(cport === undefined ? [] : ['--cport', String(cport)])],
    POD_IP_REMOTE,
  );

const show = showRunDir;

/** Gateway `c`'s per-tunnel status towards its peer (weft show --json). */
async function tunnels(c: LiqoCluster): Promise<NonNullable<WeftStatus['wireguard']>['peers'][number]['tunnels']> {
  const st = await show(join(pair.dir, `run-${c.remote}-1`));
  return st.wireguard?.peers[0]?.tunnels;
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/control/k8s/liqo-gateway.js', 'src/control/k8s/watcher.js']);
  pair.dir = mkdtempSync(join(tmpdir(), 'lqm-tunnels-'));
  pair.addNamespaces(WAN, 'm');
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  await pair.stop();
}, 60_000);

describe.skipIf(skip !== null)('Liqo-shaped clusters with three WireGuard tunnels per peering (processes)', () => {
  test('three tunnels up; iperf3 -P 8 spreads over all; a blocked tunnel leaves the spread and returns', async () => {
    const keys = peeringKeys();
    const ca = await pair.startCluster('a', keys, PEERING);
    const cb = await pair.startCluster('b', keys, PEERING);
    for (const c of [ca, cb]) {
      relayIn(topo, topo.ns(`${c.letter}g`), c.sock);
      relayIn(topo, topo.ns(`${c.letter}n`), c.sock);
      pair.startNodeAgent(c);
      pair.startGateway(c);
    }
    try {
      await waitFor(
        'Connected on both sides',
        () => status(ca)?.value === 'Connected' && status(cb)?.value === 'Connected',
        40_000,
      );
      // Gateway a listens on every port; each side has three tunnels, each with a session and in the spread.
      const listening = topo.exec(topo.ns('ag'), ['ss', '-Hlun'], { allowFail: true });
      for (const p of PORTS) expect(listening).toMatch(new RegExp(`:${p}\\b`));
      for (const c of [ca, cb])
        await waitFor(
          `${c.id}: three tunnels in the spread, each checked`,
          async () => {
            const t = await tunnels(c);
            return t?.length === 3 && t.every((x) => x.inSpread && x.connection.value === 'Connected');
          },
          30_000,
        );
      const ta = (await tunnels(ca))!;
      expect(ta.map((t) => [t.interface, t.listenPort, t.localTunnelAddress, t.tunnelAddress])).toEqual([
        ['liqo-tunnel', 51840, '169.254.18.1', '169.254.18.2'],
        ['liqo-tunnel1', 51841, '169.254.18.5', '169.254.18.6'],
        ['liqo-tunnel2', 51842, '169.254.18.9', '169.254.18.10'],
      ]);
      const tb = (await tunnels(cb))!;
      expect(tb.map((t) => t.endpoint)).toEqual(PORTS.map((p) => `${WAN.a}:${p}`));

      // iperf3 -P 8 pod a → pod b: every tunnel carries a share of the data (gateway a sends it).
      const txA = async (): Promise<number[]> => ((await tunnels(ca)) ?? []).map((t) => t.txBytes);
      const deltas = async (f: () => Promise<number>): Promise<{ rate: number; bytes: number[] }> => {
        const before = await txA();
        const rate = await f();
        return { rate, bytes: (await txA()).map((x, i) => x - before[i]!) };
      };
      // Eight flows land on three tunnels by their hash: some client port ranges leave a tunnel
      // without a flow (about one run in nine), so a run is repeated with other ports, at most 4 times.
      const spreadRun = async (label: string): Promise<{ rate: number; bytes: number[] }> => {
        let r = { rate: 0, bytes: [0, 0, 0] };
        for (let attempt = 0; attempt < 4; attempt++) {
          const cport = 20_000 + Math.floor(Math.random() * 30_000);
          r = await deltas(() => tcpTransfer(podNs('b'), podNs('a'), 8, cport));
          console.log(
            `[lqm] ${label} -P 8 (client ports ${cport}..${cport + 7}): ${r.rate.toFixed(2)} Gbit/s; bytes sent per tunnel by a ${r.bytes.join(', ')}`,
          );
          if (r.bytes.every((n) => n > 1_000_000)) break;
        }
        return r;
      };
      const spread = await spreadRun('spread');
      expect(spread.rate).toBeGreaterThan(0);
      for (const n of spread.bytes) expect(n).toBeGreaterThan(1_000_000);

      // Tunnel 1's UDP dropped in gateway a's namespace, both directions.
      const block = [
        'add table inet lqmblock',
        'add chain inet lqmblock in { type filter hook input priority -10; policy accept; }',
        'add chain inet lqmblock out { type filter hook output priority -10; policy accept; }',
        'add rule inet lqmblock in udp dport 51841 drop',
        'add rule inet lqmblock out udp sport 51841 drop',
      ].join('\n');
      topo.exec(topo.ns('ag'), ['nft', '-f', '-'], { input: block });
      const tBlock = Date.now();
      await waitFor(
        'tunnel 1 out of the spread on both sides',
        async () => (await tunnels(ca))?.[1]?.inSpread === false && (await tunnels(cb))?.[1]?.inSpread === false,
        20_000,
        250,
      );
      const outAfter = Date.now() - tBlock;
      console.log(`[lqm] tunnel 1 blocked: out of the spread on both sides after ${outAfter} ms`);
      expect(outAfter).toBeLessThan(14_000); // 5 missed checks at 2 s, plus one status round
      const blocked = await deltas(() => tcpTransfer(podNs('b'), podNs('a'), 8));
      console.log(
        `[lqm] blocked: ${blocked.rate.toFixed(2)} Gbit/s; bytes sent per tunnel by a ${blocked.bytes.join(', ')}`,
      );
      expect(blocked.rate).toBeGreaterThan(0);
      // Only its connection check's PINGs and handshake attempts (a few hundred bytes) still go to tunnel 1.
      expect(blocked.bytes[1]).toBeLessThan(20_000);
      expect(blocked.bytes[0]! + blocked.bytes[2]!).toBeGreaterThan(1_000_000);

      // Unblocked: tunnel 1 answers again and carries again.
      topo.exec(topo.ns('ag'), ['nft', 'delete', 'table', 'inet', 'lqmblock']);
      const tOpen = Date.now();
      await waitFor(
        'tunnel 1 back in the spread on both sides',
        async () => (await tunnels(ca))?.[1]?.inSpread === true && (await tunnels(cb))?.[1]?.inSpread === true,
        30_000,
        250,
      );
      console.log(`[lqm] unblocked: tunnel 1 back in the spread after ${Date.now() - tOpen} ms`);
      const back = await spreadRun('unblocked');
      for (const n of back.bytes) expect(n).toBeGreaterThan(1_000_000);
      // The Connection reports tunnel 0's check, as Liqo's does.
      for (const c of [ca, cb]) expect(status(c)?.value).toBe('Connected');
    } catch (e) {
      console.log(diag());
      throw e;
    }
  }, 240_000);
});
