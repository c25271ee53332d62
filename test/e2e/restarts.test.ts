/**
 * Restarts: kill -9 a data plane by its PID, start it again with the same file, and
 * measure how long until pod ⇄ pod traffic flows again in both directions.
 *
 * Two clusters as in fabric-wireguard.test.ts (one node and one pod each, pod CIDR 10.0.0.0/16
 * on both sides, remapped 10.71/16). Killed in turn: gateway A, node agent A, gateway B (A's
 * peer). Nothing a killed process held may block its successor: the TUN device goes with the
 * file descriptor, the UDP ports with the sockets, the routes with the TUN (the successor's start
 * would fail on any of them). Recovery is timed from the SIGKILL to the first moment a ping
 * A → B and a ping B → A both succeed; each figure is printed, and must be under 10 s.
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eUnavailableReason, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';
import { buildFabric, launchArgv, remapped, waitReady, type FabricCluster } from './fabric-topology.js';

const ROOT = resolve(import.meta.dirname, '../..');
const skip = e2eUnavailableReason(['ping', 'pgrep'], { nativeAddon: true, built: ['dist/src/daemon/launch.js'] });

/** The node process a launchArgv spawn runs (timeout → ip netns exec, which execs node). */
function dataPlanePid(p: Spawned): number {
  const kids = execFileSync('pgrep', ['-P', String(p.pid)], { encoding: 'utf8' })
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  if (kids.length !== 1) throw new Error(`expected one child of ${p.pid}, got ${kids.join(',')}`);
  return Number(kids[0]);
}

describe.skipIf(skip !== null)('restarts: kill -9 and start again, traffic back in < 10 s', () => {
  const topo = new Topology('wr');
  let A: FabricCluster;
  let B: FabricCluster;
  const procs = new Map<string, { spawned: Spawned; ns: string; config: string }>();

  async function start(name: string, ns: string, config: string): Promise<void> {
    const spawned = topo.spawnIn(ns, name, launchArgv(ROOT, config), { lifetimeS: 170 });
    procs.set(name, { spawned, ns, config });
    await waitReady(spawned);
  }

  const pingOnce = (ns: string, addr: string): boolean =>
    /1 received/.test(topo.exec(ns, ['ping', '-n', '-c', '1', '-W', '1', addr], { allowFail: true, timeoutMs: 3000 }));
  /**
   * Both pings every time (no short cut): traffic from each side, as Liqo's in-tunnel check sends
   * it every 2 s. A restarted gateway's first packet starts the handshake; the survivor, whose
   * old session the newcomer cannot decrypt, would on its own only rekey after WireGuard's
   * keepalive + rekey timeouts (15 s).
   */
  const bothWays = (): boolean => {
    const ab = pingOnce(A.podNs[0]!, remapped(B.podAddr[0]!));
    const ba = pingOnce(B.podNs[0]!, remapped(A.podAddr[0]!));
    return ab && ba;
  };

  /** SIGKILL `name` by PID, start it again, and return the seconds until traffic flows both ways. */
  async function killAndRecover(name: string): Promise<number> {
    const p = procs.get(name)!;
    const pid = dataPlanePid(p.spawned);
    const t0 = performance.now();
    process.kill(pid, 'SIGKILL');
    await p.spawned.exited;
    await start(name, p.ns, p.config);
    for (;;) {
      if (bothWays()) return (performance.now() - t0) / 1000;
      if (performance.now() - t0 > 30_000)
        throw new Error(`${name}: no traffic 30 s after the kill\n${procs.get(name)!.spawned.output().slice(-2000)}`);
      await sleep(100);
    }
  }

  beforeAll(async () => {
    try {
      [A, B] = buildFabric(topo, { clusters: 2, nodesPerCluster: 1 }) as [FabricCluster, FabricCluster];
      for (const c of [A, B]) {
        await start(`gateway-${c.letter}`, c.gwNs, c.gatewayConfigPath);
        await start(`node-${c.letter}`, c.nodeNs[0]!, c.nodeConfigPaths[0]!);
      }
      await waitFor('pod ⇄ pod before any kill', () => bothWays(), 15_000, 200);
    } catch (e) {
      await topo.cleanup();
      throw e;
    }
  }, 60_000);

  afterAll(async () => {
    await topo.cleanup();
  }, 30_000);

  for (const name of ['gateway-a', 'node-a', 'gateway-b']) {
    it(`${name}: killed with SIGKILL, started again, traffic flows both ways`, async () => {
      const s = await killAndRecover(name);
      console.log(`restart ${name}: traffic both ways ${s.toFixed(2)} s after SIGKILL`);
      expect(s).toBeLessThan(10);
    }, 60_000);
  }
});
