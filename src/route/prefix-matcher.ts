import { readIpv4U32, type Prefix } from '../packet/addr.js';
import { PrefixTable } from './table.js';

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
    for (let i = 0; i < n; i++) if ((a & masks[i]!) >>> 0 === nets[i]) return this.vals[i];
    return undefined;
  }
}
