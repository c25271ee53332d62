/**
 * Several WireGuard tunnels between two Weft gateways (Liqo's spec.endpoint.ports: one tunnel
 * per port, the same keys), rootless: the shipped Gateway on the simulated network
 * (src/demo/sim.ts), B listening on 51840–51842 and A dialling each. Proves: every tunnel
 * handshakes; with every tunnel's check echoing Weft's multipath mark, 300 echo conversations (one per identifier) spread over all three, each request
 * and its reply on the same tunnel; a tunnel the check reports in Error carries nothing more and
 * every conversation still gets its replies; reported Connected again, it carries again; a
 * peer whose check does not echo the mark (Liqo's) gets everything on tunnel 0; a single-port
 * peer still works against a gateway with several tunnels open.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildPlan, findPod, remotePodAddress } from '../../src/demo/plan.js';
import { SimSystem } from '../../src/demo/sim.js';
import { ICMPV4_ECHO_REPLY } from '../../src/packet/icmp.js';
import type { TunnelDetail } from '../../src/gateway/gateway-stats.js';

const plan = buildPlan('mt');
const PORTS = [plan.wireguardPort, plan.wireguardPort + 1, plan.wireguardPort + 2];

const running: SimSystem[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

function tunnelsOf(sys: SimSystem, side: 'a' | 'b'): TunnelDetail[] {
  const p = sys.gateways[side].gateway.stats().peers[0]!;
  return p.wgTunnels ?? [];
}

/** Transport packets per tunnel sent (tx) and received (rx) by A between two snapshots. */
function delta(before: TunnelDetail[], after: TunnelDetail[]): { tx: number[]; rx: number[] } {
  return {
    tx: after.map((t, i) => t.txPackets - before[i]!.txPackets),
    rx: after.map((t, i) => t.rxPackets - before[i]!.rxPackets),
  };
}

/** Echo conversations `ids` from A1 to B3; returns how many replies came back. */
async function converse(sys: SimSystem, ids: readonly number[], seq: number): Promise<number> {
  const a1 = sys.pod('A1');
  const to = remotePodAddress(plan, plan.a, findPod(plan, 'B3'));
  let replies = 0;
  for (const id of ids) {
    const before = a1.seen.total;
    a1.sendEcho(to, id, seq);
    await sys.run();
    if (a1.seen.since(before).some((p) => p.icmpType === ICMPV4_ECHO_REPLY && p.src === to)) replies++;
  }
  return replies;
}

describe('several tunnels between two Weft gateways (simulated network)', () => {
  it('three tunnels up; flows spread over all, replies on their tunnel; a failed tunnel leaves the spread and returns', async () => {
    const sys = await SimSystem.start(plan, PORTS);
    running.push(sys);
    const a = sys.gateways.a.gateway;
    const b = sys.gateways.b.gateway;
    expect(a.devices.length).toBe(3);
    expect(b.devices.length).toBe(3);
    const ta = tunnelsOf(sys, 'a');
    expect(ta.map((t) => t.interface)).toEqual(['liqo-tunnel', 'liqo-tunnel1', 'liqo-tunnel2']);
    expect(ta.map((t) => [t.local, t.remote])).toEqual([
      ['169.254.18.2', '169.254.18.1'],
      ['169.254.18.6', '169.254.18.5'],
      ['169.254.18.10', '169.254.18.9'],
    ]);
    expect(ta.map((t) => t.endpoint)).toEqual(PORTS.map((p) => `${plan.b.wanAddress}:${p}`));
    expect(tunnelsOf(sys, 'b').map((t) => t.listenPort)).toEqual(PORTS);
    // Every tunnel has its own session (handshake at start, as a new active does).
    for (const t of [...ta, ...tunnelsOf(sys, 'b')]) expect(t.lastHandshakeAtMs).not.toBeNull();
    // Sessions alone spread nothing: a Liqo gateway completes handshakes on every tunnel too.
    expect(ta.slice(1).map((t) => t.inSpread)).toEqual([false, false]);
    // Each tunnel's check echoed the multipath mark (the peer is a Weft gateway that spreads).
    for (const i of [0, 1, 2]) {
      a.setTunnelCheck(plan.b.id, i, 'Connected', 0.3, true);
      b.setTunnelCheck(plan.a.id, i, 'Connected', 0.3, true);
    }

    const ids = Array.from({ length: 300 }, (_, i) => 1000 + i);
    let before = tunnelsOf(sys, 'a');
    expect(await converse(sys, ids, 1)).toBe(ids.length);
    let d = delta(before, tunnelsOf(sys, 'a'));
    // Each tunnel carries a fair share, and exactly as many replies come back on it as requests left.
    for (const n of d.tx) expect(n).toBeGreaterThan(60);
    expect(d.rx).toEqual(d.tx);
    expect(d.tx.reduce((x, y) => x + y, 0)).toBe(ids.length);

    // Tunnel 1's check fails on both ends: it leaves the spread; every conversation still answers.
    a.setTunnelCheck(plan.b.id, 1, 'Error', 0);
    b.setTunnelCheck(plan.a.id, 1, 'Error', 0);
    expect(tunnelsOf(sys, 'a')[1]!.inSpread).toBe(false);
    before = tunnelsOf(sys, 'a');
    expect(await converse(sys, ids, 2)).toBe(ids.length);
    d = delta(before, tunnelsOf(sys, 'a'));
    expect(d.tx[1]).toBe(0);
    expect(d.rx[1]).toBe(0);
    expect(d.rx).toEqual(d.tx);

    // It answers again: back in the spread, the same share as before.
    a.setTunnelCheck(plan.b.id, 1, 'Connected', 0.4, true);
    b.setTunnelCheck(plan.a.id, 1, 'Connected', 0.4, true);
    before = tunnelsOf(sys, 'a');
    expect(await converse(sys, ids, 3)).toBe(ids.length);
    d = delta(before, tunnelsOf(sys, 'a'));
    expect(d.tx[1]).toBeGreaterThan(60);
    expect(d.rx).toEqual(d.tx);
    expect(tunnelsOf(sys, 'a')[1]).toMatchObject({ inSpread: true, check: 'Connected', latencyMs: 0.4 });
  });

  it('towards a peer whose check answers without the multipath mark (a Liqo gateway), every flow stays on tunnel 0', async () => {
    const sys = await SimSystem.start(plan, PORTS);
    running.push(sys);
    const a = sys.gateways.a.gateway;
    // Liqo's receiver drops fields it does not know: its PONGs come back without the mark.
    for (const i of [0, 1, 2]) a.setTunnelCheck(plan.b.id, i, 'Connected', 0.3, false);
    const before = tunnelsOf(sys, 'a');
    expect(await converse(sys, [11, 12, 13, 14, 15, 16, 17, 18, 19, 20], 1)).toBe(10);
    const d = delta(before, tunnelsOf(sys, 'a'));
    expect(d.tx[0]).toBe(10);
    expect(d.tx[1]! + d.tx[2]!).toBe(0);
    expect(tunnelsOf(sys, 'a').map((t) => t.inSpread)).toEqual([true, false, false]);
  });

  it('a single-port client against a server with three tunnels open uses tunnel 0', async () => {
    const sys = await SimSystem.start(plan, PORTS, 'b');
    running.push(sys);
    expect(sys.gateways.a.gateway.devices.length).toBe(1);
    expect(sys.gateways.b.gateway.devices.length).toBe(3);
    expect(await converse(sys, [1, 2, 3, 4, 5, 6, 7, 8], 1)).toBe(8);
    const tb = tunnelsOf(sys, 'b');
    expect(tb[0]!.rxPackets).toBeGreaterThan(8);
    expect(tb[1]!.rxPackets + tb[2]!.rxPackets).toBe(0);
  });
});
