/**
 * The integer pieces shared by Weft's flow hashes (Geneve's source-port entropy, the tunnel
 * spread, the conntrack table's buckets) and by header readers: a big-endian 32-bit read and a
 * multiply-rotate mix with a final avalanche. Not cryptographic; callers add a seed where
 * outsiders must not predict the result. No allocation.
 */

/** The big-endian 32-bit word at buf[o, o+4), unsigned. */
export function readU32BE(buf: Uint8Array, o: number): number {
  return ((buf[o]! << 24) | (buf[o + 1]! << 16) | (buf[o + 2]! << 8) | buf[o + 3]!) >>> 0;
}

/** One 32-bit word into the running hash h (signed 32-bit in and out). */
export function mixWord(h: number, w: number): number {
  h = Math.imul(h ^ w, 0x9e3779b1);
  return (h << 15) | (h >>> 17);
}

/** Final avalanche: every input bit affects every output bit (signed 32-bit result). */
export function finishMix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
