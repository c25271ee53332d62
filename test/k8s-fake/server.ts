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
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { ObjectStore } from './object-store.js';
import { HttpError, jsonPatch, mergePatch } from './patch.js';
import {
  authorize,
  forbiddenMessage,
  RBAC_TYPES,
  type RbacAttrs,
  type RbacStore,
  type ServiceAccountUser,
} from './rbac.js';
import { isWatch, parsePath, rbacVerb, readJson } from './request-parsing.js';
import { apiVersionOf, BUILTIN_TYPES, clone, keyOf, status, type Obj } from './resources.js';
import { loadCrds } from './schema.js';
import { fieldSelector, parseSelector } from './selectors.js';
import { TlsListener } from './tls-listener.js';
import { WatchStreams, type WatchOptions } from './watch-streams.js';

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

export interface FakeApiServerOptions extends WatchOptions {
  crdDir?: string;
}

export interface LoggedRequest {
  method: string;
  path: string;
  contentType?: string;
  /** HTTP status of the answer (unset for a watch stream still open). */
  status?: number;
}

export class FakeApiServer {
  readonly token = `weft-test-${randomUUID()}`;
  /** ServiceAccounts (namespace/name) whose tokens get 401 (revokeServiceAccount). */
  private readonly revoked = new Set<string>();
  readonly requests: LoggedRequest[] = [];
  private readonly watches: WatchStreams;
  private readonly store: ObjectStore;
  private readonly listener = new TlsListener();

  private constructor(opts: FakeApiServerOptions) {
    this.watches = new WatchStreams(opts);
    this.store = new ObjectStore(this.watches);
    for (const t of BUILTIN_TYPES) this.store.addType({ ...t });
    for (const t of RBAC_TYPES) this.store.addType({ ...t });
    for (const c of loadCrds(opts.crdDir ?? LIQO_CRD_DIR)) this.store.addType(c);
  }

  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const s = new FakeApiServer(opts);
    await s.listener.listen((req, res) => void s.handle(req, res));
    return s;
  }

  get url(): string {
    return this.listener.url;
  }

  get caPem(): string {
    return this.listener.caPem;
  }

  /** Watches refused with 410 (too old resourceVersion) so far. */
  get expiredCount(): number {
    return this.watches.expiredCount;
  }

  /**
   * Start an outage: every open connection (watches included) is cut and the port stops
   * listening, so new connections are refused until endOutage().
   */
  async beginOutage(): Promise<void> {
    await this.listener.beginOutage(() => this.dropWatches());
  }

  /** End the outage: listen again on the same port. */
  async endOutage(): Promise<void> {
    await this.listener.endOutage();
  }

  /**
   * A black hole (a partition, a hung server): connections are accepted and requests read but
   * never answered, as when packets are dropped on the way — clients wait for their own
   * timeouts. Ending it cuts the unanswered requests (their connections reset).
   */
  setBlackHole(on: boolean): void {
    this.listener.setBlackHole(on);
  }

  /** An outage of `ms` milliseconds (resolves when the server listens again). */
  async outage(ms: number): Promise<void> {
    await this.beginOutage();
    await new Promise((r) => setTimeout(r, ms));
    await this.endOutage();
  }

  get isDown(): boolean {
    return this.listener.isDown;
  }

  /** A KubeConfig for @kubernetes/client-node that trusts this server's certificate. */
  kubeConfig(namespace = 'default'): KubeConfig {
    return this.kubeConfigFor('tester', this.token, namespace);
  }

  /**
   * The ServiceAccount's tokens stop authenticating (401 Unauthorized), as the real server does
   * once the ServiceAccount is deleted: its bound tokens name a uid that no longer exists.
   * `false` accepts them again.
   */
  revokeServiceAccount(saNamespace: string, saName: string, revoked = true): void {
    if (revoked) this.revoked.add(`${saNamespace}/${saName}`);
    else this.revoked.delete(`${saNamespace}/${saName}`);
  }

  /**
   * A KubeConfig authenticating as ServiceAccount `saNamespace/saName`: its requests are
   * authorised by the RBAC objects stored in this server (403 otherwise, with the real text).
   */
  serviceAccountKubeConfig(saNamespace: string, saName: string): KubeConfig {
    return this.kubeConfigFor(`${saNamespace}-${saName}`, `${this.token}:sa:${saNamespace}:${saName}`, saNamespace);
  }

  private kubeConfigFor(user: string, token: string, namespace: string): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'fake', server: this.url, caData: Buffer.from(this.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: user, token }],
      contexts: [{ name: 'fake', cluster: 'fake', user, namespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  private rbacStore(): RbacStore {
    const all = (plural: string) =>
      [
        ...this.store.objects(this.store.typeFor('rbac.authorization.k8s.io/v1', plural)).values(),
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
    await this.listener.stop();
  }

  /**
   * Forget the event history (etcd compaction at the current revision): a watch resuming from
   * any older resourceVersion gets 410; resuming from the current one stays valid.
   */
  compact(): void {
    this.watches.compact(this.store.rv);
  }

  /**
   * Stop delivering events to the watch streams open now, without closing them (a network
   * partition): the clients miss events until their stream ends and they resume.
   */
  muteWatches(): void {
    this.watches.mute();
  }

  /** End every watch stream (as an API server does on timeout or restart). */
  dropWatches(): void {
    this.watches.drop();
  }

  get watchCount(): number {
    return this.watches.count;
  }

  get resourceVersion(): number {
    return this.store.rv;
  }

  // --- direct access for tests (same semantics as the HTTP verbs) ---

  /** Create or replace (status included) an object directly. Returns the stored copy. */
  put(apiVersion: string, plural: string, obj: Record<string, unknown>): Obj {
    const t = this.store.typeFor(apiVersion, plural);
    const o = clone(obj) as Obj;
    const existing = this.store.get(t, o.metadata.namespace, o.metadata.name!);
    o.metadata.resourceVersion = existing?.metadata.resourceVersion;
    return existing === undefined
      ? this.store.create(t, o.metadata.namespace, o, true)
      : this.store.replace(t, existing, o, 'all');
  }

  /** Create an object as a client's POST would (status dropped for status-subresource kinds). */
  create(apiVersion: string, plural: string, obj: Record<string, unknown>): Obj {
    const t = this.store.typeFor(apiVersion, plural);
    const o = clone(obj) as Obj;
    return this.store.create(t, o.metadata?.namespace, o);
  }

  remove(apiVersion: string, plural: string, namespace: string | undefined, name: string): void {
    this.store.delete(this.store.typeFor(apiVersion, plural), namespace, name);
  }

  getObject(apiVersion: string, plural: string, namespace: string | undefined, name: string): Obj | undefined {
    const o = this.store.get(this.store.typeFor(apiVersion, plural), namespace, name);
    return o === undefined ? undefined : clone(o);
  }

  listObjects(apiVersion: string, plural: string): Obj[] {
    return [...this.store.objects(this.store.typeFor(apiVersion, plural)).values()].map(clone);
  }

  // --- HTTP ---

  /** The bearer token's user: undefined for the admin token, a ServiceAccount, or 401. */
  private authenticate(req: IncomingMessage): ServiceAccountUser | undefined {
    const auth = req.headers.authorization ?? '';
    if (auth.startsWith(`Bearer ${this.token}:sa:`)) {
      const [namespace, saName] = auth.slice(`Bearer ${this.token}:sa:`.length).split(':') as [string, string];
      if (this.revoked.has(`${namespace}/${saName}`)) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
      return { namespace, name: saName };
    }
    if (auth !== `Bearer ${this.token}`) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
    return undefined;
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
      const warnings = this.store.fieldValidation?.warnings ?? [];
      this.store.fieldValidation = undefined;
      res.writeHead(code, {
        'content-type': 'application/json',
        ...(warnings.length > 0 ? { warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ') } : {}),
      });
      res.end(JSON.stringify(obj));
    };
    const validation = () => {
      this.store.fieldValidation = { mode: u.searchParams.get('fieldValidation') ?? 'Warn', warnings: [] };
    };
    try {
      const user = this.authenticate(req);
      const { t, ns, name, sub } = parsePath(u.pathname, (g, v, p) => this.store.lookup(g, v, p));
      if (user !== undefined) {
        const attrs: RbacAttrs = {
          verb: rbacVerb(req.method, name, u.searchParams),
          group: t.group,
          resource: t.plural,
          ...(sub !== undefined ? { subresource: sub } : {}),
          ...(ns !== undefined ? { namespace: ns } : {}),
          ...(name !== undefined ? { name } : {}),
        };
        if (!authorize(this.rbacStore(), user, attrs))
          throw new HttpError(403, 'Forbidden', forbiddenMessage(user, attrs));
      }
      const map = this.store.objects(t);
      const scope = sub === 'status' ? 'status' : 'main';
      switch (req.method) {
        case 'GET': {
          if (name !== undefined) {
            const o = this.store.get(t, ns, name);
            if (o === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
            return reply(200, o);
          }
          const sel = parseSelector(u.searchParams.get('labelSelector'));
          const fsel = fieldSelector(u.searchParams.get('fieldSelector'));
          if (isWatch(u.searchParams)) return this.watches.open(keyOf(t), ns, sel, u.searchParams, res, map.values());
          // Like the real server: list items carry no kind/apiVersion (the list itself does).
          const items = [...map.values()]
            .filter((o) => (ns === undefined || o.metadata.namespace === ns) && sel(o.metadata.labels) && fsel(o))
            .map((o) => {
              const { kind: _k, apiVersion: _a, ...rest } = o;
              return rest;
            });
          return reply(200, {
            apiVersion: apiVersionOf(t),
            kind: t.listKind,
            metadata: { resourceVersion: String(this.store.rv) },
            items,
          });
        }
        case 'POST': {
          if (name !== undefined) throw new HttpError(405, 'MethodNotAllowed', 'POST to a named resource');
          const b = (await readJson(req)) as Obj;
          validation();
          return reply(201, this.store.create(t, ns, b));
        }
        case 'PUT': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'PUT to a collection');
          const cur = this.store.get(t, ns, name);
          if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
          const b = (await readJson(req)) as Obj;
          validation();
          return reply(200, this.store.replace(t, cur, b, scope));
        }
        case 'PATCH': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'PATCH to a collection');
          const cur = this.store.get(t, ns, name);
          if (cur === undefined) throw new HttpError(404, 'NotFound', `${t.plural} "${name}" not found`);
          const patch = await readJson(req);
          let next: unknown;
          const type = (ct ?? '').split(';')[0]!.trim();
          if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json')
            next = mergePatch(cur, patch);
          else if (type === 'application/json-patch+json') next = jsonPatch(cur, patch);
          else throw new HttpError(415, 'UnsupportedMediaType', `unsupported patch type ${type}`);
          const n = next as Obj;
          validation();
          // A patch that does not mention resourceVersion carries no precondition.
          if (n.metadata?.resourceVersion === cur.metadata.resourceVersion) delete n.metadata.resourceVersion;
          return reply(200, this.store.replace(t, cur, n, scope));
        }
        case 'DELETE': {
          if (name === undefined) throw new HttpError(405, 'MethodNotAllowed', 'DELETE of a collection');
          return reply(200, this.store.delete(t, ns, name));
        }
        default:
          throw new HttpError(405, 'MethodNotAllowed', `method ${req.method}`);
      }
    } catch (e) {
      if (e instanceof HttpError) return reply(e.code, status(e.code, e.reason, e.message));
      return reply(500, status(500, 'InternalError', String(e)));
    }
  }
}
