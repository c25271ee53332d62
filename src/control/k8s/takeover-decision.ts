/**
 * Fast failure detection between gateway replicas, sans I/O: the heartbeats one replica heard
 * and its local `now` in; whether to take the Lease over, or to read it at once, out. The
 * heartbeat link (src/daemon/k8s-heartbeat.ts) does the sockets and timers; LeaderElector
 * does the Lease write.
 *
 * Every replica sends a heartbeat to every other one each interval, saying whether it is the
 * active one (it holds the Lease), a standby, or leaving (SIGTERM: it released the Lease).
 * - A standby takes over when the replica it last heard as active has been silent for
 *   `windowMs`, or at once when that replica says it is leaving. Taking over is a Lease write
 *   with a resourceVersion precondition that succeeds only while the Lease still names that
 *   replica (or nobody): the Lease stays the single source of truth, heartbeats only say when
 *   to look.
 * - Only the silence of a replica heard as active counts. A replica that never heard the
 *   active (a partition since it started, or a peer without heartbeats) waits for the Lease to
 *   expire instead; so after a partition between replicas the replica that lost the Lease does
 *   not take it back from a leader it cannot hear, and the two do not flap.
 * - A leader that hears another replica call itself active reads the Lease at once (it may
 *   have lost it during a partition): the read, not the heartbeat, makes it stand down.
 * - A leader whose standby falls silent reads the Lease every `windowMs / 5` from `windowMs`
 *   to `3 × windowMs` after it last heard it: in a partition between the replicas the standby
 *   takes the Lease about `windowMs` after it last heard the leader, so the leader finds the new
 *   holder within one such step instead of at its next renewal, and two replicas forward for
 *   less than `windowMs`. A standby that died costs the API server ten reads.
 * - A failed takeover (the write lost, the API server unreachable) is retried every `windowMs`
 *   while the silence lasts.
 * Heartbeats are authenticated and carry the sender's clock (heartbeat.ts); `accept` keeps only
 * those newer than the last one from the same sender and within `maxSkewMs` of the local clock,
 * so a replayed heartbeat can neither hold off nor cause a takeover beyond that skew.
 */

export type ReplicaState = 'active' | 'standby' | 'leaving';

/** One verified heartbeat: who sent it, in which state, and its send time on the sender's clock. */
export interface Heard {
  from: string;
  state: ReplicaState;
  sentAt: number;
}

export type TakeoverAction =
  | { kind: 'none' }
  /** Take the Lease if it still names `holder` (or nobody). */
  | { kind: 'takeover'; holder: string; reason: 'silent' | 'leaving' }
  /**
   * Leading, and another replica says it is active (`heard-active`) or a standby fell silent
   * (`standby-silent`; `first`: the first read for this silence): read the Lease now.
   */
  | { kind: 'check-lease'; other: string; reason: 'heard-active' }
  | { kind: 'check-lease'; other: string; reason: 'standby-silent'; first: boolean };

export interface TakeoverTimings {
  /** Silence of the active replica after which a standby takes over. */
  windowMs: number;
  /** Largest accepted |sender clock − local clock|. */
  maxSkewMs: number;
}

const NONE: TakeoverAction = { kind: 'none' };

export class TakeoverDecision {
  /** Last accepted send time per sender (sender clock): replays and reordering are dropped. */
  private readonly lastSent = new Map<string, number>();
  /** The replica last heard as active, and when (local clock). */
  private active: { id: string; at: number } | undefined;
  /** A takeover asked for and when (local clock): not asked again before windowMs. */
  private asked: { holder: string; at: number } | undefined;
  private leaving: string | undefined;
  /** Standby replicas heard within the window, by identity (local clock). */
  private readonly standbys = new Map<string, number>();
  private pendingCheck: string | undefined;
  private leadingNow = false;
  /** Leading: the silent standby being followed, when its silence began and the last read. */
  private follow: { id: string; heardAt: number; readAt: number } | undefined;

  constructor(
    private readonly self: string,
    private readonly t: TakeoverTimings,
  ) {
    if (!(t.windowMs > 0)) throw new RangeError('TakeoverDecision: windowMs must be > 0');
    if (!(t.maxSkewMs > 0)) throw new RangeError('TakeoverDecision: maxSkewMs must be > 0');
  }

  /** Whether this replica leads (the Lease says so): a leader never takes over. */
  setLeading(v: boolean, now: number): void {
    this.leadingNow = v;
    if (v) {
      this.active = { id: this.self, at: now };
      this.asked = undefined;
      this.leaving = undefined;
    } else this.follow = undefined;
  }

  /**
   * A verified heartbeat. Returns false (and ignores it) when it is our own, not newer than
   * the last from its sender, or its clock is more than maxSkewMs from ours (`wallNow`).
   */
  accept(h: Heard, now: number, wallNow: number): boolean {
    if (h.from === this.self) return false;
    const last = this.lastSent.get(h.from);
    if (last !== undefined && h.sentAt <= last) return false;
    if (Math.abs(h.sentAt - wallNow) > this.t.maxSkewMs) return false;
    this.lastSent.set(h.from, h.sentAt);
    if (h.state === 'standby') {
      this.standbys.set(h.from, now);
      return true;
    }
    this.standbys.delete(h.from);
    if (h.state === 'leaving') {
      if (this.active === undefined || this.active.id === h.from) this.leaving = h.from;
      return true;
    }
    // active
    if (this.leadingNow) this.pendingCheck = h.from;
    else {
      this.active = { id: h.from, at: now };
      if (this.leaving === h.from) this.leaving = undefined;
      // The replica we tried to replace is back (or another took over): no retry.
      this.asked = undefined;
    }
    return true;
  }

  /** What to do now (call after each heartbeat and on a timer finer than windowMs). */
  tick(now: number): TakeoverAction {
    if (this.leadingNow) {
      const other = this.pendingCheck;
      this.pendingCheck = undefined;
      if (other !== undefined) return { kind: 'check-lease', other, reason: 'heard-active' };
      return this.followSilentStandby(now);
    }
    this.pendingCheck = undefined;
    if (this.leaving !== undefined) {
      const holder = this.leaving;
      if (this.asked?.holder === holder && now - this.asked.at < this.t.windowMs) return NONE;
      this.asked = { holder, at: now };
      return { kind: 'takeover', holder, reason: 'leaving' };
    }
    const a = this.active;
    if (a === undefined || a.id === this.self || now - a.at < this.t.windowMs) return NONE;
    if (this.asked?.holder === a.id && now - this.asked.at < this.t.windowMs) return NONE;
    this.asked = { holder: a.id, at: now };
    return { kind: 'takeover', holder: a.id, reason: 'silent' };
  }

  /** Leading: a read of the Lease when due while a standby heard before is silent. */
  private followSilentStandby(now: number): TakeoverAction {
    const w = this.t.windowMs;
    const f = this.follow;
    if (f !== undefined) {
      const back = this.standbys.get(f.id);
      if (back !== undefined && back > f.heardAt) this.follow = undefined;
      else if (now - f.heardAt > 3 * w) this.follow = undefined;
      else if (now - f.readAt < w / 5) return NONE;
      else {
        f.readAt = now;
        return { kind: 'check-lease', other: f.id, reason: 'standby-silent', first: false };
      }
    }
    for (const [id, at] of this.standbys) {
      if (now - at > 3 * w) this.standbys.delete(id);
      else if (this.follow === undefined && now - at >= w) {
        this.follow = { id, heardAt: at, readAt: now };
        this.standbys.delete(id);
        return { kind: 'check-lease', other: id, reason: 'standby-silent', first: true };
      }
    }
    return NONE;
  }

  /** The replica last heard as active (undefined: none heard yet). */
  get lastActive(): string | undefined {
    return this.active?.id;
  }

  /** Some replica other than us heard active since `since` (local clock): a handover completed. */
  otherActiveSince(since: number): string | undefined {
    const a = this.active;
    return a !== undefined && a.id !== this.self && a.at >= since ? a.id : undefined;
  }

  /** Standby replicas heard within the window before `now`. */
  standbysHeard(now: number): string[] {
    return [...this.standbys].filter(([, at]) => now - at < this.t.windowMs).map(([id]) => id);
  }
}
