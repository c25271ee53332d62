/**
 * The router's peers: each peer-table entry joined to the link the shell encrypts with, found
 * by link (a decrypted packet names the peer that decrypted it) or by PeerTable entry index
 * (the outbound lookup yields an entry). Apart from the router because adding, removing and
 * re-making peers is configuration; per packet the router only reads `byIndex`, `sole` and
 * `ofLink` (one cached map lookup).
 */
import type { PeerEntry } from './peer-table.js';
import { TunnelSpread } from './spread.js';

/** A peer as the router knows it: its peer-table entry and the link the shell encrypts with. */
export interface RouterPeer<P> {
  readonly name: string;
  readonly entry: PeerEntry;
  readonly link: P;
  /** Its tunnel's interface name for rules (PacketMeta.inDev / outDev) outside Liqo mode; '' none. */
  readonly dev: string;
  /**
   * Several tunnels (Liqo's ports): every tunnel's link, `link` first, and the flow spread over
   * them (spread.ts); null with one tunnel.
   */
  readonly spread: TunnelSpread<P> | null;
}

export class RouterPeers<P> {
  /** Router peers by PeerEntry.index. */
  byIndex: (RouterPeer<P> | undefined)[] = [];
  /** The only peer (a policy route to the tunnel device without gw names no peer). */
  sole: RouterPeer<P> | undefined = undefined;
  private readonly byLink = new Map<P, RouterPeer<P>>();
  private count = 0;
  /** The last link looked up and its peer: a batch usually comes from one peer. */
  private lastLink: P | undefined = undefined;
  private lastPeer: RouterPeer<P> | undefined = undefined;

  /**
   * Adds a peer; `more`: the links of its tunnels 1.. (a decrypted packet from any of them is
   * this peer's; outbound flows spread over all), or a spread to keep (a re-made peer). Throws
   * on a link or entry already added (API misuse).
   */
  add(name: string, entry: PeerEntry, link: P, dev: string, more: readonly P[] | TunnelSpread<P> = []): RouterPeer<P> {
    const spread =
      more instanceof TunnelSpread ? more : more.length === 0 ? null : new TunnelSpread<P>([link, ...more]);
    const links = spread === null ? [link] : spread.links;
    if (links[0] !== link) throw new Error(`router: peer ${name}'s spread does not start with its link`);
    for (const l of links) if (this.byLink.has(l)) throw new Error(`router: peer ${name}'s link is already added`);
    if (this.byIndex[entry.index] !== undefined) throw new Error(`router: peer entry ${entry.name} is already added`);
    const rp: RouterPeer<P> = { name, entry, link, dev, spread };
    for (const l of links) this.byLink.set(l, rp);
    this.byIndex[entry.index] = rp;
    this.count++;
    this.sole = this.count === 1 ? rp : undefined;
    return rp;
  }

  /** Removes `rp`; false when it is not (or no longer) this registry's peer. */
  remove(rp: RouterPeer<P>): boolean {
    if (this.byLink.get(rp.link) !== rp) return false;
    this.lastLink = undefined;
    this.lastPeer = undefined;
    for (const l of rp.spread === null ? [rp.link] : rp.spread.links) this.byLink.delete(l);
    this.byIndex[rp.entry.index] = undefined;
    this.count--;
    this.sole = this.count === 1 ? this.byIndex.find((x) => x !== undefined) : undefined;
    return true;
  }

  /** The peer of a link (undefined when not added), uncached. */
  get(link: P): RouterPeer<P> | undefined {
    return this.byLink.get(link);
  }

  /** The peer of a link, per packet: the last link's peer is kept. */
  ofLink(link: P): RouterPeer<P> | undefined {
    let rp = this.lastPeer;
    if (link !== this.lastLink || rp === undefined) {
      rp = this.byLink.get(link);
      if (rp === undefined) return undefined;
      this.lastLink = link;
      this.lastPeer = rp;
    }
    return rp;
  }

  /** Empties the registry and returns the peers it held. */
  clear(): RouterPeer<P>[] {
    const old = [...new Set(this.byLink.values())];
    this.byLink.clear();
    this.lastLink = undefined;
    this.lastPeer = undefined;
    this.byIndex = [];
    this.sole = undefined;
    this.count = 0;
    return old;
  }
}
