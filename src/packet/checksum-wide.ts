/**
 * The RFC 1071 sum with 32-bit loads: the same result as checksum.ts sumWords (feed it to
 * foldSum / finishChecksum alike), about 3x fewer loads on long spans. Used where whole
 * payloads are summed per packet (software GSO/GRO: every segment's checksum).
 *
 * How: the ones'-complement sum does not depend on byte order except for a final byte swap
 * (RFC 1071 §2(B)), so aligned little-endian 32-bit words are summed (in a double: no
 * overflow below 2^53), folded to 16 bits, then swapped into network order; the unaligned head
 * and tail go through sumWords. A span starting at an odd distance from `off` pairs bytes the
 * other way round, which is one more swap.
 *
 * Contract: no allocation except one Uint32Array view per ArrayBuffer (the last 4 are kept:
 * a data path's few arenas cost nothing after the first packet). Big-endian hosts use sumWords.
 */
import { foldSum, sumWords } from './checksum.js';

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** Below this many bytes the byte loop is as fast. */
const WIDE_MIN = 64;

// A few views, most recent first: a data path alternating between its arenas (TUN and UDP
// batches) finds its view without allocating.
const CACHE = 4;
const viewOf: (ArrayBufferLike | null)[] = [null, null, null, null];
const views: Uint32Array<ArrayBufferLike>[] = [
  new Uint32Array(0),
  new Uint32Array(0),
  new Uint32Array(0),
  new Uint32Array(0),
];

function words(buf: Uint8Array): Uint32Array<ArrayBufferLike> {
  const ab = buf.buffer;
  if (viewOf[0] === ab) return views[0]!;
  let k = 1;
  while (k < CACHE && viewOf[k] !== ab) k++;
  const v = k < CACHE ? views[k]! : new Uint32Array(ab, 0, ab.byteLength >>> 2);
  for (let j = Math.min(k, CACHE - 1); j > 0; j--) {
    viewOf[j] = viewOf[j - 1]!;
    views[j] = views[j - 1]!;
  }
  viewOf[0] = ab;
  views[0] = v;
  return v;
}

/** As sumWords(buf, off, len, sum): only the last span of a chain may have an odd length. */
export function sumWordsWide(buf: Uint8Array, off: number, len: number, sum = 0): number {
  if (len < WIDE_MIN || !LITTLE_ENDIAN) return sumWords(buf, off, len, sum);
  const head = (4 - ((buf.byteOffset + off) & 3)) & 3;
  let s = head !== 0 ? sumWords(buf, off, head, 0) : 0;
  const n32 = (len - head) >>> 2;
  const w = words(buf);
  let i = (buf.byteOffset + off + head) >>> 2;
  const end = i + n32;
  const end4 = end - 3;
  let a = 0;
  let b = 0;
  for (; i < end4; i += 4) {
    a += w[i]! + w[i + 1]!;
    b += w[i + 2]! + w[i + 3]!;
  }
  for (; i < end; i++) a += w[i]!;
  const f = foldSum(a + b); // the sum of little-endian 16-bit words
  // Network order is the swap of f; a span at an odd distance from off needs it unswapped.
  s += (head & 1) !== 0 ? f : ((f & 0xff) << 8) | (f >>> 8);
  const tailStart = head + 4 * n32;
  for (let k = tailStart; k < len; k++) s += (k & 1) !== 0 ? buf[off + k]! : buf[off + k]! << 8;
  return sum + s;
}
