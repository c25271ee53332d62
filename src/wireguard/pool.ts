/**
 * Engine-owned packet buffers and the bounded outbox of messages to send.
 *
 * `BufferPool`: fixed-size slots, created lazily up to a bound and then recycled (steady state:
 * no allocation). Slots hold packets staged before a session exists, and every message the
 * engine itself produces (handshakes, cookie replies, keepalives, staged packets once
 * encrypted). A slot has TRANSPORT_HEADER_SIZE bytes of headroom before its packet and room for
 * padding + tag after it, so staged packets are encrypted in place like any other.
 *
 * `Outbox`: a FIFO ring of (slot, start, length, destination, peer, kind), bounded; when full the
 * new message is refused (the caller counts the drop and recycles the slot).
 */

export const OUT_INITIATION = 1;
export const OUT_RESPONSE = 2;
export const OUT_COOKIE_REPLY = 3;
export const OUT_TRANSPORT = 4;
export const OUT_KEEPALIVE = 5;

export class BufferPool {
  private readonly slots: Uint8Array[] = [];
  private readonly free: Int32Array;
  private freeCount = 0;

  constructor(
    readonly slotSize: number,
    readonly maxSlots: number,
  ) {
    if (!Number.isInteger(slotSize) || slotSize < 64)
      throw new RangeError(`slot size must be an integer >= 64, got ${slotSize}`);
    if (!Number.isInteger(maxSlots) || maxSlots < 1)
      throw new RangeError(`maxSlots must be a positive integer, got ${maxSlots}`);
    this.free = new Int32Array(maxSlots);
  }

  /** Slots ever created (never shrinks). */
  get allocated(): number {
    return this.slots.length;
  }

  /** Slots currently handed out. */
  get inUse(): number {
    return this.slots.length - this.freeCount;
  }

  /** A free slot index, or -1 when all maxSlots are in use. */
  acquire(): number {
    if (this.freeCount > 0) return this.free[--this.freeCount];
    if (this.slots.length >= this.maxSlots) return -1;
    this.slots.push(new Uint8Array(this.slotSize));
    return this.slots.length - 1;
  }

  release(slot: number): void {
    if (slot < 0 || slot >= this.slots.length) throw new RangeError(`no such buffer slot ${slot}`);
    this.free[this.freeCount++] = slot;
  }

  buffer(slot: number): Uint8Array {
    return this.slots[slot];
  }
}

/** What popOutgoing() hands to the caller; reuse one instance. */
export class OutgoingMessage<P> {
  /** Engine buffer slot; give it back with Device.releaseOutgoing(slot) once sent. */
  slot = -1;
  buf: Uint8Array = new Uint8Array(0);
  start = 0;
  length = 0;
  /** Destination UDP endpoint (IPv6 without brackets). */
  address = '';
  port = 0;
  /** The peer the message belongs to (null for a cookie reply to an unauthenticated source). */
  peer: P | null = null;
  /** OUT_* kind. */
  kind = 0;
}

export class Outbox<P> {
  private readonly slots: Int32Array;
  private readonly starts: Int32Array;
  private readonly lengths: Int32Array;
  private readonly ports: Int32Array;
  private readonly kinds: Int32Array;
  private readonly addresses: string[];
  private readonly peers: (P | null)[];
  private head = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`outbox capacity must be a positive integer, got ${capacity}`);
    this.slots = new Int32Array(capacity);
    this.starts = new Int32Array(capacity);
    this.lengths = new Int32Array(capacity);
    this.ports = new Int32Array(capacity);
    this.kinds = new Int32Array(capacity);
    this.addresses = new Array<string>(capacity).fill('');
    this.peers = new Array<P | null>(capacity).fill(null);
  }

  get size(): number {
    return this.count;
  }

  /** Queue a message; false when full (nothing queued). */
  push(
    slot: number,
    start: number,
    length: number,
    address: string,
    port: number,
    peer: P | null,
    kind: number,
  ): boolean {
    if (this.count === this.capacity) return false;
    const i = (this.head + this.count) % this.capacity;
    this.slots[i] = slot;
    this.starts[i] = start;
    this.lengths[i] = length;
    this.addresses[i] = address;
    this.ports[i] = port;
    this.peers[i] = peer;
    this.kinds[i] = kind;
    this.count++;
    return true;
  }

  /** Dequeue the oldest message into `out` (buf filled by the caller); false when empty. */
  shift(out: OutgoingMessage<P>): boolean {
    if (this.count === 0) return false;
    const i = this.head;
    out.slot = this.slots[i];
    out.start = this.starts[i];
    out.length = this.lengths[i];
    out.address = this.addresses[i];
    out.port = this.ports[i];
    out.peer = this.peers[i];
    out.kind = this.kinds[i];
    this.peers[i] = null;
    this.head = (this.head + 1) % this.capacity;
    this.count--;
    return true;
  }
}
