/**
 * ICMP Time Exceeded (RFC 792 type 11 code 0; RFC 4443 §3.3 type 3 code 0) built IN FRONT of the
 * expired packet, in the headroom of its buffer: the original packet is already where an ICMP
 * error quotes it (right after the ICMP header), so nothing is copied — the router writes a new
 * IP header and an 8-byte ICMP header before it and truncates the quote.
 *
 * Quote sizes: IPv4 errors carry as much of the datagram as fits in 576 bytes (RFC 1812
 * §4.3.2.3, at least the header + 8 bytes that RFC 792 requires); ICMPv6 errors stay within
 * 1280 bytes (RFC 4443 §2.4(c)). No error is sent about an ICMP error, a non-first IPv4
 * fragment, or to a source that cannot receive one (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)); the
 * caller rate-limits (nat/pmtu.ts TokenBucket).
 *
 * Buffer contract: caller-owned `buf`; writes only buf[off - headroomNeeded, off + len). No
 * allocation.
 */
import {
  ICMP_CHECKSUM_OFFSET, ICMP_CODE_OFFSET, ICMP_HEADER_LEN, ICMP_TYPE_OFFSET, ICMPV4_TIME_EXCEEDED, ICMPV6_TIME_EXCEEDED,
  fillIcmpv4Checksum, fillIcmpv6Checksum, isIcmpv4Error, isIcmpv6Error,
} from '../packet/icmp.js';
import {
  IPV4_FLAGS_FRAGMENT_OFFSET, IPV4_FRAGMENT_OFFSET_MASK, IPV4_MIN_HEADER_LEN, IPV4_PROTOCOL_OFFSET, IPV4_SRC_OFFSET, IP_PROTO_ICMP,
  IP_PROTO_ICMPV6, ipv4HeaderLen, ipv4TotalLength, writeIpv4Header,
} from '../packet/ipv4.js';
import { IPV6_HEADER_LEN, IPV6_NEXT_HEADER_OFFSET, IPV6_SRC_OFFSET, ipv6PayloadLength, writeIpv6Header } from '../packet/ipv6.js';
import { ICMPV4_ERROR_MAX_LEN, ICMPV6_ERROR_MAX_LEN, ICMP_ERROR_TTL, ipv4SourceAcceptsError, ipv6SourceAcceptsError } from '../nat/pmtu.js';

/** Bytes written in front of an IPv4 packet: new IPv4 header + ICMP header. */
export const TIME_EXCEEDED_V4_PREFIX = IPV4_MIN_HEADER_LEN + ICMP_HEADER_LEN;
/** Bytes written in front of an IPv6 packet: new IPv6 header + ICMPv6 header. */
export const TIME_EXCEEDED_V6_PREFIX = IPV6_HEADER_LEN + ICMP_HEADER_LEN;

/** Result codes of writeTimeExceeded (≤ 0: no error may be sent). */
export const ICMP_ERR_NOT_ALLOWED = 0;
export const ICMP_ERR_NO_HEADROOM = -1;

/**
 * Whether an error about the packet at buf[off, off+len) may be generated at all: not about
 * an ICMP error (or an ICMPv6 error), not about a non-first IPv4 fragment, not to an
 * unspecified/loopback/multicast source. The packet is assumed structurally valid.
 */
export function errorAllowed(buf: Uint8Array, off: number, len: number): boolean {
  const v = buf[off]! >>> 4;
  if (v === 4) {
    if (len < IPV4_MIN_HEADER_LEN) return false;
    const hl = ipv4HeaderLen(buf, off);
    const frag = ((buf[off + IPV4_FLAGS_FRAGMENT_OFFSET]! << 8) | buf[off + IPV4_FLAGS_FRAGMENT_OFFSET + 1]!) & IPV4_FRAGMENT_OFFSET_MASK;
    if (frag !== 0) return false;
    if (buf[off + IPV4_PROTOCOL_OFFSET] === IP_PROTO_ICMP) {
      if (len < hl + 1 || isIcmpv4Error(buf[off + hl]!)) return false;
    }
    return ipv4SourceAcceptsError(buf, off + IPV4_SRC_OFFSET);
  }
  if (v === 6) {
    if (len < IPV6_HEADER_LEN) return false;
    // Extension headers before ICMPv6 are rare on this path; only the direct case is checked.
    if (buf[off + IPV6_NEXT_HEADER_OFFSET] === IP_PROTO_ICMPV6) {
      if (len < IPV6_HEADER_LEN + 1 || isIcmpv6Error(buf[off + IPV6_HEADER_LEN]!)) return false;
    }
    return ipv6SourceAcceptsError(buf, off + IPV6_SRC_OFFSET);
  }
  return false;
}

/**
 * Writes a Time Exceeded error about the packet at buf[off, off+len) in front of it, from
 * `src` (4 or 16 bytes) to the packet's source. Returns the error's length; it starts at
 * off − TIME_EXCEEDED_V4_PREFIX (IPv4) or off − TIME_EXCEEDED_V6_PREFIX (IPv6). Returns
 * ICMP_ERR_NOT_ALLOWED (see errorAllowed) or ICMP_ERR_NO_HEADROOM when off is too small.
 */
export function writeTimeExceeded(buf: Uint8Array, off: number, len: number, src: Uint8Array): number {
  if (!errorAllowed(buf, off, len)) return ICMP_ERR_NOT_ALLOWED;
  const v = buf[off]! >>> 4;
  if (v === 4) {
    if (src.length !== 4) return ICMP_ERR_NOT_ALLOWED;
    const start = off - TIME_EXCEEDED_V4_PREFIX;
    if (start < 0) return ICMP_ERR_NO_HEADROOM;
    let quote = Math.min(len, ipv4TotalLength(buf, off), ICMPV4_ERROR_MAX_LEN - TIME_EXCEEDED_V4_PREFIX);
    if (quote < ipv4HeaderLen(buf, off)) quote = Math.min(len, ipv4HeaderLen(buf, off));
    writeIpv4Header(buf, start, src, 0, buf, off + IPV4_SRC_OFFSET, IP_PROTO_ICMP, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL, 0, false);
    const icmp = start + IPV4_MIN_HEADER_LEN;
    writeIcmpHeader(buf, icmp, ICMPV4_TIME_EXCEEDED);
    fillIcmpv4Checksum(buf, icmp, ICMP_HEADER_LEN + quote);
    return TIME_EXCEEDED_V4_PREFIX + quote;
  }
  if (src.length !== 16) return ICMP_ERR_NOT_ALLOWED;
  const start = off - TIME_EXCEEDED_V6_PREFIX;
  if (start < 0) return ICMP_ERR_NO_HEADROOM;
  const quote = Math.min(len, IPV6_HEADER_LEN + ipv6PayloadLength(buf, off), ICMPV6_ERROR_MAX_LEN - TIME_EXCEEDED_V6_PREFIX);
  writeIpv6Header(buf, start, src, 0, buf, off + IPV6_SRC_OFFSET, IP_PROTO_ICMPV6, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL);
  const icmp = start + IPV6_HEADER_LEN;
  writeIcmpHeader(buf, icmp, ICMPV6_TIME_EXCEEDED);
  fillIcmpv6Checksum(buf, start, icmp, ICMP_HEADER_LEN + quote);
  return TIME_EXCEEDED_V6_PREFIX + quote;
}

/** Type, code 0 ("hop limit / TTL exceeded in transit"), zero checksum and unused word. */
function writeIcmpHeader(buf: Uint8Array, icmp: number, type: number): void {
  buf[icmp + ICMP_TYPE_OFFSET] = type;
  buf[icmp + ICMP_CODE_OFFSET] = 0;
  buf[icmp + ICMP_CHECKSUM_OFFSET] = 0;
  buf[icmp + ICMP_CHECKSUM_OFFSET + 1] = 0;
  buf[icmp + 4] = 0;
  buf[icmp + 5] = 0;
  buf[icmp + 6] = 0;
  buf[icmp + 7] = 0;
}
