/**
 * The resource kinds the fake API server serves and the shape of a stored object: the built-in
 * core/coordination kinds, how a kind is keyed ("core/v1/pods"), how an object is keyed within
 * its kind ("namespace/name", "/name" when cluster-scoped), and the Status body of an error.
 */
import type { JsonSchema } from './schema.js';

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  statusSubresource: boolean;
  schema?: JsonSchema;
}

export type Obj = Record<string, unknown> & { metadata: Meta };
export interface Meta {
  name?: string;
  generateName?: string;
  namespace?: string;
  resourceVersion?: string;
  uid?: string;
  labels?: Record<string, string>;
  generation?: number;
  creationTimestamp?: string;
  [k: string]: unknown;
}

const core = (plural: string, kind: string, namespaced: boolean, statusSubresource: boolean): ResourceType => ({
  group: '',
  version: 'v1',
  plural,
  kind,
  listKind: `${kind}List`,
  namespaced,
  statusSubresource,
});

/** The kinds every fake server has besides RBAC's and the CRDs'. */
export const BUILTIN_TYPES: readonly ResourceType[] = [
  core('secrets', 'Secret', true, false),
  core('namespaces', 'Namespace', false, true),
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    plural: 'leases',
    kind: 'Lease',
    listKind: 'LeaseList',
    namespaced: true,
    statusSubresource: false,
  },
  core('pods', 'Pod', true, true),
  core('configmaps', 'ConfigMap', true, false),
  core('events', 'Event', true, false),
];

export const clone = <T>(v: T): T => structuredClone(v);

export function typeKey(group: string, version: string, plural: string): string {
  return `${group === '' ? 'core' : group}/${version}/${plural}`;
}

export function keyOf(t: ResourceType): string {
  return typeKey(t.group, t.version, t.plural);
}

export function objKey(t: ResourceType, ns: string | undefined, name: string): string {
  return t.namespaced ? `${ns ?? ''}/${name}` : `/${name}`;
}

export function apiVersionOf(t: ResourceType): string {
  return t.group === '' ? t.version : `${t.group}/${t.version}`;
}

/** A `Status` failure body as the API server answers errors with. */
export function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}
