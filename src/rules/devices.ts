/** The router's endpoints as the rules see them: interface names and masquerade addresses. */
/** How the router's endpoints are named as interfaces, and their addresses (masquerade). */
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
  /** MTU of the routes out (for tcpmssclamp without a value). */
  readonly pathMtu: number;
}
