/**
 * Seeded generator of TCP/UDP super-packets as a TUN with IFF_VNET_HDR hands them over (the
 * virtio_net_hdr before the packet, NEEDS_CSUM, the folded pseudo-header sum in the checksum
 * field, like Linux's CHECKSUM_PARTIAL), and of plain segments. For the offload tests only.
 */
import { foldSum, pseudoHeaderSumV4, pseudoHeaderSumV6, writeChecksum } from '../../src/packet/checksum.js';
import {
  IPV4_DST_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  writeIpv4Header,
} from '../../src/packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_SRC_OFFSET, writeIpv6Header } from '../../src/packet/ipv6.js';
import { TCP_FLAG_ACK } from '../../src/packet/tcp.js';
import {
  VIRTIO_NET_HDR_F_NEEDS_CSUM,
  VIRTIO_NET_HDR_GSO_TCPV4,
  VIRTIO_NET_HDR_GSO_TCPV6,
  VIRTIO_NET_HDR_GSO_UDP_L4,
  writeVnetHdr,
} from '../../src/packet/virtio-net-hdr.js';
import type { Prng } from '../util/prng.js';

export interface SuperSpec {
  version: 4 | 6;
  proto: 6 | 17;
  /** Transport payload bytes. */
  payload: number;
  gsoSize: number;
  /** TCP flags (default ACK). */
  flags?: number;
  /** TCP option bytes (a multiple of 4, ≤ 40). */
  optLen?: number;
  seq?: number;
  id?: number;
  ttl?: number;
  tos?: number;
  srcPort?: number;
  dstPort?: number;
  /** Last byte of the source address (different flows). */
  srcHost?: number;
}

const SRC4 = new Uint8Array([10, 0, 1, 1]);
const DST4 = new Uint8Array([10, 0, 2, 2]);
const SRC6 = new Uint8Array([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
const DST6 = new Uint8Array([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

export interface BuiltSuper {
  /** Start of the 10-byte virtio_net_hdr; the packet follows it. */
  hdrOff: number;
  off: number;
  len: number;
  hdrLen: number;
  l4: number;
}

/** Writes a super-packet (header at buf[at], packet at at+10) with random payload and options. */
export function writeSuper(buf: Uint8Array, at: number, s: SuperSpec, rng: Prng): BuiltSuper {
  const off = at + 10;
  const optLen = s.proto === IP_PROTO_TCP ? (s.optLen ?? 0) : 0;
  const l4h = s.proto === IP_PROTO_TCP ? 20 + optLen : 8;
  const l4Len = l4h + s.payload;
  const src = s.version === 4 ? SRC4.slice() : SRC6.slice();
  src[src.length - 1] = s.srcHost ?? 1;
  const ipLen =
    s.version === 4
      ? writeIpv4Header(buf, off, src, 0, DST4, 0, s.proto, l4Len, s.ttl ?? 64, s.id ?? 0x1234, true, s.tos ?? 0)
      : writeIpv6Header(buf, off, src, 0, DST6, 0, s.proto, l4Len, s.ttl ?? 64, s.tos ?? 0, 0x12345);
  const l4 = off + ipLen;
  const sp = s.srcPort ?? 40000;
  const dp = s.dstPort ?? 5201;
  buf[l4] = sp >>> 8;
  buf[l4 + 1] = sp & 0xff;
  buf[l4 + 2] = dp >>> 8;
  buf[l4 + 3] = dp & 0xff;
  if (s.proto === IP_PROTO_TCP) {
    const seq = s.seq ?? 1000;
    buf[l4 + 4] = seq >>> 24;
    buf[l4 + 5] = (seq >>> 16) & 0xff;
    buf[l4 + 6] = (seq >>> 8) & 0xff;
    buf[l4 + 7] = seq & 0xff;
    buf.set([0x11, 0x22, 0x33, 0x44], l4 + 8); // ack
    buf[l4 + 12] = (l4h / 4) << 4;
    buf[l4 + 13] = s.flags ?? TCP_FLAG_ACK;
    buf[l4 + 14] = 0x01;
    buf[l4 + 15] = 0xf5; // window
    buf[l4 + 16] = 0;
    buf[l4 + 17] = 0;
    buf[l4 + 18] = 0;
    buf[l4 + 19] = 0;
    // Valid options (other tools re-encode them): NOP NOP Timestamp(random values), then NOPs.
    for (let i = 0; i < optLen; i++) buf[l4 + 20 + i] = 1;
    if (optLen >= 12) {
      buf[l4 + 22] = 8;
      buf[l4 + 23] = 10;
      for (let i = 0; i < 8; i++) buf[l4 + 24 + i] = rng.int(0, 255);
    }
  } else {
    buf[l4 + 4] = l4Len >>> 8;
    buf[l4 + 5] = l4Len & 0xff;
    buf[l4 + 6] = 0;
    buf[l4 + 7] = 0;
  }
  for (let i = 0; i < s.payload; i++) buf[l4 + l4h + i] = rng.nextU32() & 0xff;
  const pseudo =
    s.version === 4
      ? pseudoHeaderSumV4(buf, off + IPV4_SRC_OFFSET, off + IPV4_DST_OFFSET, s.proto, l4Len)
      : pseudoHeaderSumV6(buf, off + IPV6_SRC_OFFSET, off + IPV6_DST_OFFSET, s.proto, l4Len);
  const csumOff = s.proto === IP_PROTO_TCP ? 16 : 6;
  writeChecksum(buf, l4 + csumOff, foldSum(pseudo));
  const gsoType =
    s.proto === IP_PROTO_UDP
      ? VIRTIO_NET_HDR_GSO_UDP_L4
      : s.version === 4
        ? VIRTIO_NET_HDR_GSO_TCPV4
        : VIRTIO_NET_HDR_GSO_TCPV6;
  const hdrLen = ipLen + l4h;
  writeVnetHdr(buf, at, 10, VIRTIO_NET_HDR_F_NEEDS_CSUM, gsoType, hdrLen, s.gsoSize, ipLen, csumOff);
  return { hdrOff: at, off, len: ipLen + l4Len, hdrLen, l4 };
}

/** A random spec: IPv4/IPv6, TCP/UDP, sizes from tiny to 64 KiB. */
export function randomSpec(rng: Prng, opts: { proto?: 6 | 17; flags?: number } = {}): SuperSpec {
  const version = rng.chance(0.5) ? 4 : 6;
  const proto = opts.proto ?? (rng.chance(0.7) ? 6 : 17);
  const optLen = proto === 6 ? rng.pick([0, 4, 12, 40]) : 0;
  const hdr = (version === 4 ? 20 : 40) + (proto === 6 ? 20 + optLen : 8);
  const gsoSize = rng.pick([1, 7, 536, 1200, 1348, 1380, 1448, rng.int(1, 1500)]);
  const maxPayload = Math.min(65535 - hdr + (version === 6 ? 40 : 0), gsoSize * 64);
  const payload = rng.chance(0.3) ? rng.int(1, Math.min(maxPayload, gsoSize * 3)) : rng.int(1, maxPayload);
  return {
    version,
    proto,
    payload,
    gsoSize,
    optLen,
    flags: opts.flags,
    seq: rng.nextU32(),
    id: rng.int(0, 0xffff),
    ttl: rng.int(1, 255),
    tos: rng.int(0, 255) & 0xfc,
    srcPort: rng.int(1, 65535),
    dstPort: rng.int(1, 65535),
  };
}
