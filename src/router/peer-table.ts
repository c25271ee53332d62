/**
 * The peers behind the tunnel as the router sees them: which peer a packet is for (by the
 * REMAPPED destination it arrived with — peers may share real CIDRs, which is why they are
 * remapped) and the tunnel MTU a packet towards it must fit. Address translation is not done
 * here: the rules at the router's hook points do it (src/rules; YAML mode translates its
 * configuration into them, src/rules/from-nat.ts).
 *
 * The configuration is the gateway's NAT configuration (src/nat/config.ts), validated here so
 * that a bad CIDR or an overlap of remapped CIDRs fails with a NatConfigError naming the field
 * before anything else changes.
 *
 * Per packet (no allocation): a packet for a peer whose TCP/UDP/ICMP header is truncated or
 * malformed is dropped (bad_transport, counted); one larger than the peer's tunnel MTU that may
 * not be fragmented (IPv4 with DF, any IPv6) is answered with ICMP Fragmentation Needed /
 * Packet Too Big written in its place (NAT_REPLY, rate-limited), or dropped and counted (NatDrop).
 */
import {
  ipv4SourceAcceptsError,
  ipv6SourceAcceptsError,
  writeFragNeededV4,
  writePacketTooBigV6,
} from '../packet/icmp-error.js';
import { ICMP_HEADER_LEN, isIcmpv4Error, isIcmpv6Error } from '../packet/icmp.js';
import { prefixesOverlap, type IpFamily } from '../packet/addr.js';
import type { IpView } from '../packet/ip-view.js';
import { IP_PROTO_ICMP, IP_PROTO_ICMPV6, IP_PROTO_TCP, IP_PROTO_UDP, ipv4DontFragment } from '../packet/ipv4.js';
import { tcpHeaderValid } from '../packet/tcp.js';
import { UDP_HEADER_LEN } from '../packet/udp.js';
import {
  parseNatConfig,
  parseNatPeer,
  type NatConfig,
  type NatPeerConfig,
  type ParsedNatConfig,
  type ParsedPeer,
} from '../nat/config.js';
import { QuotedPacket } from '../nat/quoted.js';
import { NAT_DROP_MIN, NAT_FORWARD, NAT_REPLY, NAT_RESULT_COUNT, NatDrop, natResultName } from '../nat/results.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import { PrefixMatcher } from '../route/prefix-matcher.js';

/** One peer (remote cluster): its slot, name and tunnel MTU. Made by PeerTable.addPeer. */
export class PeerEntry {
  /**
   * Conntrack zone of its connections (PacketMeta.zone): index + 1 while its real CIDRs overlap
   * another peer's (the same addresses and ports towards two peers are then two connections, as
   * on Liqo's one gateway per peer), else 0. Set by the table as peers come and go.
   */
  zone = 0;
  constructor(
    readonly index: number,
    readonly parsed: ParsedPeer,
  ) {}

  get name(): string {
    return this.parsed.name;
  }

  get mtu(): number {
    return this.parsed.mtu;
  }
}

/** Counter snapshot of the table (allocates). */
export interface PeerTableStats {
  /** Packets let through towards a peer. */
  forwarded: number;
  /** ICMP Fragmentation Needed / Packet Too Big written in a packet's place. */
  replies: number;
  drops: Record<string, number>;
}

export class PeerTable {
  readonly config: ParsedNatConfig;
  /** Drops by result code (index = NatDrop value). */
  readonly drops = new Float64Array(NAT_RESULT_COUNT);
  forwarded = 0;
  replies = 0;
  /** Length of the ICMP error written in place when checkMtu returned NAT_REPLY. */
  replyLength = 0;

  private readonly slots: Array<PeerEntry | undefined> = [];
  private readonly byRemapped = new PrefixMatcher<PeerEntry>();
  private readonly icmpBucket: TokenBucket;
  private readonly q = new QuotedPacket();

  constructor(config: NatConfig) {
    this.config = parseNatConfig(config);
    this.icmpBucket = new TokenBucket(this.config.icmpRatePerSecond, this.config.icmpBurst);
  }

  // ------------------------------------------------------------------ configuration (allocates)

  /** Validates and installs a peer. Throws NatConfigError naming the field. */
  addPeer(cfg: NatPeerConfig): PeerEntry {
    const parsed = parseNatPeer(
      cfg,
      this.config,
      this.peers().map((p) => p.parsed),
    );
    let index = this.slots.indexOf(undefined);
    if (index === -1) index = this.slots.length;
    const peer = new PeerEntry(index, parsed);
    this.slots[index] = peer;
    for (const r of parsed.remaps) this.byRemapped.insert(r.remapped, peer);
    this.setZones();
    return peer;
  }

  removePeer(peer: PeerEntry): void {
    if (this.slots[peer.index] !== peer) throw new Error(`peer ${peer.name} is not installed`);
    this.slots[peer.index] = undefined;
    this.byRemapped.removeValue(peer);
    this.setZones();
  }

  private setZones(): void {
    const all = this.peers();
    for (const p of all)
      p.zone = all.some(
        (o) => o !== p && o.parsed.remaps.some((a) => p.parsed.remaps.some((b) => prefixesOverlap(a.real, b.real))),
      )
        ? p.index + 1
        : 0;
  }

  /** Installed peers. */
  peers(): PeerEntry[] {
    return this.slots.filter((p): p is PeerEntry => p !== undefined);
  }

  stats(): PeerTableStats {
    const drops: Record<string, number> = {};
    for (let i = NAT_DROP_MIN; i < NAT_RESULT_COUNT; i++) drops[natResultName(i)] = this.drops[i]!;
    return { forwarded: this.forwarded, replies: this.replies, drops };
  }

  // ------------------------------------------------------------------ per packet (no allocation)

  /** The peer whose remapped CIDRs contain the destination of the packet `v` describes (longest prefix). */
  peerForParsed(buf: Uint8Array, v: IpView): PeerEntry | undefined {
    return this.byRemapped.lookup(buf, v.dstOff, v.family);
  }

  /** As peerForParsed for the address at buf[off]. */
  peerForAddress(buf: Uint8Array, off: number, family: IpFamily): PeerEntry | undefined {
    return this.byRemapped.lookup(buf, off, family);
  }

  /**
   * The packet `v` describes leaves towards `peer`: NAT_FORWARD when its transport header is
   * sound and it fits the tunnel MTU (or may be fragmented), NAT_REPLY when buf[v.off, v.off + replyLength) now holds the ICMP
   * error for its sender, else a counted NatDrop code. May write up to 48 bytes past the packet
   * (tailroom) when the MTU is below 548 (IPv4) / 1232 (IPv6).
   */
  checkMtu(buf: Uint8Array, v: IpView, peer: PeerEntry, now: number): number {
    if (this.slots[peer.index] !== peer) throw new Error(`peer ${peer.name} was removed or belongs to another table`);
    const off = v.off;
    const total = v.end - off;
    if (v.l4 >= 0 && !transportSound(buf, v)) return this.drop(NatDrop.BadTransport);
    if (total <= peer.parsed.mtu || (v.family === 4 && !ipv4DontFragment(buf, off))) {
      this.forwarded++;
      return NAT_FORWARD;
    }
    // RFC 1812 §4.3.2.7 / RFC 4443 §2.4(e): no error about an ICMP error or a non-first
    // fragment, none to a source that cannot be a unicast sender.
    const c = this.classify(buf, v);
    if (c !== NAT_FORWARD) return this.drop(c);
    const okSource = v.family === 4 ? ipv4SourceAcceptsError(buf, v.srcOff) : ipv6SourceAcceptsError(buf, v.srcOff);
    if (!okSource) return this.drop(NatDrop.TooBig);
    if (!this.icmpBucket.take(now)) return this.drop(NatDrop.TooBigRateLimited);
    const n =
      v.family === 4
        ? writeFragNeededV4(buf, off, total, peer.parsed.mtu, this.config.icmpSource4)
        : writePacketTooBigV6(buf, off, total, peer.parsed.mtu, this.config.icmpSource6);
    if (n === 0) return this.drop(NatDrop.TooBig);
    this.replyLength = n;
    this.replies++;
    return NAT_REPLY;
  }

  private drop(code: number): number {
    this.drops[code]!++;
    return code;
  }

  /** NAT_FORWARD when an error may be sent about the (sound) packet; else why not (an ICMP error, a fragment). */
  private classify(buf: Uint8Array, v: IpView): number {
    const l4 = v.l4;
    if (l4 < 0) return NatDrop.TooBig;
    const proto = v.proto;
    if ((proto === IP_PROTO_ICMP && v.family === 4) || (proto === IP_PROTO_ICMPV6 && v.family === 6)) {
      const type = buf[l4]!;
      if (v.family === 4 ? isIcmpv4Error(type) : isIcmpv6Error(type)) {
        const r = this.q.parse(buf, v);
        return r !== NAT_FORWARD ? r : NatDrop.TooBig;
      }
    }
    return NAT_FORWARD;
  }
}

/** The packet's TCP, UDP or ICMP header is whole and consistent (other protocols: not read). */
function transportSound(buf: Uint8Array, v: IpView): boolean {
  const proto = v.proto;
  if (proto === IP_PROTO_TCP) return tcpHeaderValid(buf, v.l4, v.l4Len);
  if (proto === IP_PROTO_UDP) return v.l4Len >= UDP_HEADER_LEN;
  if ((proto === IP_PROTO_ICMP && v.family === 4) || (proto === IP_PROTO_ICMPV6 && v.family === 6))
    return v.l4Len >= ICMP_HEADER_LEN;
  return true;
}
