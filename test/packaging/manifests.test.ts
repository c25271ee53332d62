// Packaging checks that need no Docker and no cluster:
// (a) every Kubernetes manifest in deploy/ parses and each object survives a round trip through
//     @kubernetes/client-node's ObjectSerializer (its model types): no misspelt or unknown field;
// (b) the RBAC rules cover exactly what the Kubernetes code does — the code is run against the
//     recording fake API server and every request must be allowed, every granted resource used,
//     and every Liqo resource named must exist in Liqo's CRDs with the right scope;
// (c) the Dockerfile builds with the same npm commands as scripts/setup.sh.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubernetesObject } from '@kubernetes/client-node';
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConnectionDeleteWatch, ConnectionStatusWriter } from '../../src/control/k8s/connection.js';
import { EventRecorder } from '../../src/control/k8s/events.js';
import { LeaderElector } from '../../src/control/k8s/lease.js';
import { KINDS } from '../../src/control/k8s/resources.js';
import { LiqoWatcher } from '../../src/control/k8s/watcher.js';
import { FakeApiServer, LIQO_CRD_DIR, type LoggedRequest } from '../k8s-fake/server.js';
import { NS } from '../control/k8s/liqo-fixtures.js';
import { ROOT } from '../cli/helpers.js';
import { until } from '../util/wait.js';
import { loadLiqo } from '../control/k8s/helpers.js';

const DEPLOY = join(ROOT, 'deploy');

interface Doc {
  file: string;
  obj: KubernetesObject & Record<string, unknown>;
}

function manifests(): Doc[] {
  const out: Doc[] = [];
  for (const f of readdirSync(DEPLOY)
    .filter((n) => /\.ya?ml$/.test(n))
    .sort()) {
    const docs = parseAllDocuments(readFileSync(join(DEPLOY, f), 'utf8'), { uniqueKeys: true });
    for (const d of docs) {
      expect(d.errors, `${f}: YAML errors`).toEqual([]);
      const obj = d.toJS() as Doc['obj'] | null;
      if (obj !== null) out.push({ file: f, obj });
    }
  }
  return out;
}

/** "apps/v1" + "Deployment" → "V1Deployment" (client-node's model names). */
function modelType(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop()!;
  return `${version.charAt(0).toUpperCase()}${version.slice(1)}${kind}`;
}

describe('(a) deploy/ manifests', () => {
  test('every object deserialises into its client-node model and serialises back unchanged', () => {
    const docs = manifests();
    expect(docs.map((d) => `${d.obj.kind}/${d.obj.metadata?.name}`).sort()).toEqual([
      'ClusterRole/weft-gateway',
      'ClusterRoleBinding/weft-gateway-liqo-tenant-cluster-b',
      'Deployment/weft-gateway',
      'Role/weft-gateway',
      'RoleBinding/weft-gateway',
      'Service/weft-gateway',
      'ServiceAccount/weft-gateway',
    ]);
    for (const { file, obj } of docs) {
      const type = modelType(obj.apiVersion!, obj.kind!);
      const model = ObjectSerializer.deserialize(structuredClone(obj), type) as unknown;
      expect(model, `${file}: ${type} is a known model`).toBeTypeOf('object');
      expect(ObjectSerializer.serialize(model, type), `${file}: ${obj.kind} round trip`).toEqual(obj);
    }
  });

  test('the round trip would catch a misspelt field', () => {
    const dep = manifests().find((d) => d.obj.kind === 'Deployment')!.obj;
    const bad = structuredClone(dep) as { spec: { template: { spec: { containers: Record<string, unknown>[] } } } };
    bad.spec.template.spec.containers[0]!['securityContex'] = { runAsUser: 0 };
    expect(
      ObjectSerializer.serialize(ObjectSerializer.deserialize(structuredClone(bad), 'V1Deployment'), 'V1Deployment'),
    ).not.toEqual(bad);
  });

  test('the Deployment runs `weft k8s` as the ServiceAccount, with only NET_ADMIN and /dev/net/tun', () => {
    const docs = manifests();
    const dep = docs.find((d) => d.obj.kind === 'Deployment')!.obj as unknown as {
      metadata: { namespace: string };
      spec: {
        template: {
          spec: {
            serviceAccountName: string;
            containers: {
              args: string[];
              securityContext: { capabilities: { add: string[]; drop: string[] } };
              volumeMounts: { mountPath: string }[];
            }[];
          };
        };
      };
    };
    const sa = docs.find((d) => d.obj.kind === 'ServiceAccount')!.obj;
    const pod = dep.spec.template.spec;
    expect(pod.serviceAccountName).toBe(sa.metadata!.name);
    expect(dep.metadata.namespace).toBe(sa.metadata!.namespace);
    const c = pod.containers[0]!;
    expect(c.args[0]).toBe('k8s');
    expect(c.args).toContain('--role=gateway');
    expect(c.args.some((a) => a.startsWith('--lease-name='))).toBe(true);
    expect(c.securityContext.capabilities).toEqual({ drop: ['ALL'], add: ['NET_ADMIN'] });
    expect(c.volumeMounts.map((m) => m.mountPath)).toContain('/dev/net/tun');
  });
});

// ---------------------------------------------------------------------------------------------

interface Grant {
  group: string;
  resource: string;
  verbs: Set<string>;
  cluster: boolean;
}

function grants(): Grant[] {
  const out: Grant[] = [];
  for (const { obj } of manifests()) {
    if (obj.kind !== 'Role' && obj.kind !== 'ClusterRole') continue;
    for (const r of obj['rules'] as { apiGroups: string[]; resources: string[]; verbs: string[] }[]) {
      for (const g of r.apiGroups)
        for (const res of r.resources)
          out.push({ group: g, resource: res, verbs: new Set(r.verbs), cluster: obj.kind === 'ClusterRole' });
    }
  }
  return out;
}

interface ApiCall {
  group: string;
  resource: string;
  verb: string;
  namespace: string | undefined;
}

/** Turns a logged request into what RBAC authorises (group, resource[/subresource], verb, namespace). */
function apiCall(r: LoggedRequest): ApiCall {
  const u = new URL(r.path, 'https://x');
  const parts = u.pathname.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (parts[0] === 'api') {
    group = '';
    rest = parts.slice(2);
  } else {
    group = parts[1]!;
    rest = parts.slice(3);
  }
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, sub] = rest;
  const watch = u.searchParams.get('watch');
  const verb =
    r.method === 'GET'
      ? watch === 'true' || watch === '1'
        ? 'watch'
        : name === undefined
          ? 'list'
          : 'get'
      : ({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' } as Record<string, string>)[r.method]!;
  return { group, resource: sub === undefined ? resource! : `${resource}/${sub}`, verb, namespace };
}

function allowed(c: ApiCall, gs: readonly Grant[]): boolean {
  // A Role (bound in NS) covers requests in NS; only a ClusterRole covers cluster-wide ones.
  return gs.some(
    (g) => g.group === c.group && g.resource === c.resource && g.verbs.has(c.verb) && (g.cluster || c.namespace === NS),
  );
}

describe('(b) RBAC = what the Kubernetes code does', () => {
  let server: FakeApiServer;
  let calls: ApiCall[] = [];
  beforeAll(async () => {
    server = await FakeApiServer.start();
    loadLiqo(server);
    const kc = server.kubeConfig();
    // Exactly what `weft k8s --role gateway --namespace NS --lease-name … --conncheck` runs
    // (src/cli/commands/k8s.ts uses these four classes and no other API client).
    const watcher = new LiqoWatcher({
      kubeConfig: kc,
      namespace: NS,
      role: 'gateway',
      clusterId: 'cluster-a',
      nodeName: 'worker-1',
      onConfig: () => {},
    });
    await watcher.start();
    const writer = new ConnectionStatusWriter({
      kubeConfig: kc,
      namespace: NS,
      name: 'cluster-b',
      remoteClusterId: 'cluster-b',
      type: 'Server',
      gatewayRef: { apiVersion: 'networking.liqo.io/v1beta1', kind: 'GatewayServer', name: 'cluster-b', namespace: NS },
      updateIntervalMs: 0,
    });
    await writer.ensure();
    await writer.report('Connected', 2);
    // A Connection made before ownerReferences (or by someone else) is adopted: a metadata patch.
    const gw = server.getObject('networking.liqo.io/v1beta1', 'gatewayservers', NS, 'cluster-b')!;
    const owned = new ConnectionStatusWriter({
      kubeConfig: kc,
      namespace: NS,
      name: 'cluster-b',
      remoteClusterId: 'cluster-b',
      type: 'Server',
      gatewayRef: { apiVersion: 'networking.liqo.io/v1beta1', kind: 'GatewayServer', name: 'cluster-b', namespace: NS },
      updateIntervalMs: 0,
      owner: {
        apiVersion: 'networking.liqo.io/v1beta1',
        kind: 'GatewayServer',
        name: 'cluster-b',
        uid: gw.metadata.uid!,
      },
    });
    await owned.ensure();
    await owned.markDown();
    const deletes = new ConnectionDeleteWatch(kc, NS, () => {});
    await deletes.start();
    await deletes.stop();
    // A Warning Event on a rejected object.
    await new EventRecorder({ kubeConfig: kc, namespace: NS, component: 'weft-gateway', instance: 'weft-0' }).warn(
      { ...gw, kind: 'GatewayServer', apiVersion: 'networking.liqo.io/v1beta1' },
      'InvalidConfiguration',
      'spec.mtu: test',
    );
    let leading = false;
    const elector = new LeaderElector({
      kubeConfig: kc,
      namespace: NS,
      name: 'weft-gateway',
      identity: 'weft-0',
      retryPeriodMs: 50,
      renewDeadlineMs: 500,
      leaseDurationMs: 1000,
      onStartedLeading: () => {
        leading = true;
      },
      onStoppedLeading: () => {
        leading = false;
      },
    });
    elector.start();
    await until(() => leading, 'leadership');
    await until(
      () => server.requests.filter((r) => r.method === 'PUT' && r.path.includes('/leases/')).length >= 1,
      'a Lease renewal',
    );
    await elector.stop({ release: true });
    await watcher.stop();
    calls = server.requests.map(apiCall);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  test('every request the code made is allowed by deploy/rbac.yaml', () => {
    expect(calls.length).toBeGreaterThan(20);
    const denied = calls.filter((c) => !allowed(c, grants()));
    expect(denied).toEqual([]);
  });

  test('every granted resource is used by the code; verbs beyond the used ones are only read verbs and status update', () => {
    const used = new Map<string, Set<string>>();
    for (const c of calls) {
      const k = `${c.group}/${c.resource}`;
      if (!used.has(k)) used.set(k, new Set());
      used.get(k)!.add(c.verb);
    }
    const extra: string[] = [];
    for (const g of grants()) {
      const k = `${g.group}/${g.resource}`;
      const u = used.get(k);
      expect(u, `${k} is granted but the code never touches it`).toBeDefined();
      for (const v of g.verbs) {
        if (u!.has(v)) continue;
        // Tolerated extras (the brief's list): read verbs on what the code reads, update beside patch on status.
        const readsIt = u!.has('get') || u!.has('list') || u!.has('watch');
        const ok = (['get', 'list', 'watch'].includes(v) && readsIt) || (v === 'update' && u!.has('patch'));
        if (!ok) extra.push(`${k} ${v}`);
      }
    }
    expect(extra).toEqual([]);
    // And the code touches nothing that is not granted at all.
    const grantedKeys = new Set(grants().map((g) => `${g.group}/${g.resource}`));
    expect([...used.keys()].filter((k) => !grantedKeys.has(k))).toEqual([]);
  });

  test('the traced code covers the resource kinds the k8s module declares (grep of src/control/k8s)', () => {
    const src = readdirSync(join(ROOT, 'src/control/k8s'))
      .map((f) => readFileSync(join(ROOT, 'src/control/k8s', f), 'utf8'))
      .join('\n');
    const declared = [...src.matchAll(/KINDS\.(\w+)/g)].map((m) => m[1]!);
    const kinds = new Set(declared.map((k) => KINDS[k as keyof typeof KINDS]).filter((k) => k !== undefined));
    const used = new Set(calls.map((c) => `${c.group}/${c.resource.split('/')[0]}`));
    for (const k of kinds) expect(used.has(`${k.group}/${k.plural}`), `${k.kind}`).toBe(true);
    // The daemon's Kubernetes mode uses exactly the four API-calling classes traced above.
    const cli = ['k8s-mode.ts', 'k8s-connections.ts']
      .map((f) => readFileSync(join(ROOT, 'src/daemon', f), 'utf8'))
      .join('\n');
    const imports = [...new Set([...cli.matchAll(/from '\.\.\/control\/k8s\/([\w-]+)\.js'/g)].map((m) => m[1]))].sort();
    expect(imports).toEqual([
      'connection',
      'events',
      'genevetunnel-status',
      'lease',
      'liqo-gateway',
      'resources',
      'source-detector',
      'translate-common',
      'watcher',
    ]);
    expect(cli).not.toMatch(/makeApiClient/);
    // liqo-gateway's calls (pod label, cluster-id ConfigMap; only with --mode) run under deploy/liqo's
    // ClusterRole in test/cli/k8s-liqo.test.ts; source-detector and genevetunnel-status (node role) are not part
    // of this gateway's RBAC: they run under deploy/liqo's fabric ClusterRole in test/e2e/liqo-pods.test.ts (no 403).
  });

  test("every Liqo resource in the RBAC exists in Liqo's CRDs, namespaced ones in the Role, cluster-scoped in the ClusterRole", () => {
    const crds = new Map<string, 'Namespaced' | 'Cluster'>();
    for (const f of readdirSync(LIQO_CRD_DIR)) {
      const crd = parseAllDocuments(readFileSync(join(LIQO_CRD_DIR, f), 'utf8'))[0]!.toJS() as {
        spec: { group: string; scope: 'Namespaced' | 'Cluster'; names: { plural: string } };
      };
      crds.set(`${crd.spec.group}/${crd.spec.names.plural}`, crd.spec.scope);
    }
    for (const g of grants()) {
      if (!g.group.endsWith('liqo.io')) continue;
      const key = `${g.group}/${g.resource.split('/')[0]}`;
      expect(crds.has(key), `${key} is a Liqo CRD`).toBe(true);
      if (crds.get(key) === 'Cluster') expect(g.cluster, `${key} is cluster-scoped`).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------

/** npm commands of a shell script / Dockerfile RUN lines, without redirections. */
function npmCommands(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*(?:RUN\s+)?(npm\s+(?:ci|run)\b[^>|&;#\n]*)/.exec(line);
    if (m) out.push(m[1]!.trim().replace(/\s+/g, ' '));
  }
  return out;
}

describe('(c) Dockerfile', () => {
  const docker = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const setup = readFileSync(join(ROOT, 'scripts/setup.sh'), 'utf8');

  test('the build stage runs the same npm commands as scripts/setup.sh, in the same order', () => {
    const build = docker.slice(0, docker.search(/^FROM .* AS runtime/m));
    expect(npmCommands(setup)).toEqual(['npm ci --no-audit --no-fund', 'npm run --silent build']);
    expect(npmCommands(build)).toEqual(npmCommands(setup));
  });

  test('multi-stage; the runtime stage is slim, non-root, and gets only dist, the addon, production modules and bin', () => {
    const stages = [...docker.matchAll(/^FROM (\S+)(?: AS (\w+))?/gm)];
    expect(stages.map((s) => s[2])).toEqual(['build', 'runtime']);
    expect(stages[1]![1]).toMatch(/-slim$/);
    const runtime = docker.slice(docker.search(/^FROM .* AS runtime/m));
    expect(runtime).not.toMatch(/npm (ci|install|run)/);
    expect(runtime).toMatch(/^USER (?!root|0\b)\S+/m);
    expect(runtime).toContain('native/build/Release/weft_io.node');
    expect(runtime).toMatch(/COPY --from=build \/src\/dist\/src /);
    expect(docker).toMatch(/npm prune --omit=dev/);
    expect(docker).toMatch(/NET_ADMIN/);
    // The addon path the image copies is the one native/build.mjs produces and src/io loads.
    expect(readFileSync(join(ROOT, 'native/build.mjs'), 'utf8')).toContain('native/build/Release/weft_io.node');
    expect(readFileSync(join(ROOT, 'src/io/native.ts'), 'utf8')).toContain('native/build/Release/weft_io.node');
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['node_modules', 'dist']) expect(ignore).toContain(p);
  });

  test('every file the Dockerfile copies from the context exists', () => {
    for (const m of docker.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const src of m[1]!.split(/\s+/)) expect(readdirSync(ROOT)).toContain(src.replace(/\/$/, '').split('/')[0]);
    }
  });
});
