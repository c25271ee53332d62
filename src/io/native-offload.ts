/**
 * Software GSO, GRO and checksum checks in the native addon (native/weft_gso.c, weft_gro.c)
 * behind the signatures of their TypeScript references (packet/gso.ts gsoSegment, packet/gro.ts
 * Coalescer), chosen once per caller:
 * - pickGsoSegment(): the native segmenter (payload copied and summed in one pass) when the
 *   addon has it, else gso.ts's gsoSegment. Same output byte for byte, same error codes
 *   (test/io/native-gso.test.ts, native-gro.test.ts).
 * - pickChecksumVerdicts(): a batch checksum check, or null (the Coalescer then sums in JS).
 * - pickCoalesceBatch(): a whole Coalescer batch (begin, add each, flush) in one call, or null.
 * WEFT_NATIVE_GSO=0 forces the TypeScript paths (A/B runs in one bench, debugging).
 *
 * Contract as the references: buffers and lists are the caller's, used during the call only;
 * no allocation per call.
 */
import { gsoSegment } from '../packet/gso.js';
import type { CoalescerStats } from '../packet/gro.js';
import type { PacketList } from '../packet/packet-list.js';
import { loadNativeIo } from './native.js';

/** gsoSegment's signature (packet/gso.ts). */
export type GsoSegmentFn = typeof gsoSegment;

/**
 * out[i] = CSUM_OK / CSUM_BAD / CSUM_UNKNOWN (packet/gro.ts) for packet i < count: the verdict on
 * the TCP/UDP checksum right behind a 20-byte IPv4 / 40-byte IPv6 header.
 */
export type ChecksumVerdictsFn = (
  buf: Uint8Array,
  offs: Uint32Array,
  lens: Uint32Array,
  count: number,
  out: Uint8Array,
) => void;

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
  return (buf, offs, lens, count, out) => {
    f.call(n, buf, offs, lens, count, out);
  };
}

/** How the Coalescer to mirror is set up (CoalescerOptions; verifyChecksums is on). */
export interface CoalesceSetup {
  readonly vnetHdrLen: number;
  readonly maxFlows: number;
  readonly udp: boolean;
}

/**
 * A Coalescer batch over packets i < count: the same entries pushed to `out` (room for `count`
 * more needed) and the same bytes as Coalescer begin/add/flush, its counters added to `stats`.
 */
export type CoalesceBatchFn = (
  buf: Uint8Array,
  offs: Uint32Array,
  lens: Uint32Array,
  count: number,
  areaOff: number,
  areaLen: number,
  out: PacketList<unknown>,
  stats: CoalescerStats,
) => void;

/** Most open flows the native coalescer keeps (its state is on the C stack). */
const NATIVE_MAX_FLOWS = 64;

/** The native whole-batch coalescer for `setup`, or null (no addon or no coalesceBatch, maxFlows > 64, WEFT_NATIVE_GSO=0). */
export function pickCoalesceBatch(setup: CoalesceSetup): CoalesceBatchFn | null {
  const n = nativeWanted() ? loadNativeIo() : null;
  const f = n?.coalesceBatch;
  if (n === null || f === undefined || setup.maxFlows > NATIVE_MAX_FLOWS) return null;
  const st = new Float64Array(5);
  const { vnetHdrLen, maxFlows, udp } = setup;
  return (buf, offs, lens, count, areaOff, areaLen, out, stats) => {
    st.fill(0);
    const c = out.count;
    const k = f.call(n, buf, offs, lens, count, areaOff, areaLen, vnetHdrLen, maxFlows, udp, out.offs, out.lens, c, st);
    const tags = out.tags;
    for (let i = c; i < c + k; i++) tags[i] = undefined;
    out.count = c + k;
    // One call's counts are small integers: `| 0` adds them as such, so the fields stay small
    // integers as the JS coalescer's `++` leaves them. A double stored once would change the
    // hidden class of every stats object (V8 field representation): objects made before that
    // (the daemon's own, made before its start-up warm-up) would then deoptimize the code
    // that counts, on their first packet.
    stats.packets += st[0]! | 0;
    stats.superPackets += st[1]! | 0;
    stats.mergedSegments += st[2]! | 0;
    stats.badChecksum += st[3]! | 0;
    stats.areaFull += st[4]! | 0;
  };
}
