/**
 * Outer UDP source port entropy (RFC 8926 §3.3).
 *
 * "It is RECOMMENDED that the source port be calculated using a hash of the encapsulated packet
 * headers using, for example, a traditional 5-tuple", and the port SHOULD come from the dynamic
 * range 49152–65535 (RFC 6335). Equal flows therefore get equal ports (no reordering across
 * ECMP paths) and different flows spread over 16384 ports.
 *
 * The hash is a small multiply-rotate mix over 32-bit words with a final avalanche; it is not
 * cryptographic (a `seed` per process keeps outsiders from predicting the port mapping). No
 * allocation, reads only inside [off, off+len).
 */

import {
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  ipv4HeaderLen,
  ipv4IsFragment,
} from '../packet/ipv4.js';
import { finishMix as finish, mixWord as mix, readU32BE as word } from '../packet/flow-mix.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN, IPV6_NEXT_HEADER_OFFSET, IPV6_SRC_OFFSET } from '../packet/ipv6.js';

/** First port of the dynamic/private range (RFC 6335 §6). */
export const GENEVE_SRC_PORT_MIN = 49152;
export const GENEVE_SRC_PORT_MAX = 65535;
/** 16384 ports = 14 bits of the hash. */
const PORT_RANGE_BITS = 14;

const IP_PROTO_SCTP = 132;
const IP_PROTO_UDPLITE = 136;
/** TCP, UDP, SCTP and UDP-Lite all start with the 16-bit source and destination ports: one 32-bit word. */
const PORTS_LEN = 4;

function hasPorts(proto: number): boolean {
  return proto === IP_PROTO_TCP || proto === IP_PROTO_UDP || proto === IP_PROTO_SCTP || proto === IP_PROTO_UDPLITE;
}

/**
 * 32-bit hash of the flow of the IP packet at buf[off, off+len): addresses, protocol and — for
 * TCP/UDP/SCTP/UDP-Lite when present — the ports. IPv4 fragments hash without ports so all
 * fragments of a datagram (only the first carries ports) take the same path; likewise IPv6
 * packets whose first next header is not a transport protocol (extension headers are not
 * walked). Anything that is not a long-enough IPv4/IPv6 packet hashes its first bytes.
 */
export function innerFlowHash(buf: Uint8Array, off: number, len: number, seed: number): number {
  return flowMix(buf, off, len, seed) >>> 0;
}

/**
 * The outer UDP source port for the inner packet at buf[off, off+len): sourcePortFromHash of
 * innerFlowHash, in one call that returns a small integer (a 32-bit hash returned across a
 * call boundary would be boxed as a heap number on the per-packet path).
 */
export function flowSourcePort(buf: Uint8Array, off: number, len: number, seed: number): number {
  return GENEVE_SRC_PORT_MIN + (flowMix(buf, off, len, seed) >>> (32 - PORT_RANGE_BITS));
}

/** The hash as a signed 32-bit value (callers shift it; see innerFlowHash). */
function flowMix(buf: Uint8Array, off: number, len: number, seed: number): number {
  let h = seed | 0;
  const v = len > 0 ? buf[off]! >>> 4 : 0;
  if (v === 4 && len >= IPV4_MIN_HEADER_LEN) {
    const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
    h = mix(h, word(buf, off + IPV4_SRC_OFFSET));
    h = mix(h, word(buf, off + IPV4_DST_OFFSET));
    h = mix(h, proto);
    const ihl = ipv4HeaderLen(buf, off);
    if (hasPorts(proto) && !ipv4IsFragment(buf, off) && ihl >= IPV4_MIN_HEADER_LEN && ihl + PORTS_LEN <= len) {
      h = mix(h, word(buf, off + ihl));
    }
    return finish(h ^ 4);
  }
  if (v === 6 && len >= IPV6_HEADER_LEN) {
    const nh = buf[off + IPV6_NEXT_HEADER_OFFSET]!;
    for (let i = 0; i < 16; i += 4) h = mix(h, word(buf, off + IPV6_SRC_OFFSET + i));
    for (let i = 0; i < 16; i += 4) h = mix(h, word(buf, off + IPV6_DST_OFFSET + i));
    h = mix(h, nh);
    if (hasPorts(nh) && IPV6_HEADER_LEN + PORTS_LEN <= len) h = mix(h, word(buf, off + IPV6_HEADER_LEN));
    return finish(h ^ 6);
  }
  // Not IP (e.g. ARP in L2 mode): the first bytes identify the conversation well enough.
  const n = len < 16 ? len : 16;
  for (let i = 0; i < n; i++) h = mix(h, buf[off + i]!);
  return finish(h);
}

/**
 * True only when the IP packets at buf[a, +aLen) and buf[b, +bLen) hash alike (flowMix reads
 * equal inputs) and have the same version and destination: the fields the hash reads (version
 * and header length, addresses, protocol, fragment state, ports when hashed) are compared
 * instead of hashed. False for anything that is not a long-enough IPv4/IPv6 packet. Lets a
 * sender reuse the previous packet's tunnel, header and source port (RFC 8926 §3.3) for the
 * next segment of the same flow.
 */
export function sameFlowKey(buf: Uint8Array, a: number, aLen: number, b: number, bLen: number): boolean {
  const v = aLen > 0 ? buf[a]! >>> 4 : 0;
  if (bLen <= 0 || buf[b]! >>> 4 !== v) return false;
  if (v === 4) {
    if (aLen < IPV4_MIN_HEADER_LEN || bLen < IPV4_MIN_HEADER_LEN || buf[a] !== buf[b]) return false;
    const proto = buf[a + IPV4_PROTOCOL_OFFSET]!;
    if (buf[b + IPV4_PROTOCOL_OFFSET] !== proto) return false;
    if (
      word(buf, a + IPV4_SRC_OFFSET) !== word(buf, b + IPV4_SRC_OFFSET) ||
      word(buf, a + IPV4_DST_OFFSET) !== word(buf, b + IPV4_DST_OFFSET)
    )
      return false;
    const fragA = ipv4IsFragment(buf, a);
    if (fragA !== ipv4IsFragment(buf, b)) return false;
    const ihl = ipv4HeaderLen(buf, a); // equal for both: same first byte
    const hashed = hasPorts(proto) && !fragA && ihl >= IPV4_MIN_HEADER_LEN;
    const portsA = hashed && ihl + PORTS_LEN <= aLen;
    if (portsA !== (hashed && ihl + PORTS_LEN <= bLen)) return false;
    return !portsA || word(buf, a + ihl) === word(buf, b + ihl);
  }
  if (v === 6) {
    if (aLen < IPV6_HEADER_LEN || bLen < IPV6_HEADER_LEN) return false;
    const nh = buf[a + IPV6_NEXT_HEADER_OFFSET]!;
    if (buf[b + IPV6_NEXT_HEADER_OFFSET] !== nh) return false;
    for (let i = 0; i < 32; i += 4)
      if (word(buf, a + IPV6_SRC_OFFSET + i) !== word(buf, b + IPV6_SRC_OFFSET + i)) return false;
    const hashed = hasPorts(nh);
    const portsA = hashed && IPV6_HEADER_LEN + PORTS_LEN <= aLen;
    if (portsA !== (hashed && IPV6_HEADER_LEN + PORTS_LEN <= bLen)) return false;
    return !portsA || word(buf, a + IPV6_HEADER_LEN) === word(buf, b + IPV6_HEADER_LEN);
  }
  return false;
}

/** Map a 32-bit hash onto 49152..65535 using its top 14 bits (the best-mixed ones). */
export function sourcePortFromHash(hash: number): number {
  return GENEVE_SRC_PORT_MIN + (hash >>> (32 - PORT_RANGE_BITS));
}
