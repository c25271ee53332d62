/**
 * Stateless 1:1 prefix translation ("netmap"): the network bits of an address are replaced by
 * another prefix of the same length, the host bits are kept. This is what Liqo's nftables rules
 * `dnat prefix to` / `snat prefix to` do in its remap-podcidr and remap-externalcidr firewall
 * configurations (pkg/gateway/remapping).
 *
 * A `RemapTable` holds the prefixes of one lookup direction (both families) and answers, for an
 * address inside a packet, which `PrefixRemap` applies — without allocation.
 */

import { addressEquals, formatPrefix, readIpv4U32, writeIpv4U32, type IpFamily, type Prefix } from '../packet/addr.js';
import { PrefixTable } from '../route/table.js';

export class PrefixRemap {
  readonly family: IpFamily;
  /** The prefix matched. */
  readonly from: Prefix;
  /** The prefix whose network bits replace `from`'s. */
  readonly to: Prefix;
  /** from === to: the address is inside a peer CIDR but nothing is rewritten. */
  readonly identity: boolean;
  // IPv4 fast path: host-bit mask and target network as unsigned 32-bit integers.
  private readonly hostMask: number;
  private readonly toNet: number;

  constructor(from: Prefix, to: Prefix) {
    if (from.family !== to.family || from.prefixLen !== to.prefixLen) {
      throw new RangeError(`remap ${formatPrefix(from)} → ${formatPrefix(to)}: both prefixes need the same family and length`);
    }
    this.family = from.family;
    this.from = from;
    this.to = to;
    this.identity = addressEquals(from.addr, 0, to.addr, 0, from.addr.length);
    if (from.family === 4) {
      this.hostMask = from.prefixLen === 0 ? 0xffffffff : from.prefixLen === 32 ? 0 : (0xffffffff >>> from.prefixLen) >>> 0;
      this.toNet = readIpv4U32(to.addr, 0);
    } else {
      this.hostMask = 0;
      this.toNet = 0;
    }
  }

  /**
   * Write the translation of the address at src[srcOff] into dst[dstOff] (4 or 16 bytes).
   * src and dst must not overlap (use a scratch buffer; the caller needs the old bytes for the
   * incremental checksum update anyway).
   */
  translate(src: Uint8Array, srcOff: number, dst: Uint8Array, dstOff: number): void {
    if (this.family === 4) {
      const a = readIpv4U32(src, srcOff);
      writeIpv4U32(dst, dstOff, ((this.toNet & ~this.hostMask) | (a & this.hostMask)) >>> 0);
      return;
    }
    const len = this.from.prefixLen;
    const t = this.to.addr;
    for (let i = 0; i < 16; i++) {
      const bits = len - i * 8;
      if (bits >= 8) dst[dstOff + i] = t[i]!;
      else if (bits <= 0) dst[dstOff + i] = src[srcOff + i]!;
      else {
        const m = (0xff00 >>> bits) & 0xff;
        dst[dstOff + i] = (t[i]! & m) | (src[srcOff + i]! & ~m & 0xff);
      }
    }
  }

  toString(): string {
    return `${formatPrefix(this.from)} → ${formatPrefix(this.to)}`;
  }
}

/** Up to this many IPv4 prefixes are matched by a linear scan instead of the trie. */
export const SMALL_V4_SET = 8;

/**
 * Longest-prefix match over a set of prefixes of both families (values of type T), without
 * allocation per lookup. IPv6, and IPv4 sets larger than SMALL_V4_SET, use PrefixTable (the
 * route layer's trie); a small IPv4 set — the usual case: one or two pod CIDRs per peer — is
 * scanned linearly as 32-bit network/mask pairs ordered longest first, which measured faster
 * than a trie walk for a handful of prefixes (bench/nat.ts).
 */
export class PrefixMatcher<T> {
  private readonly v4 = new PrefixTable<T>(4);
  private readonly v6 = new PrefixTable<T>(6);
  private nets = new Uint32Array(0);
  private masks = new Uint32Array(0);
  private vals: T[] = [];
  private small = true;

  get size(): number {
    return this.v4.size + this.v6.size;
  }

  insert(p: Prefix, value: T): void {
    (p.family === 4 ? this.v4 : this.v6).insert(p.addr, p.prefixLen, value);
    if (p.family === 4) this.rebuild();
  }

  remove(p: Prefix): boolean {
    const ok = (p.family === 4 ? this.v4 : this.v6).remove(p.addr, p.prefixLen);
    if (p.family === 4) this.rebuild();
    return ok;
  }

  /** Remove every entry whose value === value. */
  removeValue(value: T): number {
    const n = this.v4.removeValue(value) + this.v6.removeValue(value);
    this.rebuild();
    return n;
  }

  clear(): void {
    this.v4.clear();
    this.v6.clear();
    this.rebuild();
  }

  private rebuild(): void {
    const entries = [...this.v4.entries()].sort((x, y) => y.prefixLen - x.prefixLen);
    this.small = entries.length <= SMALL_V4_SET;
    this.nets = new Uint32Array(this.small ? entries.length : 0);
    this.masks = new Uint32Array(this.small ? entries.length : 0);
    this.vals = [];
    if (!this.small) return;
    entries.forEach((e, i) => {
      this.nets[i] = readIpv4U32(e.addr, 0);
      this.masks[i] = e.prefixLen === 0 ? 0 : (0xffffffff << (32 - e.prefixLen)) >>> 0;
      this.vals.push(e.value);
    });
  }

  /** The value of the longest prefix containing the address at buf[off] (family fam). */
  lookup(buf: Uint8Array, off: number, fam: number): T | undefined {
    if (fam !== 4) return this.v6.lookup(buf, off);
    if (!this.small) return this.v4.lookup(buf, off);
    const nets = this.nets;
    const n = nets.length;
    if (n === 0) return undefined;
    const a = readIpv4U32(buf, off);
    const masks = this.masks;
    for (let i = 0; i < n; i++) if (((a & masks[i]!) >>> 0) === nets[i]) return this.vals[i];
    return undefined;
  }
}

/** Remaps keyed by the prefix they match (`from`), for IPv4 and IPv6. */
export class RemapTable {
  private readonly m = new PrefixMatcher<PrefixRemap>();

  get size(): number {
    return this.m.size;
  }

  add(r: PrefixRemap): void {
    this.m.insert(r.from, r);
  }

  remove(r: PrefixRemap): boolean {
    return this.m.remove(r.from);
  }

  /** The remap whose `from` contains the address at buf[off] (family `fam`), or undefined. */
  lookup(buf: Uint8Array, off: number, fam: number): PrefixRemap | undefined {
    return this.m.lookup(buf, off, fam);
  }
}
