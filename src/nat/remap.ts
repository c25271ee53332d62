/**
 * Stateless 1:1 prefix translation ("netmap"): the network bits of an address are replaced by
 * another prefix of the same length, the host bits are kept. This is what Liqo's nftables rules
 * `dnat prefix to` / `snat prefix to` do in its remap-podcidr and remap-externalcidr firewall
 * configurations (pkg/gateway/remapping).
 *
 * A `RemapTable` holds the prefixes of one lookup direction (both families) and answers, for an
 * address inside a packet, which `PrefixRemap` applies — without allocation.
 */

import { formatPrefix, type IpFamily, type Prefix } from '../packet/addr.js';
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
    let same = true;
    for (let i = 0; i < from.addr.length; i++) if (from.addr[i] !== to.addr[i]) same = false;
    this.identity = same;
    if (from.family === 4) {
      this.hostMask = from.prefixLen === 0 ? 0xffffffff : from.prefixLen === 32 ? 0 : (0xffffffff >>> from.prefixLen) >>> 0;
      const a = to.addr;
      this.toNet = ((a[0]! << 24) | (a[1]! << 16) | (a[2]! << 8) | a[3]!) >>> 0;
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
      const a = ((src[srcOff]! << 24) | (src[srcOff + 1]! << 16) | (src[srcOff + 2]! << 8) | src[srcOff + 3]!) >>> 0;
      const v = ((this.toNet & ~this.hostMask) | (a & this.hostMask)) >>> 0;
      dst[dstOff] = v >>> 24;
      dst[dstOff + 1] = (v >>> 16) & 0xff;
      dst[dstOff + 2] = (v >>> 8) & 0xff;
      dst[dstOff + 3] = v & 0xff;
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

/** Longest-prefix lookup of remaps by the prefix they match, for IPv4 and IPv6. */
export class RemapTable {
  private readonly v4 = new PrefixTable<PrefixRemap>(4);
  private readonly v6 = new PrefixTable<PrefixRemap>(6);

  get size(): number {
    return this.v4.size + this.v6.size;
  }

  add(r: PrefixRemap): void {
    (r.family === 4 ? this.v4 : this.v6).insert(r.from.addr, r.from.prefixLen, r);
  }

  remove(r: PrefixRemap): boolean {
    return (r.family === 4 ? this.v4 : this.v6).remove(r.from.addr, r.from.prefixLen);
  }

  /** The remap whose `from` contains the address at buf[off] (family `fam`), or undefined. */
  lookup(buf: Uint8Array, off: number, fam: number): PrefixRemap | undefined {
    return fam === 4 ? this.v4.lookup(buf, off) : this.v6.lookup(buf, off);
  }
}
