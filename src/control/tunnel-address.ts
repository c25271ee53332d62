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
 * Pure: no I/O. Used by the gateway (addresses, allowed IPs, routes) and by the CLI (the check
 * itself), so both always agree.
 */

/** Liqo's tunnel-interface addresses: server side and client side of the /30. */
export const LIQO_TUNNEL_SERVER_ADDRESS = '169.254.18.1';
export const LIQO_TUNNEL_CLIENT_ADDRESS = '169.254.18.2';

/** What the plan reads from a gateway configuration (structurally a GatewayConfig). */
export interface TunnelAddressInput {
  readonly wireguard: { readonly tunnelAddress?: string | undefined };
  readonly peers: readonly {
    readonly name: string;
    readonly clusterId: string;
    readonly endpoint?: string | undefined;
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
    const d = defaultTunnelAddresses(p);
    const local = cfg.wireguard.tunnelAddress ?? d.local;
    const remote = p.tunnelAddress ?? d.remote;
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
      skipped.push({ name: p.name, clusterId: p.clusterId, reason });
      continue;
    }
    if (!locals.has(local)) locals.set(local, p.name);
    remotes.set(remote, p.name);
    peers.push({ name: p.name, clusterId: p.clusterId, local, remote });
  }
  return { peers, skipped };
}
