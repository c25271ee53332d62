/**
 * Session state shared between threads without locks, for a data path split over worker
 * threads (each with its own TUN queue and UDP socket) while one thread owns handshakes:
 *
 * - a keypair slot per shared session: its send counter (one Uint32 word advanced with
 *   Atomics.add, so counters stay unique however many threads send under the keypair) and its
 *   receive replay window (SharedReplayFilter below, updated with compare-and-swap);
 * - a row per (worker, peer) of activity counters and times, written by that worker only and
 *   read by the owner: rx/tx bytes and packets (summed for `wg show`, exact) and the times of
 *   the last data/authenticated packet sent and received (the owner's timers run on them).
 *
 * Slots are reused only once every worker has applied a configuration snapshot that no longer
 * names them (SlotPool): a worker on an older snapshot may still touch a slot it knows.
 *
 * Counters of shared keypairs are 32-bit: a session lives at most Reject-After-Time (180 s),
 * 2^32 messages in that time is 24 million per second. The send side stops at
 * SHARED_SEND_LIMIT and asks for a new session from SHARED_REKEY_AFTER on (both far below the
 * protocol's 2^60 / 2^64 limits, which only makes rekeying earlier); the receive side drops a
 * counter ≥ 2^32 as a replay.
 */

/** Bits per replay block: a block's bitmap and its tag share one 32-bit word. */
const BLOCK_BITS = 8;
const BLOCK_SHIFT = 3;
/** Blocks in the ring (a power of two). */
export const SHARED_REPLAY_BLOCKS = 1024;
const RING_SHIFT = 10;
const BLOCK_MASK = SHARED_REPLAY_BLOCKS - 1;
/** Counters behind the newest one that are still accepted: (1024 − 1) × 8 = 8184. */
export const SHARED_REPLAY_WINDOW = (SHARED_REPLAY_BLOCKS - 1) * BLOCK_BITS;

/** Words of a keypair slot: [0] next send counter, [1] newest accepted block, [2…] the ring. */
export const KEYPAIR_SLOT_WORDS = 2 + SHARED_REPLAY_BLOCKS;
const W_SEND = 0;
const W_LAST = 1;
const W_RING = 2;

/** A shared send counter at or past this may not send (the keypair is spent). */
export const SHARED_SEND_LIMIT = 0xff000000;
/** From this counter on, sending asks for a new handshake. */
export const SHARED_REKEY_AFTER = 0x80000000;

/** Fields of an activity row (Float64). */
export const ACT_RX_BYTES = 0;
export const ACT_TX_BYTES = 1;
export const ACT_RX_PACKETS = 2;
export const ACT_TX_PACKETS = 3;
export const ACT_DATA_SENT = 4;
export const ACT_AUTH_SENT = 5;
export const ACT_DATA_RECEIVED = 6;
export const ACT_AUTH_RECEIVED = 7;
export const ACT_FIELDS = 8;

/**
 * The replay window of one shared keypair (whitepaper §5.4.6): a ring of 8-bit bitmap blocks,
 * each word holding the rest of its block number (the tag: block >> 10, at most 19 bits for a
 * 32-bit counter, so a tag names one block exactly) above the bits, so a block is claimed and
 * marked in one compare-and-swap. The newest accepted block only grows (a CAS
 * max), and is raised before any ring word is written, so every block in the ring is ≤ it:
 * a word whose tag differs from the block in hand holds an older block (the same ring position
 * one or more turns back) unless the block in hand fell out of the window, which is checked.
 * Two threads accepting the same counter: exactly one CAS sets its bit.
 */
export class SharedReplayFilter {
  constructor(
    private readonly w: Int32Array,
    /** Word offset of the keypair slot. */
    private readonly base: number,
  ) {}

  /** Read-only pre-check before decryption (as ReplayFilter.check). */
  check(lo: number, hi: number): boolean {
    if (hi !== 0) return false;
    const blk = lo >>> BLOCK_SHIFT;
    const last = Atomics.load(this.w, this.base + W_LAST);
    if (blk <= last && last - blk >= SHARED_REPLAY_BLOCKS) return false;
    const word = Atomics.load(this.w, this.base + W_RING + (blk & BLOCK_MASK));
    if (word >>> BLOCK_BITS !== blk >>> RING_SHIFT) return true;
    return (word & (1 << (lo & (BLOCK_BITS - 1)))) === 0;
  }

  /** Accepts an authenticated counter exactly once across all threads (as ReplayFilter.validate). */
  validate(lo: number, hi: number): boolean {
    if (hi !== 0) return false;
    const w = this.w;
    const lastAt = this.base + W_LAST;
    const blk = lo >>> BLOCK_SHIFT;
    for (;;) {
      const last = Atomics.load(w, lastAt);
      if (blk <= last || Atomics.compareExchange(w, lastAt, last, blk) === last) break;
    }
    const at = this.base + W_RING + (blk & BLOCK_MASK);
    const tag = blk >>> RING_SHIFT;
    const mask = 1 << (lo & (BLOCK_BITS - 1));
    for (;;) {
      const old = Atomics.load(w, at);
      if (old >>> BLOCK_BITS === tag) {
        if ((old & mask) !== 0) return false;
        if (Atomics.compareExchange(w, at, old, old | mask) === old) return true;
        continue;
      }
      const last = Atomics.load(w, lastAt);
      if (last - blk >= SHARED_REPLAY_BLOCKS) return false;
      if (Atomics.compareExchange(w, at, old, (tag << BLOCK_BITS) | mask) === old) return true;
    }
  }

  /** Forget everything (the slot is given to a new keypair). */
  reset(): void {
    this.w.fill(0, this.base + W_LAST, this.base + KEYPAIR_SLOT_WORDS);
  }
}

/** The send counter word of a keypair slot (as a Uint32Array index). */
export function sendCounterIndex(slot: number): number {
  return slot * KEYPAIR_SLOT_WORDS + W_SEND;
}

/**
 * Slots handed out and taken back on the owner thread; a slot released while snapshot version
 * v was the newest published becomes free again once every worker acknowledged a version > v.
 */
export class SlotPool {
  private next = 0;
  private readonly waiting: { slot: number; until: number }[] = [];

  constructor(readonly capacity: number) {}

  /** A free slot, or -1. `minAcked`: the lowest snapshot version every worker has applied. */
  acquire(minAcked: number): number {
    if (this.next < this.capacity) return this.next++;
    const w = this.waiting;
    if (w.length > 0 && w[0].until <= minAcked) return w.shift()!.slot;
    return -1;
  }

  /** Gives `slot` back; free for reuse once the workers are past `published`. */
  release(slot: number, published: number): void {
    this.waiting.push({ slot, until: published + 1 });
  }
}

/** The SharedArrayBuffers of one device: keypair slots, activity rows, acknowledged versions. */
export interface SharedSessionBuffers {
  readonly keypairs: SharedArrayBuffer;
  readonly activity: SharedArrayBuffer;
  /** Int32 per worker: the snapshot version it applies now. */
  readonly acks: SharedArrayBuffer;
  readonly keypairSlots: number;
  readonly peerSlots: number;
  readonly workers: number;
}

export function allocateSharedSessions(workers: number, peerSlots: number, keypairSlots: number): SharedSessionBuffers {
  if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`workers ${workers} must be ≥ 1`);
  return {
    keypairs: new SharedArrayBuffer(keypairSlots * KEYPAIR_SLOT_WORDS * 4),
    activity: new SharedArrayBuffer(workers * peerSlots * ACT_FIELDS * 8),
    acks: new SharedArrayBuffer(workers * 4),
    keypairSlots,
    peerSlots,
    workers,
  };
}

/** Offset (in Float64 elements) of worker w's row for peer slot p. */
export function activityRow(b: SharedSessionBuffers, worker: number, peerSlot: number): number {
  return (worker * b.peerSlots + peerSlot) * ACT_FIELDS;
}
