/**
 * Drop reasons and counters of the Geneve engine.
 *
 * Bad network input never throws and never logs per packet: it is a drop with one of these
 * reasons, counted in a Float64Array indexed by the reason (Float64 so counts stay exact up to
 * 2^53 instead of wrapping at 2^32). Reading the counters for metrics (`snapshot`) allocates;
 * counting does not.
 */

/** Why a packet was dropped. Numeric so that the hot path stores a small integer. */
export const GeneveDrop = {
  /** Not a drop. */
  None: 0,
  /** Fewer than 8 bytes: no Geneve base header. */
  Truncated: 1,
  /** Version field is not 0 (RFC 8926 §3.4: unknown versions MUST be dropped). */
  BadVersion: 2,
  /** Opt Len says more option bytes than the datagram holds. */
  OptionsTruncated: 3,
  /** An option TLV runs past the end of the options area (RFC 8926 §3.5 length check). */
  OptionMalformed: 4,
  /** An option with the critical bit that we do not understand (RFC 8926 §3.5.1: MUST drop). */
  CriticalOption: 5,
  /** O bit set: a control packet, whose payload must not be forwarded as data (RFC 8926 §3.4). */
  Oam: 6,
  /** Protocol type other than IPv4, IPv6 or Transparent Ethernet Bridging. */
  UnknownProtocol: 7,
  /** No tunnel for this (VNI, underlay source). */
  UnknownTunnel: 8,
  /** Protocol type does not fit the tunnel's mode (IP in an L2 tunnel or Ethernet in an L3 one). */
  ModeMismatch: 9,
  /** The inner IP packet is too short, has the wrong version for the protocol type, or its length field exceeds the data. */
  InnerMalformed: 10,
  /** L2: the inner frame is addressed to a unicast MAC that is not ours. */
  NotForUs: 11,
  /** L2: an EtherType we do not carry (VLAN tags, LLDP, ...). */
  UnsupportedEthertype: 12,
  /** L2: a malformed ARP packet, or not Ethernet/IPv4 ARP. */
  ArpMalformed: 13,
  /** L2: an ARP request for an address that is not ours. */
  ArpNotForUs: 14,
  /** L2 send: the peer's MAC is not known and the packet could not be held (IPv6 internal addressing, or too many neighbours pending). */
  NoPeerMac: 15,
  /** Send: the packet handed in is not an IPv4 or IPv6 packet. */
  BadInnerPacket: 16,
  /** Receive of a whole outer IP packet: bad IP/UDP header, wrong port or checksum. */
  BadOuter: 17,
  /** The caller's buffer has no room for the control reply (ARP) the engine would build. */
  NoRoom: 18,
  /** The encapsulated packet would exceed the 65535-byte IP/UDP length limit. */
  TooBig: 19,
  /** L2 send: held for a neighbour whose ARP resolution failed (every probe unanswered; hold.ts). */
  ArpTimeout: 20,
  /** L2 send: a hold queue of an unresolved neighbour was full (its oldest packet is dropped; hold.ts). */
  ArpHoldOverflow: 21,
} as const;
export type GeneveDrop = (typeof GeneveDrop)[keyof typeof GeneveDrop];

/** Number of reasons (array size for counters). */
export const GENEVE_DROP_COUNT = 22;

/** Metric-friendly names, indexed by reason. */
export const GENEVE_DROP_NAMES: readonly string[] = [
  'none',
  'truncated',
  'bad_version',
  'options_truncated',
  'option_malformed',
  'critical_option',
  'oam',
  'unknown_protocol',
  'unknown_tunnel',
  'mode_mismatch',
  'inner_malformed',
  'not_for_us',
  'unsupported_ethertype',
  'arp_malformed',
  'arp_not_for_us',
  'no_peer_mac',
  'bad_inner_packet',
  'bad_outer',
  'no_room',
  'too_big',
  'arp_timeout',
  'arp_hold_overflow',
];

/** Indexes into GeneveCounters.values (and, for the first five, GeneveTunnel.stats). */
export const STAT_TX_PACKETS = 0;
export const STAT_TX_BYTES = 1;
export const STAT_RX_PACKETS = 2;
export const STAT_RX_BYTES = 3;
export const STAT_DROPS = 4;
export const STAT_ARP_REQUESTS_SENT = 5;
export const STAT_ARP_REPLIES_SENT = 6;
export const STAT_ARP_REPLIES_RECEIVED = 7;
export const STAT_MAC_LEARNED = 8;
export const STAT_MAC_CHANGED = 9;
/** L2: packets held while their neighbour was resolved, and held packets sent once it was. */
export const STAT_ARP_HELD = 10;
export const STAT_ARP_HELD_SENT = 11;
const STAT_COUNT = 12;

/**
 * Engine-wide counters. Kept in Float64Arrays rather than object fields: a field that starts as
 * a small integer changes representation when it outgrows 2^31, which deoptimises every function
 * that touches the object; a typed array slot never does. Incrementing never allocates.
 */
export class GeneveCounters {
  /** Drops by reason (index = GeneveDrop value; index 0 is unused). */
  readonly drops = new Float64Array(GENEVE_DROP_COUNT);
  /** Indexed by the STAT_* constants. */
  readonly values = new Float64Array(STAT_COUNT);

  /** Packets encapsulated for sending (data only) and their inner bytes. */
  get txPackets(): number {
    return this.values[STAT_TX_PACKETS]!;
  }
  get txBytes(): number {
    return this.values[STAT_TX_BYTES]!;
  }
  /** Packets decapsulated and delivered (data only) and their inner bytes. */
  get rxPackets(): number {
    return this.values[STAT_RX_PACKETS]!;
  }
  get rxBytes(): number {
    return this.values[STAT_RX_BYTES]!;
  }
  /** L2 control traffic. */
  get arpRequestsSent(): number {
    return this.values[STAT_ARP_REQUESTS_SENT]!;
  }
  get arpRepliesSent(): number {
    return this.values[STAT_ARP_REPLIES_SENT]!;
  }
  get arpRepliesReceived(): number {
    return this.values[STAT_ARP_REPLIES_RECEIVED]!;
  }
  /** A peer MAC was learned for the first time, or changed. */
  get macLearned(): number {
    return this.values[STAT_MAC_LEARNED]!;
  }
  get macChanged(): number {
    return this.values[STAT_MAC_CHANGED]!;
  }
  /** L2: packets held for an unresolved neighbour, and those sent once it resolved. */
  get arpHeld(): number {
    return this.values[STAT_ARP_HELD]!;
  }
  get arpHeldSent(): number {
    return this.values[STAT_ARP_HELD_SENT]!;
  }

  /** Total of all drops. */
  totalDrops(): number {
    let t = 0;
    for (let i = 1; i < GENEVE_DROP_COUNT; i++) t += this.drops[i]!;
    return t;
  }

  /** A plain object for metrics / logs (allocates; not for the packet path). */
  snapshot(): Record<string, number> {
    const s: Record<string, number> = {
      tx_packets: this.txPackets,
      tx_bytes: this.txBytes,
      rx_packets: this.rxPackets,
      rx_bytes: this.rxBytes,
      arp_requests_sent: this.arpRequestsSent,
      arp_replies_sent: this.arpRepliesSent,
      arp_replies_received: this.arpRepliesReceived,
      mac_learned: this.macLearned,
      mac_changed: this.macChanged,
      arp_held: this.arpHeld,
      arp_held_sent: this.arpHeldSent,
    };
    for (let i = 1; i < GENEVE_DROP_COUNT; i++) s[`drop_${GENEVE_DROP_NAMES[i]!}`] = this.drops[i]!;
    return s;
  }

  reset(): void {
    this.drops.fill(0);
    this.values.fill(0);
  }
}
