/**
 * The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
 *
 * Sums are kept as plain JS numbers (doubles) and only folded to 16 bits at the end, so an
 * accumulator never overflows for any packet size we handle (< 2^37 bytes). Nothing here allocates.
 *
 * Vocabulary: a *sum* is the unfolded ones'-complement accumulator; a *checksum* is the folded,
 * complemented 16-bit value that goes on the wire.
 */

/**
 * Add the 16-bit big-endian words of buf[off, off+len) to `sum` (RFC 1071 §4.1). Any offset is
 * fine; an odd `len` pads the last byte with a zero low byte, so when chaining several calls only
 * the LAST segment may have an odd length.
 */
export function sumWords(buf: Uint8Array, off: number, len: number, sum = 0): number {
  let s = sum;
  const end = off + len;
  let i = off;
  // Unrolled by 8 bytes: four independent word loads per iteration.
  const end8 = end - 7;
  for (; i < end8; i += 8) {
    s +=
      ((buf[i]! << 8) | buf[i + 1]!) +
      ((buf[i + 2]! << 8) | buf[i + 3]!) +
      ((buf[i + 4]! << 8) | buf[i + 5]!) +
      ((buf[i + 6]! << 8) | buf[i + 7]!);
  }
  const end2 = end - 1;
  for (; i < end2; i += 2) s += (buf[i]! << 8) | buf[i + 1]!;
  if (i < end) s += buf[i]! << 8;
  return s;
}

/** Fold a sum to 16 bits with end-around carry (RFC 1071 §2(C)). */
export function foldSum(sum: number): number {
  let s = sum;
  // Above 2^32 bitwise ops would truncate; reduce arithmetically first.
  while (s > 0xffffffff) s = (s % 0x10000) + Math.floor(s / 0x10000);
  s = (s & 0xffff) + (s >>> 16);
  s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** The checksum to place on the wire: ~fold(sum + words of buf[off, off+len)) & 0xffff. */
export function internetChecksum(buf: Uint8Array, off: number, len: number, initialSum = 0): number {
  return ~foldSum(sumWords(buf, off, len, initialSum)) & 0xffff;
}

/** Complement a folded sum into a checksum. */
export function finishChecksum(sum: number): number {
  return ~foldSum(sum) & 0xffff;
}

/**
 * True when the data (which includes its own checksum field) sums to 0xffff, i.e. verifies
 * (RFC 1071 §1: the receiver's sum over data + checksum is all ones).
 */
export function checksumVerifies(buf: Uint8Array, off: number, len: number, initialSum = 0): boolean {
  return foldSum(sumWords(buf, off, len, initialSum)) === 0xffff;
}

/**
 * Sum of the IPv4 pseudo header (RFC 768, RFC 9293 §3.1): source and destination addresses
 * read from buf at srcOff/dstOff, zero, protocol, and the transport length.
 */
export function pseudoHeaderSumV4(
  buf: Uint8Array,
  srcOff: number,
  dstOff: number,
  protocol: number,
  transportLen: number,
): number {
  return (
    ((buf[srcOff]! << 8) | buf[srcOff + 1]!) +
    ((buf[srcOff + 2]! << 8) | buf[srcOff + 3]!) +
    ((buf[dstOff]! << 8) | buf[dstOff + 1]!) +
    ((buf[dstOff + 2]! << 8) | buf[dstOff + 3]!) +
    protocol +
    transportLen
  );
}

/**
 * Sum of the IPv6 pseudo header (RFC 8200 §8.1): 16-byte source and destination, the 32-bit
 * upper-layer length and the next header value.
 */
export function pseudoHeaderSumV6(
  buf: Uint8Array,
  srcOff: number,
  dstOff: number,
  nextHeader: number,
  transportLen: number,
): number {
  let s = sumWords(buf, srcOff, 16, 0);
  s = sumWords(buf, dstOff, 16, s);
  return s + (transportLen >>> 16) + (transportLen & 0xffff) + nextHeader;
}

/** Read the 16-bit big-endian checksum at buf[off]. */
export function readChecksum(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

/** Write a 16-bit big-endian value at buf[off]. */
export function writeChecksum(buf: Uint8Array, off: number, value: number): void {
  buf[off] = (value >>> 8) & 0xff;
  buf[off + 1] = value & 0xff;
}

/**
 * RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered data changes from
 * `oldWord` to `newWord`: HC' = ~(~HC + ~m + m'). Unlike eqn. 2 this never yields the
 * "negative zero" 0x0000-vs-0xffff mismatch for a non-zero result (RFC 1624 §3).
 */
export function checksumUpdate16(hc: number, oldWord: number, newWord: number): number {
  return ~foldSum((~hc & 0xffff) + (~oldWord & 0xffff) + (newWord & 0xffff)) & 0xffff;
}

/**
 * RFC 1624 eqn. 3 for an `len`-byte (even: 2, 4 or 16) field changing from old[oldOff..] to
 * new[newOff..]; e.g. an IPv4 (4) or IPv6 (16) address rewritten by NAT. The old bytes must be
 * read before they are overwritten when the two views alias.
 */
export function checksumUpdateBytes(
  hc: number,
  oldBuf: Uint8Array,
  oldOff: number,
  newBuf: Uint8Array,
  newOff: number,
  len: number,
): number {
  let s = ~hc & 0xffff;
  for (let i = 0; i < len; i += 2) {
    s +=
      (~((oldBuf[oldOff + i]! << 8) | oldBuf[oldOff + i + 1]!) & 0xffff) +
      ((newBuf[newOff + i]! << 8) | newBuf[newOff + i + 1]!);
  }
  return ~foldSum(s) & 0xffff;
}

/** checksumUpdateBytes for a 4-byte field (IPv4 address). */
export function checksumUpdate4(
  hc: number,
  oldBuf: Uint8Array,
  oldOff: number,
  newBuf: Uint8Array,
  newOff: number,
): number {
  return checksumUpdateBytes(hc, oldBuf, oldOff, newBuf, newOff, 4);
}

/** checksumUpdateBytes for a 16-byte field (IPv6 address). */
export function checksumUpdate16Bytes(
  hc: number,
  oldBuf: Uint8Array,
  oldOff: number,
  newBuf: Uint8Array,
  newOff: number,
): number {
  return checksumUpdateBytes(hc, oldBuf, oldOff, newBuf, newOff, 16);
}

/**
 * In place: the checksum field at buf[csumOff] is adjusted for a 16-bit word changing from
 * oldWord to newWord (the caller writes the word itself).
 */
export function adjustChecksum16(buf: Uint8Array, csumOff: number, oldWord: number, newWord: number): void {
  writeChecksum(buf, csumOff, checksumUpdate16(readChecksum(buf, csumOff), oldWord, newWord));
}

/**
 * In place: adjust the checksum field at buf[csumOff] for a field of `len` bytes changing from
 * oldBuf[oldOff..] to newBuf[newOff..] (the caller copies the new bytes in afterwards or before,
 * as long as oldBuf still holds the old value when this runs).
 */
export function adjustChecksumBytes(
  buf: Uint8Array,
  csumOff: number,
  oldBuf: Uint8Array,
  oldOff: number,
  newBuf: Uint8Array,
  newOff: number,
  len: number,
): void {
  writeChecksum(buf, csumOff, checksumUpdateBytes(readChecksum(buf, csumOff), oldBuf, oldOff, newBuf, newOff, len));
}
