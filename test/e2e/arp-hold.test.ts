/**
 * L2 Geneve (Liqo's default: Ethernet inside Geneve, ARP between gateway and node) loses no
 * packet while a neighbour's MAC is resolved: the engine holds packets to an unresolved peer and
 * sends them once the ARP reply comes (src/geneve/hold.ts). One cluster in namespaces: a gateway
 * and one node agent (child processes from dist/, killed by PID), one pod namespace.
 *
 * Proves: the first pings after start (3 at -i 0.2, pod → gateway internal address and gateway
 * host → pod) are all answered, and the same right after a SIGKILL + restart of the gateway
 * (which forgets every MAC), with the hold queues' counters showing the packets were held.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayStats } from '../../src/gateway/gateway-stats.js';
import type { NodeAgentStats } from '../../src/node/agent.js';
import { e2eUnavailableReason, ping, Topology, waitFor, type Spawned } from '../util/netns.js';
import { buildFabric, GATEWAY_INTERNAL, launchArgv, statsOf, type FabricCluster } from './fabric-topology.js';

const ROOT = resolve(import.meta.dirname, '../..');
const skip = e2eUnavailableReason(['ping'], { nativeAddon: true, built: ['dist/src/daemon/launch.js'] });

/** Rewrite a JSON (= YAML) config file with every Geneve tunnel in L2 mode. */
function toL2(path: string): void {
  const raw = JSON.parse(readFileSync(path, 'utf8')) as {
    geneve?: { tunnels: { mode?: string }[] };
    node?: { gateways: { mode?: string }[] };
  };
  for (const t of raw.geneve?.tunnels ?? []) t.mode = 'l2';
  for (const g of raw.node?.gateways ?? []) g.mode = 'l2';
  writeFileSync(path, JSON.stringify(raw));
}

describe.skipIf(skip !== null)('L2 Geneve: no packet lost while ARP resolves (start and gateway restart)', () => {
  const topo = new Topology('wh');
  let cl: FabricCluster;
  let gw: Spawned;
  let node: Spawned;

  async function startGateway(): Promise<void> {
    gw = topo.spawnIn(cl.gwNs, 'gateway', launchArgv(ROOT, cl.gatewayConfigPath), { lifetimeS: 170 });
    const g = gw;
    await waitFor(
      'gateway ready',
      () =>
        g.output().includes('ready gateway') || (g.child.exitCode !== null && Promise.reject(new Error(g.output()))),
      15_000,
    );
  }

  beforeAll(async () => {
    try {
      [cl] = buildFabric(topo, { clusters: 1, nodesPerCluster: 1 }) as [FabricCluster];
      toL2(cl.gatewayConfigPath);
      toL2(cl.nodeConfigPaths[0]!);
      await startGateway();
      node = topo.spawnIn(cl.nodeNs[0]!, 'node-0', launchArgv(ROOT, cl.nodeConfigPaths[0]!), { lifetimeS: 170 });
      await waitFor(
        'node ready',
        () =>
          node.output().includes('ready node') ||
          (node.child.exitCode !== null && Promise.reject(new Error(node.output()))),
        15_000,
      );
    } catch (e) {
      await topo.cleanup();
      throw e;
    }
  }, 60_000);

  afterAll(async () => {
    await topo.cleanup();
  }, 30_000);

  it('the first 3 pings after start are all answered (pod → gateway, then gateway host → pod)', async () => {
    expect(ping(topo, cl.podNs[0]!, GATEWAY_INTERNAL, 3, 0.2).received).toBe(3);
    expect(ping(topo, cl.gwNs, cl.podAddr[0]!, 3, 0.2).received).toBe(3);
    const n = await statsOf<NodeAgentStats>(node);
    expect(n.geneve.arpHeld).toBeGreaterThan(0);
    expect(n.geneve.arpHeldSent).toBe(n.geneve.arpHeld);
    expect(n.geneve.drops['no_peer_mac'] ?? 0).toBe(0);
    expect(n.geneve.drops['arp_timeout'] ?? 0).toBe(0);
  }, 30_000);

  it('after a gateway SIGKILL and restart, the first 3 pings gateway host → pod are all answered', async () => {
    const kids = execFileSync('pgrep', ['-P', String(gw.pid)], { encoding: 'utf8' })
      .trim()
      .split(/\s+/);
    expect(kids.length).toBe(1);
    process.kill(Number(kids[0]), 'SIGKILL');
    await gw.exited;
    await startGateway();
    // The new gateway knows no MAC: its first packets to the node wait for ARP, none is lost.
    expect(ping(topo, cl.gwNs, cl.podAddr[0]!, 3, 0.2).received).toBe(3);
    expect(ping(topo, cl.podNs[0]!, GATEWAY_INTERNAL, 3, 0.2).received).toBe(3);
    const g = await statsOf<GatewayStats>(gw);
    expect(g.drops['geneve_no_peer_mac'] ?? 0).toBe(0);
    expect(g.drops['geneve_arp_timeout'] ?? 0).toBe(0);
    expect(g.queues['geneve_arp_held']).toBe(0);
  }, 60_000);
});
