/**
 * MTU and headroom accounting for Geneve encapsulation.
 *
 * Overhead of one encapsulated packet on the underlay (RFC 8926 §4.1.1 asks the tunnel
 * endpoint to account for it rather than rely on fragmentation):
 *
 *   outer IP (20 for IPv4 without options, 40 for IPv6) + UDP 8 + Geneve 8 + options
 *   [+ inner Ethernet 14 in L2 (Transparent Ethernet Bridging) mode]
 *
 * Example: Liqo's default MTU 1340 on the fabric; with a 1500-byte IPv4 underlay an L2 tunnel
 * without options allows 1500 - 50 = 1450 bytes of inner IP packet.
 */

import { ETH_HEADER_LEN } from '../packet/ethernet.js';
import { IPV4_MIN_HEADER_LEN } from '../packet/ipv4.js';
import { IPV6_HEADER_LEN } from '../packet/ipv6.js';
import { UDP_HEADER_LEN } from '../packet/udp.js';
import { GENEVE_HEADER_LEN, GENEVE_MAX_OPTIONS_LEN } from './header.js';

/** Ethernet II header carried inside the tunnel in L2 mode (no VLAN tag, no FCS). */
export const GENEVE_INNER_ETHERNET_LEN = ETH_HEADER_LEN;

/** 'l3': inner IP packets (protocol type IPv4/IPv6); 'l2': inner Ethernet frames (0x6558). */
export type GeneveMode = 'l3' | 'l2';

/**
 * Bytes the engine writes in front of an inner IP packet when it builds the UDP payload only
 * (Geneve header, options, and the Ethernet header in L2 mode).
 */
export function geneveEncapHeaderLen(mode: GeneveMode, optionsLen = 0): number {
  return GENEVE_HEADER_LEN + optionsLen + (mode === 'l2' ? GENEVE_INNER_ETHERNET_LEN : 0);
}

/** Full per-packet overhead on an underlay of the given IP family. */
export function geneveOverhead(underlayFamily: 4 | 6, mode: GeneveMode, optionsLen = 0): number {
  const ip = underlayFamily === 4 ? IPV4_MIN_HEADER_LEN : IPV6_HEADER_LEN;
  return ip + UDP_HEADER_LEN + geneveEncapHeaderLen(mode, optionsLen);
}

/**
 * Largest inner IP packet that fits in one underlay packet of `underlayMtu` bytes. Throws
 * RangeError (configuration error, caught where the configuration is applied) when the
 * underlay MTU cannot carry even the headers.
 */
export function geneveInnerMtu(underlayMtu: number, underlayFamily: 4 | 6, mode: GeneveMode, optionsLen = 0): number {
  const inner = underlayMtu - geneveOverhead(underlayFamily, mode, optionsLen);
  if (!Number.isInteger(underlayMtu) || inner < 1) {
    throw new RangeError(
      `underlay MTU ${underlayMtu} leaves no room for Geneve (${geneveOverhead(underlayFamily, mode, optionsLen)} bytes of headers)`,
    );
  }
  return inner;
}

/** The underlay MTU needed to carry inner packets of `innerMtu` bytes. */
export function geneveUnderlayMtu(innerMtu: number, underlayFamily: 4 | 6, mode: GeneveMode, optionsLen = 0): number {
  return innerMtu + geneveOverhead(underlayFamily, mode, optionsLen);
}

/**
 * Headroom a buffer pool must leave in front of every inner packet so that any Geneve
 * encapsulation (both families, L2, maximum options, outer IP+UDP headers) fits: 40 + 8 + 8 +
 * 252 + 14 = 322 bytes. Pipelines that know their tunnels may use geneveOverhead instead.
 */
export const GENEVE_MAX_HEADROOM =
  IPV6_HEADER_LEN + UDP_HEADER_LEN + GENEVE_HEADER_LEN + GENEVE_MAX_OPTIONS_LEN + GENEVE_INNER_ETHERNET_LEN;
