/**
 * The host lane's flow table, I/O-free: one entry per flow the gateway relays for the fabric
 * through its own sockets when it runs without a TUN (src/pipelines/host-lane.ts) — a UDP flow
 * (protocol, source, source port, destination, destination port) or an ICMP echo flow (the
 * echo identifier as source port, 0 as destination port). An entry carries the handle the shell
 * opened for it (a connected socket).
 *
 * Bounded: at most `capacity` entries. A new flow first reclaims expired entries; when the table
 * is still full it is refused (the caller counts the drop), so a flood of new flows cannot evict
 * live ones. Idle timeouts follow the kernel's UDP conntrack: `unrepliedMs` until the first
 * reply, `repliedMs` after it (nf_conntrack_udp_timeout / _stream: 30 s / 120 s); every packet
 * either way refreshes the entry. Time is the caller's `now` (ms), so the table runs on a
 * virtual clock in tests.
 *
 * Lookups allocate nothing: entries are found by a numeric hash and compared field by field;
 * only opening a flow allocates its entry.
 */

/** Idle timeout of a flow that has seen no reply yet (ms), as nf_conntrack_udp_timeout. */
export const HOST_FLOW_UNREPLIED_MS = 30_000;
/** Idle timeout of a flow that has seen a reply (ms), as nf_conntrack_udp_timeout_stream. */
export const HOST_FLOW_REPLIED_MS = 120_000;
/** Default bound on flows. */
export const HOST_FLOW_CAPACITY = 1024;

export class HostFlow<S> {
  /** Packets relayed each way. */
  out = 0;
  back = 0;
  replied = false;
  /** What the shell opened for this flow (null until it exists). */
  handle: S | null = null;
  constructor(
    readonly protocol: number,
    /** IPv4 addresses as unsigned 32-bit numbers; ports (echo id) as numbers. */
    readonly src: number,
    readonly sport: number,
    readonly dst: number,
    readonly dport: number,
    public lastSeen: number,
  ) {}
}

export interface HostFlowTableOptions {
  readonly capacity?: number;
  readonly unrepliedMs?: number;
  readonly repliedMs?: number;
}

function hashOf(protocol: number, src: number, sport: number, dst: number, dport: number): number {
  let h = Math.imul(src ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ dst ^ (h >>> 13), 0xc2b2ae35);
  h = Math.imul(h ^ ((sport << 16) | dport) ^ (h >>> 16), 0x27d4eb2f);
  return (h ^ protocol ^ (h >>> 15)) | 0;
}

export class HostFlowTable<S> {
  readonly capacity: number;
  readonly unrepliedMs: number;
  readonly repliedMs: number;
  /** Flows refused because the table was full of live flows. */
  refused = 0;
  /** Flows removed by their idle timeout. */
  expired = 0;
  private readonly buckets = new Map<number, HostFlow<S>[]>();
  private count = 0;

  constructor(o: HostFlowTableOptions = {}) {
    this.capacity = o.capacity ?? HOST_FLOW_CAPACITY;
    this.unrepliedMs = o.unrepliedMs ?? HOST_FLOW_UNREPLIED_MS;
    this.repliedMs = o.repliedMs ?? HOST_FLOW_REPLIED_MS;
    if (!(Number.isInteger(this.capacity) && this.capacity >= 1))
      throw new RangeError(`host flow table: capacity ${this.capacity} must be a positive integer`);
  }

  get size(): number {
    return this.count;
  }

  /** The live flow with this key (an expired one is not returned), or undefined. */
  lookup(
    protocol: number,
    src: number,
    sport: number,
    dst: number,
    dport: number,
    now: number,
  ): HostFlow<S> | undefined {
    const b = this.buckets.get(hashOf(protocol, src, sport, dst, dport));
    if (b === undefined) return undefined;
    for (let i = 0; i < b.length; i++) {
      const f = b[i]!;
      if (f.protocol === protocol && f.src === src && f.sport === sport && f.dst === dst && f.dport === dport)
        return this.isExpired(f, now) ? undefined : f;
    }
    return undefined;
  }

  /**
   * Opens a flow (the key must not be live: lookup first). Expired entries are reclaimed first,
   * handed to `onClose`; null (counted in `refused`) when the table is full of live flows.
   */
  open(
    protocol: number,
    src: number,
    sport: number,
    dst: number,
    dport: number,
    now: number,
    onClose: (f: HostFlow<S>) => void,
  ): HostFlow<S> | null {
    const h = hashOf(protocol, src, sport, dst, dport);
    // A stale entry with the same key goes first (its handle is closed).
    const b0 = this.buckets.get(h);
    if (b0 !== undefined) {
      for (const f of b0)
        if (f.protocol === protocol && f.src === src && f.sport === sport && f.dst === dst && f.dport === dport) {
          this.remove(f);
          this.expired++;
          onClose(f);
          break;
        }
    }
    if (this.count >= this.capacity) this.expire(now, onClose);
    if (this.count >= this.capacity) {
      this.refused++;
      return null;
    }
    const f = new HostFlow<S>(protocol, src, sport, dst, dport, now);
    let b = this.buckets.get(h);
    if (b === undefined) this.buckets.set(h, (b = []));
    b.push(f);
    this.count++;
    return f;
  }

  /** A packet of flow `f` went out (reply false) or came back (reply true) at `now`. */
  touch(f: HostFlow<S>, now: number, reply: boolean): void {
    f.lastSeen = now;
    if (reply) {
      f.replied = true;
      f.back++;
    } else f.out++;
  }

  isExpired(f: HostFlow<S>, now: number): boolean {
    return now - f.lastSeen >= (f.replied ? this.repliedMs : this.unrepliedMs);
  }

  /** Removes flow `f` (no-op when already gone). */
  remove(f: HostFlow<S>): void {
    const h = hashOf(f.protocol, f.src, f.sport, f.dst, f.dport);
    const b = this.buckets.get(h);
    if (b === undefined) return;
    const i = b.indexOf(f);
    if (i < 0) return;
    b.splice(i, 1);
    if (b.length === 0) this.buckets.delete(h);
    this.count--;
  }

  /** Removes every flow idle past its timeout at `now`, handing each to `onClose`; returns how many. */
  expire(now: number, onClose: (f: HostFlow<S>) => void): number {
    let n = 0;
    for (const b of [...this.buckets.values()])
      for (const f of [...b])
        if (this.isExpired(f, now)) {
          this.remove(f);
          this.expired++;
          n++;
          onClose(f);
        }
    return n;
  }

  /** Every flow (allocates; stats, shutdown). */
  all(): HostFlow<S>[] {
    const out: HostFlow<S>[] = [];
    for (const b of this.buckets.values()) out.push(...b);
    return out;
  }
}
