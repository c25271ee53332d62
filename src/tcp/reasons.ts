/**
 * Why the TCP engine dropped or refused a segment (counted, never thrown), and the endpoint's
 * counters. Each input returns one of these codes; TCP_ACCEPTED when the segment was used.
 */
export const TCP_ACCEPTED = 0;
/** Not a parseable IPv4/IPv6 packet, or not TCP. */
export const TCP_DROP_NOT_TCP = 1;
/** A fragment (no reassembly here). */
export const TCP_DROP_FRAGMENT = 2;
/** TCP header shorter than 20 bytes or its data offset beyond the packet. */
export const TCP_DROP_BAD_HEADER = 3;
export const TCP_DROP_BAD_CHECKSUM = 4;
/** No connection and not a SYN (answered with a RST unless it was one). */
export const TCP_DROP_NO_CONNECTION = 5;
/** A SYN for an address/port the endpoint does not serve (answered with a RST). */
export const TCP_DROP_REFUSED = 6;
/** A SYN while the connection table is full (answered with a RST). */
export const TCP_DROP_TABLE_FULL = 7;
/** Sequence number outside the receive window (RFC 9293 §3.10.7.4 first check; ACK sent). */
export const TCP_DROP_OUT_OF_WINDOW = 8;
/** ACK of data never sent or too old (RFC 5961 §5; ACK sent). */
export const TCP_DROP_BAD_ACK = 9;
/** RST not exactly at RCV.NXT (RFC 5961 §3: challenge ACK if in window, else dropped). */
export const TCP_DROP_RST_INVALID = 10;
/** SYN on a synchronized connection (RFC 5961 §4: challenge ACK). */
export const TCP_DROP_SYN_IN_WINDOW = 11;
/** Segment without ACK on a synchronized connection. */
export const TCP_DROP_NO_ACK = 12;
/** Out-of-order data beyond the bounded reassembly ranges. */
export const TCP_DROP_OOO_FULL = 13;
/** Invalid flag combination (SYN+RST, SYN+FIN, no flags). */
export const TCP_DROP_BAD_FLAGS = 14;
/** Address not a unicast one (broadcast, multicast, unspecified): never answered. */
export const TCP_DROP_BAD_ADDRESS = 15;

export const TCP_DROP_REASONS = [
  'accepted',
  'not_tcp',
  'fragment',
  'bad_header',
  'bad_checksum',
  'no_connection',
  'refused',
  'table_full',
  'out_of_window',
  'bad_ack',
  'rst_invalid',
  'syn_in_window',
  'no_ack',
  'ooo_full',
  'bad_flags',
  'bad_address',
] as const;

export type TcpDropReason = (typeof TCP_DROP_REASONS)[number];

/** Endpoint counters; `drops[code]` counts each TCP_DROP_* code (index 0 unused). */
export class TcpStats {
  readonly drops = new Float64Array(TCP_DROP_REASONS.length);
  segmentsIn = 0;
  segmentsOut = 0;
  /** Passive connections that completed the handshake. */
  accepted = 0;
  /** Active opens. */
  connected = 0;
  retransmits = 0;
  fastRetransmits = 0;
  /** Data segments received ahead of RCV.NXT and held (out of order). */
  outOfOrder = 0;
  /** Data segments received with nothing not already received (duplicates, old retransmissions). */
  duplicates = 0;
  /** Connections aborted after the retransmission limit. */
  timeouts = 0;
  resetsIn = 0;
  resetsOut = 0;
  challengeAcks = 0;
  /** RSTs for unknown connections not sent because their queue was full. */
  rstQueueFull = 0;

  /** Drops by reason name, only the non-zero ones. */
  dropsByReason(): Partial<Record<TcpDropReason, number>> {
    const out: Partial<Record<TcpDropReason, number>> = {};
    for (let i = 1; i < TCP_DROP_REASONS.length; i++)
      if (this.drops[i]! > 0) out[TCP_DROP_REASONS[i]!] = this.drops[i]!;
    return out;
  }
}
