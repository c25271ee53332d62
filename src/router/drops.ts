/**
 * The router's drop reasons and their names (stats, metrics, `weft show`). Apart from the
 * router so the stages it uses (hop.ts) and the shells that report its counters name the same
 * codes without depending on the routing class. The peer table, rules, Geneve and WireGuard
 * stages count their own.
 */

/** Why the router dropped a packet (the peer table, rules, Geneve and WireGuard stages count their own). */
export const RouterDrop = {
  /** Not an IPv4/IPv6 packet, or its header is inconsistent (IHL, total length, IPv6 chain). */
  BadPacket: 0,
  /** No peer, own address, node or pod route for the destination. */
  NoRoute: 1,
  /** TTL / hop limit expired (an ICMP Time Exceeded was sent unless not allowed or rate-limited). */
  TtlExpired: 2,
  /** Time Exceeded suppressed by the rate limit. */
  IcmpRateLimited: 3,
  /** Too little headroom in front of the packet for a generated error. */
  NoHeadroom: 4,
  /** Decrypted by a peer the router does not know (removed between decryption and routing). */
  UnknownPeer: 5,
  /** From one peer to another: Liqo gateways do not transit between peers. */
  PeerTransit: 6,
  /** From the gateway host back to the gateway's own address. */
  Loop: 7,
  /** From the host to a peer's tunnel address with a source other than our tunnel address (the peer would drop it). */
  TunnelSource: 8,
  /** Dropped by a stage attached at a hook point. */
  Filtered: 9,
} as const;
export type RouterDrop = (typeof RouterDrop)[keyof typeof RouterDrop];
export const ROUTER_DROP_NAMES: readonly string[] = [
  'bad_packet',
  'no_route',
  'ttl_expired',
  'icmp_rate_limited',
  'no_headroom',
  'unknown_peer',
  'peer_transit',
  'loop',
  'tunnel_source',
  'filtered',
];
