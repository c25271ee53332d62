/**
 * The router's peers: each peer-table entry joined to the link the shell encrypts with, found
 * by link (a decrypted packet names the peer that decrypted it) or by PeerTable entry index
 * (the outbound lookup yields an entry). Apart from the router because adding, removing and
 * re-making peers is configuration; per packet the router only reads `byIndex`, `sole` and
 * `ofLink` (one cached map lookup).
 */
import type { PeerEntry } from './peer-table.js';

/** A peer as the router knows it: its peer-table entry and the link the shell encrypts with. */
export interface RouterPeer<P> {
  readonly name: string;
  readonly entry: PeerEntry;
  readonly link: P;
  /** Its tunnel's interface name for rules (PacketMeta.inDev / outDev) outside Liqo mode; '' none. */
  readonly dev: string;
}

export class RouterPeers<P> {
  /** Router peers by PeerEntry.index. */
  byIndex: (RouterPeer<P> | undefined)[] = [];
  /** The only peer (a policy route to the tunnel device without gw names no peer). */
  sole: RouterPeer<P> | undefined = undefined;
  private readonly byLink = new Map<P, RouterPeer<P>>();
  /** The last link looked up and its peer: a batch usually comes from one peer. */
  private lastLink: P | undefined = undefined;
  private lastPeer: RouterPeer<P> | undefined = undefined;

  /** Adds a peer. Throws on a link or entry already added (API misuse). */
  add(name: string, entry: PeerEntry, link: P, dev: string): RouterPeer<P> {
    if (this.byLink.has(link)) throw new Error(`router: peer ${name}'s link is already added`);
    if (this.byIndex[entry.index] !== undefined) throw new Error(`router: peer entry ${entry.name} is already added`);
    const rp: RouterPeer<P> = { name, entry, link, dev };
    this.byLink.set(link, rp);
    this.byIndex[entry.index] = rp;
    this.sole = this.byLink.size === 1 ? rp : undefined;
    return rp;
  }

  /** Removes `rp`; false when it is not (or no longer) this registry's peer. */
  remove(rp: RouterPeer<P>): boolean {
    if (this.byLink.get(rp.link) !== rp) return false;
    this.lastLink = undefined;
    this.lastPeer = undefined;
    this.byLink.delete(rp.link);
    this.byIndex[rp.entry.index] = undefined;
    this.sole = this.byLink.size === 1 ? this.byLink.values().next().value : undefined;
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
    const old = [...this.byLink.values()];
    this.byLink.clear();
    this.lastLink = undefined;
    this.lastPeer = undefined;
    this.byIndex = [];
    this.sole = undefined;
    return old;
  }
}
