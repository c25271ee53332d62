/**
 * The leader-election decision of one candidate, sans I/O: what it read, what its write gave and
 * its local `now` in; whether it leads and what to write out. LeaderElector does the requests.
 *
 * The rule: a data plane outlives its control plane. A leader stands down only on PROOF that
 * another replica holds the Lease — a read that shows another holderIdentity. Failing to reach
 * the API server (network error, timeout, 5xx, 429) or having its credentials rejected
 * (401/403) proves nothing about the other replicas, so the leader keeps forwarding with its
 * last configuration. A 409 on its write proves only that someone wrote: the next read decides.
 *
 * Partitions. Replicas may also hear each other's heartbeats (takeover-decision.ts), which
 * only make a standby try a takeover sooner; the Lease decides. A partition between replicas
 * that both reach the API server: the standby takes the Lease after the heartbeat window, the
 * leader sees the new holder at its next renewal and stands down, so both forward for at most
 * one retry period (plus one request). Between a replica and the API server:
 * - the leader cut off, a standby not: the standby sees the record unchanged for a lease
 *   duration, takes the Lease and moves Liqo's `networking.liqo.io/active` label to its pod
 *   (removing the old leader's), so the Service and the node agents follow it. The old leader
 *   cannot know and keeps forwarding what still reaches it until its first read after the
 *   partition shows the new holder; then it stands down. During that window two replicas run
 *   a data plane (with the same WireGuard key: the peer follows whichever spoke last).
 * - a standby cut off: it cannot write the Lease, so it cannot take over.
 * - everyone cut off (API server down): the leader keeps forwarding; no standby can take over.
 *   A candidate's wait restarts after every failed read, so after the outage a standby waits a
 *   full lease duration of successful reads — the leader renews first and nothing flaps.
 * - credentials revoked (the peering's ServiceAccount deleted): every replica shares them, so
 *   none can move the label or the Lease; the leader keeps forwarding until its pod is deleted
 *   (unpeering deletes the Deployment with the GatewayServer/GatewayClient).
 */

/** What one read of the Lease gave. */
export type LeaseObservation =
  /** The Lease exists; `holder` '' when released. `record` identifies the record's version. */
  | { kind: 'held'; holder: string; record: string; durationMs: number }
  | { kind: 'absent' }
  /** No answer, or an answer that says nothing about the Lease (5xx, 429, 401, 403, …). */
  | { kind: 'unknown' };

/** What one write of the Lease gave. */
export type LeaseWriteResult = 'ok' | 'conflict' | 'failed';

/** The write a read calls for: none, create the Lease, take it over, or renew it. */
export type LeaseWrite = 'none' | 'create' | 'acquire' | 'renew';

export class LeaseDecision {
  private leadingNow = false;
  /** The last record seen and when (local clock) it was first seen; reset by a failed read. */
  private observed: { record: string; at: number } | undefined;
  private lastWriteOk: number | undefined;

  constructor(private readonly identity: string) {}

  get leading(): boolean {
    return this.leadingNow;
  }

  /** Local time of the last successful write (acquire or renew), if any. */
  get lastRenew(): number | undefined {
    return this.lastWriteOk;
  }

  /** After a read: the write to make. A leader that sees another holder stops leading here. */
  afterRead(o: LeaseObservation, now: number): LeaseWrite {
    if (o.kind === 'unknown') {
      // Time without reads does not count towards a takeover (see the file comment).
      this.observed = undefined;
      return 'none';
    }
    if (o.kind === 'absent') return 'create';
    if (o.holder === this.identity) return 'renew';
    if (o.holder === '') return 'acquire';
    if (this.leadingNow) {
      // Proof: another replica holds it.
      this.leadingNow = false;
      this.observed = { record: o.record, at: now };
      return 'none';
    }
    if (this.observed?.record !== o.record) this.observed = { record: o.record, at: now };
    return now - this.observed.at >= o.durationMs ? 'acquire' : 'none';
  }

  /**
   * A takeover the heartbeats asked for (takeover-decision.ts): after a fresh read, take the
   * Lease only while it still names `silent` (the replica whose heartbeats stopped or that said
   * it leaves) or nobody — never from a third replica that got there first.
   */
  takeoverWrite(o: LeaseObservation, silent: string): LeaseWrite {
    if (o.kind === 'unknown') return 'none';
    if (o.kind === 'absent') return 'create';
    if (o.holder === this.identity) return 'renew';
    return o.holder === silent || o.holder === '' ? 'acquire' : 'none';
  }

  /** After the write afterRead asked for. Only success starts leading; nothing here ends it. */
  afterWrite(r: LeaseWriteResult, now: number): void {
    if (r !== 'ok') return;
    this.leadingNow = true;
    this.lastWriteOk = now;
  }

  /** Leadership given up on purpose (stop). */
  resign(): void {
    this.leadingNow = false;
  }
}
