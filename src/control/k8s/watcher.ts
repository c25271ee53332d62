/**
 * Kubernetes mode: informers (client-node makeInformer = list + watch with resourceVersion,
 * re-list after 410 Gone) on the Liqo resources, a debounced re-translation into the
 * configuration model on every change, and emission of the model only when it changed.
 *
 * Contracts:
 * - `start()` resolves with the first translation once every informer has listed, or rejects
 *   with the ConfigError/KubernetesApiError that prevented it.
 * - After start, a change triggers one translation `debounceMs` after the last event of a
 *   burst; a valid result that differs from the last emitted config is passed to `onConfig`;
 *   a ConfigError goes to `onError` and the previous config stays in force.
 * - A failed informer (connection refused, list error) is restarted with exponential backoff
 *   (1 s → 30 s, per informer); errors are reported to `onError` as KubernetesApiError. The
 *   backoff resets only after a successful list, or when the informer had run without error
 *   for longer than the maximum delay (a watch resumed from its resourceVersion lists nothing).
 *   client-node emits `connect` at the start of every attempt, before anything succeeded, so
 *   `connect` says nothing about health and is not used.
 * - Items are stamped with their kind/apiVersion (a real API server's list items carry none),
 *   so errors name "Secret ns/name", not "object ns/name".
 * - `stop()` stops all informers and timers; no callback fires afterwards.
 */
import {
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type ObjectCache,
} from '@kubernetes/client-node';
import type { WeftConfig } from '../config.js';
import { deepEqual } from '../diff.js';
import { listFunction, wrapApiError } from './client.js';
import {
  KINDS,
  apiVersionOf,
  collectionPath,
  emptyResources,
  type LiqoResourceName,
  type LiqoResources,
  type ResourceKind,
} from './resources.js';
import { translate } from './translate.js';
import type { TranslateOptions, TranslateResult } from './translate-common.js';
import { WatchTimers } from './watch-timers.js';

/**
 * Default quiet time before a translation. The events of one write (an object and its status,
 * a controller's few objects) arrive within milliseconds of each other, and a translation is
 * cheap and applied as a diff, so the wait only needs to gather those; everything longer delays
 * what a change is for — after a gateway failover, the node agents follow the InternalFabric's
 * new gateway only after it.
 */
export const WATCH_DEBOUNCE_MS = 30;

export interface LiqoWatcherOptions extends TranslateOptions {
  kubeConfig: KubeConfig;
  /** Namespace of the per-peer resources (the Liqo tenant namespace); undefined = all namespaces. RouteConfigurations are always read from every namespace. */
  namespace?: string;
  /** Namespace of ipam.liqo.io Networks/IPs (default: all namespaces). */
  ipamNamespace?: string;
  /** Label selector for the keys Secrets (default: none — every Secret in `namespace`). */
  secretLabelSelector?: string;
  /** Quiet time after a change before translating (default WATCH_DEBOUNCE_MS). */
  debounceMs?: number;
  onConfig: (result: TranslateResult) => void;
  onError?: (err: unknown) => void;
  /**
   * A translation succeeded after one was rejected (onError), whether or not the result
   * differs from the last emitted one (a reverted bad edit gives the same configuration).
   */
  onRecovered?: () => void;
  /** Debug trace: one line per informer event, restart and translation. */
  onDebug?: (msg: string) => void;
}

/** Restart delays of a failed informer: first, cap, and the quiet time after which it resets. */
export const WATCH_BACKOFF = { firstMs: 1000, maxMs: 30_000 } as const;

type Inf = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;

const WATCHED: readonly [LiqoResourceName, ResourceKind][] = [
  ['configurations', KINDS.configurations],
  ['gatewayServers', KINDS.gatewayServers],
  ['gatewayClients', KINDS.gatewayClients],
  ['secrets', KINDS.secrets],
  ['publicKeys', KINDS.publicKeys],
  ['internalNodes', KINDS.internalNodes],
  ['internalFabrics', KINDS.internalFabrics],
  ['geneveTunnels', KINDS.geneveTunnels],
  ['routeConfigurations', KINDS.routeConfigurations],
  ['networks', KINDS.networks],
  ['ips', KINDS.ips],
];
const KIND_OF = new Map(WATCHED);

export class LiqoWatcher {
  private readonly informers = new Map<LiqoResourceName, Inf>();
  /** Per informer: the next restart delay and when the last restart was scheduled. */
  private readonly backoff = new Map<LiqoResourceName, { delayMs: number; at: number }>();
  private readonly timers = new WatchTimers();
  private last: WeftConfig | undefined;
  private stopped = false;
  private started = false;
  /** The last translation was rejected. */
  private rejected = false;
  /** Errors reported by informers before start() finished (client-node does not reject start()). */
  private startErrors: unknown[] = [];

  constructor(private readonly opts: LiqoWatcherOptions) {}

  /** The configuration last emitted (or returned by start()). */
  get current(): WeftConfig | undefined {
    return this.last;
  }

  /** Current cache contents as translator input. */
  snapshot(): LiqoResources {
    const r = emptyResources();
    for (const [name, inf] of this.informers) {
      const kind = KIND_OF.get(name)!;
      (r[name] as KubernetesObject[]) = inf
        .list()
        .map((o) =>
          o.kind !== undefined && o.apiVersion !== undefined
            ? o
            : { ...o, kind: o.kind ?? kind.kind, apiVersion: o.apiVersion ?? apiVersionOf(kind) },
        );
    }
    return r;
  }

  async start(): Promise<TranslateResult> {
    const o = this.opts;
    for (const [name, kind] of WATCHED) {
      // A key given by the pod (mounted Secret) makes the Secrets unnecessary: not read, no RBAC.
      // The node role never needs them (no WireGuard on nodes).
      if (kind === KINDS.secrets && (o.privateKey !== undefined || o.role === 'node')) continue;
      // Liqo keeps ipam objects and the per-node pod RouteConfigurations ("NODE-gw-node", made by
      // its internal pod controller) in its own namespace, not the tenant one: those are read
      // cluster-wide (ipam: unless --ipam-namespace says where).
      const ns =
        kind === KINDS.networks || kind === KINDS.ips
          ? o.ipamNamespace
          : kind === KINDS.routeConfigurations
            ? undefined
            : o.namespace;
      const sel = kind === KINDS.secrets ? o.secretLabelSelector : undefined;
      const list = listFunction(o.kubeConfig, kind, kind.namespaced ? ns : undefined, sel);
      const listed = async () => {
        const r = await list();
        this.backoff.delete(name); // healthy again: the next failure starts from the first delay
        return r;
      };
      const inf = makeInformer<KubernetesObject>(
        o.kubeConfig,
        collectionPath(kind, kind.namespaced ? ns : undefined),
        listed,
        sel,
      ) as Inf;
      const changed = (what: string) => (obj: KubernetesObject) => {
        o.onDebug?.(
          `${name}: ${what} ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name ?? '?'}`,
        );
        this.schedule();
      };
      inf.on('add', changed('add'));
      inf.on('update', changed('update'));
      inf.on('delete', changed('delete'));
      inf.on('error', (err) => this.restart(name, inf, err));
      this.informers.set(name, inf);
    }
    try {
      await Promise.all(
        [...this.informers].map(async ([name, inf]) => {
          try {
            await inf.start();
          } catch (e) {
            throw wrapApiError(`list/watch ${name}`, e);
          }
        }),
      );
    } catch (e) {
      await this.stop();
      throw e;
    }
    // client-node reports list/watch failures through the 'error' callback, not start()'s promise.
    if (this.startErrors.length > 0) {
      await this.stop();
      throw this.startErrors[0];
    }
    if (this.stopped) throw new Error('LiqoWatcher stopped during start');
    const result = translate(this.snapshot(), o);
    this.last = result.config;
    this.started = true;
    return result;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clear();
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  /** Translate now (tests, or a forced resync). Emits like a debounced change would. */
  resync(): void {
    if (this.stopped || !this.started) return;
    let result: TranslateResult;
    try {
      result = translate(this.snapshot(), this.opts);
    } catch (e) {
      this.rejected = true;
      this.opts.onError?.(e);
      return;
    }
    if (this.rejected) {
      this.rejected = false;
      this.opts.onRecovered?.();
    }
    if (this.last !== undefined && deepEqual(this.last, result.config)) {
      this.opts.onDebug?.('translated: no change');
      return;
    }
    this.opts.onDebug?.('translated: configuration changed');
    this.last = result.config;
    this.opts.onConfig(result);
  }

  private schedule(): void {
    if (this.stopped || !this.started) return;
    this.timers.debounced(this.opts.debounceMs ?? WATCH_DEBOUNCE_MS, () => this.resync());
  }

  private restart(name: LiqoResourceName, inf: Inf, err: unknown): void {
    if (this.stopped) return;
    if (!this.started) {
      this.startErrors.push(wrapApiError(`list/watch ${name}`, err));
      return;
    }
    this.opts.onError?.(wrapApiError(`list/watch ${name}`, err));
    const now = Date.now();
    const prev = this.backoff.get(name);
    // Quiet for longer than the cap since the last restart: it was healthy (resumed watches list nothing).
    const delay =
      prev === undefined || now - prev.at > 2 * WATCH_BACKOFF.maxMs
        ? WATCH_BACKOFF.firstMs
        : Math.min(WATCH_BACKOFF.maxMs, prev.delayMs * 2);
    this.backoff.set(name, { delayMs: delay, at: now });
    this.opts.onDebug?.(`${name}: restarting in ${delay} ms`);
    this.timers.after(delay, () => {
      if (!this.stopped) void inf.start();
    });
  }
}
