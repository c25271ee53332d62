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

/** Bytes of SYN options written by writeSynOptions: MSS (4) + NOP, window scale (3 + 1) = 8. */
export const SYN_OPTIONS_LEN = 8;

/** MSS, then NOP + window scale when `wscale` ≥ 0, else EOL padding to the same 8 bytes. */
function writeSynOptions(buf: Uint8Array, p: number, mss: number, wscale: number): void {
  buf[p] = TCP_OPT_MSS;
  buf[p + 1] = 4;
  buf[p + 2] = (mss >>> 8) & 0xff;
  buf[p + 3] = mss & 0xff;
  if (wscale >= 0) {
    buf[p + 4] = TCP_OPT_NOP;
    buf[p + 5] = TCP_OPT_WSCALE;
    buf[p + 6] = 3;
    buf[p + 7] = wscale;
  } else {
    buf[p + 4] = TCP_OPT_EOL;
    buf[p + 5] = 0;
    buf[p + 6] = 0;
    buf[p + 7] = 0;
  }
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
 * `dataLen` payload bytes the caller has ALREADY placed at off + payloadOffset(...); `synMss`
 * ≥ 0 adds the SYN options (MSS, window scale when `synWscale` ≥ 0). Fills both checksums and
 * returns the packet length. The buffer must hold it (throws RangeError otherwise: misuse).
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
  synMss = -1,
  synWscale = -1,
): number {
  const ipLen = ipHeaderLen(a.family);
  const hl = TCP_MIN_HEADER_LEN + (synMss >= 0 ? SYN_OPTIONS_LEN : 0);
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
  if (synMss >= 0) writeSynOptions(buf, t + TCP_MIN_HEADER_LEN, synMss, synWscale);
  if (a.family === 4) fillTcpChecksumV4(buf, off, t, tcpLen);
  else fillTcpChecksumV6(buf, off, t, tcpLen);
  return ipLen + tcpLen;
}

/** Where the payload of a segment written at `off` starts (the caller copies it there first). */
export function payloadOffset(off: number, family: IpFamily, syn: boolean): number {
  return off + ipHeaderLen(family) + TCP_MIN_HEADER_LEN + (syn ? SYN_OPTIONS_LEN : 0);
}

function writeU32(buf: Uint8Array, o: number, v: number): void {
  buf[o] = (v >>> 24) & 0xff;
  buf[o + 1] = (v >>> 16) & 0xff;
  buf[o + 2] = (v >>> 8) & 0xff;
  buf[o + 3] = v & 0xff;
}
