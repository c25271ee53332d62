/**
 * A caller-owned arena of fixed-size packet slots, filled by one batched read (TUN) or receive
 * (UDP) and handed to the caller's batch callback.
 *
 * Layout: slot i occupies buf[i*slotSize, (i+1)*slotSize). A received packet is written at
 * `offs[i] = i*slotSize + headroom` with length `lens[i]` (at most `maxLen`); the bytes after it,
 * up to the end of the slot, are tailroom the caller may use (WireGuard padding + 16-byte tag).
 * `headroom` lets the caller prepend a header in place (16 bytes: WireGuard transport header).
 *
 * Ownership: the arena belongs to whoever created the batch; a reader only writes into it
 * during the call that fills it and never keeps it. The contents are valid until the callback
 * returns: the next readiness overwrites them. Nothing here allocates after construction.
 */
import { ADDR_RECORD_LEN } from './native.js';

/**
 * The largest maxLen: the largest IP packet without jumbograms (IPv6: 40-byte header + 65535 of
 * payload); a TUN with TSO hands over super-packets up to that size.
 */
export const PACKET_BATCH_MAX_LEN = 65535 + 40;

export interface PacketBatchOptions {
  /** Number of slots (packets per batch). Default 64. */
  readonly capacity?: number;
  /** Bytes before each packet. Default 16 (the WireGuard transport header). */
  readonly headroom?: number;
  /** Largest packet accepted into a slot (TUN: the MTU; UDP: the largest datagram). */
  readonly maxLen: number;
  /** Bytes after maxLen. Default 32 (16-byte tag + up to 15 bytes of padding, rounded). */
  readonly tailroom?: number;
  /** Also keep a 24-byte source/destination address record per slot (UDP). */
  readonly withAddresses?: boolean;
  /** Also keep a segment size per slot (UDP GRO: see `segs`). */
  readonly withSegments?: boolean;
  /**
   * Bytes of scratch space after the slots, in the same buffer (default 0): software GSO/GRO
   * (src/packet/gso.ts, gro.ts) copy with copyWithin, which needs source and target in one array.
   */
  readonly scratch?: number;
}

export class PacketBatch {
  readonly capacity: number;
  readonly headroom: number;
  readonly maxLen: number;
  readonly slotSize: number;
  readonly buf: Uint8Array;
  /** offs[i] = i*slotSize + headroom (precomputed; callers may change entries before a write). */
  readonly offs: Uint32Array;
  readonly lens: Uint32Array;
  /** Address records (see native.ts ADDR_* for the layout); empty unless withAddresses. */
  readonly addrs: Uint8Array;
  /**
   * UDP GRO (empty unless withSegments): segs[i] = 0 when slot i holds one datagram, else the
   * kernel coalesced a run of datagrams of segs[i] bytes each (the last possibly shorter)
   * back to back in slot i: datagram k is at offs[i] + k*segs[i].
   */
  readonly segs: Uint32Array;
  /** buf[scratchOff, scratchOff + scratchLen) is the scratch space (after the last slot). */
  readonly scratchOff: number;
  readonly scratchLen: number;
  /** Packets filled by the last read. */
  count = 0;
  /**
   * UDP GRO with a scattering addon (io/udp.ts): when > 0, the next receives (and the last,
   * until the owner changes it) put slot i's bytes in pieces of scatterSeg bytes at
   * offs[i] + k*scatterStride (the last piece holds the rest): a run of datagrams of scatterSeg
   * bytes lands spread apart; other sizes must be joined. 0: back to back. The reader resets
   * it to 0 when the socket cannot scatter.
   */
  get scatterSeg(): number {
    return this.scatter[0]!;
  }
  set scatterSeg(v: number) {
    this.scatter[0] = v;
  }
  get scatterStride(): number {
    return this.scatter[1]!;
  }
  set scatterStride(v: number) {
    this.scatter[1] = v;
  }
  /** [scatterSeg, scatterStride]: the native drain (recvPollStart) reads it at every receive. */
  readonly scatter = new Uint32Array(2);

  constructor(opts: PacketBatchOptions) {
    const capacity = opts.capacity ?? 64;
    const headroom = opts.headroom ?? 16;
    const tailroom = opts.tailroom ?? 32;
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 4096)
      throw new RangeError(`capacity ${capacity} not in 1..4096`);
    if (!Number.isInteger(headroom) || headroom < 0 || headroom > 4096)
      throw new RangeError(`headroom ${headroom} not in 0..4096`);
    if (!Number.isInteger(opts.maxLen) || opts.maxLen < 1 || opts.maxLen > PACKET_BATCH_MAX_LEN)
      throw new RangeError(`maxLen ${opts.maxLen} not in 1..${PACKET_BATCH_MAX_LEN}`);
    if (!Number.isInteger(tailroom) || tailroom < 0) throw new RangeError(`tailroom ${tailroom} must be >= 0`);
    this.capacity = capacity;
    this.headroom = headroom;
    this.maxLen = opts.maxLen;
    // Round slots to 64 bytes so every packet starts cache-line aligned (plus headroom).
    this.slotSize = Math.ceil((headroom + opts.maxLen + tailroom) / 64) * 64;
    const scratch = opts.scratch ?? 0;
    if (!Number.isInteger(scratch) || scratch < 0 || scratch > 1 << 28)
      throw new RangeError(`scratch ${scratch} not in 0..${1 << 28}`);
    this.scratchOff = this.slotSize * capacity;
    this.scratchLen = scratch;
    this.buf = new Uint8Array(this.scratchOff + scratch);
    this.offs = new Uint32Array(capacity);
    for (let i = 0; i < capacity; i++) this.offs[i] = i * this.slotSize + headroom;
    this.lens = new Uint32Array(capacity);
    this.addrs = new Uint8Array(opts.withAddresses ? capacity * ADDR_RECORD_LEN : 0);
    this.segs = new Uint32Array(opts.withSegments ? capacity : 0);
  }

  /** Called by readers after a fill: sets count and restores offs[0..n) the caller may have moved. */
  filled(n: number): void {
    this.count = n;
    const { offs, slotSize, headroom } = this;
    for (let i = 0; i < n; i++) offs[i] = i * slotSize + headroom;
  }

  /** A view of packet i (allocates a view object: for tests and slow paths). */
  packet(i: number): Uint8Array {
    if (i < 0 || i >= this.count) throw new RangeError(`packet ${i} not in 0..${this.count - 1}`);
    return this.buf.subarray(this.offs[i], this.offs[i] + this.lens[i]);
  }
}
