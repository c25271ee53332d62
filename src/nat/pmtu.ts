/**
 * Path-MTU helpers for the tunnel: TCP MSS clamping, the ICMP "Fragmentation Needed" (IPv4) /
 * "Packet Too Big" (IPv6) reply built in place of an oversized packet, and the token bucket that
 * rate-limits those replies. No clock: time is the `now` (ms) the caller passes.
 */

import { IPV4_DST_OFFSET, IPV4_MIN_HEADER_LEN, IPV4_SRC_OFFSET, IP_PROTO_ICMP, IP_PROTO_ICMPV6, ipv4HeaderLen, writeIpv4Header } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN, IPV6_MIN_MTU, IPV6_SRC_OFFSET, writeIpv6Header } from '../packet/ipv6.js';
import {
  ICMP_CHECKSUM_OFFSET,
  ICMP_CODE_OFFSET,
  ICMP_HEADER_LEN,
  ICMP_NEXT_HOP_MTU_OFFSET,
  ICMP_TYPE_OFFSET,
  ICMPV4_CODE_FRAG_NEEDED,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV6_MTU_OFFSET,
  ICMPV6_PACKET_TOO_BIG,
  fillIcmpv4Checksum,
  fillIcmpv6Checksum,
} from '../packet/icmp.js';
import { TCP_CHECKSUM_OFFSET, tcpFindMssOption } from '../packet/tcp.js';
import { CSUM_ALWAYS, patchWord, read16, swap16, write16 } from './rewrite.js';

/** TCP MSS that fits a tunnel MTU: MTU − 20 (IPv4) − 20 (TCP) (RFC 9293 §3.7.1). */
export const MSS_OVERHEAD_V4 = 40;
/** MTU − 40 (IPv6) − 20 (TCP) (RFC 9293 §3.7.1, RFC 8200 §8.3). */
export const MSS_OVERHEAD_V6 = 60;
/** RFC 1812 §4.3.2.3: an ICMPv4 error carries as much of the datagram as fits in 576 bytes. */
export const ICMPV4_ERROR_MAX_LEN = 576;
/** RFC 4443 §2.4(c): an ICMPv6 error must not exceed the IPv6 minimum MTU. */
export const ICMPV6_ERROR_MAX_LEN = IPV6_MIN_MTU;
/** RFC 792: an ICMPv4 error quotes the IP header and at least the first 64 bits of its data. */
const ICMPV4_QUOTE_MIN_DATA = 8;
/** Default TTL / hop limit of generated packets. */
export const ICMP_ERROR_TTL = 64;

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

/** Token bucket: `ratePerSecond` tokens per second up to `burst`; starts full. */
export class TokenBucket {
  private tokens: number;
  private last = Number.NaN;

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
  ) {
    if (!(ratePerSecond >= 0) || !(burst >= 1)) throw new RangeError(`token bucket needs rate ≥ 0 and burst ≥ 1, got ${ratePerSecond}/${burst}`);
    this.tokens = burst;
  }

  /** Take one token at time `now` (ms). False when the bucket is empty. */
  take(now: number): boolean {
    if (this.last !== this.last) this.last = now; // NaN: first use
    const elapsed = now - this.last;
    if (elapsed > 0) {
      const t = this.tokens + (elapsed * this.ratePerSecond) / 1000;
      this.tokens = t < this.burst ? t : this.burst;
      this.last = now;
    } else if (elapsed < 0) {
      this.last = now; // the caller's clock went back: restart refilling from here
    }
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }
}

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

/**
 * In place, replace the IPv4 packet at buf[off, off+len) (len = its total length) by an ICMP
 * Destination Unreachable, code 4 "fragmentation needed and DF set" (RFC 792; next-hop MTU per
 * RFC 1191 §4) addressed to the packet's source. The original's first bytes move 28 bytes up
 * (copyWithin has memmove semantics) and are quoted, up to 576 bytes in total (RFC 1812
 * §4.3.2.3), at least its header + 8 bytes (RFC 792). `src` is the error's source address; when
 * absent, the original destination is used. Returns the new total length, or 0 when the buffer
 * cannot hold the reply (the caller then drops).
 */
export function writeFragNeededV4(buf: Uint8Array, off: number, len: number, mtu: number, src: Uint8Array | undefined): number {
  const hdr = IPV4_MIN_HEADER_LEN + ICMP_HEADER_LEN;
  let quote = len < ICMPV4_ERROR_MAX_LEN - hdr ? len : ICMPV4_ERROR_MAX_LEN - hdr;
  if (off + hdr + quote > buf.length) quote = buf.length - off - hdr;
  const ihl = ipv4HeaderLen(buf, off);
  if (quote < ihl + ICMPV4_QUOTE_MIN_DATA) return 0;
  buf.copyWithin(off + hdr, off, off + quote);
  const q = off + hdr; // the quoted original header now starts here
  if (src !== undefined) writeIpv4Header(buf, off, src, 0, buf, q + IPV4_SRC_OFFSET, IP_PROTO_ICMP, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL, 0, false);
  else writeIpv4Header(buf, off, buf, q + IPV4_DST_OFFSET, buf, q + IPV4_SRC_OFFSET, IP_PROTO_ICMP, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL, 0, false);
  const icmp = off + IPV4_MIN_HEADER_LEN;
  buf[icmp + ICMP_TYPE_OFFSET] = ICMPV4_DEST_UNREACHABLE;
  buf[icmp + ICMP_CODE_OFFSET] = ICMPV4_CODE_FRAG_NEEDED;
  buf[icmp + ICMP_CHECKSUM_OFFSET] = 0;
  buf[icmp + ICMP_CHECKSUM_OFFSET + 1] = 0;
  buf[icmp + 4] = 0;
  buf[icmp + 5] = 0;
  write16(buf, icmp + ICMP_NEXT_HOP_MTU_OFFSET, mtu);
  fillIcmpv4Checksum(buf, icmp, ICMP_HEADER_LEN + quote);
  return hdr + quote;
}

/**
 * In place, replace the IPv6 packet at buf[off, off+len) by an ICMPv6 Packet Too Big (RFC 4443
 * §3.2) with MTU `mtu`, addressed to its source, quoting as much of the original as keeps the
 * reply within 1280 bytes (§2.4(c)). `src` as in writeFragNeededV4. Returns the new length or 0.
 */
export function writePacketTooBigV6(buf: Uint8Array, off: number, len: number, mtu: number, src: Uint8Array | undefined): number {
  const hdr = IPV6_HEADER_LEN + ICMP_HEADER_LEN;
  let quote = len < ICMPV6_ERROR_MAX_LEN - hdr ? len : ICMPV6_ERROR_MAX_LEN - hdr;
  if (off + hdr + quote > buf.length) quote = buf.length - off - hdr;
  if (quote < IPV6_HEADER_LEN) return 0;
  buf.copyWithin(off + hdr, off, off + quote);
  const q = off + hdr;
  if (src !== undefined) writeIpv6Header(buf, off, src, 0, buf, q + IPV6_SRC_OFFSET, IP_PROTO_ICMPV6, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL);
  else writeIpv6Header(buf, off, buf, q + IPV6_DST_OFFSET, buf, q + IPV6_SRC_OFFSET, IP_PROTO_ICMPV6, ICMP_HEADER_LEN + quote, ICMP_ERROR_TTL);
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
