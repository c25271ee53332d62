/**
 * Path-MTU helpers for the tunnel: TCP MSS clamping. (The ICMP "Fragmentation Needed" / "Packet
 * Too Big" replies are built by packet/icmp-error.ts, rate-limited by ratelimit/token-bucket.ts.)
 */

import { TCP_CHECKSUM_OFFSET, tcpFindMssOption } from '../packet/tcp.js';
import { CSUM_ALWAYS, patchWord, read16, swap16, write16 } from './rewrite.js';

/** TCP MSS that fits a tunnel MTU: MTU − 20 (IPv4) − 20 (TCP) (RFC 9293 §3.7.1). */
export const MSS_OVERHEAD_V4 = 40;
/** MTU − 40 (IPv6) − 20 (TCP) (RFC 9293 §3.7.1, RFC 8200 §8.3). */
export const MSS_OVERHEAD_V6 = 60;

/**
 * Clamp the MSS option of the TCP header at buf[tcpOff] (tcpLen valid bytes) to `mss`, patching
 * the TCP checksum incrementally. Returns true when the segment was changed.
 *
 * A SYN without an MSS option is left alone: the receiver then assumes 536 (IPv4) / 1220 (IPv6)
 * bytes (RFC 9293 §3.7.1, RFC 8200 §8.3), which fits any tunnel MTU we accept. The option may sit
 * at an odd offset (after a single NOP); its bytes then straddle two checksum words and
 * contribute byte-swapped to the one's-complement sum, hence swap16 there.
 */
export function clampMss(buf: Uint8Array, tcpOff: number, tcpLen: number, mss: number): boolean {
  const o = tcpFindMssOption(buf, tcpOff, tcpLen);
  if (o < 0) return false;
  const cur = read16(buf, o);
  if (cur <= mss) return false;
  const csumOff = tcpOff + TCP_CHECKSUM_OFFSET;
  if (((o - tcpOff) & 1) === 0) patchWord(buf, csumOff, CSUM_ALWAYS, cur, mss);
  else patchWord(buf, csumOff, CSUM_ALWAYS, swap16(cur), swap16(mss));
  write16(buf, o, mss);
  return true;
}
