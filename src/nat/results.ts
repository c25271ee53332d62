/** Result codes of the NAT's outbound()/inbound(): forward, reply, or a counted drop reason. */

/** The packet was translated in place (or needed nothing): forward buf[off, off+len). */
export const NAT_FORWARD = 0;
/**
 * The packet must not be forwarded; buf[off, off + nat.replyLength) now holds an ICMP error
 * (Fragmentation Needed / Packet Too Big) addressed to the packet's sender: send it back the way
 * the packet came.
 */
export const NAT_REPLY = 1;

/** Drop reasons (result codes ≥ NAT_DROP_MIN); each drop is counted in `Nat.drops[code]`. */
export const NatDrop = {
  /** IP header malformed: version, IHL, lengths, IPv6 extension chain. */
  BadIpHeader: 2,
  /** TCP/UDP/ICMP header truncated or malformed. */
  BadTransport: 3,
  /** ICMP error whose embedded header is malformed. */
  BadIcmpError: 4,
  /** A non-first fragment that needs conntrack (no ports to match): not reassembled here. */
  SnatFragment: 5,
  /** Masquerade needed but the protocol has no ports/identifier (only TCP, UDP, ICMP echo). */
  SnatUnsupported: 6,
  /** Masquerade needed but no external CIDR of the packet's family is configured. */
  SnatNoAddress: 7,
  /** No free SNAT port towards the remote endpoint. */
  SnatPortsExhausted: 8,
  /** Packet (or ICMP error) for the SNAT address without a conntrack entry; an outbound RST of an unknown masqueraded flow. */
  NoConntrack: 9,
  /** Over the tunnel MTU and may not be fragmented, but no ICMP error is allowed (error about an error, bad source, no room). */
  TooBig: 10,
  /** Over the tunnel MTU; the ICMP error was suppressed by the rate limit. */
  TooBigRateLimited: 11,
} as const;
export type NatDropReason = (typeof NatDrop)[keyof typeof NatDrop];
export const NAT_DROP_MIN = 2;
/** Size of a drop counter array indexed by result code. */
export const NAT_RESULT_COUNT = 12;

const DROP_NAMES: readonly string[] = (() => {
  const names: string[] = ['forward', 'reply'];
  for (const [k, v] of Object.entries(NatDrop)) names[v] = k;
  return names;
})();

/** Name of a result code (NAT_FORWARD, NAT_REPLY or a NatDrop value). */
export function natResultName(code: number): string {
  return DROP_NAMES[code] ?? `unknown-${code}`;
}
