/**
 * The shared memory between weft-wg's owner thread (wg-workers.ts) and its workers
 * (wg-worker.ts) besides the sessions (shared-sessions.ts), and both sides' use of it:
 *
 * - per worker, its handoffs in flight: the worker adds one before it posts a handoff and
 *   refuses at the limit, the owner subtracts one as it takes it (both atomically);
 * - the owner's load word: non-zero while the owner's handshake queue is under load, written
 *   by the owner only; a worker seeing it screens as under load (mac2, rate limit);
 * - per worker, its drops by reason (Float64, written by that worker only); the owner adds what
 *   grew since its last fold to the device's drops, so each drop is counted there once.
 *
 * No locks, no allocation after construction.
 */
import { DROP_REASON_COUNT } from '../wireguard/drops.js';

/** Workers a device may have. */
export const MAX_WORKERS = 64;
/** Int32 words of the depth buffer: one per worker (handoffs in flight), then OWNER_LOAD_WORD. */
export const DEPTH_WORDS = MAX_WORKERS + 1;
/** Non-zero while the owner's handshake queue is under load. */
export const OWNER_LOAD_WORD = MAX_WORKERS;

/** The buffers a worker is given (workerData). */
export interface SharedWordBuffers {
  /** DEPTH_WORDS Int32. */
  readonly depth: SharedArrayBuffer;
  /** Float64 per worker × DROP_REASON_COUNT. */
  readonly drops: SharedArrayBuffer;
}

/** One worker's side. */
export class WorkerWords {
  /** This worker's drops by DROP_* reason (its ShardEngine counts into them). */
  readonly drops: Float64Array;
  private readonly depth: Int32Array;
  /** As wireguard-go: handshakes are under load from 1/8 of the queue's capacity. */
  private readonly loadDepth: number;

  constructor(
    buffers: SharedWordBuffers,
    readonly index: number,
    /** Handoffs this worker may have in flight. */
    readonly limit: number,
  ) {
    if (!Number.isInteger(index) || index < 0 || index >= MAX_WORKERS)
      throw new RangeError(`worker ${index} not in 0..${MAX_WORKERS - 1}`);
    this.depth = new Int32Array(buffers.depth);
    this.drops = new Float64Array(buffers.drops, index * DROP_REASON_COUNT * 8, DROP_REASON_COUNT);
    this.loadDepth = limit >>> 3;
  }

  /** Claims room for one handoff: false (nothing claimed) when `limit` are in flight. */
  claimHandoff(): boolean {
    if (Atomics.add(this.depth, this.index, 1) >= this.limit) {
      Atomics.sub(this.depth, this.index, 1);
      return false;
    }
    return true;
  }

  /** Whether handshakes are under load: this worker's handoffs in flight ≥ limit/8, or the owner's word. */
  underLoad(): boolean {
    return Atomics.load(this.depth, this.index) >= this.loadDepth || Atomics.load(this.depth, OWNER_LOAD_WORD) !== 0;
  }
}

/** The owner's side: allocates the buffers. */
export class OwnerWords implements SharedWordBuffers {
  readonly depth = new SharedArrayBuffer(4 * DEPTH_WORDS);
  readonly drops = new SharedArrayBuffer(8 * MAX_WORKERS * DROP_REASON_COUNT);
  private readonly depthWords = new Int32Array(this.depth);
  private readonly dropCounts = new Float64Array(this.drops);
  /** dropCounts as of the last fold. */
  private readonly dropsFolded = new Float64Array(MAX_WORKERS * DROP_REASON_COUNT);

  /** The owner took a handoff worker `i` posted. */
  handoffTaken(i: number): void {
    Atomics.sub(this.depthWords, i, 1);
  }

  /** Handoffs worker `i` has in flight. */
  inFlight(i: number): number {
    return Atomics.load(this.depthWords, i);
  }

  /** Sets the load word while `loaded` (the owner's handshake queue is under load), clears it after. */
  shareLoad(loaded: boolean): void {
    const v = loaded ? 1 : 0;
    if (Atomics.load(this.depthWords, OWNER_LOAD_WORD) !== v) Atomics.store(this.depthWords, OWNER_LOAD_WORD, v);
  }

  /** Whether the load word is set. */
  get loadShared(): boolean {
    return Atomics.load(this.depthWords, OWNER_LOAD_WORD) !== 0;
  }

  /** Adds to `into` (DROP_REASON_COUNT, by reason) what workers 0..workers-1 dropped since the last fold. */
  foldDrops(workers: number, into: Float64Array): void {
    if (workers > MAX_WORKERS || into.length !== DROP_REASON_COUNT)
      throw new RangeError(`foldDrops: ${workers} workers (at most ${MAX_WORKERS}) into ${into.length} counters`);
    const cur = this.dropCounts;
    const seen = this.dropsFolded;
    for (let i = 0; i < workers * DROP_REASON_COUNT; i++) {
      // One read: the worker may count more meanwhile, the next fold adds those.
      const v = cur[i];
      if (v !== seen[i]) {
        into[i % DROP_REASON_COUNT] += v - seen[i];
        seen[i] = v;
      }
    }
  }
}
