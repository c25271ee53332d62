/**
 * NodeAgent in-process inside a namespace the test creates (root): what it puts into the kernel
 * and takes out again.
 *
 * Proves: the TUN gets the node's internal address and the MTU that the underlay (a 1400-byte
 * veth towards the gateway) leaves after Geneve's 36 bytes, capped by node.mtu; routes for each
 * gateway's remote CIDRs, its internal address and the internal CIDR point at the TUN; apply()
 * adds/changes/removes a gateway's routes and tunnel live (counters of a kept tunnel survive);
 * stop() removes every route and address it added and the TUN device.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig, type NodeConfig } from '../../src/control/config.js';
import { diffConfig } from '../../src/control/diff.js';
import { NodeAgent } from '../../src/node/agent.js';
import { e2eUnavailableReason, run } from '../util/netns.js';

const skip = e2eUnavailableReason([], { nativeAddon: true });
const NS = `wfn-${process.pid}`;
const UNDER = `wfo-${process.pid}`;

function config(mtu: number, gateways: Record<string, unknown>[]): NodeConfig {
  return parseConfig(
    {
      role: 'node',
      cluster: { id: 'c', podCIDRs: ['10.0.1.0/24'] },
      node: { name: 'n1', underlayAddress: '198.18.7.2', tunName: 'wfnt', mtu, gateways },
    },
    'test',
  ) as NodeConfig;
}

const gw1 = {
  name: 'gw1',
  vni: 1,
  gatewayUnderlay: '198.18.7.1',
  gatewayInternalAddress: '10.80.0.1',
  localInternalAddress: '10.80.0.2',
  remoteCIDRs: ['10.71.0.0/16', '10.72.0.0/16'],
};
const ipIn = (...args: string[]): string => run(['ip', '-n', NS, ...args], { allowFail: true });

describe.skipIf(skip !== null)('NodeAgent kernel state', () => {
  afterAll(() => {
    run(['ip', 'netns', 'del', NS], { allowFail: true });
    run(['ip', 'netns', 'del', UNDER], { allowFail: true });
  });

  it('installs address, MTU and routes; apply() changes them; stop() removes everything', async () => {
    for (const ns of [NS, UNDER]) {
      run(['ip', 'netns', 'del', ns], { allowFail: true });
      run(['ip', 'netns', 'add', ns]);
    }
    run([
      'ip',
      'link',
      'add',
      'wfn-u',
      'mtu',
      '1400',
      'netns',
      NS,
      'type',
      'veth',
      'peer',
      'name',
      'wfo-u',
      'mtu',
      '1400',
      'netns',
      UNDER,
    ]);
    run(['ip', '-n', NS, 'addr', 'add', '198.18.7.2/24', 'dev', 'wfn-u']);
    run(['ip', '-n', UNDER, 'addr', 'add', '198.18.7.1/24', 'dev', 'wfo-u']);
    run(['ip', '-n', NS, 'link', 'set', 'wfn-u', 'up']);
    run(['ip', '-n', UNDER, 'link', 'set', 'wfo-u', 'up']);

    const c1 = config(1500, [gw1]);
    const agent = await NodeAgent.start(c1, { netns: NS });
    try {
      // 1400 − (20 + 8 + 8) = 1364 < node.mtu 1500.
      expect(ipIn('-o', 'link', 'show', 'wfnt')).toMatch(/mtu 1364\b/);
      expect(ipIn('-o', 'addr', 'show', 'dev', 'wfnt')).toMatch(/inet 10\.80\.0\.2\/32/);
      const routes = ipIn('route', 'show', 'dev', 'wfnt');
      for (const r of ['10.71.0.0/16', '10.72.0.0/16', '10.80.0.1', '10.80.0.0/16'])
        expect(routes).toMatch(new RegExp(`^${r.replaceAll('.', '\\.')} `, 'm'));

      const t = agent.table.get(1, '198.18.7.1')!;
      t.stats[0] = 5; // pretend traffic: an update in place keeps the tunnel's counters
      const c2 = config(1500, [
        { ...gw1, remoteCIDRs: ['10.71.0.0/16'] },
        {
          ...gw1,
          name: 'gw2',
          vni: 2,
          gatewayUnderlay: '198.18.7.3',
          gatewayInternalAddress: '10.80.0.9',
          remoteCIDRs: ['10.73.0.0/16'],
        },
      ]);
      await agent.apply(diffConfig(c1, c2), c2);
      const r2 = ipIn('route', 'show', 'dev', 'wfnt');
      expect(r2).not.toMatch(/^10\.72\.0\.0\/16/m);
      expect(r2).toMatch(/^10\.73\.0\.0\/16/m);
      expect(r2).toMatch(/^10\.80\.0\.9 /m);
      expect(agent.table.get(1, '198.18.7.1')).toBe(t);
      expect(t.txPackets).toBe(5);
      expect(agent.table.size).toBe(2);

      const c3 = config(1500, [{ ...gw1, remoteCIDRs: ['10.71.0.0/16'] }]);
      await agent.apply(diffConfig(c2, c3), c3);
      expect(ipIn('route', 'show', 'dev', 'wfnt')).not.toMatch(/10\.73\.0\.0|10\.80\.0\.9/);
      expect(agent.table.size).toBe(1);

      await expect(agent.apply([{ kind: 'node.update', changes: { mtu: 1400 } }])).rejects.toThrow(
        /restart the node agent/,
      );
    } finally {
      await agent.stop();
    }
    expect(ipIn('-o', 'link', 'show', 'wfnt')).toBe('');
    expect(ipIn('route', 'show')).not.toMatch(/10\.7[123]\.|10\.80\./);
  });

  it('caps the TUN MTU at node.mtu', async () => {
    const agent = await NodeAgent.start(config(1300, [gw1]), { netns: NS });
    try {
      expect(ipIn('-o', 'link', 'show', 'wfnt')).toMatch(/mtu 1300\b/);
    } finally {
      await agent.stop();
    }
  });

  it("Liqo mode: the fabric RouteConfigurations' routes towards the gateway go into the TUN; a replaced set removes only its own", async () => {
    const agent = await NodeAgent.start(config(1500, [gw1]), { netns: NS });
    try {
      await agent.setFabricRoutes(['10.71.0.0/16', '10.75.0.0/16']);
      expect(ipIn('route', 'show', 'dev', 'wfnt')).toMatch(/^10\.75\.0\.0\/16 /m);
      await agent.setFabricRoutes([]);
      const r = ipIn('route', 'show', 'dev', 'wfnt');
      expect(r).not.toMatch(/^10\.75\.0\.0\/16/m);
      expect(r).toMatch(/^10\.71\.0\.0\/16 /m); // the configured gateway still needs it
    } finally {
      await agent.stop();
    }
    expect(ipIn('route', 'show')).not.toMatch(/10\.7[15]\./);
  });
});
