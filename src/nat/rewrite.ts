/**
 * In-place field rewrites with incremental checksum updates (RFC 1624 eqn. 3, via
 * src/packet/checksum.ts). Every helper patches the checksums that cover the field BEFORE
 * writing the new bytes, since the update needs the old value.
 *
 * Which transport checksum covers an IP address (the pseudo header):
 * - TCP (RFC 9293 §3.1) and ICMPv6 (RFC 4443 §2.3): always;
 * - UDP (RFC 768): only when the checksum field is non-zero — a zero UDP checksum means "none"
 *   and must stay zero; a computed zero is transmitted as 0xffff;
 * - ICMPv4: never (its checksum covers the ICMP message only).
 */

import { checksumUpdate16, foldSum, readChecksum, sumWords, writeChecksum } from '../packet/checksum.js';

/** No transport checksum to patch (ICMPv4 for addresses, non-first fragments, truncated data). */
export const CSUM_NONE = 0;
/** A checksum that is always present (TCP, ICMPv6, ICMPv4 for its own fields). */
export const CSUM_ALWAYS = 1;
/** UDP: zero means absent and stays zero; a result of zero is written as 0xffff. */
export const CSUM_UDP = 2;

/**
 * Where the TCP or UDP checksum covering an address sits: its offset in buf, or -1 (no transport
 * header at l4 < 0, another protocol, or a transport header too short to hold one).
 */
export function l4ChecksumOffset(proto: number, l4: number, l4Len: number): number {
  if (l4 < 0) return -1;
  if (proto === 6 && l4Len >= 18) return l4 + 16;
  if (proto === 17 && l4Len >= 8) return l4 + 6;
  return -1;
}

/** The CSUM_* kind of the checksum l4ChecksumOffset found at csumOff (CSUM_NONE for -1). */
export function l4ChecksumKind(proto: number, csumOff: number): number {
  if (csumOff < 0) return CSUM_NONE;
  return proto === 6 ? CSUM_ALWAYS : CSUM_UDP;
}

/** Patch the checksum at buf[csumOff] for one 16-bit word (aligned with the checksummed data). */
export function patchWord(buf: Uint8Array, csumOff: number, kind: number, oldWord: number, newWord: number): void {
  if (kind === CSUM_NONE || oldWord === newWord) return;
  const c = readChecksum(buf, csumOff);
  if (kind === CSUM_UDP && c === 0) return;
  const n = checksumUpdate16(c, oldWord, newWord);
  writeChecksum(buf, csumOff, kind === CSUM_UDP && n === 0 ? 0xffff : n);
}

/**
 * Replace the `alen`-byte address at buf[addrOff] by neu[newOff..], patching the IPv4 header
 * checksum at ipCsumOff (-1 for IPv6: it has none) and the transport checksum at l4CsumOff
 * (kind CSUM_*). `neu` must not alias buf[addrOff..].
 */
export function rewriteAddress(
  buf: Uint8Array,
  addrOff: number,
  alen: number,
  neu: Uint8Array,
  newOff: number,
  ipCsumOff: number,
  l4CsumOff: number,
  l4Kind: number,
): void {
  // The address's contribution to any checksum is the one's-complement sum of its words, so one
  // folded old/new pair updates every checksum covering it (RFC 1624 eqn. 3 on that sum).
  let oldSum: number;
  let newSum: number;
  if (alen === 4) {
    // IPv4 fast path: the two words read directly (what sumWords would add).
    oldSum = foldSum(((buf[addrOff]! << 8) | buf[addrOff + 1]!) + ((buf[addrOff + 2]! << 8) | buf[addrOff + 3]!));
    newSum = foldSum(((neu[newOff]! << 8) | neu[newOff + 1]!) + ((neu[newOff + 2]! << 8) | neu[newOff + 3]!));
  } else {
    oldSum = foldSum(sumWords(buf, addrOff, alen));
    newSum = foldSum(sumWords(neu, newOff, alen));
  }
  if (ipCsumOff >= 0) patchWord(buf, ipCsumOff, CSUM_ALWAYS, oldSum, newSum);
  if (l4CsumOff >= 0) patchWord(buf, l4CsumOff, l4Kind, oldSum, newSum);
  for (let i = 0; i < alen; i++) buf[addrOff + i] = neu[newOff + i]!;
}

/** Read a big-endian 16-bit word. */
export function read16(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

/** Write a big-endian 16-bit word. */
export function write16(buf: Uint8Array, off: number, v: number): void {
  buf[off] = (v >>> 8) & 0xff;
  buf[off + 1] = v & 0xff;
}

/**
 * Replace the 16-bit word at buf[off] (a port, an ICMP identifier), patching the transport
 * checksum at csumOff (-1: none). The word must be at an even distance from the start of the
 * checksummed data (true for ports and identifiers).
 */
export function rewriteWord(buf: Uint8Array, off: number, value: number, csumOff: number, kind: number): void {
  if (csumOff >= 0) patchWord(buf, csumOff, kind, read16(buf, off), value);
  write16(buf, off, value);
}

/**
 * After an incremental update of the ICMPv4 message at buf[icmpOff, +len): RFC 1624 eqn. 3 yields
 * 0x0000 when the message sums to zero, which is right for data summing to -0 but wrong for data
 * that is all zero words (+0: only an echo reply with identifier 0, sequence 0 and no data, as
 * restored for a masqueraded ping), where a receiver needs 0xffff. TCP, UDP and ICMPv6 include
 * a pseudo header and IPv4 headers a version, so they never sum to +0. Scans only when the
 * checksum is 0 (1 packet in 65536 at most).
 */
export function fixZeroIcmpv4Checksum(buf: Uint8Array, icmpOff: number, len: number): void {
  if (buf[icmpOff + 2] !== 0 || buf[icmpOff + 3] !== 0) return;
  for (let i = 0; i < len; i++) if (buf[icmpOff + i] !== 0) return;
  buf[icmpOff + 2] = 0xff;
  buf[icmpOff + 3] = 0xff;
}

/** Swap the two bytes of a 16-bit value. */
export function swap16(v: number): number {
  return ((v & 0xff) << 8) | (v >>> 8);
}
