/**
 * What both translations of Liqo resources (gateway role: translate.ts; node role:
 * translate-node.ts) share: their options and result, the typed error that names the objects
 * it is about, the issue collector, and small helpers over Kubernetes objects. Apart so that
 * each role's translation imports it without importing the other.
 */
import { type CryptoBackendChoice, type WeftConfig } from '../config.js';
import { ConfigError, type ConfigIssue } from '../config-error.js';
import { isAddress } from '../../packet/addr.js';
import { REMOTE_CLUSTER_ID_LABEL, type K8sObject } from './resources.js';

export interface TranslateOptions {
  role: 'gateway' | 'node';
  /** Local Liqo cluster ID. */
  clusterId: string;
  /** Only these remote clusters (a Liqo gateway serves exactly one); default: all found. */
  remoteClusterIds?: readonly string[];
  /** Gateway role: node the gateway runs on (its tunnel uses the node's local IP). Node role: required. */
  nodeName?: string;
  /** Fallbacks when no ipam.liqo.io Network describes them. */
  podCIDRs?: readonly string[];
  serviceCIDRs?: readonly string[];
  geneveMode?: 'l3' | 'l2';
  /**
   * Gateway role: the WireGuard private key (base64 of the raw 32 bytes) as mounted into the pod
   * from the keys Secret (Liqo's templates mount it); the Secrets are then not read.
   */
  privateKey?: string;
  /** Extra model fields merged in (metrics, logging, wireguard.cryptoBackend/interfaceName, node.tunName …). */
  overrides?: {
    metrics?: { listen?: string };
    logging?: { level?: string };
    wireguard?: { cryptoBackend?: CryptoBackendChoice; interfaceName?: string; listenAddress?: string };
    geneve?: { port?: number; listenAddress?: string };
    node?: { tunName?: string; underlayAddress?: string };
  };
}

export interface TranslateResult {
  config: WeftConfig;
  /** Resources skipped because they are not complete yet, one line each. */
  warnings: string[];
}

export const SOURCE = 'kubernetes';

export function ref(o: K8sObject): string {
  const m = o.metadata ?? {};
  return `${o.kind ?? 'object'} ${m.namespace ? `${m.namespace}/` : ''}${m.name ?? '?'}`;
}

export function remoteId(o: K8sObject): string | undefined {
  return o.metadata?.labels?.[REMOTE_CLUSTER_ID_LABEL];
}

export function isIpv4(s: string | undefined): s is string {
  return s !== undefined && isAddress(s, 4);
}

/** base64 (as served by the API) of raw 32 bytes → the model's key text, or undefined. */
export function rawKey(b64: string | undefined): string | undefined {
  if (b64 === undefined) return undefined;
  const buf = Buffer.from(b64, 'base64');
  if (buf.length !== 32 || buf.toString('base64') !== b64.trim()) return undefined;
  return buf.toString('base64');
}

/**
 * A translation refused because of Kubernetes objects: `objects[i]` is the object issue i is
 * about (so the caller can report on it: a Kubernetes Event).
 */
export class TranslateError extends ConfigError {
  constructor(
    issues: readonly ConfigIssue[],
    readonly objects: readonly K8sObject[],
  ) {
    super(SOURCE, issues);
  }
}

export class Issues {
  readonly list: ConfigIssue[] = [];
  readonly objects: K8sObject[] = [];
  add(o: K8sObject, field: string, message: string): void {
    this.list.push({ path: `${ref(o)}: ${field}`, message });
    this.objects.push(o);
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw new TranslateError(this.list, this.objects);
  }
}

export function byName<T extends K8sObject>(
  list: readonly T[],
  name: string | undefined,
  namespace?: string,
): T | undefined {
  return list.find(
    (o) =>
      o.metadata?.name === name &&
      (namespace === undefined || o.metadata?.namespace === undefined || o.metadata.namespace === namespace),
  );
}

export function sortByName<T extends K8sObject>(list: readonly T[]): T[] {
  const key = (o: T) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
  return [...list].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

export function wanted(opts: TranslateOptions, id: string | undefined): id is string {
  return id !== undefined && (opts.remoteClusterIds === undefined || opts.remoteClusterIds.includes(id));
}

/**
 * A warning as one log line: object fields are the API server's strings (a reference name is
 * not validated like metadata.name), so control characters are written as JSON escapes.
 */
export function oneLine(w: string): string {
  // eslint-disable-next-line no-control-regex
  return w.replace(/[\u0000-\u001f\u007f]/g, (c) => JSON.stringify(c).slice(1, -1));
}
