/**
 * The gateway's NAT engine: Liqo's gateway address translation done in process, on one packet
 * buffer, without allocation.
 *
 * What is rewritten where (mirroring Liqo's firewall configurations, pkg/gateway/remapping and
 * the fabric's masquerade-bypass rules; each gateway rewrites only the REMOTE side's addresses,
 * so the real pod IPs travel inside the tunnel):
 *
 * outbound (local cluster → tunnel, before encryption), in this order:
 *   1. PMTU: an IPv4 packet with DF (any IPv6 packet) larger than the peer's tunnel MTU is
 *      answered with ICMP Fragmentation Needed / Packet Too Big built in its place (NAT_REPLY).
 *   2. SOURCE, one of:
 *      - IP mapping (Liqo IP resource, remap-ipmapping-gw): source = a mapped real address →
 *        its external-CIDR address (static, stateless);
 *      - masquerade (Liqo's "service-nodeport" SNAT rules, `to: <first external IP>`): the source
 *        is outside the local pod CIDRs (or fullMasquerade) and the destination is one of the
 *        peer's (remapped) pod/external CIDRs → source = first address of the local external
 *        CIDR, port/identifier chosen by conntrack;
 *   3. DESTINATION, remap-podcidr / remap-externalcidr prerouting rule (`dnat prefix to`):
 *      a remapped peer address → the peer's real address, host bits kept.
 *   4. TCP MSS clamp on SYN / SYN-ACK (Liqo's gw-mss-clamping).
 *
 * inbound (tunnel → local cluster, after decryption), in this order:
 *   1. SOURCE, remap-podcidr / remap-externalcidr postrouting rule for traffic from the tunnel
 *      (`snat prefix to`): the peer's real address → its remapped address.
 *   2. DESTINATION, one of:
 *      - IP mapping: an external-CIDR mapped address → its real address;
 *      - the SNAT address: the conntrack reply entry restores the original host and port
 *        (packets to it without an entry are dropped).
 *   3. TCP MSS clamp on SYN / SYN-ACK.
 *
 * ICMP errors (IPv4 types 3, 4, 5, 11, 12; ICMPv6 types < 128) carry the offending packet's
 * header, which travelled the opposite way: its addresses and ports get the mirror-image
 * translation (outer destination rewritten ⇒ embedded source, and vice versa), its IPv4 header
 * checksum and transport checksum (when quoted) are patched, and the outer ICMP checksum
 * absorbs every change made to the quoted bytes.
 *
 * All checksum updates are incremental (RFC 1624) through src/packet/checksum.ts; a zero UDP
 * checksum stays zero. Conntrack keys use the REMAPPED remote address (before the outbound DNAT,
 * after the inbound source remap), so one key identifies a flow on both paths.
 */

import { addressEquals, type IpFamily } from '../packet/addr.js';
import { IP_OK, IpView, parseIp } from '../packet/ip-view.js';
import {
  ICMP_CHECKSUM_OFFSET,
  ICMP_ECHO_ID_OFFSET,
  ICMP_HEADER_LEN,
  ICMPV4_ECHO_REPLY,
  ICMPV4_ECHO_REQUEST,
  ICMPV6_ECHO_REPLY,
  ICMPV6_ECHO_REQUEST,
  isIcmpv4Error,
  isIcmpv6Error,
} from '../packet/icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IP_PROTO_ICMP,
  IP_PROTO_ICMPV6,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  ipv4DontFragment,
} from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN } from '../packet/ipv6.js';
import {
  TCP_CHECKSUM_OFFSET,
  TCP_FLAGS_OFFSET,
  TCP_FLAG_ACK,
  TCP_FLAG_RST,
  TCP_FLAG_SYN,
  tcpHeaderValid,
} from '../packet/tcp.js';
import { UDP_CHECKSUM_OFFSET, UDP_DST_PORT_OFFSET, UDP_HEADER_LEN, UDP_SRC_PORT_OFFSET } from '../packet/udp.js';
import {
  parseNatConfig,
  parseNatPeer,
  unknownSourceAddress,
  type NatConfig,
  type NatIpMapping,
  type NatPeerConfig,
  type ParsedMapping,
  type ParsedNatConfig,
  type ParsedPeer,
} from './config.js';
import {
  CT_ICMP,
  CT_TCP_ESTABLISHED,
  CT_TCP_SYN_SENT,
  CT_UDP,
  Conntrack,
  DIR_ORIGINAL,
  DIR_REPLY,
  type ConntrackStats,
} from './conntrack.js';
import {
  ipv4SourceAcceptsError,
  ipv6SourceAcceptsError,
  writeFragNeededV4,
  writePacketTooBigV6,
} from '../packet/icmp-error.js';
import { PrefixMatcher } from '../route/prefix-matcher.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import { MSS_OVERHEAD_V4, MSS_OVERHEAD_V6, clampMss } from './pmtu.js';
import { QuotedPacket } from './quoted.js';
import { NAT_DROP_MIN, NAT_FORWARD, NAT_REPLY, NAT_RESULT_COUNT, NatDrop, natResultName } from './results.js';
import { PrefixRemap, RemapTable } from './remap.js';
import {
  CSUM_ALWAYS,
  CSUM_NONE,
  CSUM_UDP,
  fixZeroIcmpv4Checksum,
  read16,
  rewriteAddress,
  rewriteWord,
} from './rewrite.js';

/** TCP and UDP headers both start with the source port, then the destination port (RFC 9293, RFC 768). */
const L4_SRC_PORT_OFFSET = UDP_SRC_PORT_OFFSET;
const L4_DST_PORT_OFFSET = UDP_DST_PORT_OFFSET;

export interface NatStats {
  forwarded: number;
  replies: number;
  mssClamped: number;
  drops: Record<string, number>;
  conntrack: ConntrackStats;
}

// ---------------------------------------------------------------------------------------------

/**
 * One peer (remote cluster) as the NAT sees it: its remap tables and tunnel MTU. Handles are
 * created by Nat.addPeer and passed back to outbound()/inbound().
 */
export class NatPeer {
  /** remapped → real for the outbound destination; identity pairs included (peer membership). */
  readonly toReal = new RemapTable();
  /** real → remapped for the inbound source; identity pairs included. */
  readonly toRemapped = new RemapTable();
  readonly mss4: number;
  readonly mss6: number;
  /** Every remap pair is the identity (real = remapped): addresses are never rewritten. */
  readonly identityOnly: boolean;
  constructor(
    readonly index: number,
    readonly parsed: ParsedPeer,
  ) {
    this.mss4 = parsed.mtu - MSS_OVERHEAD_V4;
    this.mss6 = parsed.mtu - MSS_OVERHEAD_V6;
    this.identityOnly = parsed.remaps.every((r) =>
      addressEquals(r.real.addr, 0, r.remapped.addr, 0, r.real.addr.length),
    );
    for (const r of parsed.remaps) {
      this.toReal.add(new PrefixRemap(r.remapped, r.real));
      this.toRemapped.add(new PrefixRemap(r.real, r.remapped));
    }
  }

  get name(): string {
    return this.parsed.name;
  }

  get mtu(): number {
    return this.parsed.mtu;
  }
}

export class Nat {
  readonly config: ParsedNatConfig;
  private readonly raw: NatConfig;
  readonly conntrack: Conntrack;
  /** Drops by result code (index = NatDrop value). */
  readonly drops = new Float64Array(NAT_RESULT_COUNT);
  forwarded = 0;
  replies = 0;
  mssClamped = 0;
  /** Length of the ICMP error written in place when a call returned NAT_REPLY. */
  replyLength = 0;

  private readonly peerSlots: Array<NatPeer | undefined> = [];
  private readonly peersByRemapped = new PrefixMatcher<NatPeer>();
  private readonly localPod = new PrefixMatcher<true>();
  private readonly mapByReal = new PrefixMatcher<ParsedMapping>();
  private readonly mapByExt = new PrefixMatcher<ParsedMapping>();
  private mappingCount = 0;
  private readonly snat4: Uint8Array;
  private readonly snat6: Uint8Array | undefined;
  private readonly icmpBucket: TokenBucket;
  private readonly scratch = new Uint8Array(16);

  // Per-packet parse state (fields, not objects: no allocation), valid during one call: the IP
  // view (the caller's, or `ownView` when the caller passed bytes), then transport checksums
  // and the packet quoted by an ICMP error.
  private readonly ownView = new IpView();
  private v: IpView = this.ownView;
  /** Checksum covering the pseudo header (address changes), kind CSUM_*. */
  private addrCsumOff = -1;
  private addrCsumKind = CSUM_NONE;
  /** Checksum covering ports / ICMP identifier (field changes). */
  private fieldCsumOff = -1;
  private fieldCsumKind = CSUM_NONE;
  private icmpError = false;
  /** The packet an ICMP error quotes (valid when icmpError). */
  private readonly q = new QuotedPacket();

  constructor(config: NatConfig) {
    this.config = parseNatConfig(config);
    this.raw = config;
    const c = this.config;
    this.conntrack = new Conntrack({
      capacity: c.capacity,
      timeouts: c.timeouts,
      portMin: c.portMin,
      portMax: c.portMax,
      ...(c.seed === undefined ? {} : { seed: c.seed }),
    });
    for (const p of c.localPod) this.localPod.insert(p, true);
    this.snat4 = unknownSourceAddress(c.external4);
    this.snat6 = c.external6 === undefined ? undefined : unknownSourceAddress(c.external6);
    this.icmpBucket = new TokenBucket(c.icmpRatePerSecond, c.icmpBurst);
    this.installMappings(c.mappings);
  }

  // ------------------------------------------------------------------ configuration (allocates)

  /** Validate and install a peer; returns its handle for outbound()/inbound(). Throws NatConfigError. */
  addPeer(cfg: NatPeerConfig): NatPeer {
    const others = this.peerSlots.filter((p): p is NatPeer => p !== undefined).map((p) => p.parsed);
    const parsed = parseNatPeer(cfg, this.config, others);
    let index = this.peerSlots.indexOf(undefined);
    if (index === -1) index = this.peerSlots.length;
    const peer = new NatPeer(index, parsed);
    this.peerSlots[index] = peer;
    for (const r of parsed.remaps) this.peersByRemapped.insert(r.remapped, peer);
    return peer;
  }

  /** Remove a peer and its conntrack entries. Returns the number of flows dropped. */
  removePeer(peer: NatPeer): number {
    if (this.peerSlots[peer.index] !== peer) throw new Error(`NAT peer ${peer.name} is not installed`);
    this.peerSlots[peer.index] = undefined;
    this.peersByRemapped.removeValue(peer);
    return this.conntrack.removePeer(peer.index);
  }

  /** Installed peers. */
  peers(): NatPeer[] {
    return this.peerSlots.filter((p): p is NatPeer => p !== undefined);
  }

  /** Replace the IP mappings (Liqo IP resources). Throws NatConfigError; keeps the old set then. */
  setIpMappings(mappings: readonly NatIpMapping[]): void {
    const parsed = parseNatConfig({ ...this.raw, ipMappings: mappings }).mappings;
    this.mapByReal.clear();
    this.mapByExt.clear();
    this.installMappings(parsed);
  }

  private installMappings(list: readonly ParsedMapping[]): void {
    for (const m of list) {
      const bits = m.family === 4 ? 32 : 128;
      this.mapByReal.insert({ family: m.family, addr: m.real, prefixLen: bits }, m);
      this.mapByExt.insert({ family: m.family, addr: m.external, prefixLen: bits }, m);
    }
    this.mappingCount = list.length;
  }

  /** The SNAT ("unknown source") address of a family: the first address of the external CIDR. */
  snatAddress(fam: IpFamily): Uint8Array | undefined {
    return fam === 4 ? this.snat4 : this.snat6;
  }

  // ------------------------------------------------------------------ per packet (no allocation)

  /**
   * The peer whose REMAPPED pod/external CIDRs contain the destination of the IP packet at
   * buf[off] (longest prefix), or undefined. The pipeline calls this before outbound() to pick
   * the tunnel: after the outbound DNAT the real destination may be ambiguous (two peers may
   * share a real pod CIDR — that is why they are remapped).
   */
  peerForParsed(buf: Uint8Array, v: IpView): NatPeer | undefined {
    return this.peersByRemapped.lookup(buf, v.dstOff, v.family);
  }

  /** As peerForParsed, for a packet not parsed yet (only its version and destination are read). */
  peerFor(buf: Uint8Array, off: number, len: number): NatPeer | undefined {
    if (len < IPV4_MIN_HEADER_LEN || off < 0 || off + len > buf.length) return undefined;
    const v = buf[off]! >>> 4;
    if (v === 4) return this.peersByRemapped.lookup(buf, off + IPV4_DST_OFFSET, 4);
    if (v === 6 && len >= IPV6_HEADER_LEN) return this.peersByRemapped.lookup(buf, off + IPV6_DST_OFFSET, 6);
    return undefined;
  }

  /**
   * Translate, in place, the IP packet at buf[off, off+len) leaving towards `peer`'s tunnel
   * (called after Geneve decapsulation, before WireGuard encryption). `now` is the caller's
   * clock in milliseconds (conntrack timeouts, ICMP rate limit).
   *
   * Returns NAT_FORWARD (send buf[off, off+len) to the peer; the length never changes),
   * NAT_REPLY (buf[off, off+replyLength) is an ICMP error for the sender) or a NatDrop code
   * (the buffer content is then unspecified; the drop is counted). Bytes after the IP total
   * length are ignored. Throws only on API misuse (range outside buf, removed peer).
   *
   * Buffer contract: the caller owns buf; nothing is retained after the call. Only
   * buf[off, off+len) is read and written, except that a NAT_REPLY may extend up to 48 bytes
   * past off+len (tailroom; never past buf.length) when the MTU is below 548 (IPv4) / 1232 (IPv6)
   * bytes. No allocation.
   */
  outbound(buf: Uint8Array, off: number, len: number, peer: NatPeer, now: number): number {
    this.checkCall(buf, off, len, peer);
    if (parseIp(buf, off, len, this.ownView) !== IP_OK) return this.drop(NatDrop.BadIpHeader);
    return this.outboundParsed(buf, this.ownView, peer, now);
  }

  /**
   * outbound() for a packet already parsed into `v` (parseIp) by the caller: the pipeline
   * parses once and hands the view along. `v` is read, never kept.
   */
  outboundParsed(buf: Uint8Array, v: IpView, peer: NatPeer, now: number): number {
    if (this.peerSlots[peer.index] !== peer)
      throw new Error(`NAT: peer ${peer.name} was removed or belongs to another Nat`);
    const off = v.off;
    if ((peer.identityOnly || !this.config.remap) && this.translatesNothing()) {
      // Passthrough (rules do the translation, src/rules): only the tunnel MTU is enforced.
      const len = v.end - off;
      if (len > peer.parsed.mtu && (v.family === 6 || ipv4DontFragment(buf, off))) {
        const c = this.classify(buf, v);
        if (c !== NAT_FORWARD) return this.drop(c);
        return this.tooBig(buf, off, len, peer, now);
      }
      this.forwarded++;
      return NAT_FORWARD;
    }
    let r = this.classify(buf, v);
    if (r !== NAT_FORWARD) return this.drop(r);
    const total = this.v.end - off;
    if (total > peer.parsed.mtu && (this.v.family === 6 || ipv4DontFragment(buf, off))) {
      return this.tooBig(buf, off, total, peer, now);
    }
    const fam = this.v.family;
    const route = peer.toReal.lookup(buf, this.v.dstOff, fam);

    // Source: IP mapping, else masquerade of non-pod sources towards the peer's CIDRs.
    const mapping =
      this.mappingCount === 0 || route === undefined ? undefined : this.mapByReal.lookup(buf, this.v.srcOff, fam);
    if (mapping !== undefined) {
      rewriteAddress(
        buf,
        this.v.srcOff,
        this.v.addrLen,
        mapping.external,
        0,
        this.v.ipCsumOff,
        this.addrCsumOff,
        this.addrCsumKind,
      );
    } else if (
      route !== undefined &&
      this.config.masquerade &&
      (this.config.fullMasquerade || this.localPod.lookup(buf, this.v.srcOff, fam) === undefined)
    ) {
      r = this.icmpError ? this.snatOutboundIcmpError(buf, now) : this.snatOutbound(buf, peer, now);
      if (r !== NAT_FORWARD) return this.drop(r);
    }
    if (this.icmpError && this.mappingCount !== 0 && route !== undefined) {
      // Mirror of the source mapping on the quoted packet (it was addressed to the mapped host).
      const m = this.mapByReal.lookup(buf, this.q.dst, fam);
      if (m !== undefined) this.q.address(buf, this.q.dst, m.external, 0);
    }

    // Destination: remapped → real (remap-podcidr / remap-externalcidr DNAT).
    if (route !== undefined && !route.identity) {
      route.translate(buf, this.v.dstOff, this.scratch, 0);
      rewriteAddress(
        buf,
        this.v.dstOff,
        this.v.addrLen,
        this.scratch,
        0,
        this.v.ipCsumOff,
        this.addrCsumOff,
        this.addrCsumKind,
      );
    }
    if (this.icmpError) {
      // Mirror: the quoted packet came from the peer, its source is the remapped peer address.
      const ir = peer.toReal.lookup(buf, this.q.src, fam);
      if (ir !== undefined && !ir.identity) {
        ir.translate(buf, this.q.src, this.scratch, 0);
        this.q.address(buf, this.q.src, this.scratch, 0);
      }
      this.q.finish(buf, this.v.l4);
    }
    this.clamp(buf, peer);
    this.forwarded++;
    return NAT_FORWARD;
  }

  /**
   * Translate, in place, the IP packet at buf[off, off+len) that arrived from `peer`'s tunnel
   * (after WireGuard decryption, before Geneve encapsulation towards a node). Same result codes
   * as outbound(), except that NAT_REPLY is never returned.
   */
  inbound(buf: Uint8Array, off: number, len: number, peer: NatPeer, now: number): number {
    this.checkCall(buf, off, len, peer);
    if (parseIp(buf, off, len, this.ownView) !== IP_OK) return this.drop(NatDrop.BadIpHeader);
    return this.inboundParsed(buf, this.ownView, peer, now);
  }

  /** inbound() for a packet the caller already parsed into `v` (see outboundParsed). */
  inboundParsed(buf: Uint8Array, v: IpView, peer: NatPeer, now: number): number {
    if (this.peerSlots[peer.index] !== peer)
      throw new Error(`NAT: peer ${peer.name} was removed or belongs to another Nat`);
    if ((peer.identityOnly || !this.config.remap) && this.translatesNothing()) {
      this.forwarded++;
      return NAT_FORWARD;
    }
    let r = this.classify(buf, v);
    if (r !== NAT_FORWARD) return this.drop(r);
    const fam = this.v.family;

    // Source: the peer's real address → how the local cluster addresses it.
    const rm = peer.toRemapped.lookup(buf, this.v.srcOff, fam);
    if (rm !== undefined && !rm.identity) {
      rm.translate(buf, this.v.srcOff, this.scratch, 0);
      rewriteAddress(
        buf,
        this.v.srcOff,
        this.v.addrLen,
        this.scratch,
        0,
        this.v.ipCsumOff,
        this.addrCsumOff,
        this.addrCsumKind,
      );
    }
    if (this.icmpError) {
      const ir = peer.toRemapped.lookup(buf, this.q.dst, fam);
      if (ir !== undefined && !ir.identity) {
        ir.translate(buf, this.q.dst, this.scratch, 0);
        this.q.address(buf, this.q.dst, this.scratch, 0);
      }
    }

    // Destination: IP mapping, or the SNAT address (conntrack reply).
    const mapping = this.mappingCount === 0 ? undefined : this.mapByExt.lookup(buf, this.v.dstOff, fam);
    const snat = !this.config.masquerade ? undefined : fam === 4 ? this.snat4 : this.snat6;
    if (mapping !== undefined) {
      rewriteAddress(
        buf,
        this.v.dstOff,
        this.v.addrLen,
        mapping.real,
        0,
        this.v.ipCsumOff,
        this.addrCsumOff,
        this.addrCsumKind,
      );
    } else if (snat !== undefined && addressEquals(buf, this.v.dstOff, snat, 0, this.v.addrLen)) {
      r = this.icmpError ? this.snatInboundIcmpError(buf, now) : this.snatInbound(buf, now);
      if (r !== NAT_FORWARD) return this.drop(r);
    }
    if (this.icmpError) {
      if (this.mappingCount !== 0) {
        const m = this.mapByExt.lookup(buf, this.q.src, fam);
        if (m !== undefined) this.q.address(buf, this.q.src, m.real, 0);
      }
      this.q.finish(buf, this.v.l4);
    }
    this.clamp(buf, peer);
    this.forwarded++;
    return NAT_FORWARD;
  }

  /** No masquerade, no IP mapping, no MSS clamp: with an identity-only peer (or remap off) nothing is rewritten. */
  private translatesNothing(): boolean {
    return !this.config.masquerade && this.mappingCount === 0 && !this.config.clampMss;
  }

  /** Conntrack housekeeping: free up to `budget` expired entries' slots. Call from a timer. */
  expire(now: number, budget = 1024): number {
    return this.conntrack.expire(now, budget);
  }

  /** Counter snapshot (allocates; for metrics). */
  stats(): NatStats {
    const drops: Record<string, number> = {};
    for (let i = NAT_DROP_MIN; i < NAT_RESULT_COUNT; i++) drops[natResultName(i)] = this.drops[i]!;
    return {
      forwarded: this.forwarded,
      replies: this.replies,
      mssClamped: this.mssClamped,
      drops,
      conntrack: this.conntrack.stats(),
    };
  }

  // ------------------------------------------------------------------ internals

  private checkCall(buf: Uint8Array, off: number, len: number, peer: NatPeer): void {
    if (!(off >= 0 && len >= 0 && off + len <= buf.length))
      throw new RangeError(`NAT: packet range [${off}, ${off + len}) is outside the buffer of ${buf.length}`);
    if (this.peerSlots[peer.index] !== peer)
      throw new Error(`NAT: peer ${peer.name} was removed or belongs to another Nat`);
  }

  private drop(code: number): number {
    this.drops[code]!++;
    return code;
  }

  /**
   * Locate the transport checksums (and an ICMP error's quoted packet) of the packet `v`
   * describes. Returns NAT_FORWARD or a drop code.
   */
  private classify(buf: Uint8Array, v: IpView): number {
    this.v = v;
    const fam = v.family;
    const proto = v.proto;
    this.addrCsumOff = -1;
    this.addrCsumKind = CSUM_NONE;
    this.fieldCsumOff = -1;
    this.fieldCsumKind = CSUM_NONE;
    this.icmpError = false;
    const l4 = v.l4;
    if (l4 < 0) return NAT_FORWARD;
    const l4Len = v.l4Len;
    if (proto === IP_PROTO_TCP) {
      if (!tcpHeaderValid(buf, l4, l4Len)) return NatDrop.BadTransport;
      this.addrCsumOff = this.fieldCsumOff = l4 + TCP_CHECKSUM_OFFSET;
      this.addrCsumKind = this.fieldCsumKind = CSUM_ALWAYS;
    } else if (proto === IP_PROTO_UDP) {
      if (l4Len < UDP_HEADER_LEN) return NatDrop.BadTransport;
      this.addrCsumOff = this.fieldCsumOff = l4 + UDP_CHECKSUM_OFFSET;
      this.addrCsumKind = this.fieldCsumKind = CSUM_UDP;
    } else if ((proto === IP_PROTO_ICMP && fam === 4) || (proto === IP_PROTO_ICMPV6 && fam === 6)) {
      if (l4Len < ICMP_HEADER_LEN) return NatDrop.BadTransport;
      this.fieldCsumOff = l4 + ICMP_CHECKSUM_OFFSET;
      this.fieldCsumKind = CSUM_ALWAYS;
      if (fam === 6) {
        // ICMPv6's checksum covers the pseudo header (RFC 4443 §2.3); ICMPv4's does not.
        this.addrCsumOff = this.fieldCsumOff;
        this.addrCsumKind = CSUM_ALWAYS;
      }
      const type = buf[l4]!;
      if (fam === 4 ? isIcmpv4Error(type) : isIcmpv6Error(type)) {
        this.icmpError = true;
        return this.q.parse(buf, v);
      }
    }
    return NAT_FORWARD;
  }

  /** Masquerade an outbound packet (not an ICMP error) through conntrack. */
  private snatOutbound(buf: Uint8Array, peer: NatPeer, now: number): number {
    const snat = this.v.family === 4 ? this.snat4 : this.snat6;
    if (snat === undefined) return NatDrop.SnatNoAddress;
    const l4 = this.v.l4;
    if (l4 < 0) return NatDrop.SnatFragment;
    const proto = this.v.proto;
    let portOff: number;
    let remotePort: number;
    let flags = 0;
    let state: number;
    if (proto === IP_PROTO_TCP || proto === IP_PROTO_UDP) {
      portOff = l4 + L4_SRC_PORT_OFFSET;
      remotePort = read16(buf, l4 + L4_DST_PORT_OFFSET);
      if (proto === IP_PROTO_TCP) {
        flags = buf[l4 + TCP_FLAGS_OFFSET]!;
        // A SYN opens a flow; any other segment without an entry is picked up mid-stream
        // (e.g. after a restart), except a RST, which has nothing left to reset here.
        state = (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) === TCP_FLAG_SYN ? CT_TCP_SYN_SENT : CT_TCP_ESTABLISHED;
      } else {
        state = CT_UDP;
      }
    } else if (
      this.isIcmpProto(proto) &&
      buf[l4] === (this.v.family === 4 ? ICMPV4_ECHO_REQUEST : ICMPV6_ECHO_REQUEST)
    ) {
      portOff = l4 + ICMP_ECHO_ID_OFFSET;
      remotePort = 0;
      state = CT_ICMP;
    } else {
      return NatDrop.SnatUnsupported;
    }
    const ct = this.conntrack;
    const lport = read16(buf, portOff);
    let e = ct.findOriginal(this.v.family, proto, buf, this.v.srcOff, lport, this.v.dstOff, remotePort, now);
    if (e < 0) {
      if ((flags & TCP_FLAG_RST) !== 0) return NatDrop.NoConntrack;
      e = ct.create(this.v.family, proto, buf, this.v.srcOff, lport, this.v.dstOff, remotePort, peer.index, state, now);
      if (e < 0) return NatDrop.SnatPortsExhausted;
    }
    ct.update(e, DIR_ORIGINAL, flags, now);
    rewriteAddress(buf, this.v.srcOff, this.v.addrLen, snat, 0, this.v.ipCsumOff, this.addrCsumOff, this.addrCsumKind);
    const np = ct.natPort[e]!;
    if (np !== lport) rewriteWord(buf, portOff, np, this.fieldCsumOff, this.fieldCsumKind);
    return NAT_FORWARD;
  }

  private isIcmpProto(proto: number): boolean {
    return this.v.family === 4 ? proto === IP_PROTO_ICMP : proto === IP_PROTO_ICMPV6;
  }

  /**
   * An ICMP error sent by a masqueraded host about a packet it received from the peer: the
   * quoted packet is in the flow's reply direction (remote → host).
   */
  private snatOutboundIcmpError(buf: Uint8Array, now: number): number {
    const snat = this.v.family === 4 ? this.snat4 : this.snat6;
    if (snat === undefined) return NatDrop.SnatNoAddress;
    if (this.q.ports) {
      const il4 = this.q.l4;
      const p = this.q.proto;
      let localOff: number;
      let remotePort: number;
      if (p === IP_PROTO_TCP || p === IP_PROTO_UDP) {
        localOff = il4 + L4_DST_PORT_OFFSET;
        remotePort = read16(buf, il4 + L4_SRC_PORT_OFFSET);
      } else {
        localOff = il4 + ICMP_ECHO_ID_OFFSET;
        remotePort = 0;
      }
      const ct = this.conntrack;
      const e = ct.findOriginal(this.v.family, p, buf, this.q.dst, read16(buf, localOff), this.q.src, remotePort, now);
      if (e >= 0) {
        this.q.address(buf, this.q.dst, snat, 0);
        this.q.word(buf, localOff, ct.natPort[e]!);
      }
    }
    // With or without a flow (e.g. a node's Time Exceeded about a pod-to-pod packet), the error's
    // own source is masqueraded like any non-pod source, so the peer can route it back.
    rewriteAddress(buf, this.v.srcOff, this.v.addrLen, snat, 0, this.v.ipCsumOff, this.addrCsumOff, this.addrCsumKind);
    return NAT_FORWARD;
  }

  /** Reverse the masquerade for a packet addressed to the SNAT address. */
  private snatInbound(buf: Uint8Array, now: number): number {
    const l4 = this.v.l4;
    if (l4 < 0) return NatDrop.SnatFragment;
    const proto = this.v.proto;
    let portOff: number;
    let remotePort: number;
    let flags = 0;
    if (proto === IP_PROTO_TCP || proto === IP_PROTO_UDP) {
      portOff = l4 + L4_DST_PORT_OFFSET;
      remotePort = read16(buf, l4 + L4_SRC_PORT_OFFSET);
      if (proto === IP_PROTO_TCP) flags = buf[l4 + TCP_FLAGS_OFFSET]!;
    } else if (this.isIcmpProto(proto) && buf[l4] === (this.v.family === 4 ? ICMPV4_ECHO_REPLY : ICMPV6_ECHO_REPLY)) {
      portOff = l4 + ICMP_ECHO_ID_OFFSET;
      remotePort = 0;
    } else {
      return NatDrop.NoConntrack;
    }
    const ct = this.conntrack;
    const e = ct.findReply(this.v.family, proto, buf, this.v.srcOff, remotePort, read16(buf, portOff), now);
    if (e < 0) return NatDrop.NoConntrack;
    ct.update(e, DIR_REPLY, flags, now);
    rewriteAddress(
      buf,
      this.v.dstOff,
      this.v.addrLen,
      ct.origAddr,
      ct.addrOffset(e),
      this.v.ipCsumOff,
      this.addrCsumOff,
      this.addrCsumKind,
    );
    rewriteWord(buf, portOff, ct.origPort[e]!, this.fieldCsumOff, this.fieldCsumKind);
    if (proto === IP_PROTO_ICMP) fixZeroIcmpv4Checksum(buf, l4, this.v.l4Len);
    return NAT_FORWARD;
  }

  /**
   * An ICMP error from the peer side about a packet a masqueraded host sent: the quoted packet
   * is in the flow's original direction (SNAT address → remote, already remapped above).
   */
  private snatInboundIcmpError(buf: Uint8Array, now: number): number {
    if (!this.q.ports) return NatDrop.NoConntrack;
    const il4 = this.q.l4;
    const p = this.q.proto;
    let natOff: number;
    let remotePort: number;
    if (p === IP_PROTO_TCP || p === IP_PROTO_UDP) {
      natOff = il4 + L4_SRC_PORT_OFFSET;
      remotePort = read16(buf, il4 + L4_DST_PORT_OFFSET);
    } else {
      natOff = il4 + ICMP_ECHO_ID_OFFSET;
      remotePort = 0;
    }
    const ct = this.conntrack;
    const e = ct.findReply(this.v.family, p, buf, this.q.dst, remotePort, read16(buf, natOff), now);
    if (e < 0) return NatDrop.NoConntrack;
    const a = ct.addrOffset(e);
    rewriteAddress(
      buf,
      this.v.dstOff,
      this.v.addrLen,
      ct.origAddr,
      a,
      this.v.ipCsumOff,
      this.addrCsumOff,
      this.addrCsumKind,
    );
    this.q.address(buf, this.q.src, ct.origAddr, a);
    this.q.word(buf, natOff, ct.origPort[e]!);
    return NAT_FORWARD;
  }

  /** Clamp the MSS of a TCP SYN / SYN-ACK to the peer's tunnel MTU. */
  private clamp(buf: Uint8Array, peer: NatPeer): void {
    if (this.v.proto !== IP_PROTO_TCP || this.v.l4 < 0 || !this.config.clampMss) return;
    if ((buf[this.v.l4 + TCP_FLAGS_OFFSET]! & TCP_FLAG_SYN) === 0) return;
    if (clampMss(buf, this.v.l4, this.v.l4Len, this.v.family === 4 ? peer.mss4 : peer.mss6)) this.mssClamped++;
  }

  /** Oversized and not fragmentable: answer with an ICMP error in place, rate-limited. */
  private tooBig(buf: Uint8Array, off: number, total: number, peer: NatPeer, now: number): number {
    // RFC 1812 §4.3.2.7 / RFC 4443 §2.4(e): no error about an ICMP error or a non-first
    // fragment, none to a source that cannot be a unicast sender.
    if (this.icmpError || this.v.l4 < 0) return this.drop(NatDrop.TooBig);
    const okSource =
      this.v.family === 4 ? ipv4SourceAcceptsError(buf, this.v.srcOff) : ipv6SourceAcceptsError(buf, this.v.srcOff);
    if (!okSource) return this.drop(NatDrop.TooBig);
    if (!this.icmpBucket.take(now)) return this.drop(NatDrop.TooBigRateLimited);
    const n =
      this.v.family === 4
        ? writeFragNeededV4(buf, off, total, peer.parsed.mtu, this.config.icmpSource4)
        : writePacketTooBigV6(buf, off, total, peer.parsed.mtu, this.config.icmpSource6);
    if (n === 0) return this.drop(NatDrop.TooBig);
    this.replyLength = n;
    this.replies++;
    return NAT_REPLY;
  }
}
