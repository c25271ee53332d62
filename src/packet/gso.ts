/**
 * Segmentation (GSO in software) of the super-packets a TUN device with IFF_VNET_HDR and
 * TUN_F_TSO4/6 / TUN_F_USO4/6 hands us: one TCP or UDP packet of up to 64 KiB plus a
 * virtio_net_hdr saying how to cut it (gso_type, gso_size). Each segment gets a copy of the
 * IP + transport headers followed by its slice of the payload, then the fields that differ per
 * segment are fixed, as Linux's own segmentation does:
 * - IPv4: total length, identification (+1 per segment), header checksum;
 *   IPv6: payload length;
 * - TCP: sequence number (+gso_size per segment), FIN and PSH only on the last segment, CWR
 *   only on the first, full checksum (pseudo header + segment);
 * - UDP (USO): length, full checksum (a computed 0 is sent as 0xffff).
 * A packet without GSO but with NEEDS_CSUM (the kernel left the checksum to us: TUN_F_CSUM)
 * has its checksum completed in place and is passed on as it is.
 *
 * Contract: pure function over ONE caller-owned buffer: the super-packet and the output area
 * both live in `buf` (disjoint), so every copy is a copyWithin (memmove; no view, no
 * allocation). Segment k is written at outOff + k*outStride and pushed to `out`. Malformed or
 * unsupported input and lack of room are returned as negative codes (the caller counts a
 * drop by reason); nothing throws on network input, nothing allocates.
 */

import { finishChecksum, foldSum, pseudoHeaderSumV4, pseudoHeaderSumV6, writeChecksum } from './checksum.js';
import { sumWordsWide } from './checksum-wide.js';
import {
  IPV4_DST_OFFSET,
  IPV4_ID_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_SRC_OFFSET,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  fillIpv4Checksum,
  ipv4HeaderLen,
  ipv4Identification,
  ipv4Protocol,
  ipv4TotalLength,
  setIpv4TotalLength,
} from './ipv4.js';
import {
  IPV6_CHAIN_INVALID,
  IPV6_DST_OFFSET,
  IPV6_HEADER_LEN,
  IPV6_SRC_OFFSET,
  chainOffset,
  chainProtocol,
  ipv6PayloadLength,
  ipv6TransportOffset,
  setIpv6PayloadLength,
} from './ipv6.js';
import type { PacketList } from './packet-list.js';
import {
  TCP_CHECKSUM_OFFSET,
  TCP_FLAGS_OFFSET,
  TCP_FLAG_CWR,
  TCP_FLAG_FIN,
  TCP_FLAG_PSH,
  TCP_MIN_HEADER_LEN,
  TCP_SEQ_OFFSET,
  tcpHeaderLen,
  tcpSeq,
} from './tcp.js';
import { UDP_CHECKSUM_OFFSET, UDP_HEADER_LEN, UDP_LENGTH_OFFSET } from './udp.js';
import {
  VIRTIO_NET_HDR_F_NEEDS_CSUM,
  VIRTIO_NET_HDR_GSO_ECN,
  VIRTIO_NET_HDR_GSO_NONE,
  VIRTIO_NET_HDR_GSO_TCPV4,
  VIRTIO_NET_HDR_GSO_TCPV6,
  VIRTIO_NET_HDR_GSO_UDP_L4,
  vnetCsumOffset,
  vnetCsumStart,
  vnetFlags,
  vnetGsoSize,
  vnetGsoType,
} from './virtio-net-hdr.js';

/** The IP packet or its headers are malformed (lengths, version, header chain). */
export const GSO_ERR_MALFORMED = -1;
/** A gso_type we do not segment (legacy UFO, or a protocol that does not match it). */
export const GSO_ERR_UNSUPPORTED = -2;
/** The output list or the output area cannot hold every segment. */
export const GSO_ERR_NO_ROOM = -3;

/**
 * Completes a partial checksum in place (NEEDS_CSUM): the field at csumStart+csumOffset holds
 * the pseudo-header sum; the checksum is ~fold(sum of buf[off+csumStart, off+len)).
 * Returns false when the offsets fall outside the packet.
 */
export function completeChecksum(
  buf: Uint8Array,
  off: number,
  len: number,
  csumStart: number,
  csumOffset: number,
): boolean {
  if (csumStart >= len || csumStart + csumOffset + 2 > len) return false;
  const field = off + csumStart + csumOffset;
  let c = ~foldSum(sumWordsWide(buf, off + csumStart, len - csumStart)) & 0xffff;
  // A UDP checksum of 0 means "none" (RFC 768): send 0xffff instead. TCP has no such rule, but
  // 0xffff and 0 are the same ones'-complement value, so it is harmless there too.
  if (c === 0 && csumOffset === 6) c = 0xffff;
  writeChecksum(buf, field, c);
  return true;
}

/**
 * Segments the packet buf[off, off+len) described by the virtio_net_hdr at buf[hdrOff].
 * Segment k goes to buf[outOff + k*outStride, ...) (outStride ≥ headers + gso_size; the area
 * must not overlap the input) and is pushed to `out`. A packet without GSO is pushed in place
 * (its checksum completed when NEEDS_CSUM) and nothing is copied.
 * Returns the number of packets pushed (≥ 1), or a negative GSO_ERR_* code (nothing pushed).
 */
export function gsoSegment(
  buf: Uint8Array,
  hdrOff: number,
  off: number,
  len: number,
  outOff: number,
  outStride: number,
  out: PacketList<unknown>,
): number {
  if (len < IPV4_MIN_HEADER_LEN || off < 0 || off + len > buf.length) return GSO_ERR_MALFORMED;
  const gsoType = vnetGsoType(buf, hdrOff) & ~VIRTIO_NET_HDR_GSO_ECN;
  const flags = vnetFlags(buf, hdrOff);
  if (gsoType === VIRTIO_NET_HDR_GSO_NONE) {
    if (
      (flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) !== 0 &&
      !completeChecksum(buf, off, len, vnetCsumStart(buf, hdrOff), vnetCsumOffset(buf, hdrOff))
    ) {
      return GSO_ERR_MALFORMED;
    }
    if (out.count >= out.capacity) return GSO_ERR_NO_ROOM;
    out.push(off, len);
    return 1;
  }
  const proto = gsoType === VIRTIO_NET_HDR_GSO_UDP_L4 ? IP_PROTO_UDP : IP_PROTO_TCP;
  if (
    gsoType !== VIRTIO_NET_HDR_GSO_TCPV4 &&
    gsoType !== VIRTIO_NET_HDR_GSO_TCPV6 &&
    gsoType !== VIRTIO_NET_HDR_GSO_UDP_L4
  )
    return GSO_ERR_UNSUPPORTED;

  // Headers: parsed from the packet itself (hdr_len from the kernel is only a hint).
  const version = buf[off]! >>> 4;
  let l4Off: number;
  if (version === 4) {
    if (gsoType === VIRTIO_NET_HDR_GSO_TCPV6) return GSO_ERR_UNSUPPORTED;
    const ihl = ipv4HeaderLen(buf, off);
    if (ihl < IPV4_MIN_HEADER_LEN || ipv4TotalLength(buf, off) !== len || ipv4Protocol(buf, off) !== proto)
      return GSO_ERR_MALFORMED;
    l4Off = off + ihl;
  } else if (version === 6) {
    if (gsoType === VIRTIO_NET_HDR_GSO_TCPV4) return GSO_ERR_UNSUPPORTED;
    if (len < IPV6_HEADER_LEN || IPV6_HEADER_LEN + ipv6PayloadLength(buf, off) !== len) return GSO_ERR_MALFORMED;
    const chain = ipv6TransportOffset(buf, off, len);
    if (chain === IPV6_CHAIN_INVALID || chainProtocol(chain) !== proto) return GSO_ERR_MALFORMED;
    l4Off = chainOffset(chain);
  } else {
    return GSO_ERR_MALFORMED;
  }
  let hdrLen: number;
  if (proto === IP_PROTO_TCP) {
    if (l4Off + TCP_MIN_HEADER_LEN > off + len) return GSO_ERR_MALFORMED;
    const thl = tcpHeaderLen(buf, l4Off);
    if (thl < TCP_MIN_HEADER_LEN || l4Off + thl > off + len) return GSO_ERR_MALFORMED;
    hdrLen = l4Off - off + thl;
  } else {
    if (l4Off + UDP_HEADER_LEN > off + len) return GSO_ERR_MALFORMED;
    hdrLen = l4Off - off + UDP_HEADER_LEN;
  }
  const gsoSize = vnetGsoSize(buf, hdrOff);
  const payload = len - hdrLen;
  if (gsoSize === 0 || payload <= 0) return GSO_ERR_MALFORMED;
  const nseg = Math.ceil(payload / gsoSize);
  if (out.capacity - out.count < nseg) return GSO_ERR_NO_ROOM;
  if (
    hdrLen + gsoSize > outStride ||
    outOff < 0 ||
    outOff + (nseg - 1) * outStride + hdrLen + Math.min(gsoSize, payload) > buf.length
  )
    return GSO_ERR_NO_ROOM;
  if (outOff < off + len && off < outOff + (nseg - 1) * outStride + hdrLen + gsoSize) return GSO_ERR_NO_ROOM;

  const l4Rel = l4Off - off;
  const id0 = version === 4 ? ipv4Identification(buf, off) : 0;
  const seq0 = proto === IP_PROTO_TCP ? tcpSeq(buf, l4Off) : 0;
  const tcpFlags0 = proto === IP_PROTO_TCP ? buf[l4Off + TCP_FLAGS_OFFSET]! : 0;
  for (let k = 0; k < nseg; k++) {
    const d = outOff + k * outStride;
    const segLen = k === nseg - 1 ? payload - k * gsoSize : gsoSize;
    buf.copyWithin(d, off, off + hdrLen);
    const src = off + hdrLen + k * gsoSize;
    buf.copyWithin(d + hdrLen, src, src + segLen);
    const total = hdrLen + segLen;
    const dl4 = d + l4Rel;
    const l4Len = total - l4Rel;
    if (version === 4) {
      setIpv4TotalLength(buf, d, total);
      const id = (id0 + k) & 0xffff;
      buf[d + IPV4_ID_OFFSET] = id >>> 8;
      buf[d + IPV4_ID_OFFSET + 1] = id & 0xff;
      fillIpv4Checksum(buf, d);
    } else {
      setIpv6PayloadLength(buf, d, total - IPV6_HEADER_LEN);
    }
    if (proto === IP_PROTO_TCP) {
      const seq = (seq0 + k * gsoSize) >>> 0;
      buf[dl4 + TCP_SEQ_OFFSET] = seq >>> 24;
      buf[dl4 + TCP_SEQ_OFFSET + 1] = (seq >>> 16) & 0xff;
      buf[dl4 + TCP_SEQ_OFFSET + 2] = (seq >>> 8) & 0xff;
      buf[dl4 + TCP_SEQ_OFFSET + 3] = seq & 0xff;
      let f = tcpFlags0;
      if (k !== nseg - 1) f &= ~(TCP_FLAG_FIN | TCP_FLAG_PSH);
      if (k !== 0) f &= ~TCP_FLAG_CWR;
      buf[dl4 + TCP_FLAGS_OFFSET] = f;
      fillTransportChecksum(buf, d, version, proto, dl4, l4Len, TCP_CHECKSUM_OFFSET);
    } else {
      buf[dl4 + UDP_LENGTH_OFFSET] = l4Len >>> 8;
      buf[dl4 + UDP_LENGTH_OFFSET + 1] = l4Len & 0xff;
      fillTransportChecksum(buf, d, version, proto, dl4, l4Len, UDP_CHECKSUM_OFFSET);
    }
    out.push(d, total);
  }
  return nseg;
}

/** The full TCP/UDP checksum (pseudo header + segment) of a fresh segment; UDP sends a computed 0 as 0xffff. */
function fillTransportChecksum(
  buf: Uint8Array,
  ip: number,
  version: number,
  proto: number,
  l4: number,
  l4Len: number,
  csumOffset: number,
): void {
  writeChecksum(buf, l4 + csumOffset, 0);
  const pseudo =
    version === 4
      ? pseudoHeaderSumV4(buf, ip + IPV4_SRC_OFFSET, ip + IPV4_DST_OFFSET, proto, l4Len)
      : pseudoHeaderSumV6(buf, ip + IPV6_SRC_OFFSET, ip + IPV6_DST_OFFSET, proto, l4Len);
  const c = finishChecksum(sumWordsWide(buf, l4, l4Len, pseudo));
  writeChecksum(buf, l4 + csumOffset, c === 0 && proto === IP_PROTO_UDP ? 0xffff : c);
}
