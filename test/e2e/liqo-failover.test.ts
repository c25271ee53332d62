// Gateway failover between `weft k8s` replicas started from deploy/liqo's templates (root): the
// heartbeat takeover after a SIGKILL (server side, client side), the handover on SIGTERM, a
// partition between the two replicas while both reach the API server, both API servers
// unreachable for 30 s (cluster a's stopped: connections refused; cluster b's hung: requests
// never answered), and restarts of a node agent (the fabric DaemonSet's pod) after SIGKILL and
// SIGTERM. Both clusters run Weft (the gateway against a plain WireGuard peer:
// liqo-failover-wgpeer.test.ts).
//
// Topology (liqo-failover-harness.ts, prefix lf), per cluster X (a: GatewayServer side, b:
// GatewayClient side), built like a cluster's node rather than like one shared pod (so that two
// replicas can be active at once, as in a partition, and the takeover has to move traffic as
// Kubernetes moves it):
//   app pod lfXp 10.0.1.5 ─veth─ node worker-1 lfXn (host network: bridge 10.244.0.1/24, the
//   fabric DaemonSet's node agent, Geneve 6091)
//     ├─ bridge ─ gateway pod lfXg0 10.244.0.10 (replica 0: `weft k8s` from the template)
//     └─ bridge ─ gateway pod lfXg1 10.244.0.11 (replica 1)
//   node lfan 192.168.77.1 ═ WAN ═ 192.168.77.2 node lfbn.
// What Kubernetes and Liqo's controllers do when the active label moves, the harness does,
// polling the API server every 10 ms: the InternalFabric's gatewayIP (the node agents follow it
// with a live Geneve change) and, on the server side, the gateway Service's endpoint
// 192.168.77.1:51840 translated statelessly to the labelled pod; the client side's node
// masquerades its pods' traffic to the WAN. Each replica reaches the API server through a relay
// at 127.0.0.1:6443 in its own namespace, so blocking the heartbeat port between the two gateway
// namespaces leaves both on the API.
// Traffic: pod b pings pod a (10.71.1.5, Liqo's remapping) every 20 ms; a TCP stream (a Node
// client in pod b writing 1 KiB every 10 ms to a server in pod a) runs through the SIGKILL runs.
// Gaps are the longest time between two ping replies (ping -D timestamps).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import { e2eUnavailableReason, sleep, waitFor } from '../util/netns.js';
import { weftPid } from './liqo-processes.js';
import {
  FailoverRig,
  HEARTBEAT_PORT,
  generateKeys,
  longestGap,
  median,
  replyTimes,
  show,
  tcpBytes,
  type Cluster,
  type Letter,
} from './liqo-failover-harness.js';

const skip = e2eUnavailableReason(['ip', 'ping', 'timeout', 'nft']);
const rig = new FailoverRig('lf', 'lf');
/** The template's defaults this test relies on (deploy/liqo, k8s-settings.ts). */
const RENEW_MS = 1000;
/** The heartbeat silence after which a standby takes over (--takeover-window's default). */
const WINDOW_MS = 500;

/** The node namespace's routing state: policy rules, every table's routes, nft tables (sorted lines). */
function kernelState(c: Cluster): string {
  const ns = rig.nodeNs(c.letter);
  return [
    rig.topo.exec(ns, ['ip', '-4', 'rule', 'show']),
    rig.topo.exec(ns, ['ip', '-4', 'route', 'show', 'table', 'all']),
    rig.topo.exec(ns, ['nft', 'list', 'tables']),
  ]
    .join('\n')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .sort()
    .join('\n');
}

/**
 * One node agent restart: pings every 20 ms from cluster `c`'s pod to the remote pod, `signal` to
 * the node agent's weft process, started again as soon as it has exited (the kubelet restarting
 * the DaemonSet's container); waits until pings have flowed for a second after the new start.
 * Returns the longest gap.
 */
async function restartNodeAgent(c: Cluster, signal: 'SIGKILL' | 'SIGTERM', label: string): Promise<number> {
  const pinger = rig.startPinger(c.letter);
  try {
    await waitFor('pings answered before', () => replyTimes(pinger).length >= 20, 10_000, 20);
    const old = c.nodeAgent!;
    const t0 = Date.now();
    process.kill(weftPid(old), signal);
    await old.exited;
    const tExit = Date.now() - t0;
    rig.startNodeAgent(c);
    await waitFor(
      'pings flowing again for a second',
      () => replyTimes(pinger).filter((t) => t > t0 + tExit).length >= 40,
      20_000,
      20,
    );
    await rig.topo.stop(pinger);
    const times = replyTimes(pinger);
    const gap = longestGap(times);
    const firstAfter = times.find((t) => t > t0 + tExit);
    // The new process's own time stamp for its data plane running the kept configuration.
    const warm = /"time":(\d+),[^\n]*forwarding with the last configuration/.exec(c.nodeAgent!.output());
    rig.log(
      `${label}: exited ${tExit} ms after the ${signal}, started again; forwarding from its last configuration at ` +
        `${warm === null ? '?' : Number(warm[1]) - t0} ms, first reply after it at ` +
        `${firstAfter === undefined ? '?' : (firstAfter - t0).toFixed(0)} ms; longest ping gap ${gap.toFixed(0)} ms`,
    );
    return gap;
  } finally {
    await rig.topo.stop(pinger);
  }
}

beforeAll(() => {
  if (skip === null) rig.build();
}, 120_000);

afterAll(() => rig.cleanup(), 60_000);

describe.skipIf(skip !== null)(
  'Liqo gateway failover between templated replicas (processes, one node per cluster)',
  () => {
    test('two replicas per side: one active (label, Service, InternalFabric), one warm standby hearing it', async () => {
      const keys = generateKeys();
      const cs = [await rig.startCluster('a', keys), await rig.startCluster('b', keys)];
      try {
        await rig.startWeftGateways(cs);
        for (const c of cs) {
          const sb = rig.standbyReplica(c);
          const st = await show(sb);
          rig.log(`${c.id} standby: ${JSON.stringify(st?.ha)}`);
          expect(st?.ha?.dropped).toEqual({});
          expect(rig.activeLabel(c, sb.pod)).toBeUndefined();
        }
        await rig.startTraffic();
      } catch (e) {
        console.log(rig.diag());
        throw e;
      }
    }, 150_000);

    for (const side of ['a', 'b'] as const) {
      test(`SIGKILL of the active ${side === 'a' ? 'server' : 'client'}-side gateway, 5 runs: median longest gap < 2 s; the TCP stream survives`, async () => {
        const c = rig.clusters.get(side)!;
        try {
          const gaps = await rig.failovers(c, 'SIGKILL', 5);
          // Target < 2 s on both sides (docs/liqo.md: measured).
          expect(median(gaps)).toBeLessThan(2000);
          for (const out of await rig.tcpStillFlowing()) expect(out).not.toMatch(/error|closed/);
        } catch (e) {
          console.log(rig.diag());
          throw e;
        }
      }, 180_000);
    }

    test('SIGTERM of the active server-side gateway, 3 runs: handed over (the leaving replica forwards until the standby is active); median gap < 0.5 s', async () => {
      const c = rig.clusters.get('a')!;
      try {
        const gaps = await rig.failovers(c, 'SIGTERM', 3);
        // Target < 500 ms: the leaving replica forwards until the standby is labelled, so the gap
        // is the Service and the node agent moving to the new replica (docs/liqo.md: measured).
        expect(median(gaps)).toBeLessThan(500);
        // The leaving replica handed over (it did not set the Connection to Error).
        expect(rig.diag()).toMatch(/handed over to cluster-b-r\d in \d+ ms/);
      } catch (e) {
        console.log(rig.diag());
        throw e;
      }
    }, 120_000);

    test('partition between the two server-side replicas, both on the API server: two actives forward for less than the detection window', async () => {
      const c = rig.clusters.get('a')!;
      const act = rig.activeReplica(c);
      const sb = rig.standbyReplica(c);
      const pinger = rig.startPinger();
      const samples: { t: number; a: WeftStatus | undefined; s: WeftStatus | undefined }[] = [];
      try {
        await waitFor('pings answered before', () => replyTimes(pinger).length >= 20, 10_000, 20);
        // The standby's namespace drops heartbeats both ways; the API relay (loopback) is untouched.
        const t0 = Date.now();
        rig.topo.exec(rig.gwNs(c.letter, sb.slot), ['nft', '-f', '-'], {
          input: `table inet lfpart {
  chain in { type filter hook input priority 0; policy accept; udp dport ${HEARTBEAT_PORT} drop; }
  chain out { type filter hook output priority 0; policy accept; udp dport ${HEARTBEAT_PORT} drop; }
}
`,
        });
        const until = t0 + 4000;
        while (Date.now() < until) {
          const [a, s] = await Promise.all([show(act), show(sb)]);
          samples.push({ t: Date.now() - t0, a, s });
          await sleep(25);
        }
        const out = (st: WeftStatus | undefined) =>
          st?.forwarding === undefined ? undefined : st.forwarding.out.toPeers + st.forwarding.out.toNodes;
        // Both active (the data plane running in both) and both forwarding (counters moving in both).
        let bothActiveMs = 0;
        let bothForwardMs = 0;
        for (let i = 1; i < samples.length; i++) {
          const [p, q] = [samples[i - 1]!, samples[i]!];
          const dt = q.t - p.t;
          if (p.a?.weft.active && p.s?.weft.active && q.a?.weft.active && q.s?.weft.active) bothActiveMs += dt;
          const moved = (x: WeftStatus | undefined, y: WeftStatus | undefined) =>
            out(x) !== undefined && out(y) !== undefined && out(y)! > out(x)!;
          if (moved(p.a, q.a) && moved(p.s, q.s)) bothForwardMs += dt;
        }
        const tookOver = samples.find((x) => x.s?.weft.active)?.t;
        const stoodDown = samples.find((x) => x.t > (tookOver ?? 0) && x.a?.weft.active === false)?.t;
        rig.log(
          `partition: standby active at ${tookOver} ms, old leader stood down at ${stoodDown} ms; ` +
            `both active ${bothActiveMs} ms, both forwarding ${bothForwardMs} ms (bound: detection window ${WINDOW_MS} ms)`,
        );
        for (const x of samples.filter((_, i) => i % 8 === 0))
          rig.log(
            `  t=${x.t} ms  ${act.pod}: active=${x.a?.weft.active} out=${out(x.a)}  ${sb.pod}: active=${x.s?.weft.active} out=${out(x.s)}`,
          );
        expect(tookOver, 'the standby took over while partitioned').toBeDefined();
        expect(stoodDown, 'the old leader stood down').toBeDefined();
        // The old leader reads the Lease every window/5 once its standby has been silent for the
        // window: both forward for less than the window; both run for at most that plus one
        // Lease request and the sampling step.
        expect(bothForwardMs).toBeLessThan(WINDOW_MS);
        expect(bothActiveMs).toBeLessThanOrEqual(WINDOW_MS + 300);
        expect(c.routedTo).toBe(sb.pod);
        // Still partitioned, the old leader does not take the Lease back from a leader it cannot hear.
        await sleep(2000);
        expect((await show(act))?.weft.active).toBe(false);
        expect((await show(sb))?.weft.active).toBe(true);
        await rig.topo.stop(pinger);
        const gap = longestGap(replyTimes(pinger));
        rig.log(`partition: longest ping gap ${gap.toFixed(0)} ms`);
      } catch (e) {
        console.log(rig.diag());
        throw e;
      } finally {
        rig.topo.exec(rig.gwNs(c.letter, sb.slot), ['nft', 'delete', 'table', 'inet', 'lfpart'], { allowFail: true });
        await rig.topo.stop(pinger);
      }
      await rig.waitPaired(c);
    }, 90_000);

    test('both API servers unreachable for 30 s under traffic (a: stopped, connections refused; b: hung, requests unanswered): no gap, no role change, nothing flaps after', async () => {
      const all = [...rig.clusters.values()];
      for (const c of all) await rig.waitPaired(c);
      const before = new Map<Letter, string>();
      for (const c of all) before.set(c.letter, await rig.roles(c));
      const holders = new Map(all.map((c) => [c.letter, rig.leaseHolder(c)]));
      for (const c of all) expect(holders.get(c.letter)).toBe(c.routedTo);
      // Each process's log from here on.
      const mark = new Map([...rig.procs].map(([n, p]) => [n, p.output().length]));
      const pingers = [rig.startPinger('b', 90), rig.startPinger('a', 90)];
      const changes: string[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          for (const c of all) {
            const now = await rig.roles(c);
            if (now !== before.get(c.letter)) changes.push(`${Date.now()} ${c.id}: ${now}`);
          }
          await sleep(100);
        }
      })();
      try {
        await waitFor('pings answered before', () => pingers.every((p) => replyTimes(p).length >= 20), 10_000, 20);
        const bytes0 = tcpBytes(rig.tcpServer!);
        const t0 = Date.now();
        await rig.clusters.get('a')!.server.beginOutage();
        rig.clusters.get('b')!.server.setBlackHole(true);
        await sleep(30_000);
        const bytesDuring = tcpBytes(rig.tcpServer!);
        await rig.clusters.get('a')!.server.endOutage();
        rig.clusters.get('b')!.server.setBlackHole(false);
        const tBack = Date.now() - t0;
        // After it: several retry periods, every replica back on the API.
        await sleep(5000);
        sampling = false;
        await sampler;
        for (const p of pingers) await rig.topo.stop(p);
        const gaps = pingers.map((p) => longestGap(replyTimes(p)));
        rig.log(
          `API outage ${tBack} ms: longest ping gap pod b → pod a ${gaps[0]!.toFixed(0)} ms, pod a → pod b ${gaps[1]!.toFixed(0)} ms; ` +
            `TCP bytes ${bytes0} → ${bytesDuring} (end of outage) → ${tcpBytes(rig.tcpServer!)}`,
        );
        for (const c of all) rig.log(`  ${c.id} after: ${await rig.roles(c)}`);
        const logs = [...rig.procs].map(([n, p]) => [n, p.output().slice(mark.get(n) ?? 0)] as const);
        for (const [n, text] of logs) {
          const lines = text.split('\n').filter((l) => l.trim() !== '');
          rig.log(`  ${n}: ${lines.length} log lines during and after the outage`);
          for (const l of lines.filter((x) => /"level":(40|50)/.test(x)).slice(0, 4)) rig.log(`    ${l.slice(0, 300)}`);
        }
        expect(changes, 'labels, Lease holders and active states unchanged throughout').toEqual([]);
        // Forwarding never stopped: no gap near what a takeover costs (a second or more). Gaps
        // are 75–110 ms with this file alone and reached 225 ms with the other test lane
        // loading the machine (both directions at once: the machine, not the data plane).
        for (const g of gaps) expect(g).toBeLessThan(500);
        expect(bytesDuring).toBeGreaterThan(bytes0 + 100_000);
        expect(rig.tcpClient!.output()).not.toMatch(/error|closed/);
        expect(rig.tcpServer!.output()).not.toMatch(/error|closed/);
        // A role change in any log fails the test. A standby's takeover attempt that the Lease
        // refused (it cannot be written while the API server is down) changes nothing — the
        // Lease decides (lease-decision.ts) — and is reported, not failed: in 2 of 6 full
        // fresh-clone runs a standby saw its active silent for the window during the outage.
        const flap = /data plane stopped|lost the Lease|; standby|leader: starting|takeover from|stopping anyway/;
        const refusedAttempt = /takeover from \S+: the Lease names another replica or was not writable/;
        for (const [n, text] of logs) {
          const hits = text.split('\n').filter((l) => flap.test(l));
          const attempts = hits.filter((l) => refusedAttempt.test(l));
          if (attempts.length > 0) rig.log(`  ${n}: ${attempts.length} takeover attempt(s) refused by the Lease`);
          expect(
            hits.filter((l) => !refusedAttempt.test(l)),
            `${n} logged a role change`,
          ).toEqual([]);
        }
        for (const c of all) {
          // The leader renewed after the outage (it renews first: nothing moved).
          const spec = c.server
            .listObjects('coordination.k8s.io/v1', 'leases')
            .find((x) => x.metadata.namespace === c.ns)!['spec'] as { holderIdentity: string; renewTime: string };
          expect(spec.holderIdentity).toBe(holders.get(c.letter));
          expect(Date.now() - Date.parse(spec.renewTime)).toBeLessThan(3000);
          // One warning from the leader, once its renew deadline passed.
          const act = rig.activeReplica(c);
          const leaderLog = logs.find(([n]) => n === `${act.pod}#${act.proc.pid}`)![1];
          expect(leaderLog.match(/Lease not renewed for/g) ?? []).toHaveLength(1);
        }
        for (const c of all) await rig.waitPaired(c);
      } catch (e) {
        console.log(rig.diag());
        throw e;
      } finally {
        sampling = false;
        await sampler;
        await rig.clusters.get('a')!.server.endOutage();
        rig.clusters.get('b')!.server.setBlackHole(false);
        for (const p of pingers) await rig.topo.stop(p);
      }
    }, 90_000);

    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      test(`node agent restart (${signal}, then started again as the DaemonSet does), 3 runs: that node's pod loses < 1 s (median); tunnels and routes back`, async () => {
        const c = rig.clusters.get('a')!;
        const state = kernelState(c);
        try {
          const gaps: number[] = [];
          for (let i = 1; i <= 3; i++) {
            gaps.push(await restartNodeAgent(c, signal, `${c.id} node agent ${signal} run ${i}`));
            // It forwarded from the configuration its predecessor kept, then took the API server's.
            expect(c.nodeAgent!.output()).toMatch(/forwarding with the last configuration/);
            await waitFor(
              "the restarted node agent on the API server's configuration",
              () => c.nodeAgent!.output().includes('the last configuration converged'),
              20_000,
              50,
            );
            await waitFor(
              'the node agent active with its Geneve tunnel',
              async () => {
                const st = await show({ runDir: rig.nodeRunDir(c) });
                return st?.weft.active === true && st.geneve.tunnels.length === 1;
              },
              15_000,
              50,
            );
            await waitFor('routes, rules and nft tables as before', () => kernelState(c) === state, 15_000, 100);
          }
          rig.log(
            `${c.id} node agent ${signal} gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms; median ${median(gaps).toFixed(0)} ms`,
          );
          expect(median(gaps)).toBeLessThan(1000);
        } catch (e) {
          console.log(rig.diag());
          console.log(`--- kernel state before\n${state}\n--- now\n${kernelState(c)}`);
          throw e;
        }
      }, 90_000);
    }
  },
);
