/**
 * Two peers whose REAL pod CIDRs are the same, on one gateway, end to end in namespaces.
 *
 * Three clusters, all on pod CIDR 10.0.0.0/16. Gateway A peers with B and with C (two WAN
 * veths); A addresses B's pods as 10.71.0.0/16 and C's as 10.73.0.0/16 (external CIDRs
 * 10.72/16 and 10.74/16). B and C each peer only with A and address A's pods as 10.71.0.0/16.
 * B's pod and C's pod have the same address, 10.0.1.2, as has A's pod.
 *
 * What only works when the peer travels with each packet: A sends 10.71.1.2 to B and 10.73.1.2
 * to C although both are 10.0.1.2 once translated (the router names the peer, not allowed IPs);
 * A tells B's 10.0.1.2 from C's 10.0.1.2 on the way in (the peer that decrypted the packet
 * picks the remap, so A's pod sees 10.71.1.2 and 10.73.1.2). Each gateway is a child process
 * started from dist/ inside its namespace, with a node agent and a pod behind it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayStats } from '../../src/gateway/gateway-stats.js';
import { e2eUnavailableReason, ping, Topology } from '../util/netns.js';
import { statsOf } from './fabric-topology.js';
import { clusterKeys, nodeConfig, YamlClusters } from './yaml-clusters.js';

const skip = e2eUnavailableReason(['ping', 'ss'], { nativeAddon: true, built: ['dist/src/daemon/launch.js'] });

const POD = '10.0.1.2';
const INTERNAL = '10.80.0.1';

describe.skipIf(skip !== null)('one gateway, two peers with the same real pod CIDR', () => {
  const topo = new Topology('wo');
  const clusters = new YamlClusters(topo);
  const { procs, ns, client } = clusters;

  beforeAll(async () => {
    try {
      const dir = mkdtempSync(join(tmpdir(), 'weft-overlap-'));
      const keys = clusterKeys(['a', 'b', 'c']);
      for (const c of ['a', 'b', 'c']) clusters.add(c, `${POD}/24`);
      topo.link(ns.a!.gw, 'a-wanb', '198.19.1.1/24', ns.b!.gw, 'b-wan', '198.19.1.2/24');
      topo.link(ns.a!.gw, 'a-wanc', '198.19.2.1/24', ns.c!.gw, 'c-wan', '198.19.2.2/24');

      const peer = (c: string, endpoint: string | undefined, pods: string, ext: string) => ({
        name: `cluster-${c}`,
        clusterId: `cluster-${c}`,
        publicKey: keys[c]!.pub,
        // The client side (it knows the endpoint) keeps the tunnel up, as Liqo's does.
        ...(endpoint === undefined ? {} : { endpoint, persistentKeepalive: 5 }),
        remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
        remapped: { podCIDRs: [pods], externalCIDRs: [ext] },
      });
      const peersOf: Record<string, unknown[]> = {
        // A has no endpoint for B or C: they connect to it (A is the server side).
        a: [peer('b', undefined, '10.71.0.0/16', '10.72.0.0/16'), peer('c', undefined, '10.73.0.0/16', '10.74.0.0/16')],
        b: [peer('a', '198.19.1.1:51840', '10.71.0.0/16', '10.72.0.0/16')],
        c: [peer('a', '198.19.2.1:51840', '10.71.0.0/16', '10.72.0.0/16')],
      };
      const remoteCIDRs: Record<string, string[]> = {
        a: ['10.71.0.0/16', '10.72.0.0/16', '10.73.0.0/16', '10.74.0.0/16'],
        b: ['10.71.0.0/16', '10.72.0.0/16'],
        c: ['10.71.0.0/16', '10.72.0.0/16'],
      };
      for (const c of ['a', 'b', 'c']) {
        const gw = {
          role: 'gateway',
          cluster: {
            id: `cluster-${c}`,
            podCIDRs: ['10.0.0.0/16'],
            externalCIDR: '10.70.0.0/16',
            internalCIDR: '10.80.0.0/16',
          },
          wireguard: { privateKey: keys[c]!.priv, listenPort: 51840, mtu: 1340, interfaceName: `wo${c}gt` },
          peers: peersOf[c],
          geneve: {
            tunnels: [
              {
                id: 1,
                nodeName: 'node-0',
                remoteUnderlay: '198.18.0.2',
                localInternalAddress: INTERNAL,
                remoteInternalAddress: '10.80.0.2',
              },
            ],
            podRoutes: [{ podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' }],
          },
        };
        const node = nodeConfig(c, {
          podCIDRs: ['10.0.1.0/24'],
          internalCIDR: '10.80.0.0/16',
          tunName: `wo${c}nt`,
          gatewayInternalAddress: INTERNAL,
          localInternalAddress: '10.80.0.2',
          remoteCIDRs: remoteCIDRs[c]!,
        });
        clusters.start({ c, dir, gw, node, echoHost: '0.0.0.0', lifetimeS: 170 });
      }
      await clusters.ready({ peers: 2, label: 'A has a session with B and with C' });
    } catch (e) {
      await topo.cleanup();
      throw e;
    }
  }, 90_000);

  afterAll(async () => {
    await topo.cleanup();
  }, 30_000);

  it("A's pod reaches B's pod as 10.71.1.2 and C's pod as 10.73.1.2 (both really 10.0.1.2)", () => {
    expect(ping(topo, ns.a!.pod, '10.71.1.2', 4, 0.2).received).toBeGreaterThanOrEqual(3);
    expect(ping(topo, ns.a!.pod, '10.73.1.2', 4, 0.2).received).toBeGreaterThanOrEqual(3);
    // Each far pod sees A's pod as its own cluster addresses A (10.71.1.2 in both).
    expect(client('a', '10.71.1.2')).toBe('10.71.1.2');
    expect(client('a', '10.73.1.2')).toBe('10.71.1.2');
  });

  it("B's pod and C's pod reach A's pod, which sees each by its own remapped address", () => {
    expect(client('b', '10.71.1.2')).toBe('10.71.1.2');
    expect(client('c', '10.71.1.2')).toBe('10.73.1.2');
    expect(ping(topo, ns.b!.pod, '10.71.1.2', 3, 0.2).received).toBeGreaterThanOrEqual(2);
    expect(ping(topo, ns.c!.pod, '10.71.1.2', 3, 0.2).received).toBeGreaterThanOrEqual(2);
  });

  it('gateway A counts traffic on both peers and drops nothing for want of a peer', async () => {
    const s = await statsOf<GatewayStats>(procs.agw!);
    const byName = Object.fromEntries(s.peers.map((p) => [p.name, p]));
    expect(byName['cluster-b']!.connected).toBe(true);
    expect(byName['cluster-c']!.connected).toBe(true);
    expect(byName['cluster-b']!.rxBytes).toBeGreaterThan(0);
    expect(byName['cluster-c']!.rxBytes).toBeGreaterThan(0);
    expect(s.drops.route_unknown_peer ?? 0).toBe(0);
    expect(s.drops.wg_inner_source_not_allowed ?? 0).toBe(0);
  });
});
