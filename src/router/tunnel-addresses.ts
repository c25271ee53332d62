/**
 * In-tunnel addresses as the router looks them up per packet: ours (on the host), each peer's
 * (see src/control/tunnel-address.ts), and the tunnel (link) each peer address lies in, so the
 * host's traffic to it — a tunnel's connection check — takes that tunnel and not the spread.
 * Replaced whole by set(); lookups allocate nothing.
 */
import { PrefixMatcher } from '../route/prefix-matcher.js';
import { hostMatcher } from './addresses.js';
import type { RouterPeer } from './peers.js';

export class TunnelAddresses<P> {
  local = new PrefixMatcher<true>();
  remote = new PrefixMatcher<RouterPeer<P>>();
  link = new PrefixMatcher<P>();

  /** `link`: the tunnel the address lies in (default the peer's first). */
  set(locals: readonly string[], remotes: readonly { address: string; peer: RouterPeer<P>; link?: P }[]): void {
    const l = hostMatcher(locals.map((a) => [a, true] as const));
    this.remote = hostMatcher(remotes.map((x) => [x.address, x.peer] as const));
    this.link = hostMatcher(remotes.map((x) => [x.address, x.link ?? x.peer.link] as const));
    this.local = l;
  }

  /** Forgets a removed peer's addresses and its tunnels'. */
  removePeer(rp: RouterPeer<P>): void {
    this.remote.removeValue(rp);
    for (const l of rp.spread === null ? [rp.link] : rp.spread.links) this.link.removeValue(l);
  }

  /** The peers were rebuilt: their addresses point at old peers until set() again. */
  clearPeers(): void {
    this.remote = new PrefixMatcher<RouterPeer<P>>();
    this.link = new PrefixMatcher<P>();
  }
}
