/**
 * The gateway's translation as the NAT tests drive it: one packet at a time through the Router
 * with the NAT configuration's compiled rules (src/rules/nat-router.ts, the YAML mode's data
 * path), outbound = from a node towards the peers, inbound = from a peer's tunnel. Results as
 * the tests name them: NAT_FORWARD (left by the expected lane, in place), NAT_REPLY (an ICMP
 * error written in the packet's place and routed back to its sender), TO_NODE (outbound, but
 * routed to a node: no peer's destination), a NatDrop code when the
 * peer table dropped it, else routerDrop(name) for the router's own drop reason (rules drops are
 * `filtered`). The router's hop (TTL − 1) is undone on forwarded packets so that the assertions
 * see the translation alone (router.test.ts covers the hop). Nodes: every address outside the
 * local external CIDRs (those exist only as translation targets) is a node's.
 */
import { checksumUpdate16, readChecksum, writeChecksum } from '../../src/packet/checksum.js';
import { parsePrefix } from '../../src/packet/addr.js';
import { IPV4_CHECKSUM_OFFSET, IPV4_TTL_OFFSET } from '../../src/packet/ipv4.js';
import { IPV6_HOP_LIMIT_OFFSET } from '../../src/packet/ipv6.js';
import type { NatConfig, NatIpMapping, NatPeerConfig } from '../../src/nat/config.js';
import { NAT_FORWARD, NAT_REPLY } from '../../src/nat/results.js';
import { PrefixMatcher } from '../../src/route/prefix-matcher.js';
import { ROUTER_DROP_NAMES } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import type { RouterPeer } from '../../src/router/peers.js';
import { NatRouter } from '../../src/rules/nat-router.js';

/** The result code for a packet the router dropped with reason `name` (ROUTER_DROP_NAMES). */
export function routerDrop(name: string): number {
  const i = ROUTER_DROP_NAMES.indexOf(name);
  if (i < 0) throw new Error(`no router drop ${name}`);
  return 100 + i;
}

export type GatewayPeer = RouterPeer<string>;

/** outbound(): the packet was routed to a node, not to a peer (untranslated by the peer side). */
export const TO_NODE = 200;

export class GatewayNat {
  readonly nr: NatRouter<string, string>;
  /** Length of the ICMP error when a call returned NAT_REPLY (at the packet's offset). */
  replyLength = 0;
  private readonly L = new RouterLanes<string, string>(2);
  private readonly offs = new Uint32Array(1);
  private readonly lens = new Uint32Array(1);

  constructor(cfg: NatConfig, icmp: { ratePerSecond?: number; burst?: number } = {}) {
    const external = new PrefixMatcher<true>();
    for (const c of [cfg.localExternalCIDR, cfg.localExternalCIDRv6])
      if (c !== undefined) external.insert(parsePrefix(c), true);
    this.nr = new NatRouter<string, string>(
      cfg,
      { lookupDestination: (b, o, fam) => (external.lookup(b, o, fam) === undefined ? 'node' : undefined) },
      {
        ...(icmp.ratePerSecond === undefined ? {} : { icmpRatePerSecond: icmp.ratePerSecond }),
        ...(icmp.burst === undefined ? {} : { icmpBurst: icmp.burst }),
      },
    );
  }

  addPeer(cfg: NatPeerConfig): GatewayPeer {
    return this.nr.addPeer(cfg, cfg.name);
  }

  setIpMappings(m: readonly NatIpMapping[]): void {
    this.nr.setIpMappings(m);
  }

  /** The connection table (the one conntrack). */
  get conntrack() {
    return this.nr.rules.runtime.flows;
  }

  get peerTable() {
    return this.nr.peerTable;
  }

  /** Fragmentation Needed / Packet Too Big sent. */
  get replies(): number {
    return this.nr.peerTable.replies;
  }

  /** The peer table's drops by NatDrop code. */
  get drops(): Float64Array {
    return this.nr.peerTable.drops;
  }

  get mssClamped(): number {
    return this.nr.rules.stats().mssClamped;
  }

  expire(now: number, budget?: number): number {
    return this.nr.expire(now, budget);
  }

  /** The peer a packet for buf[off] would be routed to by its (remapped) destination. */
  peerFor(buf: Uint8Array, off: number): GatewayPeer | undefined {
    const fam = buf[off]! >>> 4 === 6 ? 6 : 4;
    const e = this.nr.peerTable.peerForAddress(buf, off + (fam === 4 ? 16 : 24), fam);
    return e === undefined ? undefined : this.nr.router.peerOf(e.name);
  }

  outbound(buf: Uint8Array, off: number, len: number, peer: GatewayPeer, now: number): number {
    return this.run(buf, off, len, peer, now, true);
  }

  inbound(buf: Uint8Array, off: number, len: number, peer: GatewayPeer, now: number): number {
    return this.run(buf, off, len, peer, now, false);
  }

  private run(buf: Uint8Array, off: number, len: number, peer: GatewayPeer, now: number, out: boolean): number {
    const L = this.L;
    L.clear();
    this.offs[0] = off;
    this.lens[0] = len;
    const r = this.nr.router;
    const table = this.nr.peerTable.drops;
    const before = [...table];
    const rBefore = [...r.drops];
    const replies = this.nr.peerTable.replies;
    if (out) r.fromNodes(buf, this.offs, this.lens, 1, now, L);
    else r.fromPeers(buf, this.offs, this.lens, [peer.link], 1, now, L);
    const lane = out ? L.toPeers : L.toNodes;
    if (lane.count === 1 && lane.offs[0] === off) {
      if (out && lane.tags[0] !== peer.link) throw new Error(`routed to ${lane.tags[0]}, not ${peer.link}`);
      undoHop(buf, off);
      return NAT_FORWARD;
    }
    if (out && L.toNodes.count === 1) {
      if (this.nr.peerTable.replies === replies) {
        undoHop(buf, off);
        return TO_NODE;
      }
      this.replyLength = L.toNodes.lens[0]!;
      return NAT_REPLY;
    }
    for (let i = 0; i < table.length; i++) if (table[i] !== before[i]) return i;
    for (let i = 0; i < r.drops.length; i++) if (r.drops[i] !== rBefore[i]) return 100 + i;
    throw new Error(
      `packet neither forwarded nor dropped (lanes ${L.toPeers.count}/${L.toNodes.count}/${L.toHost.count})`,
    );
  }
}

function undoHop(buf: Uint8Array, off: number): void {
  if (buf[off]! >>> 4 === 6) {
    buf[off + IPV6_HOP_LIMIT_OFFSET]!++;
    return;
  }
  const o = off + IPV4_TTL_OFFSET;
  const oldWord = (buf[o]! << 8) | buf[o + 1]!;
  buf[o]!++;
  const c = readChecksum(buf, off + IPV4_CHECKSUM_OFFSET);
  writeChecksum(buf, off + IPV4_CHECKSUM_OFFSET, checksumUpdate16(c, oldWord, oldWord + 0x100));
}
