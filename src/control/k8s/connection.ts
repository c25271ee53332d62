/**
 * Liqo Connection status writer: what Liqo's gateway does for networking.liqo.io/v1beta1
 * Connection — create it if missing (spec.type Server|Client, spec.gatewayRef, label
 * liqo.io/remote-cluster-id) and keep status.value (Connecting / Connected / Error) and
 * status.latency ({ value: "2ms" | "850μs", timestamp }) current through the status
 * subresource (JSON merge patch).
 *
 * Write policy (Liqo's): write when the value changes, or when the last written latency is
 * older than `updateIntervalMs` (Liqo's --ping-update-status-interval, default 10 s here), so a
 * steady connection costs one API write per interval, not one per ping.
 *
 * Lifetime: like Liqo's, the Connection is owned (ownerReference, not controller) by the
 * gateway object it reports on, so deleting that object removes it. Deleted under a running
 * gateway (kubectl delete), it is created again on the next write (404) or at once through
 * recreate() (the caller's informer saw DELETED). On a clean stop markDown() reports Error —
 * what Liqo's connection check shows when the gateway stops answering.
 */
import {
  CustomObjectsApi,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { formatLatency, type ConnectionValue } from '../conncheck.js';
import { InformerRestarts, httpStatusOf, listFunction, patchOptions, wrapApiError } from './client.js';
import {
  KINDS,
  REMOTE_CLUSTER_ID_LABEL,
  apiVersionOf,
  collectionPath,
  type Connection,
  type ObjectReference,
  type OwnerReference,
} from './resources.js';

export interface ConnectionStatusWriterOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Connection name (Liqo uses the gateway's name). */
  name: string;
  remoteClusterId: string;
  type: 'Server' | 'Client';
  gatewayRef: ObjectReference;
  /** The object that owns the Connection (ownerReference; needs its uid). */
  owner?: OwnerReference;
  updateIntervalMs?: number;
  /**
   * Called once each time the Connection is created again after this writer had written it
   * (deleted under a running gateway), whichever path noticed: the caller's DELETED event
   * (recreate()) or a status write meeting 404.
   */
  onRecreated?: () => void;
}

/** Kubernetes metav1.Time text (RFC 3339, seconds precision, UTC). */
function metaTime(d: Date): string {
  return d.toISOString().replace(/\.\d+Z$/, 'Z');
}

export class ConnectionStatusWriter {
  private readonly api: CustomObjectsApi;
  private lastValue: string | undefined;
  private lastLatencyAt: number | undefined;
  /** Status writes performed (for tests and metrics). */
  writes = 0;
  /**
   * The owner was gone when the Connection had to be created (unpeering, with the garbage
   * collector on its way): nothing was created and this writer is done.
   */
  ownerGone = false;
  /** This writer has seen its Connection exist (got or created it): a later create is a re-creation. */
  private seen = false;

  constructor(private readonly opts: ConnectionStatusWriterOptions) {
    this.api = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /** namespace/name of the Connection this writer reports on. */
  get key(): string {
    return `${this.opts.namespace}/${this.opts.name}`;
  }

  private get coords() {
    const k = KINDS.connections;
    return { group: k.group, version: k.version, plural: k.plural, namespace: this.opts.namespace };
  }

  /**
   * Get the Connection, creating it (status Connecting) if it does not exist — unless its owner
   * is gone or being deleted: then null, nothing created, `ownerGone` set (the garbage collector
   * deletes a dependent whose owner is absent, so a Connection created then would only come and
   * go; the owner's DELETED event may reach the caller's cache after the Connection's).
   * Throws KubernetesApiError.
   */
  async ensure(now: Date = new Date()): Promise<Connection | null> {
    const { name } = this.opts;
    let conn: Connection;
    try {
      conn = (await this.api.getNamespacedCustomObject({ ...this.coords, name })) as Connection;
    } catch (e) {
      if (httpStatusOf(e) !== 404) throw wrapApiError(`get Connection ${this.opts.namespace}/${name}`, e);
      if (!(await this.ownerAlive())) {
        this.ownerGone = true;
        return null;
      }
      const o = this.opts.owner;
      const body: Connection = {
        apiVersion: apiVersionOf(KINDS.connections),
        kind: KINDS.connections.kind,
        metadata: {
          name,
          namespace: this.opts.namespace,
          labels: { [REMOTE_CLUSTER_ID_LABEL]: this.opts.remoteClusterId },
          ...(o !== undefined
            ? { ownerReferences: [{ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid }] }
            : {}),
        },
        spec: { type: this.opts.type, gatewayRef: this.opts.gatewayRef },
      };
      try {
        conn = (await this.api.createNamespacedCustomObject({ ...this.coords, body })) as Connection;
        if (this.seen) this.opts.onRecreated?.();
      } catch (e2) {
        if (httpStatusOf(e2) !== 409) throw wrapApiError(`create Connection ${this.opts.namespace}/${name}`, e2);
        conn = (await this.api.getNamespacedCustomObject({ ...this.coords, name })) as Connection;
      }
    }
    this.seen = true;
    await this.adopt(conn);
    this.lastValue = conn.status?.value;
    const ts = conn.status?.latency?.timestamp;
    this.lastLatencyAt = ts === undefined ? undefined : Date.parse(ts);
    if (conn.status?.value === undefined) await this.write('Connecting', 0, now, true);
    return conn;
  }

  /**
   * Report the checker's view. Returns true when a status write was made (value changed or
   * the latency is due for a refresh), false when skipped. Throws KubernetesApiError.
   */
  async report(value: ConnectionValue, latencyMs: number, now: Date = new Date()): Promise<boolean> {
    const interval = this.opts.updateIntervalMs ?? 10_000;
    if (
      this.ownerGone ||
      (value === this.lastValue && this.lastLatencyAt !== undefined && now.getTime() - this.lastLatencyAt <= interval)
    )
      return false;
    return this.write(value, latencyMs, now);
  }

  /** Create the Connection again (it was deleted) and write the last reported value into it. */
  async recreate(now: Date = new Date()): Promise<void> {
    const value = this.lastValue;
    this.lastValue = undefined;
    this.lastLatencyAt = undefined;
    if ((await this.ensure(now)) === null) return;
    if (value !== undefined && value !== 'Connecting') await this.write(value as ConnectionValue, 0, now);
  }

  /** The gateway is stopping: report Error (Liqo's value once its check gets no answer). */
  async markDown(now: Date = new Date()): Promise<void> {
    await this.write('Error', 0, now);
  }

  /**
   * An existing Connection without our ownerReference gets it added (other owners kept), and a
   * spec.gatewayRef that differs from ours (a uid left from an earlier peering) is replaced —
   * Liqo's gateway enforces both on start the same way.
   */
  private async adopt(conn: Connection): Promise<void> {
    const o = this.opts.owner;
    const refs = conn.metadata?.ownerReferences ?? [];
    const ownerMissing = o !== undefined && !refs.some((r) => r.uid === o.uid);
    const want = this.opts.gatewayRef;
    const have = conn.spec?.gatewayRef ?? {};
    const keys = new Set([...Object.keys(want), ...Object.keys(have)] as (keyof ObjectReference)[]);
    const refStale = [...keys].some((k) => want[k] !== have[k]);
    // Merge patch: a field we do not set (e.g. an old uid) is removed with null.
    const refPatch: Record<string, unknown> = {};
    for (const k of keys) refPatch[k] = want[k] ?? null;
    if (!ownerMissing && !refStale) return;
    const body = {
      metadata: {
        resourceVersion: conn.metadata?.resourceVersion,
        ...(ownerMissing
          ? { ownerReferences: [...refs, { apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid }] }
          : {}),
      },
      ...(refStale ? { spec: { gatewayRef: refPatch } } : {}),
    };
    try {
      await this.api.patchNamespacedCustomObject({ ...this.coords, name: this.opts.name, body }, patchOptions('merge'));
    } catch (e) {
      throw wrapApiError(
        `patch Connection ${this.opts.namespace}/${this.opts.name} ownerReferences/spec.gatewayRef`,
        e,
      );
    }
  }

  /** False when the Connection was gone with its owner (nothing written). */
  private async write(value: ConnectionValue, latencyMs: number, now: Date, retried = false): Promise<boolean> {
    const body = { status: { value, latency: { value: formatLatency(latencyMs), timestamp: metaTime(now) } } };
    try {
      await this.api.patchNamespacedCustomObjectStatus(
        { ...this.coords, name: this.opts.name, body },
        patchOptions('merge'),
      );
    } catch (e) {
      // Deleted under us (kubectl delete): create it again, then write once more.
      if (httpStatusOf(e) === 404 && !retried) {
        if ((await this.ensure(now)) === null) return false;
        return this.write(value, latencyMs, now, true);
      }
      throw wrapApiError(`patch Connection ${this.opts.namespace}/${this.opts.name} status`, e);
    }
    this.writes++;
    this.lastValue = value;
    this.lastLatencyAt = now.getTime();
    return true;
  }

  /** Whether the owner exists with our uid and is not being deleted (true without an owner, or of a kind not known here). */
  private async ownerAlive(): Promise<boolean> {
    const o = this.opts.owner;
    const k =
      o === undefined
        ? undefined
        : Object.values(KINDS).find((x) => x.kind === o.kind && apiVersionOf(x) === o.apiVersion && x.group !== '');
    if (o === undefined || k === undefined) return true;
    try {
      const obj = (await this.api.getNamespacedCustomObject({
        group: k.group,
        version: k.version,
        plural: k.plural,
        namespace: this.opts.namespace,
        name: o.name,
      })) as KubernetesObject;
      return obj.metadata?.uid === o.uid && obj.metadata?.deletionTimestamp === undefined;
    } catch (e) {
      if (httpStatusOf(e) === 404) return false;
      throw wrapApiError(`get ${o.kind} ${this.opts.namespace}/${o.name} (the Connection's owner)`, e);
    }
  }
}

/**
 * Watches the Connections of `namespace` and calls `onDeleted(name)` for each one deleted
 * (so its writer can recreate it at once instead of at its next due write). A failed
 * list/watch restarts after 1 s → 30 s; errors go to `onError`. Best effort: the writer's
 * 404 handling is the safety net.
 */
export class ConnectionDeleteWatch {
  private readonly inf: Informer<KubernetesObject>;
  private readonly restarts: InformerRestarts;
  private stopped = false;

  constructor(
    kc: KubeConfig,
    namespace: string,
    onDeleted: (name: string) => void,
    private readonly onError?: (e: unknown) => void,
  ) {
    const list = listFunction<KubernetesObject>(kc, KINDS.connections, namespace);
    this.inf = makeInformer<KubernetesObject>(kc, collectionPath(KINDS.connections, namespace), async () => {
      const r = await list();
      this.restarts.listed();
      return r;
    });
    this.restarts = new InformerRestarts(this.inf);
    this.inf.on('delete', (o) => {
      if (!this.stopped && o.metadata?.name !== undefined) onDeleted(o.metadata.name);
    });
    this.inf.on('error', (e) => {
      if (this.stopped) return;
      this.onError?.(wrapApiError(`list/watch Connections in ${namespace}`, e));
      this.restarts.failed();
    });
  }

  async start(): Promise<void> {
    await this.inf.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restarts.stop();
    await this.inf.stop();
  }
}
