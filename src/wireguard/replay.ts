/**
 * Sliding-window replay protection for transport counters (whitepaper §5.4.6, RFC 6479 §2).
 *
 * RFC 6479's ring of bitmap blocks with the parameters wireguard-go uses: 128 blocks of 64 bits
 * (an 8192-bit ring), of which one block is always being recycled, so the usable window is
 * (128 − 1) × 64 = 8128 counters behind the highest counter seen. Moving the window forward
 * clears only the blocks it passes over (at most the whole ring), so a far jump costs O(ring).
 *
 * Counters are 64-bit and arrive as two uint32 halves (lo, hi) so that no value passes through
 * a float: block indices and distances are computed from the halves, and only distances that are
 * known to be < 2^34 are ever combined into a number.
 *
 * Each 64-bit block is two Uint32Array words: block b, bit i lives in word 2b + (i >> 5).
 * No allocation after construction.
 */
import { REJECT_AFTER_MESSAGES_HI, REJECT_AFTER_MESSAGES_LO } from './constants.js';

const BLOCK_BITS_LOG = 6;
const RING_BLOCKS = 128;
const BLOCK_MASK = RING_BLOCKS - 1;
const BIT_MASK = (1 << BLOCK_BITS_LOG) - 1;
const WORDS_PER_BLOCK = 2;
const TWO_26 = 1 << 26; // 2^32 / 64: blocks per unit of the high half
const TWO_32 = 4294967296;

/** Number of counters behind the newest one that can still be accepted (8128). */
export const REPLAY_WINDOW_SIZE = (RING_BLOCKS - 1) * (1 << BLOCK_BITS_LOG);
/** Total bits in the ring (8192). */
export const REPLAY_RING_BITS = RING_BLOCKS * (1 << BLOCK_BITS_LOG);

export class ReplayFilter {
  private lastLo = 0;
  private lastHi = 0;
  private readonly ring = new Uint32Array(RING_BLOCKS * WORDS_PER_BLOCK);

  /** Forget everything: the next counter 0 is accepted. */
  reset(): void {
    this.lastLo = 0;
    this.lastHi = 0;
    this.ring.fill(0);
  }

  /**
   * Cheap pre-check before decryption, without changing state: false when the counter is at or
   * beyond Reject-After-Messages, too far behind the window, or already seen. A true answer must
   * still be confirmed with validate() after the packet authenticates (an unauthenticated packet
   * must never move the window).
   */
  check(lo: number, hi: number): boolean {
    if (hi === REJECT_AFTER_MESSAGES_HI && lo >= REJECT_AFTER_MESSAGES_LO) return false;
    if (hi > this.lastHi || (hi === this.lastHi && lo > this.lastLo)) return true;
    if (!this.withinWindow(lo, hi)) return false;
    const bit = lo & BIT_MASK;
    const word = ((lo >>> BLOCK_BITS_LOG) & BLOCK_MASK) * WORDS_PER_BLOCK + (bit >>> 5);
    return (this.ring[word] & (1 << (bit & 31))) === 0;
  }

  /**
   * Accepts a counter of an authenticated packet exactly once. Returns false for a replay, for a
   * counter more than REPLAY_WINDOW_SIZE behind the newest accepted one, and for counters at or
   * beyond Reject-After-Messages (2^64 − 2^13 − 1).
   */
  validate(lo: number, hi: number): boolean {
    if (hi === REJECT_AFTER_MESSAGES_HI && lo >= REJECT_AFTER_MESSAGES_LO) return false;
    if (hi > this.lastHi || (hi === this.lastHi && lo > this.lastLo)) {
      // Move the window forward, clearing every block between the old and the new head.
      const dHi = hi - this.lastHi;
      let diff = dHi > 1 ? RING_BLOCKS : dHi * TWO_26 + (lo >>> BLOCK_BITS_LOG) - (this.lastLo >>> BLOCK_BITS_LOG);
      if (diff > RING_BLOCKS) diff = RING_BLOCKS;
      const current = this.lastLo >>> BLOCK_BITS_LOG;
      for (let i = 1; i <= diff; i++) {
        const w = ((current + i) & BLOCK_MASK) * WORDS_PER_BLOCK;
        this.ring[w] = 0;
        this.ring[w + 1] = 0;
      }
      this.lastLo = lo;
      this.lastHi = hi;
    } else if (!this.withinWindow(lo, hi)) {
      return false;
    }
    const bit = lo & BIT_MASK;
    const word = ((lo >>> BLOCK_BITS_LOG) & BLOCK_MASK) * WORDS_PER_BLOCK + (bit >>> 5);
    const mask = 1 << (bit & 31);
    const old = this.ring[word];
    if ((old & mask) !== 0) return false;
    this.ring[word] = old | mask;
    return true;
  }

  /** For counter <= last: is last − counter <= REPLAY_WINDOW_SIZE? */
  private withinWindow(lo: number, hi: number): boolean {
    const dHi = this.lastHi - hi;
    if (dHi > 1) return false;
    return dHi * TWO_32 + this.lastLo - lo <= REPLAY_WINDOW_SIZE;
  }
}
