// A gateway restarted while its nodes keep sending: Geneve datagrams that arrive after its
// Geneve port is open but before its WireGuard ports exist (the WireGuard warm-up runs in
// between) are counted drops (gateway_starting), never a crash; once started it forwards.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/control/config.js';
import { generateDemoKeys } from '../../src/demo/keys.js';
import { buildPlan, findPod, gatewayConfig, remotePodAddress } from '../../src/demo/plan.js';
import { SimNode } from '../../src/demo/sim.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { MemoryNet } from '../../src/io/memory-net.js';
import { MemoryDevices } from '../../src/pipelines/devices.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('a gateway that is still starting', () => {
  it('counts the Geneve packets of its nodes as gateway_starting drops until its ports are ready, then forwards', async () => {
    const plan = buildPlan('gst');
    const c = plan.a;
    const net = new MemoryNet();
    const n = c.nodes[0]!;
    const node = await SimNode.start(net, 'A/node', plan, c, n);
    const pod = node.addPod(n.pods[0]!.name, n.pods[0]!.ip);
    const cfg = parseConfig(gatewayConfig(plan, c, generateDemoKeys(), { keyFile: false }), 'gateway a (test)');
    if (cfg.role !== 'gateway') throw new Error('unreachable');
    const errors: string[] = [];
    let started: Gateway | null = null;
    const starting = Gateway.start(cfg, {
      devices: new MemoryDevices(net.host(c.gatewayUnderlay, c.wanAddress)),
      onError: (what, e) => errors.push(`${what}: ${String(e)}`),
      // A long warm-up: the window between the Geneve port and the WireGuard ports.
      warmUpMs: 400,
    }).then((g) => (started = g));
    const to = remotePodAddress(plan, c, findPod(plan, 'B3'));
    let sent = 0;
    try {
      while (!net.isBound(c.gatewayUnderlay, cfg.geneve.port)) await turn();
      for (let i = 0; started === null && i < 2000; i++) {
        if (i % 20 === 0) {
          pod.sendEcho(to, 9, ++sent);
        }
        net.pump(); // throws here if the gateway crashes on a packet
        await turn();
      }
      const gw = await starting;
      try {
        expect(errors).toEqual([]);
        const drops = gw.drops();
        expect(drops['gateway_starting']).toBeGreaterThan(0);
        expect(gw.stats().routed.fromNodes).toBe(0);
        // Started: the next packet is routed (to the peer, which is not there: a handshake waits).
        pod.sendEcho(to, 9, ++sent);
        for (let i = 0; i < 20; i++) {
          net.pump();
          await turn();
        }
        expect(gw.stats().routed.fromNodes).toBeGreaterThan(0);
        expect(gw.drops()['gateway_starting']).toBe(drops['gateway_starting']);
      } finally {
        await gw.stop();
      }
    } finally {
      await node.agent.stop();
    }
  });
});
