/**
 * L2 neighbour handling of the Geneve engine (inner Ethernet, protocol type 0x6558): ARP
 * (RFC 826) for the tunnel's internal IPv4 addresses and learning the peer's MAC.
 *
 * One peer per tunnel: every valid ARP packet and every accepted frame in a tunnel comes from
 * the peer, so its source MAC is the peer's (unless configured statically). Requests for our
 * internal address are answered in the received buffer. Until the peer MAC is known an IP
 * packet to send is held (a copy, hold.ts, as the kernel's neighbour queue) and the first one's
 * buffer carries the ARP request for the peer's internal address instead (SendControl); poll
 * retransmits it and, once the MAC is known, the engine sends the held packets in order. A packet
 * that cannot be held (IPv6 internal addressing has no ARP: the MAC is then configured or learned
 * from the peer's frames; or too many neighbours pending) is dropped (counted as NoPeerMac) and,
 * at most once per `arpRetryMs`, an ARP request is written in its place.
 *
 * No sockets, timers or clocks: `now` (milliseconds) comes from the caller.
 */

import {
  ARP_OP_REPLY,
  ARP_OP_REQUEST,
  ARP_PACKET_LEN,
  ARP_SHA_OFFSET,
  ARP_SPA_OFFSET,
  ARP_TPA_OFFSET,
  arpOperation,
  arpValid,
  writeArp,
} from '../packet/arp.js';
import { BROADCAST_MAC, ETH_HEADER_LEN, ETHERTYPE_ARP, MAC_LEN, writeEthHeader } from '../packet/ethernet.js';
import { writeEncap } from './encap.js';
import { flowSourcePort } from './flowhash.js';
import {
  GENEVE_HEADER_LEN,
  GENEVE_PROTO_IPV4,
  GENEVE_PROTO_IPV6,
  GENEVE_PROTO_TEB,
  writeTunnelHeader,
} from './header.js';
import {
  GeneveDrop,
  STAT_ARP_REPLIES_RECEIVED,
  STAT_ARP_REPLIES_SENT,
  STAT_ARP_REQUESTS_SENT,
  STAT_MAC_CHANGED,
  STAT_MAC_LEARNED,
  type GeneveCounters,
} from './reasons.js';
import { HoldOutcome, NeighbourHold, type HoldLimits } from './hold.js';
import { GeneveVerdict, setConsumed, setControl, setDrop, setHeld, type GeneveResult } from './result.js';
import type { GeneveTunnel } from './tunnel.js';

const ZERO_MAC = new Uint8Array(MAC_LEN);

export class ArpNeighbours {
  /** The asker's MAC and IPv4 address, saved before the reply overwrites the request (reused). */
  private readonly askerMac = new Uint8Array(MAC_LEN);
  private readonly askerIp = new Uint8Array(4);

  /** Packets waiting for their neighbour's MAC. */
  readonly hold: NeighbourHold;

  constructor(
    private readonly counters: GeneveCounters,
    private readonly hashSeed: number,
    private readonly arpRetryMs: number,
    holdLimits: HoldLimits = {},
  ) {
    this.hold = new NeighbourHold(counters, holdLimits);
  }

  /**
   * A received ARP packet at buf[p, p+m) inside the datagram starting at geneveOff: learn the
   * peer's MAC (at buf[srcMacOff]), answer a request for our address (SendControl, built in
   * place), take a reply or a gratuitous ARP (Consumed), drop anything else (counted).
   */
  receive(
    buf: Uint8Array,
    geneveOff: number,
    srcMacOff: number,
    p: number,
    m: number,
    tunnel: GeneveTunnel,
    out: GeneveResult,
  ): GeneveVerdict {
    if (!arpValid(buf, p, m)) return setDrop(out, this.counters, GeneveDrop.ArpMalformed, tunnel);
    // Every valid ARP in this tunnel comes from the peer (one peer per tunnel): learn its MAC.
    this.learn(tunnel, buf, srcMacOff);
    const op = arpOperation(buf, p);
    if (op === ARP_OP_REPLY) {
      this.counters.values[STAT_ARP_REPLIES_RECEIVED]++;
      return setConsumed(out);
    }
    if (
      op === ARP_OP_REQUEST &&
      tunnel.internalFamily === 4 &&
      ipv4Equals(buf, p + ARP_TPA_OFFSET, tunnel.localInternal)
    ) {
      return this.reply(buf, geneveOff, p, tunnel, out);
    }
    // Gratuitous ARP (sender = target): an announcement, already learned from.
    if (ipv4EqualsAt(buf, p + ARP_SPA_OFFSET, p + ARP_TPA_OFFSET)) return setConsumed(out);
    return setDrop(out, this.counters, GeneveDrop.ArpNotForUs, tunnel);
  }

  /**
   * Build the ARP reply (RFC 826) for the request at buf[arp] into the same buffer, starting at
   * the datagram's own start `off`: our Geneve header (with the tunnel's options), Ethernet
   * (dst = asker, src = our MAC), ARP reply. The asker's MAC and IP are saved first because the
   * reply may overlap the request.
   */
  private reply(buf: Uint8Array, off: number, arp: number, tunnel: GeneveTunnel, out: GeneveResult): GeneveVerdict {
    const mac = this.askerMac;
    const ip = this.askerIp;
    for (let i = 0; i < MAC_LEN; i++) mac[i] = buf[arp + ARP_SHA_OFFSET + i]!;
    for (let i = 0; i < 4; i++) ip[i] = buf[arp + ARP_SPA_OFFSET + i]!;
    const eth = off + GENEVE_HEADER_LEN + tunnel.options.length;
    const end = eth + ETH_HEADER_LEN + ARP_PACKET_LEN;
    if (end > buf.length) return setDrop(out, this.counters, GeneveDrop.NoRoom, tunnel);
    writeTunnelHeader(buf, off, tunnel, GENEVE_PROTO_TEB);
    writeEthHeader(buf, eth, mac, 0, tunnel.localMac, 0, ETHERTYPE_ARP);
    writeArp(buf, eth + ETH_HEADER_LEN, ARP_OP_REPLY, tunnel.localMac, tunnel.localInternal, mac, ip);
    this.counters.values[STAT_ARP_REPLIES_SENT]++;
    return setControl(out, off, end - off, tunnel, flowSourcePort(buf, eth, ETH_HEADER_LEN, this.hashSeed));
  }

  /**
   * L2 send of buf[innerOff, +innerLen) while the peer's MAC is unknown (or held packets still
   * wait for it): hold a copy; the first packet of a resolution carries the ARP request instead
   * (SendControl). A packet that cannot be held is dropped and, rate-limited, replaced by an ARP
   * request.
   */
  unresolved(
    buf: Uint8Array,
    innerOff: number,
    innerLen: number,
    tunnel: GeneveTunnel,
    now: number,
    out: GeneveResult,
  ): GeneveVerdict {
    if (tunnel.internalFamily === 4) {
      const o = this.hold.hold(tunnel, buf, innerOff, innerLen, now);
      if (o === HoldOutcome.HeldProbe) {
        if (this.request(buf, innerOff, tunnel, now, out)) return GeneveVerdict.SendControl;
        return setHeld(out, tunnel); // no room for the request here: poll retransmits it
      }
      if (o === HoldOutcome.Held) return setHeld(out, tunnel);
    }
    setDrop(out, this.counters, GeneveDrop.NoPeerMac, tunnel);
    if (tunnel.internalFamily !== 4 || now - tunnel.lastArpRequestAt < this.arpRetryMs) return GeneveVerdict.Drop;
    if (!this.request(buf, innerOff, tunnel, now, out)) return GeneveVerdict.Drop;
    out.reason = GeneveDrop.NoPeerMac; // the inner packet itself was dropped (counted above)
    return GeneveVerdict.SendControl;
  }

  /**
   * Write an ARP request for the tunnel's peer into buf, its Ethernet header ending at `at`
   * (the Geneve header and options in front of it): SendControl in `out`. False when the
   * buffer has no room after `at` for the ARP packet.
   */
  request(buf: Uint8Array, at: number, tunnel: GeneveTunnel, now: number, out: GeneveResult): boolean {
    const eth = at - ETH_HEADER_LEN;
    const off = eth - GENEVE_HEADER_LEN - tunnel.options.length;
    const end = eth + ETH_HEADER_LEN + ARP_PACKET_LEN;
    if (end > buf.length || off < 0) return false;
    tunnel.lastArpRequestAt = now;
    writeTunnelHeader(buf, off, tunnel, GENEVE_PROTO_TEB);
    writeEthHeader(buf, eth, BROADCAST_MAC, 0, tunnel.localMac, 0, ETHERTYPE_ARP);
    writeArp(
      buf,
      eth + ETH_HEADER_LEN,
      ARP_OP_REQUEST,
      tunnel.localMac,
      tunnel.localInternal,
      ZERO_MAC,
      tunnel.remoteInternal,
    );
    this.counters.values[STAT_ARP_REQUESTS_SENT]++;
    setControl(out, off, end - off, tunnel, flowSourcePort(buf, eth, ETH_HEADER_LEN, this.hashSeed));
    return true;
  }

  /**
   * What the hold queue has due at `now`, one item per call (engine.poll: the contract): a held
   * packet of a resolved neighbour copied to buf[off] and encapsulated (Send), an ARP
   * retransmission (SendControl), or Drop with reason None when nothing is due.
   */
  poll(buf: Uint8Array, off: number, now: number, out: GeneveResult): GeneveVerdict {
    const hold = this.hold;
    out.ipOff = -1;
    out.ipLen = 0;
    for (;;) {
      if (hold.active === 0) break;
      const n = hold.takeReleased(buf, off);
      if (n >= 0) {
        const proto = buf[off]! >>> 4 === 4 ? GENEVE_PROTO_IPV4 : GENEVE_PROTO_IPV6;
        return writeEncap(buf, off, n, hold.releasedTunnel!, proto, out, this.counters, this.hashSeed);
      }
      const t = hold.due(now);
      if (t === null) break;
      if (this.request(buf, off, t, now, out)) return GeneveVerdict.SendControl;
    }
    out.verdict = GeneveVerdict.Drop;
    out.reason = GeneveDrop.None;
    out.tunnel = null;
    out.off = 0;
    out.len = 0;
    return GeneveVerdict.Drop;
  }

  /** The peer's MAC is the source MAC at buf[macOff] of a frame accepted from this tunnel. */
  learn(tunnel: GeneveTunnel, buf: Uint8Array, macOff: number): void {
    if (tunnel.remoteMacStatic) return;
    if (!tunnel.remoteMacKnown) {
      for (let i = 0; i < MAC_LEN; i++) tunnel.remoteMac[i] = buf[macOff + i]!;
      tunnel.remoteMacKnown = true;
      this.counters.values[STAT_MAC_LEARNED]++;
    } else if (!macEquals(buf, macOff, tunnel.remoteMac)) {
      for (let i = 0; i < MAC_LEN; i++) tunnel.remoteMac[i] = buf[macOff + i]!;
      this.counters.values[STAT_MAC_CHANGED]++;
    }
  }
}

export function macEquals(buf: Uint8Array, off: number, mac: Uint8Array): boolean {
  for (let i = 0; i < MAC_LEN; i++) if (buf[off + i] !== mac[i]) return false;
  return true;
}

export function macIsZero(buf: Uint8Array, off: number): boolean {
  for (let i = 0; i < MAC_LEN; i++) if (buf[off + i] !== 0) return false;
  return true;
}

function ipv4Equals(buf: Uint8Array, off: number, addr: Uint8Array): boolean {
  return buf[off] === addr[0] && buf[off + 1] === addr[1] && buf[off + 2] === addr[2] && buf[off + 3] === addr[3];
}

function ipv4EqualsAt(buf: Uint8Array, a: number, b: number): boolean {
  return buf[a] === buf[b] && buf[a + 1] === buf[b + 1] && buf[a + 2] === buf[b + 2] && buf[a + 3] === buf[b + 3];
}
