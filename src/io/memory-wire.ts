/**
 * An in-memory UDP network for simulations, examples and tests: endpoints ("address:port")
 * with a receiver each, and a bounded FIFO ring of datagram slots between them. Sending copies
 * the datagram into a slot (that copy IS the wire) after `headroom` bytes, so a receiver can
 * decapsulate or decrypt in place and prepend headers; `pump()` hands the datagrams to their
 * receivers in order. No sockets, no timers: it runs when the caller pumps.
 *
 * Bounded: a full ring (or a datagram larger than a slot) is a counted drop, never growth;
 * slots are allocated on first use, so a large ring costs only what traffic fills. A datagram
 * for an endpoint nobody listens on is counted when its turn comes. Receivers get a view of the
 * slot valid only during the call.
 */

/** Gets a datagram: buf[off, off+len), with `headroom` bytes free before off. */
export type WireReceiver = (buf: Uint8Array, off: number, len: number, fromAddress: string, fromPort: number) => void;

export interface MemoryWireOptions {
  /** Datagrams in flight at most. Default 1024. */
  readonly slots?: number;
  /** Largest datagram. Default 1920. */
  readonly maxDatagram?: number;
  /** Free bytes in front of every delivered datagram. Default 128. */
  readonly headroom?: number;
}

function endpointKey(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

export class MemoryWire {
  private readonly slots: Uint8Array[] = [];
  private readonly lens: Int32Array;
  private readonly to: string[];
  private readonly fromAddr: string[];
  private readonly fromPort: Int32Array;
  private readonly capacity: number;
  private readonly slotSize: number;
  private readonly headroom: number;
  private head = 0;
  private count = 0;
  private readonly endpoints = new Map<string, WireReceiver>();
  /** Datagrams dropped because the ring was full or the datagram larger than a slot. */
  droppedFull = 0;
  /** Datagrams whose destination had no receiver when their turn came. */
  droppedNoListener = 0;
  /** Datagrams handed to a receiver. */
  delivered = 0;
  /**
   * Optional observer of every datagram accepted onto the wire (tests: what travels where). The
   * bytes are a view valid only during the call.
   */
  tap: ((toAddress: string, toPort: number, fromAddress: string, fromPort: number, bytes: Uint8Array) => void) | null =
    null;

  constructor(opts: MemoryWireOptions = {}) {
    this.capacity = opts.slots ?? 1024;
    this.headroom = opts.headroom ?? 128;
    this.slotSize = this.headroom + (opts.maxDatagram ?? 1920);
    if (!(Number.isInteger(this.capacity) && this.capacity >= 1))
      throw new RangeError(`memory wire: slots ${opts.slots} must be a positive integer`);
    this.lens = new Int32Array(this.capacity);
    this.to = new Array<string>(this.capacity).fill('');
    this.fromAddr = new Array<string>(this.capacity).fill('');
    this.fromPort = new Int32Array(this.capacity);
  }

  /** Receives what is sent to address:port. Throws when someone already listens there. */
  listen(address: string, port: number, r: WireReceiver): void {
    const k = endpointKey(address, port);
    if (this.endpoints.has(k)) throw new Error(`memory wire: ${k} already has a listener`);
    this.endpoints.set(k, r);
  }

  unlisten(address: string, port: number): void {
    this.endpoints.delete(endpointKey(address, port));
  }

  /** Datagrams waiting for pump(). */
  get inFlight(): number {
    return this.count;
  }

  send(
    toAddress: string,
    toPort: number,
    fromAddress: string,
    fromPort: number,
    buf: Uint8Array,
    off: number,
    len: number,
  ): void {
    if (this.count === this.capacity || this.headroom + len > this.slotSize) {
      this.droppedFull++;
      return;
    }
    const i = (this.head + this.count) % this.capacity;
    const slot = (this.slots[i] ??= new Uint8Array(this.slotSize));
    slot.set(buf.subarray(off, off + len), this.headroom);
    this.lens[i] = len;
    this.to[i] = endpointKey(toAddress, toPort);
    this.fromAddr[i] = fromAddress;
    this.fromPort[i] = fromPort;
    this.count++;
    this.tap?.(toAddress, toPort, fromAddress, fromPort, slot.subarray(this.headroom, this.headroom + len));
  }

  /**
   * Delivers in order until nothing is in flight or `maxDeliveries` datagrams were handed over
   * (bounded: a forwarding loop cannot spin forever). Returns how many were handed to receivers.
   */
  pump(maxDeliveries = 1_000_000): number {
    let n = 0;
    while (this.count > 0 && n < maxDeliveries) {
      const i = this.head;
      const r = this.endpoints.get(this.to[i]!);
      if (r === undefined) this.droppedNoListener++;
      else {
        n++;
        this.delivered++;
        // The slot stays taken during the call, so what the receiver sends cannot overwrite it.
        r(this.slots[i]!, this.headroom, this.lens[i]!, this.fromAddr[i]!, this.fromPort[i]!);
      }
      this.head = (this.head + 1) % this.capacity;
      this.count--;
    }
    return n;
  }
}
