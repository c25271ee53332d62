/**
 * GeneveTunnel status writer: what Liqo's fabric writes for networking.liqo.io/v1beta1
 * GeneveTunnel from its Geneve check — status.value (Connected / Error) and status.latency
 * ({ value: "2ms" | "850μs" | "N/A", timestamp }) through the status subresource (JSON merge
 * patch), at most once per update interval unless the value changes (geneveStatusWriteDue).
 * Error carries latency "N/A" and no timestamp, as Liqo's (a zero time, serialized as null).
 *
 * The status subresource exists in Liqo's GeneveTunnel CRD from pull request 3277 on; an API
 * server serving an older CRD answers 404 for it. A failed write is thrown to the caller once and
 * not tried again for that tunnel before an update interval has passed.
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { formatLatency, type ConnectionValue } from '../conncheck.js';
import { geneveStatusWriteDue, type GeneveStatusWritten } from '../geneve-check.js';
import { patchOptions, wrapApiError } from './client.js';
import { KINDS, type GeneveTunnel } from './resources.js';

/** Kubernetes metav1.Time text (RFC 3339, seconds precision, UTC). */
function metaTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

interface TunnelStatusFields {
  value?: string;
  latency?: { value?: string; timestamp?: string };
}

export class GeneveTunnelStatusWriter {
  private readonly api: CustomObjectsApi;
  /** What we wrote, by namespace/name (the informer's copy may lag behind it). */
  private readonly written = new Map<string, GeneveStatusWritten>();
  /** Status writes performed. */
  writes = 0;
  /** A tunnel whose last write failed is not written again before this time, by namespace/name. */
  private readonly retryAt = new Map<string, number>();

  constructor(
    kubeConfig: KubeConfig,
    private readonly updateIntervalMs: number,
  ) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /**
   * Report the check's view of `tunnel` (the informer's copy). Returns true when a write was
   * made. Throws KubernetesApiError.
   */
  async report(tunnel: GeneveTunnel, value: ConnectionValue, latencyMs: number, now: number): Promise<boolean> {
    const ns = tunnel.metadata?.namespace ?? '';
    const name = tunnel.metadata?.name ?? '';
    const key = `${ns}/${name}`;
    const seen = (tunnel as { status?: TunnelStatusFields }).status;
    const ts = seen?.latency?.timestamp;
    const written = this.written.get(key) ?? {
      value: seen?.value,
      latencyAt: ts === undefined ? undefined : Date.parse(ts),
    };
    if (!geneveStatusWriteDue(written, value, now, this.updateIntervalMs)) return false;
    if (now < (this.retryAt.get(key) ?? -Infinity)) return false;
    const connected = value === 'Connected';
    const body = {
      status: {
        value,
        latency: connected
          ? { value: formatLatency(latencyMs), timestamp: metaTime(now) }
          : { value: formatLatency(0), timestamp: null },
      },
    };
    const k = KINDS.geneveTunnels;
    try {
      await this.api.patchNamespacedCustomObjectStatus(
        { group: k.group, version: k.version, plural: k.plural, namespace: ns, name, body },
        patchOptions('merge'),
      );
    } catch (e) {
      this.retryAt.set(key, now + this.updateIntervalMs);
      throw wrapApiError(`patch GeneveTunnel ${key} status`, e);
    }
    this.retryAt.delete(key);
    this.writes++;
    this.written.set(key, { value, latencyAt: connected ? now : undefined });
    return true;
  }

  /** Forget tunnels that are gone (keys namespace/name still present are kept). */
  retain(keys: ReadonlySet<string>): void {
    for (const k of [...this.written.keys()]) if (!keys.has(k)) this.written.delete(k);
    for (const k of [...this.retryAt.keys()]) if (!keys.has(k)) this.retryAt.delete(k);
  }
}
