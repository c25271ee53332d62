/**
 * A list of packets that live in one caller-owned buffer: offsets, lengths and an optional tag
 * per packet (the peer chosen for it, the tunnel it leaves by). One stage fills it, the next
 * flushes it; it is preallocated for a batch and never grows. Pushing past `capacity` is API
 * misuse (a caller sizes the list by its batch) and throws.
 *
 * Ownership: the list holds offsets into a buffer it does not own and references to tags until
 * `clear()`; no allocation after construction.
 */
export class PacketList<T = never> {
  readonly offs: Uint32Array;
  readonly lens: Uint32Array;
  /** tags[i] is the tag of packet i (undefined when pushed without one). */
  readonly tags: (T | undefined)[];
  count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`packet list capacity ${capacity} must be a positive integer`);
    this.offs = new Uint32Array(capacity);
    this.lens = new Uint32Array(capacity);
    this.tags = new Array<T | undefined>(capacity).fill(undefined);
  }

  push(off: number, len: number, tag?: T): void {
    const i = this.count;
    if (i === this.capacity) throw new RangeError(`packet list full (${this.capacity})`);
    this.offs[i] = off;
    this.lens[i] = len;
    this.tags[i] = tag;
    this.count = i + 1;
  }

  /** Empties the list and drops its tag references. */
  clear(): void {
    const t = this.tags;
    for (let i = 0; i < this.count; i++) t[i] = undefined;
    this.count = 0;
  }
}
