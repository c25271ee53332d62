/**
 * Stateless 1:1 prefix translation ("netmap"): the network bits of an address are replaced by
 * another prefix of the same length, the host bits are kept. This is what Liqo's nftables rules
 * `dnat prefix to` / `snat prefix to` do in its remap-podcidr and remap-externalcidr firewall
 * configurations (pkg/gateway/remapping).

 * The compiled rules' prefix NAT (src/rules/compile.ts) applies it without allocation.
 */

import { addressEquals, formatPrefix, readIpv4U32, writeIpv4U32, type IpFamily, type Prefix } from '../packet/addr.js';

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
      throw new RangeError(
        `remap ${formatPrefix(from)} → ${formatPrefix(to)}: both prefixes need the same family and length`,
      );
    }
    this.family = from.family;
    this.from = from;
    this.to = to;
    this.identity = addressEquals(from.addr, 0, to.addr, 0, from.addr.length);
    if (from.family === 4) {
      this.hostMask =
        from.prefixLen === 0 ? 0xffffffff : from.prefixLen === 32 ? 0 : (0xffffffff >>> from.prefixLen) >>> 0;
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
