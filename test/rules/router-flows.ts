/**
 * Shared by the rules tests that run the NAT configuration as rules on a real Router
 * (yaml-translation, mirror-shortcut): the configuration, the router, seeded randomness and
 * the packets a flow's other end or a router on the way would send.
 */
import { writeTimeExceeded } from '../../src/packet/icmp-error.js';
import { PeerTable } from '../../src/router/peer-table.js';
import type { NatConfig, NatPeerConfig } from '../../src/nat/config.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { rulesFromNatConfig } from '../../src/rules/from-nat.js';
import { ipToNumber, type RuleTable } from '../../src/rules/model.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';

export const CFG: NatConfig = {
  localPodCIDRs: ['10.112.0.0/16'],
  localExternalCIDR: '10.70.0.0/16',
  mtu: 1340,
  ipMappings: [{ externalAddress: '10.70.5.5', realAddress: '192.168.7.10' }],
  conntrack: { seed: 1 },
};
export const PEER: NatPeerConfig = {
  name: 'b',
  remote: { podCIDRs: ['10.243.0.0/16'], externalCIDRs: ['10.244.0.0/16'] },
  remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
};
export const TUN = 'liqo-tunnel';
export const nodes = {
  lookupDestination: (b: Uint8Array, o: number) =>
    (b[o] === 10 && b[o + 1] === 112) || b[o] === 192 ? 'n' : undefined,
};

/** PEER with its real pod CIDR equal to ours (Liqo's usual reason to remap). */
export const PEER_SAME: NatPeerConfig = {
  ...PEER,
  remote: { podCIDRs: ['10.112.0.0/16'], externalCIDRs: ['10.244.0.0/16'] },
};

export function rulesRouter(
  opts: { nodeAddr?: string; statelessMirror?: boolean; extra?: RuleTable[]; peer?: NatPeerConfig } = {},
): { r: Router<string, string>; rules: RulesAttachment } {
  const peer = opts.peer ?? PEER;
  const nat = new PeerTable(CFG);
  const r = new Router<string, string>({ peers: nat, nodes });
  // PEER's real CIDRs are unique: it is picked by them after the rules' dnat (remapped = real in
  // the peer table); real CIDRs overlapping ours keep the remapped ones, by which the router picks it.
  r.addPeer('b', nat.addPeer(peer === PEER ? { name: peer.name, remote: peer.remote } : peer), 'link');
  const nodeAddr = opts.nodeAddr === undefined ? 0 : ipToNumber(opts.nodeAddr)!;
  const rules = new RulesAttachment(
    {
      peer: TUN,
      node: 'liqo.geneve',
      host: 'eth0',
      peerAddr: ipToNumber('10.70.0.0')!,
      nodeAddr,
      hostAddr: 0,
      pathMtu: 1340,
    },
    { flows: { seed: 1 }, ...(opts.statelessMirror === undefined ? {} : { statelessMirror: opts.statelessMirror }) },
  );
  rules.attachTo(r);
  rules.setTables([...rulesFromNatConfig(CFG, [peer], { tunnel: TUN }), ...(opts.extra ?? [])]);
  return { r, rules };
}

export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export type Out = { lane: string; hex: string; pkt: Uint8Array } | null;

/** One packet through the router: the lane it left by and its bytes (null: dropped). */
export function through(r: Router<string, string>, p: Built, from: 'node' | 'peer', now: number): Out {
  const L = new RouterLanes<string, string>(1);
  const buf = p.buf.slice();
  if (from === 'node') r.fromNodes(buf, Uint32Array.of(p.off), Uint32Array.of(p.len), 1, now, L);
  else r.fromPeers(buf, Uint32Array.of(p.off), Uint32Array.of(p.len), ['link'], 1, now, L);
  for (const [lane, l] of [
    ['peer', L.toPeers],
    ['node', L.toNodes],
    ['host', L.toHost],
  ] as const) {
    if (l.count > 0) {
      const pkt = buf.slice(l.offs[0]!, l.offs[0]! + l.lens[0]!);
      return { lane, pkt, hex: Buffer.from(pkt).toString('hex') };
    }
  }
  return null;
}

export const ip = (b: Uint8Array, o: number): string => [...b.subarray(o, o + 4)].join('.');
export const port = (b: Uint8Array, o: number): number => (b[o]! << 8) | b[o + 1]!;

/** The reply to a packet that left a router (addresses and ports swapped). */
export function replyTo(p: Uint8Array, flags: number): Built {
  const proto = p[9]!;
  const src = ip(p, 16),
    dst = ip(p, 12);
  if (proto === 6)
    // MSS 1460: a pod's own on a 1500-byte interface, above Liqo's default clamp (tunnel MTU 1340 − 40).
    return tcpPacket({ src, dst, sport: port(p, 22), dport: port(p, 20), flags, mss: 1460, headroom: 128 });
  if (proto === 17) return udpPacket({ src, dst, sport: port(p, 22), dport: port(p, 20), headroom: 128 });
  return icmpEcho({ src, dst, ident: port(p, 24), type: 0, headroom: 128 });
}

/** An ICMP Time Exceeded about `p` sent by router `from`. */
export function errorAbout(p: Uint8Array, from: string): Built {
  const buf = new Uint8Array(128 + p.length + 64);
  buf.set(p, 128);
  const n = writeTimeExceeded(buf, 128, p.length, Uint8Array.from(from.split('.').map(Number)));
  return { buf, off: 100, len: n, l4: 120 };
}
