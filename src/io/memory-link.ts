/**
 * The impairments of a link on the in-memory network (memory-net.ts): loss, duplication,
 * reordering and delay with jitter, decided per datagram by a seeded stream, so the same seed and
 * the same traffic give every datagram the same fate. Counts what it did; owns no queue (the
 * wire's bounded slots hold what it delays).
 */

/** mulberry32: 32-bit state, period 2^32; not cryptographic. */
export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform unsigned 32-bit integer. */
  nextU32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }
}

export interface LinkImpairments {
  /** Seed of the link's random stream. Default 1. */
  readonly seed?: number;
  /** Probability that a copy is lost, 0..1. Default 0. */
  readonly loss?: number;
  /** Probability that a datagram travels twice, 0..1. Default 0. */
  readonly duplicate?: number;
  /** One-way delay added to the network's latency, ms. Default 0. */
  readonly delayMs?: number;
  /** Each copy is late by a uniform [0, jitterMs) more: datagrams closer than that may swap. Default 0. */
  readonly jitterMs?: number;
  /** Probability that a copy is held back `reorderMs`, so the ones sent after it overtake it, 0..1. Default 0. */
  readonly reorder?: number;
  /** How long a reordered copy is held back, ms. Default 10. */
  readonly reorderMs?: number;
}

const probability = (name: string, v: number | undefined): number => {
  const p = v ?? 0;
  if (!(p >= 0 && p <= 1)) throw new RangeError(`memory link: ${name} ${p} must be a probability in 0..1`);
  return p;
};

const milliseconds = (name: string, v: number | undefined, dflt: number): number => {
  const ms = v ?? dflt;
  if (!(ms >= 0 && Number.isFinite(ms))) throw new RangeError(`memory link: ${name} ${ms} must be a finite ms >= 0`);
  return ms;
};

/**
 * One impaired link (one direction of a host pair, or the network's default). Per datagram it
 * draws, in this order: duplicate?, then per copy: lost?, jitter (when jitterMs > 0), reorder?
 * (when reorder > 0). Balance: sent + duplicated = lost + the copies handed to the wire.
 */
export class MemoryLink {
  /** Datagrams offered to the link. */
  sent = 0;
  /** Extra copies made. */
  duplicated = 0;
  /** Copies lost. */
  lost = 0;
  /** Copies held back `reorderMs`. */
  reordered = 0;
  readonly loss: number;
  readonly duplicate: number;
  readonly delayMs: number;
  readonly jitterMs: number;
  readonly reorder: number;
  readonly reorderMs: number;
  private readonly rng: SeededRandom;

  constructor(imp: LinkImpairments) {
    this.loss = probability('loss', imp.loss);
    this.duplicate = probability('duplicate', imp.duplicate);
    this.reorder = probability('reorder', imp.reorder);
    this.delayMs = milliseconds('delayMs', imp.delayMs, 0);
    this.jitterMs = milliseconds('jitterMs', imp.jitterMs, 0);
    this.reorderMs = milliseconds('reorderMs', imp.reorderMs, 10);
    this.rng = new SeededRandom(imp.seed ?? 1);
  }

  /** A datagram enters the link: how many copies travel (0, 1 or 2), each then timed by `delay()`. */
  copies(): number {
    this.sent++;
    let n = 1;
    if (this.rng.next() < this.duplicate) {
      this.duplicated++;
      n = 2;
    }
    return n;
  }

  /** One copy: -1 when lost, else its delay beyond the network's latency, ms. */
  delay(): number {
    if (this.rng.next() < this.loss) {
      this.lost++;
      return -1;
    }
    let d = this.delayMs;
    if (this.jitterMs > 0) d += this.rng.next() * this.jitterMs;
    if (this.reorder > 0 && this.rng.next() < this.reorder) {
      this.reordered++;
      d += this.reorderMs;
    }
    return d;
  }
}
