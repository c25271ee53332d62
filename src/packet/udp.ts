/**
 * UDP header view (RFC 768) and the IP+UDP encapsulation builders used for headroom
 * encapsulation (Geneve over UDP 6091, WireGuard over UDP).
 *
 * Contract: readers assume the 8 header bytes are present. Builders write into the caller's
 * buffer and never allocate.
 */

import { finishChecksum, writeChecksum } from './checksum.js';
import { IPV4_MIN_HEADER_LEN, IP_PROTO_UDP, ipv4TransportSum, writeIpv4Header } from './ipv4.js';
import { IPV6_HEADER_LEN, ipv6TransportSum, writeIpv6Header } from './ipv6.js';

export const UDP_SRC_PORT_OFFSET = 0;
export const UDP_DST_PORT_OFFSET = 2;
export const UDP_LENGTH_OFFSET = 4;
export const UDP_CHECKSUM_OFFSET = 6;
export const UDP_HEADER_LEN = 8;

/** Bytes an IPv4+UDP (resp. IPv6+UDP) encapsulation needs in front of its payload. */
export const IPV4_UDP_HEADERS_LEN = IPV4_MIN_HEADER_LEN + UDP_HEADER_LEN;
export const IPV6_UDP_HEADERS_LEN = IPV6_HEADER_LEN + UDP_HEADER_LEN;

export function udpSrcPort(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

export function udpDstPort(buf: Uint8Array, off: number): number {
  return (buf[off + UDP_DST_PORT_OFFSET]! << 8) | buf[off + UDP_DST_PORT_OFFSET + 1]!;
}

export function udpLength(buf: Uint8Array, off: number): number {
  return (buf[off + UDP_LENGTH_OFFSET]! << 8) | buf[off + UDP_LENGTH_OFFSET + 1]!;
}

export function udpChecksum(buf: Uint8Array, off: number): number {
  return (buf[off + UDP_CHECKSUM_OFFSET]! << 8) | buf[off + UDP_CHECKSUM_OFFSET + 1]!;
}

export function setUdpSrcPort(buf: Uint8Array, off: number, port: number): void {
  buf[off] = (port >>> 8) & 0xff;
  buf[off + 1] = port & 0xff;
}

export function setUdpDstPort(buf: Uint8Array, off: number, port: number): void {
  buf[off + UDP_DST_PORT_OFFSET] = (port >>> 8) & 0xff;
  buf[off + UDP_DST_PORT_OFFSET + 1] = port & 0xff;
}

/** Write the 8-byte UDP header with a zero checksum; `udpLen` includes the header. */
export function writeUdpHeader(buf: Uint8Array, off: number, srcPort: number, dstPort: number, udpLen: number): void {
  buf[off] = (srcPort >>> 8) & 0xff;
  buf[off + 1] = srcPort & 0xff;
  buf[off + UDP_DST_PORT_OFFSET] = (dstPort >>> 8) & 0xff;
  buf[off + UDP_DST_PORT_OFFSET + 1] = dstPort & 0xff;
  buf[off + UDP_LENGTH_OFFSET] = (udpLen >>> 8) & 0xff;
  buf[off + UDP_LENGTH_OFFSET + 1] = udpLen & 0xff;
  buf[off + UDP_CHECKSUM_OFFSET] = 0;
  buf[off + UDP_CHECKSUM_OFFSET + 1] = 0;
}

/** Store the checksum of a sum taken with the field zeroed; a computed 0 is sent as 0xffff (RFC 768: zero means "no checksum"). */
function storeUdpChecksum(buf: Uint8Array, udpOff: number, sum: number): void {
  const c = finishChecksum(sum);
  writeChecksum(buf, udpOff + UDP_CHECKSUM_OFFSET, c === 0 ? 0xffff : c);
}

/**
 * Compute the UDP checksum (pseudo header + header + data) of the datagram at buf[udpOff] of
 * `udpLen` bytes, carried in the IPv4 header at buf[ipOff], and store it. A computed 0 is sent as
 * 0xffff (RFC 768: zero means "no checksum").
 */
export function fillUdpChecksumV4(buf: Uint8Array, ipOff: number, udpOff: number, udpLen: number): void {
  writeChecksum(buf, udpOff + UDP_CHECKSUM_OFFSET, 0);
  storeUdpChecksum(buf, udpOff, ipv4TransportSum(buf, ipOff, IP_PROTO_UDP, udpOff, udpLen));
}

/** As fillUdpChecksumV4 for UDP in IPv6 (RFC 8200 §8.1; 0 is sent as 0xffff). */
export function fillUdpChecksumV6(buf: Uint8Array, ipOff: number, udpOff: number, udpLen: number): void {
  writeChecksum(buf, udpOff + UDP_CHECKSUM_OFFSET, 0);
  storeUdpChecksum(buf, udpOff, ipv6TransportSum(buf, ipOff, IP_PROTO_UDP, udpOff, udpLen));
}

/**
 * Verify the UDP checksum of a datagram in IPv4. A zero checksum field means "not computed"
 * (RFC 768) and is accepted.
 */
export function udpChecksumValidV4(buf: Uint8Array, ipOff: number, udpOff: number, udpLen: number): boolean {
  if (udpChecksum(buf, udpOff) === 0) return true;
  return finishChecksum(ipv4TransportSum(buf, ipOff, IP_PROTO_UDP, udpOff, udpLen)) === 0;
}

/**
 * Verify the UDP checksum of a datagram in IPv6. A zero field is invalid unless
 * `allowZero` (RFC 6935/6936 permit it for tunnel encapsulations such as Geneve, RFC 8926 §3.3).
 */
export function udpChecksumValidV6(
  buf: Uint8Array,
  ipOff: number,
  udpOff: number,
  udpLen: number,
  allowZero = false,
): boolean {
  if (udpChecksum(buf, udpOff) === 0) return allowZero;
  return finishChecksum(ipv6TransportSum(buf, ipOff, IP_PROTO_UDP, udpOff, udpLen)) === 0;
}

/**
 * Encapsulate: write IPv4 (20 bytes) + UDP (8 bytes) headers at buf[off], in front of a payload
 * of `payloadLen` bytes the caller has already placed at off+28 (headroom). With `checksum` the
 * UDP checksum covers the payload (one pass over it); without, it is 0 (allowed for IPv4,
 * RFC 768; Geneve and WireGuard both tolerate it). Returns the total datagram length.
 */
export function writeIpv4UdpHeaders(
  buf: Uint8Array,
  off: number,
  srcAddr: Uint8Array,
  dstAddr: Uint8Array,
  srcPort: number,
  dstPort: number,
  payloadLen: number,
  checksum: boolean,
  ttl = 64,
  identification = 0,
  tos = 0,
): number {
  const udpLen = UDP_HEADER_LEN + payloadLen;
  writeIpv4Header(buf, off, srcAddr, 0, dstAddr, 0, IP_PROTO_UDP, udpLen, ttl, identification, true, tos);
  const udpOff = off + IPV4_MIN_HEADER_LEN;
  writeUdpHeader(buf, udpOff, srcPort, dstPort, udpLen);
  if (checksum) fillUdpChecksumV4(buf, off, udpOff, udpLen);
  return IPV4_MIN_HEADER_LEN + udpLen;
}

/**
 * Encapsulate: write IPv6 (40) + UDP (8) headers at buf[off] before a payload at off+48. With
 * `checksum` false the UDP checksum is 0, which RFC 6935 allows only for tunnel protocols whose
 * receivers accept it. Returns the total datagram length.
 */
export function writeIpv6UdpHeaders(
  buf: Uint8Array,
  off: number,
  srcAddr: Uint8Array,
  dstAddr: Uint8Array,
  srcPort: number,
  dstPort: number,
  payloadLen: number,
  checksum: boolean,
  hopLimit = 64,
  trafficClass = 0,
  flowLabel = 0,
): number {
  const udpLen = UDP_HEADER_LEN + payloadLen;
  writeIpv6Header(buf, off, srcAddr, 0, dstAddr, 0, IP_PROTO_UDP, udpLen, hopLimit, trafficClass, flowLabel);
  const udpOff = off + IPV6_HEADER_LEN;
  writeUdpHeader(buf, udpOff, srcPort, dstPort, udpLen);
  if (checksum) fillUdpChecksumV6(buf, off, udpOff, udpLen);
  return IPV6_HEADER_LEN + udpLen;
}
