/**
 * TCP header view (RFC 9293 §3.1): offsets, flags, options (MSS, RFC 9293 §3.7.1).
 *
 * Contract: readers assume the 20 fixed header bytes are present; option walking is bounded by
 * the data offset and by the caller's `len`. Nothing here allocates.
 */

import { readU32BE } from './flow-mix.js';
import { finishChecksum } from './checksum.js';
import { IP_PROTO_TCP, fillIpv4TransportChecksum, ipv4TransportSum } from './ipv4.js';
import { fillIpv6TransportChecksum, ipv6TransportSum } from './ipv6.js';

export const TCP_SRC_PORT_OFFSET = 0;
export const TCP_DST_PORT_OFFSET = 2;
export const TCP_SEQ_OFFSET = 4;
export const TCP_ACK_OFFSET = 8;
export const TCP_DATA_OFFSET_OFFSET = 12;
export const TCP_FLAGS_OFFSET = 13;
export const TCP_WINDOW_OFFSET = 14;
export const TCP_CHECKSUM_OFFSET = 16;
export const TCP_URGENT_OFFSET = 18;
export const TCP_MIN_HEADER_LEN = 20;
export const TCP_MAX_HEADER_LEN = 60;

export const TCP_FLAG_FIN = 0x01;
export const TCP_FLAG_SYN = 0x02;
export const TCP_FLAG_RST = 0x04;
export const TCP_FLAG_PSH = 0x08;
export const TCP_FLAG_ACK = 0x10;
export const TCP_FLAG_URG = 0x20;
export const TCP_FLAG_ECE = 0x40;
export const TCP_FLAG_CWR = 0x80;

/** Option kinds (IANA). */
export const TCP_OPT_EOL = 0;
export const TCP_OPT_NOP = 1;
export const TCP_OPT_MSS = 2;
export const TCP_OPT_MSS_LEN = 4;
export const TCP_OPT_WSCALE = 3;
export const TCP_OPT_SACK_PERMITTED = 4;
export const TCP_OPT_TIMESTAMP = 8;

export function tcpSrcPort(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

export function tcpDstPort(buf: Uint8Array, off: number): number {
  return (buf[off + TCP_DST_PORT_OFFSET]! << 8) | buf[off + TCP_DST_PORT_OFFSET + 1]!;
}

export function setTcpSrcPort(buf: Uint8Array, off: number, port: number): void {
  buf[off] = (port >>> 8) & 0xff;
  buf[off + 1] = port & 0xff;
}

export function setTcpDstPort(buf: Uint8Array, off: number, port: number): void {
  buf[off + TCP_DST_PORT_OFFSET] = (port >>> 8) & 0xff;
  buf[off + TCP_DST_PORT_OFFSET + 1] = port & 0xff;
}

export function tcpSeq(buf: Uint8Array, off: number): number {
  return readU32BE(buf, off + TCP_SEQ_OFFSET);
}

export function tcpAck(buf: Uint8Array, off: number): number {
  return readU32BE(buf, off + TCP_ACK_OFFSET);
}

/** Header length in bytes (data offset × 4). */
export function tcpHeaderLen(buf: Uint8Array, off: number): number {
  return (buf[off + TCP_DATA_OFFSET_OFFSET]! >>> 4) << 2;
}

/** The 8 flag bits (CWR..FIN). */
export function tcpFlags(buf: Uint8Array, off: number): number {
  return buf[off + TCP_FLAGS_OFFSET]!;
}

export function tcpWindow(buf: Uint8Array, off: number): number {
  return (buf[off + TCP_WINDOW_OFFSET]! << 8) | buf[off + TCP_WINDOW_OFFSET + 1]!;
}

export function tcpChecksum(buf: Uint8Array, off: number): number {
  return (buf[off + TCP_CHECKSUM_OFFSET]! << 8) | buf[off + TCP_CHECKSUM_OFFSET + 1]!;
}

/** Structural check: data offset ≥ 5 and the header fits in `len` bytes. */
export function tcpHeaderValid(buf: Uint8Array, off: number, len: number): boolean {
  if (len < TCP_MIN_HEADER_LEN || off < 0 || off + len > buf.length) return false;
  const hl = tcpHeaderLen(buf, off);
  return hl >= TCP_MIN_HEADER_LEN && hl <= len;
}

/**
 * Offset (absolute, into buf) of the 2-byte MSS value in the options of the TCP header at
 * buf[off], or -1 when absent or when the options are malformed. `len` is the number of valid
 * bytes from off (the header must fit). Walks kind/length pairs per RFC 9293 §3.2.
 */
export function tcpFindMssOption(buf: Uint8Array, off: number, len: number): number {
  const hl = tcpHeaderLen(buf, off);
  if (hl < TCP_MIN_HEADER_LEN || hl > len) return -1;
  const end = off + hl;
  let p = off + TCP_MIN_HEADER_LEN;
  while (p < end) {
    const kind = buf[p]!;
    if (kind === TCP_OPT_EOL) return -1;
    if (kind === TCP_OPT_NOP) {
      p++;
      continue;
    }
    if (p + 1 >= end) return -1;
    const olen = buf[p + 1]!;
    if (olen < 2 || p + olen > end) return -1;
    if (kind === TCP_OPT_MSS) return olen === TCP_OPT_MSS_LEN ? p + 2 : -1;
    p += olen;
  }
  return -1;
}

/** TCP checksum over pseudo header + segment for TCP in IPv4; stores it. */
export function fillTcpChecksumV4(buf: Uint8Array, ipOff: number, tcpOff: number, tcpLen: number): void {
  fillIpv4TransportChecksum(buf, ipOff, IP_PROTO_TCP, tcpOff, tcpLen, tcpOff + TCP_CHECKSUM_OFFSET);
}

/** TCP checksum for TCP in IPv6 (RFC 8200 §8.1); stores it. */
export function fillTcpChecksumV6(buf: Uint8Array, ipOff: number, tcpOff: number, tcpLen: number): void {
  fillIpv6TransportChecksum(buf, ipOff, IP_PROTO_TCP, tcpOff, tcpLen, tcpOff + TCP_CHECKSUM_OFFSET);
}

/** True when the TCP segment in IPv4 at buf[tcpOff, +tcpLen) carries a correct checksum. */
export function tcpChecksumValidV4(buf: Uint8Array, ipOff: number, tcpOff: number, tcpLen: number): boolean {
  return finishChecksum(ipv4TransportSum(buf, ipOff, IP_PROTO_TCP, tcpOff, tcpLen)) === 0;
}

/** True when the TCP segment in IPv6 at buf[tcpOff, +tcpLen) carries a correct checksum. */
export function tcpChecksumValidV6(buf: Uint8Array, ipOff: number, tcpOff: number, tcpLen: number): boolean {
  return finishChecksum(ipv6TransportSum(buf, ipOff, IP_PROTO_TCP, tcpOff, tcpLen)) === 0;
}
