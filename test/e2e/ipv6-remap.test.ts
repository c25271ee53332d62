/**
 * YAML mode's IPv6 remap end to end: two clusters whose pods share the IPv6 CIDR fd00:1::/48, each
 * gateway a `weft up` child process (started from dist/) with a node agent (Geneve with IPv6
 * inner addresses, the pod route's next hop having the pod prefix's family) and a pod behind it. A addresses B's pods as fd71:b::/48, B addresses A's as fd61:a::/48:
 * the gateways' ip6 tables (src/rules/from-nat6.ts) translate prefix to prefix, 1:1, so both pods
 * have the same address fd00:1:0:1::2 and each sees the other by its own cluster's remapped
 * address.
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

const POD6 = 'fd00:1:0:1::2';
/** The Geneve tunnel's inner addresses (IPv6: the pod route's next hop has the pod prefix's family). */
const INTERNAL = 'fd80::1';
const NODE_INTERNAL = 'fd80::2';
/** How each cluster addresses the other's pods. */
const REMAPPED: Record<string, { pods6: string; pods4: string; ext: string }> = {
  a: { pods6: 'fd61:a::/48', pods4: '10.61.0.0/16', ext: '10.62.0.0/16' },
  b: { pods6: 'fd71:b::/48', pods4: '10.71.0.0/16', ext: '10.72.0.0/16' },
};

describe.skipIf(skip !== null)('YAML mode: IPv6 remap through `weft up`', () => {
  const topo = new Topology('w6');
  const clusters = new YamlClusters(topo);
  const { procs, ns, client } = clusters;

  beforeAll(async () => {
    try {
      const dir = mkdtempSync(join(tmpdir(), 'weft-v6remap-'));
      const keys = clusterKeys(['a', 'b']);
      for (const c of ['a', 'b']) {
        const { node, pod } = clusters.add(c, '10.0.1.2/24');
        topo.exec(node, ['ip', '-6', 'addr', 'add', 'fd00:1:0:1::1/64', 'dev', `w6${c}n-p`, 'nodad']);
        topo.exec(pod, ['ip', '-6', 'addr', 'add', `${POD6}/64`, 'dev', `w6${c}p-n`, 'nodad']);
        topo.exec(node, ['sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1']);
        topo.exec(pod, ['ip', '-6', 'route', 'add', 'fd00::/8', 'via', 'fd00:1:0:1::1']);
      }
      topo.link(ns.a!.gw, 'a-wan', '198.19.1.1/24', ns.b!.gw, 'b-wan', '198.19.1.2/24');
      const other = (c: string): string => (c === 'a' ? 'b' : 'a');
      for (const c of ['a', 'b']) {
        const o = other(c);
        const r = REMAPPED[o]!;
        const gw = {
          role: 'gateway',
          cluster: {
            id: `cluster-${c}`,
            podCIDRs: ['10.0.0.0/16', 'fd00:1::/48'],
            externalCIDR: '10.70.0.0/16',
            internalCIDR: 'fd80::/64',
          },
          wireguard: { privateKey: keys[c]!.priv, listenPort: 51840, mtu: 1340, interfaceName: `w6${c}gt` },
          peers: [
            {
              name: `cluster-${o}`,
              clusterId: `cluster-${o}`,
              publicKey: keys[o]!.pub,
              // B is the client side: it knows A's endpoint and keeps the tunnel up.
              ...(c === 'b' ? { endpoint: '198.19.1.1:51840', persistentKeepalive: 5 } : {}),
              remote: { podCIDRs: ['10.0.0.0/16', 'fd00:1::/48'], externalCIDRs: ['10.70.0.0/16'] },
              remapped: { podCIDRs: [r.pods4, r.pods6], externalCIDRs: [r.ext] },
            },
          ],
          geneve: {
            tunnels: [
              {
                id: 1,
                nodeName: 'node-0',
                remoteUnderlay: '198.18.0.2',
                localInternalAddress: INTERNAL,
                remoteInternalAddress: NODE_INTERNAL,
              },
            ],
            podRoutes: [{ podCIDR: 'fd00:1:0:1::/64', nodeInternalAddress: NODE_INTERNAL }],
          },
        };
        const node = nodeConfig(c, {
          podCIDRs: ['fd00:1:0:1::/64'],
          internalCIDR: 'fd80::/64',
          tunName: `w6${c}nt`,
          gatewayInternalAddress: INTERNAL,
          localInternalAddress: NODE_INTERNAL,
          remoteCIDRs: [r.pods6],
        });
        clusters.start({ c, dir, gw, node, echoHost: '::', lifetimeS: 120 });
      }
      await clusters.ready({ peers: 1, label: 'A has a session with B' });
    } catch (e) {
      await topo.cleanup();
      throw e;
    }
  }, 90_000);

  afterAll(async () => {
    await topo.cleanup();
  }, 30_000);

  it("A's pod pings B's pod by its remapped IPv6 address (both pods are fd00:1:0:1::2)", () => {
    expect(ping(topo, ns.a!.pod, 'fd71:b:0:1::2', 4, 0.2).received).toBeGreaterThanOrEqual(3);
    expect(ping(topo, ns.b!.pod, 'fd61:a:0:1::2', 4, 0.2).received).toBeGreaterThanOrEqual(3);
  });

  it('TCP over IPv6: each pod is seen by the other by its own cluster’s remapped address', () => {
    // B's pod sees A's pod as B addresses A's pods, and the other way round.
    expect(client('a', 'fd71:b:0:1::2')).toBe('fd61:a:0:1::2');
    expect(client('b', 'fd61:a:0:1::2')).toBe('fd71:b:0:1::2');
  });

  it("gateway A's ip6 rules carried the flows: IPv6 connections tracked, SYNs clamped to 1340 − 60, no drop for want of a peer", async () => {
    const s = await statsOf<GatewayStats>(procs.agw!);
    // Only IPv6 crossed the gateways: every connection and clamp is the ip6 table's.
    expect(s.nat.conntrack.created).toBeGreaterThanOrEqual(4);
    expect(s.nat.mssClamped).toBeGreaterThanOrEqual(2);
    expect(s.peers[0]!.rxBytes).toBeGreaterThan(0);
    expect(s.drops.route_unknown_peer ?? 0).toBe(0);
    expect(s.drops.wg_inner_source_not_allowed ?? 0).toBe(0);
  });
});
