/**
 * The bounded ring that holds screened handshake messages until the port processes them, a few
 * per event-loop turn, so a handshake flood cannot starve data. Each message is copied into a
 * fixed slot with its source; a full ring (or an oversized message) refuses and the caller
 * counts the drop. Its depth is what puts the engine "under load" (mac2 cookies demanded).
 * Apart from wireguard-port.ts because it is storage with its own bound, not I/O.
 */

/** Bytes per slot: the largest handshake message is 148 bytes. */
export const HANDSHAKE_SLOT = 256;

export class HandshakeRing {
  /** Slot i's message is buf[i * HANDSHAKE_SLOT, + lengthOf(i)). */
  readonly buf: Uint8Array;
  private readonly len: Uint16Array;
  private readonly port: Uint16Array;
  private readonly addr: string[];
  private head = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    this.buf = new Uint8Array(capacity * HANDSHAKE_SLOT);
    this.len = new Uint16Array(capacity);
    this.port = new Uint16Array(capacity);
    this.addr = new Array<string>(capacity).fill('');
  }

  /** Messages waiting. */
  get depth(): number {
    return this.count;
  }

  /** At least 1/8 full: the engine should demand mac2 cookies. */
  get underLoad(): boolean {
    return this.count >= this.capacity >>> 3;
  }

  /** Copies buf[off, +len) from address:port into the next slot; false (nothing kept) when full or too long. */
  push(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    if (this.count >= this.capacity || len > HANDSHAKE_SLOT) return false;
    const slot = (this.head + this.count) % this.capacity;
    this.buf.set(buf.subarray(off, off + len), slot * HANDSHAKE_SLOT);
    this.len[slot] = len;
    this.port[slot] = port;
    this.addr[slot] = address;
    this.count++;
    return true;
  }

  /**
   * Takes the oldest message (the ring must not be empty): writes its source into `from` and
   * returns its slot. The slot's bytes stay valid until the next push.
   */
  shift(from: { address: string; port: number }): number {
    const slot = this.head;
    this.head = (this.head + 1) % this.capacity;
    this.count--;
    from.address = this.addr[slot];
    from.port = this.port[slot];
    return slot;
  }

  lengthOf(slot: number): number {
    return this.len[slot];
  }
}
