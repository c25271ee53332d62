/**
 * Reading the 24-byte address records of native.ts back: a record's port and family, and its
 * address as text through a bounded interner, so a steady sender costs no allocation per
 * datagram. Apart from udp.ts because the receive paths and the pipelines read records without
 * needing a socket; writing a record (encodeAddress) stays with the socket's send path.
 */
import { ADDR_FAMILY_OFFSET, ADDR_IP_OFFSET, ADDR_PORT_OFFSET, ADDR_SCOPE_OFFSET } from './native.js';
import { formatAddress } from '../packet/addr.js';

/** The port of the record at rec[off..]. */
export function recordPort(rec: Uint8Array, off: number): number {
  return (rec[off + ADDR_PORT_OFFSET] << 8) | rec[off + ADDR_PORT_OFFSET + 1];
}

/** The family of the record at rec[off..] (0: not an address). */
export function recordFamily(rec: Uint8Array, off: number): 4 | 6 | 0 {
  const f = rec[off + ADDR_FAMILY_OFFSET];
  return f === 4 || f === 6 ? f : 0;
}

/** Interns address strings by their bytes so repeated senders cost no allocation. Bounded. */
export class AddressInterner {
  private readonly v4 = new Map<number, string>();
  private readonly v6 = new Map<number, { bytes: Uint8Array; text: string }[]>();
  private size = 0;
  constructor(private readonly maxEntries = 4096) {}

  /** Text of the address in record rec[off..] (IPv6 without brackets; `%scope` when non-zero). */
  text(rec: Uint8Array, off: number): string {
    const fam = rec[off + ADDR_FAMILY_OFFSET];
    const a = off + ADDR_IP_OFFSET;
    if (fam === 4) {
      const key = ((rec[a] << 24) | (rec[a + 1] << 16) | (rec[a + 2] << 8) | rec[a + 3]) >>> 0;
      let s = this.v4.get(key);
      if (s === undefined) {
        s = `${rec[a]}.${rec[a + 1]}.${rec[a + 2]}.${rec[a + 3]}`;
        this.remember();
        this.v4.set(key, s);
      }
      return s;
    }
    if (fam !== 6) throw new TypeError(`address record has family ${fam}`);
    const scope =
      rec[off + ADDR_SCOPE_OFFSET] |
      (rec[off + ADDR_SCOPE_OFFSET + 1] << 8) |
      (rec[off + ADDR_SCOPE_OFFSET + 2] << 16) |
      (rec[off + ADDR_SCOPE_OFFSET + 3] << 24);
    let h = scope | 0;
    for (let i = 0; i < 16; i++) h = Math.imul(h ^ rec[a + i], 0x01000193);
    const bucket = this.v6.get(h);
    if (bucket) {
      for (const e of bucket) {
        let same = true;
        for (let i = 0; i < 16 && same; i++) same = e.bytes[i] === rec[a + i];
        if (same && e.bytes[16] === (scope & 0xff)) return e.text;
      }
    }
    const bytes = new Uint8Array(17);
    bytes.set(rec.subarray(a, a + 16));
    bytes[16] = scope & 0xff;
    const text = formatAddress(rec, a, 6) + (scope !== 0 ? `%${scope >>> 0}` : '');
    this.remember();
    if (bucket) bucket.push({ bytes, text });
    else this.v6.set(h, [{ bytes, text }]);
    return text;
  }

  private remember(): void {
    if (++this.size > this.maxEntries) {
      // Bounded: forget everything rather than grow (a scan of random sources cannot exhaust memory).
      this.v4.clear();
      this.v6.clear();
      this.size = 1;
    }
  }
}
