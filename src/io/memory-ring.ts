/**
 * The bounded queues of packet copies the in-memory network keeps (memory-net.ts): each device's
 * host side (a FIFO ring, memory-device.ts) and the wire (earliest due first). Full means a
 * counted drop for the caller, never growth; slots are allocated on first use and reused.
 */

const checkCapacity = (capacity: number): void => {
  if (!(Number.isInteger(capacity) && capacity >= 1))
    throw new RangeError(`memory net: queue ${capacity} must be a positive integer`);
};

/** Copies buf[off, +len) into slot i (allocated, or grown, on first need). */
function copyIn(slots: (Uint8Array | undefined)[], i: number, buf: Uint8Array, off: number, len: number): void {
  let s = slots[i];
  if (s === undefined || s.length < len) s = slots[i] = new Uint8Array(Math.max(len, 2048));
  s.set(buf.subarray(off, off + len));
}

/** A bounded FIFO ring of packet copies (a device's host side). */
export class Ring {
  readonly slots: (Uint8Array | undefined)[];
  readonly lens: Uint32Array;
  head = 0;
  count = 0;
  constructor(readonly capacity: number) {
    checkCapacity(capacity);
    this.slots = new Array<Uint8Array | undefined>(capacity);
    this.lens = new Uint32Array(capacity);
  }
  /** Copies buf[off, +len) in; returns its index, or -1 when full. */
  push(buf: Uint8Array, off: number, len: number): number {
    if (this.count === this.capacity) return -1;
    const i = (this.head + this.count) % this.capacity;
    copyIn(this.slots, i, buf, off, len);
    this.lens[i] = len;
    this.count++;
    return i;
  }
  pop(): void {
    this.head = (this.head + 1) % this.capacity;
    this.count--;
  }
}

/**
 * A bounded pool of packet copies handed out earliest `due` first, equal times in the order
 * pushed (the wire: with one latency for all, this is FIFO; delays and jitter reorder it). A
 * binary heap of slot indices over typed arrays: no allocation per packet.
 */
export class DueQueue {
  readonly slots: (Uint8Array | undefined)[];
  readonly lens: Uint32Array;
  readonly due: Float64Array;
  count = 0;
  private readonly order: Float64Array;
  private readonly heap: Int32Array;
  private readonly free: Int32Array;
  private freeCount: number;
  private pushed = 0;
  constructor(readonly capacity: number) {
    checkCapacity(capacity);
    this.slots = new Array<Uint8Array | undefined>(capacity);
    this.lens = new Uint32Array(capacity);
    this.due = new Float64Array(capacity);
    this.order = new Float64Array(capacity);
    this.heap = new Int32Array(capacity);
    this.free = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.free[i] = capacity - 1 - i;
    this.freeCount = capacity;
  }

  /** The slot index of the earliest copy (-1: empty); valid until the next pop. */
  get head(): number {
    return this.count > 0 ? this.heap[0]! : -1;
  }

  /** Copies buf[off, +len) in, due at `due`; returns its slot index, or -1 when full. */
  push(buf: Uint8Array, off: number, len: number, due: number): number {
    if (this.freeCount === 0) return -1;
    const i = this.free[--this.freeCount]!;
    copyIn(this.slots, i, buf, off, len);
    this.lens[i] = len;
    this.due[i] = due;
    this.order[i] = this.pushed++;
    const h = this.heap;
    let k = this.count++;
    while (k > 0) {
      const parent = (k - 1) >> 1;
      if (!this.before(i, h[parent]!)) break;
      h[k] = h[parent]!;
      k = parent;
    }
    h[k] = i;
    return i;
  }

  /** Removes the earliest copy (its slot's bytes stay readable until the next push). */
  pop(): void {
    const h = this.heap;
    this.free[this.freeCount++] = h[0]!;
    const n = --this.count;
    if (n === 0) return;
    const last = h[n]!;
    let k = 0;
    for (;;) {
      let c = 2 * k + 1;
      if (c >= n) break;
      if (c + 1 < n && this.before(h[c + 1]!, h[c]!)) c++;
      if (!this.before(h[c]!, last)) break;
      h[k] = h[c]!;
      k = c;
    }
    h[k] = last;
  }

  private before(a: number, b: number): boolean {
    const da = this.due[a]!;
    const db = this.due[b]!;
    return da < db || (da === db && this.order[a]! < this.order[b]!);
  }
}
