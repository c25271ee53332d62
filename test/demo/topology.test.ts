/**
 * The namespace topology alone (root only, no Weft processes): every link the data plane will
 * use works, and nothing else does — a pod cannot reach the other cluster without Weft, and
 * cleanup removes every namespace by its stable name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listNamespaces, runCommand, inNs } from '../../src/demo/host.js';
import { buildPlan, planNamespaces } from '../../src/demo/plan.js';
import { buildTopology, destroyTopology } from '../../src/demo/topology.js';
import { needs } from '../util/requirements.js';

const plan = buildPlan('wxt');
const skip = needs({ root: true, commands: ['ip', 'ping'] });

async function ping(ns: string, addr: string): Promise<number> {
  const r = await runCommand(inNs(ns, ['ping', '-n', '-q', '-c', '2', '-i', '0.2', '-W', '1', addr]), {
    allowFail: true,
    timeoutMs: 10_000,
  });
  return Number(/(\d+) received/.exec(r.stdout)?.[1] ?? 0);
}

describe.skipIf(skip !== null)(`demo topology (namespaces, no Weft)${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const steps: string[] = [];
  beforeAll(async () => {
    await destroyTopology(plan);
    try {
      await buildTopology(plan, (s) => steps.push(s));
    } catch (e) {
      await destroyTopology(plan);
      throw e;
    }
  }, 60_000);
  afterAll(async () => {
    await destroyTopology(plan);
  }, 60_000);

  it('creates every namespace of the plan and reports each step', async () => {
    const ns = await listNamespaces();
    for (const n of planNamespaces(plan)) expect(ns.has(n)).toBe(true);
    expect(steps.length).toBeGreaterThanOrEqual(5);
  });

  it('pods reach their node, nodes reach their gateway over the underlay, gateways reach each other over the WAN', async () => {
    for (const c of [plan.a, plan.b]) {
      for (const n of c.nodes) {
        for (const p of n.pods) expect(await ping(p.ns, plan.podGateway)).toBe(2);
        expect(await ping(n.ns, c.gatewayUnderlay)).toBe(2);
        // Node to node through the gateway's bridge.
        const other = c.nodes.find((x) => x !== n)!;
        expect(await ping(n.ns, other.underlay)).toBe(2);
        // The node forwards for its pods: pod → other pod on the same node.
        expect(await ping(n.pods[0]!.ns, n.pods[1]!.ip)).toBe(2);
      }
    }
    expect(await ping(plan.a.gatewayNs, plan.b.wanAddress)).toBe(2);
  });

  it('without Weft nothing crosses: no route from a pod to the remote cluster or beyond', async () => {
    expect(await ping(plan.a.pods[0]!.ns, '10.71.2.23')).toBe(0);
    // A pod of A and a pod of B with the same /24 never meet: different namespaces, no shared link.
    expect(await ping(plan.a.pods[0]!.ns, plan.b.pods[0]!.ip)).toBe(0);
    const routes = (await runCommand(inNs(plan.a.nodes[0]!.ns, ['ip', '-4', 'route', 'show']))).stdout;
    expect(routes).not.toMatch(/^default/m);
    const podRoutes = (await runCommand(inNs(plan.a.pods[0]!.ns, ['ip', '-4', 'route', 'show']))).stdout;
    expect(podRoutes).not.toMatch(/^default/m);
  });

  it('destroyTopology removes exactly the plan namespaces', async () => {
    const removed = await destroyTopology(plan);
    expect(removed.sort()).toEqual(planNamespaces(plan).sort());
    const ns = await listNamespaces();
    for (const n of planNamespaces(plan)) expect(ns.has(n)).toBe(false);
    // A second call has nothing to do.
    expect(await destroyTopology(plan)).toEqual([]);
  });
});
