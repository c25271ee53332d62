/**
 * Two clusters with the SAME pod CIDR (10.200.0.0/16) and external CIDR (10.70.0.0/16), each
 * gateway a real Router in Liqo mode driven only by the FirewallConfigurations and
 * RouteConfigurations Liqo's controllers create for the peering (liqo-peering-objects.ts),
 * selected with the gateway's label selectors; peers joined in memory. No built-in NAT: every
 * translation comes from the objects, every routing decision from the RouteConfigurations.
 *
 * Cluster a (server, 169.254.18.1) sees b's pods as 10.71/16 and b's external CIDR as 10.72/16;
 * cluster b (client, .2) sees a's as 10.73/16 and 10.74/16. One node each (internal 10.80.0.2,
 * Geneve interface on the gateway liqo.<10 chars>), pods a 10.200.1.5, b 10.200.1.7.
 */
import { describe, expect, it } from 'vitest';
import { gatewayFirewallSelectors, gatewayRouteSelectors } from '../../src/control/k8s/firewall-watch.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { PeerTable } from '../../src/router/peer-table.js';
import { formatAddress } from '../../src/packet/addr.js';
import { ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { tcpChecksumValidV4 } from '../../src/packet/tcp.js';
import { udpChecksumValidV4 } from '../../src/packet/udp.js';
import { ROUTER_DROP_NAMES, RouterDrop } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { buildSteering, fabricRouteDestinations, parseRouteObjects } from '../../src/rules/steering.js';
import { tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { heapBytesPerOp } from '../util/alloc.js';
import {
  DEFAULT_IF,
  TUNNEL_IF,
  fabricObjects,
  gatewayObjects,
  selects,
  type PeeringSide,
} from './liqo-peering-objects.js';
import { fabricFirewallSelectors } from '../../src/control/k8s/firewall-watch.js';
import {
  HOOK_INPUT,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  PacketMeta,
  SOURCE_HOST,
  SOURCE_NODE,
  type PacketHook,
} from '../../src/router/hooks.js';
import { BatchStages } from '../../src/router/stage-batch.js';

type Link = { name: string };
const HEAD = 128;
const NOW = 1_700_000_000_000;
const POD = '10.200.0.0/16';
const EXT = '10.70.0.0/16';

const SIDE_A: PeeringSide = {
  cfg: 'cluster-b',
  remoteId: 'cluster-b',
  namespace: 'liqo-tenant-cluster-b',
  mode: 'server',
  remotePod: { real: POD, remapped: '10.71.0.0/16' },
  remoteExt: { real: EXT, remapped: '10.72.0.0/16' },
  nodes: [{ name: 'a-worker', internalIP: '10.80.0.2', gatewayIf: 'liqo.k3x9q2m7va', pods: ['10.200.1.5'] }],
  mss: 1300, // the Helm clamp as a fixed value: what its default (0, rt mtu) gives over the default tunnel MTU 1340
  dropPort: 8081,
  ipMappings: [{ name: 'db', real: '192.168.60.10', remapped: '10.70.0.5', node: 'a-worker' }],
  localPod: POD,
  localExt: EXT,
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: 'liqo.a7c2n9x0qe',
};
const SIDE_B: PeeringSide = {
  cfg: 'cluster-a',
  remoteId: 'cluster-a',
  namespace: 'liqo-tenant-cluster-a',
  mode: 'client',
  remotePod: { real: POD, remapped: '10.73.0.0/16' },
  remoteExt: { real: EXT, remapped: '10.74.0.0/16' },
  nodes: [{ name: 'b-worker', internalIP: '10.80.0.2', gatewayIf: 'liqo.p0w8r1zt4c', pods: ['10.200.1.7'] }],
  mss: 1300, // the Helm clamp as a fixed value: what its default (0, rt mtu) gives over the default tunnel MTU 1340
  localPod: POD,
  localExt: EXT,
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: 'liqo.t5m3b8k1zw',
};

interface Gw {
  router: Router<Link, GeneveTunnel>;
  rules: RulesAttachment;
  node: GeneveTunnel;
  link: Link;
  errors: string[];
}

function gateway(side: PeeringSide, ownTunnelIp: string, peerTunnelIp: string): Gw {
  const nat = new PeerTable({ localPodCIDRs: [POD], localExternalCIDR: EXT, mtu: 1340 });
  const table = new GeneveTunnelTable();
  const n = side.nodes[0]!;
  const node = table.add({
    vni: 1,
    remoteUnderlay: '192.168.0.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: n.internalIP,
    mode: 'l3',
    name: n.name,
  });
  const router = new Router<Link, GeneveTunnel>({ peers: nat, nodes: table });
  const link: Link = { name: side.remoteId };
  // The built-in NAT peer exists (the router needs one per peer) but is never consulted in Liqo
  // mode: its remapped CIDRs are deliberately other ones, so any use of it would show.
  const rp = router.addPeer(
    side.remoteId,
    nat.addPeer({
      name: side.remoteId,
      remote: { podCIDRs: [POD], externalCIDRs: [EXT] },
      remapped: { podCIDRs: ['10.98.0.0/16'], externalCIDRs: ['10.99.0.0/16'] },
    }),
    link,
  );
  router.setLocalAddresses(['10.80.0.1']);
  router.setTunnelAddresses([ownTunnelIp], [{ address: peerTunnelIp, peer: rp }]);
  const objs = gatewayObjects(side);
  const fw = objs.firewall.filter((o) => gatewayFirewallSelectors([side.remoteId]).some((s) => selects(s, o)));
  const rt = objs.routes.filter((o) => gatewayRouteSelectors([side.remoteId], n.name).some((s) => selects(s, o)));
  const rules = new RulesAttachment({
    peer: TUNNEL_IF,
    node: '',
    host: DEFAULT_IF,
    peerAddr: 0,
    nodeAddr: 0,
    hostAddr: 0,
    pathMtu: 1340,
  });
  rules.attachTo(router);
  const errors = rules.update(fw).map((e) => e.message);
  const parsed = parseRouteObjects(rt, new Map());
  errors.push(...parsed.errors.map((e) => e.message));
  router.setSteering(
    buildSteering(
      {
        devices: { tunnel: TUNNEL_IF, host: DEFAULT_IF },
        nodes: [{ tunnel: node, dev: n.gatewayIf }],
        isPeerAddress: (g) => g === peerTunnelIp,
      },
      [...parsed.specs.values()],
    ),
  );
  return { router, rules, node, link, errors };
}

const A = gateway(SIDE_A, '169.254.18.1', '169.254.18.2');
const B = gateway(SIDE_B, '169.254.18.2', '169.254.18.1');

interface Out {
  at: 'node' | 'dropped';
  src: string;
  dst: string;
  ttl: number;
  buf: Uint8Array;
  off: number;
  len: number;
}

/** A packet from `from`'s node through its gateway, the tunnel, the other gateway, to the other node. */
function cross(from: Gw, to: Gw, p: Built): Out {
  const buf = new Uint8Array(HEAD + p.len + 64);
  buf.set(p.buf.subarray(p.off, p.off + p.len), HEAD);
  const L1 = new RouterLanes<Link, GeneveTunnel>(4);
  from.router.fromNodes(buf, Uint32Array.of(HEAD), Uint32Array.of(p.len), 1, NOW, L1, [from.node]);
  const gone = { at: 'dropped' as const, src: '', dst: '', ttl: 0, buf, off: 0, len: 0 };
  if (L1.toPeers.count !== 1) return gone;
  expect(L1.toPeers.tags[0]).toBe(from.link);
  const L2 = new RouterLanes<Link, GeneveTunnel>(4);
  to.router.fromPeers(
    buf,
    Uint32Array.of(L1.toPeers.offs[0]!),
    Uint32Array.of(L1.toPeers.lens[0]!),
    [to.link],
    1,
    NOW,
    L2,
  );
  if (L2.toNodes.count !== 1) return gone;
  expect(L2.toNodes.tags[0]).toBe(to.node);
  const off = L2.toNodes.offs[0]!;
  const len = L2.toNodes.lens[0]!;
  return {
    at: 'node',
    src: formatAddress(buf.subarray(off + 12, off + 16)),
    dst: formatAddress(buf.subarray(off + 16, off + 20)),
    ttl: buf[off + 8]!,
    buf,
    off,
    len,
  };
}

function checksumsValid(o: Out): boolean {
  if (!ipv4HeaderValid(o.buf, o.off, o.len)) return false;
  const proto = o.buf[o.off + 9];
  const l4 = o.off + (o.buf[o.off]! & 15) * 4;
  if (proto === 6) return tcpChecksumValidV4(o.buf, o.off, l4, o.off + o.len - l4);
  if (proto === 17) return udpChecksumValidV4(o.buf, o.off, l4, o.off + o.len - l4);
  return true;
}

function mssOf(o: Out): number {
  const t = o.off + (o.buf[o.off]! & 15) * 4;
  for (let i = t + 20; i < t + (o.buf[t + 12]! >>> 4) * 4;) {
    if (o.buf[i] === 2) return (o.buf[i + 2]! << 8) | o.buf[i + 3]!;
    i += o.buf[i] === 1 ? 1 : o.buf[i + 1]!;
  }
  return -1;
}

/**
 * Node a-worker's fabric side as the node agent runs it (src/node/agent.ts): the fabric
 * objects on a POSTROUTING stage towards the gateway and a PREROUTING stage from it.
 */
const nodeOut = new BatchStages();
const nodeIn = new BatchStages();
const nodeRules = new RulesAttachment({
  peer: TUNNEL_IF,
  node: SIDE_A.nodeSideIf,
  host: DEFAULT_IF,
  peerAddr: 0,
  nodeAddr: 0,
  hostAddr: 0,
  pathMtu: 1340,
});
nodeRules.attachTo({
  // attachTo goes through the hooks in order: OUTPUT before POSTROUTING, PREROUTING before INPUT.
  attach: (h: number, st: PacketHook) => {
    if (h === HOOK_OUTPUT || h === HOOK_POSTROUTING) nodeOut.stages.push(st);
    if (h === HOOK_PREROUTING || h === HOOK_INPUT) nodeIn.stages.push(st);
  },
  detach: () => false,
});
const nodeErrors = nodeRules
  .update(fabricObjects(SIDE_A).firewall.filter((o) => fabricFirewallSelectors('a-worker').some((x) => selects(x, o))))
  .map((e) => e.message);

function nodeStage(stages: BatchStages, buf: Uint8Array, off: number, len: number, out: boolean): boolean {
  const m = new PacketMeta();
  m.source = out ? SOURCE_HOST : SOURCE_NODE;
  m.output = out ? OUTPUT_NODE : OUTPUT_NONE;
  return stages.run(buf, Uint32Array.of(off), Uint32Array.of(len), 1, m, NOW) === 1;
}

const drops = (g: Gw) =>
  Object.fromEntries(ROUTER_DROP_NAMES.map((n, i) => [n, g.router.drops[i]]).filter(([, v]) => v !== 0));

describe('two clusters with conflicting pod CIDRs, gateways driven only by Liqo objects', () => {
  it('every object is accepted', () => {
    expect(A.errors).toEqual([]);
    expect(B.errors).toEqual([]);
    expect([...A.rules.tables().keys()]).toEqual([
      'liqo-tenant-cluster-b/cluster-b-remap-externalcidr',
      'liqo-tenant-cluster-b/cluster-b-remap-podcidr',
      'liqo-tenant-cluster-b/db-remap-ipmapping-gw',
      'liqo-tenant-cluster-b/gw-mss-clamping',
      'liqo-tenant-cluster-b/service-nodeport-routing',
      'liqo-tenant-cluster-b/user-drop-port',
    ]);
  });

  it('pod a → pod b and the reply: remapped on both sides, real addresses in the tunnel, checksums valid', () => {
    const req = cross(
      A,
      B,
      udpPacket({
        src: '10.200.1.5',
        dst: '10.71.1.7',
        sport: 40000,
        dport: 53,
        ttl: 64,
        payload: new Uint8Array(32).fill(7),
      }),
    );
    expect([req.at, req.src, req.dst, req.ttl]).toEqual(['node', '10.73.1.5', '10.200.1.7', 62]);
    expect(checksumsValid(req)).toBe(true);
    const rep = cross(B, A, udpPacket({ src: '10.200.1.7', dst: '10.73.1.5', sport: 53, dport: 40000, ttl: 64 }));
    expect([rep.at, rep.src, rep.dst]).toEqual(['node', '10.71.1.7', '10.200.1.5']);
    expect(checksumsValid(rep)).toBe(true);
  });

  it('pod b → pod a (b opens the flow)', () => {
    const req = cross(
      B,
      A,
      tcpPacket({ src: '10.200.1.7', dst: '10.73.1.5', sport: 41000, dport: 80, flags: 0x02, mss: 1460 }),
    );
    expect([req.at, req.src, req.dst]).toEqual(['node', '10.71.1.7', '10.200.1.5']);
    expect(mssOf(req)).toBe(1300);
    expect(checksumsValid(req)).toBe(true);
    const synack = cross(
      A,
      B,
      tcpPacket({ src: '10.200.1.5', dst: '10.71.1.7', sport: 80, dport: 41000, flags: 0x12, mss: 1400 }),
    );
    expect([synack.at, synack.src, synack.dst]).toEqual(['node', '10.73.1.5', '10.200.1.7']);
    expect(mssOf(synack)).toBe(1300);
    expect(checksumsValid(synack)).toBe(true);
  });

  it('the user FirewallConfiguration drops TCP 8081 towards b; 8080 passes; counted per rule', () => {
    const filtered = A.router.drops[RouterDrop.Filtered]!;
    const dropped = cross(
      A,
      B,
      tcpPacket({ src: '10.200.1.5', dst: '10.71.1.7', sport: 42000, dport: 8081, flags: 0x02 }),
    );
    expect(dropped.at).toBe('dropped');
    expect(A.router.drops[RouterDrop.Filtered]).toBe(filtered + 1);
    expect(
      A.rules.engine!.counterOf('liqo-tenant-cluster-b/user-drop-port/user-drop-port/drop-port/drop-tcp-8081'),
    ).toBe(1);
    const passed = cross(
      A,
      B,
      tcpPacket({ src: '10.200.1.5', dst: '10.71.1.7', sport: 42000, dport: 8080, flags: 0x02 }),
    );
    expect([passed.at, passed.dst]).toEqual(['node', '10.200.1.7']);
  });

  it('routing needs the node interface names: from an unnamed input no gw-ext rule matches', () => {
    const before = A.router.drops[RouterDrop.NoRoute]!;
    const p = udpPacket({ src: '10.200.1.5', dst: '10.71.1.7', sport: 1, dport: 2 });
    const buf = new Uint8Array(HEAD + p.len);
    buf.set(p.buf.subarray(p.off, p.off + p.len), HEAD);
    const L = new RouterLanes<Link, GeneveTunnel>(1);
    A.router.fromNodes(buf, Uint32Array.of(HEAD), Uint32Array.of(p.len), 1, NOW, L);
    expect(L.toPeers.count).toBe(0);
    expect(A.router.drops[RouterDrop.NoRoute]).toBe(before + 1);
    expect(drops(A)).toMatchObject({ no_route: before + 1 });
  });

  it("host network of a node → pod b, and the reply reaches the node: the node's bypass SNAT, the gateway's ct mark → fwmark route, both reversed by conntrack", () => {
    expect(nodeErrors).toEqual([]);
    const p = udpPacket({ src: '10.80.0.2', dst: '10.71.1.7', sport: 43000, dport: 53 });
    const buf = new Uint8Array(HEAD + p.len + 64);
    buf.set(p.buf.subarray(p.off, p.off + p.len), HEAD);
    expect(nodeStage(nodeOut, buf, HEAD, p.len, true)).toBe(true);
    expect(formatAddress(buf.subarray(HEAD + 12, HEAD + 16))).toBe('10.70.0.0'); // the unknown-source IP
    const req = cross(A, B, { buf, off: HEAD, len: p.len, l4: HEAD + 20 });
    expect([req.at, req.src, req.dst]).toEqual(['node', '10.74.0.0', '10.200.1.7']);
    expect(checksumsValid(req)).toBe(true);
    const rep = cross(B, A, udpPacket({ src: '10.200.1.7', dst: '10.74.0.0', sport: 53, dport: 43000 }));
    expect([rep.at, rep.src, rep.dst]).toEqual(['node', '10.71.1.7', '10.70.0.0']); // routed to a-worker by the mark
    expect(nodeStage(nodeIn, rep.buf, rep.off, rep.len, false)).toBe(true);
    expect(formatAddress(rep.buf.subarray(rep.off + 16, rep.off + 20))).toBe('10.80.0.2');
    expect(checksumsValid(rep)).toBe(true);
    // Without the connection's mark the same reply has no route to any node.
    const stray = cross(B, A, udpPacket({ src: '10.200.1.7', dst: '10.74.0.0', sport: 53, dport: 43999 }));
    expect(stray.at).toBe('dropped');
  });

  it('an IP-mapped non-pod address: b reaches 192.168.60.10 as a maps it, through a-worker, and the reply comes back translated', () => {
    // b addresses a's 10.70.0.5 as 10.74.0.5 (a's external CIDR as b remaps it).
    const req = cross(B, A, udpPacket({ src: '10.200.1.7', dst: '10.74.0.5', sport: 44000, dport: 5432 }));
    expect([req.at, req.src, req.dst]).toEqual(['node', '10.71.1.7', '192.168.60.10']);
    expect(checksumsValid(req)).toBe(true);
    const rep = cross(A, B, udpPacket({ src: '192.168.60.10', dst: '10.71.1.7', sport: 5432, dport: 44000 }));
    expect([rep.at, rep.src, rep.dst]).toEqual(['node', '10.74.0.5', '10.200.1.7']);
    expect(checksumsValid(rep)).toBe(true);
  });

  it('the steered path (rules, conntrack, policy routes, interface names) allocates nothing per packet', () => {
    const mk = (b: Built) => {
      const buf = new Uint8Array(HEAD + b.len + 64);
      buf.set(b.buf.subarray(b.off, b.off + b.len), HEAD);
      return { buf, orig: buf.slice(), offs: Uint32Array.of(HEAD), lens: Uint32Array.of(b.len) };
    };
    const out = mk(udpPacket({ src: '10.200.1.5', dst: '10.71.1.7', sport: 45000, dport: 53 }));
    const back = mk(udpPacket({ src: '10.200.1.7', dst: '10.200.1.5', sport: 53, dport: 45000 }));
    const L = new RouterLanes<Link, GeneveTunnel>(4);
    const tunnels = [A.node];
    const links = [A.link];
    const trip = (): void => {
      out.buf.set(out.orig);
      back.buf.set(back.orig);
      A.router.fromNodes(out.buf, out.offs, out.lens, 1, NOW, L, tunnels);
      A.router.fromPeers(back.buf, back.offs, back.lens, links, 1, NOW, L);
      L.clear();
    };
    // What one trip does: out to the peer with the real destination, the reply to the node remapped.
    const L2 = new RouterLanes<Link, GeneveTunnel>(4);
    out.buf.set(out.orig);
    back.buf.set(back.orig);
    A.router.fromNodes(out.buf, out.offs, out.lens, 1, NOW, L2, tunnels);
    expect([L2.toPeers.count, formatAddress(out.buf.subarray(HEAD + 16, HEAD + 20))]).toEqual([1, '10.200.1.7']);
    A.router.fromPeers(back.buf, back.offs, back.lens, links, 1, NOW, L2);
    expect([L2.toNodes.count, formatAddress(back.buf.subarray(HEAD + 12, HEAD + 16))]).toEqual([1, '10.71.1.7']);
    for (let i = 0; i < 50_000; i++) trip();
    expect(heapBytesPerOp(trip)).toBeLessThan(4);
  });

  it("the node role's routes towards the gateway: the fabric RouteConfiguration's destinations on the node-side interface or via the gateway", () => {
    const { specs, errors } = parseRouteObjects(fabricObjects(SIDE_A).routes, new Map());
    expect(errors).toEqual([]);
    expect(fabricRouteDestinations(specs.values(), new Set([SIDE_A.nodeSideIf]), new Set(['10.80.0.1']))).toEqual([
      '10.71.0.0/16',
      '10.72.0.0/16',
      '10.80.0.1/32',
    ]);
    expect(fabricRouteDestinations(specs.values(), new Set(), new Set())).toEqual([]);
  });
});
