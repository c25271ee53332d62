/**
 * IPv6 header view (RFC 8200 §3) and extension-header walking (§4).
 *
 * Contract: callers check presence of the 40 fixed bytes (ipv6HeaderValid) before reading
 * fields. Nothing here allocates or retains the buffer.
 */

import { finishChecksum, pseudoHeaderSumV6, sumWords, writeChecksum } from './checksum.js';
import { IP_PROTO_HOPOPTS, IP_PROTO_IPV6_FRAG, IP_PROTO_IPV6_OPTS, IP_PROTO_IPV6_ROUTE } from './ipv4.js';

export const IPV6_VERSION_CLASS_FLOW_OFFSET = 0;
export const IPV6_PAYLOAD_LENGTH_OFFSET = 4;
export const IPV6_NEXT_HEADER_OFFSET = 6;
export const IPV6_HOP_LIMIT_OFFSET = 7;
export const IPV6_SRC_OFFSET = 8;
export const IPV6_DST_OFFSET = 24;
export const IPV6_HEADER_LEN = 40;
/** RFC 8200 §5: every IPv6 link carries at least 1280-byte packets. */
export const IPV6_MIN_MTU = 1280;

/** Fragment header (RFC 8200 §4.5) layout, relative to the extension header start. */
export const IPV6_FRAG_HEADER_LEN = 8;
export const IPV6_FRAG_OFFSET_FIELD = 2;
export const IPV6_FRAG_MF = 0x0001;
export const IPV6_FRAG_OFFSET_MASK = 0xfff8;

export function ipv6TrafficClass(buf: Uint8Array, off: number): number {
  return ((buf[off]! & 0x0f) << 4) | (buf[off + 1]! >>> 4);
}

export function ipv6FlowLabel(buf: Uint8Array, off: number): number {
  return ((buf[off + 1]! & 0x0f) << 16) | (buf[off + 2]! << 8) | buf[off + 3]!;
}

export function ipv6PayloadLength(buf: Uint8Array, off: number): number {
  return (buf[off + IPV6_PAYLOAD_LENGTH_OFFSET]! << 8) | buf[off + IPV6_PAYLOAD_LENGTH_OFFSET + 1]!;
}

export function setIpv6PayloadLength(buf: Uint8Array, off: number, v: number): void {
  buf[off + IPV6_PAYLOAD_LENGTH_OFFSET] = (v >>> 8) & 0xff;
  buf[off + IPV6_PAYLOAD_LENGTH_OFFSET + 1] = v & 0xff;
}

export function ipv6NextHeader(buf: Uint8Array, off: number): number {
  return buf[off + IPV6_NEXT_HEADER_OFFSET]!;
}

export function ipv6HopLimit(buf: Uint8Array, off: number): number {
  return buf[off + IPV6_HOP_LIMIT_OFFSET]!;
}

export function setIpv6HopLimit(buf: Uint8Array, off: number, v: number): void {
  buf[off + IPV6_HOP_LIMIT_OFFSET] = v & 0xff;
}

/**
 * Structural validation: version 6, 40 header bytes present within `len`, and
 * 40 + payload length ≤ len (a jumbogram's zero payload length is rejected: RFC 2675 is not
 * supported). Never throws on bad input.
 */
export function ipv6HeaderValid(buf: Uint8Array, off: number, len: number): boolean {
  if (len < IPV6_HEADER_LEN || off < 0 || off + len > buf.length) return false;
  if (buf[off]! >>> 4 !== 6) return false;
  const pl = ipv6PayloadLength(buf, off);
  return IPV6_HEADER_LEN + pl <= len;
}

/** True for the extension headers ipv6TransportOffset knows how to skip. */
export function isIpv6ExtensionHeader(nh: number): boolean {
  return (
    nh === IP_PROTO_HOPOPTS || nh === IP_PROTO_IPV6_ROUTE || nh === IP_PROTO_IPV6_FRAG || nh === IP_PROTO_IPV6_OPTS
  );
}

/** Result of ipv6TransportOffset when the chain is malformed or truncated. */
export const IPV6_CHAIN_INVALID = -1;

/**
 * Walk the extension-header chain (RFC 8200 §4) of the IPv6 packet at buf[off] with `len`
 * valid bytes, skipping Hop-by-Hop, Routing, Fragment and Destination Options headers.
 * Returns `transportOffset * 256 + protocol` (absolute offset into buf and the upper-layer
 * protocol number), packed into one number to avoid allocating a result; decode with
 * `>>> 8` / `& 0xff` or the two helpers below. Returns IPV6_CHAIN_INVALID when a header is
 * truncated. A non-first fragment is reported as protocol IP_PROTO_IPV6_FRAG with the offset of
 * the fragment header, since its payload is not a transport header.
 */
export function ipv6TransportOffset(buf: Uint8Array, off: number, len: number): number {
  const end = off + len;
  let nh = buf[off + IPV6_NEXT_HEADER_OFFSET]!;
  let p = off + IPV6_HEADER_LEN;
  // Bounded: each step advances by ≥ 8 bytes; also cap the number of headers.
  for (let guard = 0; guard < 16 && isIpv6ExtensionHeader(nh); guard++) {
    if (p + 8 > end) return IPV6_CHAIN_INVALID;
    if (nh === IP_PROTO_IPV6_FRAG) {
      const fo = (buf[p + IPV6_FRAG_OFFSET_FIELD]! << 8) | buf[p + IPV6_FRAG_OFFSET_FIELD + 1]!;
      if ((fo & IPV6_FRAG_OFFSET_MASK) !== 0) return p * 256 + IP_PROTO_IPV6_FRAG;
      nh = buf[p]!;
      p += IPV6_FRAG_HEADER_LEN;
      continue;
    }
    const hlen = (buf[p + 1]! + 1) << 3;
    nh = buf[p]!;
    p += hlen;
  }
  if (isIpv6ExtensionHeader(nh) || p > end) return IPV6_CHAIN_INVALID;
  return p * 256 + nh;
}

/** Decode the offset part of an ipv6TransportOffset result. */
export function chainOffset(packed: number): number {
  return Math.floor(packed / 256);
}

/** Decode the protocol part of an ipv6TransportOffset result. */
export function chainProtocol(packed: number): number {
  return packed & 0xff;
}

/**
 * Ones'-complement sum of the upper-layer packet buf[l4Off, l4Off+l4Len) (TCP, UDP, ICMPv6) plus
 * its IPv6 pseudo header (RFC 8200 §8.1), the addresses read from the IPv6 header at buf[ipOff].
 * finishChecksum() of it is the value to store (computed with the checksum field zeroed), or 0
 * when a received packet verifies.
 */
export function ipv6TransportSum(
  buf: Uint8Array,
  ipOff: number,
  nextHeader: number,
  l4Off: number,
  l4Len: number,
): number {
  const pseudo = pseudoHeaderSumV6(buf, ipOff + IPV6_SRC_OFFSET, ipOff + IPV6_DST_OFFSET, nextHeader, l4Len);
  return sumWords(buf, l4Off, l4Len, pseudo);
}

/**
 * Stores the transport checksum of buf[l4Off, +l4Len) (ipv6TransportSum, finished) at
 * buf[csumOff], the field zeroed first: for the checksums whose computed 0 is sent as is (TCP,
 * ICMPv6; UDP sends 0xffff instead).
 */
export function fillIpv6TransportChecksum(
  buf: Uint8Array,
  ipOff: number,
  nextHeader: number,
  l4Off: number,
  l4Len: number,
  csumOff: number,
): void {
  writeChecksum(buf, csumOff, 0);
  writeChecksum(buf, csumOff, finishChecksum(ipv6TransportSum(buf, ipOff, nextHeader, l4Off, l4Len)));
}

/**
 * Write a 40-byte IPv6 header at buf[off] for `payloadLen` bytes of `nextHeader` that follow.
 * src/dst are 16-byte addresses at srcBuf[srcOff], dstBuf[dstOff]. Returns 40.
 */
export function writeIpv6Header(
  buf: Uint8Array,
  off: number,
  srcBuf: Uint8Array,
  srcOff: number,
  dstBuf: Uint8Array,
  dstOff: number,
  nextHeader: number,
  payloadLen: number,
  hopLimit = 64,
  trafficClass = 0,
  flowLabel = 0,
): number {
  if (payloadLen > 0xffff || payloadLen < 0)
    throw new RangeError(`IPv6 payload length ${payloadLen} is not in 0..65535`);
  if (off < 0 || off + IPV6_HEADER_LEN > buf.length) throw new RangeError('IPv6 header does not fit in the buffer');
  buf[off] = 0x60 | ((trafficClass >>> 4) & 0x0f);
  buf[off + 1] = ((trafficClass & 0x0f) << 4) | ((flowLabel >>> 16) & 0x0f);
  buf[off + 2] = (flowLabel >>> 8) & 0xff;
  buf[off + 3] = flowLabel & 0xff;
  buf[off + IPV6_PAYLOAD_LENGTH_OFFSET] = payloadLen >>> 8;
  buf[off + IPV6_PAYLOAD_LENGTH_OFFSET + 1] = payloadLen & 0xff;
  buf[off + IPV6_NEXT_HEADER_OFFSET] = nextHeader & 0xff;
  buf[off + IPV6_HOP_LIMIT_OFFSET] = hopLimit & 0xff;
  for (let i = 0; i < 16; i++) {
    buf[off + IPV6_SRC_OFFSET + i] = srcBuf[srcOff + i]!;
    buf[off + IPV6_DST_OFFSET + i] = dstBuf[dstOff + i]!;
  }
  return IPV6_HEADER_LEN;
}

/**
 * Whether buf[off, off+len) is IPv6 link-local traffic the kernel itself sends on any IPv6
 * interface — router solicitations, MLD reports, neighbour discovery, DAD — i.e. a destination
 * of link-local scope (fe80::/10, or multicast ffX2::/16 such as ff02::2, ff02::16,
 * ff02::1:ffXX:XXXX) or a link-local source (fe80::/10). Such a packet never leaves the link, so a
 * fabric device that receives it has nothing to route; it is counted apart, not as a drop.
 */
export function isIpv6LinkLocalControl(buf: Uint8Array, off: number, len: number): boolean {
  if (len < IPV6_HEADER_LEN || buf[off]! >> 4 !== 6) return false;
  const d = off + IPV6_DST_OFFSET;
  const s = off + IPV6_SRC_OFFSET;
  if (buf[d] === 0xff) return (buf[d + 1]! & 0x0f) === 0x02;
  return (buf[d] === 0xfe && (buf[d + 1]! & 0xc0) === 0x80) || (buf[s] === 0xfe && (buf[s + 1]! & 0xc0) === 0x80);
}
