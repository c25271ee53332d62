/**
 * The router, I/O-free and without root: every drop reason, every path, the hook points a packet
 * passes, and two peers whose REAL pod CIDRs are the same (10.0.0.0/16), told apart by the
 * peer each packet is handed with and by their remapped CIDRs (10.71/16 for b, 10.73/16 for c).
 *
 * Cluster A (this router): pods 10.0.0.0/16, external 10.70.0.0/16, gateway internal address
 * 10.80.0.1; node 1 (10.80.0.2) holds pods 10.0.1.0/24, node 2 (10.80.0.3) 10.0.2.0/24.
 */
import { describe, expect, it } from 'vitest';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { NatDrop } from '../../src/nat/results.js';
import { formatAddress } from '../../src/packet/addr.js';
import { ICMPV4_DEST_UNREACHABLE, ICMPV4_TIME_EXCEEDED, icmpv4ChecksumValid } from '../../src/packet/icmp.js';
import type { IpView } from '../../src/packet/ip-view.js';
import { IPV4_DST_OFFSET, IPV4_SRC_OFFSET, IPV4_TTL_OFFSET, ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { IPV6_HOP_LIMIT_OFFSET } from '../../src/packet/ipv6.js';
import {
  HOOK_FORWARD,
  HOOK_INPUT,
  HOOK_NAMES,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  SOURCE_NAMES,
  VERDICT_ACCEPT,
  VERDICT_DROP,
  type PacketHook,
  type PacketMeta,
} from '../../src/router/hooks.js';
import { ROUTER_DROP_NAMES, RouterDrop } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { NatRouter } from '../../src/rules/nat-router.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { heapBytesPerOp } from '../util/alloc.js';

type Link = { name: string };
const HEAD = 128;
const NOW = 1_700_000_000_000;
/** OUTPUT_* + 1 → name (OUTPUT_NONE is -1). */
const OUTPUT_NAMES = ['none', 'host', 'node', 'peer'];

function setup(opts: { icmpBurst?: number } = {}) {
  const table = new GeneveTunnelTable();
  table.add({
    vni: 1,
    remoteUnderlay: '192.168.0.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l3',
    name: 'node1',
  });
  table.add({
    vni: 2,
    remoteUnderlay: '192.168.0.3',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.3',
    mode: 'l3',
    name: 'node2',
  });
  table.add({
    vni: 3,
    remoteUnderlay: '192.168.0.4',
    localInternalAddress: 'fd00::1',
    remoteInternalAddress: 'fd00::3',
    mode: 'l3',
    name: 'node3',
  });
  table.addPodRoute('10.0.1.0/24', '10.80.0.2');
  table.addPodRoute('10.0.2.0/24', '10.80.0.3');
  const nat = new NatRouter<Link, GeneveTunnel>(
    { localPodCIDRs: ['10.0.0.0/16'], localExternalCIDR: '10.70.0.0/16', mtu: 1340, icmpSourceV4: '10.80.0.1' },
    table,
    { icmpRatePerSecond: 1, icmpBurst: opts.icmpBurst ?? 20 },
  );
  const router = nat.router;
  const remote = { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] };
  const linkB: Link = { name: 'b' };
  const linkC: Link = { name: 'c' };
  const b = nat.addPeer(
    { name: 'b', remote, remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] } },
    linkB,
  );
  const c = nat.addPeer(
    { name: 'c', remote, remapped: { podCIDRs: ['10.73.0.0/16'], externalCIDRs: ['10.74.0.0/16'] } },
    linkC,
  );
  router.setLocalAddresses(['10.80.0.1', 'fd00::1']);
  router.setTunnelAddresses(
    ['169.254.18.1'],
    [
      { address: '169.254.18.2', peer: b },
      { address: '169.254.18.6', peer: c },
    ],
  );
  const byName = (n: string) => [...table.tunnels()].find((t) => t.name === n)!;
  return {
    nat,
    table,
    router,
    linkB,
    linkC,
    node1: byName('node1'),
    node2: byName('node2'),
    node3: byName('node3'),
    L: new RouterLanes<Link, GeneveTunnel>(8),
  };
}

/** One packet in an arena with headroom, as the ports hand them over. */
function one(p: Built, headroom = HEAD): { buf: Uint8Array; offs: Uint32Array; lens: Uint32Array } {
  const buf = new Uint8Array(headroom + p.len + 64);
  buf.set(p.buf.subarray(p.off, p.off + p.len), headroom);
  return { buf, offs: Uint32Array.of(headroom), lens: Uint32Array.of(p.len) };
}

const addr = (buf: Uint8Array, off: number, field: number) => formatAddress(buf.subarray(off + field, off + field + 4));
const drops = (r: Router<Link, GeneveTunnel>) =>
  Object.fromEntries(ROUTER_DROP_NAMES.map((n, i) => [n, r.drops[i]]).filter(([, v]) => v !== 0));

describe('Router: paths', () => {
  it("node → peer b: destination back to the real address, TTL − 1, handed to b's link", () => {
    const { router, L, linkB } = setup();
    const a = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1000, dport: 2000, ttl: 10 }));
    router.fromNodes(a.buf, a.offs, a.lens, 1, NOW, L);
    expect(L.toPeers.count).toBe(1);
    expect(L.toPeers.tags[0]).toBe(linkB);
    const o = L.toPeers.offs[0]!;
    expect(addr(a.buf, o, IPV4_DST_OFFSET)).toBe('10.0.2.23');
    expect(addr(a.buf, o, IPV4_SRC_OFFSET)).toBe('10.0.1.11');
    expect(a.buf[o + IPV4_TTL_OFFSET]).toBe(9);
    expect(ipv4HeaderValid(a.buf, o, L.toPeers.lens[0]!)).toBe(true);
    expect(drops(router)).toEqual({});
  });

  it('two peers with the same real CIDR: each remapped CIDR reaches its own peer', () => {
    const { router, L, linkB, linkC } = setup();
    const pb = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2 }));
    const pc = one(udpPacket({ src: '10.0.1.11', dst: '10.73.2.23', sport: 1, dport: 2 }));
    router.fromNodes(pb.buf, pb.offs, pb.lens, 1, NOW, L);
    router.fromNodes(pc.buf, pc.offs, pc.lens, 1, NOW, L);
    expect(L.toPeers.tags.slice(0, 2)).toEqual([linkB, linkC]);
    expect(addr(pb.buf, L.toPeers.offs[0]!, IPV4_DST_OFFSET)).toBe('10.0.2.23');
    expect(addr(pc.buf, L.toPeers.offs[1]!, IPV4_DST_OFFSET)).toBe('10.0.2.23');
  });

  it("the same real source from b and from c arrives as each peer's remapped address", () => {
    const { router, L, linkB, linkC, node1 } = setup();
    for (const [link, want] of [
      [linkB, '10.71.2.23'],
      [linkC, '10.73.2.23'],
    ] as const) {
      L.clear();
      const p = one(udpPacket({ src: '10.0.2.23', dst: '10.0.1.11', sport: 2000, dport: 1000, ttl: 5 }));
      router.fromPeers(p.buf, p.offs, p.lens, [link], 1, NOW, L);
      expect(L.toNodes.count).toBe(1);
      expect(L.toNodes.tags[0]).toBe(node1);
      expect(addr(p.buf, L.toNodes.offs[0]!, IPV4_SRC_OFFSET)).toBe(want);
      expect(p.buf[L.toNodes.offs[0]! + IPV4_TTL_OFFSET]).toBe(4);
    }
  });

  it("node → node through the router (hairpin), and node → the gateway's own address (no TTL change)", () => {
    const { router, L, node2 } = setup();
    const h = one(icmpEcho({ src: '10.0.1.11', dst: '10.0.2.5', ttl: 9 }));
    router.fromNodes(h.buf, h.offs, h.lens, 1, NOW, L);
    expect(L.toNodes.tags[0]).toBe(node2);
    expect(h.buf[L.toNodes.offs[0]! + IPV4_TTL_OFFSET]).toBe(8);
    const own = one(icmpEcho({ src: '10.0.1.11', dst: '10.80.0.1', ttl: 9 }));
    router.fromNodes(own.buf, own.offs, own.lens, 1, NOW, L);
    expect(L.toHost.count).toBe(1);
    expect(own.buf[L.toHost.offs[0]! + IPV4_TTL_OFFSET]).toBe(9);
  });

  it('host → peer (SNAT of a non-pod source) and the reply back to the host', () => {
    const { router, L, linkB } = setup();
    const out = one(icmpEcho({ src: '10.80.0.1', dst: '10.71.2.23', ident: 77 }));
    router.fromHost(out.buf, out.offs, out.lens, 1, NOW, L);
    expect(L.toPeers.tags[0]).toBe(linkB);
    const o = L.toPeers.offs[0]!;
    expect(addr(out.buf, o, IPV4_SRC_OFFSET)).toBe('10.70.0.0');
    L.clear();
    // b answers to A's SNAT address (as b sees it, A's external CIDR is remapped at b; inside the tunnel it is real).
    const reply = one(
      icmpEcho({ src: '10.0.2.23', dst: '10.70.0.0', type: 0, ident: out.buf[o + 24]! * 256 + out.buf[o + 25]! }),
    );
    router.fromPeers(reply.buf, reply.offs, reply.lens, [linkB], 1, NOW, L);
    expect(L.toHost.count).toBe(1);
    expect(addr(reply.buf, L.toHost.offs[0]!, IPV4_DST_OFFSET)).toBe('10.80.0.1');
    expect(addr(reply.buf, L.toHost.offs[0]!, IPV4_SRC_OFFSET)).toBe('10.71.2.23');
  });

  it("in-tunnel addresses: host → b's tunnel address untranslated; b's reply to the host; c may not use b's address", () => {
    const { router, L, linkB, linkC } = setup();
    const p = one(udpPacket({ src: '169.254.18.1', dst: '169.254.18.2', sport: 12345, dport: 12345, ttl: 64 }));
    router.fromHost(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(L.toPeers.tags[0]).toBe(linkB);
    expect(p.buf[L.toPeers.offs[0]! + IPV4_TTL_OFFSET]).toBe(64);
    L.clear();
    const back = one(udpPacket({ src: '169.254.18.2', dst: '169.254.18.1', sport: 12345, dport: 12345 }));
    router.fromPeers(back.buf, back.offs, back.lens, [linkB], 1, NOW, L);
    expect(L.toHost.count).toBe(1);
    L.clear();
    const spoof = one(udpPacket({ src: '169.254.18.2', dst: '169.254.18.1', sport: 12345, dport: 12345 }));
    router.fromPeers(spoof.buf, spoof.offs, spoof.lens, [linkC], 1, NOW, L);
    expect(L.toHost.count).toBe(0);
    expect(drops(router)).toEqual({ no_route: 1 });
  });

  it("DF packet over the tunnel MTU: Fragmentation Needed (MTU 1340) back to the sender's node, quoting it as sent", () => {
    const { router, L, node1 } = setup();
    const big = one(
      udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2, payload: new Uint8Array(1400) }),
    );
    router.fromNodes(big.buf, big.offs, big.lens, 1, NOW, L);
    expect(L.toPeers.count).toBe(0);
    expect(L.toNodes.count).toBe(1);
    expect(L.toNodes.tags[0]).toBe(node1);
    const o = L.toNodes.offs[0]!;
    // Related to the packet's (dnat-ed) connection: from the address it was sent to, as the
    // kernel presents the router's own errors (README "Rules: deviations", "not a deviation").
    expect(addr(big.buf, o, IPV4_SRC_OFFSET)).toBe('10.71.2.23');
    expect(addr(big.buf, o, IPV4_DST_OFFSET)).toBe('10.0.1.11');
    expect(big.buf[o + 20]).toBe(ICMPV4_DEST_UNREACHABLE);
    expect(big.buf[o + 26]! * 256 + big.buf[o + 27]!).toBe(1340);
    expect(addr(big.buf, o + 28, IPV4_DST_OFFSET)).toBe('10.71.2.23'); // quoted as sent
    expect(big.buf[o + 28 + IPV4_TTL_OFFSET]).toBe(64); // checked before the hop, as ip_forward
    expect(icmpv4ChecksumValid(big.buf, o + 20, L.toNodes.lens[0]! - 20)).toBe(true);
  });
});

describe('Router: every drop reason, counted', () => {
  it('bad_packet: not IP, truncated, total length beyond the bytes', () => {
    const { router, L } = setup();
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2 }));
    const bad = new Uint8Array(p.buf);
    bad[HEAD] = 0x55; // version 5
    router.fromNodes(bad, p.offs, p.lens, 1, NOW, L);
    router.fromNodes(p.buf, p.offs, Uint32Array.of(10), 1, NOW, L);
    router.fromPeers(p.buf, p.offs, Uint32Array.of(p.lens[0]! - 1), [{ name: 'x' }], 1, NOW, L);
    expect(drops(router)).toEqual({ bad_packet: 3 });
    expect(L.toPeers.count + L.toNodes.count + L.toHost.count).toBe(0);
  });

  it('no_route: from a node, and from a peer', () => {
    const { router, L, linkB } = setup();
    const p = one(udpPacket({ src: '10.0.1.11', dst: '192.0.2.1', sport: 1, dport: 2 }));
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    const q = one(udpPacket({ src: '10.0.2.23', dst: '192.0.2.1', sport: 1, dport: 2 }));
    router.fromPeers(q.buf, q.offs, q.lens, [linkB], 1, NOW, L);
    expect(drops(router)).toEqual({ no_route: 2 });
  });

  it("ttl_expired: Time Exceeded from the gateway's address quoting the original, back to the sender (IPv4)", () => {
    const { router, L, node1 } = setup();
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 33434, dport: 33434, ttl: 1 }));
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ ttl_expired: 1 });
    expect(L.toNodes.tags[0]).toBe(node1);
    const o = L.toNodes.offs[0]!;
    expect(o).toBe(HEAD - 28);
    // Related to the probe's (dnat-ed) connection, it comes from the address the probe was sent
    // to, as the kernel presents it (README "Rules: deviations", the kernel oracle's traceroute cases).
    expect(addr(p.buf, o, IPV4_SRC_OFFSET)).toBe('10.71.2.23');
    expect(p.buf[o + 20]).toBe(ICMPV4_TIME_EXCEEDED);
    expect(icmpv4ChecksumValid(p.buf, o + 20, L.toNodes.lens[0]! - 20)).toBe(true);
    expect(addr(p.buf, o + 28, IPV4_DST_OFFSET)).toBe('10.71.2.23'); // quoted as it arrived
  });

  it("IPv6: hop limit − 1 on a forward; at 1, ICMPv6 Time Exceeded from the gateway's IPv6 address back to the sender", () => {
    const { router, L, node3 } = setup();
    const fwd = one(udpPacket({ src: 'fd00::1:5', dst: 'fd00::3', sport: 1, dport: 2, ttl: 7 }));
    router.fromHost(fwd.buf, fwd.offs, fwd.lens, 1, NOW, L);
    expect(L.toNodes.tags[0]).toBe(node3);
    expect(fwd.buf[HEAD + IPV6_HOP_LIMIT_OFFSET]).toBe(6);
    L.clear();
    const p = one(udpPacket({ src: 'fd00::3', dst: 'fd00::3', sport: 1, dport: 2, ttl: 1 }));
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ ttl_expired: 1 });
    expect(L.toNodes.tags[0]).toBe(node3);
    const o = L.toNodes.offs[0]!;
    expect(o).toBe(HEAD - 48);
    expect(formatAddress(p.buf.subarray(o + 8, o + 24))).toBe('fd00::1');
    expect(p.buf[o + 40]).toBe(3); // ICMPv6 Time Exceeded
  });

  it('no_headroom: an expired packet without room in front for the error', () => {
    const { router, L } = setup();
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2, ttl: 1 }), 40);
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ ttl_expired: 1, no_headroom: 1 });
  });

  it('icmp_rate_limited: past the burst, Time Exceeded is suppressed', () => {
    const { router, L } = setup({ icmpBurst: 2 });
    for (let i = 0; i < 4; i++) {
      L.clear();
      const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2, ttl: 1 }));
      router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    }
    expect(drops(router)).toEqual({ ttl_expired: 4, icmp_rate_limited: 2 });
  });

  it('unknown_peer: a packet handed with a link the router does not know (removed peer)', () => {
    const { router, L, linkB } = setup();
    router.removePeer(router.peerOf(linkB)!);
    const p = one(udpPacket({ src: '10.0.2.23', dst: '10.0.1.11', sport: 1, dport: 2 }));
    router.fromPeers(p.buf, p.offs, p.lens, [linkB], 1, NOW, L);
    expect(drops(router)).toEqual({ unknown_peer: 1 });
  });

  it("peer_transit: from b to c's remapped CIDR", () => {
    const { router, L, linkB } = setup();
    const p = one(udpPacket({ src: '10.0.2.23', dst: '10.73.0.9', sport: 1, dport: 2 }));
    router.fromPeers(p.buf, p.offs, p.lens, [linkB], 1, NOW, L);
    expect(drops(router)).toEqual({ peer_transit: 1 });
  });

  it("loop: from the host to the gateway's own address", () => {
    const { router, L } = setup();
    const p = one(icmpEcho({ src: '10.80.0.1', dst: '10.80.0.1' }));
    router.fromHost(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ loop: 1 });
  });

  it("the host kernel's IPv6 link-local control (RS, MLD, NS) is counted apart, not as no_route", () => {
    const { router, L } = setup();
    const rs = one(icmpEcho({ src: 'fe80::1', dst: 'ff02::2', type: 133 }));
    const mld = one(icmpEcho({ src: 'fe80::1', dst: 'ff02::16', type: 143 }));
    const dad = one(icmpEcho({ src: '::', dst: 'ff02::1:ff00:1', type: 135 }));
    for (const p of [rs, mld, dad]) router.fromHost(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(router.ipv6LinkLocal).toBe(3);
    expect(drops(router)).toEqual({});
    // Unroutable IPv6 of global scope still is a no_route drop.
    const global = one(icmpEcho({ src: 'fd00::1', dst: 'fd99::1' }));
    router.fromHost(global.buf, global.offs, global.lens, 1, NOW, L);
    expect(router.ipv6LinkLocal).toBe(3);
    expect(drops(router)).toEqual({ no_route: 1 });
  });

  it("tunnel_source: from the host to a peer's tunnel address with another source", () => {
    const { router, L } = setup();
    const p = one(udpPacket({ src: '10.80.0.1', dst: '169.254.18.2', sport: 1, dport: 12345 }));
    router.fromHost(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ tunnel_source: 1 });
  });

  it('filtered: a stage at a hook point drops, the router counts it', () => {
    const { router, L } = setup();
    const dropUdp2000: PacketHook = {
      name: 'drop-2000',
      process: (buf, v) =>
        v.proto === 17 && buf[v.l4 + 2]! * 256 + buf[v.l4 + 3]! === 2000 ? VERDICT_DROP : VERDICT_ACCEPT,
    };
    router.attach(HOOK_FORWARD, dropUdp2000);
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2000 }));
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    const q = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2001 }));
    router.fromNodes(q.buf, q.offs, q.lens, 1, NOW, L);
    expect(drops(router)).toEqual({ filtered: 1 });
    expect(L.toPeers.count).toBe(1);
    expect(router.detach(HOOK_FORWARD, dropUdp2000)).toBe(true);
    // The same packet again (the first was translated in place before FORWARD dropped it).
    const p2 = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2000 }));
    router.fromNodes(p2.buf, p2.offs, p2.lens, 1, NOW, L);
    expect(L.toPeers.count).toBe(2);
  });

  it('PacketMeta.skip: a hook is skipped only when the owner that asked is alone there, and only for that packet', () => {
    const { router, L, nat } = setup();
    nat.rules.detachFrom(router); // the router's own mechanics: no other stage at the hooks
    const owner = {};
    const calls: string[] = [];
    const pre: PacketHook = {
      name: 'pre',
      owner,
      process: (_b, _v, meta) => {
        calls.push('pre');
        meta.skip = 1 << HOOK_FORWARD;
        meta.skipOwner = owner;
        return VERDICT_ACCEPT;
      },
    };
    const fwd: PacketHook = {
      name: 'fwd',
      owner,
      process: () => {
        calls.push('fwd');
        return VERDICT_ACCEPT;
      },
    };
    const other: PacketHook = {
      name: 'other',
      process: () => {
        calls.push('other');
        return VERDICT_ACCEPT;
      },
    };
    router.attach(HOOK_PREROUTING, pre);
    router.attach(HOOK_FORWARD, fwd);
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2000 }));
    router.fromNodes(p.buf.slice(), p.offs, p.lens, 1, NOW, L);
    expect(calls).toEqual(['pre']);
    // Another stage at forward: nobody is skipped there.
    router.attach(HOOK_FORWARD, other);
    calls.length = 0;
    router.fromNodes(p.buf.slice(), p.offs, p.lens, 1, NOW, L);
    expect(calls).toEqual(['pre', 'fwd', 'other']);
    // The mark does not outlive its packet.
    router.detach(HOOK_FORWARD, other);
    router.detach(HOOK_PREROUTING, pre);
    calls.length = 0;
    router.fromNodes(p.buf.slice(), p.offs, p.lens, 1, NOW, L);
    expect(calls).toEqual(['fwd']);
    expect(L.toPeers.count).toBe(3);
  });

  it('the peer table drops a TCP segment with a truncated header towards a peer (counted as its own)', () => {
    const { router, L, nat } = setup();
    const t = tcpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2 });
    const p = one(t);
    p.buf[HEAD + 20 + 12] = 0xf0; // data offset 60 bytes: beyond the segment
    router.fromNodes(p.buf, p.offs, p.lens, 1, NOW, L);
    expect(drops(router)).toEqual({});
    expect(nat.peerTable.drops[NatDrop.BadTransport]).toBe(1);
  });

  it('every RouterDrop has a name', () => {
    expect(ROUTER_DROP_NAMES.length).toBe(Object.keys(RouterDrop).length);
    expect(new Set(ROUTER_DROP_NAMES).size).toBe(ROUTER_DROP_NAMES.length);
  });
});

describe('Router: hook points', () => {
  function tracer() {
    const seen: string[] = [];
    const hooks = [HOOK_PREROUTING, HOOK_INPUT, HOOK_FORWARD, HOOK_OUTPUT, HOOK_POSTROUTING].map(
      (h): [number, PacketHook] => [
        h,
        {
          name: HOOK_NAMES[h]!,
          process: (_b: Uint8Array, _v: IpView, m: PacketMeta) => {
            seen.push(
              `${HOOK_NAMES[h]}:${SOURCE_NAMES[m.source]}>${OUTPUT_NAMES[m.output + 1]}${m.peer ? `@${m.peer}` : ''}`,
            );
            return VERDICT_ACCEPT;
          },
        },
      ],
    );
    return { seen, hooks };
  }

  it('passes the points netfilter would, with source, output and peer', () => {
    const { router, L, linkC } = setup();
    const { seen, hooks } = tracer();
    for (const [h, s] of hooks) router.attach(h, s);
    const toPeer = one(udpPacket({ src: '10.0.1.11', dst: '10.73.2.23', sport: 1, dport: 2 }));
    router.fromNodes(toPeer.buf, toPeer.offs, toPeer.lens, 1, NOW, L);
    expect(seen.splice(0)).toEqual(['prerouting:node>none', 'forward:node>peer@c', 'postrouting:node>peer@c']);
    const fromPeer = one(udpPacket({ src: '10.0.2.23', dst: '10.80.0.1', sport: 1, dport: 2 }));
    router.fromPeers(fromPeer.buf, fromPeer.offs, fromPeer.lens, [linkC], 1, NOW, L);
    expect(seen.splice(0)).toEqual(['prerouting:peer>none@c', 'input:peer>host@c']);
    const fromHost = one(udpPacket({ src: '10.80.0.1', dst: '10.0.1.11', sport: 1, dport: 2 }));
    router.fromHost(fromHost.buf, fromHost.offs, fromHost.lens, 1, NOW, L);
    expect(seen.splice(0)).toEqual(['output:host>none', 'postrouting:host>node']);
    // The hop comes before FORWARD, as in the kernel's ip_forward: an expiring packet never
    // reaches the forward stages; its Time Exceeded is the router's own packet.
    const expired = one(udpPacket({ src: '10.0.1.11', dst: '10.0.2.9', sport: 1, dport: 2, ttl: 1 }));
    router.fromNodes(expired.buf, expired.offs, expired.lens, 1, NOW, L);
    expect(seen.splice(0)).toEqual(['prerouting:node>none', 'output:self>none', 'postrouting:self>node']);
  });

  it('FORWARD stages see the TTL already decremented, PREROUTING the TTL as received (kernel order)', () => {
    const { router, L, linkC } = setup();
    const ttls: string[] = [];
    for (const h of [HOOK_PREROUTING, HOOK_FORWARD, HOOK_POSTROUTING]) {
      router.attach(h, {
        name: HOOK_NAMES[h]!,
        process: (b: Uint8Array, v: IpView) => {
          ttls.push(`${HOOK_NAMES[h]}:${b[v.off + 8]}`);
          return VERDICT_ACCEPT;
        },
      });
    }
    const toPeer = one(udpPacket({ src: '10.0.1.11', dst: '10.73.2.23', sport: 1, dport: 2, ttl: 9 }));
    router.fromNodes(toPeer.buf, toPeer.offs, toPeer.lens, 1, NOW, L);
    const toNode = one(udpPacket({ src: '10.0.2.23', dst: '10.0.1.11', sport: 1, dport: 2, ttl: 2 }));
    router.fromPeers(toNode.buf, toNode.offs, toNode.lens, [linkC], 1, NOW, L);
    expect(ttls).toEqual(['prerouting:9', 'forward:8', 'postrouting:8', 'prerouting:2', 'forward:1', 'postrouting:1']);
  });

  it('attach refuses a hook point that does not exist', () => {
    const { router } = setup();
    expect(() => router.attach(7, { name: 'x', process: () => VERDICT_ACCEPT })).toThrow(RangeError);
  });
});

describe('Router: misuse and allocation', () => {
  it('more packets than the lanes hold is API misuse', () => {
    const { router } = setup();
    const small = new RouterLanes<Link, GeneveTunnel>(1);
    const p = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1, dport: 2 }));
    expect(() =>
      router.fromNodes(p.buf, Uint32Array.of(HEAD, HEAD), Uint32Array.of(p.lens[0]!, p.lens[0]!), 2, NOW, small),
    ).toThrow(RangeError);
  });

  it('routes node → peer and peer → node without allocating per packet', () => {
    const { router, L, linkB } = setup();
    const out = one(udpPacket({ src: '10.0.1.11', dst: '10.71.2.23', sport: 1000, dport: 2000 }));
    const back = one(udpPacket({ src: '10.0.2.23', dst: '10.0.1.11', sport: 2000, dport: 1000 }));
    const origOut = out.buf.slice();
    const origBack = back.buf.slice();
    const links = [linkB];
    const trip = () => {
      out.buf.set(origOut);
      back.buf.set(origBack);
      router.fromNodes(out.buf, out.offs, out.lens, 1, NOW, L);
      router.fromPeers(back.buf, back.offs, back.lens, links, 1, NOW, L);
      L.clear();
    };
    for (let i = 0; i < 50_000; i++) trip();
    // Smallest of several windows (a per-packet allocation shows in each): test/util/alloc.ts.
    const perOp = heapBytesPerOp(trip);
    expect(perOp).toBeLessThan(4);
    expect(drops(router)).toEqual({});
  });
});
