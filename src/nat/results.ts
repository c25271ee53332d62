/** Result codes of the peer table's tunnel check (src/router/peer-table.ts): forward, reply, or a counted drop reason. */

/** The packet may go on: forward buf[off, off+len). */
export const NAT_FORWARD = 0;
/**
 * The packet must not be forwarded; buf[off, off + replyLength) now holds an ICMP error
 * (Fragmentation Needed / Packet Too Big) addressed to the packet's sender: send it back the way
 * the packet came.
 */
export const NAT_REPLY = 1;

/** Drop reasons (result codes ≥ NAT_DROP_MIN); each drop is counted in the peer table's `drops[code]`. */
export const NatDrop = {
  /** TCP/UDP/ICMP header truncated or malformed. */
  BadTransport: 2,
  /** ICMP error whose embedded header is malformed. */
  BadIcmpError: 3,
  /** Over the tunnel MTU and may not be fragmented, but no ICMP error is allowed (error about an error, bad source, no room). */
  TooBig: 4,
  /** Over the tunnel MTU; the ICMP error was suppressed by the rate limit. */
  TooBigRateLimited: 5,
} as const;
export type NatDropReason = (typeof NatDrop)[keyof typeof NatDrop];
export const NAT_DROP_MIN = 2;
/** Size of a drop counter array indexed by result code. */
export const NAT_RESULT_COUNT = 6;

const DROP_NAMES: readonly string[] = (() => {
  const names: string[] = ['forward', 'reply'];
  for (const [k, v] of Object.entries(NatDrop)) names[v] = k;
  return names;
})();

/** Name of a result code (NAT_FORWARD, NAT_REPLY or a NatDrop value). */
export function natResultName(code: number): string {
  return DROP_NAMES[code] ?? `unknown-${code}`;
}
