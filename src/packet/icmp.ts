/**
 * ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) basics: type/code/checksum, echo identifier/sequence,
 * error messages and where their embedded original datagram starts.
 *
 * Contract: readers assume the 8-byte ICMP header is present. Nothing here allocates.
 */

import { finishChecksum, sumWords, writeChecksum } from './checksum.js';
import { IP_PROTO_ICMPV6 } from './ipv4.js';
import { fillIpv6TransportChecksum, ipv6TransportSum } from './ipv6.js';

export const ICMP_TYPE_OFFSET = 0;
export const ICMP_CODE_OFFSET = 1;
export const ICMP_CHECKSUM_OFFSET = 2;
/** Echo request/reply identifier and sequence (RFC 792, RFC 4443 §4.1). */
export const ICMP_ECHO_ID_OFFSET = 4;
export const ICMP_ECHO_SEQ_OFFSET = 6;
/** Fragmentation Needed next-hop MTU (RFC 1191 §4), low 16 bits of the "unused" word. */
export const ICMP_NEXT_HOP_MTU_OFFSET = 6;
/** ICMPv6 Packet Too Big MTU (RFC 4443 §3.2), a 32-bit field. */
export const ICMPV6_MTU_OFFSET = 4;
export const ICMP_HEADER_LEN = 8;
/** Error messages carry the offending datagram's header right after the 8-byte ICMP header. */
export const ICMP_ERROR_PAYLOAD_OFFSET = 8;

// ICMPv4 types (RFC 792).
export const ICMPV4_ECHO_REPLY = 0;
export const ICMPV4_DEST_UNREACHABLE = 3;
export const ICMPV4_SOURCE_QUENCH = 4;
export const ICMPV4_REDIRECT = 5;
export const ICMPV4_ECHO_REQUEST = 8;
export const ICMPV4_TIME_EXCEEDED = 11;
export const ICMPV4_PARAMETER_PROBLEM = 12;
// ICMPv4 destination unreachable codes.
export const ICMPV4_CODE_NET_UNREACHABLE = 0;
export const ICMPV4_CODE_HOST_UNREACHABLE = 1;
export const ICMPV4_CODE_PROTO_UNREACHABLE = 2;
export const ICMPV4_CODE_PORT_UNREACHABLE = 3;
export const ICMPV4_CODE_FRAG_NEEDED = 4;
export const ICMPV4_CODE_ADMIN_PROHIBITED = 13;

// ICMPv6 types (RFC 4443, RFC 4861).
export const ICMPV6_DEST_UNREACHABLE = 1;
export const ICMPV6_PACKET_TOO_BIG = 2;
export const ICMPV6_TIME_EXCEEDED = 3;
export const ICMPV6_PARAMETER_PROBLEM = 4;
export const ICMPV6_ECHO_REQUEST = 128;
export const ICMPV6_ECHO_REPLY = 129;
export const ICMPV6_ROUTER_SOLICITATION = 133;
export const ICMPV6_ROUTER_ADVERTISEMENT = 134;
export const ICMPV6_NEIGHBOR_SOLICITATION = 135;
export const ICMPV6_NEIGHBOR_ADVERTISEMENT = 136;
// ICMPv6 destination unreachable codes.
export const ICMPV6_CODE_NO_ROUTE = 0;
export const ICMPV6_CODE_ADMIN_PROHIBITED = 1;
export const ICMPV6_CODE_ADDR_UNREACHABLE = 3;
export const ICMPV6_CODE_PORT_UNREACHABLE = 4;

export function icmpType(buf: Uint8Array, off: number): number {
  return buf[off]!;
}

export function icmpCode(buf: Uint8Array, off: number): number {
  return buf[off + ICMP_CODE_OFFSET]!;
}

export function icmpChecksum(buf: Uint8Array, off: number): number {
  return (buf[off + ICMP_CHECKSUM_OFFSET]! << 8) | buf[off + ICMP_CHECKSUM_OFFSET + 1]!;
}

export function icmpEchoId(buf: Uint8Array, off: number): number {
  return (buf[off + ICMP_ECHO_ID_OFFSET]! << 8) | buf[off + ICMP_ECHO_ID_OFFSET + 1]!;
}

export function icmpEchoSeq(buf: Uint8Array, off: number): number {
  return (buf[off + ICMP_ECHO_SEQ_OFFSET]! << 8) | buf[off + ICMP_ECHO_SEQ_OFFSET + 1]!;
}

export function setIcmpEchoId(buf: Uint8Array, off: number, id: number): void {
  buf[off + ICMP_ECHO_ID_OFFSET] = (id >>> 8) & 0xff;
  buf[off + ICMP_ECHO_ID_OFFSET + 1] = id & 0xff;
}

export function isIcmpv4Echo(type: number): boolean {
  return type === ICMPV4_ECHO_REQUEST || type === ICMPV4_ECHO_REPLY;
}

export function isIcmpv6Echo(type: number): boolean {
  return type === ICMPV6_ECHO_REQUEST || type === ICMPV6_ECHO_REPLY;
}

/** ICMPv4 error messages that embed the offending IP header + 8 bytes at ICMP_ERROR_PAYLOAD_OFFSET. */
export function isIcmpv4Error(type: number): boolean {
  return (
    type === ICMPV4_DEST_UNREACHABLE ||
    type === ICMPV4_SOURCE_QUENCH ||
    type === ICMPV4_REDIRECT ||
    type === ICMPV4_TIME_EXCEEDED ||
    type === ICMPV4_PARAMETER_PROBLEM
  );
}

/** ICMPv6 error messages are types 0..127 (RFC 4443 §2.1). */
export function isIcmpv6Error(type: number): boolean {
  return type < 128;
}

/** The MTU announced by an ICMPv4 Fragmentation Needed message (RFC 1191). */
export function icmpv4NextHopMtu(buf: Uint8Array, off: number): number {
  return (buf[off + ICMP_NEXT_HOP_MTU_OFFSET]! << 8) | buf[off + ICMP_NEXT_HOP_MTU_OFFSET + 1]!;
}

/** The MTU of an ICMPv6 Packet Too Big message. */
export function icmpv6Mtu(buf: Uint8Array, off: number): number {
  const o = off + ICMPV6_MTU_OFFSET;
  return ((buf[o]! << 24) | (buf[o + 1]! << 16) | (buf[o + 2]! << 8) | buf[o + 3]!) >>> 0;
}

/** ICMPv4 checksum: over the ICMP message only (no pseudo header); stores it. */
export function fillIcmpv4Checksum(buf: Uint8Array, off: number, len: number): void {
  writeChecksum(buf, off + ICMP_CHECKSUM_OFFSET, 0);
  writeChecksum(buf, off + ICMP_CHECKSUM_OFFSET, finishChecksum(sumWords(buf, off, len, 0)));
}

/** True when the ICMPv4 message at buf[off, off+len) carries a correct checksum. */
export function icmpv4ChecksumValid(buf: Uint8Array, off: number, len: number): boolean {
  return finishChecksum(sumWords(buf, off, len, 0)) === 0;
}

/** ICMPv6 checksum includes the IPv6 pseudo header (RFC 4443 §2.3); stores it. */
export function fillIcmpv6Checksum(buf: Uint8Array, ipOff: number, icmpOff: number, len: number): void {
  fillIpv6TransportChecksum(buf, ipOff, IP_PROTO_ICMPV6, icmpOff, len, icmpOff + ICMP_CHECKSUM_OFFSET);
}

/** True when the ICMPv6 message at buf[icmpOff, +len) in the IPv6 packet at buf[ipOff] carries a correct checksum. */
export function icmpv6ChecksumValid(buf: Uint8Array, ipOff: number, icmpOff: number, len: number): boolean {
  return finishChecksum(ipv6TransportSum(buf, ipOff, IP_PROTO_ICMPV6, icmpOff, len)) === 0;
}
