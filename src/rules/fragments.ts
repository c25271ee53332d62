/**
 * The connection of a datagram's first fragment, remembered for its later fragments (the rules
 * runtime does not reassemble; runtime.ts header). Keyed by (source, destination, protocol, IP
 * id) in FRAG_SLOTS slots, a newer datagram overwriting an older one in its slot; an entry is
 * valid for FRAG_TTL ms. Per packet: no allocation.
 */
import type { IpView } from '../packet/ip-view.js';
import { read16 } from '../nat/rewrite.js';
import { readU32BE } from '../packet/flow-mix.js';

const FRAG_SLOTS = 256;
/** How long a first fragment's connection is remembered for the datagram's other fragments (ms). */
const FRAG_TTL = 30_000;

export class FragmentMemory {
  private readonly src = new Uint32Array(FRAG_SLOTS);
  private readonly dst = new Uint32Array(FRAG_SLOTS);
  private readonly idProto = new Int32Array(FRAG_SLOTS).fill(-1);
  private readonly conn = new Int32Array(FRAG_SLOTS);
  private readonly expires = new Float64Array(FRAG_SLOTS);

  private slot(buf: Uint8Array, v: IpView): number {
    const x = Math.imul(
      readU32BE(buf, v.srcOff) ^
        Math.imul(readU32BE(buf, v.dstOff), 0x9e3779b1) ^
        (read16(buf, v.off + 4) << 8) ^
        v.proto,
      0x85ebca6b,
    );
    return (x ^ (x >>> 15)) & (FRAG_SLOTS - 1);
  }

  /** A first fragment (MF set) of connection key k (entry * 2 + direction). */
  remember(buf: Uint8Array, v: IpView, k: number, now: number): void {
    const i = this.slot(buf, v);
    this.src[i] = readU32BE(buf, v.srcOff);
    this.dst[i] = readU32BE(buf, v.dstOff);
    this.idProto[i] = (read16(buf, v.off + 4) << 8) | v.proto;
    this.conn[i] = k;
    this.expires[i] = now + FRAG_TTL;
  }

  /** The connection key remembered for this non-first fragment's datagram, or -1. */
  lookup(buf: Uint8Array, v: IpView, now: number): number {
    const i = this.slot(buf, v);
    if (
      this.idProto[i] !== ((read16(buf, v.off + 4) << 8) | v.proto) ||
      this.src[i] !== readU32BE(buf, v.srcOff) ||
      this.dst[i] !== readU32BE(buf, v.dstOff) ||
      this.expires[i]! <= now
    )
      return -1;
    return this.conn[i]!;
  }
}
