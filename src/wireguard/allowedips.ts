/**
 * Cryptokey routing (whitepaper §2): one longest-prefix table per family mapping allowed IPs to
 * peers. Outbound, the destination address picks the peer; inbound, the inner source address
 * must map back to the peer whose session decrypted the packet.
 *
 * A prefix belongs to at most one peer: inserting a prefix another peer holds moves it, as in
 * wireguard-go and Linux. Lookups read the address in place from the packet (no allocation);
 * configuration methods allocate.
 */
import { PrefixTable } from '../route/table.js';
import { compareAddress, makePrefix, type Prefix } from '../packet/addr.js';
import { IPV4_DST_OFFSET, IPV4_SRC_OFFSET } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_SRC_OFFSET } from '../packet/ipv6.js';

export class AllowedIps<P> {
  private readonly v4 = new PrefixTable<P>(4);
  private readonly v6 = new PrefixTable<P>(6);

  get size(): number {
    return this.v4.size + this.v6.size;
  }

  /** Give `prefix` to `peer` (taking it from any other peer). */
  insert(prefix: Prefix, peer: P): void {
    this.table(prefix).insert(prefix.addr, prefix.prefixLen, peer);
  }

  /** Remove `prefix` if `peer` holds it. */
  remove(prefix: Prefix, peer: P): boolean {
    const t = this.table(prefix);
    if (t.get(prefix.addr, prefix.prefixLen) !== peer) return false;
    return t.remove(prefix.addr, prefix.prefixLen);
  }

  /** Remove every prefix of `peer`; returns how many. */
  removeByPeer(peer: P): number {
    return this.v4.removeValue(peer) + this.v6.removeValue(peer);
  }

  /** Who holds exactly this prefix. */
  owner(prefix: Prefix): P | undefined {
    return this.table(prefix).get(prefix.addr, prefix.prefixLen);
  }

  /** Peer for the destination of the IPv4 packet whose header starts at buf[ipOff]. */
  lookupV4Destination(buf: Uint8Array, ipOff: number): P | undefined {
    return this.v4.lookup(buf, ipOff + IPV4_DST_OFFSET);
  }

  lookupV6Destination(buf: Uint8Array, ipOff: number): P | undefined {
    return this.v6.lookup(buf, ipOff + IPV6_DST_OFFSET);
  }

  lookupV4Source(buf: Uint8Array, ipOff: number): P | undefined {
    return this.v4.lookup(buf, ipOff + IPV4_SRC_OFFSET);
  }

  lookupV6Source(buf: Uint8Array, ipOff: number): P | undefined {
    return this.v6.lookup(buf, ipOff + IPV6_SRC_OFFSET);
  }

  /** The prefixes of `peer`, IPv4 first, each sorted by address then length (allocates). */
  prefixesOf(peer: P): Prefix[] {
    const out: Prefix[] = [];
    for (const t of [this.v4, this.v6]) {
      const mine: Prefix[] = [];
      for (const e of t.entries()) if (e.value === peer) mine.push(makePrefix(e.addr, e.prefixLen));
      mine.sort(comparePrefix);
      out.push(...mine);
    }
    return out;
  }

  clear(): void {
    this.v4.clear();
    this.v6.clear();
  }

  private table(prefix: Prefix): PrefixTable<P> {
    if (prefix.family === 4) return this.v4;
    if (prefix.family === 6) return this.v6;
    throw new TypeError(`prefix family must be 4 or 6, got ${String(prefix.family)}`);
  }
}

function comparePrefix(a: Prefix, b: Prefix): number {
  return compareAddress(a.addr, 0, b.addr, 0, a.addr.length) || a.prefixLen - b.prefixLen;
}
