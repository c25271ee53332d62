/**
 * Shared by the root e2e tests that run every Weft component as a `weft k8s` process started
 * from deploy/liqo exactly as Kubernetes would start it (liqo-pods.test.ts,
 * liqo-firewall-processes.test.ts): one test API server per cluster (test/k8s-fake) holding
 * Liqo's objects for one peering, deploy/liqo's ClusterRoles and bindings (RBAC enforced) and
 * Liqo's cluster-id ConfigMap; argv/env of the gateway template's and the fabric DaemonSet's
 * containers as the kubelet expands them; per-ServiceAccount kubeconfigs; and relays that make
 * the host's API server reachable at 127.0.0.1:6443 inside a namespace (a unix socket crosses
 * namespaces).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { renderGatewayTemplate, type GatewayObject } from '../k8s-fake/liqo-render.js';
import { LIQO_NAMESPACE } from '../k8s-fake/liqo-peering.js';
import { ROOT, runWeft } from '../cli/helpers.js';
import type { Spawned, Topology } from '../util/netns.js';
import { loadLiqo } from '../control/k8s/helpers.js';

export const NET = 'networking.liqo.io/v1beta1';
const RBAC = 'rbac.authorization.k8s.io/v1';
export const API_PORT = 6443;

export function yamlDocs(file: string): Record<string, unknown>[] {
  return parseAllDocuments(readFileSync(join(ROOT, 'deploy/liqo', file), 'utf8')).map(
    (d) => d.toJS() as Record<string, unknown>,
  );
}

export interface Container {
  args: string[];
  env?: { name: string; value?: string; valueFrom?: Record<string, Record<string, string>> }[];
}

/**
 * argv and env of a container as the kubelet runs it: env from values and the fieldRefs /
 * configMapKeyRefs given, then $(VAR) in args expanded from that env.
 */
export function containerCommand(
  c: Container,
  fields: Record<string, string>,
  configMaps: Record<string, string>,
): { args: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.['fieldRef'] !== undefined) env[e.name] = fields[e.valueFrom['fieldRef']['fieldPath']!] ?? '';
    else if (e.valueFrom?.['configMapKeyRef'] !== undefined)
      env[e.name] =
        configMaps[`${e.valueFrom['configMapKeyRef']['name']}/${e.valueFrom['configMapKeyRef']['key']}`] ?? '';
  }
  const args = c.args.map((a) => a.replace(/\$\(([A-Z_]+)\)/g, (_m, v: string) => env[v] ?? `$(${v})`));
  return { args, env };
}

/**
 * One cluster's API server: `res` (and any other networking.liqo.io objects, by plural), Liqo's
 * cluster-id ConfigMap, deploy/liqo's gateway ClusterRole bound to the gateway's ServiceAccount
 * (named like the gateway, in its namespace, as Liqo's controller-manager binds it) and the
 * fabric DaemonSet's ClusterRole and binding.
 */
export async function startLiqoApiServer(o: {
  clusterId: string;
  res: LiqoResources;
  extra?: { plural: string; objects: Record<string, unknown>[] }[];
  gateway: { namespace: string; name: string };
}): Promise<FakeApiServer> {
  const server = await FakeApiServer.start();
  loadLiqo(server, o.res);
  for (const e of o.extra ?? []) for (const x of e.objects) server.put(NET, e.plural, x);
  server.put('v1', 'configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'liqo-clusterid-configmap', namespace: LIQO_NAMESPACE },
    data: { CLUSTER_ID: o.clusterId },
  });
  server.put(RBAC, 'clusterroles', yamlDocs('gateway-clusterrole.yaml')[0]!);
  server.put(RBAC, 'clusterrolebindings', {
    apiVersion: RBAC,
    kind: 'ClusterRoleBinding',
    metadata: { name: `${o.gateway.namespace}-${o.gateway.name}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'weft-liqo-gateway' },
    subjects: [{ kind: 'ServiceAccount', name: o.gateway.name, namespace: o.gateway.namespace }],
  });
  for (const d of yamlDocs('fabric-daemonset.yaml')) {
    if (d['kind'] === 'ClusterRole') server.put(RBAC, 'clusterroles', d);
    if (d['kind'] === 'ClusterRoleBinding') server.put(RBAC, 'clusterrolebindings', d);
  }
  return server;
}

/** The stored GatewayServer/GatewayClient `name` in `namespace`, typed for the template renderer. */
export function gatewayObject(
  server: FakeApiServer,
  mode: 'server' | 'client',
  namespace: string,
  name: string,
): GatewayObject {
  const stored = server.getObject(NET, mode === 'server' ? 'gatewayservers' : 'gatewayclients', namespace, name)!;
  return {
    ...(stored as unknown as GatewayObject),
    apiVersion: NET,
    kind: mode === 'server' ? 'GatewayServer' : 'GatewayClient',
  };
}

/** A unix socket at `path` relaying to the host-side API server (closed by the caller). */
export async function hostRelay(server: FakeApiServer, path: string): Promise<Server> {
  const port = Number(new URL(server.url).port);
  const s = createServer((c) => {
    const up = createConnection(port, '127.0.0.1');
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve) => s.listen(path, resolve));
  return s;
}

const NS_RELAY =
  `const net=require('net');net.createServer(c=>{const u=net.connect(process.argv[1]);c.pipe(u).pipe(c);` +
  `c.on('error',()=>u.destroy());u.on('error',()=>c.destroy());}).listen(${API_PORT},'127.0.0.1')`;

/** 127.0.0.1:6443 inside `netns` → the unix socket `sock` (a process of `topo`, killed by PID). */
export function relayIn(topo: Topology, netns: string, sock: string, lifetimeS = 400): void {
  topo.spawnIn(netns, `relay-${netns}`, [process.execPath, '-e', NS_RELAY, sock], { lifetimeS });
}

/** A kubeconfig file for ServiceAccount saNs/sa reaching `server` at 127.0.0.1:6443 in the pod's namespace. */
export function saKubeconfig(server: FakeApiServer, file: string, saNs: string, sa: string): string {
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'in-cluster',
      clusters: [
        {
          name: 'c',
          cluster: {
            server: `https://127.0.0.1:${API_PORT}`,
            'certificate-authority-data': Buffer.from(server.caPem).toString('base64'),
          },
        },
      ],
      users: [{ name: sa, user: { token: `${server.token}:sa:${saNs}:${sa}` } }],
      contexts: [{ name: 'in-cluster', context: { cluster: 'c', user: sa, namespace: saNs } }],
    }),
  );
  return file;
}

export interface PodCommand {
  args: string[];
  env: Record<string, string>;
  serviceAccount: string;
  labels: Record<string, string>;
}

/**
 * The gateway pod Liqo renders from deploy/liqo's server/client template for `gw` (pod `pod`
 * on `nodeName`): its container's argv and env, ServiceAccount and pod labels.
 */
export function gatewayPodCommand(
  mode: 'server' | 'client',
  gw: GatewayObject,
  pod: string,
  nodeName: string,
  /** The template file in deploy/liqo (default: the TUN template of `mode`). */
  templateFile?: string,
): PodCommand {
  const file =
    templateFile ?? (mode === 'server' ? 'wireguard-server-template.yaml' : 'wireguard-client-template.yaml');
  const wg = renderGatewayTemplate(yamlDocs(file)[0] as Parameters<typeof renderGatewayTemplate>[0], gw) as {
    spec: {
      deployment: {
        spec: {
          template: {
            metadata: { labels: Record<string, string> };
            spec: { serviceAccountName: string; containers: Container[] };
          };
        };
      };
    };
  };
  const tmpl = wg.spec.deployment.spec.template;
  const { args, env } = containerCommand(
    tmpl.spec.containers[0]!,
    { 'spec.nodeName': nodeName, 'metadata.name': pod },
    {},
  );
  return { args, env, serviceAccount: tmpl.spec.serviceAccountName, labels: { ...tmpl.metadata.labels } };
}

/** The fabric DaemonSet's node agent on `nodeName` (pod `pod`, host IP `hostIP`) in cluster `clusterId`. */
export function nodeAgentCommand(clusterId: string, nodeName: string, pod: string, hostIP: string): PodCommand {
  const ds = yamlDocs('fabric-daemonset.yaml').find((d) => d['kind'] === 'DaemonSet') as {
    spec: {
      template: {
        metadata: { labels: Record<string, string> };
        spec: { serviceAccountName: string; containers: Container[] };
      };
    };
  };
  const spec = ds.spec.template.spec;
  const { args, env } = containerCommand(
    spec.containers[0]!,
    { 'spec.nodeName': nodeName, 'metadata.name': pod, 'status.hostIP': hostIP },
    { 'liqo-clusterid-configmap/CLUSTER_ID': clusterId },
  );
  return { args, env, serviceAccount: spec.serviceAccountName, labels: { ...ds.spec.template.metadata.labels } };
}

/** Requests the API server refused (RBAC). */
export function forbiddenRequests(server: FakeApiServer): string[] {
  return server.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`);
}

/** The weft process under spawnIn's `timeout` (`ip netns exec` execs the command): the PID to SIGKILL. */
export function weftPid(s: Spawned): number {
  const kids = readFileSync(`/proc/${s.pid}/task/${s.pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  if (kids.length !== 1) throw new Error(`expected one child of ${s.pid}, found ${kids.length}`);
  return kids[0]!;
}

/** `weft show --json` of a process by its run dir (the one control socket there). */
export async function showRunDir(runDir: string): Promise<WeftStatus> {
  const sock = readdirSync(runDir).find((f) => f.endsWith('.sock'));
  if (sock === undefined) throw new Error(`no control socket in ${runDir}`);
  const r = await runWeft(['show', sock.slice(0, -5), '--json', '--run-dir', runDir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`weft show (${runDir}): ${r.code} ${r.stderr}`);
  return JSON.parse(r.stdout) as WeftStatus;
}
