/**
 * Traceroute through the YAML mode's gateway on the compiled rules, at the router: the two
 * things Liqo's rules do not give (docs/rules.md "YAML mode"), with the peer's real pod CIDR equal to
 * the local one (the e2e clusters' layout):
 * - the router's own Time Exceeded about a probe from the peer goes back to the peer (by its
 *   destination, the probe's real source, it would go to a local pod), its source the external
 *   CIDR's first address (the translation's error-source rule at output);
 * - a node's Time Exceeded about a probe from the peer (related: conntrack translates it back)
 *   leaves with that address as source too (the rule at forward), not the node's.
 */
import { describe, expect, it } from 'vitest';
import { PeerTable } from '../../src/router/peer-table.js';
import type { NatConfig, NatPeerConfig } from '../../src/nat/config.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { rulesFromNatConfig } from '../../src/rules/from-nat.js';
import { ipToNumber } from '../../src/rules/model.js';
import { udpPacket } from '../packet/factory.js';
import { errorAbout, ip, port, through, TUN } from './router-flows.js';

const CFG: NatConfig = {
  localPodCIDRs: ['10.112.0.0/16'],
  localExternalCIDR: '10.70.0.0/16',
  mtu: 1340,
  conntrack: { seed: 1 },
};
const PEER: NatPeerConfig = {
  name: 'b',
  remote: { podCIDRs: ['10.112.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
  remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
};
const nodes = {
  lookupDestination: (b: Uint8Array, o: number) =>
    b[o] === 10 && (b[o + 1] === 112 || b[o + 1] === 80) ? 'n' : undefined,
};

function gateway(errorSourceRule: boolean): Router<string, string> {
  const nat = new PeerTable(CFG);
  const r = new Router<string, string>({ peers: nat, nodes });
  r.setLocalAddresses(['10.80.0.1']);
  r.addPeer('b', nat.addPeer(PEER), 'link');
  const rules = new RulesAttachment(
    { peer: TUN, node: 'liqo.geneve', host: 'eth0', peerAddr: 0, nodeAddr: 0, hostAddr: 0, pathMtu: 1340 },
    { flows: { seed: 1 } },
  );
  rules.attachTo(r);
  const tables = rulesFromNatConfig(CFG, [PEER], { tunnel: TUN });
  rules.setTables(
    errorSourceRule
      ? tables
      : tables.map((t) => ({ ...t, chains: t.chains.filter((c) => !c.name.startsWith('icmp-error-source')) })),
  );
  return r;
}

const probe = (ttl: number, dport: number) =>
  udpPacket({ src: '10.112.1.11', dst: '10.112.2.23', sport: 40000, dport, ttl, headroom: 128 });
/** Outer source, destination, ICMP type; quoted source, destination, destination port. */
const fields = (p: Uint8Array): (string | number)[] => [
  ip(p, 12),
  ip(p, 16),
  p[20]!,
  ip(p, 28 + 12),
  ip(p, 28 + 16),
  port(p, 28 + 22),
];

describe('traceroute through a YAML gateway on the compiled rules (peer real CIDR = local CIDR)', () => {
  it("the gateway's own Time Exceeded about a probe from the peer goes back to it, from the external address", () => {
    const r = gateway(true);
    const out = through(r, probe(1, 33435), 'peer', 1000);
    expect(out?.lane).toBe('peer');
    expect(fields(out!.pkt)).toEqual(['10.70.0.0', '10.112.1.11', 11, '10.112.1.11', '10.112.2.23', 33435]);
    // Without the error-source rule it would carry the router's own 10.80.0.1 (the peer's
    // allowed IPs drop it).
    const bare = through(gateway(false), probe(1, 33435), 'peer', 1000);
    expect(bare?.lane).toBe('peer');
    expect(ip(bare!.pkt, 12)).toBe('10.80.0.1');
  });

  it("a node's Time Exceeded about a probe from the peer: translated back, the node's source replaced", () => {
    const r = gateway(true);
    const passed = through(r, probe(5, 33436), 'peer', 1000);
    expect(passed?.lane).toBe('node');
    expect(ip(passed!.pkt, 12)).toBe('10.71.1.11'); // the peer's pod as this cluster remaps it
    const err = through(r, errorAbout(passed!.pkt, '10.80.0.3'), 'node', 1010);
    expect(err?.lane).toBe('peer');
    expect(fields(err!.pkt)).toEqual(['10.70.0.0', '10.112.1.11', 11, '10.112.1.11', '10.112.2.23', 33436]);
    const bare = gateway(false);
    const p2 = through(bare, probe(5, 33436), 'peer', 1000);
    expect(ip(through(bare, errorAbout(p2!.pkt, '10.80.0.3'), 'node', 1010)!.pkt, 12)).toBe('10.80.0.3');
  });
});
