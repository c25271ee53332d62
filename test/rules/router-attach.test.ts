/**
 * Liqo's gateway FirewallConfigurations on the real Router (src/router): the hook points the
 * router runs, with the device names its lanes give (peer → liqo-tunnel).
 */
import { describe, expect, it } from 'vitest';
import { checksumVerifies, pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import { PeerTable } from '../../src/router/peer-table.js';
import { ROUTER_DROP_NAMES } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { tcpPacket } from '../packet/factory.js';
import * as fx from './fixtures.js';

const SYN = 0x02;

describe('RulesAttachment on the Router', () => {
  it('Helm MSS clamp lowers SYNs towards the tunnel; a forward drop rule filters and counts', () => {
    const peers = new PeerTable({ localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' });
    const router = new Router<string, unknown>({ peers, nodes: new GeneveTunnelTable() });
    router.addPeer(
      'b',
      peers.addPeer({
        name: 'b',
        remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] },
        remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
      }),
      'link-b',
    );
    const rules = new RulesAttachment({
      peer: fx.TUNNEL,
      node: fx.NODE_IF,
      host: fx.DEFAULT_IF,
      peerAddr: 0,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: 1500,
    });
    rules.attachTo(router);
    const deny = {
      metadata: { name: 'rlx-deny', namespace: 'n' },
      spec: {
        table: {
          name: 'rlx-deny',
          family: 'IPV4',
          chains: [fx.forwardFilterChain('fwd', [fx.deny9999('drop')])],
        },
      },
    };
    expect(rules.update([fx.mssClamp('1200'), deny])).toEqual([]);
    const lanes = new RouterLanes<string, unknown>(4);
    const p = tcpPacket({
      src: '10.0.1.1',
      dst: '10.71.0.9',
      sport: 40000,
      dport: 80,
      flags: SYN,
      mss: 1460,
      headroom: 128,
    });
    router.fromNodes(p.buf, Uint32Array.of(p.off), Uint32Array.of(p.len), 1, 1000, lanes);
    expect(lanes.toPeers.count).toBe(1);
    const off = lanes.toPeers.offs[0]!;
    const len = lanes.toPeers.lens[0]!;
    const b = p.buf; // lanes hold offsets into the input buffer
    expect((b[off + 42]! << 8) | b[off + 43]!).toBe(1200);
    expect(checksumVerifies(b, off + 20, len - 20, pseudoHeaderSumV4(b, off + 12, off + 16, 6, len - 20))).toBe(true);
    lanes.clear();
    const q = tcpPacket({
      src: '10.0.1.1',
      dst: '10.71.0.9',
      sport: 40001,
      dport: 9999,
      flags: SYN,
      mss: 1460,
      headroom: 128,
    });
    router.fromNodes(q.buf, Uint32Array.of(q.off), Uint32Array.of(q.len), 1, 1000, lanes);
    expect(lanes.toPeers.count).toBe(0);
    expect(router.drops[ROUTER_DROP_NAMES.indexOf('filtered')]).toBe(1);
    expect(rules.engine!.counterOf('n/rlx-deny/rlx-deny/fwd/no-9999')).toBe(1);
  });
});
