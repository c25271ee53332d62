/**
 * A small Kubernetes API server for tests: HTTPS (self-signed certificate made with `openssl req`
 * at start-up), bearer-token auth, and real list/watch/get/create/update/patch/delete semantics
 * for core Secrets, Pods, ConfigMaps, Events, RBAC kinds, coordination.k8s.io Leases and every CRD in a directory (Liqo's):
 *
 * - one global resourceVersion counter (like etcd's revision); every write bumps it;
 * - list returns items + metadata.resourceVersion; labelSelector and fieldSelector
 *   (metadata.name / metadata.namespace) are honoured;
 * - `?watch=1&resourceVersion=N` replays the retained events after N, then streams live
 *   ADDED/MODIFIED/DELETED events as JSON lines; without N (or N=0) it starts with synthetic
 *   ADDED events for the current state; a resourceVersion older than the retained history gets
 *   an ERROR event carrying Status 410 Expired and the stream ends (option: a plain HTTP 410);
 * - PATCH with application/merge-patch+json (RFC 7386), application/json-patch+json (RFC 6902),
 *   application/strategic-merge-patch+json (treated as a merge patch here);
 * - status subresource: writes to the main resource keep the stored status, writes to
 *   `/status` change only the status; create drops status;
 * - optimistic concurrency: a write carrying metadata.resourceVersion that is not current gets
 *   409 Conflict; create of an existing name gets 409 AlreadyExists;
 * - CRD objects are validated against the openAPIV3Schema (422 Invalid, the server's
 *   `Kind.group "name" is invalid: …` text), schema defaults are filled in, the CEL rules
 *   Liqo's CRDs carry are enforced (cel.ts; transition rules on updates), and unknown fields
 *   are pruned with a `Warning: 299` header (fieldValidation Warn, the default) or refused with
 *   400 under `?fieldValidation=Strict`; metadata.generation moves only when spec changes;
 * - RBAC: `serviceAccountKubeConfig(ns, name)` authenticates as a ServiceAccount whose requests
 *   are authorised by the stored Role/ClusterRole/RoleBinding/ClusterRoleBinding objects
 *   (rbac.ts; 403 with the server's text); `kubeConfig()` is an unrestricted admin;
 * - Pod Security admission on pod creation, by the namespace's
 *   `pod-security.kubernetes.io/enforce` label (pod-security.ts; 403 with the plugin's text);
 *
 * - list items carry no `kind`/`apiVersion` (the real server omits them in lists; watch events
 *   and single GETs carry them);
 * - create drops `status` for kinds with a status subresource, over HTTP and through `create()`;
 *   `put()` keeps it (a test's shortcut for "the controller has filled the status in");
 * - deleting an object deletes, in the background, every object whose ownerReferences name it
 *   (and nothing else) — the garbage collector, immediately; an object created with
 *   ownerReferences none of which names a live object (by uid) is deleted right after its
 *   creation, as the collector deletes a dependent whose owners are absent;
 * - core v1 Events (no schema) can be created and listed.
 *
 * Test hooks: `compact()` forgets the history (so existing watchers' next resume gets 410),
 * `dropWatches()` ends every watch stream, `revokeServiceAccount()` makes a ServiceAccount's
 * requests 401, `outage(ms)` / `beginOutage()` + `endOutage()` close
 * the listening socket (clients get ECONNREFUSED, as from a restarting kube-apiserver) and
 * reopen it on the same port, `setBlackHole()` leaves requests unanswered (a partition), `requests`
 * logs method/path/content-type and the answer's status.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { deepEqual, HttpError, jsonPatch, mergePatch } from './patch.js';
import {
  authorize,
  forbiddenMessage,
  RBAC_TYPES,
  type RbacAttrs,
  type RbacStore,
  type ServiceAccountUser,
} from './rbac.js';
import { loadCrds, validate, type JsonSchema } from './schema.js';
import { enforceLevel, podSecurityViolation, type PodLike } from './pod-security.js';

/**
 * Liqo's real CRDs live in shared/ beside the repository (CI clones the repo with shared/ next to
 * it); WEFT_LIQO_CRDS overrides the location.
 */
export const LIQO_CRD_DIR =
  process.env.WEFT_LIQO_CRDS ??
  [fileURLToPath(new URL('../../../shared/liqo/crds', import.meta.url)), '/work/shared/liqo/crds'].find((d) =>
    existsSync(d),
  ) ??
  fileURLToPath(new URL('../../../shared/liqo/crds', import.meta.url));

interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  statusSubresource: boolean;
  schema?: JsonSchema;
}

type Obj = Record<string, unknown> & { metadata: Meta };
interface Meta {
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

interface StoredEvent {
  rv: number;
  typeKey: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  obj: Obj;
  old?: Obj;
}

interface Watcher {
  typeKey: string;
  namespace?: string;
  selector: Selector;
  res: ServerResponse;
  muted?: boolean;
}

export interface FakeApiServerOptions {
  crdDir?: string;
  /** Events kept for watch resumption (default 1000). */
  historyLimit?: number;
  /** How a too-old resourceVersion is refused on watch: ERROR event (real API server) or HTTP 410. */
  expired?: 'event' | 'http';
}

export interface LoggedRequest {
  method: string;
  path: string;
  contentType?: string;
  /** HTTP status of the answer (unset for a watch stream still open). */
  status?: number;
}

const clone = <T>(v: T): T => structuredClone(v);

// --- label selectors (the equality- and set-based forms) -------------------------------------

type Selector = (labels: Record<string, string> | undefined) => boolean;

function parseSelector(text: string | null): Selector {
  if (text === null || text.trim() === '') return () => true;
  const terms: Selector[] = [];
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  for (const raw of parts) {
    const p = raw.trim();
    let m: RegExpMatchArray | null;
    if ((m = p.match(/^([^!=\s]+)\s*(==|=)\s*(.*)$/))) {
      const [, k, , v] = m;
      terms.push((l) => l?.[k!] === v);
    } else if ((m = p.match(/^([^!=\s]+)\s*!=\s*(.*)$/))) {
      const [, k, v] = m;
      terms.push((l) => l?.[k!] !== v);
    } else if ((m = p.match(/^(\S+)\s+in\s+\((.*)\)$/))) {
      const k = m[1]!;
      const vs = m[2]!.split(',').map((s) => s.trim());
      terms.push((l) => l?.[k] !== undefined && vs.includes(l[k]!));
    } else if ((m = p.match(/^(\S+)\s+notin\s+\((.*)\)$/))) {
      const k = m[1]!;
      const vs = m[2]!.split(',').map((s) => s.trim());
      terms.push((l) => l?.[k] === undefined || !vs.includes(l[k]!));
    } else if ((m = p.match(/^!(\S+)$/))) {
      const k = m[1]!;
      terms.push((l) => l?.[k] === undefined);
    } else {
      const k = p;
      terms.push((l) => l?.[k] !== undefined);
    }
  }
  return (l) => terms.every((t) => t(l));
}

function fieldSelector(text: string | null): (o: Obj) => boolean {
  if (text === null || text === '') return () => true;
  const checks = text.split(',').map((t) => {
    const [k, v] = t.split('=') as [string, string];
    if (k === 'metadata.name') return (o: Obj) => o.metadata.name === v;
    if (k === 'metadata.namespace') return (o: Obj) => o.metadata.namespace === v;
    throw new HttpError(400, 'BadRequest', `field selector ${k} not supported`);
  });
  return (o) => checks.every((c) => c(o));
}

function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

// --- the server --------------------------------------------------------------------------------

export class FakeApiServer {
  readonly token = `weft-test-${randomUUID()}`;
  private blackHole = false;
  private readonly unanswered = new Set<ServerResponse>();
  /** ServiceAccounts (namespace/name) whose tokens get 401 (revokeServiceAccount). */
  private readonly revoked = new Set<string>();
  readonly requests: LoggedRequest[] = [];
  /** Watches refused with 410 (too old resourceVersion) so far. */
  expiredCount = 0;
  private readonly types = new Map<string, ResourceType>();
  private readonly store = new Map<string, Map<string, Obj>>();
  private history: StoredEvent[] = [];
  private rv = 1;
  /** A watch resuming from a resourceVersion below this gets 410 (events after it are gone). */
  private minResumeRv = 0;
  private readonly watchers = new Set<Watcher>();
  private server!: Server;
  private port = 0;
  private down = false;
  /** The write request being handled: its ?fieldValidation and the warnings for its answer. */
  private fieldValidation: { mode: string; warnings: string[] } | undefined;
  private certDir!: string;
  url = '';
  caPem = '';

  private constructor(private readonly opts: FakeApiServerOptions) {
    this.addType({
      group: '',
      version: 'v1',
      plural: 'secrets',
      kind: 'Secret',
      listKind: 'SecretList',
      namespaced: true,
      statusSubresource: false,
    });
    this.addType({
      group: '',
      version: 'v1',
      plural: 'namespaces',
      kind: 'Namespace',
      listKind: 'NamespaceList',
      namespaced: false,
      statusSubresource: true,
    });
    this.addType({
      group: 'coordination.k8s.io',
      version: 'v1',
      plural: 'leases',
      kind: 'Lease',
      listKind: 'LeaseList',
      namespaced: true,
      statusSubresource: false,
    });
    this.addType({
      group: '',
      version: 'v1',
      plural: 'pods',
      kind: 'Pod',
      listKind: 'PodList',
      namespaced: true,
      statusSubresource: true,
    });
    this.addType({
      group: '',
      version: 'v1',
      plural: 'configmaps',
      kind: 'ConfigMap',
      listKind: 'ConfigMapList',
      namespaced: true,
      statusSubresource: false,
    });
    this.addType({
      group: '',
      version: 'v1',
      plural: 'events',
      kind: 'Event',
      listKind: 'EventList',
      namespaced: true,
      statusSubresource: false,
    });
    for (const t of RBAC_TYPES) this.addType({ ...t });
    for (const c of loadCrds(opts.crdDir ?? LIQO_CRD_DIR)) this.addType(c);
  }

  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const s = new FakeApiServer(opts);
    await s.listen();
    return s;
  }

  private addType(t: ResourceType): void {
    this.types.set(this.typeKey(t.group, t.version, t.plural), t);
    this.store.set(this.typeKey(t.group, t.version, t.plural), new Map());
  }

  private typeKey(group: string, version: string, plural: string): string {
    return `${group === '' ? 'core' : group}/${version}/${plural}`;
  }

  private async listen(): Promise<void> {
    this.certDir = mkdtempSync(join(tmpdir(), 'weft-k8s-fake-'));
    const key = join(this.certDir, 'key.pem');
    const cert = join(this.certDir, 'cert.pem');
    const r = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=weft-fake-apiserver',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    if (r.status !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
    this.caPem = readFileSync(cert, 'utf8');
    this.server = createServer({ key: readFileSync(key), cert: this.caPem }, (req, res) => {
      // A black hole: the request is read and never answered (setBlackHole).
      if (this.blackHole) {
        this.unanswered.add(res);
        return;
      }
      void this.handle(req, res);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `https://127.0.0.1:${this.port}`;
  }

  /**
   * Start an outage: every open connection (watches included) is cut and the port stops
   * listening, so new connections are refused until endOutage().
   */
  async beginOutage(): Promise<void> {
    if (this.down) return;
    this.down = true;
    this.dropWatches();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** End the outage: listen again on the same port. */
  async endOutage(): Promise<void> {
    if (!this.down) return;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.down = false;
  }

  /**
   * A black hole (a partition, a hung server): connections are accepted and requests read but
   * never answered, as when packets are dropped on the way — clients wait for their own
   * timeouts. Ending it cuts the unanswered requests (their connections reset).
   */
  setBlackHole(on: boolean): void {
    this.blackHole = on;
    if (on) return;
    for (const res of this.unanswered) res.socket?.destroy();
    this.unanswered.clear();
  }

  /** An outage of `ms` milliseconds (resolves when the server listens again). */
  async outage(ms: number): Promise<void> {
    await this.beginOutage();
    await new Promise((r) => setTimeout(r, ms));
    await this.endOutage();
  }

  get isDown(): boolean {
    return this.down;
  }

  /** A KubeConfig for @kubernetes/client-node that trusts this server's certificate. */
  kubeConfig(namespace = 'default'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'fake', server: this.url, caData: Buffer.from(this.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: 'tester', token: this.token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'tester', namespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  /**
   * A KubeConfig authenticating as ServiceAccount `saNamespace/saName`: its requests are
   * authorised by the RBAC objects stored in this server (403 otherwise, with the real text).
   */
  /**
   * The ServiceAccount's tokens stop authenticating (401 Unauthorized), as the real server does
   * once the ServiceAccount is deleted: its bound tokens name a uid that no longer exists.
   * `false` accepts them again.
   */
  revokeServiceAccount(saNamespace: string, saName: string, revoked = true): void {
    if (revoked) this.revoked.add(`${saNamespace}/${saName}`);
    else this.revoked.delete(`${saNamespace}/${saName}`);
  }

  serviceAccountKubeConfig(saNamespace: string, saName: string): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'fake', server: this.url, caData: Buffer.from(this.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: `${saNamespace}-${saName}`, token: `${this.token}:sa:${saNamespace}:${saName}` }],
      contexts: [{ name: 'fake', cluster: 'fake', user: `${saNamespace}-${saName}`, namespace: saNamespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  private rbacStore(): RbacStore {
    const all = (plural: string) =>
      [
        ...this.store.get(this.tk(this.typeFor('rbac.authorization.k8s.io/v1', plural)))!.values(),
      ] as unknown as RbacStore['roles'];
    return {
      roles: all('roles'),
      clusterRoles: all('clusterroles'),
      roleBindings: all('rolebindings'),
      clusterRoleBindings: all('clusterrolebindings'),
    };
  }

  async stop(): Promise<void> {
    this.dropWatches();
    this.server.closeAllConnections();
    if (!this.down) await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.certDir, { recursive: true, force: true });
  }

  /**
   * Forget the event history (etcd compaction at the current revision): a watch resuming from
   * any older resourceVersion gets 410; resuming from the current one stays valid.
   */
  compact(): void {
    this.history = [];
    this.minResumeRv = this.rv;
  }

  /**
   * Stop delivering events to the watch streams open now, without closing them (a network
   * partition): the clients miss events until their stream ends and they resume.
   */
  muteWatches(): void {
    for (const w of this.watchers) w.muted = true;
  }

  /** End every watch stream (as an API server does on timeout or restart). */
  dropWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  get watchCount(): number {
    return this.watchers.size;
  }

  get resourceVersion(): number {
    return this.rv;
  }

  // --- direct access for tests (same semantics as the HTTP verbs) ---

  private typeFor(apiVersion: string, plural: string): ResourceType {
    const [g, v] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    const t = this.types.get(this.typeKey(g, v, plural));
    if (t === undefined) throw new Error(`unknown resource ${apiVersion} ${plural}`);
    return t;
  }

  /** Create or replace (status included) an object directly. Returns the stored copy. */
  put(apiVersion: string, plural: string, obj: Record<string, unknown>): Obj {
    const t = this.typeFor(apiVersion, plural);
    const o = clone(obj) as Obj;
    const key = this.objKey(t, o.metadata.namespace, o.metadata.name!);
    const existing = this.store.get(this.tk(t))!.get(key);
    o.metadata.resourceVersion = existing?.metadata.resourceVersion;
    return existing === undefined
      ? this.doCreate(t, o.metadata.namespace, o, true)
      : this.doReplace(t, existing, o, 'all');
  }

  /** Create an object as a client's POST would (status dropped for status-subresource kinds). */
  create(apiVersion: string, plural: string, obj: Record<string, unknown>): Obj {
    const t = this.typeFor(apiVersion, plural);
    const o = clone(obj) as Obj;
    return this.doCreate(t, o.metadata?.namespace, o);
  }

  remove(apiVersion: string, plural: string, namespace: string | undefined, name: string): void {
    const t = this.typeFor(apiVersion, plural);
    this.doDelete(t, namespace, name);
  }

  getObject(apiVersion: string, plural: string, namespace: string | undefined, name: string): Obj | undefined {
    const t = this.typeFor(apiVersion, plural);
    const o = this.store.get(this.tk(t))!.get(this.objKey(t, namespace, name));
    return o === undefined ? undefined : clone(o);
  }

  listObjects(apiVersion: string, plural: string): Obj[] {
    const t = this.typeFor(apiVersion, plural);
    return [...this.store.get(this.tk(t))!.values()].map(clone);
  }

  // --- internals ---

  /** Pod Security admission (pod-security.ts) by the namespace's enforce label: 403 with the plugin's text. */
  private admitPod(ns: string, o: Obj): void {
    const nsObj = this.store.get(this.typeKey('', 'v1', 'namespaces'))!.get(`/${ns}`);
    const level = enforceLevel(nsObj?.metadata.labels);
    const v = podSecurityViolation(level, o as PodLike);
    if (v !== null) throw new HttpError(403, 'Forbidden', `pods "${o.metadata.name ?? ''}" is forbidden: ${v}`);
  }

  private tk(t: ResourceType): string {
    return this.typeKey(t.group, t.version, t.plural);
  }

  private objKey(t: ResourceType, ns: string | undefined, name: string): string {
    return t.namespaced ? `${ns ?? ''}/${name}` : `/${name}`;
  }

  private apiVersionOf(t: ResourceType): string {
    return t.group === '' ? t.version : `${t.group}/${t.version}`;
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

  private emit(t: ResourceType, type: StoredEvent['type'], obj: Obj, old?: Obj): void {
    const ev: StoredEvent = {
      rv: Number(obj.metadata.resourceVersion),
      typeKey: this.tk(t),
      type,
      obj: clone(obj),
      ...(old ? { old: clone(old) } : {}),
    };
    this.history.push(ev);
    const limit = this.opts.historyLimit ?? 1000;
    if (this.history.length > limit) {
      const dropped = this.history.splice(0, this.history.length - limit);
      this.minResumeRv = dropped[dropped.length - 1]!.rv;
    }
    for (const w of this.watchers) this.send(w, ev);
  }

  /** Write one event to a watcher, translating label-selector transitions like the API server. */
  private send(w: Watcher, ev: StoredEvent): void {
    if (ev.typeKey !== w.typeKey || w.muted === true) return;
    if (w.namespace !== undefined && ev.obj.metadata.namespace !== w.namespace) return;
    const now = w.selector(ev.obj.metadata.labels);
    let type: StoredEvent['type'] | undefined = ev.type;
    if (ev.type === 'MODIFIED' && ev.old !== undefined) {
      const before = w.selector(ev.old.metadata.labels);
      type = before && now ? 'MODIFIED' : !before && now ? 'ADDED' : before && !now ? 'DELETED' : undefined;
    } else if (!now) type = undefined;
    if (type === undefined) return;
    w.res.write(`${JSON.stringify({ type, object: ev.obj })}\n`);
  }

  private doCreate(t: ResourceType, ns: string | undefined, o: Obj, keepStatus = false): Obj {
    if (o.metadata === undefined || typeof o.metadata !== 'object')
      throw new HttpError(422, 'Invalid', 'metadata is required');
    if (o.metadata.name === undefined && o.metadata.generateName !== undefined)
      o.metadata.name = `${o.metadata.generateName}${randomUUID().slice(0, 5)}`;
    if (!o.metadata.name) throw new HttpError(422, 'Invalid', 'metadata.name: Required value');
    if (t.namespaced) {
      if (ns === undefined) throw new HttpError(400, 'BadRequest', 'namespace required');
      o.metadata.namespace = ns;
    } else delete o.metadata.namespace;
    const map = this.store.get(this.tk(t))!;
    const key = this.objKey(t, ns, o.metadata.name);
    if (map.has(key)) throw new HttpError(409, 'AlreadyExists', `${t.plural} "${o.metadata.name}" already exists`);
    if (t.statusSubresource && !keepStatus) delete o['status'];
    o['apiVersion'] = this.apiVersionOf(t);
    o['kind'] = t.kind;
    this.check(t, o);
    if (t.group === '' && t.plural === 'pods') this.admitPod(ns!, o);
    o.metadata.uid = randomUUID();
    o.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    o.metadata.generation = 1;
    o.metadata.resourceVersion = String(++this.rv);
    map.set(key, o);
    this.emit(t, 'ADDED', o);
    const refs = (o.metadata['ownerReferences'] ?? []) as { uid?: string }[];
    const live = refs.length > 0 ? this.liveUids() : null;
    if (live !== null && refs.every((r) => r.uid === undefined || !live.has(r.uid))) {
      // The garbage collector: every owner is absent (the create has already been answered).
      setImmediate(() => {
        if (map.get(key) === o) this.doDelete(t, ns, o.metadata.name!);
      });
    }
    return clone(o);
  }

  /** The uids of every stored object (what the garbage collector calls present). */
  private liveUids(): Set<string> {
    const live = new Set<string>();
    for (const m of this.store.values())
      for (const o of m.values()) if (o.metadata.uid !== undefined) live.add(o.metadata.uid);
    return live;
  }

  /** Store `next` in place of `cur`. `scope` says which part the write may change. */
  private doReplace(t: ResourceType, cur: Obj, next: Obj, scope: 'main' | 'status' | 'all'): Obj {
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
    o['apiVersion'] = this.apiVersionOf(t);
    o['kind'] = t.kind;
    this.check(t, o, cur);
    if (deepEqual(o, cur)) return clone(cur); // no-op write: no new resourceVersion, no event
    if (!deepEqual(o['spec'], cur['spec'])) o.metadata.generation = (cur.metadata.generation ?? 1) + 1;
    o.metadata.resourceVersion = String(++this.rv);
    this.store.get(this.tk(t))!.set(this.objKey(t, cur.metadata.namespace, cur.metadata.name!), o);
    this.emit(t, 'MODIFIED', o, cur);
    return clone(o);
  }

  private doDelete(t: ResourceType, ns: string | undefined, name: string): Obj {
    const map = this.store.get(this.tk(t))!;
    const key = this.objKey(t, ns, name);
    const cur = map.get(key);
    if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
    map.delete(key);
    const gone = clone(cur);
    gone.metadata.resourceVersion = String(++this.rv);
    this.emit(t, 'DELETED', gone);
    this.collectGarbage(cur.metadata.uid);
    return gone;
  }

  /** Delete the dependents of a deleted owner whose every owner is now gone (background GC). */
  private collectGarbage(uid: string | undefined): void {
    if (uid === undefined) return;
    const live = this.liveUids();
    for (const t of this.types.values()) {
      for (const o of [...this.store.get(this.tk(t))!.values()]) {
        const refs = (o.metadata['ownerReferences'] ?? []) as { uid?: string }[];
        if (refs.some((r) => r.uid === uid) && refs.every((r) => r.uid === undefined || !live.has(r.uid))) {
          this.doDelete(t, o.metadata.namespace, o.metadata.name!);
        }
      }
    }
  }

  private parsePath(pathname: string): { t: ResourceType; ns?: string; name?: string; sub?: string } {
    const segs = pathname.split('/').filter((s) => s !== '');
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api') {
      group = '';
      version = segs[1] ?? '';
      rest = segs.slice(2);
    } else if (segs[0] === 'apis') {
      group = segs[1] ?? '';
      version = segs[2] ?? '';
      rest = segs.slice(3);
    } else throw new HttpError(404, 'NotFound', `unknown path ${pathname}`);
    let ns: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      ns = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, sub] = rest;
    const t = plural === undefined ? undefined : this.types.get(this.typeKey(group, version, plural));
    if (t === undefined)
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
    if (sub !== undefined && (sub !== 'status' || !t.statusSubresource))
      throw new HttpError(404, 'NotFound', `unknown subresource ${sub}`);
    return {
      t,
      ...(ns !== undefined ? { ns } : {}),
      ...(name !== undefined ? { name } : {}),
      ...(sub !== undefined ? { sub } : {}),
    };
  }

  private async body(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    try {
      return JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BadRequest', 'body is not JSON');
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const u = new URL(req.url ?? '/', 'https://x');
    const ct = req.headers['content-type'];
    const entry: LoggedRequest = {
      method: req.method ?? '',
      path: `${u.pathname}${u.search}`,
      ...(ct !== undefined ? { contentType: ct } : {}),
    };
    this.requests.push(entry);
    const reply = (code: number, obj: unknown) => {
      entry.status = code;
      const warnings = this.fieldValidation?.warnings ?? [];
      this.fieldValidation = undefined;
      res.writeHead(code, {
        'content-type': 'application/json',
        ...(warnings.length > 0 ? { warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ') } : {}),
      });
      res.end(JSON.stringify(obj));
    };
    try {
      const auth = req.headers.authorization ?? '';
      let user: ServiceAccountUser | undefined;
      if (auth.startsWith(`Bearer ${this.token}:sa:`)) {
        const [namespace, saName] = auth.slice(`Bearer ${this.token}:sa:`.length).split(':') as [string, string];
        if (this.revoked.has(`${namespace}/${saName}`)) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
        user = { namespace, name: saName };
      } else if (auth !== `Bearer ${this.token}`) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
      const { t, ns, name, sub } = this.parsePath(u.pathname);
      if (user !== undefined) {
        const w = u.searchParams.get('watch');
        const verb =
          req.method === 'GET'
            ? name !== undefined
              ? 'get'
              : w === '1' || w === 'true'
                ? 'watch'
                : 'list'
            : (({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' } as Record<string, string>)[
                req.method ?? ''
              ] ?? 'unknown');
        const attrs: RbacAttrs = {
          verb,
          group: t.group,
          resource: t.plural,
          ...(sub !== undefined ? { subresource: sub } : {}),
          ...(ns !== undefined ? { namespace: ns } : {}),
          ...(name !== undefined ? { name } : {}),
        };
        if (!authorize(this.rbacStore(), user, attrs))
          throw new HttpError(403, 'Forbidden', forbiddenMessage(user, attrs));
      }
      const map = this.store.get(this.tk(t))!;
      switch (req.method) {
        case 'GET': {
          if (name !== undefined) {
            const o = map.get(this.objKey(t, ns, name));
            if (o === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
            return reply(200, o);
          }
          const sel = parseSelector(u.searchParams.get('labelSelector'));
          const fsel = fieldSelector(u.searchParams.get('fieldSelector'));
          const w = u.searchParams.get('watch');
          if (w === '1' || w === 'true') return this.watch(t, ns, sel, u.searchParams, res);
          // Like the real server: list items carry no kind/apiVersion (the list itself does).
          const items = [...map.values()]
            .filter((o) => (ns === undefined || o.metadata.namespace === ns) && sel(o.metadata.labels) && fsel(o))
            .map((o) => {
              const { kind: _k, apiVersion: _a, ...rest } = o;
              return rest;
            });
          return reply(200, {
            apiVersion: this.apiVersionOf(t),
            kind: t.listKind,
            metadata: { resourceVersion: String(this.rv) },
            items,
          });
        }
        case 'POST': {
          if (name !== undefined) throw new HttpError(405, 'MethodNotAllowed', 'POST to a named resource');
          const b = (await this.body(req)) as Obj;
          this.fieldValidation = { mode: u.searchParams.get('fieldValidation') ?? 'Warn', warnings: [] };
          return reply(201, this.doCreate(t, ns, b));
        }
        case 'PUT': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'PUT to a collection');
          const cur = map.get(this.objKey(t, ns, name));
          if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
          const b = (await this.body(req)) as Obj;
          this.fieldValidation = { mode: u.searchParams.get('fieldValidation') ?? 'Warn', warnings: [] };
          return reply(200, this.doReplace(t, cur, b, sub === 'status' ? 'status' : 'main'));
        }
        case 'PATCH': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'PATCH to a collection');
          const cur = map.get(this.objKey(t, ns, name));
          if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
          const patch = await this.body(req);
          let next: unknown;
          const type = (ct ?? '').split(';')[0]!.trim();
          if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json')
            next = mergePatch(cur, patch);
          else if (type === 'application/json-patch+json') next = jsonPatch(cur, patch);
          else throw new HttpError(415, 'UnsupportedMediaType', `unsupported patch type ${type}`);
          const n = next as Obj;
          this.fieldValidation = { mode: u.searchParams.get('fieldValidation') ?? 'Warn', warnings: [] };
          // A patch that does not mention resourceVersion carries no precondition.
          if (n.metadata?.resourceVersion === cur.metadata.resourceVersion) delete n.metadata.resourceVersion;
          return reply(200, this.doReplace(t, cur, n, sub === 'status' ? 'status' : 'main'));
        }
        case 'DELETE': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'DELETE of a collection');
          return reply(200, this.doDelete(t, ns, name));
        }
        default:
          throw new HttpError(405, 'MethodNotAllowed', `method ${req.method}`);
      }
    } catch (e) {
      if (e instanceof HttpError) return reply(e.code, status(e.code, e.reason, e.message));
      return reply(500, status(500, 'InternalError', String(e)));
    }
  }

  private watch(
    t: ResourceType,
    ns: string | undefined,
    selector: Selector,
    q: URLSearchParams,
    res: ServerResponse,
  ): void {
    const rvText = q.get('resourceVersion');
    const from = rvText === null || rvText === '' ? 0 : Number(rvText);
    if (from !== 0 && from < this.minResumeRv) {
      const msg = `too old resource version: ${from} (${this.minResumeRv})`;
      this.expiredCount++;
      if (this.opts.expired === 'http') {
        res.writeHead(410, { 'content-type': 'application/json' });
        res.end(JSON.stringify(status(410, 'Gone', msg)));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', msg) })}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // Send the headers now: the client's watch call resolves on them, before any event exists.
    res.flushHeaders();
    const w: Watcher = { typeKey: this.tk(t), ...(ns !== undefined ? { namespace: ns } : {}), selector, res };
    if (from === 0) {
      for (const o of this.store.get(this.tk(t))!.values()) {
        if ((ns === undefined || o.metadata.namespace === ns) && selector(o.metadata.labels))
          res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
      }
    } else {
      for (const ev of this.history) if (ev.rv > from) this.send(w, ev);
    }
    this.watchers.add(w);
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      if (timer) clearTimeout(timer);
      this.watchers.delete(w);
    });
  }
}
