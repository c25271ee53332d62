/**
 * NAT test helpers: full (non-incremental) checksum recomputation of every checksum a NAT may
 * touch, ICMP error builders that quote a whole packet, address/port swapping for round trips,
 * and readers. Built only from src/packet (independent of src/nat).
 */

import { parseAddress, formatAddress } from '../../src/packet/addr.js';
import {
  fillIcmpv4Checksum,
  fillIcmpv6Checksum,
  ICMP_HEADER_LEN,
  isIcmpv4Error,
  isIcmpv6Error,
} from '../../src/packet/icmp.js';
import {
  fillIpv4Checksum,
  IP_PROTO_ICMP,
  IP_PROTO_ICMPV6,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  IPV4_MIN_HEADER_LEN,
  ipv4FragmentOffset,
  ipv4HeaderLen,
  ipv4TotalLength,
  writeIpv4Header,
} from '../../src/packet/ipv4.js';
import {
  chainOffset,
  chainProtocol,
  IPV6_HEADER_LEN,
  ipv6PayloadLength,
  ipv6TransportOffset,
  writeIpv6Header,
} from '../../src/packet/ipv6.js';
import { fillTcpChecksumV4, fillTcpChecksumV6 } from '../../src/packet/tcp.js';
import { fillUdpChecksumV4, fillUdpChecksumV6, udpChecksum } from '../../src/packet/udp.js';

export interface Pkt {
  buf: Uint8Array;
  off: number;
  len: number;
}

export interface Layout {
  v6: boolean;
  ip: number;
  end: number;
  src: number;
  dst: number;
  alen: number;
  proto: number;
  /** -1 for a non-first fragment. */
  l4: number;
}

/** Locate the headers of the IP packet at buf[off] (assumed well formed). */
export function layout(buf: Uint8Array, off: number, avail?: number): Layout {
  const v6 = buf[off]! >>> 4 === 6;
  if (v6) {
    const end = off + IPV6_HEADER_LEN + ipv6PayloadLength(buf, off);
    const packed = ipv6TransportOffset(buf, off, Math.min(end, off + (avail ?? end - off)) - off);
    const proto = packed < 0 ? -1 : chainProtocol(packed);
    return {
      v6,
      ip: off,
      end,
      src: off + 8,
      dst: off + 24,
      alen: 16,
      proto,
      l4: packed < 0 || proto === 44 ? -1 : chainOffset(packed),
    };
  }
  const end = off + ipv4TotalLength(buf, off);
  return {
    v6,
    ip: off,
    end,
    src: off + 12,
    dst: off + 16,
    alen: 4,
    proto: buf[off + 9]!,
    l4: ipv4FragmentOffset(buf, off) === 0 ? off + ipv4HeaderLen(buf, off) : -1,
  };
}

export function isIcmpErrorPacket(buf: Uint8Array, off: number): boolean {
  const l = layout(buf, off);
  if (l.l4 < 0) return false;
  if (!l.v6 && l.proto === IP_PROTO_ICMP) return isIcmpv4Error(buf[l.l4]!);
  if (l.v6 && l.proto === IP_PROTO_ICMPV6) return isIcmpv6Error(buf[l.l4]!);
  return false;
}

/** Recompute the transport checksum of the (complete) packet at buf[off]; a zero IPv4 UDP checksum stays zero. */
function recomputeTransport(buf: Uint8Array, off: number): void {
  const l = layout(buf, off);
  if (l.l4 < 0) return;
  const n = l.end - l.l4;
  if (l.proto === IP_PROTO_TCP) (l.v6 ? fillTcpChecksumV6 : fillTcpChecksumV4)(buf, off, l.l4, n);
  else if (l.proto === IP_PROTO_UDP) {
    if (!l.v6 && udpChecksum(buf, l.l4) === 0) return;
    (l.v6 ? fillUdpChecksumV6 : fillUdpChecksumV4)(buf, off, l.l4, n);
  } else if (l.proto === IP_PROTO_ICMP && !l.v6) fillIcmpv4Checksum(buf, l.l4, n);
  else if (l.proto === IP_PROTO_ICMPV6 && l.v6) fillIcmpv6Checksum(buf, off, l.l4, n);
}

/**
 * A copy of the packet with every checksum recomputed from scratch: IPv4 header, transport,
 * and for an ICMP error whose quote holds the complete offending packet, the quoted IPv4 header
 * and quoted transport checksum first, then the outer ICMP checksum.
 */
export function recomputeAll(p: Pkt): Uint8Array {
  const b = new Uint8Array(p.buf.subarray(p.off, p.off + p.len));
  const l = layout(b, 0);
  if (isIcmpErrorPacket(b, 0)) {
    const inner = l.l4 + ICMP_HEADER_LEN;
    const innerLen = b[inner]! >>> 4 === 6 ? IPV6_HEADER_LEN + ipv6PayloadLength(b, inner) : ipv4TotalLength(b, inner);
    if (b[inner]! >>> 4 === 4) fillIpv4Checksum(b, inner);
    if (inner + innerLen === l.end) recomputeTransport(b, inner);
  }
  recomputeTransport(b, 0);
  if (!l.v6) fillIpv4Checksum(b, 0);
  return b;
}

/** The packet bytes as a new array. */
export function bytesOf(p: Pkt): Uint8Array {
  return new Uint8Array(p.buf.subarray(p.off, p.off + p.len));
}

/**
 * Build an ICMP error (IPv4 type/code, or ICMPv6 type/code) from `src` to `dst` quoting the whole
 * packet `quoted` (so every quoted checksum can be verified by recomputation).
 */
export function icmpErrorPacket(src: string, dst: string, type: number, code: number, quoted: Pkt, rest = 0): Pkt {
  const s = parseAddress(src);
  const d = parseAddress(dst);
  const v6 = s.length === 16;
  const hl = v6 ? IPV6_HEADER_LEN : IPV4_MIN_HEADER_LEN;
  const icmpLen = ICMP_HEADER_LEN + quoted.len;
  const buf = new Uint8Array(hl + icmpLen);
  if (v6) writeIpv6Header(buf, 0, s, 0, d, 0, IP_PROTO_ICMPV6, icmpLen, 64);
  else writeIpv4Header(buf, 0, s, 0, d, 0, IP_PROTO_ICMP, icmpLen, 64, 7, false);
  buf[hl] = type;
  buf[hl + 1] = code;
  buf[hl + 4] = (rest >>> 24) & 0xff;
  buf[hl + 5] = (rest >>> 16) & 0xff;
  buf[hl + 6] = (rest >>> 8) & 0xff;
  buf[hl + 7] = rest & 0xff;
  buf.set(quoted.buf.subarray(quoted.off, quoted.off + quoted.len), hl + ICMP_HEADER_LEN);
  if (v6) fillIcmpv6Checksum(buf, 0, hl, icmpLen);
  else fillIcmpv4Checksum(buf, hl, icmpLen);
  return { buf, off: 0, len: buf.length };
}

function swapRange(b: Uint8Array, a: number, c: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const t = b[a + i]!;
    b[a + i] = b[c + i]!;
    b[c + i] = t;
  }
}

/** Swap the source/destination addresses and TCP/UDP ports of the packet at buf[off] in place. */
function swapOne(b: Uint8Array, off: number): void {
  const l = layout(b, off);
  swapRange(b, l.src, l.dst, l.alen);
  if (l.l4 >= 0 && (l.proto === IP_PROTO_TCP || l.proto === IP_PROTO_UDP) && l.end - l.l4 >= 4)
    swapRange(b, l.l4, l.l4 + 2, 2);
}

/**
 * The "mirror" of a packet: addresses and ports swapped (and, for an ICMP error, those of the
 * quoted packet too). Swapping leaves every checksum valid (the sums are commutative), so
 * mirror(inbound(mirror(outbound(p)))) must give back p byte for byte.
 */
export function mirror(p: Pkt): Pkt {
  const b = bytesOf(p);
  if (isIcmpErrorPacket(b, 0)) swapOne(b, layout(b, 0).l4 + ICMP_HEADER_LEN);
  swapOne(b, 0);
  return { buf: b, off: 0, len: b.length };
}

export function srcOf(p: Pkt): string {
  const l = layout(p.buf, p.off);
  return formatAddress(p.buf, l.src, l.v6 ? 6 : 4);
}

export function dstOf(p: Pkt): string {
  const l = layout(p.buf, p.off);
  return formatAddress(p.buf, l.dst, l.v6 ? 6 : 4);
}

/** Source and destination ports (TCP/UDP) or [echo id, echo id] (ICMP). */
export function portsOf(p: Pkt): [number, number] {
  const l = layout(p.buf, p.off);
  const b = p.buf;
  if (l.proto === IP_PROTO_TCP || l.proto === IP_PROTO_UDP)
    return [(b[l.l4]! << 8) | b[l.l4 + 1]!, (b[l.l4 + 2]! << 8) | b[l.l4 + 3]!];
  const id = (b[l.l4 + 4]! << 8) | b[l.l4 + 5]!;
  return [id, id];
}

/** The quoted packet of an ICMP error, as a view. */
export function quotedOf(p: Pkt): Pkt {
  const l = layout(p.buf, p.off);
  const inner = l.l4 + ICMP_HEADER_LEN;
  return { buf: p.buf, off: inner, len: l.end - inner };
}

/** Copy a packet into a larger buffer at `headroom` (the pipeline's layout). */
export function withHeadroom(p: Pkt, headroom: number, tailroom = 0): Pkt {
  const buf = new Uint8Array(headroom + p.len + tailroom);
  buf.set(p.buf.subarray(p.off, p.off + p.len), headroom);
  return { buf, off: headroom, len: p.len };
}
