/**
 * Packets the host lane writes in place of the gateway host's kernel (src/pipelines/host-lane.ts),
 * I/O-free: an ICMP echo reply turned around in the request's own bytes, and IPv4/UDP packets
 * built around a payload (a datagram a relay socket received, a local endpoint's message).
 * IPv4 only: Liqo's tables are family ip.
 */
import { finishChecksum, writeChecksum } from '../packet/checksum.js';
import {
  ICMP_CHECKSUM_OFFSET,
  ICMP_ECHO_ID_OFFSET,
  ICMP_HEADER_LEN,
  ICMPV4_ECHO_REPLY,
  ICMPV4_ECHO_REQUEST,
} from '../packet/icmp.js';
import {
  IP_PROTO_ICMP,
  IP_PROTO_UDP,
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_SRC_OFFSET,
  IPV4_TTL_OFFSET,
  fillIpv4Checksum,
  ipv4TransportSum,
  writeIpv4Header,
} from '../packet/ipv4.js';
import { sumWords } from '../packet/checksum.js';
import type { IpView } from '../packet/ip-view.js';

export const UDP_HEADER_LEN = 8;
/** Bytes of IPv4 + UDP header in front of a payload written by writeUdp4. */
export const UDP4_OVERHEAD = IPV4_MIN_HEADER_LEN + UDP_HEADER_LEN;
const DEFAULT_TTL = 64;

/** An IPv4 address at buf[off] as an unsigned 32-bit number. */
export function readAddr4(buf: Uint8Array, off: number): number {
  return ((buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!) >>> 0;
}

export function writeAddr4(buf: Uint8Array, off: number, a: number): void {
  buf[off] = a >>> 24;
  buf[off + 1] = (a >>> 16) & 0xff;
  buf[off + 2] = (a >>> 8) & 0xff;
  buf[off + 3] = a & 0xff;
}

export function addr4Text(a: number): string {
  return `${a >>> 24}.${(a >>> 16) & 0xff}.${(a >>> 8) & 0xff}.${a & 0xff}`;
}

/** An unfragmented IPv4 ICMP echo request (the parsed view `v` of buf)? */
export function isEchoRequest4(buf: Uint8Array, v: IpView): boolean {
  return (
    v.family === 4 &&
    v.proto === IP_PROTO_ICMP &&
    v.l4 >= 0 &&
    v.l4Len >= ICMP_HEADER_LEN &&
    buf[v.l4] === ICMPV4_ECHO_REQUEST
  );
}

/** The echo identifier of the ICMP echo message at v.l4. */
export function echoId(buf: Uint8Array, v: IpView): number {
  return (buf[v.l4 + ICMP_ECHO_ID_OFFSET]! << 8) | buf[v.l4 + ICMP_ECHO_ID_OFFSET + 1]!;
}

/**
 * Turns the IPv4 echo request parsed in `v` into its reply in place (addresses swapped, type 0,
 * TTL 64, both checksums recomputed), as the kernel answers a ping to one of its addresses.
 * Returns the reply's length (the request's total length).
 */
export function echoReplyInPlace(buf: Uint8Array, v: IpView): number {
  const o = v.off;
  for (let i = 0; i < 4; i++) {
    const s = buf[o + IPV4_SRC_OFFSET + i]!;
    buf[o + IPV4_SRC_OFFSET + i] = buf[o + IPV4_DST_OFFSET + i]!;
    buf[o + IPV4_DST_OFFSET + i] = s;
  }
  buf[o + IPV4_TTL_OFFSET] = DEFAULT_TTL;
  fillIpv4Checksum(buf, o);
  buf[v.l4] = ICMPV4_ECHO_REPLY;
  writeChecksum(buf, v.l4 + ICMP_CHECKSUM_OFFSET, 0);
  writeChecksum(buf, v.l4 + ICMP_CHECKSUM_OFFSET, finishChecksum(sumWords(buf, v.l4, v.l4Len)));
  return v.end - o;
}

/**
 * Writes the ICMP echo message `icmp[0, len)` (type, code, id, sequence, data; its checksum is
 * recomputed) as an IPv4 packet src → dst at out[off]; returns the packet's length, or 0 when
 * it does not fit.
 */
export function writeIcmp4(
  out: Uint8Array,
  off: number,
  src: number,
  dst: number,
  icmp: Uint8Array,
  len: number,
): number {
  const total = IPV4_MIN_HEADER_LEN + len;
  if (len < ICMP_HEADER_LEN || off + total > out.length) return 0;
  const l4 = off + IPV4_MIN_HEADER_LEN;
  out.set(icmp.subarray(0, len), l4);
  writeChecksum(out, l4 + ICMP_CHECKSUM_OFFSET, 0);
  writeChecksum(out, l4 + ICMP_CHECKSUM_OFFSET, finishChecksum(sumWords(out, l4, len)));
  writeAddr4(out, off + IPV4_SRC_OFFSET, src);
  writeAddr4(out, off + IPV4_DST_OFFSET, dst);
  writeIpv4Header(
    out,
    off,
    out,
    off + IPV4_SRC_OFFSET,
    out,
    off + IPV4_DST_OFFSET,
    IP_PROTO_ICMP,
    len,
    DEFAULT_TTL,
    0,
    false,
  );
  return total;
}

/**
 * Writes an IPv4/UDP packet src:sport → dst:dport carrying `payload[0, len)` at out[off]
 * (checksums filled, DF clear, TTL 64); returns its length, or 0 when it does not fit.
 */
export function writeUdp4(
  out: Uint8Array,
  off: number,
  src: number,
  sport: number,
  dst: number,
  dport: number,
  payload: Uint8Array,
  len: number,
): number {
  const total = UDP4_OVERHEAD + len;
  if (off + total > out.length || total > 65535) return 0;
  const l4 = off + IPV4_MIN_HEADER_LEN;
  out.set(payload.subarray(0, len), l4 + UDP_HEADER_LEN);
  // Addresses first, in the IPv4 header's own places, so writeIpv4Header reads them from there.
  writeAddr4(out, off + IPV4_SRC_OFFSET, src);
  writeAddr4(out, off + IPV4_DST_OFFSET, dst);
  writeIpv4Header(
    out,
    off,
    out,
    off + IPV4_SRC_OFFSET,
    out,
    off + IPV4_DST_OFFSET,
    IP_PROTO_UDP,
    UDP_HEADER_LEN + len,
    DEFAULT_TTL,
    0,
    false,
  );
  const ulen = UDP_HEADER_LEN + len;
  out[l4] = sport >>> 8;
  out[l4 + 1] = sport & 0xff;
  out[l4 + 2] = dport >>> 8;
  out[l4 + 3] = dport & 0xff;
  out[l4 + 4] = ulen >>> 8;
  out[l4 + 5] = ulen & 0xff;
  writeChecksum(out, l4 + 6, 0);
  const c = finishChecksum(ipv4TransportSum(out, off, IP_PROTO_UDP, l4, ulen));
  writeChecksum(out, l4 + 6, c === 0 ? 0xffff : c);
  return total;
}
