import { OUTPUT_HOST, OUTPUT_NODE, OUTPUT_PEER, SOURCE_NODE, SOURCE_PEER, type PacketMeta } from '../router/hooks.js';

/** How the router's endpoints are named as interfaces, their addresses (masquerade) and MTUs. */
export interface RulesDevices {
  /** Interface a packet from/to a peer uses (Liqo: 'liqo-tunnel'). */
  readonly peer: string;
  /** Interface towards the nodes (Geneve). */
  readonly node: string;
  /** The gateway host's own interface. */
  readonly host: string;
  /** Masquerade source address per output (IPv4 as unsigned 32-bit). */
  readonly peerAddr: number;
  readonly nodeAddr: number;
  readonly hostAddr: number;
  /** IPv6 masquerade source per output (16 bytes); none: ip6 masquerade there drops (counted natNoAddress). */
  readonly peerAddr6?: Uint8Array;
  readonly nodeAddr6?: Uint8Array;
  readonly hostAddr6?: Uint8Array;
  /** MTU of the routes out and back (tcpmssclamp with value 0 or none: nft `rt mtu`, mss.ts). */
  readonly pathMtu: number;
  /** A lane's own route MTU where it differs from pathMtu. */
  readonly peerMtu?: number;
  readonly nodeMtu?: number;
  readonly hostMtu?: number;
}

/** The packet's input interface name: the router's (Liqo mode names the node tunnels' Geneve interfaces), else the lane's. */
export function inDevName(d: RulesDevices, meta: PacketMeta): string {
  if (meta.inDev !== '') return meta.inDev;
  const s = meta.source;
  return s === SOURCE_PEER ? d.peer : s === SOURCE_NODE ? d.node : '';
}

/** The packet's output interface name, likewise. */
export function outDevName(d: RulesDevices, meta: PacketMeta): string {
  if (meta.outDev !== '') return meta.outDev;
  const o = meta.output;
  return o === OUTPUT_PEER ? d.peer : o === OUTPUT_NODE ? d.node : o === OUTPUT_HOST ? d.host : '';
}

/** The address masquerade gives a packet on its output. */
export function masqueradeAddr(d: RulesDevices, meta: PacketMeta): number {
  return meta.output === OUTPUT_PEER ? d.peerAddr : meta.output === OUTPUT_NODE ? d.nodeAddr : d.hostAddr;
}

/** The IPv6 address masquerade gives a packet on its output, if the output has one. */
export function masqueradeAddr6(d: RulesDevices, meta: PacketMeta): Uint8Array | undefined {
  return meta.output === OUTPUT_PEER ? d.peerAddr6 : meta.output === OUTPUT_NODE ? d.nodeAddr6 : d.hostAddr6;
}
