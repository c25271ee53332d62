/**
 * The fake API server's object store and write semantics: one global resourceVersion counter
 * (like etcd's revision), create/replace/delete with optimistic concurrency, the status
 * subresource, metadata.generation, CRD schema checks with field validation, Pod Security
 * admission, and the garbage collector (dependents of a deleted owner, and objects created with
 * only absent owners, are deleted). Every write is handed to the watch streams.
 */
import { randomUUID } from 'node:crypto';
import { deepEqual, HttpError } from './patch.js';
import { enforceLevel, podSecurityViolation, type PodLike } from './pod-security.js';
import { apiVersionOf, clone, keyOf, objKey, typeKey, type Obj, type ResourceType } from './resources.js';
import { validate } from './schema.js';
import type { WatchStreams } from './watch-streams.js';

/** Which part of an object a replace may change: spec side, status subresource, or both. */
export type WriteScope = 'main' | 'status' | 'all';

export class ObjectStore {
  private readonly types = new Map<string, ResourceType>();
  private readonly store = new Map<string, Map<string, Obj>>();
  private revision = 1;
  /** The write request being handled: its ?fieldValidation and the warnings for its answer. */
  fieldValidation: { mode: string; warnings: string[] } | undefined;

  constructor(private readonly watches: WatchStreams) {}

  get rv(): number {
    return this.revision;
  }

  addType(t: ResourceType): void {
    this.types.set(keyOf(t), t);
    this.store.set(keyOf(t), new Map());
  }

  /** The kind served at group/version/plural, or undefined. */
  lookup(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(typeKey(group, version, plural));
  }

  typeFor(apiVersion: string, plural: string): ResourceType {
    const [g, v] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    const t = this.lookup(g, v, plural);
    if (t === undefined) throw new Error(`unknown resource ${apiVersion} ${plural}`);
    return t;
  }

  /** The stored objects of a kind (live references: callers clone before handing out). */
  objects(t: ResourceType): Map<string, Obj> {
    return this.store.get(keyOf(t))!;
  }

  get(t: ResourceType, ns: string | undefined, name: string): Obj | undefined {
    return this.objects(t).get(objKey(t, ns, name));
  }

  create(t: ResourceType, ns: string | undefined, o: Obj, keepStatus = false): Obj {
    if (o.metadata === undefined || typeof o.metadata !== 'object')
      throw new HttpError(422, 'Invalid', 'metadata is required');
    if (o.metadata.name === undefined && o.metadata.generateName !== undefined)
      o.metadata.name = `${o.metadata.generateName}${randomUUID().slice(0, 5)}`;
    if (!o.metadata.name) throw new HttpError(422, 'Invalid', 'metadata.name: Required value');
    if (t.namespaced) {
      if (ns === undefined) throw new HttpError(400, 'BadRequest', 'namespace required');
      o.metadata.namespace = ns;
    } else delete o.metadata.namespace;
    const map = this.objects(t);
    const key = objKey(t, ns, o.metadata.name);
    if (map.has(key)) throw new HttpError(409, 'AlreadyExists', `${t.plural} "${o.metadata.name}" already exists`);
    if (t.statusSubresource && !keepStatus) delete o['status'];
    o['apiVersion'] = apiVersionOf(t);
    o['kind'] = t.kind;
    this.check(t, o);
    if (t.group === '' && t.plural === 'pods') this.admitPod(ns!, o);
    o.metadata.uid = randomUUID();
    o.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    o.metadata.generation = 1;
    o.metadata.resourceVersion = String(++this.revision);
    map.set(key, o);
    this.watches.emit(keyOf(t), 'ADDED', o);
    const refs = (o.metadata['ownerReferences'] ?? []) as { uid?: string }[];
    const live = refs.length > 0 ? this.liveUids() : null;
    if (live !== null && refs.every((r) => r.uid === undefined || !live.has(r.uid))) {
      // The garbage collector: every owner is absent (the create has already been answered).
      setImmediate(() => {
        if (map.get(key) === o) this.delete(t, ns, o.metadata.name!);
      });
    }
    return clone(o);
  }

  /** Store `next` in place of `cur`. `scope` says which part the write may change. */
  replace(t: ResourceType, cur: Obj, next: Obj, scope: WriteScope): Obj {
    const sentRv = next.metadata?.resourceVersion;
    if (sentRv !== undefined && sentRv !== '' && sentRv !== cur.metadata.resourceVersion) {
      throw new HttpError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${t.plural} "${cur.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    let o: Obj;
    if (scope === 'status') {
      o = clone(cur);
      if (next['status'] === undefined) delete o['status'];
      else o['status'] = clone(next['status']);
    } else {
      o = clone(next);
      if (scope === 'main' && t.statusSubresource) {
        if (cur['status'] === undefined) delete o['status'];
        else o['status'] = clone(cur['status']);
      }
    }
    // Identity and server-owned fields cannot change.
    o.metadata = {
      ...o.metadata,
      name: cur.metadata.name,
      uid: cur.metadata.uid,
      creationTimestamp: cur.metadata.creationTimestamp,
      resourceVersion: cur.metadata.resourceVersion,
    };
    if (t.namespaced) o.metadata.namespace = cur.metadata.namespace;
    o['apiVersion'] = apiVersionOf(t);
    o['kind'] = t.kind;
    this.check(t, o, cur);
    if (deepEqual(o, cur)) return clone(cur); // no-op write: no new resourceVersion, no event
    if (!deepEqual(o['spec'], cur['spec'])) o.metadata.generation = (cur.metadata.generation ?? 1) + 1;
    o.metadata.resourceVersion = String(++this.revision);
    this.objects(t).set(objKey(t, cur.metadata.namespace, cur.metadata.name!), o);
    this.watches.emit(keyOf(t), 'MODIFIED', o, cur);
    return clone(o);
  }

  delete(t: ResourceType, ns: string | undefined, name: string): Obj {
    const map = this.objects(t);
    const key = objKey(t, ns, name);
    const cur = map.get(key);
    if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
    map.delete(key);
    const gone = clone(cur);
    gone.metadata.resourceVersion = String(++this.revision);
    this.watches.emit(keyOf(t), 'DELETED', gone);
    this.collectGarbage(cur.metadata.uid);
    return gone;
  }

  /** The uids of every stored object (what the garbage collector calls present). */
  private liveUids(): Set<string> {
    const live = new Set<string>();
    for (const m of this.store.values())
      for (const o of m.values()) if (o.metadata.uid !== undefined) live.add(o.metadata.uid);
    return live;
  }

  /** Delete the dependents of a deleted owner whose every owner is now gone (background GC). */
  private collectGarbage(uid: string | undefined): void {
    if (uid === undefined) return;
    const live = this.liveUids();
    for (const t of this.types.values()) {
      for (const o of [...this.objects(t).values()]) {
        const refs = (o.metadata['ownerReferences'] ?? []) as { uid?: string }[];
        if (refs.some((r) => r.uid === uid) && refs.every((r) => r.uid === undefined || !live.has(r.uid))) {
          this.delete(t, o.metadata.namespace, o.metadata.name!);
        }
      }
    }
  }

  /** Pod Security admission (pod-security.ts) by the namespace's enforce label: 403 with the plugin's text. */
  private admitPod(ns: string, o: Obj): void {
    const nsObj = this.store.get(typeKey('', 'v1', 'namespaces'))!.get(`/${ns}`);
    const level = enforceLevel(nsObj?.metadata.labels);
    const v = podSecurityViolation(level, o as PodLike);
    if (v !== null) throw new HttpError(403, 'Forbidden', `pods "${o.metadata.name ?? ''}" is forbidden: ${v}`);
  }

  /**
   * Structural schema as the real server applies it: defaults filled in, CEL rules (transition
   * rules against `cur` on updates), 422 with the server's text; unknown fields dropped — with a
   * `Warning` header (fieldValidation Warn, the default) or a 400 (Strict) for client requests.
   */
  private check(t: ResourceType, o: Obj, cur?: Obj): void {
    if (t.schema === undefined) return;
    const pruned: string[] = [];
    const errs = validate(o, t.schema, 'prune', '', {
      ...(cur !== undefined ? { old: cur, isUpdate: true } : {}),
      pruned,
    });
    const what = `${t.group === '' ? t.kind : `${t.kind}.${t.group}`} "${o.metadata.name ?? ''}"`;
    if (errs.length > 0)
      throw new HttpError(
        422,
        'Invalid',
        `${what} is invalid: ${errs.length === 1 ? errs[0] : `[${errs.join(', ')}]`}`,
      );
    const fv = this.fieldValidation;
    if (pruned.length === 0 || fv === undefined || fv.mode === 'Ignore') return;
    const unknown = pruned.map((p) => `unknown field "${p}"`);
    if (fv.mode === 'Strict')
      throw new HttpError(
        400,
        'BadRequest',
        `${t.kind} in version "${t.version}" cannot be handled as a ${t.kind}: strict decoding error: ${unknown.join(', ')}`,
      );
    fv.warnings.push(...unknown);
  }
}
