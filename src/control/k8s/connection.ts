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
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { formatLatency, type ConnectionValue } from '../conncheck.js';
import { httpStatusOf, patchOptions, wrapApiError } from './client.js';
import { KINDS, REMOTE_CLUSTER_ID_LABEL, apiVersionOf, type Connection, type ObjectReference } from './resources.js';

export interface ConnectionStatusWriterOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Connection name (Liqo uses the gateway's name). */
  name: string;
  remoteClusterId: string;
  type: 'Server' | 'Client';
  gatewayRef: ObjectReference;
  updateIntervalMs?: number;
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

  constructor(private readonly opts: ConnectionStatusWriterOptions) {
    this.api = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  }

  private get coords() {
    const k = KINDS.connections;
    return { group: k.group, version: k.version, plural: k.plural, namespace: this.opts.namespace };
  }

  /** Get the Connection, creating it (status Connecting) if it does not exist. Throws KubernetesApiError. */
  async ensure(now: Date = new Date()): Promise<Connection> {
    const { name } = this.opts;
    let conn: Connection;
    try {
      conn = await this.api.getNamespacedCustomObject({ ...this.coords, name }) as Connection;
    } catch (e) {
      if (httpStatusOf(e) !== 404) throw wrapApiError(`get Connection ${this.opts.namespace}/${name}`, e);
      const body: Connection = {
        apiVersion: apiVersionOf(KINDS.connections), kind: KINDS.connections.kind,
        metadata: { name, namespace: this.opts.namespace, labels: { [REMOTE_CLUSTER_ID_LABEL]: this.opts.remoteClusterId } },
        spec: { type: this.opts.type, gatewayRef: this.opts.gatewayRef },
      };
      try {
        conn = await this.api.createNamespacedCustomObject({ ...this.coords, body }) as Connection;
      } catch (e2) {
        if (httpStatusOf(e2) !== 409) throw wrapApiError(`create Connection ${this.opts.namespace}/${name}`, e2);
        conn = await this.api.getNamespacedCustomObject({ ...this.coords, name }) as Connection;
      }
    }
    this.lastValue = conn.status?.value;
    const ts = conn.status?.latency?.timestamp;
    this.lastLatencyAt = ts === undefined ? undefined : Date.parse(ts);
    if (conn.status?.value === undefined) await this.write('Connecting', 0, now);
    return conn;
  }

  /**
   * Report the checker's view. Returns true when a status write was made (value changed or
   * the latency is due for a refresh), false when skipped. Throws KubernetesApiError.
   */
  async report(value: ConnectionValue, latencyMs: number, now: Date = new Date()): Promise<boolean> {
    const interval = this.opts.updateIntervalMs ?? 10_000;
    if (value === this.lastValue && this.lastLatencyAt !== undefined && now.getTime() - this.lastLatencyAt <= interval) return false;
    await this.write(value, latencyMs, now);
    return true;
  }

  private async write(value: ConnectionValue, latencyMs: number, now: Date): Promise<void> {
    const body = { status: { value, latency: { value: formatLatency(latencyMs), timestamp: metaTime(now) } } };
    try {
      await this.api.patchNamespacedCustomObjectStatus({ ...this.coords, name: this.opts.name, body }, patchOptions('merge'));
    } catch (e) {
      throw wrapApiError(`patch Connection ${this.opts.namespace}/${this.opts.name} status`, e);
    }
    this.writes++;
    this.lastValue = value;
    this.lastLatencyAt = now.getTime();
  }
}
