/**
 * nft `reject` as Liqo renders it (icmp net-unreachable) written in the packet's headroom: the
 * kernel's error from the input interface's address `from`, its TOS (the original's TOS bits
 * with precedence "internetwork control"). At FORWARD the router's hop has already decremented
 * the TTL, as the kernel's forward path does before its FORWARD hook: the quote shows it.
 * Per packet: no allocation.
 */
import type { IpView } from '../packet/ip-view.js';
import { writeTimeExceeded, TIME_EXCEEDED_V4_PREFIX } from '../packet/icmp-error.js';
import { CSUM_ALWAYS, patchWord } from '../nat/rewrite.js';
import type { TokenBucket } from '../ratelimit/token-bucket.js';
import {
  SOURCE_HOST,
  SOURCE_NODE,
  SOURCE_PEER,
  VERDICT_DROP,
  VERDICT_REPLY,
  type PacketMeta,
} from '../router/hooks.js';
import type { RulesStats } from './counters.js';
import type { RulesDevices } from './devices.js';

/**
 * Writes the reply in front of the packet at v.off; returns its length (its offset is
 * v.off − TIME_EXCEEDED_V4_PREFIX), or 0 when it cannot be written (no headroom, too short).
 * `scratch`: 4 bytes.
 */
export function writeReject(buf: Uint8Array, v: IpView, from: number, scratch: Uint8Array): number {
  const off = v.off;
  if (off < TIME_EXCEEDED_V4_PREFIX + 64) return 0;
  scratch[0] = from >>> 24;
  scratch[1] = (from >>> 16) & 255;
  scratch[2] = (from >>> 8) & 255;
  scratch[3] = from & 255;
  const tos = buf[off + 1]!;
  const n = writeTimeExceeded(buf, off, v.end - off, scratch);
  if (n <= 0) return 0;
  // Same builder as Time Exceeded; type 3 code 0 instead of 11/0.
  const start = off - TIME_EXCEEDED_V4_PREFIX;
  const icmp = start + 20;
  buf[icmp] = 3;
  patchWord(buf, icmp + 2, CSUM_ALWAYS, 0x0b00, 0x0300);
  const ntos = (tos & 0x1e) | 0xc0;
  patchWord(buf, start + 10, CSUM_ALWAYS, (buf[start]! << 8) | buf[start + 1]!, (buf[start]! << 8) | ntos);
  buf[start + 1] = ntos;
  return n;
}

/**
 * nft `reject` (Liqo: icmp net-unreachable) about the packet, from the input interface's address:
 * VERDICT_REPLY with the reply's place in meta, or VERDICT_DROP when none may be sent (counted).
 */
export function rejectPacket(
  buf: Uint8Array,
  v: IpView,
  meta: PacketMeta,
  now: number,
  d: RulesDevices,
  bucket: TokenBucket,
  scratch: Uint8Array,
  st: RulesStats,
): number {
  st.rejected++;
  const from =
    meta.source === SOURCE_PEER
      ? d.peerAddr
      : meta.source === SOURCE_NODE
        ? d.nodeAddr
        : meta.source === SOURCE_HOST
          ? d.hostAddr
          : 0;
  const n =
    from === 0 || v.off < TIME_EXCEEDED_V4_PREFIX + 64 || !bucket.take(now) ? 0 : writeReject(buf, v, from, scratch);
  if (n === 0) {
    st.rejectNoReply++;
    return VERDICT_DROP;
  }
  meta.replyOff = v.off - TIME_EXCEEDED_V4_PREFIX;
  meta.replyLen = n;
  return VERDICT_REPLY;
}
