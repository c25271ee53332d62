/**
 * The virtio_net_hdr that a TUN device opened with IFF_VNET_HDR puts before every packet it
 * reads and expects before every packet written to it (Linux include/uapi/linux/virtio_net.h).
 *
 * Layout (10 bytes; 12 with num_buffers, chosen by TUNSETVNETHDRSZ): flags u8, gso_type u8,
 * hdr_len u16, gso_size u16, csum_start u16, csum_offset u16, [num_buffers u16]. The 16-bit
 * fields are little-endian: TUN uses the legacy (guest-native) byte order unless
 * TUNSETVNETBE is set, and every architecture Weft runs on (x86_64, arm64) is little-endian.
 *
 * Contract: plain functions over (buf, off); the caller has checked that the header bytes are
 * present. Nothing here allocates.
 */

export const VIRTIO_NET_HDR_LEN = 10;
/** With num_buffers (VIRTIO_NET_F_MRG_RXBUF); TUNSETVNETHDRSZ accepts either. */
export const VIRTIO_NET_HDR_MRG_LEN = 12;

/** flags: the transport checksum is partial (pseudo header only) and must be completed. */
export const VIRTIO_NET_HDR_F_NEEDS_CSUM = 1;
/** flags: the checksum was already verified (receive side). */
export const VIRTIO_NET_HDR_F_DATA_VALID = 2;

export const VIRTIO_NET_HDR_GSO_NONE = 0;
export const VIRTIO_NET_HDR_GSO_TCPV4 = 1;
export const VIRTIO_NET_HDR_GSO_UDP = 3;
export const VIRTIO_NET_HDR_GSO_TCPV6 = 4;
export const VIRTIO_NET_HDR_GSO_UDP_L4 = 5;
/** OR-ed into gso_type: the TCP segments carry ECN (CWR set on the first). */
export const VIRTIO_NET_HDR_GSO_ECN = 0x80;

const FLAGS = 0;
const GSO_TYPE = 1;
const HDR_LEN = 2;
const GSO_SIZE = 4;
const CSUM_START = 6;
const CSUM_OFFSET = 8;
const NUM_BUFFERS = 10;

function rd16(buf: Uint8Array, o: number): number {
  return buf[o]! | (buf[o + 1]! << 8);
}

function wr16(buf: Uint8Array, o: number, v: number): void {
  buf[o] = v & 0xff;
  buf[o + 1] = (v >>> 8) & 0xff;
}

export function vnetFlags(buf: Uint8Array, off: number): number {
  return buf[off + FLAGS]!;
}
export function vnetGsoType(buf: Uint8Array, off: number): number {
  return buf[off + GSO_TYPE]!;
}
export function vnetHdrLen(buf: Uint8Array, off: number): number {
  return rd16(buf, off + HDR_LEN);
}
export function vnetGsoSize(buf: Uint8Array, off: number): number {
  return rd16(buf, off + GSO_SIZE);
}
export function vnetCsumStart(buf: Uint8Array, off: number): number {
  return rd16(buf, off + CSUM_START);
}
export function vnetCsumOffset(buf: Uint8Array, off: number): number {
  return rd16(buf, off + CSUM_OFFSET);
}
/** Only meaningful with a 12-byte header. */
export function vnetNumBuffers(buf: Uint8Array, off: number): number {
  return rd16(buf, off + NUM_BUFFERS);
}

/**
 * Writes a whole header at buf[off]. `len` is 10 or 12 (num_buffers is written as 0, what a
 * TUN writer sends).
 */
export function writeVnetHdr(
  buf: Uint8Array,
  off: number,
  len: number,
  flags: number,
  gsoType: number,
  hdrLen: number,
  gsoSize: number,
  csumStart: number,
  csumOffset: number,
): void {
  buf[off + FLAGS] = flags & 0xff;
  buf[off + GSO_TYPE] = gsoType & 0xff;
  wr16(buf, off + HDR_LEN, hdrLen);
  wr16(buf, off + GSO_SIZE, gsoSize);
  wr16(buf, off + CSUM_START, csumStart);
  wr16(buf, off + CSUM_OFFSET, csumOffset);
  if (len === VIRTIO_NET_HDR_MRG_LEN) wr16(buf, off + NUM_BUFFERS, 0);
}

/** An all-zero header: a plain packet with a complete checksum (no GSO). */
export function writeVnetHdrNone(buf: Uint8Array, off: number, len: number): void {
  // A few bytes: a loop, not TypedArray#fill (a call into V8's C++ runtime).
  for (let i = off; i < off + len; i++) buf[i] = 0;
}
