/**
 * The packet an ICMP error quotes, located once per error: its addresses, ports/identifier and
 * checksums, so that the rules can give it the mirror-image translation, and the sum of the
 * quoted bytes before any change, so that the outer ICMP checksum absorbs every change
 * (RFC 1624 applied to the region as one quantity). Reused error after error; no allocation.
 */
import { foldSum, sumWords, checksumUpdate16, readChecksum, writeChecksum } from '../packet/checksum.js';
import {
  ICMP_CHECKSUM_OFFSET,
  ICMP_ECHO_ID_OFFSET,
  ICMP_HEADER_LEN,
  ICMPV4_ECHO_REPLY,
  ICMPV4_ECHO_REQUEST,
  ICMPV6_ECHO_REPLY,
  ICMPV6_ECHO_REQUEST,
} from '../packet/icmp.js';
import type { IpView } from '../packet/ip-view.js';
import {
  IPV4_CHECKSUM_OFFSET,
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_ICMP,
  IP_PROTO_ICMPV6,
  IP_PROTO_IPV6_FRAG,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  ipv4FragmentOffset,
  ipv4HeaderLen,
} from '../packet/ipv4.js';
import {
  IPV6_CHAIN_INVALID,
  IPV6_DST_OFFSET,
  IPV6_HEADER_LEN,
  IPV6_SRC_OFFSET,
  chainOffset,
  chainProtocol,
  ipv6TransportOffset,
} from '../packet/ipv6.js';
import { TCP_CHECKSUM_OFFSET } from '../packet/tcp.js';
import { UDP_CHECKSUM_OFFSET, UDP_HEADER_LEN } from '../packet/udp.js';
import { NAT_FORWARD, NatDrop } from './results.js';
import { CSUM_ALWAYS, CSUM_NONE, CSUM_UDP, rewriteAddress, rewriteWord } from './rewrite.js';

/** Bytes of a (quoted) TCP/UDP header that hold both ports. */
const L4_PORTS_LEN = 4;

export class QuotedPacket {
  /** Offsets (absolute) of the quoted IP header, its addresses and IPv4 header checksum (-1: IPv6). */
  ip = 0;
  src = 0;
  dst = 0;
  ipCsum = -1;
  addrLen = 4;
  proto = 0;
  /** Quoted transport header, or -1 (non-first fragment, not quoted, bad chain). */
  l4 = -1;
  /** Ports (TCP/UDP) or the echo identifier are quoted. */
  ports = false;
  /** The quoted transport checksum (-1: not quoted) and what it covers (CSUM_*). */
  csumOff = -1;
  addrKind = CSUM_NONE;
  fieldKind = CSUM_NONE;
  regionEnd = 0;
  regionSum = 0;

  /** Locate the packet quoted by an ICMP error and remember the quoted bytes' sum. */
  parse(buf: Uint8Array, v: IpView): number {
    const ip = v.l4 + ICMP_HEADER_LEN;
    const avail = v.end - ip;
    this.ip = ip;
    this.addrLen = v.addrLen;
    let fixedEnd: number;
    if (v.family === 4) {
      if (avail < IPV4_MIN_HEADER_LEN || buf[ip]! >>> 4 !== 4) return NatDrop.BadIcmpError;
      const ihl = ipv4HeaderLen(buf, ip);
      if (ihl < IPV4_MIN_HEADER_LEN || ihl > avail) return NatDrop.BadIcmpError;
      this.src = ip + IPV4_SRC_OFFSET;
      this.dst = ip + IPV4_DST_OFFSET;
      this.ipCsum = ip + IPV4_CHECKSUM_OFFSET;
      this.proto = buf[ip + IPV4_PROTOCOL_OFFSET]!;
      this.l4 = ipv4FragmentOffset(buf, ip) === 0 ? ip + ihl : -1;
      fixedEnd = ip + ihl;
    } else {
      if (avail < IPV6_HEADER_LEN || buf[ip]! >>> 4 !== 6) return NatDrop.BadIcmpError;
      this.src = ip + IPV6_SRC_OFFSET;
      this.dst = ip + IPV6_DST_OFFSET;
      this.ipCsum = -1;
      const packed = ipv6TransportOffset(buf, ip, avail);
      if (packed === IPV6_CHAIN_INVALID || chainProtocol(packed) === IP_PROTO_IPV6_FRAG) {
        this.proto = packed === IPV6_CHAIN_INVALID ? 0xff : IP_PROTO_IPV6_FRAG;
        this.l4 = -1;
      } else {
        this.proto = chainProtocol(packed);
        this.l4 = chainOffset(packed);
      }
      fixedEnd = ip + IPV6_HEADER_LEN;
    }
    this.ports = false;
    this.csumOff = -1;
    this.addrKind = CSUM_NONE;
    this.fieldKind = CSUM_NONE;
    const il4 = this.l4;
    const ia = il4 >= 0 ? v.end - il4 : 0;
    const p = this.proto;
    if (il4 >= 0) {
      if (p === IP_PROTO_TCP) {
        this.ports = ia >= L4_PORTS_LEN;
        if (ia >= TCP_CHECKSUM_OFFSET + 2) {
          this.csumOff = il4 + TCP_CHECKSUM_OFFSET;
          this.addrKind = this.fieldKind = CSUM_ALWAYS;
        }
      } else if (p === IP_PROTO_UDP) {
        this.ports = ia >= L4_PORTS_LEN;
        if (ia >= UDP_HEADER_LEN) {
          this.csumOff = il4 + UDP_CHECKSUM_OFFSET;
          this.addrKind = this.fieldKind = CSUM_UDP;
        }
      } else if ((p === IP_PROTO_ICMP && v.family === 4) || (p === IP_PROTO_ICMPV6 && v.family === 6)) {
        const t = ia >= 1 ? buf[il4]! : 0xff;
        const echo =
          v.family === 4
            ? t === ICMPV4_ECHO_REQUEST || t === ICMPV4_ECHO_REPLY
            : t === ICMPV6_ECHO_REQUEST || t === ICMPV6_ECHO_REPLY;
        if (echo) {
          this.ports = ia >= ICMP_ECHO_ID_OFFSET + 2;
          if (ia >= ICMP_CHECKSUM_OFFSET + 2) {
            this.csumOff = il4 + ICMP_CHECKSUM_OFFSET;
            this.fieldKind = CSUM_ALWAYS;
            this.addrKind = v.family === 6 ? CSUM_ALWAYS : CSUM_NONE;
          }
        }
      }
    }
    // The quoted bytes we may modify: the embedded IP header and the first 18 bytes of its
    // transport header (ports, identifier, UDP/ICMP/TCP checksums). Their sum before and after
    // gives the outer ICMP checksum update (RFC 1624 applied to the region as one quantity;
    // the region starts at an even offset from the ICMP header, so its words line up).
    let re = il4 >= 0 ? il4 + TCP_CHECKSUM_OFFSET + 2 : fixedEnd;
    if (re < fixedEnd) re = fixedEnd;
    if (re > v.end) re = v.end;
    this.regionEnd = re;
    this.regionSum = foldSum(sumWords(buf, ip, re - ip));
    return NAT_FORWARD;
  }

  /** Rewrite an address of the quoted packet (inner IPv4 header checksum + inner pseudo header). */
  address(buf: Uint8Array, addrOff: number, neu: Uint8Array, newOff: number): void {
    rewriteAddress(buf, addrOff, this.addrLen, neu, newOff, this.ipCsum, this.csumOff, this.addrKind);
  }

  /** Rewrite a port / identifier of the quoted packet. */
  word(buf: Uint8Array, off: number, value: number): void {
    rewriteWord(buf, off, value, this.csumOff, this.fieldKind);
  }

  /** Fold every change made to the quoted bytes into the outer ICMP checksum. */
  finish(buf: Uint8Array, icmpOff: number): void {
    const after = foldSum(sumWords(buf, this.ip, this.regionEnd - this.ip));
    if (after === this.regionSum) return;
    const c = icmpOff + ICMP_CHECKSUM_OFFSET;
    writeChecksum(buf, c, checksumUpdate16(readChecksum(buf, c), this.regionSum, after));
  }
}
