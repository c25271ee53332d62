/**
 * Test packet factory: builds valid IPv4/IPv6 packets (ICMP echo, UDP, TCP with options) with
 * correct lengths and checksums, using only src/packet. For tests of any area; allocates freely.
 *
 * Every builder returns a fresh Uint8Array holding exactly the IP packet, unless `headroom` is
 * given, in which case the packet starts at `headroom` (returned as `off`) inside a larger buffer.
 */

import { parseAddress } from '../../src/packet/addr.js';
import { pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import {
  fillIcmpv4Checksum,
  fillIcmpv6Checksum,
  ICMP_HEADER_LEN,
  ICMPV4_ECHO_REQUEST,
  ICMPV6_ECHO_REQUEST,
} from '../../src/packet/icmp.js';
import {
  IP_PROTO_ICMP,
  IP_PROTO_ICMPV6,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  IPV4_MIN_HEADER_LEN,
  writeIpv4Header,
} from '../../src/packet/ipv4.js';
import { IPV6_HEADER_LEN, writeIpv6Header } from '../../src/packet/ipv6.js';
import {
  fillTcpChecksumV4,
  fillTcpChecksumV6,
  TCP_FLAG_SYN,
  TCP_MIN_HEADER_LEN,
  TCP_OPT_MSS,
} from '../../src/packet/tcp.js';
import { fillUdpChecksumV4, fillUdpChecksumV6, UDP_HEADER_LEN, writeUdpHeader } from '../../src/packet/udp.js';

export interface Built {
  /** The buffer; the IP packet is buf[off, off+len). */
  buf: Uint8Array;
  off: number;
  len: number;
  /** Offset (absolute) of the transport header. */
  l4: number;
}

interface Common {
  src: string;
  dst: string;
  ttl?: number;
  id?: number;
  headroom?: number;
  tailroom?: number;
  payload?: Uint8Array;
}

export interface EchoSpec extends Common {
  ident?: number;
  seq?: number;
  type?: number;
}

export interface UdpSpec extends Common {
  sport: number;
  dport: number;
  /** Leave the UDP checksum 0 (IPv4 only). */
  noChecksum?: boolean;
}

export interface TcpSpec extends Common {
  sport: number;
  dport: number;
  seq?: number;
  ack?: number;
  flags?: number;
  window?: number;
  /** Adds an MSS option (kind 2, length 4). */
  mss?: number;
  /** Raw extra option bytes appended after MSS (padded to 4 bytes with EOL/NOP as given). */
  options?: number[];
}

function ipFrame(spec: Common, proto: number, l4Len: number): Built & { v6: boolean } {
  const src = parseAddress(spec.src);
  const dst = parseAddress(spec.dst);
  if (src.length !== dst.length) throw new Error('factory: src and dst of different families');
  const v6 = src.length === 16;
  const hl = v6 ? IPV6_HEADER_LEN : IPV4_MIN_HEADER_LEN;
  const off = spec.headroom ?? 0;
  const len = hl + l4Len;
  const buf = new Uint8Array(off + len + (spec.tailroom ?? 0));
  if (v6) writeIpv6Header(buf, off, src, 0, dst, 0, proto, l4Len, spec.ttl ?? 64);
  else writeIpv4Header(buf, off, src, 0, dst, 0, proto, l4Len, spec.ttl ?? 64, spec.id ?? 0x1234, true);
  return { buf, off, len, l4: off + hl, v6 };
}

/** ICMP (v4 or v6 by address family) echo request (or `type`) with id/seq and payload. */
export function icmpEcho(spec: EchoSpec): Built {
  const payload = spec.payload ?? new Uint8Array([0xde, 0xad, 0xbe, 0xef, 1, 2, 3]);
  const l4Len = ICMP_HEADER_LEN + payload.length;
  const isV6 = spec.src.includes(':');
  const f = ipFrame(spec, isV6 ? IP_PROTO_ICMPV6 : IP_PROTO_ICMP, l4Len);
  const b = f.buf;
  b[f.l4] = spec.type ?? (f.v6 ? ICMPV6_ECHO_REQUEST : ICMPV4_ECHO_REQUEST);
  b[f.l4 + 1] = 0;
  const ident = spec.ident ?? 0x4242;
  const seq = spec.seq ?? 1;
  b[f.l4 + 4] = ident >>> 8;
  b[f.l4 + 5] = ident & 0xff;
  b[f.l4 + 6] = seq >>> 8;
  b[f.l4 + 7] = seq & 0xff;
  b.set(payload, f.l4 + ICMP_HEADER_LEN);
  if (f.v6) fillIcmpv6Checksum(b, f.off, f.l4, l4Len);
  else fillIcmpv4Checksum(b, f.l4, l4Len);
  return { buf: b, off: f.off, len: f.len, l4: f.l4 };
}

export function udpPacket(spec: UdpSpec): Built {
  const payload = spec.payload ?? new TextEncoder().encode('hello weft');
  const l4Len = UDP_HEADER_LEN + payload.length;
  const f = ipFrame(spec, IP_PROTO_UDP, l4Len);
  writeUdpHeader(f.buf, f.l4, spec.sport, spec.dport, l4Len);
  f.buf.set(payload, f.l4 + UDP_HEADER_LEN);
  if (f.v6) fillUdpChecksumV6(f.buf, f.off, f.l4, l4Len);
  else if (!spec.noChecksum) fillUdpChecksumV4(f.buf, f.off, f.l4, l4Len);
  return { buf: f.buf, off: f.off, len: f.len, l4: f.l4 };
}

export function tcpPacket(spec: TcpSpec): Built {
  const opts: number[] = [];
  if (spec.mss !== undefined) opts.push(TCP_OPT_MSS, 4, spec.mss >>> 8, spec.mss & 0xff);
  if (spec.options) opts.push(...spec.options);
  while (opts.length % 4 !== 0) opts.push(0);
  const hl = TCP_MIN_HEADER_LEN + opts.length;
  const payload = spec.payload ?? new Uint8Array(0);
  const l4Len = hl + payload.length;
  const f = ipFrame(spec, IP_PROTO_TCP, l4Len);
  const b = f.buf;
  const t = f.l4;
  b[t] = spec.sport >>> 8;
  b[t + 1] = spec.sport & 0xff;
  b[t + 2] = spec.dport >>> 8;
  b[t + 3] = spec.dport & 0xff;
  const seq = spec.seq ?? 1000;
  const ack = spec.ack ?? 0;
  for (let i = 0; i < 4; i++) {
    b[t + 4 + i] = (seq >>> (24 - 8 * i)) & 0xff;
    b[t + 8 + i] = (ack >>> (24 - 8 * i)) & 0xff;
  }
  b[t + 12] = (hl >>> 2) << 4;
  b[t + 13] = spec.flags ?? TCP_FLAG_SYN;
  const win = spec.window ?? 65535;
  b[t + 14] = win >>> 8;
  b[t + 15] = win & 0xff;
  b.set(opts, t + TCP_MIN_HEADER_LEN);
  b.set(payload, t + hl);
  if (f.v6) fillTcpChecksumV6(b, f.off, t, l4Len);
  else fillTcpChecksumV4(b, f.off, t, l4Len);
  return { buf: b, off: f.off, len: f.len, l4: t };
}

/** Packs packets into one arena, 2048-byte slots with `headroom` before each, as a TUN batch would. */
export function arena(pkts: Built[], headroom = 64): { buf: Uint8Array; offs: Uint32Array; lens: Uint32Array } {
  const slot = 2048;
  const buf = new Uint8Array(slot * pkts.length);
  const offs = new Uint32Array(pkts.length);
  const lens = new Uint32Array(pkts.length);
  pkts.forEach((p, i) => {
    offs[i] = i * slot + headroom;
    lens[i] = p.len;
    buf.set(p.buf.subarray(p.off, p.off + p.len), offs[i]);
  });
  return { buf, offs, lens };
}

/** A 44-byte IPv4 TCP SYN from src to dst with an MSS option (checksums valid): 12345 → 80, seq 1, window 8192. */
export function mssSyn(src: string, dst: string, mss: number): Uint8Array {
  const b = new Uint8Array(44);
  b.set([0x45, 0, 0, 44, 0, 1, 0, 0, 64, 6, 0, 0]);
  b.set(src.split('.').map(Number), 12);
  b.set(dst.split('.').map(Number), 16);
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += (b[i]! << 8) | b[i + 1]!;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  b[10] = (~s >>> 8) & 0xff;
  b[11] = ~s & 0xff;
  b.set([0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0x20, 0, 0, 0, 0, 0, 2, 4, mss >> 8, mss & 0xff], 20);
  let t = pseudoHeaderSumV4(b, 12, 16, 6, 24);
  for (let i = 20; i < 44; i += 2) t += (b[i]! << 8) | b[i + 1]!;
  while (t > 0xffff) t = (t & 0xffff) + (t >>> 16);
  b[36] = (~t >>> 8) & 0xff;
  b[37] = ~t & 0xff;
  return b;
}
