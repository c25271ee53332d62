/**
 * Kubernetes Events (core v1) about the objects Weft reads: a rejected object gets a Warning
 * Event on it, so `kubectl describe` and `kubectl get events` show why Weft did not apply it.
 *
 * One Event per distinct (object, reason, message) while the problem lasts: the same problem
 * reported again is not written again; forget() (problem solved) lets it be reported anew.
 * With `namespace` set (the one namespace a Role lets Weft write Events in), Events go only
 * there and objects elsewhere are skipped (their problem is still in the log and `weft show`);
 * without it each Event goes to its object's own namespace, as Kubernetes expects (deploy/liqo's
 * ClusterRoles grant `events create` in every namespace; Liqo mode reads objects from several).
 */
import { CoreV1Api, type CoreV1Event, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { wrapApiError } from './client.js';
import type { K8sObject } from './resources.js';

export interface EventRecorderOptions {
  kubeConfig: KubeConfig;
  /** The only namespace Events may be written in; undefined: the object's own namespace. */
  namespace?: string;
  /** source.component / reportingComponent, e.g. "weft-gateway". */
  component: string;
  /** reportingInstance and source.host (pod or node name). */
  instance: string;
}

function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class EventRecorder {
  private readonly api: CoreV1Api;
  private readonly sent = new Set<string>();

  constructor(private readonly opts: EventRecorderOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** Whether an Event about `obj` can be recorded (it has a namespace we may write in, a name and a kind). */
  covers(obj: K8sObject): boolean {
    const ns = obj.metadata?.namespace;
    return (
      ns !== undefined &&
      ns !== '' &&
      (this.opts.namespace === undefined || ns === this.opts.namespace) &&
      obj.metadata!.name !== undefined &&
      obj.kind !== undefined
    );
  }

  /**
   * Record a Warning on `obj` (once per distinct message). Returns true when an Event was
   * created. Throws KubernetesApiError.
   */
  async warn(obj: K8sObject, reason: string, message: string, now: Date = new Date()): Promise<boolean> {
    if (!this.covers(obj)) return false;
    const m = obj.metadata!;
    const ns = m.namespace!;
    const key = `${obj.kind}/${ns}/${m.name}|${reason}|${message}`;
    if (this.sent.has(key)) return false;
    const t = now.toISOString().replace(/\.\d+Z$/, 'Z');
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${m.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: {
        ...(obj.apiVersion !== undefined ? { apiVersion: obj.apiVersion } : {}),
        kind: obj.kind!,
        name: m.name!,
        namespace: ns,
        ...(m.uid !== undefined ? { uid: m.uid } : {}),
        ...(m.resourceVersion !== undefined ? { resourceVersion: m.resourceVersion } : {}),
      },
      reason,
      message: message.slice(0, 1024),
      type: 'Warning',
      count: 1,
      firstTimestamp: t as unknown as Date,
      lastTimestamp: t as unknown as Date,
      eventTime: microTime(now) as unknown as Date,
      action: 'Translate',
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.instance,
      source: { component: this.opts.component, host: this.opts.instance },
    };
    try {
      await this.api.createNamespacedEvent({ namespace: ns, body });
    } catch (e) {
      throw wrapApiError(`create Event on ${obj.kind} ${ns}/${m.name}`, e);
    }
    this.sent.add(key);
    return true;
  }

  /** The problems are solved: the same message may be recorded again if it comes back. */
  forget(): void {
    this.sent.clear();
  }
}
