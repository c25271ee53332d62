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
 * caller rate-limits (ratelimit/token-bucket.ts).
 *
 * Also the in-place Fragmentation Needed / Packet Too Big replies the NAT's MTU check sends.
 *
 * Buffer contract: caller-owned `buf`; writes only buf[off - headroomNeeded, off + len). No
 * allocation.
 */
import {
  ICMP_CHECKSUM_OFFSET,
  ICMP_CODE_OFFSET,
  ICMP_HEADER_LEN,
  ICMP_NEXT_HOP_MTU_OFFSET,
  ICMP_TYPE_OFFSET,
  ICMPV4_CODE_FRAG_NEEDED,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV4_TIME_EXCEEDED,
  ICMPV6_MTU_OFFSET,
  ICMPV6_PACKET_TOO_BIG,
  ICMPV6_TIME_EXCEEDED,
  fillIcmpv4Checksum,
  fillIcmpv6Checksum,
  isIcmpv4Error,
  isIcmpv6Error,
} from './icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_FLAGS_FRAGMENT_OFFSET,
  IPV4_FRAGMENT_OFFSET_MASK,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_ICMP,
  IP_PROTO_ICMPV6,
  ipv4HeaderLen,
  ipv4TotalLength,
  writeIpv4Header,
} from './ipv4.js';
import {
  IPV6_DST_OFFSET,
  IPV6_HEADER_LEN,
  IPV6_MIN_MTU,
  IPV6_NEXT_HEADER_OFFSET,
  IPV6_SRC_OFFSET,
  ipv6PayloadLength,
  writeIpv6Header,
} from './ipv6.js';

/** RFC 1812 §4.3.2.3: an ICMPv4 error carries as much of the datagram as fits in 576 bytes. */
export const ICMPV4_ERROR_MAX_LEN = 576;
/** RFC 4443 §2.4(c): an ICMPv6 error must not exceed the IPv6 minimum MTU. */
export const ICMPV6_ERROR_MAX_LEN = IPV6_MIN_MTU;
/** RFC 792: an ICMPv4 error quotes the IP header and at least the first 64 bits of its data. */
export const ICMPV4_QUOTE_MIN_DATA = 8;
/** Default TTL / hop limit of generated packets. */
export const ICMP_ERROR_TTL = 64;

/** True when an IPv4 source may receive an ICMP error (RFC 1812 §4.3.2.7: not 0/8, 127/8, class D/E). */
export function ipv4SourceAcceptsError(buf: Uint8Array, srcOff: number): boolean {
  const a = buf[srcOff]!;
  return a !== 0 && a !== 127 && a < 224;
}

/** True when an IPv6 source may receive an ICMPv6 error (RFC 4443 §2.4(e): not ::, ::1, multicast). */
export function ipv6SourceAcceptsError(buf: Uint8Array, srcOff: number): boolean {
  if (buf[srcOff] === 0xff) return false;
  for (let i = 0; i < 15; i++) if (buf[srcOff + i] !== 0) return true;
  const last = buf[srcOff + 15]!;
  return last !== 0 && last !== 1;
}

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
    const frag =
      ((buf[off + IPV4_FLAGS_FRAGMENT_OFFSET]! << 8) | buf[off + IPV4_FLAGS_FRAGMENT_OFFSET + 1]!) &
      IPV4_FRAGMENT_OFFSET_MASK;
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
    writeIpv4Header(
      buf,
      start,
      src,
      0,
      buf,
      off + IPV4_SRC_OFFSET,
      IP_PROTO_ICMP,
      ICMP_HEADER_LEN + quote,
      ICMP_ERROR_TTL,
      0,
      false,
    );
    const icmp = start + IPV4_MIN_HEADER_LEN;
    writeIcmpHeader(buf, icmp, ICMPV4_TIME_EXCEEDED);
    fillIcmpv4Checksum(buf, icmp, ICMP_HEADER_LEN + quote);
    return TIME_EXCEEDED_V4_PREFIX + quote;
  }
  if (src.length !== 16) return ICMP_ERR_NOT_ALLOWED;
  const start = off - TIME_EXCEEDED_V6_PREFIX;
  if (start < 0) return ICMP_ERR_NO_HEADROOM;
  const quote = Math.min(
    len,
    IPV6_HEADER_LEN + ipv6PayloadLength(buf, off),
    ICMPV6_ERROR_MAX_LEN - TIME_EXCEEDED_V6_PREFIX,
  );
  writeIpv6Header(
    buf,
    start,
    src,
    0,
    buf,
    off + IPV6_SRC_OFFSET,
    IP_PROTO_ICMPV6,
    ICMP_HEADER_LEN + quote,
    ICMP_ERROR_TTL,
  );
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

/**
 * How many of the original's `len` bytes an error with `hdr` bytes of headers quotes: the error
 * at most `maxLen` bytes and within `room` (the buffer from the error's start). May be below
 * what the caller needs; the caller then gives up.
 */
function quoteLength(len: number, hdr: number, maxLen: number, room: number): number {
  const quote = len < maxLen - hdr ? len : maxLen - hdr;
  return hdr + quote > room ? room - hdr : quote;
}

/**
 * In place, replace the IPv4 packet at buf[off, off+len) (len = its total length) by an ICMP
 * Destination Unreachable, code 4 "fragmentation needed and DF set" (RFC 792; next-hop MTU per
 * RFC 1191 §4) addressed to the packet's source. The original's first bytes move 28 bytes up
 * (copyWithin has memmove semantics) and are quoted, up to 576 bytes in total (RFC 1812
 * §4.3.2.3), at least its header + 8 bytes (RFC 792). `src` is the error's source address; when
 * absent, the original destination is used. Returns the new total length, or 0 when the buffer
 * cannot hold the reply (the caller then drops).
 */
export function writeFragNeededV4(
  buf: Uint8Array,
  off: number,
  len: number,
  mtu: number,
  src: Uint8Array | undefined,
): number {
  const hdr = IPV4_MIN_HEADER_LEN + ICMP_HEADER_LEN;
  const quote = quoteLength(len, hdr, ICMPV4_ERROR_MAX_LEN, buf.length - off);
  const ihl = ipv4HeaderLen(buf, off);
  if (quote < ihl + ICMPV4_QUOTE_MIN_DATA) return 0;
  buf.copyWithin(off + hdr, off, off + quote);
  const q = off + hdr; // the quoted original header now starts here
  // From `src`, else from the original's destination.
  writeIpv4Header(
    buf,
    off,
    src ?? buf,
    src !== undefined ? 0 : q + IPV4_DST_OFFSET,
    buf,
    q + IPV4_SRC_OFFSET,
    IP_PROTO_ICMP,
    ICMP_HEADER_LEN + quote,
    ICMP_ERROR_TTL,
    0,
    false,
  );
  const icmp = off + IPV4_MIN_HEADER_LEN;
  buf[icmp + ICMP_TYPE_OFFSET] = ICMPV4_DEST_UNREACHABLE;
  buf[icmp + ICMP_CODE_OFFSET] = ICMPV4_CODE_FRAG_NEEDED;
  buf[icmp + ICMP_CHECKSUM_OFFSET] = 0;
  buf[icmp + ICMP_CHECKSUM_OFFSET + 1] = 0;
  buf[icmp + 4] = 0;
  buf[icmp + 5] = 0;
  buf[icmp + ICMP_NEXT_HOP_MTU_OFFSET] = (mtu >>> 8) & 0xff;
  buf[icmp + ICMP_NEXT_HOP_MTU_OFFSET + 1] = mtu & 0xff;
  fillIcmpv4Checksum(buf, icmp, ICMP_HEADER_LEN + quote);
  return hdr + quote;
}

/**
 * In place, replace the IPv6 packet at buf[off, off+len) by an ICMPv6 Packet Too Big (RFC 4443
 * §3.2) with MTU `mtu`, addressed to its source, quoting as much of the original as keeps the
 * reply within 1280 bytes (§2.4(c)). `src` as in writeFragNeededV4. Returns the new length or 0.
 */
export function writePacketTooBigV6(
  buf: Uint8Array,
  off: number,
  len: number,
  mtu: number,
  src: Uint8Array | undefined,
): number {
  const hdr = IPV6_HEADER_LEN + ICMP_HEADER_LEN;
  const quote = quoteLength(len, hdr, ICMPV6_ERROR_MAX_LEN, buf.length - off);
  if (quote < IPV6_HEADER_LEN) return 0;
  buf.copyWithin(off + hdr, off, off + quote);
  const q = off + hdr;
  // From `src`, else from the original's destination.
  writeIpv6Header(
    buf,
    off,
    src ?? buf,
    src !== undefined ? 0 : q + IPV6_DST_OFFSET,
    buf,
    q + IPV6_SRC_OFFSET,
    IP_PROTO_ICMPV6,
    ICMP_HEADER_LEN + quote,
    ICMP_ERROR_TTL,
  );
  const icmp = off + IPV6_HEADER_LEN;
  buf[icmp + ICMP_TYPE_OFFSET] = ICMPV6_PACKET_TOO_BIG;
  buf[icmp + ICMP_CODE_OFFSET] = 0;
  buf[icmp + ICMPV6_MTU_OFFSET] = (mtu >>> 24) & 0xff;
  buf[icmp + ICMPV6_MTU_OFFSET + 1] = (mtu >>> 16) & 0xff;
  buf[icmp + ICMPV6_MTU_OFFSET + 2] = (mtu >>> 8) & 0xff;
  buf[icmp + ICMPV6_MTU_OFFSET + 3] = mtu & 0xff;
  fillIcmpv6Checksum(buf, off, icmp, ICMP_HEADER_LEN + quote);
  return hdr + quote;
}
