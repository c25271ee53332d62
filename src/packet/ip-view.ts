/**
 * A header view of one IP packet, filled once where the packet enters a pipeline and handed to
 * every later stage (router, NAT, rules), so that no stage decodes the version nibble, the
 * header length or the extension chain again.
 *
 * `parseIp` checks structure only: version, IHL, total length within the bytes received, the
 * IPv6 extension chain. Checksums are not verified (incremental updates carry an error through
 * to the receiver, and verifying would cost as much as the work itself). Transport headers are
 * located, not validated: stages that read them check their own lengths against `l4Len`.
 *
 * Offsets are absolute into the caller's buffer. A view is reused packet after packet (no
 * allocation); it is valid while the bytes it describes are unchanged in size and position.
 */
import type { IpFamily } from './addr.js';
import {
  IPV4_CHECKSUM_OFFSET,
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_IPV6_FRAG,
  ipVersion,
  ipv4FragmentOffset,
  ipv4HeaderLen,
  ipv4TotalLength,
} from './ipv4.js';
import {
  IPV6_CHAIN_INVALID,
  IPV6_DST_OFFSET,
  IPV6_HEADER_LEN,
  IPV6_SRC_OFFSET,
  chainOffset,
  chainProtocol,
  ipv6HeaderValid,
  ipv6PayloadLength,
  ipv6TransportOffset,
} from './ipv6.js';

/** parseIp results. */
export const IP_OK = 0;
/** Not version 4 or 6, shorter than its header, IHL or total length inconsistent, bad IPv6 extension chain. */
export const IP_BAD_HEADER = 1;

export class IpView {
  /** 4 or 6 (meaningful after a successful parse). */
  family: IpFamily = 4;
  /** Address length in bytes: 4 or 16. */
  addrLen = 4;
  /** Offset of the IP header. */
  off = 0;
  /** One past the last byte the IP header's length field covers (bytes after it are padding). */
  end = 0;
  srcOff = 0;
  dstOff = 0;
  /** IPv4 header checksum offset; -1 for IPv6. */
  ipCsumOff = -1;
  /** Transport protocol (after IPv6 extension headers; 44 for an IPv6 fragment header). */
  proto = 0;
  /** Transport header offset, or -1 for a non-first fragment (no transport header here). */
  l4 = -1;
  /** Bytes from l4 to end (0 when l4 is -1). */
  l4Len = 0;

  /** The packet's length as its header states it. */
  get totalLength(): number {
    return this.end - this.off;
  }
}

/**
 * Fills `v` for the IP packet at buf[off, off+len) and returns IP_OK, or IP_BAD_HEADER (then
 * `v` is unspecified). Never throws for a range inside `buf`; no allocation.
 */
export function parseIp(buf: Uint8Array, off: number, len: number, v: IpView): number {
  const ver = len > 0 ? ipVersion(buf, off) : 0;
  if (ver === 4) {
    if (len < IPV4_MIN_HEADER_LEN) return IP_BAD_HEADER;
    const hl = ipv4HeaderLen(buf, off);
    const total = ipv4TotalLength(buf, off);
    if (hl < IPV4_MIN_HEADER_LEN || total < hl || total > len) return IP_BAD_HEADER;
    v.family = 4;
    v.addrLen = 4;
    v.off = off;
    v.end = off + total;
    v.srcOff = off + IPV4_SRC_OFFSET;
    v.dstOff = off + IPV4_DST_OFFSET;
    v.ipCsumOff = off + IPV4_CHECKSUM_OFFSET;
    v.proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
    v.l4 = ipv4FragmentOffset(buf, off) === 0 ? off + hl : -1;
  } else if (ver === 6) {
    if (!ipv6HeaderValid(buf, off, len)) return IP_BAD_HEADER;
    v.family = 6;
    v.addrLen = 16;
    v.off = off;
    v.end = off + IPV6_HEADER_LEN + ipv6PayloadLength(buf, off);
    v.srcOff = off + IPV6_SRC_OFFSET;
    v.dstOff = off + IPV6_DST_OFFSET;
    v.ipCsumOff = -1;
    const packed = ipv6TransportOffset(buf, off, v.end - off);
    if (packed === IPV6_CHAIN_INVALID) return IP_BAD_HEADER;
    v.proto = chainProtocol(packed);
    v.l4 = v.proto === IP_PROTO_IPV6_FRAG ? -1 : chainOffset(packed);
  } else {
    return IP_BAD_HEADER;
  }
  v.l4Len = v.l4 < 0 ? 0 : v.end - v.l4;
  return IP_OK;
}
