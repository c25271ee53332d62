// `weft show` text of a peer with several WireGuard tunnels (Liqo's spec.endpoint.ports): one line
// per tunnel with its interface, port, endpoint, spread state, weight, check and bytes.
import { describe, expect, test } from 'vitest';
import type { WeftStatus, WeftWireguardTunnelStatus } from '../../src/daemon/status.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';

const tunnel = (i: number, over: Partial<WeftWireguardTunnelStatus> = {}): WeftWireguardTunnelStatus => ({
  index: i,
  interface: i === 0 ? 'liqo-tunnel' : `liqo-tunnel${i}`,
  listenPort: 51840 + i,
  endpoint: null,
  tunnelAddress: `169.254.18.${4 * i + 2}`,
  localTunnelAddress: `169.254.18.${4 * i + 1}`,
  inSpread: true,
  weight: 1,
  connection: { value: 'Connected', latencyMs: 0.25 },
  latestHandshake: '2026-01-01T00:00:01Z',
  rxBytes: 2048,
  txBytes: 4096,
  rxPackets: 2,
  txPackets: 4,
  ...over,
});

const st: WeftStatus = {
  weft: {
    version: '0.1.0',
    name: 'k8s-gateway',
    role: 'gateway',
    pid: 1,
    startedAt: '2026-01-01T00:00:00Z',
    source: 'kubernetes',
    active: true,
  },
  cluster: { id: 'cluster-a' },
  wireguard: {
    publicKey: 'k',
    listenPort: 51840,
    crypto: 'openssl',
    peers: [
      {
        name: 'cluster-b',
        clusterId: 'cluster-b',
        publicKey: 'p',
        hasPresharedKey: false,
        endpoint: '192.168.77.2:40000',
        allowedIPs: [],
        remappedCIDRs: [],
        latestHandshake: '2026-01-01T00:00:01Z',
        rxBytes: 6144,
        txBytes: 12288,
        persistentKeepalive: 0,
        tunnels: [
          tunnel(0, { endpoint: '192.168.77.2:40000' }),
          tunnel(1, { inSpread: false, connection: { value: 'Error', latencyMs: 0 } }),
          tunnel(2, { connection: { value: '', latencyMs: 0 } }),
        ],
      },
    ],
  },
  geneve: { port: 6091, tunnels: [] },
  drops: {},
  queues: {},
};

describe('weft show: several tunnels', () => {
  test('one line per tunnel', () => {
    const text = formatStatus(st, Date.parse('2026-01-01T00:00:05Z'));
    expect(text).toContain(
      '  tunnel 0 (liqo-tunnel, port 51840 → 192.168.77.2:40000): in spread, weight 1, Connected, 0.250 ms; 2.00 KiB received, 4.00 KiB sent\n',
    );
    expect(text).toContain('  tunnel 1 (liqo-tunnel1, port 51841): out of spread, weight 1, Error;');
    expect(text).toContain('  tunnel 2 (liqo-tunnel2, port 51842): in spread, weight 1, not checked yet;');
  });
});
