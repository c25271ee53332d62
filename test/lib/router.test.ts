/**
 * The library exposes the gateway's I/O-free Router: an embedder wires a NatRouter (the router
 * with a NAT configuration's compiled rules), a Geneve tunnel table and its own peer links,
 * routes a batch and reads the lanes — the same classes the gateway and the simulation run.
 */
import { describe, expect, it } from 'vitest';
import {
  GeneveTunnelTable,
  HOOK_FORWARD,
  NatRouter,
  ROUTER_DROP_NAMES,
  RouterLanes,
  VERDICT_DROP,
} from '../../src/lib/index.js';
import { udpPacket } from '../packet/factory.js';

describe('library: Router', () => {
  it('routes a node packet to the peer link the embedder registered, and a hook can drop', () => {
    const table = new GeneveTunnelTable();
    const nat = new NatRouter<string, unknown>(
      { localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16' },
      table,
    );
    const router = nat.router;
    nat.addPeer(
      {
        name: 'b',
        remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: [] },
        remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
      },
      'link-b',
    );
    const p = udpPacket({ src: '10.0.1.1', dst: '10.71.0.9', sport: 1, dport: 2, headroom: 128 });
    const lanes = new RouterLanes<string, unknown>(4);
    router.fromNodes(p.buf, Uint32Array.of(p.off), Uint32Array.of(p.len), 1, Date.now(), lanes);
    expect(lanes.toPeers.count).toBe(1);
    expect(lanes.toPeers.tags[0]).toBe('link-b');
    router.attach(HOOK_FORWARD, { name: 'deny', process: () => VERDICT_DROP });
    lanes.clear();
    const q = udpPacket({ src: '10.0.1.1', dst: '10.71.0.9', sport: 1, dport: 2, headroom: 128 }); // p was translated in place
    router.fromNodes(q.buf, Uint32Array.of(q.off), Uint32Array.of(q.len), 1, Date.now(), lanes);
    expect(lanes.toPeers.count).toBe(0);
    expect(router.drops[ROUTER_DROP_NAMES.indexOf('filtered')]).toBe(1);
  });
});
