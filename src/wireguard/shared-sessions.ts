/**
 * Session state shared between threads without locks, for a data path split over worker
 * threads (each with its own TUN queue and UDP socket) while one thread owns handshakes:
 *
 * - a keypair slot per shared session: its send counter (one Uint32 word advanced with
 *   Atomics.add, so counters stay unique however many threads send under the keypair) and its
 *   receive replay window (SharedReplayFilter below, updated with compare-and-swap);
 * - a row per (worker, peer) of activity counters and times, written by that worker only and
 *   read by the owner: rx/tx bytes and packets (summed for `wg show`, exact) and the times of
 *   the last data/authenticated packet sent and received (the owner's timers run on them);
 * - an endpoint record per peer (a sequence lock: storeEndpoint/loadEndpoint), written by the
 *   worker that authenticates the peer from a new address and by the owner when its own
 *   endpoint changes (configuration, handshake), read by every worker before it sends: a roam
 *   seen on one worker redirects the others' next packets, without waiting for a snapshot;
 * - a confirmed-session word per peer: the responder session a worker saw the peer's first
 *   message under, which every worker sends with from its next packet.
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

/** An endpoint as peer.ts's Endpoint (declared here: peer.ts depends on this file's users). */
interface Endpoint {
  readonly address: string;
  readonly port: number;
}

/** Bits per replay block: a block's bitmap and its tag share one 32-bit word. */
const BLOCK_BITS = 8;
const BLOCK_SHIFT = 3;
/** Blocks in the ring (a power of two). */
export const SHARED_REPLAY_BLOCKS = 1024;
const RING_SHIFT = 10;
const BLOCK_MASK = SHARED_REPLAY_BLOCKS - 1;
/** Counters behind the newest one that are still accepted: (1024 − 1) × 8 = 8184. */
export const SHARED_REPLAY_WINDOW = (SHARED_REPLAY_BLOCKS - 1) * BLOCK_BITS;

/**
 * Words of a keypair slot: [0] next send counter, [SEPARATION] newest accepted block, then the
 * ring. The sending threads write the counter and the receiving thread the window (one flow
 * each way: different workers), so the two are kept SEPARATION words (128 bytes: a cache line
 * and the adjacent line some CPUs prefetch with it) apart, and every slot starts such a line.
 */
const SEPARATION = 32;
export const KEYPAIR_SLOT_WORDS = Math.ceil((SEPARATION + 1 + SHARED_REPLAY_BLOCKS) / SEPARATION) * SEPARATION;
const W_SEND = 0;
const W_LAST = SEPARATION;
const W_RING = SEPARATION + 1;

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

  /**
   * Read-only pre-check before decryption (as ReplayFilter.check). Plain reads: the newest
   * block only grows and a word's bits for one tag are only ever set, so a stale read can only
   * let a packet through to validate() (which decides with atomics), never refuse a fresh one.
   */
  check(lo: number, hi: number): boolean {
    if (hi !== 0) return false;
    const blk = lo >>> BLOCK_SHIFT;
    const last = this.w[this.base + W_LAST];
    if (blk <= last && last - blk >= SHARED_REPLAY_BLOCKS) return false;
    const word = this.w[this.base + W_RING + (blk & BLOCK_MASK)];
    if (word >>> BLOCK_BITS !== blk >>> RING_SHIFT) return true;
    return (word & (1 << (lo & (BLOCK_BITS - 1)))) === 0;
  }

  /** Accepts an authenticated counter exactly once across all threads (as ReplayFilter.validate). */
  validate(lo: number, hi: number): boolean {
    if (hi !== 0) return false;
    const w = this.w;
    const lastAt = this.base + W_LAST;
    const blk = lo >>> BLOCK_SHIFT;
    // A plain read first (one atomic operation per packet in the common case): the newest
    // block only grows, so a read at or above `blk` is final; a stale one takes the CAS loop.
    if (blk > w[lastAt]) {
      for (;;) {
        const last = Atomics.load(w, lastAt);
        if (blk <= last || Atomics.compareExchange(w, lastAt, last, blk) === last) break;
      }
    }
    const at = this.base + W_RING + (blk & BLOCK_MASK);
    const tag = blk >>> RING_SHIFT;
    const mask = 1 << (lo & (BLOCK_BITS - 1));
    // The block's own word, read plainly: a set bit is final (bits are only set for a tag, a
    // word moves to newer tags only), and marking it is one CAS, which fails on a stale read.
    // Anything else takes the loop below, where every read is atomic.
    const seen = w[at];
    if (seen >>> BLOCK_BITS === tag) {
      if ((seen & mask) !== 0) return false;
      if (Atomics.compareExchange(w, at, seen, seen | mask) === seen) return true;
    }
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

/**
 * Int32 words of a peer's endpoint record: [0] sequence (even: stable, odd: being written,
 * 0: never written), [1] port (-1: no endpoint), [2] address length, [3…] the address text,
 * four characters a word (at most ENDPOINT_TEXT_MAX).
 */
export const ENDPOINT_WORDS = 20;
const ENDPOINT_TEXT_MAX = (ENDPOINT_WORDS - 3) * 4;

/**
 * Writes `ep` as peer slot `slot`'s endpoint; returns the record's new sequence. Writers (the
 * owner, any worker) take the record with a compare-and-swap to an odd sequence; a writer
 * finding it odd waits for the other's few stores to finish.
 */
export function storeEndpoint(w: Int32Array, slot: number, ep: Endpoint | null): number {
  const at = slot * ENDPOINT_WORDS;
  let seq: number;
  for (;;) {
    seq = Atomics.load(w, at);
    if ((seq & 1) === 0 && Atomics.compareExchange(w, at, seq, seq + 1) === seq) break;
  }
  if (ep === null || ep.address.length > ENDPOINT_TEXT_MAX) {
    Atomics.store(w, at + 1, -1);
  } else {
    const a = ep.address;
    Atomics.store(w, at + 1, ep.port);
    Atomics.store(w, at + 2, a.length);
    for (let i = 0; i < a.length; i += 4) {
      let v = 0;
      for (let k = 0; k < 4 && i + k < a.length; k++) v |= (a.charCodeAt(i + k) & 0xff) << (8 * k);
      Atomics.store(w, at + 3 + (i >> 2), v);
    }
  }
  const next = (seq + 2) | 0 || 2; // never back to 0 ("never written")
  Atomics.store(w, at, next);
  return next;
}

/** The sequence of slot `slot`'s endpoint record (compare with the one last loaded). */
export function endpointSeq(w: Int32Array, slot: number): number {
  return Atomics.load(w, slot * ENDPOINT_WORDS);
}

/**
 * The same, read plainly (no atomic operation: the per-packet check whether the record moved):
 * an older value or the current one; a change is then read with endpointSeq and loadEndpoint.
 */
export function endpointSeqHint(w: Int32Array, slot: number): number {
  return w[slot * ENDPOINT_WORDS];
}

/**
 * Reads slot `slot`'s endpoint at sequence `seq` (from endpointSeq): the endpoint, null for
 * none, or undefined when the record is being written or changed meanwhile (try again later).
 */
export function loadEndpoint(w: Int32Array, slot: number, seq: number): Endpoint | null | undefined {
  if (seq === 0 || (seq & 1) !== 0) return undefined;
  const at = slot * ENDPOINT_WORDS;
  const port = Atomics.load(w, at + 1);
  let address = '';
  if (port >= 0) {
    const n = Atomics.load(w, at + 2);
    if (n > ENDPOINT_TEXT_MAX) return undefined;
    for (let i = 0; i < n; i++)
      address += String.fromCharCode((Atomics.load(w, at + 3 + (i >> 2)) >>> (8 * (i & 3))) & 0xff);
  }
  if (Atomics.load(w, at) !== seq) return undefined;
  return port < 0 ? null : { address, port };
}

/** The SharedArrayBuffers of one device: keypair slots, activity rows, acknowledged versions. */
export interface SharedSessionBuffers {
  readonly keypairs: SharedArrayBuffer;
  readonly activity: SharedArrayBuffer;
  /** Int32 × ENDPOINT_WORDS per peer slot: the peers' endpoint records. */
  readonly endpoints: SharedArrayBuffer;
  /**
   * Int32 per peer slot: our index of the responder session a worker saw confirmed last (the
   * peer's first message under it); every worker sends under it from then on.
   */
  readonly confirmed: SharedArrayBuffer;
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
    endpoints: new SharedArrayBuffer(peerSlots * ENDPOINT_WORDS * 4),
    confirmed: new SharedArrayBuffer(peerSlots * 4),
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
