/**
 * Thin helpers over @kubernetes/client-node 1.4 shared by the informers, the Connection status
 * writer and the Lease elector: list functions per resource kind, the restart of a failed
 * list/watch, patch content types, and a typed error for API failures.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { ResourceKind } from './resources.js';

/** An API request failed. `status` is the HTTP status when the server answered. */
export class KubernetesApiError extends Error {
  override readonly name = 'KubernetesApiError';
  constructor(
    readonly operation: string,
    readonly status: number | undefined,
    detail: string,
  ) {
    super(`Kubernetes API: ${operation} failed${status !== undefined ? ` (HTTP ${status})` : ''}: ${detail}`);
  }
}

/** HTTP status of an error thrown by client-node (ApiException.code), if any. */
export function httpStatusOf(e: unknown): number | undefined {
  if (typeof e === 'object' && e !== null) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'number') return c;
    const s = (e as { statusCode?: unknown }).statusCode;
    if (typeof s === 'number') return s;
  }
  return undefined;
}

/**
 * Any error from a client-node call as a KubernetesApiError naming `operation`: the HTTP status
 * when the server answered, and the first line of the API's Status message (from the JSON body)
 * in place of client-node's generic text. A KubernetesApiError passes through unchanged.
 */
export function wrapApiError(operation: string, e: unknown): KubernetesApiError {
  if (e instanceof KubernetesApiError) return e;
  const status = httpStatusOf(e);
  let detail = e instanceof Error ? e.message : String(e);
  const body = (e as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      const m = (JSON.parse(body) as { message?: string }).message;
      if (m) detail = m;
    } catch {
      /* keep the message */
    }
  }
  return new KubernetesApiError(operation, status, detail.split('\n')[0]!);
}

/** Options that make a client-node patch call send the given patch content type. */
export function patchOptions(kind: 'merge' | 'json') {
  return setHeaderOptions('Content-Type', kind === 'merge' ? PatchStrategy.MergePatch : PatchStrategy.JsonPatch);
}

/** A list function for makeInformer over `kind` (all namespaces when `namespace` is undefined). */
export function listFunction<T extends KubernetesObject>(
  kc: KubeConfig,
  kind: ResourceKind,
  namespace?: string,
  labelSelector?: string,
): () => Promise<KubernetesListObject<T>> {
  const sel = labelSelector === undefined ? {} : { labelSelector };
  if (kind.group === '' && kind.plural === 'pods') {
    const core = kc.makeApiClient(CoreV1Api);
    return async () =>
      (namespace === undefined
        ? core.listPodForAllNamespaces(sel)
        : core.listNamespacedPod({ namespace, ...sel })) as unknown as Promise<KubernetesListObject<T>>;
  }
  if (kind.group === '' && kind.plural === 'secrets') {
    const core = kc.makeApiClient(CoreV1Api);
    return async () =>
      (namespace === undefined
        ? core.listSecretForAllNamespaces(sel)
        : core.listNamespacedSecret({ namespace, ...sel })) as unknown as Promise<KubernetesListObject<T>>;
  }
  if (kind.group === '') throw new TypeError(`listFunction: core kind ${kind.plural} not supported`);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const { group, version, plural } = kind;
  return async () =>
    (kind.namespaced && namespace !== undefined
      ? custom.listNamespacedCustomObject({ group, version, namespace, plural, ...sel })
      : custom.listClusterCustomObject({ group, version, plural, ...sel })) as Promise<KubernetesListObject<T>>;
}

/**
 * Restarts an informer whose list/watch failed: after 1 s, doubling up to 30 s, back to 1 s once
 * a list succeeds. The owner reports the error itself.
 */
export class InformerRestarts {
  private timer: NodeJS.Timeout | undefined;
  private delayMs = 0;
  private stopped = false;

  constructor(private readonly inf: { start(): Promise<void> }) {}

  /** A list succeeded. */
  listed(): void {
    this.delayMs = 0;
  }

  /** The list/watch failed: start it again after the next delay, unless stopped by then. */
  failed(): void {
    this.delayMs = Math.min(30_000, this.delayMs === 0 ? 1000 : this.delayMs * 2);
    this.timer = setTimeout(() => {
      if (!this.stopped) void this.inf.start().catch(() => {});
    }, this.delayMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}
