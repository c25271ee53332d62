/**
 * Software GSO and checksum checks in the native addon (native/weft_gso.c) behind the
 * signatures of their TypeScript references (packet/gso.ts gsoSegment, the per-segment check of
 * packet/gro.ts), chosen once per caller:
 * - pickGsoSegment(): the native segmenter (payload copied and summed in one pass) when the
 *   addon has it, else gso.ts's gsoSegment. Same output byte for byte, same error codes
 *   (test/io/native-gso.test.ts).
 * - pickChecksumVerdicts(): a batch checksum check, or null (the Coalescer then sums in JS).
 * WEFT_NATIVE_GSO=0 forces the TypeScript paths (A/B runs in one bench, debugging).
 *
 * Contract as the references: buffers and lists are the caller's, used during the call only;
 * no allocation per call.
 */
import { gsoSegment } from '../packet/gso.js';
import type { PacketList } from '../packet/packet-list.js';
import { loadNativeIo } from './native.js';

/** gsoSegment's signature (packet/gso.ts). */
export type GsoSegmentFn = (buf: Uint8Array, hdrOff: number, off: number, len: number, outOff: number, outStride: number, out: PacketList<unknown>) => number;

/**
 * out[i] = CSUM_OK / CSUM_BAD / CSUM_UNKNOWN (packet/gro.ts) for packet i < count: the verdict on
 * the TCP/UDP checksum right behind a 20-byte IPv4 / 40-byte IPv6 header.
 */
export type ChecksumVerdictsFn = (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number, out: Uint8Array) => void;

function nativeWanted(): boolean {
  return process.env.WEFT_NATIVE_GSO !== '0';
}

/** The native segmenter when available (and not switched off), else the TypeScript one. */
export function pickGsoSegment(): GsoSegmentFn {
  const n = nativeWanted() ? loadNativeIo() : null;
  const seg = n?.gsoSegment;
  if (n === null || seg === undefined) return gsoSegment;
  return (buf, hdrOff, off, len, outOff, outStride, out) => {
    const c = out.count;
    const k = seg.call(n, buf, hdrOff, off, len, outOff, outStride, out.offs, out.lens, c);
    if (k > 0) {
      // As PacketList.push without a tag.
      const tags = out.tags;
      for (let i = c; i < c + k; i++) tags[i] = undefined;
      out.count = c + k;
    }
    return k;
  };
}

/** The native batch checksum check, or null (no addon, an addon without it, or WEFT_NATIVE_GSO=0). */
export function pickChecksumVerdicts(): ChecksumVerdictsFn | null {
  const n = nativeWanted() ? loadNativeIo() : null;
  const f = n?.checksumVerdicts;
  if (n === null || f === undefined) return null;
  return (buf, offs, lens, count, out) => { f.call(n, buf, offs, lens, count, out); };
}
