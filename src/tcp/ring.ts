/**
 * A byte ring of a fixed, caller-chosen capacity: a TCP send or receive buffer. Positions are
 * counted from the oldest byte held (0 = head). Bytes past `size` may be written ahead
 * (`writeAt`, out-of-order data) and made part of the ring later (`commit`). Nothing allocates
 * after construction; nothing grows.
 */
export class ByteRing {
  readonly buf: Uint8Array;
  private head = 0;
  private length = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity ${capacity} must be ≥ 1`);
    this.buf = new Uint8Array(capacity);
  }

  /** Bytes held. */
  get size(): number {
    return this.length;
  }

  /** Bytes that can still be appended. */
  get free(): number {
    return this.capacity - this.length;
  }

  /** Appends up to `len` bytes of src[off..]; returns how many were taken. */
  write(src: Uint8Array, off: number, len: number): number {
    const n = Math.min(len, this.capacity - this.length);
    this.writeAt(this.length, src, off, n);
    this.length += n;
    return n;
  }

  /**
   * Copies src[off, +len) to position `pos` (≥ 0) without changing `size`; pos + len must not
   * exceed the capacity (throws: a caller bug).
   */
  writeAt(pos: number, src: Uint8Array, off: number, len: number): void {
    if (pos < 0 || pos + len > this.capacity) throw new RangeError(`ring write ${pos}+${len} beyond ${this.capacity}`);
    let at = this.head + pos;
    if (at >= this.capacity) at -= this.capacity;
    const first = Math.min(len, this.capacity - at);
    this.buf.set(src.subarray(off, off + first), at);
    if (first < len) this.buf.set(src.subarray(off + first, off + len), 0);
  }

  /** Makes `n` bytes written ahead with writeAt part of the ring. */
  commit(n: number): void {
    if (n < 0 || this.length + n > this.capacity) throw new RangeError(`ring commit ${n} beyond free ${this.free}`);
    this.length += n;
  }

  /** Copies `len` bytes from position `pos` to dst[off..] without consuming them. */
  peek(pos: number, dst: Uint8Array, off: number, len: number): void {
    if (pos < 0 || pos + len > this.length) throw new RangeError(`ring peek ${pos}+${len} beyond size ${this.length}`);
    let at = this.head + pos;
    if (at >= this.capacity) at -= this.capacity;
    const first = Math.min(len, this.capacity - at);
    dst.set(this.buf.subarray(at, at + first), off);
    if (first < len) dst.set(this.buf.subarray(0, len - first), off + first);
  }

  /** Drops the `n` oldest bytes. */
  discard(n: number): void {
    if (n < 0 || n > this.length) throw new RangeError(`ring discard ${n} beyond size ${this.length}`);
    this.head += n;
    if (this.head >= this.capacity) this.head -= this.capacity;
    this.length -= n;
  }

  /** Moves up to `len` of the oldest bytes to dst[off..]; returns how many. */
  read(dst: Uint8Array, off: number, len: number): number {
    const n = Math.min(len, this.length);
    this.peek(0, dst, off, n);
    this.discard(n);
    return n;
  }
}
