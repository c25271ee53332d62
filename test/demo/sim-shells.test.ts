// The rootless simulation runs the shipped shells, not a re-wiring of the engines: src/demo/sim.ts
// (and the pod stacks it uses) import Gateway and NodeAgent and no engine, router or rules, and
// at run time every packet crosses a Gateway and NodeAgents.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../src/demo/plan.js';
import { SimSystem } from '../../src/demo/sim.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { NodeAgent } from '../../src/node/agent.js';

const DEMO = resolve(import.meta.dirname, '../../src/demo');

function importsOf(file: string): string[] {
  const text = readFileSync(resolve(DEMO, file), 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*'([^']+)'/g)].map((m) => m[1]!);
}

describe('the simulation runs the shells', () => {
  it('sim.ts imports Gateway and NodeAgent; neither it nor sim-pod.ts builds engines, a Router or rules', () => {
    const sim = importsOf('sim.ts');
    expect(sim).toContain('../gateway/gateway.js');
    expect(sim).toContain('../node/agent.js');
    const byHand = /^\.\.\/(router|rules|nat|wireguard|geneve|pipelines\/(geneve|wireguard)-port)(\/|\.js$)/;
    for (const f of ['sim.ts', 'sim-pod.ts']) expect(importsOf(f).filter((s) => byHand.test(s))).toEqual([]);
  });

  it('at run time the gateways are Gateways and the nodes NodeAgents, and traffic crosses them', async () => {
    const sys = await SimSystem.start(buildPlan('ws'));
    try {
      for (const g of Object.values(sys.gateways)) expect(g.gateway).toBeInstanceOf(Gateway);
      for (const n of sys.nodes.values()) expect(n.agent).toBeInstanceOf(NodeAgent);
      sys.pod('A1').sendEcho('10.71.2.23', 7, 1);
      await sys.run();
      const a = sys.gateways.a.gateway.stats();
      const b = sys.gateways.b.gateway.stats();
      expect(a.routed.fromNodes).toBeGreaterThan(0);
      expect(a.forwarded.toWireguard).toBeGreaterThan(0);
      expect(b.routed.fromPeers).toBeGreaterThan(0);
      expect(b.forwarded.toGeneve).toBeGreaterThan(0);
      expect(a.peers[0]!.connected).toBe(true);
      const agentTx = [...sys.nodes.values()].reduce((s, n) => s + n.agent.stats().geneve.txPackets, 0);
      expect(agentTx).toBeGreaterThan(0);
    } finally {
      await sys.stop();
    }
  });
});
