/** The soak's and chaos test's readings of a fabric: ping gaps and the per-stage balances. */
import { describe, expect, it } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import {
  gatewayRouterStage,
  geneveStage,
  nodeEgressStage,
  pingSummary,
  wireguardStage,
} from '../../bench/fabric-observe.js';

function status(name: string, over: Partial<WeftStatus>): WeftStatus {
  return {
    weft: { version: '0', name, role: 'gateway', pid: 1, startedAt: '', source: '', active: true },
    cluster: { id: 'c' },
    geneve: { port: 6091, tunnels: [] },
    drops: {},
    queues: {},
    ...over,
  };
}

const peer = (rx: number, tx: number): NonNullable<WeftStatus['wireguard']>['peers'][number] => ({
  name: 'p',
  clusterId: 'p',
  publicKey: '',
  hasPresharedKey: false,
  endpoint: null,
  allowedIPs: [],
  remappedCIDRs: [],
  latestHandshake: null,
  rxBytes: 0,
  txBytes: 0,
  persistentKeepalive: 0,
  rxPackets: rx,
  txPackets: tx,
});

describe('fabric-observe', () => {
  it('pingSummary: longest gap between replies, gaps over 1 s listed, totals from the summary', () => {
    const lines = [0, 0.2, 0.4, 1.9, 2.1].map(
      (t, i) => `[${(1700000000 + t).toFixed(6)}] 64 bytes from 10.0.0.1: icmp_seq=${i + 1} ttl=62 time=0.5 ms`,
    );
    // 1.9 − 0.4 = 1.5 s: one stall.
    const s = pingSummary(
      `${lines.join('\n')}\n\n--- 10.0.0.1 ping statistics ---\n12 packets transmitted, 5 received, 58% packet loss, time 2200ms\n`,
    );
    expect(s.transmitted).toBe(12);
    expect(s.received).toBe(5);
    expect(s.longestGapMs).toBe(1500);
    expect(s.stalls.map(([, ms]) => ms)).toEqual([1500]);
    expect(pingSummary(lines.slice(0, 3).join('\n')).stalls).toEqual([]);
  });

  it("geneveStage: senders' tunnel tx = receiver's tunnel rx + its Geneve receive drops + kernel drops", () => {
    const gw = status('gw', {
      geneve: {
        port: 6091,
        tunnels: [
          { vni: 0, name: 'n1', remoteUnderlay: '', rxPackets: 90, txPackets: 0, drops: 0 },
          { vni: 1, name: 'n2', remoteUnderlay: '', rxPackets: 5, txPackets: 0, drops: 0 },
        ],
      },
      drops: { geneve_unknown_tunnel: 3, geneve_tx_no_tunnel: 7, wg_decrypt_failed: 9 },
    });
    const n1 = status('n1', {
      geneve: {
        port: 6091,
        tunnels: [{ vni: 0, name: 'gw', remoteUnderlay: '', rxPackets: 0, txPackets: 96, drops: 0 }],
      },
    });
    const n2 = status('n2', {
      geneve: {
        port: 6091,
        tunnels: [{ vni: 1, name: 'gw', remoteUnderlay: '', rxPackets: 0, txPackets: 5, drops: 0 }],
      },
    });
    const b = geneveStage(
      's',
      [
        [n1, 0],
        [n2, 1],
      ],
      gw,
      [0, 1],
      3,
    );
    // Transmit drops and WireGuard drops of the receiver do not count for its Geneve receive side.
    expect(b.drops).toEqual({ geneve_unknown_tunnel: 3, kernel_udp_in_errors: 3 });
    expect(b.unaccounted).toBe(0);
    expect(geneveStage('s', [[n1, 0]], gw, [0], 0).unaccounted).toBe(96 - 90 - 3);
  });

  it("wireguardStage: packets, with the sender's send failures; refuses a status without packet counters", () => {
    const a = status('a', {
      wireguard: { publicKey: '', listenPort: 1, crypto: '', peers: [peer(0, 100)] },
      drops: { wg_send_failed: 2, wg_no_route: 4 },
    });
    const b = status('b', {
      wireguard: { publicKey: '', listenPort: 1, crypto: '', peers: [peer(90, 0)] },
      drops: { wg_replayed_counter: 5, wg_decrypt_failed: 3, wg_outbox_full: 8 },
    });
    const s = wireguardStage('wan', a, b, 0);
    expect(s.drops).toEqual({ wg_replayed_counter: 5, wg_decrypt_failed: 3, sender_wg_send_failed: 2 });
    expect(s.unaccounted).toBe(0);
    const old = status('b', {
      wireguard: { publicKey: '', listenPort: 1, crypto: '', peers: [{ ...peer(0, 0), rxPackets: undefined }] },
    });
    expect(() => wireguardStage('wan', a, old, 0)).toThrow(/rxPackets/);
  });

  it('nodeEgressStage: TUN reads = Geneve sent + transmit drops only', () => {
    const n = status('n', {
      interface: { name: 't', mtu: 1340, rxPackets: 20, txPackets: 0 },
      geneve: {
        port: 6091,
        tunnels: [{ vni: 0, name: 'gw', remoteUnderlay: '', rxPackets: 0, txPackets: 14, drops: 0 }],
      },
      drops: { geneve_tx_no_tunnel: 6, geneve_unknown_tunnel: 50 },
    });
    expect(nodeEgressStage('n', n)).toMatchObject({
      sent: 20,
      received: 14,
      drops: { geneve_tx_no_tunnel: 6 },
      unaccounted: 0,
    });
  });

  it('gatewayRouterStage: packets into the router = out + route_/nat_ drops; a gateway without the counters is refused', () => {
    const gw = status('gw', {
      forwarding: { in: { fromNodes: 50, fromHost: 3, fromPeers: 40 }, out: { toNodes: 38, toHost: 2, toPeers: 49 } },
      drops: { route_no_route: 1, nat_BadTransport: 2, wg_decrypt_failed: 7, geneve_unknown_tunnel: 5 },
    });
    expect(gatewayRouterStage('r', gw)).toMatchObject({
      sent: 93,
      received: 89,
      drops: { route_no_route: 1, nat_BadTransport: 2 },
      unaccounted: 1,
    });
    expect(() => gatewayRouterStage('r', status('old', {}))).toThrow(/forwarding/);
  });
});
