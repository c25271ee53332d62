/**
 * The MSS tcpmssclamp writes when its value is 0 or absent: nft `rt mtu` (Liqo renders both so).
 * Pure, per packet, no allocation.
 */
import { OUTPUT_HOST, OUTPUT_NODE, OUTPUT_PEER, SOURCE_HOST, SOURCE_NODE, SOURCE_PEER } from '../router/hooks.js';
import type { RulesDevices } from './devices.js';

/** IPv4 / IPv6 and TCP headers without options: what an MTU leaves for the segment (RFC 9293 §3.7.1). */
export const MSS_OVERHEAD_V4 = 40;
export const MSS_OVERHEAD_V6 = 60;
/** The kernel's answer when the MTU leaves no room (TCP_MSS_DEFAULT). */
const TCP_MSS_DEFAULT = 536;

/**
 * nft `rt mtu`, as the kernel's nft_rt get_tcpmss computes it: the smaller of the MTU of the
 * packet's route out and of the route back to its source, minus `overhead` (40 for IPv4, 60 for
 * IPv6); 536 when that MTU is `overhead` or less or above 65535. Here a route is a lane: out = the packet's output, back = the
 * lane it came in from (the router's own packets: a local route, which lowers nothing). A lane's
 * MTU is its own (peerMtu, nodeMtu, hostMtu) or pathMtu. Only valid where the kernel accepts `rt
 * mtu` (forward, output, postrouting: parse.ts refuses the rest), i.e. once the output is known;
 * without one (OUTPUT_NONE) pathMtu stands for the route out.
 */
export function routeMss(d: RulesDevices, source: number, output: number, overhead = MSS_OVERHEAD_V4): number {
  let mtu =
    output === OUTPUT_PEER
      ? (d.peerMtu ?? d.pathMtu)
      : output === OUTPUT_NODE
        ? (d.nodeMtu ?? d.pathMtu)
        : output === OUTPUT_HOST
          ? (d.hostMtu ?? d.pathMtu)
          : d.pathMtu;
  const back =
    source === SOURCE_PEER
      ? (d.peerMtu ?? d.pathMtu)
      : source === SOURCE_NODE
        ? (d.nodeMtu ?? d.pathMtu)
        : source === SOURCE_HOST
          ? (d.hostMtu ?? d.pathMtu)
          : 0x10000;
  if (back < mtu) mtu = back;
  return mtu <= overhead || mtu > 0xffff ? TCP_MSS_DEFAULT : mtu - overhead;
}
