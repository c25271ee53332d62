/**
 * A worker's outbox: messages of the owner thread (handshakes, keepalives, packets it staged)
 * waiting to leave from this worker's socket. A bounded ring; a full one refuses and counts.
 * Holds each buffer until the send path releases its slot.
 */
import type { OutgoingMessage } from './pool.js';

const OUTBOX_CAPACITY = 1024;
const EMPTY = new Uint8Array(0);

export class ShardOutbox {
  /** Messages refused because the ring was full. */
  dropped = 0;
  private readonly bufs: Uint8Array[] = [];
  private readonly addr: string[] = [];
  private readonly port: number[] = [];
  private head = 0;
  private n = 0;

  get count(): number {
    return this.n;
  }

  /** Queues `buf` (kept until released) for address:port; false (counted) when full. */
  queue(buf: Uint8Array, address: string, port: number): boolean {
    if (this.n === OUTBOX_CAPACITY) {
      this.dropped++;
      return false;
    }
    const i = (this.head + this.n) % OUTBOX_CAPACITY;
    this.bufs[i] = buf;
    this.addr[i] = address;
    this.port[i] = port;
    this.n++;
    return true;
  }

  /** The oldest message into `out` (its slot in out.slot); false when empty. */
  pop<P>(out: OutgoingMessage<P>): boolean {
    if (this.n === 0) return false;
    const i = this.head;
    out.buf = this.bufs[i]!;
    out.start = 0;
    out.length = this.bufs[i]!.length;
    out.address = this.addr[i]!;
    out.port = this.port[i]!;
    out.slot = i;
    this.head = (i + 1) % OUTBOX_CAPACITY;
    this.n--;
    return true;
  }

  /** The send path is done with slot's buffer. */
  release(slot: number): void {
    this.bufs[slot] = EMPTY;
  }
}
