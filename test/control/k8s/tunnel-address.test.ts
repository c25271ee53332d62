// Liqo's roles decide the in-tunnel addresses of a translated configuration: a GatewayServer
// makes this gateway the server (169.254.18.1, pinging the client's .2), a GatewayClient the
// client (.2, pinging .1) — through the peer's endpoint, which only the client side has.
import { describe, expect, test } from 'vitest';
import { translate } from '../../../src/control/k8s/translate.js';
import { planTunnelAddresses } from '../../../src/control/tunnel-address.js';
import { liqoClientResources, liqoResources } from './liqo-fixtures.js';

describe('tunnel addresses of a translated Liqo gateway', () => {
  test('GatewayServer: ours 169.254.18.1, the peer 169.254.18.2', () => {
    const { config } = translate(liqoResources(), { role: 'gateway', clusterId: 'cluster-a', nodeName: 'worker-1' });
    if (config.role !== 'gateway') throw new Error('role');
    expect(planTunnelAddresses(config)).toEqual({
      peers: [{ name: 'cluster-b', clusterId: 'cluster-b', local: '169.254.18.1', remote: '169.254.18.2', tunnel: 0 }],
      skipped: [],
    });
  });

  test('GatewayClient: ours 169.254.18.2, the peer 169.254.18.1', () => {
    const r = liqoClientResources({ addresses: ['172.18.0.9'], port: 32000, protocol: 'UDP' }, 1340);
    const { config } = translate(r, { role: 'gateway', clusterId: 'cluster-a' });
    if (config.role !== 'gateway') throw new Error('role');
    expect(planTunnelAddresses(config).peers).toEqual([
      { name: 'cluster-b', clusterId: 'cluster-b', local: '169.254.18.2', remote: '169.254.18.1', tunnel: 0 },
    ]);
  });
});
