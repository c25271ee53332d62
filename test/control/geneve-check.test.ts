import { describe, expect, test } from 'vitest';
import { ConnChecker, decodePing, type PeerCheckStatus } from '../../src/control/conncheck.js';
import {
  GENEVE_CHECK_INTERVAL_MS,
  GENEVE_CHECK_LOSS_THRESHOLD,
  GENEVE_CHECK_PORT,
  geneveCheckTargets,
  geneveLinksDownReason,
  geneveStatusWriteDue,
} from '../../src/control/geneve-check.js';
import { parseConfig } from '../../src/control/config.js';
import { gatewayInput } from './fixtures.js';

const nodeInput = (): Record<string, unknown> => ({
  role: 'node',
  cluster: { id: 'cluster-a', podCIDRs: ['10.0.0.0/16'], internalCIDR: '10.80.0.0/16' },
  node: {
    name: 'worker-1',
    gateways: [
      {
        name: 'fabric-b',
        vni: 0,
        gatewayUnderlay: '172.18.0.2',
        gatewayInternalAddress: '10.80.0.1',
        localInternalAddress: '10.80.0.2',
        remoteCIDRs: ['10.71.0.0/16'],
      },
    ],
  },
});

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Two checkers (node and gateway) joined by a virtual link that can be cut. */
function pair(t0: number) {
  let up = true;
  let now = t0;
  const updates: { side: string; id: string; st: PeerCheckStatus }[] = [];
  const sides: Record<string, ConnChecker> = {};
  const mk = (side: 'node' | 'gw', peer: 'node' | 'gw', myAddr: string) =>
    new ConnChecker({
      port: GENEVE_CHECK_PORT,
      intervalMs: GENEVE_CHECK_INTERVAL_MS,
      lossThreshold: GENEVE_CHECK_LOSS_THRESHOLD,
      send: (bytes, _addr, port) => {
        if (up) sides[peer]!.receive(bytes.slice(), myAddr, port, now);
      },
      onUpdate: (id, st) => updates.push({ side, id, st }),
    });
  sides['node'] = mk('node', 'gw', '10.80.0.2');
  sides['gw'] = mk('gw', 'node', '10.80.0.1');
  sides['node'].addPeer('fabric-a', '10.80.0.1', now);
  sides['gw'].addPeer('worker-1', '10.80.0.2', now);
  return {
    node: sides['node'],
    gw: sides['gw'],
    updates,
    cut: (v: boolean) => (up = !v),
    /** Advance the virtual clock, polling both sides at every deadline on the way. */
    advance(ms: number) {
      const end = now + ms;
      for (;;) {
        const next = Math.min(sides['node']!.nextDeadline(), sides['gw']!.nextDeadline());
        if (next > end) break;
        now = Math.max(now, next);
        sides['node']!.poll(now);
        sides['gw']!.poll(now);
      }
      now = end;
    },
    get now() {
      return now;
    },
  };
}

describe("Liqo's Geneve check (virtual clock)", () => {
  test('Connected at the first reply; Error exactly interval × threshold after the last one; back on healing', () => {
    const p = pair(1_000_000);
    p.advance(0);
    expect(p.node.status('fabric-a')!.value).toBe('Connected');
    expect(p.gw.status('worker-1')!.value).toBe('Connected');
    p.advance(25_000); // PINGs at +10 s, +20 s answered
    const lastReply = p.node.status('fabric-a')!.lastReplyAt!;
    expect(lastReply).toBe(1_020_000);
    p.cut(true);
    // 50 s (10 s × 5) after the last reply, and not a moment before.
    p.advance(lastReply + 50_000 - 1 - p.now);
    expect(p.node.status('fabric-a')!.value).toBe('Connected');
    p.advance(1);
    expect(p.node.status('fabric-a')!.value).toBe('Error');
    expect(p.gw.status('worker-1')!.value).toBe('Error');
    p.cut(false);
    p.advance(10_000); // the next PING gets its PONG
    expect(p.node.status('fabric-a')!.value).toBe('Connected');
    expect(p.gw.status('worker-1')!.value).toBe('Connected');
    expect(p.updates.filter((u) => u.side === 'node').map((u) => u.st.value)).toContain('Error');
  });

  test('a PING is echoed with every field kept but msgType (either id field name)', () => {
    const sent: string[] = [];
    const c = new ConnChecker({ send: (b) => sent.push(dec.decode(b)) });
    c.receive(enc.encode('{"interfaceID":"gt-1","msgType":"PING","timeStamp":"2026-01-01T00:00:00Z"}'), 'a', 1, 0);
    c.receive(enc.encode('{"clusterID":"gt-2","msgType":"PING","timeStamp":"2026-01-01T00:00:00Z"}'), 'a', 1, 0);
    expect(sent.map((s) => JSON.parse(s))).toEqual([
      { interfaceID: 'gt-1', msgType: 'PONG', timeStamp: '2026-01-01T00:00:00Z' },
      { clusterID: 'gt-2', msgType: 'PONG', timeStamp: '2026-01-01T00:00:00Z' },
    ]);
    expect(decodePing(enc.encode('{"clusterID":1,"msgType":"PING","timeStamp":"x"}'))).toBeNull();
    expect(decodePing(enc.encode('[1]'))).toBeNull();
    c.receive(enc.encode('{"msgType":"PING"}'), 'a', 1, 0);
    expect(c.drops.malformed).toBe(1);
  });
});

describe('GeneveTunnel status writes (Liqo fabric rule)', () => {
  test('value changes are written at once; an unchanged Connected only after the update interval', () => {
    const i = 10_000;
    expect(geneveStatusWriteDue({ value: undefined, latencyAt: undefined }, 'Connecting', 0, i)).toBe(false);
    expect(geneveStatusWriteDue({ value: undefined, latencyAt: undefined }, 'Connected', 0, i)).toBe(true);
    expect(geneveStatusWriteDue({ value: 'Connected', latencyAt: 0 }, 'Connected', 10_000, i)).toBe(false);
    expect(geneveStatusWriteDue({ value: 'Connected', latencyAt: 0 }, 'Connected', 10_001, i)).toBe(true);
    expect(geneveStatusWriteDue({ value: 'Connected', latencyAt: 0 }, 'Error', 1, i)).toBe(true);
    expect(geneveStatusWriteDue({ value: 'Error', latencyAt: undefined }, 'Error', 99_999, i)).toBe(false);
    expect(geneveStatusWriteDue({ value: 'Error', latencyAt: undefined }, 'Connected', 1, i)).toBe(true);
  });
});

describe('gateway verdict on its Geneve links', () => {
  const st = (value: PeerCheckStatus['value'], replied: boolean): PeerCheckStatus => ({
    value,
    latencyMs: 0,
    lastReplyAt: replied ? 1 : undefined,
    peerSpreads: false,
  });
  test('Error only when every link that answered is down and none is up', () => {
    expect(geneveLinksDownReason([], 50_000)).toBeNull();
    expect(geneveLinksDownReason([{ name: 'n1', status: st('Error', false) }], 50_000)).toBeNull();
    expect(
      geneveLinksDownReason(
        [
          { name: 'n1', status: st('Error', true) },
          { name: 'n2', status: st('Connected', true) },
        ],
        50_000,
      ),
    ).toBeNull();
    expect(
      geneveLinksDownReason(
        [
          { name: 'n1', status: st('Error', true) },
          { name: 'n2', status: st('Error', false) },
        ],
        50_000,
      ),
    ).toBe('every Geneve tunnel to the nodes is down (n1: no reply to the Geneve check for 50 s)');
  });
});

describe('what each role checks', () => {
  test('gateway: node tunnels by local inner address; node agent: its gateways', () => {
    const gw = parseConfig(gatewayInput(), 't');
    const g = geneveCheckTargets(gw);
    expect(g.size).toBeGreaterThan(0);
    for (const [local, targets] of g)
      for (const t of targets) {
        const tunnel = gw.role === 'gateway' ? gw.geneve.tunnels.find((x) => x.nodeName === t.clusterId) : undefined;
        expect(tunnel?.localInternalAddress).toBe(local);
        expect(tunnel?.remoteInternalAddress).toBe(t.address);
      }
    const node = parseConfig(nodeInput(), 't');
    const n = geneveCheckTargets(node);
    if (node.role !== 'node') throw new Error('fixture');
    expect([...n.values()].flat().map((t) => t.address)).toEqual(
      node.node.gateways.map((x) => x.gatewayInternalAddress),
    );
  });
});
