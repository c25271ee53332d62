/**
 * Active/standby for gateway replicas with a coordination.k8s.io/v1 Lease, after client-go's
 * leader election but with a data plane that outlives its control plane (lease-decision.ts):
 * - a candidate acquires the Lease when it does not exist, has no holder, or its record has not
 *   changed for `leaseDurationMs` of successful reads on the candidate's OWN clock (the holder's
 *   renewTime is never compared with the local clock, so clock skew cannot cause a takeover);
 * - the leader renews every `retryPeriodMs`; it stands down only when a read shows another
 *   holder. An API server it cannot reach, or that rejects its credentials, keeps it leading
 *   (after `renewDeadlineMs` without a renewal `onRenewOverdue` says so, once);
 * - writes are optimistic (PUT with resourceVersion); a 409 just means another candidate wrote
 *   this round: the next read decides;
 * - each request gets `renewDeadlineMs` to answer (see within());
 * - stop({ release: true }) hands the Lease over at once (empty holder, 1 s duration);
 * - takeOver(holder) is the fast path the replicas' heartbeats trigger: one read and, if the
 *   Lease still names `holder` (or nobody), one write with its resourceVersion; checkNow() runs
 *   a round at once (a leader told that another replica is active). Both wait for the round in
 *   flight, so rounds never overlap.
 * Errors are reported once per episode (the first failure, or a different HTTP status), not per
 * request; `onRecovered` ends the episode.
 * Callbacks run on the event loop; onStoppedLeading is always called after onStartedLeading if
 * leadership ends for any reason (including stop()).
 */
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { httpStatusOf, wrapApiError } from './client.js';
import { LeaseDecision, type LeaseObservation, type LeaseWrite, type LeaseWriteResult } from './lease-decision.js';

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  /** This candidate's identity (pod name); must be unique among candidates. */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  /** API errors, once per episode (see the file comment); default: ignored. */
  onError?: (err: unknown) => void;
  /** The first successful request after onError. */
  onRecovered?: () => void;
  /** Leading, no renewal for renewDeadlineMs (the API unreachable): called once per episode. */
  onRenewOverdue?: (sinceMs: number) => void;
  /** Owner of the Lease when this candidate creates it (the garbage collector removes it with the owner). */
  owner?: { apiVersion: string; kind: string; name: string; uid: string };
  /** Local monotonic-enough clock in ms (injectable for tests). */
  now?: () => number;
}

/** Kubernetes MicroTime text (RFC 3339 with microseconds, UTC). */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/**
 * `p`, or a rejection after `ms`: a request to an API server behind a partition can hang for as
 * long as TCP retransmits (minutes), which would stall the rounds. The request is abandoned,
 * not aborted; a late write carries a stale resourceVersion and meets 409.
 */
function within<T>(p: Promise<T>, ms: number, operation: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${operation}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly leaseDuration: number;
  private readonly renewDeadline: number;
  private readonly retryPeriod: number;
  private readonly now: () => number;
  private readonly decision: LeaseDecision;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private leading = false;
  /** The HTTP status (or 'network') of the current error episode. */
  private problem: string | undefined;
  private overdueReported = false;
  private inFlight: Promise<void> = Promise.resolve();

  constructor(private readonly opts: LeaderElectorOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.leaseDuration = opts.leaseDurationMs ?? 15_000;
    this.renewDeadline = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriod = opts.retryPeriodMs ?? 2_000;
    this.now = opts.now ?? Date.now;
    this.decision = new LeaseDecision(opts.identity);
    if (!(this.renewDeadline < this.leaseDuration))
      throw new RangeError('LeaderElector: renewDeadlineMs must be < leaseDurationMs');
    if (!(this.retryPeriod < this.renewDeadline))
      throw new RangeError('LeaderElector: retryPeriodMs must be < renewDeadlineMs');
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.tick();
  }

  /** Stop campaigning; with `release`, give the Lease up immediately if held. */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    this.running = false;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
    if (this.leading && opts.release === true) {
      try {
        const cur = await this.api.readNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace });
        if (cur.spec?.holderIdentity === this.opts.identity) {
          cur.spec = {
            ...cur.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: microTime(this.now()) as unknown as Date,
          };
          await this.api.replaceNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace, body: cur });
        }
      } catch (e) {
        // 409: another candidate wrote it first (took it over): nothing left to release.
        if (httpStatusOf(e) !== 409) this.opts.onError?.(wrapApiError('release Lease', e));
      }
    }
    this.decision.resign();
    this.setLeading(false);
  }

  /**
   * Take the Lease from `holder` now (its heartbeats stopped, or it said it leaves): resolves
   * true when this candidate leads afterwards. Not while stopped.
   */
  takeOver(holder: string): Promise<boolean> {
    const run = this.inFlight.then(async () => {
      if (!this.running) return;
      const { cur, seen } = await this.read();
      const write = this.decision.takeoverWrite(seen, holder);
      if (write === 'none') return;
      this.decision.afterWrite(await this.write(write, cur), this.now());
      if (this.running) this.setLeading(this.decision.leading);
    });
    this.inFlight = run.catch(() => {});
    return run.then(() => this.leading);
  }

  /** One round now (read, decide, write), after the one in flight; the periodic rounds go on. */
  checkNow(): Promise<void> {
    const run = this.inFlight.then(() => (this.running ? this.attempt() : undefined));
    this.inFlight = run.catch(() => {});
    return run;
  }

  private tick(): void {
    if (!this.running) return;
    // A round that throws (a callback did) must not end the rounds: the chain goes on.
    this.inFlight = this.inFlight
      .then(() => this.attempt())
      .catch(() => {})
      .finally(() => {
        if (this.running) this.timer = setTimeout(() => this.tick(), this.retryPeriod);
      });
  }

  private setLeading(v: boolean): void {
    if (v === this.leading) return;
    this.leading = v;
    if (v) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private async attempt(): Promise<void> {
    await this.round();
    if (!this.running) return;
    this.setLeading(this.decision.leading);
    if (!this.leading) return;
    const since = this.now() - (this.decision.lastRenew ?? 0);
    if (since < this.renewDeadline) this.overdueReported = false;
    else if (!this.overdueReported) {
      this.overdueReported = true;
      this.opts.onRenewOverdue?.(since);
    }
  }

  /** A failed request: reported once per episode (per HTTP status). */
  private failed(operation: string, e: unknown): void {
    const kind = String(httpStatusOf(e) ?? 'network');
    if (this.problem === kind) return;
    this.problem = kind;
    this.opts.onError?.(wrapApiError(operation, e));
  }

  private succeeded(): void {
    if (this.problem === undefined) return;
    this.problem = undefined;
    this.opts.onRecovered?.();
  }

  /** One round: read, decide, write. */
  private async round(): Promise<void> {
    const { cur, seen } = await this.read();
    const write = this.decision.afterRead(seen, this.now());
    if (write === 'none') return;
    this.decision.afterWrite(await this.write(write, cur), this.now());
  }

  private async read(): Promise<{ cur: V1Lease | undefined; seen: LeaseObservation }> {
    const { name, namespace } = this.opts;
    let cur: V1Lease | undefined;
    let seen: LeaseObservation;
    try {
      cur = await within(this.api.readNamespacedLease({ name, namespace }), this.renewDeadline, 'read Lease');
      this.succeeded();
      const spec = cur.spec ?? {};
      seen = {
        kind: 'held',
        holder: spec.holderIdentity ?? '',
        record: `${spec.holderIdentity ?? ''}|${String(spec.renewTime)}|${spec.leaseTransitions ?? 0}`,
        durationMs: (spec.leaseDurationSeconds ?? Math.ceil(this.leaseDuration / 1000)) * 1000,
      };
    } catch (e) {
      if (httpStatusOf(e) === 404) {
        this.succeeded();
        seen = { kind: 'absent' };
      } else {
        this.failed('read Lease', e);
        seen = { kind: 'unknown' };
      }
    }
    return { cur, seen };
  }

  private async write(what: Exclude<LeaseWrite, 'none'>, cur: V1Lease | undefined): Promise<LeaseWriteResult> {
    const { name, namespace, identity, owner } = this.opts;
    const now = this.now();
    const durationSec = Math.max(1, Math.ceil(this.leaseDuration / 1000));
    const op = what === 'create' ? 'create Lease' : 'update Lease';
    try {
      if (what === 'create' || cur === undefined) {
        const create = this.api.createNamespacedLease({
          namespace,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace, ...(owner !== undefined ? { ownerReferences: [owner] } : {}) },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: durationSec,
              leaseTransitions: 0,
              acquireTime: microTime(now) as unknown as Date,
              renewTime: microTime(now) as unknown as Date,
            },
          },
        });
        await within(create, this.renewDeadline, op);
      } else {
        const spec = cur.spec ?? {};
        cur.spec = {
          ...spec,
          holderIdentity: identity,
          leaseDurationSeconds: durationSec,
          renewTime: microTime(now) as unknown as Date,
          ...(what === 'acquire'
            ? { acquireTime: microTime(now) as unknown as Date, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }
            : {}),
        };
        // A Lease created before it had an owner is adopted (other owners kept).
        const refs = cur.metadata?.ownerReferences ?? [];
        if (owner !== undefined && !refs.some((r) => r.uid === owner.uid))
          cur.metadata = { ...cur.metadata, ownerReferences: [...refs, owner] };
        // replace carries metadata.resourceVersion: a concurrent writer makes this a 409.
        await within(this.api.replaceNamespacedLease({ name, namespace, body: cur }), this.renewDeadline, op);
      }
      this.succeeded();
      return 'ok';
    } catch (e) {
      if (httpStatusOf(e) === 409) return 'conflict';
      this.failed(op, e);
      return 'failed';
    }
  }
}
