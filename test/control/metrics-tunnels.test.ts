// Metrics of a peer with several WireGuard tunnels: weft_tunnel_* per {cluster_id, tunnel}.
import { describe, expect, test } from 'vitest';
import { createMetricsRegistry, type StatsSource } from '../../src/control/metrics.js';

describe('metrics: several tunnels', () => {
  test('spread state, latency and bytes per tunnel, named as Liqo names the interfaces', async () => {
    const src: StatsSource = {
      peers: () => [
        {
          clusterId: 'cluster-b',
          connected: true,
          latencyUs: 300,
          rxBytes: 30,
          txBytes: 60,
          handshakes: 3,
          tunnels: [
            { tunnel: 'liqo-tunnel', inSpread: true, latencyUs: 300, rxBytes: 10, txBytes: 20 },
            { tunnel: 'liqo-tunnel1', inSpread: false, latencyUs: 0, rxBytes: 20, txBytes: 40 },
          ],
        },
      ],
      drops: () => ({}),
      natEntries: () => 0,
      queueDepths: () => ({}),
    };
    const text = await createMetricsRegistry(src).metrics();
    expect(text).toContain('weft_tunnel_in_spread{cluster_id="cluster-b",tunnel="liqo-tunnel"} 1');
    expect(text).toContain('weft_tunnel_in_spread{cluster_id="cluster-b",tunnel="liqo-tunnel1"} 0');
    expect(text).toContain('weft_tunnel_latency_us{cluster_id="cluster-b",tunnel="liqo-tunnel"} 300');
    expect(text).toContain('weft_tunnel_receive_bytes_total{cluster_id="cluster-b",tunnel="liqo-tunnel1"} 20');
    expect(text).toContain('weft_tunnel_transmit_bytes_total{cluster_id="cluster-b",tunnel="liqo-tunnel1"} 40');
    // Liqo's per-peer metrics stay the peer's totals.
    expect(text).toContain('liqo_peer_receive_bytes_total{driver="wireguard",cluster_id="cluster-b"} 30');
  });
});
