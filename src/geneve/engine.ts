/**
 * The Geneve engine: encapsulation and decapsulation per packet, L2 (ARP) handling, counters.
 * No sockets, timers or clocks: `now` (milliseconds) is passed in and used only to rate-limit
 * ARP requests.
 *
 * Buffer contract (both directions): the caller owns `buf`; the engine writes only inside it and
 * keeps no reference after returning. Results go into a caller-owned, reusable GeneveResult
 * (`out`), so a daemon calls the engine per packet with zero allocation:
 *
 *   // send: an inner IP packet read from TUN into buf at HEADROOM (GENEVE_MAX_HEADROOM fits
 *   // every tunnel; geneveEncapHeaderLen(mode, optionsLen) is the minimum for one)
 *   const t = table.lookupSend(buf, HEADROOM, n);              // undefined: no route (count it)
 *   if (t !== undefined && engine.encapsulate(buf, HEADROOM, n, t, now, res) !== GeneveVerdict.Drop)
 *     udp.send(buf, res.off, res.len, t.remoteUnderlayText, t.remotePort);   // Send or SendControl
 *
 *   // receive: a UDP payload from the Geneve socket at buf[off, off+len); fromAddress is the
 *   // datagram's source as text (node:dgram's rinfo.address) or as 4/16 bytes
 *   switch (engine.decapsulate(buf, off, len, fromAddress, now, res)) {
 *     case GeneveVerdict.Deliver: tun.write(buf, res.off, res.len); break;            // inner IP packet
 *     case GeneveVerdict.SendControl:                                                 // ARP reply
 *       udp.send(buf, res.off, res.len, res.tunnel!.remoteUnderlayText, res.tunnel!.remotePort); break;
 *     default: break;                                                                 // Drop (counted) or Consumed
 *   }
 *
 * res.srcPort is the RFC 8926 §3.3 entropy port for paths that choose their source port per
 * packet (raw sockets, encapsulateIp, several bound sockets); a daemon with one UDP socket
 * bound to 6091 simply sends from that port, which every receiver accepts.
 *
 * L2 mode (protocol type 0x6558, as Liqo's kernel geneve devices): the engine adds/strips the
 * inner Ethernet header; ARP and the peer's MAC are neighbour.ts's.
 */

import { formatAddress } from '../packet/addr.js';
import {
  ETH_DST_OFFSET,
  ETH_HEADER_LEN,
  ETH_SRC_OFFSET,
  ETH_TYPE_OFFSET,
  ETHERTYPE_ARP,
  ETHERTYPE_IPV4,
  ETHERTYPE_IPV6,
  MAC_LEN,
  ethType,
  formatMac,
} from '../packet/ethernet.js';
import {
  IPV4_MAX_TOTAL_LENGTH,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_UDP,
  ipv4HeaderLen,
  ipv4HeaderValid,
  ipv4IsFragment,
  ipv4TotalLength,
} from '../packet/ipv4.js';
import {
  IPV6_HEADER_LEN,
  IPV6_NEXT_HEADER_OFFSET,
  IPV6_SRC_OFFSET,
  ipv6HeaderValid,
  ipv6PayloadLength,
} from '../packet/ipv6.js';
import {
  UDP_HEADER_LEN,
  udpChecksumValidV4,
  udpChecksumValidV6,
  udpDstPort,
  udpLength,
  writeIpv4UdpHeaders,
  writeIpv6UdpHeaders,
} from '../packet/udp.js';
import { flowSourcePort, sameFlowKey } from './flowhash.js';
import {
  GENEVE_HEADER_LEN,
  GENEVE_LIQO_UDP_PORT,
  GENEVE_PROTO_IPV4,
  GENEVE_PROTO_IPV6,
  GENEVE_PROTO_TEB,
  geneveOptionKey,
  geneveOptionsLen,
  geneveProtocolType,
  geneveVni,
  validateGeneve,
  writeTunnelHeader,
} from './header.js';
import {
  GeneveCounters,
  GeneveDrop,
  STAT_RX_BYTES,
  STAT_RX_PACKETS,
  STAT_TX_BYTES,
  STAT_TX_PACKETS,
} from './reasons.js';
import { ArpNeighbours, macEquals, macIsZero } from './neighbour.js';
import { GeneveResult, GeneveVerdict, setDrop } from './result.js';
import { GeneveConfigError, type GeneveTunnel, type GeneveTunnelTable } from './table.js';

export interface GeneveEngineOptions {
  /**
   * Options this endpoint understands, as (class, type) pairs (type including its critical
   * bit). Received packets with any OTHER critical option are dropped (RFC 8926 §3.5.1).
   * Non-critical options are always accepted; the caller can read them via
   * GeneveResult.optionsOff/optionsLen and the views in header.ts. Default: none.
   */
  understoodOptions?: Iterable<{ optionClass: number; type: number }>;
  /** Seed of the source-port flow hash (e.g. random per process). Default 0. */
  hashSeed?: number;
  /** L2: minimum interval between ARP requests for one tunnel. Default 1000 ms. */
  arpRetryMs?: number;
  /** encapsulateIp over IPv4: compute the outer UDP checksum (true) or send 0 (RFC 8926 §3.3 allows it). Default true. */
  udpChecksumV4?: boolean;
  /** decapsulateIp over IPv6: accept a zero UDP checksum (RFC 6935/6936). Default false. */
  acceptZeroChecksumV6?: boolean;
  /** decapsulateIp: the UDP destination port to accept. Default 6091 (Liqo). */
  port?: number;
  /** encapsulateIp: outer TTL / hop limit. Default 64. */
  ttl?: number;
}

export class GeneveEngine {
  readonly counters = new GeneveCounters();
  private readonly understood: Set<number>;
  private readonly hashSeed: number;
  private readonly arpRetryMs: number;
  private readonly udpChecksumV4: boolean;
  private readonly acceptZeroChecksumV6: boolean;
  private readonly port: number;
  private readonly ttl: number;
  private readonly arp: ArpNeighbours;

  constructor(
    readonly table: GeneveTunnelTable,
    opts: GeneveEngineOptions = {},
  ) {
    this.understood = new Set();
    for (const o of opts.understoodOptions ?? []) this.understood.add(geneveOptionKey(o.optionClass, o.type));
    this.hashSeed = (opts.hashSeed ?? 0) | 0;
    this.arpRetryMs = opts.arpRetryMs ?? 1000;
    this.udpChecksumV4 = opts.udpChecksumV4 ?? true;
    this.acceptZeroChecksumV6 = opts.acceptZeroChecksumV6 ?? false;
    this.port = opts.port ?? GENEVE_LIQO_UDP_PORT;
    this.ttl = opts.ttl ?? 64;
    this.arp = new ArpNeighbours(this.counters, this.hashSeed, this.arpRetryMs);
    if (!(this.arpRetryMs >= 0)) throw new RangeError(`arpRetryMs must be ≥ 0, got ${this.arpRetryMs}`);
    if (!Number.isInteger(this.port) || this.port < 1 || this.port > 65535)
      throw new RangeError(`port must be 1..65535, got ${this.port}`);
    if (!Number.isInteger(this.ttl) || this.ttl < 1 || this.ttl > 255)
      throw new RangeError(`ttl must be 1..255, got ${this.ttl}`);
  }

  // -------------------------------------------------------------------------------------------
  // Send

  /**
   * Encapsulate the inner IP packet at buf[innerOff, innerOff+innerLen) for `tunnel`, writing
   * the headers into the headroom in front of it: Geneve header + the tunnel's options
   * [+ Ethernet header in L2 mode]. The caller guarantees
   * innerOff ≥ geneveEncapHeaderLen(tunnel.mode, tunnel.options.length) (throws RangeError
   * otherwise: API misuse). Returns (and stores in out.verdict) Send, SendControl (L2, peer
   * MAC unknown: an ARP request replaced the packet) or Drop.
   */
  encapsulate(
    buf: Uint8Array,
    innerOff: number,
    innerLen: number,
    tunnel: GeneveTunnel,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    const optsLen = tunnel.options.length;
    const l2 = tunnel.l2;
    const hdrLen = GENEVE_HEADER_LEN + optsLen + (l2 ? ETH_HEADER_LEN : 0);
    if (!(innerOff >= hdrLen && innerLen >= 0 && innerOff + innerLen <= buf.length)) {
      throw new RangeError(
        `encapsulate: inner packet [${innerOff}, +${innerLen}) needs ${hdrLen} bytes of headroom inside a ${buf.length}-byte buffer`,
      );
    }
    out.tunnel = tunnel;
    out.ipOff = -1;
    out.ipLen = 0;
    const v = innerLen > 0 ? buf[innerOff]! >>> 4 : 0;
    let proto: number;
    if (v === 4 && innerLen >= IPV4_MIN_HEADER_LEN) proto = GENEVE_PROTO_IPV4;
    else if (v === 6 && innerLen >= IPV6_HEADER_LEN) proto = GENEVE_PROTO_IPV6;
    else return this.drop(out, GeneveDrop.BadInnerPacket, tunnel);
    if (innerLen + hdrLen + IPV6_HEADER_LEN + UDP_HEADER_LEN > IPV4_MAX_TOTAL_LENGTH)
      return this.drop(out, GeneveDrop.TooBig, tunnel);

    let p = innerOff;
    if (l2) {
      if (!tunnel.remoteMacKnown) return this.arp.instead(buf, innerOff, tunnel, now, out);
      p -= ETH_HEADER_LEN;
      // Inline Ethernet II header (dst = peer, src = us): the hot path avoids the checked writer.
      const dst = tunnel.remoteMac;
      const src = tunnel.localMac;
      for (let i = 0; i < MAC_LEN; i++) {
        buf[p + ETH_DST_OFFSET + i] = dst[i]!;
        buf[p + ETH_SRC_OFFSET + i] = src[i]!;
      }
      buf[p + ETH_TYPE_OFFSET] = proto >>> 8;
      buf[p + ETH_TYPE_OFFSET + 1] = proto & 0xff;
      proto = GENEVE_PROTO_TEB;
    }
    const geneveOff = p - GENEVE_HEADER_LEN - optsLen;
    writeTunnelHeader(buf, geneveOff, tunnel, proto);
    out.verdict = GeneveVerdict.Send;
    out.reason = GeneveDrop.None;
    out.off = geneveOff;
    out.len = innerOff + innerLen - geneveOff;
    out.srcPort = flowSourcePort(buf, innerOff, innerLen, this.hashSeed);
    const ts = tunnel.stats;
    ts[STAT_TX_PACKETS]++;
    ts[STAT_TX_BYTES] += innerLen;
    const c = this.counters.values;
    c[STAT_TX_PACKETS]++;
    c[STAT_TX_BYTES] += innerLen;
    return GeneveVerdict.Send;
  }

  /**
   * Encapsulate the next segment of the flow `out` holds, without looking anything up again:
   * when `out` describes a Send from encapsulate (or from this method) for a packet of this
   * same `buf` whose header bytes are still in place, through the same `tunnel`, in the same
   * synchronous batch (no table, tunnel or engine change in between), and the packet at
   * buf[innerOff, +innerLen) has the same flow key (flowhash.ts sameFlowKey), its datagram
   * equals what encapsulate would build: the previous header is copied in front of it and
   * srcPort is kept. Returns true and updates `out` (off, len; counters as encapsulate).
   * Returns false and changes nothing otherwise: the caller then calls encapsulate. Reset
   * `out.verdict` to Drop at the start of a batch.
   */
  encapsulateNext(
    buf: Uint8Array,
    innerOff: number,
    innerLen: number,
    tunnel: GeneveTunnel,
    out: GeneveResult,
  ): boolean {
    if (out.verdict !== GeneveVerdict.Send || out.tunnel !== tunnel) return false;
    const hdrLen = GENEVE_HEADER_LEN + tunnel.options.length + (tunnel.l2 ? ETH_HEADER_LEN : 0);
    const prev = out.off;
    const geneveOff = innerOff - hdrLen;
    // Overlapping headers (or a region outside buf): leave it to encapsulate's checks.
    if (
      !(geneveOff >= prev + hdrLen || geneveOff + hdrLen <= prev) ||
      geneveOff < 0 ||
      !(innerLen >= 0 && innerOff + innerLen <= buf.length)
    )
      return false;
    if (innerLen + hdrLen + IPV6_HEADER_LEN + UDP_HEADER_LEN > IPV4_MAX_TOTAL_LENGTH) return false;
    if (!sameFlowKey(buf, prev + hdrLen, out.len - hdrLen, innerOff, innerLen)) return false;
    for (let i = 0; i < hdrLen; i++) buf[geneveOff + i] = buf[prev + i]!;
    out.off = geneveOff;
    out.len = innerLen + hdrLen;
    const ts = tunnel.stats;
    ts[STAT_TX_PACKETS]++;
    ts[STAT_TX_BYTES] += innerLen;
    const c = this.counters.values;
    c[STAT_TX_PACKETS]++;
    c[STAT_TX_BYTES] += innerLen;
    return true;
  }

  /**
   * As encapsulate, then also write the outer UDP and IPv4/IPv6 headers in front (for a path
   * that sends whole IP packets, e.g. a raw socket or a test pcap). Needs tunnel.localUnderlay
   * (throws GeneveConfigError if missing) and geneveOverhead(...) bytes of headroom (RangeError if not).
   * On Send/SendControl, out.ipOff/ipLen is the outer packet and out.off/len still the UDP
   * payload. The UDP checksum is always computed over IPv6 and, unless udpChecksumV4 is false,
   * over IPv4.
   */
  encapsulateIp(
    buf: Uint8Array,
    innerOff: number,
    innerLen: number,
    tunnel: GeneveTunnel,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    const local = tunnel.localUnderlay;
    if (local === null) {
      throw new GeneveConfigError(
        'localUnderlay',
        `tunnel ${tunnel.name} needs a local underlay address to build whole outer IP packets (encapsulateIp)`,
      );
    }
    const outerLen = (tunnel.underlayFamily === 4 ? IPV4_MIN_HEADER_LEN : IPV6_HEADER_LEN) + UDP_HEADER_LEN;
    if (innerOff < outerLen + GENEVE_HEADER_LEN + tunnel.options.length + (tunnel.l2 ? ETH_HEADER_LEN : 0)) {
      throw new RangeError(
        `encapsulateIp: inner packet at ${innerOff} leaves too little headroom for outer IP/UDP/Geneve headers`,
      );
    }
    const verdict = this.encapsulate(buf, innerOff, innerLen, tunnel, now, out);
    if (verdict === GeneveVerdict.Drop) return verdict;
    const ipOff = out.off - outerLen;
    out.ipLen =
      tunnel.underlayFamily === 4
        ? writeIpv4UdpHeaders(
            buf,
            ipOff,
            local,
            tunnel.remoteUnderlay,
            out.srcPort,
            tunnel.remotePort,
            out.len,
            this.udpChecksumV4,
            this.ttl,
          )
        : writeIpv6UdpHeaders(
            buf,
            ipOff,
            local,
            tunnel.remoteUnderlay,
            out.srcPort,
            tunnel.remotePort,
            out.len,
            true,
            this.ttl,
          );
    out.ipOff = ipOff;
    return verdict;
  }

  // -------------------------------------------------------------------------------------------
  // Receive

  /**
   * Decapsulate the Geneve datagram (UDP payload) at buf[off, off+len) received from underlay
   * address `from` — text as a UDP socket reports it, or 4/16 address bytes. Applies the
   * RFC 8926 receive rules (validateGeneve), finds the tunnel by (VNI, source), checks the
   * protocol type against the tunnel's mode and the inner packet's length fields. Returns
   * Deliver (inner IP packet at out.off/len), SendControl (L2: ARP reply built in this buffer,
   * send it back to the tunnel), Consumed, or Drop. Never throws for any packet content.
   */
  decapsulate(
    buf: Uint8Array,
    off: number,
    len: number,
    from: string | Uint8Array,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    if (!(off >= 0 && len >= 0 && off + len <= buf.length)) {
      throw new RangeError(`decapsulate: region [${off}, +${len}) is outside the ${buf.length}-byte buffer`);
    }
    if (typeof from !== 'string' && from.length !== 4 && from.length !== 16) {
      throw new TypeError(`decapsulate: a source address is 4 or 16 bytes, got ${from.length}`);
    }
    const reason = validateGeneve(buf, off, len, this.understood);
    if (reason !== GeneveDrop.None) return this.drop(out, reason, null);
    const vni = geneveVni(buf, off);
    const tunnel =
      typeof from === 'string'
        ? this.table.lookupReceive(vni, from)
        : this.table.lookupReceiveBytes(vni, from, 0, from.length === 4 ? 4 : 6);
    if (tunnel === undefined) return this.drop(out, GeneveDrop.UnknownTunnel, null);
    return this.decapsulateFor(buf, off, len, vni, tunnel, now, out);
  }

  /**
   * Decapsulate the next datagram of a run from one sender (the datagrams of one UDP GRO slot)
   * without validating and looking up again: when `out` holds a Deliver for the datagram at
   * buf[prevOff, ...) of the same sender in the same synchronous batch, and the datagram at
   * buf[off, +len) starts with the same Geneve header bytes (base header and options, which
   * fully decide validateGeneve and, with the sender, the tunnel), it continues as decapsulate
   * would after the lookup and returns true (verdict in `out`). Returns false and changes
   * nothing otherwise: the caller then calls decapsulate.
   */
  decapsulateNext(buf: Uint8Array, off: number, len: number, prevOff: number, now: number, out: GeneveResult): boolean {
    const tunnel = out.tunnel;
    if (out.verdict !== GeneveVerdict.Deliver || tunnel === null) return false;
    const hdrLen = GENEVE_HEADER_LEN + geneveOptionsLen(buf, prevOff);
    if (!(off >= 0 && len >= hdrLen && off + len <= buf.length)) return false;
    for (let i = 0; i < hdrLen; i++) if (buf[off + i] !== buf[prevOff + i]) return false;
    this.decapsulateFor(buf, off, len, out.vni, tunnel, now, out);
    return true;
  }

  /**
   * Decapsulate a whole outer IP packet at buf[off, off+len) (IPv4 or IPv6 + UDP + Geneve):
   * validates the outer IP header (IPv4 header checksum; no fragments), that it carries UDP to
   * our port, the UDP length and checksum (zero accepted over IPv4; over IPv6 only with
   * acceptZeroChecksumV6), then continues as decapsulate with the IP source address.
   */
  decapsulateIp(buf: Uint8Array, off: number, len: number, now: number, out: GeneveResult): GeneveVerdict {
    if (!(off >= 0 && len >= 0 && off + len <= buf.length)) {
      throw new RangeError(`decapsulateIp: region [${off}, +${len}) is outside the ${buf.length}-byte buffer`);
    }
    const v = len > 0 ? buf[off]! >>> 4 : 0;
    let udpOff: number;
    let ipEnd: number;
    let family: 4 | 6;
    if (v === 4) {
      if (!ipv4HeaderValid(buf, off, len) || buf[off + IPV4_PROTOCOL_OFFSET] !== IP_PROTO_UDP)
        return this.drop(out, GeneveDrop.BadOuter, null);
      if (ipv4IsFragment(buf, off)) return this.drop(out, GeneveDrop.BadOuter, null);
      udpOff = off + ipv4HeaderLen(buf, off);
      ipEnd = off + ipv4TotalLength(buf, off);
      family = 4;
    } else if (v === 6) {
      if (!ipv6HeaderValid(buf, off, len) || buf[off + IPV6_NEXT_HEADER_OFFSET] !== IP_PROTO_UDP)
        return this.drop(out, GeneveDrop.BadOuter, null);
      udpOff = off + IPV6_HEADER_LEN;
      ipEnd = udpOff + ipv6PayloadLength(buf, off);
      family = 6;
    } else {
      return this.drop(out, GeneveDrop.BadOuter, null);
    }
    if (udpOff + UDP_HEADER_LEN > ipEnd) return this.drop(out, GeneveDrop.BadOuter, null);
    const udpLen = udpLength(buf, udpOff);
    if (udpLen < UDP_HEADER_LEN || udpOff + udpLen > ipEnd || udpDstPort(buf, udpOff) !== this.port) {
      return this.drop(out, GeneveDrop.BadOuter, null);
    }
    const csumOk =
      family === 4
        ? udpChecksumValidV4(buf, off, udpOff, udpLen)
        : udpChecksumValidV6(buf, off, udpOff, udpLen, this.acceptZeroChecksumV6);
    if (!csumOk) return this.drop(out, GeneveDrop.BadOuter, null);
    const gOff = udpOff + UDP_HEADER_LEN;
    const gLen = udpLen - UDP_HEADER_LEN;
    const reason = validateGeneve(buf, gOff, gLen, this.understood);
    if (reason !== GeneveDrop.None) return this.drop(out, reason, null);
    const vni = geneveVni(buf, gOff);
    const tunnel = this.table.lookupReceiveBytes(
      vni,
      buf,
      off + (family === 4 ? IPV4_SRC_OFFSET : IPV6_SRC_OFFSET),
      family,
    );
    if (tunnel === undefined) return this.drop(out, GeneveDrop.UnknownTunnel, null);
    return this.decapsulateFor(buf, gOff, gLen, vni, tunnel, now, out);
  }

  // -------------------------------------------------------------------------------------------

  /** After validation and tunnel lookup: dispatch on the protocol type. */
  private decapsulateFor(
    buf: Uint8Array,
    off: number,
    len: number,
    vni: number,
    tunnel: GeneveTunnel,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    out.tunnel = tunnel;
    out.vni = vni;
    out.ipOff = -1;
    out.ipLen = 0;
    const optionsLen = geneveOptionsLen(buf, off);
    out.optionsOff = off + GENEVE_HEADER_LEN;
    out.optionsLen = optionsLen;
    const payOff = off + GENEVE_HEADER_LEN + optionsLen;
    const payLen = len - GENEVE_HEADER_LEN - optionsLen;
    const proto = geneveProtocolType(buf, off);
    if (proto === GENEVE_PROTO_IPV4 || proto === GENEVE_PROTO_IPV6) {
      if (tunnel.l2) return this.drop(out, GeneveDrop.ModeMismatch, tunnel);
      return this.deliverIp(buf, payOff, payLen, proto, tunnel, out);
    }
    if (proto === GENEVE_PROTO_TEB) {
      if (!tunnel.l2) return this.drop(out, GeneveDrop.ModeMismatch, tunnel);
      return this.receiveFrame(buf, off, payOff, payLen, tunnel, now, out);
    }
    return this.drop(out, GeneveDrop.UnknownProtocol, tunnel);
  }

  /** Check the inner IP packet's version and length fields; deliver it trimmed to its own length. */
  private deliverIp(
    buf: Uint8Array,
    p: number,
    n: number,
    proto: number,
    tunnel: GeneveTunnel,
    out: GeneveResult,
  ): GeneveVerdict {
    let ipLen: number;
    if (proto === GENEVE_PROTO_IPV4) {
      if (n < IPV4_MIN_HEADER_LEN || buf[p]! >>> 4 !== 4) return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
      ipLen = ipv4TotalLength(buf, p);
      if (ipLen > n || ipLen < ipv4HeaderLen(buf, p) || ipv4HeaderLen(buf, p) < IPV4_MIN_HEADER_LEN) {
        return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
      }
    } else {
      if (n < IPV6_HEADER_LEN || buf[p]! >>> 4 !== 6) return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
      ipLen = IPV6_HEADER_LEN + ipv6PayloadLength(buf, p);
      if (ipLen > n) return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
    }
    out.verdict = GeneveVerdict.Deliver;
    out.reason = GeneveDrop.None;
    out.off = p;
    out.len = ipLen;
    out.innerProtocol = proto;
    out.srcPort = 0;
    const ts = tunnel.stats;
    ts[STAT_RX_PACKETS]++;
    ts[STAT_RX_BYTES] += ipLen;
    const c = this.counters.values;
    c[STAT_RX_PACKETS]++;
    c[STAT_RX_BYTES] += ipLen;
    return GeneveVerdict.Deliver;
  }

  /** L2: an inner Ethernet frame at buf[eth, eth+n) in a datagram starting at geneveOff. */
  private receiveFrame(
    buf: Uint8Array,
    geneveOff: number,
    eth: number,
    n: number,
    tunnel: GeneveTunnel,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    if (n < ETH_HEADER_LEN) return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
    const dstGroup = (buf[eth + ETH_DST_OFFSET]! & 1) !== 0;
    if (!dstGroup && !macEquals(buf, eth + ETH_DST_OFFSET, tunnel.localMac))
      return this.drop(out, GeneveDrop.NotForUs, tunnel);
    // A group (multicast) or all-zero source is not a station address: malformed.
    if ((buf[eth + ETH_SRC_OFFSET]! & 1) !== 0 || macIsZero(buf, eth + ETH_SRC_OFFSET))
      return this.drop(out, GeneveDrop.InnerMalformed, tunnel);
    const type = ethType(buf, eth);
    const p = eth + ETH_HEADER_LEN;
    const m = n - ETH_HEADER_LEN;
    if (type === ETHERTYPE_IPV4 || type === ETHERTYPE_IPV6) {
      const verdict = this.deliverIp(
        buf,
        p,
        m,
        type === ETHERTYPE_IPV4 ? GENEVE_PROTO_IPV4 : GENEVE_PROTO_IPV6,
        tunnel,
        out,
      );
      if (verdict === GeneveVerdict.Deliver) this.arp.learn(tunnel, buf, eth + ETH_SRC_OFFSET);
      return verdict;
    }
    if (type !== ETHERTYPE_ARP) return this.drop(out, GeneveDrop.UnsupportedEthertype, tunnel);
    return this.arp.receive(buf, geneveOff, eth + ETH_SRC_OFFSET, p, m, tunnel, out);
  }

  private drop(out: GeneveResult, reason: GeneveDrop, tunnel: GeneveTunnel | null): GeneveVerdict {
    return setDrop(out, this.counters, reason, tunnel);
  }

  /** For logs: a one-line description of a tunnel's L2 state (allocates). */
  describeNeighbour(tunnel: GeneveTunnel): string {
    return `${formatAddress(tunnel.remoteInternal)} ${tunnel.remoteMacKnown ? `at ${formatMac(tunnel.remoteMac)}` : 'unresolved'}`;
  }
}
