/**
 * Liqo's in-tunnel addresses: which address this gateway and each peer carry inside the
 * WireGuard tunnel, for the connection check (UDP 12345 between them, src/control/conncheck.ts).
 *
 * Liqo gives the WireGuard interface of a gateway SERVER 169.254.18.1 and the CLIENT's
 * 169.254.18.2 (one gateway per peer, so one pair per tunnel). In the configuration model a peer
 * with an `endpoint` is a server we connect to (so we are the client); a peer without one
 * connects to us (we are the server). `wireguard.tunnelAddress` / `peers[].tunnelAddress`
 * override those defaults, which lets one Weft gateway check several peers.
 *
 * An address can only be in one place: a peer whose tunnel address is already taken (by an
 * earlier peer in configuration order, or as one of our own tunnel addresses), or whose own
 * side would equal an earlier peer's address, is left out of the plan with a reason naming the
 * field to set. Such a peer simply has no in-tunnel check (its status follows the handshake).
 *
 * Several tunnels to a peer (Liqo's spec.endpoint.ports: one WireGuard interface per port,
 * `liqo-tunnel`, `liqo-tunnel1`, …): tunnel i's /30 is 169.254.18.4i/30, the server on .4i+1 and
 * the client on .4i+2; each tunnel gets its own entry (`tunnel` = i) and so its own check.
 * `tunnelAddress` overrides apply to tunnel 0.
 *
 * Pure: no I/O. Used by the gateway (addresses, allowed IPs, routes) and by the CLI (the check
 * itself), so both always agree.
 */

/** Liqo's tunnel-interface addresses: server side and client side of the /30. */
export const LIQO_TUNNEL_SERVER_ADDRESS = '169.254.18.1';
export const LIQO_TUNNEL_CLIENT_ADDRESS = '169.254.18.2';

/** Liqo's address of tunnel i's server (1) or client (2) side: 169.254.18.(4i + side). */
export function liqoTunnelAddress(side: 'server' | 'client', i: number): string {
  return `169.254.18.${4 * i + (side === 'server' ? 1 : 2)}`;
}

/** Liqo's name of tunnel i's interface: the base name, then base + i (liqo-tunnel, liqo-tunnel1, …). */
export function tunnelInterfaceName(base: string, i: number): string {
  return i === 0 ? base : `${base}${i}`;
}

/** How many tunnels a peer has: its endpoint's ports (we are the client), else our listen ports. */
export function tunnelCount(
  wireguard: { readonly listenPorts?: readonly number[] | undefined },
  peer: { readonly endpoint?: string | undefined; readonly endpointPorts?: readonly number[] | undefined },
): number {
  return peer.endpoint !== undefined ? (peer.endpointPorts?.length ?? 1) : (wireguard.listenPorts?.length ?? 1);
}

/** What the plan reads from a gateway configuration (structurally a GatewayConfig). */
export interface TunnelAddressInput {
  readonly wireguard: {
    readonly tunnelAddress?: string | undefined;
    readonly listenPorts?: readonly number[] | undefined;
  };
  readonly peers: readonly {
    readonly name: string;
    readonly clusterId: string;
    readonly endpoint?: string | undefined;
    readonly endpointPorts?: readonly number[] | undefined;
    readonly tunnelAddress?: string | undefined;
  }[];
}

/** One peer's pair of in-tunnel addresses. */
export interface PeerTunnelAddresses {
  readonly name: string;
  readonly clusterId: string;
  /** This gateway's address towards the peer (the check's source and bind address). */
  readonly local: string;
  /** The peer's address (the check's destination; a /32 or /128 in its allowed IPs). */
  readonly remote: string;
  /** Which of the peer's tunnels (0: the first, the only one with a single port). */
  readonly tunnel: number;
}

export interface SkippedTunnelPeer {
  readonly name: string;
  readonly clusterId: string;
  /** Names the conflict and the field that resolves it. */
  readonly reason: string;
}

export interface TunnelPlan {
  /** Peers with usable tunnel addresses, in configuration order. */
  readonly peers: readonly PeerTunnelAddresses[];
  readonly skipped: readonly SkippedTunnelPeer[];
}

/** Liqo's default pair for a peer (see the module header): the side with an endpoint is the client. */
export function defaultTunnelAddresses(peer: { readonly endpoint?: string | undefined }): {
  local: string;
  remote: string;
} {
  return peer.endpoint !== undefined
    ? { local: LIQO_TUNNEL_CLIENT_ADDRESS, remote: LIQO_TUNNEL_SERVER_ADDRESS }
    : { local: LIQO_TUNNEL_SERVER_ADDRESS, remote: LIQO_TUNNEL_CLIENT_ADDRESS };
}

/** The tunnel addresses of every peer of `cfg` (see the module header). Allocates. */
export function planTunnelAddresses(cfg: TunnelAddressInput): TunnelPlan {
  const peers: PeerTunnelAddresses[] = [];
  const skipped: SkippedTunnelPeer[] = [];
  const locals = new Map<string, string>(); // address → first peer using it as our side
  const remotes = new Map<string, string>(); // address → peer owning it
  for (const p of cfg.peers) {
    const n = tunnelCount(cfg.wireguard, p);
    const client = p.endpoint !== undefined;
    for (let i = 0; i < n; i++) {
      const d = defaultTunnelAddresses(p);
      const local =
        i === 0 ? (cfg.wireguard.tunnelAddress ?? d.local) : liqoTunnelAddress(client ? 'client' : 'server', i);
      const remote = i === 0 ? (p.tunnelAddress ?? d.remote) : liqoTunnelAddress(client ? 'server' : 'client', i);
      let reason: string | undefined;
      if (remote === local) {
        reason = `its tunnel address ${remote} equals this gateway's; set peers[].tunnelAddress or wireguard.tunnelAddress`;
      } else if (remotes.has(remote)) {
        reason = `tunnel address ${remote} is already peer ${remotes.get(remote)!}'s; set a distinct peers[].tunnelAddress`;
      } else if (locals.has(remote)) {
        reason = `tunnel address ${remote} is this gateway's own (towards peer ${locals.get(remote)!}); set peers[].tunnelAddress`;
      } else if (remotes.has(local)) {
        reason = `this gateway's tunnel address towards it (${local}) is peer ${remotes.get(local)!}'s; set wireguard.tunnelAddress`;
      }
      if (reason !== undefined) {
        skipped.push({ name: p.name, clusterId: p.clusterId, reason: i === 0 ? reason : `tunnel ${i}: ${reason}` });
        continue;
      }
      if (!locals.has(local)) locals.set(local, p.name);
      remotes.set(remote, p.name);
      peers.push({ name: p.name, clusterId: p.clusterId, local, remote, tunnel: i });
    }
  }
  return { peers, skipped };
}
