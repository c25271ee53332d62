/**
 * Our session indices → entries (wireguard-go's IndexTable): a handshake in flight (keypair
 * null) or a session. Transport messages find their keypair here by the receiver index.
 */
import type { Keypair } from './keypair.js';
import type { Peer } from './peer.js';

/** An index-table entry: a handshake in flight (keypair null) or a session. */
export class IndexEntry {
  constructor(
    readonly peer: Peer,
    public keypair: Keypair | null,
  ) {}
}

/**
 * Keyed by the index's int32 bit pattern. Indices are uint32 everywhere else; as a key, a
 * uint32 ≥ 2^31 would be a boxed heap number in V8 and cost an allocation on every transport
 * message, while an int32 is always a small integer.
 */
export class IndexTable {
  private readonly map = new Map<number, IndexEntry>();

  get size(): number {
    return this.map.size;
  }

  get(index: number): IndexEntry | undefined {
    return this.map.get(index | 0);
  }

  /** The entry for the little-endian index at buf[off, off+4) (a receiver field). */
  getAt(buf: Uint8Array, off: number): IndexEntry | undefined {
    return this.map.get(buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24));
  }

  has(index: number): boolean {
    return this.map.has(index | 0);
  }

  set(index: number, e: IndexEntry): void {
    this.map.set(index | 0, e);
  }

  delete(index: number): boolean {
    return this.map.delete(index | 0);
  }
}
