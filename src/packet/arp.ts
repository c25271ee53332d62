/**
 * ARP for Ethernet/IPv4 (RFC 826), used by Geneve's L2 mode to answer for the gateway's
 * addresses. Only the Ethernet (htype 1) / IPv4 (ptype 0x0800) form is understood; anything
 * else is reported invalid.
 *
 * Contract: offsets are of the ARP packet (after the Ethernet header). Nothing here allocates.
 */

import { IPV4_ADDR_LEN } from './addr.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV4, MAC_LEN, writeEthHeader } from './ethernet.js';

export const ARP_HTYPE_OFFSET = 0;
export const ARP_PTYPE_OFFSET = 2;
export const ARP_HLEN_OFFSET = 4;
export const ARP_PLEN_OFFSET = 5;
export const ARP_OPER_OFFSET = 6;
export const ARP_SHA_OFFSET = 8;
export const ARP_SPA_OFFSET = 14;
export const ARP_THA_OFFSET = 18;
export const ARP_TPA_OFFSET = 24;
export const ARP_PACKET_LEN = 28;

export const ARP_HTYPE_ETHERNET = 1;
export const ARP_OP_REQUEST = 1;
export const ARP_OP_REPLY = 2;

/** True when buf[off..off+len) holds an Ethernet/IPv4 ARP request or reply. Never throws. */
export function arpValid(buf: Uint8Array, off: number, len: number): boolean {
  if (len < ARP_PACKET_LEN || off < 0 || off + ARP_PACKET_LEN > buf.length) return false;
  if (((buf[off + ARP_HTYPE_OFFSET]! << 8) | buf[off + ARP_HTYPE_OFFSET + 1]!) !== ARP_HTYPE_ETHERNET) return false;
  if (((buf[off + ARP_PTYPE_OFFSET]! << 8) | buf[off + ARP_PTYPE_OFFSET + 1]!) !== ETHERTYPE_IPV4) return false;
  if (buf[off + ARP_HLEN_OFFSET] !== MAC_LEN || buf[off + ARP_PLEN_OFFSET] !== IPV4_ADDR_LEN) return false;
  const op = arpOperation(buf, off);
  return op === ARP_OP_REQUEST || op === ARP_OP_REPLY;
}

/** The opcode (ARP_OP_REQUEST / ARP_OP_REPLY) of the ARP packet at buf[off]. */
export function arpOperation(buf: Uint8Array, off: number): number {
  return (buf[off + ARP_OPER_OFFSET]! << 8) | buf[off + ARP_OPER_OFFSET + 1]!;
}

/**
 * Write an Ethernet/IPv4 ARP packet (28 bytes) at buf[off]. Addresses are read from the given
 * arrays at offset 0 (6-byte MACs, 4-byte IPv4). Returns 28.
 */
export function writeArp(
  buf: Uint8Array,
  off: number,
  operation: number,
  senderMac: Uint8Array,
  senderIp: Uint8Array,
  targetMac: Uint8Array,
  targetIp: Uint8Array,
): number {
  if (off < 0 || off + ARP_PACKET_LEN > buf.length) throw new RangeError('ARP packet does not fit in the buffer');
  buf[off + ARP_HTYPE_OFFSET] = ARP_HTYPE_ETHERNET >>> 8;
  buf[off + ARP_HTYPE_OFFSET + 1] = ARP_HTYPE_ETHERNET & 0xff;
  buf[off + ARP_PTYPE_OFFSET] = ETHERTYPE_IPV4 >>> 8;
  buf[off + ARP_PTYPE_OFFSET + 1] = ETHERTYPE_IPV4 & 0xff;
  buf[off + ARP_HLEN_OFFSET] = MAC_LEN;
  buf[off + ARP_PLEN_OFFSET] = IPV4_ADDR_LEN;
  buf[off + ARP_OPER_OFFSET] = operation >>> 8;
  buf[off + ARP_OPER_OFFSET + 1] = operation & 0xff;
  for (let i = 0; i < MAC_LEN; i++) {
    buf[off + ARP_SHA_OFFSET + i] = senderMac[i]!;
    buf[off + ARP_THA_OFFSET + i] = targetMac[i]!;
  }
  for (let i = 0; i < IPV4_ADDR_LEN; i++) {
    buf[off + ARP_SPA_OFFSET + i] = senderIp[i]!;
    buf[off + ARP_TPA_OFFSET + i] = targetIp[i]!;
  }
  return ARP_PACKET_LEN;
}

/**
 * Turn the ARP request at buf[off] into the reply "targetIp is at myMac" IN PLACE (RFC 826
 * "Packet Reception": swap sender/target, fill in our hardware address, set opcode reply).
 * The caller has checked arpValid and that the request's target IP is one it answers for.
 * If `ethOff` ≥ 0 the enclosing Ethernet header at buf[ethOff] is rewritten too (dst = asker,
 * src = myMac). Returns the ARP length (28).
 */
export function arpRequestToReply(buf: Uint8Array, off: number, myMac: Uint8Array, ethOff = -1): number {
  for (let i = 0; i < MAC_LEN; i++) {
    buf[off + ARP_THA_OFFSET + i] = buf[off + ARP_SHA_OFFSET + i]!;
    buf[off + ARP_SHA_OFFSET + i] = myMac[i]!;
  }
  for (let i = 0; i < IPV4_ADDR_LEN; i++) {
    const t = buf[off + ARP_TPA_OFFSET + i]!;
    buf[off + ARP_TPA_OFFSET + i] = buf[off + ARP_SPA_OFFSET + i]!;
    buf[off + ARP_SPA_OFFSET + i] = t;
  }
  buf[off + ARP_OPER_OFFSET] = ARP_OP_REPLY >>> 8;
  buf[off + ARP_OPER_OFFSET + 1] = ARP_OP_REPLY & 0xff;
  if (ethOff >= 0) writeEthHeader(buf, ethOff, buf, off + ARP_THA_OFFSET, myMac, 0, ETHERTYPE_ARP);
  return ARP_PACKET_LEN;
}
