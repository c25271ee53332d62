/**
 * Active/standby for gateway replicas with a coordination.k8s.io/v1 Lease, following
 * client-go's leader-election rules:
 * - a candidate acquires the Lease when it does not exist, has no holder, or its record has not
 *   changed for `leaseDurationMs` as observed on the candidate's OWN clock (the holder's
 *   renewTime is never compared with the local clock, so clock skew cannot cause a takeover);
 * - the leader renews every `retryPeriodMs`; if it cannot renew for `renewDeadlineMs` it steps
 *   down (onStoppedLeading) — before the lease can have lapsed for others, since
 *   renewDeadline < leaseDuration;
 * - writes are optimistic (PUT with resourceVersion); a 409 just means another candidate won
 *   this round;
 * - stop({ release: true }) hands the Lease over at once (empty holder, 1 s duration).
 * Callbacks run on the event loop; onStoppedLeading is always called after onStartedLeading if
 * leadership ends for any reason (including stop()).
 */
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { httpStatusOf, wrapApiError } from './client.js';

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
  /** API errors (each failed attempt); default: ignored. */
  onError?: (err: unknown) => void;
  /** Local monotonic-enough clock in ms (injectable for tests). */
  now?: () => number;
}

/** Kubernetes MicroTime text (RFC 3339 with microseconds, UTC). */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly leaseDuration: number;
  private readonly renewDeadline: number;
  private readonly retryPeriod: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private leading = false;
  private lastRenewOk = 0;
  /** The last lease record seen and when (local clock) it was first seen. */
  private observed: { key: string; at: number } | undefined;
  private inFlight: Promise<void> = Promise.resolve();

  constructor(private readonly opts: LeaderElectorOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.leaseDuration = opts.leaseDurationMs ?? 15_000;
    this.renewDeadline = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriod = opts.retryPeriodMs ?? 2_000;
    this.now = opts.now ?? Date.now;
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
        this.opts.onError?.(wrapApiError('release Lease', e));
      }
    }
    this.setLeading(false);
  }

  private tick(): void {
    if (!this.running) return;
    this.inFlight = this.attempt().finally(() => {
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
    const ok = await this.tryAcquireOrRenew();
    if (!this.running) return;
    const now = this.now();
    if (ok) {
      this.lastRenewOk = now;
      this.setLeading(true);
    } else if (this.leading && now - this.lastRenewOk >= this.renewDeadline) {
      this.setLeading(false);
    }
  }

  /** One round; true when this candidate holds the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { name, namespace, identity } = this.opts;
    const now = this.now();
    const durationSec = Math.max(1, Math.ceil(this.leaseDuration / 1000));
    let cur: V1Lease;
    try {
      cur = await this.api.readNamespacedLease({ name, namespace });
    } catch (e) {
      if (httpStatusOf(e) !== 404) {
        this.opts.onError?.(wrapApiError('read Lease', e));
        return false;
      }
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: durationSec,
              leaseTransitions: 0,
              acquireTime: microTime(now) as unknown as Date,
              renewTime: microTime(now) as unknown as Date,
            },
          },
        });
        return true;
      } catch (e2) {
        if (httpStatusOf(e2) !== 409) this.opts.onError?.(wrapApiError('create Lease', e2));
        return false;
      }
    }
    const spec = cur.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const key = `${holder}|${String(spec.renewTime)}|${spec.leaseTransitions ?? 0}`;
    if (this.observed?.key !== key) this.observed = { key, at: now };
    const heldByOther = holder !== '' && holder !== identity;
    const recordDurationMs = (spec.leaseDurationSeconds ?? durationSec) * 1000;
    if (heldByOther && now - this.observed.at < recordDurationMs) return false;

    const takeover = holder !== identity;
    cur.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: durationSec,
      renewTime: microTime(now) as unknown as Date,
      ...(takeover
        ? { acquireTime: microTime(now) as unknown as Date, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }
        : {}),
    };
    try {
      // replace carries metadata.resourceVersion: a concurrent writer makes this a 409.
      await this.api.replaceNamespacedLease({ name, namespace, body: cur });
      return true;
    } catch (e) {
      if (httpStatusOf(e) !== 409) this.opts.onError?.(wrapApiError('update Lease', e));
      return false;
    }
  }
}
