/**
 * The rootless demo: both clusters in one process over the simulated wire, with the real
 * WireGuard Device, Nat and GeneveEngine. Checks what travels on each simulated link (Geneve on
 * the underlays with the right VNI and inner addresses, only WireGuard messages on the WAN) and
 * what each end sees — the same facts the namespace e2e test checks with tshark and servers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GENEVE_HEADER_LEN, geneveVni } from '../../src/geneve/header.js';
import { formatAddress } from '../../src/packet/addr.js';
import { ICMPV4_DEST_UNREACHABLE, ICMPV4_ECHO_REPLY, ICMPV4_ECHO_REQUEST } from '../../src/packet/icmp.js';
import { IPV4_DST_OFFSET, IPV4_SRC_OFFSET } from '../../src/packet/ipv4.js';
import { buildPlan } from '../../src/demo/plan.js';
import { runSimulatedDemo, SimSystem } from '../../src/demo/sim.js';

const plan = buildPlan('wd');

const running: SimSystem[] = [];
async function start(): Promise<SimSystem> {
  const sys = await SimSystem.start(plan);
  running.push(sys);
  return sys;
}
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

interface Sent {
  to: string;
  from: string;
  vni?: number;
  inner?: [string, string];
  wgType?: number;
}

function record(sys: SimSystem): Sent[] {
  const log: Sent[] = [];
  sys.net.tap = (toA, toP, fromA, fromP, b) => {
    const s: Sent = { to: `${toA}:${toP}`, from: `${fromA}:${fromP}` };
    if (toP === 6091) {
      s.vni = geneveVni(b, 0);
      const o = GENEVE_HEADER_LEN + (b[0]! & 0x3f) * 4;
      s.inner = [formatAddress(b, o + IPV4_SRC_OFFSET, 4), formatAddress(b, o + IPV4_DST_OFFSET, 4)];
    } else {
      s.wgType = b[0]!;
    }
    log.push(s);
  };
  return log;
}

describe('simulated two-cluster demo (no root)', () => {
  it('a pod of A reaches a pod of B by its remapped address; every link carries what it should', async () => {
    const sys = await start();
    const log = record(sys);
    const a1 = sys.pod('A1');
    const b3 = sys.pod('B3');
    a1.sendEcho('10.71.2.23', 7, 1);
    await sys.run();
    // B3 got the request from A1 as B addresses it, and A1 the reply from B3's remapped address.
    const req = b3.seen.recent.find((p) => p.icmpType === ICMPV4_ECHO_REQUEST)!;
    expect([req.src, req.dst, req.checksumsOk]).toEqual(['10.71.1.11', '10.0.2.23', true]);
    const rep = a1.seen.recent.find((p) => p.icmpType === ICMPV4_ECHO_REPLY)!;
    expect([rep.src, rep.dst, rep.checksumsOk]).toEqual(['10.71.2.23', '10.0.1.11', true]);

    // Underlay A: worker-1 (VNI 0) → gateway A with the packet as the pod sent it.
    expect(log[0]).toMatchObject({
      to: '172.18.0.1:6091',
      from: '172.18.0.2:6091',
      vni: 0,
      inner: ['10.0.1.11', '10.71.2.23'],
    });
    // WAN: the gateways handshook when they started forwarding (a new active initiates at once),
    // so the echo crosses as transport data (4) only: request A → B, reply B → A.
    const wan = log.filter((s) => s.wgType !== undefined);
    expect(wan[0]).toMatchObject({ to: '198.18.0.2:51840', from: '198.18.0.1:51840', wgType: 4 });
    expect(wan).toContainEqual(
      expect.objectContaining({ to: '198.18.0.1:51840', from: '198.18.0.2:51840', wgType: 4 }),
    );
    expect(wan.every((s) => s.wgType === 4)).toBe(true);
    expect(sys.gateways.a.gateway.peers().every((p) => p.handshakes > 0)).toBe(true);
    // Underlay B: gateway B → worker-2 (VNI 1, B3's node), source already remapped by B.
    expect(log).toContainEqual({
      to: '172.19.0.3:6091',
      from: '172.19.0.1:6091',
      vni: 1,
      inner: ['10.71.1.11', '10.0.2.23'],
    });
    // And back: worker-2 → gateway B with the reply to A1 as B sees it.
    expect(log).toContainEqual({
      to: '172.19.0.1:6091',
      from: '172.19.0.3:6091',
      vni: 1,
      inner: ['10.0.2.23', '10.71.1.11'],
    });
    expect(log).toContainEqual({
      to: '172.18.0.2:6091',
      from: '172.18.0.1:6091',
      vni: 0,
      inner: ['10.71.2.23', '10.0.1.11'],
    });
  });

  it("B's real pod address means nothing in A: the packet is dropped at A's node, not delivered to a twin", async () => {
    const sys = await start();
    const a1 = sys.pod('A1');
    const node = sys.nodes.get(plan.a.nodes[0]!.ns)!;
    a1.sendEcho('10.0.2.23', 7, 1);
    await sys.run();
    expect(node.drops).toBe(1);
    expect(sys.pod('B3').seen.total).toBe(0);
    expect(a1.seen.total).toBe(0);
  });

  it('host-network traffic of a node of A is SNATed to 10.70.0.0, seen by B as 10.72.0.0, and the reply comes back', async () => {
    const sys = await start();
    const node = sys.nodes.get(plan.a.nodes[1]!.ns)!;
    node.hostEcho('10.71.1.21', 9, 1);
    await sys.run();
    const atB1 = sys.pod('B1').seen.recent[0]!;
    expect([atB1.src, atB1.dst]).toEqual(['10.72.0.0', '10.0.1.21']);
    const back = node.hostSeen.recent[0]!;
    expect([back.src, back.dst, back.icmpType, back.checksumsOk]).toEqual([
      '10.71.1.21',
      '10.80.0.3',
      ICMPV4_ECHO_REPLY,
      true,
    ]);
  });

  it('an ICMP error from B comes back with the outer and the quoted addresses translated', async () => {
    const sys = await start();
    const a2 = sys.pod('A2');
    a2.sendUdp('10.71.2.24', 40000, 33434, 16);
    await sys.run();
    const e = a2.seen.recent.find((p) => p.icmpType === ICMPV4_DEST_UNREACHABLE)!;
    expect([e.src, e.dst, e.quotedSrc, e.quotedDst, e.checksumsOk]).toEqual([
      '10.71.2.24',
      '10.0.1.12',
      '10.0.1.12',
      '10.71.2.24',
      true,
    ]);
  });

  it('runSimulatedDemo: every row of the table passes, one progress line per step', async () => {
    const steps: string[] = [];
    const rows = await runSimulatedDemo(plan, (s) => steps.push(s));
    expect(rows.filter((r) => r.ok === false)).toEqual([]);
    expect(rows.map((r) => r.check)).toEqual([
      'WireGuard handshake',
      'ping (ICMP echo)',
      'source seen by B3',
      'ping (B → A)',
      'ICMP error translated',
      'host-network SNAT',
      'throughput (in-process)',
      'drops',
    ]);
    expect(steps.length).toBe(7);
  });
});
