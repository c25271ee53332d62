/**
 * The Geneve engine: encapsulation and decapsulation per packet, L2 (ARP) handling, counters.
 * No sockets, timers or clocks: `now` (milliseconds) is passed in and drives ARP
 * retransmission and the hold queue's timeouts.
 *
 * Buffer contract (both directions): the caller owns `buf`; the engine writes only inside it and
 * keeps no reference after returning (a held packet is copied). Results go into a caller-owned, reusable GeneveResult
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
 * inner Ethernet header; ARP and the peer's MAC are neighbour.ts's. A packet to a peer whose MAC
 * is not known yet is HELD (verdict Held; the engine keeps a copy, hold.ts): the caller calls
 * poll after receive batches while holdPending > 0 and at holdDeadline(now), and sends what it
 * returns (held packets in order once the ARP reply came, ARP retransmissions).
 */

import { formatAddress } from '../packet/addr.js';
import {
  ETH_DST_OFFSET,
  ETH_HEADER_LEN,
  ETH_SRC_OFFSET,
  ETHERTYPE_ARP,
  ETHERTYPE_IPV4,
  ETHERTYPE_IPV6,
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
} from './header.js';
import { GeneveCounters, GeneveDrop, STAT_RX_BYTES, STAT_RX_PACKETS } from './reasons.js';
import { encapsulateNextInRun, writeEncap } from './encap.js';
import type { HoldLimits } from './hold.js';
import { ArpNeighbours, macEquals, macIsZero } from './neighbour.js';
import { GeneveResult, GeneveVerdict, setDrop } from './result.js';
import type { GeneveTunnelTable } from './table.js';
import type { GeneveTunnel } from './tunnel.js';
import { GeneveConfigError } from './tunnel-spec.js';

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
  /** L2: minimum interval between ARP requests for a packet that cannot be held. Default 1000 ms. */
  arpRetryMs?: number;
  /** L2: limits and timers of the hold queue of unresolved neighbours (hold.ts; the kernel's defaults). */
  hold?: HoldLimits;
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
    this.arp = new ArpNeighbours(this.counters, this.hashSeed, this.arpRetryMs, opts.hold);
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

    // L2 to a neighbour being resolved (or with held packets still to go first): hold.
    if (l2 && (!tunnel.remoteMacKnown || this.arp.hold.has(tunnel)))
      return this.arp.unresolved(buf, innerOff, innerLen, tunnel, now, out);
    return writeEncap(buf, innerOff, innerLen, tunnel, proto, out, this.counters, this.hashSeed);
  }

  /**
   * Send what the L2 hold queue has due at `now` (hold.ts), one item per call, into the
   * caller's buf with the inner packet (or ARP) placed at `off` (≥ GENEVE_MAX_HEADROOM; buf
   * large enough for the largest packet): Send (a held packet of a neighbour now resolved,
   * oldest first, encapsulated) or SendControl (an ARP retransmission) — send each as from
   * encapsulate — or Drop with reason None when nothing more is due. Neighbours whose
   * resolution failed have their packets dropped (counted as ArpTimeout) on the way. Call it
   * after a receive batch while holdPending, and at holdDeadline.
   */
  poll(buf: Uint8Array, off: number, now: number, out: GeneveResult): GeneveVerdict {
    return this.arp.poll(buf, off, now, out);
  }

  /**
   * Resolve `tunnel`'s peer MAC now rather than on the first packet to send (L2 with IPv4
   * internal addressing, MAC not known): the ARP request goes out from the next poll. A node
   * re-pointed at a new gateway calls it, as the kernel announces a new neighbour: the gateway,
   * holding packets for us since it took over, learns our MAC from the request. False when
   * nothing was started.
   */
  resolve(tunnel: GeneveTunnel, now: number): boolean {
    if (!tunnel.l2 || tunnel.remoteMacKnown || tunnel.internalFamily !== 4) return false;
    return this.arp.hold.probe(tunnel, now);
  }

  /** Neighbours with held packets or being resolved (poll has work when this is > 0). */
  get holdPending(): number {
    return this.arp.hold.active;
  }

  /** When poll next has something to do (ms; `now` if at once), Infinity when nothing is held. */
  holdDeadline(now: number): number {
    return this.arp.hold.nextDeadline(now);
  }

  /** Packets and bytes held now for unresolved neighbours (a gauge for show and metrics). */
  get heldPackets(): number {
    return this.arp.hold.heldPackets;
  }

  /**
   * Encapsulate the next segment of the flow `out` holds, without looking anything up again
   * (encap.ts encapsulateNextInRun: the conditions, and false when they do not hold — the
   * caller then calls encapsulate).
   */
  encapsulateNext(
    buf: Uint8Array,
    innerOff: number,
    innerLen: number,
    tunnel: GeneveTunnel,
    out: GeneveResult,
  ): boolean {
    return encapsulateNextInRun(buf, innerOff, innerLen, tunnel, out, this.counters);
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
    if (verdict !== GeneveVerdict.Send && verdict !== GeneveVerdict.SendControl) return verdict;
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
