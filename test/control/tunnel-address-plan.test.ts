// Liqo's in-tunnel addressing (src/control/tunnel-address.ts): the side with an endpoint is the
// client (169.254.18.2) and pings the server (.1); explicit addresses override; a peer whose
// address would collide is left out with a reason naming the field to set.
import { describe, expect, test } from 'vitest';
import {
  LIQO_TUNNEL_CLIENT_ADDRESS,
  LIQO_TUNNEL_SERVER_ADDRESS,
  defaultTunnelAddresses,
  liqoTunnelAddress,
  planTunnelAddresses,
  tunnelCount,
  tunnelInterfaceName,
} from '../../src/control/tunnel-address.js';

const peer = (name: string, extra: { endpoint?: string; tunnelAddress?: string } = {}) => ({
  name,
  clusterId: `id-${name}`,
  ...extra,
});

describe('tunnel addresses', () => {
  test("Liqo's defaults: server 169.254.18.1, client 169.254.18.2", () => {
    expect(LIQO_TUNNEL_SERVER_ADDRESS).toBe('169.254.18.1');
    expect(LIQO_TUNNEL_CLIENT_ADDRESS).toBe('169.254.18.2');
    // A peer with an endpoint is a server we connect to: we are the client.
    expect(defaultTunnelAddresses({ endpoint: '192.0.2.1:51840' })).toEqual({
      local: '169.254.18.2',
      remote: '169.254.18.1',
    });
    expect(defaultTunnelAddresses({})).toEqual({ local: '169.254.18.1', remote: '169.254.18.2' });
  });

  test('the two ends of one tunnel get mirrored pairs', () => {
    const client = planTunnelAddresses({ wireguard: {}, peers: [peer('b', { endpoint: '198.18.0.2:51840' })] });
    const server = planTunnelAddresses({ wireguard: {}, peers: [peer('a')] });
    expect(client).toEqual({
      peers: [{ name: 'b', clusterId: 'id-b', local: '169.254.18.2', remote: '169.254.18.1', tunnel: 0 }],
      skipped: [],
    });
    expect(server.peers[0]).toMatchObject({ local: client.peers[0]!.remote, remote: client.peers[0]!.local });
  });

  test('explicit addresses override both sides', () => {
    const plan = planTunnelAddresses({
      wireguard: { tunnelAddress: '169.254.20.1' },
      peers: [
        peer('b', { tunnelAddress: '169.254.20.2' }),
        peer('c', { endpoint: '192.0.2.9:1', tunnelAddress: '169.254.20.3' }),
      ],
    });
    expect(plan.peers.map((t) => [t.name, t.local, t.remote])).toEqual([
      ['b', '169.254.20.1', '169.254.20.2'],
      ['c', '169.254.20.1', '169.254.20.3'],
    ]);
    expect(plan.skipped).toEqual([]);
  });

  test('two server-side peers with defaults: the second is left out, naming peers[].tunnelAddress', () => {
    const plan = planTunnelAddresses({ wireguard: {}, peers: [peer('b'), peer('c')] });
    expect(plan.peers.map((t) => t.name)).toEqual(['b']);
    expect(plan.skipped).toHaveLength(1);
    expect(plan.skipped[0]).toMatchObject({ name: 'c', clusterId: 'id-c' });
    expect(plan.skipped[0]!.reason).toMatch(
      /169\.254\.18\.2 is already peer b's; set a distinct peers\[\]\.tunnelAddress/,
    );
    // Giving the second one its own address resolves it.
    const fixed = planTunnelAddresses({
      wireguard: {},
      peers: [peer('b'), peer('c', { tunnelAddress: '169.254.18.6' })],
    });
    expect(fixed.peers.map((t) => [t.name, t.local, t.remote])).toEqual([
      ['b', '169.254.18.1', '169.254.18.2'],
      ['c', '169.254.18.1', '169.254.18.6'],
    ]);
  });

  test('client towards one peer and server towards another: the addresses cross, the second is left out', () => {
    const plan = planTunnelAddresses({ wireguard: {}, peers: [peer('b', { endpoint: '192.0.2.1:51840' }), peer('c')] });
    expect(plan.peers.map((t) => t.name)).toEqual(['b']);
    // c's default pair (ours .1, its .2) is b's pair reversed.
    expect(plan.skipped[0]!.reason).toMatch(/169\.254\.18\.2 is this gateway's own \(towards peer b\)/);
  });

  test("a peer address equal to ours, or ours equal to an earlier peer's, is left out", () => {
    const same = planTunnelAddresses({ wireguard: { tunnelAddress: '169.254.18.2' }, peers: [peer('b')] });
    expect(same.peers).toEqual([]);
    expect(same.skipped[0]!.reason).toMatch(/equals this gateway's/);
    const crossed = planTunnelAddresses({
      wireguard: {},
      peers: [
        peer('b', { tunnelAddress: '169.254.18.1', endpoint: '192.0.2.1:1' }),
        peer('c', { tunnelAddress: '169.254.18.9' }),
      ],
    });
    // b: ours .2, its .1; c: ours .1 (server default) is b's address.
    expect(crossed.peers.map((t) => t.name)).toEqual(['b']);
    expect(crossed.skipped[0]!.reason).toMatch(/\(169\.254\.18\.1\) is peer b's; set wireguard\.tunnelAddress/);
  });

  test('no peers, no addresses', () => {
    expect(planTunnelAddresses({ wireguard: {}, peers: [] })).toEqual({ peers: [], skipped: [] });
  });
});

describe('tunnel addresses of several tunnels (Liqo: one /30 per port in 169.254.18.0/24)', () => {
  test('tunnel i: the server on .4i+1, the client on .4i+2; names liqo-tunnel, liqo-tunnel1, …', () => {
    const server = planTunnelAddresses({
      wireguard: { listenPorts: [51840, 51841, 51842] },
      peers: [{ name: 'b', clusterId: 'id-b' }],
    });
    expect(server.peers.map((t) => [t.tunnel, t.local, t.remote])).toEqual([
      [0, '169.254.18.1', '169.254.18.2'],
      [1, '169.254.18.5', '169.254.18.6'],
      [2, '169.254.18.9', '169.254.18.10'],
    ]);
    const client = planTunnelAddresses({
      wireguard: {},
      peers: [{ name: 'a', clusterId: 'id-a', endpoint: '10.0.0.1:51840', endpointPorts: [51840, 51841] }],
    });
    expect(client.peers.map((t) => [t.tunnel, t.local, t.remote])).toEqual([
      [0, '169.254.18.2', '169.254.18.1'],
      [1, '169.254.18.6', '169.254.18.5'],
    ]);
    expect([0, 1, 2].map((i) => tunnelInterfaceName('liqo-tunnel', i))).toEqual([
      'liqo-tunnel',
      'liqo-tunnel1',
      'liqo-tunnel2',
    ]);
    expect(liqoTunnelAddress('server', 63)).toBe('169.254.18.253');
    expect(tunnelCount({ listenPorts: [1, 2, 3] }, {})).toBe(3);
    expect(tunnelCount({ listenPorts: [1, 2, 3] }, { endpoint: 'h:1' })).toBe(1);
  });
});
