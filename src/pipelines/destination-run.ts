/**
 * The destination address of the inner packet whose peer was looked up last, to tell whether
 * the next packet goes to the same place. Segments of one super-packet (and most of a bulk
 * batch) share a destination, so WireGuardPort.encryptBatch reuses the peer it looked up while
 * this says "same": one allowed-IPs lookup per run instead of per packet. Copied bytes, since
 * the packet is encrypted in place right after.
 */
export class DestinationRun {
  private readonly dst = new Uint8Array(16);
  private version = 0;

  /** Remembers buf[off, +len)'s destination (an IPv4 or IPv6 header; anything else: none). */
  remember(buf: Uint8Array, off: number, len: number): void {
    const v = len >= 40 ? buf[off] >>> 4 : len >= 20 && buf[off] >>> 4 === 4 ? 4 : 0;
    this.version = v;
    if (v === 4) for (let k = 0; k < 4; k++) this.dst[k] = buf[off + 16 + k];
    else if (v === 6) for (let k = 0; k < 16; k++) this.dst[k] = buf[off + 24 + k];
  }

  /** Whether buf[off, +len) has the remembered destination. */
  same(buf: Uint8Array, off: number, len: number): boolean {
    const v = this.version;
    const d = this.dst;
    if (v === 4) {
      return (
        len >= 20 &&
        buf[off] >>> 4 === 4 &&
        buf[off + 16] === d[0] &&
        buf[off + 17] === d[1] &&
        buf[off + 18] === d[2] &&
        buf[off + 19] === d[3]
      );
    }
    if (v !== 6 || len < 40 || buf[off] >>> 4 !== 6) return false;
    for (let k = 0; k < 16; k++) if (buf[off + 24 + k] !== d[k]) return false;
    return true;
  }
}
