/**
 * The bounded ring of packet copies the in-memory network queues in (memory-net.ts): its wire,
 * and each device's host side (memory-device.ts). Full means a counted drop for the caller,
 * never growth; slots are allocated on first use and reused.
 */
/** A bounded ring of packet copies with their metadata (the wire, a device's host side). */
export class Ring {
  readonly slots: (Uint8Array | undefined)[];
  readonly lens: Uint32Array;
  readonly due: Float64Array;
  head = 0;
  count = 0;
  constructor(readonly capacity: number) {
    if (!(Number.isInteger(capacity) && capacity >= 1))
      throw new RangeError(`memory net: queue ${capacity} must be a positive integer`);
    this.slots = new Array<Uint8Array | undefined>(capacity);
    this.lens = new Uint32Array(capacity);
    this.due = new Float64Array(capacity);
  }
  /** Copies buf[off, +len) in; returns its index, or -1 when full. */
  push(buf: Uint8Array, off: number, len: number, due: number): number {
    if (this.count === this.capacity) return -1;
    const i = (this.head + this.count) % this.capacity;
    let s = this.slots[i];
    if (s === undefined || s.length < len) s = this.slots[i] = new Uint8Array(Math.max(len, 2048));
    s.set(buf.subarray(off, off + len));
    this.lens[i] = len;
    this.due[i] = due;
    this.count++;
    return i;
  }
  pop(): void {
    this.head = (this.head + 1) % this.capacity;
    this.count--;
  }
}
