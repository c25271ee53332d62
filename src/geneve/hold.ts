/**
 * The hold queue of unresolved L2 neighbours, as the kernel's neighbour layer keeps one
 * (net/core/neighbour.c; ip-sysctl: neigh/default/unres_qlen_bytes, unres_qlen, retrans_time_ms,
 * mcast_solicit): packets to a tunnel whose peer MAC is not known yet wait here while ARP asks
 * for it, and leave in order once it is known.
 *
 * A state machine without clocks: `now` (milliseconds) comes from the caller, and poll-driven
 * deadlines do the rest. Per neighbour: the first held packet, or probe() for a tunnel just
 * pointed at a peer, starts resolution (probe 1 is sent at once); a probe is retransmitted every
 * `retransMs` up to `probes` in all; `retransMs` after the last probe without an answer
 * resolution fails and every held packet is dropped (counted as ArpTimeout). A queue over
 * `queueBytes` or `queuePackets` drops its OLDEST packets to make room, as the kernel does
 * (counted as ArpHoldOverflow); so does a packet that would take the held
 * bytes of all neighbours over `totalBytes` (it is the one dropped). At most `maxNeighbours`
 * neighbours are pending at once: a packet to one more is not held (the caller falls back to
 * dropping it).
 *
 * Ownership: the receive and send paths own their buffers only for the duration of a call, so a
 * held packet is a COPY. That copy is the one allocation here: it happens only on this slow path
 * (a neighbour being resolved, normally for a round trip), and what it can hold is bounded by
 * the limits above.
 */

import { GeneveDrop, STAT_ARP_HELD, STAT_ARP_HELD_SENT, STAT_DROPS, type GeneveCounters } from './reasons.js';
import type { GeneveTunnel } from './tunnel.js';

export interface HoldLimits {
  /** Bytes held per unresolved neighbour. Default 212992 (the kernel's unres_qlen_bytes default, SK_WMEM_MAX). */
  queueBytes?: number;
  /** Packets held per unresolved neighbour. Default 101 (the kernel's unres_qlen default). */
  queuePackets?: number;
  /** Interval between ARP probes, and the wait after the last. Default 1000 ms (retrans_time_ms). */
  retransMs?: number;
  /** ARP probes before resolution fails. Default 3 (mcast_solicit). */
  probes?: number;
  /** Neighbours pending at once. Default 64. */
  maxNeighbours?: number;
  /** Bytes held over all neighbours. Default 4 MiB. */
  totalBytes?: number;
}

/** One neighbour being resolved (or resolved, with packets still to send). */
class Pending {
  readonly packets: Uint8Array[] = [];
  /** Index of the oldest packet in `packets` (consumed from the front). */
  head = 0;
  bytes = 0;
  probesSent = 0;
  /** When the next probe is due, or (after the last probe) when resolution fails. */
  deadline = 0;
  constructor(readonly tunnel: GeneveTunnel) {}
  get count(): number {
    return this.packets.length - this.head;
  }
}

/** What hold() did with a packet. */
export const HoldOutcome = {
  /** Held; the neighbour was already being resolved. */
  Held: 0,
  /** Held, and it is the first: send the first probe now. */
  HeldProbe: 1,
  /** Not held: too many neighbours pending (the caller drops it as before). */
  NoEntry: 2,
} as const;
export type HoldOutcome = (typeof HoldOutcome)[keyof typeof HoldOutcome];

export class NeighbourHold {
  readonly queueBytes: number;
  readonly queuePackets: number;
  readonly retransMs: number;
  readonly probes: number;
  readonly maxNeighbours: number;
  readonly totalBytesLimit: number;
  /** Neighbours pending (the hot path checks this before anything else). */
  active = 0;
  /** Bytes and packets held now, over all neighbours. */
  heldBytes = 0;
  heldPackets = 0;
  /** The tunnel of the packet takeReleased last returned. */
  releasedTunnel: GeneveTunnel | null = null;
  private readonly pending = new Map<GeneveTunnel, Pending>();

  constructor(
    private readonly counters: GeneveCounters,
    limits: HoldLimits = {},
  ) {
    this.queueBytes = limits.queueBytes ?? 212992;
    this.queuePackets = limits.queuePackets ?? 101;
    this.retransMs = limits.retransMs ?? 1000;
    this.probes = limits.probes ?? 3;
    this.maxNeighbours = limits.maxNeighbours ?? 64;
    this.totalBytesLimit = limits.totalBytes ?? 4 * 1024 * 1024;
    for (const [k, v] of Object.entries({
      queueBytes: this.queueBytes,
      queuePackets: this.queuePackets,
      probes: this.probes,
      maxNeighbours: this.maxNeighbours,
      totalBytes: this.totalBytesLimit,
    })) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`hold ${k} must be an integer ≥ 1, got ${v}`);
    }
    if (!(this.retransMs > 0)) throw new RangeError(`hold retransMs must be > 0, got ${this.retransMs}`);
  }

  /** True when packets to `tunnel` are waiting (new ones must queue behind them). */
  has(tunnel: GeneveTunnel): boolean {
    return this.active !== 0 && this.pending.has(tunnel);
  }

  /**
   * Hold a copy of buf[off, off+len) for `tunnel` (counted as held, or as an overflow drop when
   * the limits leave no room for it).
   */
  hold(tunnel: GeneveTunnel, buf: Uint8Array, off: number, len: number, now: number): HoldOutcome {
    let p = this.pending.get(tunnel);
    let outcome: HoldOutcome = HoldOutcome.Held;
    if (p === undefined) {
      if (this.active >= this.maxNeighbours) return HoldOutcome.NoEntry;
      p = new Pending(tunnel);
      p.probesSent = 1;
      p.deadline = now + this.retransMs;
      this.pending.set(tunnel, p);
      this.active++;
      outcome = HoldOutcome.HeldProbe;
    }
    // Make room in this queue: the oldest go first (the kernel's __neigh_event_send).
    while (p.count > 0 && (p.bytes + len > this.queueBytes || p.count >= this.queuePackets)) {
      this.dropOldest(p);
      this.count(p.tunnel, GeneveDrop.ArpHoldOverflow, 1);
    }
    if (this.heldBytes + len > this.totalBytesLimit || len > this.queueBytes) {
      this.count(tunnel, GeneveDrop.ArpHoldOverflow, 1);
      return outcome; // a first packet's probe still goes out
    }
    p.packets.push(buf.slice(off, off + len)); // the bounded slow-path copy (see the file comment)
    p.bytes += len;
    this.heldBytes += len;
    this.heldPackets++;
    this.counters.values[STAT_ARP_HELD]++;
    return outcome;
  }

  /**
   * Start resolving `tunnel`'s neighbour with nothing held yet: probe 1 is due at once (the
   * next due()). For a tunnel that has just been pointed at a peer: the request carries our MAC,
   * so a peer holding packets for us learns it and sends them without waiting for its own
   * retransmission. False when it is pending already or maxNeighbours are.
   */
  probe(tunnel: GeneveTunnel, now: number): boolean {
    if (this.pending.has(tunnel) || this.active >= this.maxNeighbours) return false;
    const p = new Pending(tunnel);
    p.deadline = now;
    this.pending.set(tunnel, p);
    this.active++;
    return true;
  }

  /**
   * The next held packet of a neighbour whose MAC is known now, oldest first, copied to
   * buf[off, ...): returns its length and sets `releasedTunnel`, or -1 when none is ready.
   * An entry that is resolved and empty is removed.
   */
  takeReleased(buf: Uint8Array, off: number): number {
    for (const p of this.pending.values()) {
      if (!p.tunnel.remoteMacKnown) continue;
      if (p.count === 0) {
        this.remove(p);
        continue;
      }
      const pkt = p.packets[p.head]!;
      if (off + pkt.length > buf.length) {
        this.dropOldest(p); // not with a buffer of the largest packet's size; counted, never thrown
        this.count(p.tunnel, GeneveDrop.ArpHoldOverflow, 1);
        continue;
      }
      buf.set(pkt, off);
      this.shift(p, pkt.length);
      if (p.count === 0) this.remove(p);
      this.releasedTunnel = p.tunnel;
      this.counters.values[STAT_ARP_HELD_SENT]++;
      return pkt.length;
    }
    this.releasedTunnel = null;
    return -1;
  }

  /**
   * Deadlines at `now`: returns the tunnel whose probe is due (the caller sends one ARP request
   * for it; call again for the next), or null. Neighbours whose last probe went unanswered for
   * `retransMs` are failed: their packets dropped (counted as ArpTimeout) and the entry removed.
   */
  due(now: number): GeneveTunnel | null {
    for (const p of this.pending.values()) {
      if (p.tunnel.remoteMacKnown || now < p.deadline) continue;
      if (p.probesSent < this.probes) {
        p.probesSent++;
        p.deadline = now + this.retransMs;
        return p.tunnel;
      }
      this.count(p.tunnel, GeneveDrop.ArpTimeout, p.count);
      this.remove(p);
    }
    return null;
  }

  /** The earliest deadline (ms), or Infinity when nothing is pending; a resolved neighbour with packets is due now. */
  nextDeadline(now: number): number {
    let d = Infinity;
    for (const p of this.pending.values()) {
      if (p.tunnel.remoteMacKnown) return now;
      if (p.deadline < d) d = p.deadline;
    }
    return d;
  }

  private count(tunnel: GeneveTunnel, reason: GeneveDrop, n: number): void {
    this.counters.drops[reason]! += n;
    tunnel.stats[STAT_DROPS] += n;
  }

  private dropOldest(p: Pending): void {
    this.shift(p, p.packets[p.head]!.length);
  }

  private shift(p: Pending, len: number): void {
    p.packets[p.head++] = EMPTY;
    p.bytes -= len;
    this.heldBytes -= len;
    this.heldPackets--;
    if (p.head === p.packets.length) {
      p.packets.length = 0;
      p.head = 0;
    }
  }

  private remove(p: Pending): void {
    this.heldBytes -= p.bytes;
    this.heldPackets -= p.count;
    this.pending.delete(p.tunnel);
    this.active--;
  }
}

const EMPTY = new Uint8Array(0);
