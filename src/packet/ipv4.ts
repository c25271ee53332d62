/**
 * IPv4 header view (RFC 791): named offsets and plain functions over (buf, off).
 *
 * Contract for all readers/writers: the caller has checked that the header bytes are present
 * (e.g. with ipv4HeaderValid); nothing here allocates or retains the buffer.
 */

import {
  checksumUpdate16,
  checksumVerifies,
  finishChecksum,
  internetChecksum,
  pseudoHeaderSumV4,
  sumWords,
  writeChecksum,
} from './checksum.js';

export const IPV4_VERSION_IHL_OFFSET = 0;
export const IPV4_TOS_OFFSET = 1;
export const IPV4_TOTAL_LENGTH_OFFSET = 2;
export const IPV4_ID_OFFSET = 4;
export const IPV4_FLAGS_FRAGMENT_OFFSET = 6;
export const IPV4_TTL_OFFSET = 8;
export const IPV4_PROTOCOL_OFFSET = 9;
export const IPV4_CHECKSUM_OFFSET = 10;
export const IPV4_SRC_OFFSET = 12;
export const IPV4_DST_OFFSET = 16;
export const IPV4_MIN_HEADER_LEN = 20;
export const IPV4_MAX_HEADER_LEN = 60;
export const IPV4_MAX_TOTAL_LENGTH = 65535;

/** Flag bits in the 16-bit flags/fragment-offset word (RFC 791 §3.1). */
export const IPV4_FLAG_DF = 0x4000;
export const IPV4_FLAG_MF = 0x2000;
export const IPV4_FRAGMENT_OFFSET_MASK = 0x1fff;

/** IANA protocol numbers used across the project. */
export const IP_PROTO_ICMP = 1;
export const IP_PROTO_TCP = 6;
export const IP_PROTO_UDP = 17;
export const IP_PROTO_IPV6_ROUTE = 43;
export const IP_PROTO_IPV6_FRAG = 44;
export const IP_PROTO_ICMPV6 = 58;
export const IP_PROTO_IPV6_NONXT = 59;
export const IP_PROTO_IPV6_OPTS = 60;
export const IP_PROTO_HOPOPTS = 0;

/** The IP version nibble of the packet at buf[off] (4, 6, or whatever garbage is there). */
export function ipVersion(buf: Uint8Array, off: number): number {
  return buf[off]! >>> 4;
}

/** Header length in bytes (IHL × 4). */
export function ipv4HeaderLen(buf: Uint8Array, off: number): number {
  return (buf[off]! & 0x0f) << 2;
}

export function ipv4Tos(buf: Uint8Array, off: number): number {
  return buf[off + IPV4_TOS_OFFSET]!;
}

export function ipv4TotalLength(buf: Uint8Array, off: number): number {
  return (buf[off + IPV4_TOTAL_LENGTH_OFFSET]! << 8) | buf[off + IPV4_TOTAL_LENGTH_OFFSET + 1]!;
}

export function setIpv4TotalLength(buf: Uint8Array, off: number, v: number): void {
  buf[off + IPV4_TOTAL_LENGTH_OFFSET] = (v >>> 8) & 0xff;
  buf[off + IPV4_TOTAL_LENGTH_OFFSET + 1] = v & 0xff;
}

export function ipv4Identification(buf: Uint8Array, off: number): number {
  return (buf[off + IPV4_ID_OFFSET]! << 8) | buf[off + IPV4_ID_OFFSET + 1]!;
}

/** The raw 16-bit flags + fragment offset word. */
export function ipv4FlagsFragment(buf: Uint8Array, off: number): number {
  return (buf[off + IPV4_FLAGS_FRAGMENT_OFFSET]! << 8) | buf[off + IPV4_FLAGS_FRAGMENT_OFFSET + 1]!;
}

export function ipv4DontFragment(buf: Uint8Array, off: number): boolean {
  return (ipv4FlagsFragment(buf, off) & IPV4_FLAG_DF) !== 0;
}

export function ipv4MoreFragments(buf: Uint8Array, off: number): boolean {
  return (ipv4FlagsFragment(buf, off) & IPV4_FLAG_MF) !== 0;
}

/** Fragment offset in bytes (the field counts 8-byte units). */
export function ipv4FragmentOffset(buf: Uint8Array, off: number): number {
  return (ipv4FlagsFragment(buf, off) & IPV4_FRAGMENT_OFFSET_MASK) << 3;
}

/** True for any fragment (first, middle or last): MF set or non-zero offset. */
export function ipv4IsFragment(buf: Uint8Array, off: number): boolean {
  return (ipv4FlagsFragment(buf, off) & (IPV4_FLAG_MF | IPV4_FRAGMENT_OFFSET_MASK)) !== 0;
}

export function ipv4Ttl(buf: Uint8Array, off: number): number {
  return buf[off + IPV4_TTL_OFFSET]!;
}

export function setIpv4Ttl(buf: Uint8Array, off: number, v: number): void {
  buf[off + IPV4_TTL_OFFSET] = v & 0xff;
}

export function ipv4Protocol(buf: Uint8Array, off: number): number {
  return buf[off + IPV4_PROTOCOL_OFFSET]!;
}

export function ipv4Checksum(buf: Uint8Array, off: number): number {
  return (buf[off + IPV4_CHECKSUM_OFFSET]! << 8) | buf[off + IPV4_CHECKSUM_OFFSET + 1]!;
}

/** Recompute and store the header checksum over IHL×4 bytes. */
export function fillIpv4Checksum(buf: Uint8Array, off: number): void {
  buf[off + IPV4_CHECKSUM_OFFSET] = 0;
  buf[off + IPV4_CHECKSUM_OFFSET + 1] = 0;
  writeChecksum(buf, off + IPV4_CHECKSUM_OFFSET, internetChecksum(buf, off, ipv4HeaderLen(buf, off)));
}

/**
 * Decrement TTL by one and patch the header checksum incrementally (RFC 1624; the TTL is the
 * high byte of the TTL/protocol word). Returns the new TTL.
 * The caller drops (and may answer with ICMP Time Exceeded) when the TTL was ≤ 1 beforehand.
 */
export function decrementIpv4Ttl(buf: Uint8Array, off: number): number {
  const old = buf[off + IPV4_TTL_OFFSET]!;
  if (old === 0) throw new RangeError('decrementIpv4Ttl: TTL is already 0 (check before forwarding)');
  const ttl = old - 1;
  buf[off + IPV4_TTL_OFFSET] = ttl;
  const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
  writeChecksum(
    buf,
    off + IPV4_CHECKSUM_OFFSET,
    checksumUpdate16(ipv4Checksum(buf, off), (old << 8) | proto, (ttl << 8) | proto),
  );
  return ttl;
}

/**
 * Cheap structural validation of the IPv4 header at buf[off] with `len` bytes available from off:
 * version 4, IHL ≥ 5, header within len, IHL×4 ≤ total length ≤ len, and a correct header
 * checksum. Returns false for any bad network input (never throws).
 */
export function ipv4HeaderValid(buf: Uint8Array, off: number, len: number): boolean {
  if (len < IPV4_MIN_HEADER_LEN || off < 0 || off + len > buf.length) return false;
  const vihl = buf[off]!;
  if (vihl >>> 4 !== 4) return false;
  const hl = (vihl & 0x0f) << 2;
  if (hl < IPV4_MIN_HEADER_LEN || hl > len) return false;
  const total = ipv4TotalLength(buf, off);
  if (total < hl || total > len) return false;
  return checksumVerifies(buf, off, hl);
}

/**
 * Ones'-complement sum of the transport segment buf[l4Off, l4Off+l4Len) (TCP, UDP) plus its IPv4
 * pseudo header (RFC 768, RFC 9293 §3.1), the addresses read from the IPv4 header at buf[ipOff].
 * finishChecksum() of it is the value to store (computed with the checksum field zeroed), or 0
 * when a received segment verifies.
 */
export function ipv4TransportSum(
  buf: Uint8Array,
  ipOff: number,
  protocol: number,
  l4Off: number,
  l4Len: number,
): number {
  const pseudo = pseudoHeaderSumV4(buf, ipOff + IPV4_SRC_OFFSET, ipOff + IPV4_DST_OFFSET, protocol, l4Len);
  return sumWords(buf, l4Off, l4Len, pseudo);
}

/**
 * Stores the transport checksum of buf[l4Off, +l4Len) (ipv4TransportSum, finished) at
 * buf[csumOff], the field zeroed first: for the checksums whose computed 0 is sent as is (TCP,
 * ICMPv6; UDP sends 0xffff instead).
 */
export function fillIpv4TransportChecksum(
  buf: Uint8Array,
  ipOff: number,
  protocol: number,
  l4Off: number,
  l4Len: number,
  csumOff: number,
): void {
  writeChecksum(buf, csumOff, 0);
  writeChecksum(buf, csumOff, finishChecksum(ipv4TransportSum(buf, ipOff, protocol, l4Off, l4Len)));
}

/**
 * Write a 20-byte IPv4 header (no options) at buf[off], followed by `payloadLen` bytes that the
 * caller places at off+20. src/dst are 4-byte addresses read from srcBuf[srcOff], dstBuf[dstOff].
 * The header checksum is filled. Returns the header length (20). Throws RangeError on misuse.
 */
export function writeIpv4Header(
  buf: Uint8Array,
  off: number,
  srcBuf: Uint8Array,
  srcOff: number,
  dstBuf: Uint8Array,
  dstOff: number,
  protocol: number,
  payloadLen: number,
  ttl = 64,
  identification = 0,
  dontFragment = true,
  tos = 0,
): number {
  const total = IPV4_MIN_HEADER_LEN + payloadLen;
  if (total > IPV4_MAX_TOTAL_LENGTH) throw new RangeError(`IPv4 total length ${total} exceeds 65535`);
  if (off < 0 || off + IPV4_MIN_HEADER_LEN > buf.length) throw new RangeError('IPv4 header does not fit in the buffer');
  buf[off] = 0x45;
  buf[off + IPV4_TOS_OFFSET] = tos & 0xff;
  buf[off + IPV4_TOTAL_LENGTH_OFFSET] = total >>> 8;
  buf[off + IPV4_TOTAL_LENGTH_OFFSET + 1] = total & 0xff;
  buf[off + IPV4_ID_OFFSET] = (identification >>> 8) & 0xff;
  buf[off + IPV4_ID_OFFSET + 1] = identification & 0xff;
  buf[off + IPV4_FLAGS_FRAGMENT_OFFSET] = dontFragment ? IPV4_FLAG_DF >>> 8 : 0;
  buf[off + IPV4_FLAGS_FRAGMENT_OFFSET + 1] = 0;
  buf[off + IPV4_TTL_OFFSET] = ttl & 0xff;
  buf[off + IPV4_PROTOCOL_OFFSET] = protocol & 0xff;
  buf[off + IPV4_CHECKSUM_OFFSET] = 0;
  buf[off + IPV4_CHECKSUM_OFFSET + 1] = 0;
  for (let i = 0; i < 4; i++) {
    buf[off + IPV4_SRC_OFFSET + i] = srcBuf[srcOff + i]!;
    buf[off + IPV4_DST_OFFSET + i] = dstBuf[dstOff + i]!;
  }
  writeChecksum(buf, off + IPV4_CHECKSUM_OFFSET, internetChecksum(buf, off, IPV4_MIN_HEADER_LEN));
  return IPV4_MIN_HEADER_LEN;
}
