/**
 * Steering: the Router's routing decision taken from policy rules (Liqo's RouteConfigurations,
 * installed by src/rules/steering.ts) instead of from the peer table's remapped CIDRs. While a
 * Steering is set on a Router (Router.setSteering) the router is in Liqo mode:
 * - the peer table (peer CIDRs, tunnel MTU) is not consulted; translation, as in every mode,
 *   comes from the rules at the hook points (here Liqo's FirewallConfiguration chains);
 * - after PREROUTING / OUTPUT the policy router's next hop chooses the lane: a peer's tunnel,
 *   a node's Geneve tunnel or the gateway host; no policy route → the node table (internal
 *   addresses, pod routes) as the kernel's main table would → else no_route;
 * - interface names are Liqo's: the WireGuard tunnel's, each node's Geneve interface
 *   (InternalNode.spec.interface.gateway.name) and the host's, given to the hooks in
 *   PacketMeta.inDev/outDev so rules naming a node's interface match;
 * - the meta mark the hooks set (PacketMeta.mark) is the fwmark of the lookup.
 *
 * Next hops are resolved per packet against the router's current tables (peers by tunnel
 * address, node tunnels by internal address), so tunnels and peers may change underneath.
 * I/O-free; lookups allocate nothing.
 */
import { parseAddress } from '../packet/addr.js';
import { Router as PolicyRouter } from '../route/policy.js';

export const LANE_HOST = 0;
export const LANE_NODE = 1;
export const LANE_PEER = 2;

/** A policy route's next hop, resolved to a lane when installed. */
export class SteerHop {
  /** gw as 4/16 bytes (null: on-link, the packet's destination is the neighbour). */
  readonly gwBytes: Uint8Array | null;
  constructor(
    /** LANE_*. */
    readonly lane: number,
    /** Output interface name given to the hooks ('' = the lane's default name). */
    readonly dev: string,
    readonly gw: string | undefined,
  ) {
    this.gwBytes = gw === undefined ? null : parseAddress(gw);
  }
}

/** Liqo's interface names on the gateway. */
export interface SteerDevices {
  /** The WireGuard tunnel (Liqo: liqo-tunnel). */
  readonly tunnel: string;
  /** The gateway host's default interface (Liqo's remap rules exclude it: eth0). */
  readonly host: string;
}

export class Steering<G> {
  readonly policy = new PolicyRouter<SteerHop>();
  private readonly iifIds = new Map<string, number>();
  private readonly nodeDevs = new Map<G, string>();
  private readonly nodeIifs = new Map<G, number>();

  constructor(readonly devices: SteerDevices) {
    this.iifId(devices.tunnel);
    this.iifId(devices.host);
  }

  /** The policy router's input id of an interface name (stable; allocated on first use). */
  iifId(name: string): number {
    let id = this.iifIds.get(name);
    if (id === undefined) {
      id = this.iifIds.size + 1;
      this.iifIds.set(name, id);
    }
    return id;
  }

  /** Names a node tunnel's Geneve interface (Liqo's InternalNode .spec.interface.gateway.name). */
  setNodeDevice(tunnel: G, name: string): void {
    this.nodeDevs.set(tunnel, name);
    this.nodeIifs.set(tunnel, this.iifId(name));
  }

  clearNodeDevices(): void {
    this.nodeDevs.clear();
    this.nodeIifs.clear();
  }

  /** The interface name of a node tunnel ('' when not named). */
  nodeDevice(tunnel: G | undefined): string {
    return tunnel === undefined ? '' : (this.nodeDevs.get(tunnel) ?? '');
  }

  /** Input id of a node tunnel (0: unknown, matches only rules without iif). */
  nodeIif(tunnel: G | undefined): number {
    return tunnel === undefined ? 0 : (this.nodeIifs.get(tunnel) ?? 0);
  }

  get tunnelIif(): number {
    return this.iifIds.get(this.devices.tunnel)!;
  }

  get hostIif(): number {
    return this.iifIds.get(this.devices.host)!;
  }
}
