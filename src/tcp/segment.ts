/**
 * Reading a received TCP segment into a reusable view, and writing an outgoing IPv4/IPv6 + TCP
 * segment into a caller's buffer (RFC 9293 §3.1 header, §3.2 options). Nothing allocates.
 */
import { IPV4_MIN_HEADER_LEN, IP_PROTO_TCP, writeIpv4Header } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN, writeIpv6Header } from '../packet/ipv6.js';
import {
  TCP_ACK_OFFSET,
  TCP_CHECKSUM_OFFSET,
  TCP_DATA_OFFSET_OFFSET,
  TCP_FLAGS_OFFSET,
  TCP_MIN_HEADER_LEN,
  TCP_OPT_EOL,
  TCP_OPT_MSS,
  TCP_OPT_NOP,
  TCP_OPT_SACK_PERMITTED,
  TCP_OPT_WSCALE,
  TCP_SEQ_OFFSET,
  TCP_URGENT_OFFSET,
  TCP_WINDOW_OFFSET,
  fillTcpChecksumV4,
  fillTcpChecksumV6,
  tcpAck,
  tcpDstPort,
  tcpFlags,
  tcpHeaderLen,
  tcpSeq,
  tcpSrcPort,
  tcpWindow,
} from '../packet/tcp.js';
import type { IpFamily } from '../packet/addr.js';

/** The fields of one received segment; filled by readSegment, reused segment after segment. */
export class TcpSegment {
  srcPort = 0;
  dstPort = 0;
  seq = 0;
  ack = 0;
  flags = 0;
  /** The window field as sent (not scaled). */
  window = 0;
  /** Absolute offset and length of the payload in the packet buffer. */
  dataOff = 0;
  dataLen = 0;
  /** Options, read only on SYN segments: MSS (-1 absent), window scale shift (-1 absent). */
  mss = -1;
  wscale = -1;
  sackPermitted = false;
}

/** Fills `s` from the TCP header at buf[off, off+len) (a structurally valid header). */
export function readSegment(buf: Uint8Array, off: number, len: number, s: TcpSegment): void {
  s.srcPort = tcpSrcPort(buf, off);
  s.dstPort = tcpDstPort(buf, off);
  s.seq = tcpSeq(buf, off);
  s.ack = tcpAck(buf, off);
  s.flags = tcpFlags(buf, off);
  s.window = tcpWindow(buf, off);
  const hl = tcpHeaderLen(buf, off);
  s.dataOff = off + hl;
  s.dataLen = len - hl;
  s.mss = -1;
  s.wscale = -1;
  s.sackPermitted = false;
}

/** Reads MSS, window scale and SACK-permitted from the options (RFC 9293 §3.2; RFC 7323 §2). */
export function readSynOptions(buf: Uint8Array, off: number, s: TcpSegment): void {
  const end = off + tcpHeaderLen(buf, off);
  let p = off + TCP_MIN_HEADER_LEN;
  while (p < end) {
    const kind = buf[p]!;
    if (kind === TCP_OPT_EOL) return;
    if (kind === TCP_OPT_NOP) {
      p++;
      continue;
    }
    if (p + 1 >= end) return;
    const olen = buf[p + 1]!;
    if (olen < 2 || p + olen > end) return;
    if (kind === TCP_OPT_MSS && olen === 4) s.mss = (buf[p + 2]! << 8) | buf[p + 3]!;
    else if (kind === TCP_OPT_WSCALE && olen === 3)
      s.wscale = Math.min(14, buf[p + 2]!); // RFC 7323 §2.3
    else if (kind === TCP_OPT_SACK_PERMITTED && olen === 2) s.sackPermitted = true;
    p += olen;
  }
}

/** The IP header length for a family (no IPv4 options, no IPv6 extension headers). */
export function ipHeaderLen(family: IpFamily): number {
  return family === 4 ? IPV4_MIN_HEADER_LEN : IPV6_HEADER_LEN;
}

/** TCP option kind 5, SACK (RFC 2018 §3). */
export const TCP_OPT_SACK = 5;
/** SACK blocks that fit without timestamps: 2 NOPs + 2 + 4·8 = 36 ≤ 40 option bytes. */
export const MAX_SACK_BLOCKS = 4;

/**
 * The options of one outgoing segment: SYN options when `synMss` ≥ 0 (MSS; SACK-permitted when
 * `synSack`; window scale when `synWscale` ≥ 0), else `sackCount` SACK blocks from `sack`
 * (pairs of left/right edges). A reusable object: fill, then writeSegment.
 */
export class SegmentOptions {
  synMss = -1;
  synWscale = -1;
  synSack = false;
  readonly sack = new Uint32Array(2 * MAX_SACK_BLOCKS);
  sackCount = 0;

  none(): this {
    this.synMss = -1;
    this.sackCount = 0;
    return this;
  }

  /** Bytes the options take (a multiple of 4). */
  get length(): number {
    if (this.synMss >= 0) return 4 + (this.synSack ? 4 : 0) + (this.synWscale >= 0 ? 4 : 0);
    return this.sackCount > 0 ? 4 + 8 * this.sackCount : 0;
  }
}

function writeOptions(buf: Uint8Array, p: number, o: SegmentOptions): void {
  if (o.synMss >= 0) {
    buf[p++] = TCP_OPT_MSS;
    buf[p++] = 4;
    buf[p++] = (o.synMss >>> 8) & 0xff;
    buf[p++] = o.synMss & 0xff;
    if (o.synSack) {
      buf[p++] = TCP_OPT_NOP;
      buf[p++] = TCP_OPT_NOP;
      buf[p++] = TCP_OPT_SACK_PERMITTED;
      buf[p++] = 2;
    }
    if (o.synWscale >= 0) {
      buf[p++] = TCP_OPT_NOP;
      buf[p++] = TCP_OPT_WSCALE;
      buf[p++] = 3;
      buf[p++] = o.synWscale;
    }
    return;
  }
  if (o.sackCount === 0) return;
  buf[p++] = TCP_OPT_NOP;
  buf[p++] = TCP_OPT_NOP;
  buf[p++] = TCP_OPT_SACK;
  buf[p++] = 2 + 8 * o.sackCount;
  for (let i = 0; i < 2 * o.sackCount; i++, p += 4) writeU32(buf, p, o.sack[i]!);
}

/** Addresses and ports of one direction of a connection, as written on outgoing segments. */
export interface SegmentAddresses {
  readonly family: IpFamily;
  readonly localAddr: Uint8Array;
  readonly remoteAddr: Uint8Array;
  readonly localPort: number;
  readonly remotePort: number;
}

/**
 * Writes the IP and TCP headers of a segment from `a.local` to `a.remote` at buf[off..] for
 * `dataLen` payload bytes the caller has ALREADY placed at payloadOffset(off, family, options),
 * with the options `o` (null: none). Fills both checksums and returns the packet length. The
 * buffer must hold it (throws RangeError otherwise: misuse).
 */
export function writeSegment(
  buf: Uint8Array,
  off: number,
  a: SegmentAddresses,
  seq: number,
  ack: number,
  flags: number,
  window: number,
  dataLen: number,
  o: SegmentOptions | null = null,
): number {
  const ipLen = ipHeaderLen(a.family);
  const hl = TCP_MIN_HEADER_LEN + (o === null ? 0 : o.length);
  const tcpLen = hl + dataLen;
  if (off + ipLen + tcpLen > buf.length) throw new RangeError(`segment of ${ipLen + tcpLen} bytes does not fit`);
  if (a.family === 4) writeIpv4Header(buf, off, a.localAddr, 0, a.remoteAddr, 0, IP_PROTO_TCP, tcpLen);
  else writeIpv6Header(buf, off, a.localAddr, 0, a.remoteAddr, 0, IP_PROTO_TCP, tcpLen);
  const t = off + ipLen;
  buf[t] = a.localPort >>> 8;
  buf[t + 1] = a.localPort & 0xff;
  buf[t + 2] = a.remotePort >>> 8;
  buf[t + 3] = a.remotePort & 0xff;
  writeU32(buf, t + TCP_SEQ_OFFSET, seq);
  writeU32(buf, t + TCP_ACK_OFFSET, ack);
  buf[t + TCP_DATA_OFFSET_OFFSET] = (hl >>> 2) << 4;
  buf[t + TCP_FLAGS_OFFSET] = flags;
  buf[t + TCP_WINDOW_OFFSET] = (window >>> 8) & 0xff;
  buf[t + TCP_WINDOW_OFFSET + 1] = window & 0xff;
  buf[t + TCP_CHECKSUM_OFFSET] = 0;
  buf[t + TCP_CHECKSUM_OFFSET + 1] = 0;
  buf[t + TCP_URGENT_OFFSET] = 0;
  buf[t + TCP_URGENT_OFFSET + 1] = 0;
  if (o !== null) writeOptions(buf, t + TCP_MIN_HEADER_LEN, o);
  if (a.family === 4) fillTcpChecksumV4(buf, off, t, tcpLen);
  else fillTcpChecksumV6(buf, off, t, tcpLen);
  return ipLen + tcpLen;
}

/** Where the payload of a segment written at `off` starts (the caller copies it there first). */
export function payloadOffset(off: number, family: IpFamily, o: SegmentOptions | null): number {
  return off + ipHeaderLen(family) + TCP_MIN_HEADER_LEN + (o === null ? 0 : o.length);
}

function writeU32(buf: Uint8Array, o: number, v: number): void {
  buf[o] = (v >>> 24) & 0xff;
  buf[o + 1] = (v >>> 16) & 0xff;
  buf[o + 2] = (v >>> 8) & 0xff;
  buf[o + 3] = v & 0xff;
}
