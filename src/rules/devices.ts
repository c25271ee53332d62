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
  /** MTU of the routes out and back (tcpmssclamp with value 0 or none: nft `rt mtu`, mss.ts). */
  readonly pathMtu: number;
  /** A lane's own route MTU where it differs from pathMtu. */
  readonly peerMtu?: number;
  readonly nodeMtu?: number;
  readonly hostMtu?: number;
}
