/**
 * Writing the encapsulation in front of an inner packet: the full write once the tunnel (and in
 * L2 the peer's MAC) is settled, and the shortcut for the next segments of one flow. Per packet,
 * no allocation; the engine (engine.ts) does the checks and lookups around them.
 */

import { ETH_DST_OFFSET, ETH_HEADER_LEN, ETH_SRC_OFFSET, ETH_TYPE_OFFSET, MAC_LEN } from '../packet/ethernet.js';
import { IPV4_MAX_TOTAL_LENGTH } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN } from '../packet/ipv6.js';
import { UDP_HEADER_LEN } from '../packet/udp.js';
import { flowSourcePort, sameFlowKey } from './flowhash.js';
import { GENEVE_HEADER_LEN, GENEVE_PROTO_TEB, writeTunnelHeader } from './header.js';
import { GeneveDrop, STAT_TX_BYTES, STAT_TX_PACKETS, type GeneveCounters } from './reasons.js';
import { GeneveVerdict, type GeneveResult } from './result.js';
import type { GeneveTunnel } from './tunnel.js';

/**
 * Write the headers in front of the checked inner IP packet at buf[innerOff, +innerLen) of
 * `proto` (GENEVE_PROTO_IPV4/IPV6) for `tunnel` (in L2 its peer's MAC is known), with the
 * headroom checked by the caller: Send in `out`, counted.
 */
export function writeEncap(
  buf: Uint8Array,
  innerOff: number,
  innerLen: number,
  tunnel: GeneveTunnel,
  proto: number,
  out: GeneveResult,
  counters: GeneveCounters,
  hashSeed: number,
): GeneveVerdict {
  const optsLen = tunnel.options.length;
  let p = innerOff;
  if (tunnel.l2) {
    p -= ETH_HEADER_LEN;
    // Inline Ethernet II header (dst = peer, src = us): the hot path avoids the checked writer.
    const dst = tunnel.remoteMac;
    const src = tunnel.localMac;
    for (let i = 0; i < MAC_LEN; i++) {
      buf[p + ETH_DST_OFFSET + i] = dst[i]!;
      buf[p + ETH_SRC_OFFSET + i] = src[i]!;
    }
    buf[p + ETH_TYPE_OFFSET] = proto >>> 8;
    buf[p + ETH_TYPE_OFFSET + 1] = proto & 0xff;
    proto = GENEVE_PROTO_TEB;
  }
  const geneveOff = p - GENEVE_HEADER_LEN - optsLen;
  writeTunnelHeader(buf, geneveOff, tunnel, proto);
  out.verdict = GeneveVerdict.Send;
  out.reason = GeneveDrop.None;
  out.tunnel = tunnel;
  out.off = geneveOff;
  out.len = innerOff + innerLen - geneveOff;
  out.srcPort = flowSourcePort(buf, innerOff, innerLen, hashSeed);
  countTx(tunnel.stats, counters.values, innerLen);
  return GeneveVerdict.Send;
}

/** One sent packet of innerLen bytes, counted for its tunnel (ts) and the engine (c). */
function countTx(ts: Float64Array, c: Float64Array, innerLen: number): void {
  ts[STAT_TX_PACKETS]++;
  ts[STAT_TX_BYTES] += innerLen;
  c[STAT_TX_PACKETS]++;
  c[STAT_TX_BYTES] += innerLen;
}

/**
 * Encapsulate the next segment of the flow `out` holds, without looking anything up again:
 * when `out` describes a Send from encapsulate (or from this function) for a packet of this
 * same `buf` whose header bytes are still in place, through the same `tunnel`, in the same
 * synchronous batch (no table, tunnel or engine change in between), and the packet at
 * buf[innerOff, +innerLen) has the same flow key (flowhash.ts sameFlowKey), its datagram
 * equals what encapsulate would build: the previous header is copied in front of it and
 * srcPort is kept. Returns true and updates `out` (off, len; counters as encapsulate).
 * Returns false and changes nothing otherwise: the caller then calls encapsulate. Reset
 * `out.verdict` to Drop at the start of a batch.
 */
export function encapsulateNextInRun(
  buf: Uint8Array,
  innerOff: number,
  innerLen: number,
  tunnel: GeneveTunnel,
  out: GeneveResult,
  counters: GeneveCounters,
): boolean {
  if (out.verdict !== GeneveVerdict.Send || out.tunnel !== tunnel) return false;
  const hdrLen = GENEVE_HEADER_LEN + tunnel.options.length + (tunnel.l2 ? ETH_HEADER_LEN : 0);
  const prev = out.off;
  const geneveOff = innerOff - hdrLen;
  // Overlapping headers (or a region outside buf): leave it to encapsulate's checks.
  if (
    !(geneveOff >= prev + hdrLen || geneveOff + hdrLen <= prev) ||
    geneveOff < 0 ||
    !(innerLen >= 0 && innerOff + innerLen <= buf.length)
  )
    return false;
  if (innerLen + hdrLen + IPV6_HEADER_LEN + UDP_HEADER_LEN > IPV4_MAX_TOTAL_LENGTH) return false;
  if (!sameFlowKey(buf, prev + hdrLen, out.len - hdrLen, innerOff, innerLen)) return false;
  for (let i = 0; i < hdrLen; i++) buf[geneveOff + i] = buf[prev + i]!;
  out.off = geneveOff;
  out.len = innerLen + hdrLen;
  countTx(tunnel.stats, counters.values, innerLen);
  return true;
}
