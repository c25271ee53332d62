// deploy/liqo/ checked without a cluster:
// - the gateway templates validate against Liqo's own CRDs (WgGatewayServerTemplate,
//   WgGatewayClientTemplate), every other object round-trips through client-node's models;
// - rendered as Liqo's controller-manager renders them for a GatewayServer/GatewayClient
//   (test/k8s-fake/liqo-render.ts), the WgGatewayServer/Client validate against their CRDs, the
//   Deployment and Service against client-node's models, and the container's arguments parse
//   into the Liqo gateway identity `weft k8s` acts as;
// - Liqo's labels, selectors and key mount are kept; the fabric DaemonSet and Liqo's fabric
//   (Liqo's chart rendered with values.yaml merged over its defaults, as Helm merges them)
//   never share a node, and Liqo's own fabric affinity survives the merge.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { describe, expect, test } from 'vitest';
import { K8S_SPEC, parseK8sArgs } from '../../src/cli/commands/k8s-args.js';
import { parseArgs } from '../../src/cli/commands/common.js';
import { loadCrds, validate } from '../k8s-fake/schema.js';
import { LIQO_CRD_DIR } from '../k8s-fake/server.js';
import { renderGatewayTemplate, type GatewayObject } from '../k8s-fake/liqo-render.js';
import { liqoChartDefaults, mergeValues, renderLiqoChart } from '../k8s-fake/helm-render.js';
import { ROOT } from '../cli/helpers.js';

const DIR = join(ROOT, 'deploy/liqo');
type Obj = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
};
const crds = loadCrds(LIQO_CRD_DIR);
const crd = (kind: string) => crds.find((c) => c.kind === kind)!;

function docs(): { file: string; obj: Obj }[] {
  const out: { file: string; obj: Obj }[] = [];
  for (const f of readdirSync(DIR)
    .filter((n) => n.endsWith('.yaml') && n !== 'values.yaml')
    .sort()) {
    for (const d of parseAllDocuments(readFileSync(join(DIR, f), 'utf8'), { uniqueKeys: true })) {
      expect(d.errors, f).toEqual([]);
      out.push({ file: f, obj: d.toJS() as Obj });
    }
  }
  return out;
}
const find = (kind: string, name?: string): Obj =>
  docs().find((d) => d.obj.kind === kind && (name === undefined || d.obj.metadata.name === name))!.obj;

function modelRoundTrip(obj: Obj): void {
  const type = `${obj.apiVersion
    .split('/')
    .pop()!
    .replace(/^./, (c) => c.toUpperCase())}${obj.kind}`;
  const model = ObjectSerializer.deserialize(structuredClone(obj), type) as unknown;
  expect(model, `${type} is a client-node model`).toBeTypeOf('object');
  expect(
    ObjectSerializer.serialize(model, type),
    `${obj.kind} ${obj.metadata?.name}: no unknown or misspelt field`,
  ).toEqual(obj);
}

interface NodeSelectorTerm {
  matchExpressions: { key: string; operator: string; values?: string[] }[];
}
interface Affinity {
  nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: NodeSelectorTerm[] } };
}
interface Values {
  controllerManager: { pod: { extraArgs: string[] } };
  networking: { fabric: Record<string, unknown> & { affinity: Affinity } };
}
const ourValues = (): Values => parse(readFileSync(join(DIR, 'values.yaml'), 'utf8')) as Values;

/** The scheduler's nodeSelectorTerms: any term matches (OR) when all its expressions do (AND). */
function nodeMatches(terms: NodeSelectorTerm[], labels: Record<string, string>): boolean {
  const holds = (e: NodeSelectorTerm['matchExpressions'][number]): boolean => {
    const v = labels[e.key];
    switch (e.operator) {
      case 'In':
        return v !== undefined && e.values!.includes(v);
      case 'NotIn':
        return v === undefined || !e.values!.includes(v);
      case 'Exists':
        return v !== undefined;
      case 'DoesNotExist':
        return v === undefined;
      default:
        throw new Error(`operator ${e.operator} not modelled here`);
    }
  };
  return terms.some((t) => t.matchExpressions.length > 0 && t.matchExpressions.every(holds));
}

const NS = 'liqo-tenant-cluster-b';
const NET = 'networking.liqo.io/v1beta1';
/** A GatewayServer/GatewayClient as liqoctl peer creates them (fields from Liqo's CRDs). */
const gatewayServer: GatewayObject = {
  apiVersion: NET,
  kind: 'GatewayServer',
  metadata: {
    name: 'cluster-b',
    namespace: NS,
    uid: '0b7c1f6e-4a64-4a8e-9f57-3f2c8d1e5a10',
    labels: { 'liqo.io/remote-cluster-id': 'cluster-b' },
  },
  spec: {
    endpoint: { port: 51840, serviceType: 'NodePort' },
    mtu: 1340,
    secretRef: { name: 'gw-cluster-b' },
    serverTemplateRef: {
      apiVersion: NET,
      kind: 'WgGatewayServerTemplate',
      name: 'weft-wireguard-server',
      namespace: 'liqo',
    },
  },
};
const gatewayClient: GatewayObject = {
  apiVersion: NET,
  kind: 'GatewayClient',
  metadata: {
    name: 'cluster-a',
    namespace: 'liqo-tenant-cluster-a',
    uid: '5d0e2b77-1c3a-4f43-8d11-2b8a6c0e9f21',
    labels: { 'liqo.io/remote-cluster-id': 'cluster-a' },
  },
  spec: {
    endpoint: { addresses: ['172.18.0.2'], port: 31840, protocol: 'UDP' },
    mtu: 1340,
    secretRef: { name: 'gw-cluster-a' },
    clientTemplateRef: {
      apiVersion: NET,
      kind: 'WgGatewayClientTemplate',
      name: 'weft-wireguard-client',
      namespace: 'liqo',
    },
  },
};

interface PodSpec {
  serviceAccountName: string;
  containers: {
    name: string;
    args: string[];
    env: { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
    volumeMounts: { name: string; mountPath: string }[];
  }[];
  volumes: { name: string; secret?: { secretName: string } }[];
}

/** $(VAR) expansion as the kubelet does, with the values the downward API would give. */
function expand(args: string[], env: Record<string, string>): string[] {
  return args.map((a) => a.replace(/\$\((\w+)\)/g, (m, v: string) => env[v] ?? m));
}

describe('deploy/liqo manifests', () => {
  test("the gateway templates validate against Liqo's CRDs; every other object against client-node's models", () => {
    const all = docs();
    expect(all.map((d) => `${d.obj.kind}/${d.obj.metadata.name}`).sort()).toEqual([
      'ClusterRole/weft-fabric',
      'ClusterRole/weft-liqo-gateway',
      'ClusterRoleBinding/weft-fabric',
      'DaemonSet/weft-fabric',
      'ServiceAccount/weft-fabric',
      'WgGatewayClientTemplate/weft-wireguard-client',
      'WgGatewayClientTemplate/weft-wireguard-client-restricted',
      'WgGatewayServerTemplate/weft-wireguard-server',
      'WgGatewayServerTemplate/weft-wireguard-server-restricted',
    ]);
    for (const { obj } of all) {
      if (obj.apiVersion === NET) expect(validate(obj, crd(obj.kind).schema, 'strict'), `${obj.kind}`).toEqual([]);
      else modelRoundTrip(obj);
    }
    // The schema check can fail: a misspelt template field is reported.
    const bad = structuredClone(find('WgGatewayServerTemplate', 'weft-wireguard-server')) as Obj & {
      spec: Record<string, unknown>;
    };
    bad.spec['objectKnd'] = bad.spec['objectKind'];
    expect(validate(bad, crd('WgGatewayServerTemplate').schema, 'strict').join('\n')).toMatch(/objectKnd/);
  });

  for (const [side, gw, tmplKind, objKind] of [
    ['server', gatewayServer, 'WgGatewayServerTemplate', 'WgGatewayServer'],
    ['client', gatewayClient, 'WgGatewayClientTemplate', 'WgGatewayClient'],
  ] as const) {
    test(`${side}: rendered by Liqo's rules, valid for the ${objKind} CRD and client-node; the pod is \`weft k8s\` as the ${side} gateway`, () => {
      const tmpl = find(tmplKind, `weft-wireguard-${side}`) as unknown as Parameters<typeof renderGatewayTemplate>[0];
      const wg = renderGatewayTemplate(tmpl, gw) as Obj & {
        spec: {
          deployment: Obj & { spec: { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };
          service?: Obj & { spec: { selector: Record<string, string>; ports: { port: number }[] } };
        };
      };
      expect(validate(wg, crd(objKind).schema, 'strict')).toEqual([]);
      expect(wg.metadata).toMatchObject({ name: gw.metadata.name, namespace: gw.metadata.namespace });
      const dep = {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        ...(wg.spec.deployment as Record<string, unknown>),
      } as Obj;
      modelRoundTrip(dep);
      const pod = wg.spec.deployment.spec.template.spec;
      expect(pod.serviceAccountName).toBe(gw.metadata.name); // the ServiceAccount Liqo binds the ClusterRole to
      expect(pod.containers.map((c) => c.name)).toEqual(['gateway']);
      const c = pod.containers[0]!;
      const args = expand(c.args, { NODE_NAME: 'worker-1', POD_NAME: `${gw.metadata.name}-7d9f-x2` });
      expect(args[0]).toBe('k8s');
      const s = parseK8sArgs(parseArgs(args.slice(1), K8S_SPEC), {});
      expect(s.role).toBe('gateway');
      expect(s.liqo).toEqual({
        name: gw.metadata.name,
        namespace: gw.metadata.namespace,
        mode: side,
        gatewayUid: gw.metadata.uid,
      });
      expect(s.remoteClusterIds).toEqual([gw.metadata.labels['liqo.io/remote-cluster-id']]);
      expect(s.leaseName).toBe(`${gw.metadata.name}.${gw.metadata.namespace}.${side}.connections.liqo.io`);
      expect(s.podName).toBe(`${gw.metadata.name}-7d9f-x2`);
      expect(s.clusterId).toBeUndefined(); // read from Liqo's ConfigMap at start
      // The key: the keys Secret mounted where --wireguard-key-dir points.
      const vol = pod.volumes.find((v) => v.secret?.secretName === gw.spec.secretRef!.name)!;
      expect(c.volumeMounts.find((m) => m.name === vol.name)!.mountPath).toBe(s.wireguardKeyDir);
      expect(
        c.env.filter((e) => e.valueFrom?.fieldRef !== undefined).map((e) => [e.name, e.valueFrom!.fieldRef!.fieldPath]),
      ).toEqual([
        ['NODE_NAME', 'spec.nodeName'],
        ['POD_NAME', 'metadata.name'],
      ]);
      // Liqo's selector labels on the pods (InternalFabric and the fabric's source detector find it by them).
      expect(wg.spec.deployment.spec.template.metadata.labels).toMatchObject({
        'networking.liqo.io/component': 'gateway',
        'networking.liqo.io/gateway-name': gw.metadata.name,
        'networking.liqo.io/gateway-namespace': gw.metadata.namespace,
        'app.kubernetes.io/name': gw.metadata.name,
      });
      if (side === 'server') {
        const svc = { apiVersion: 'v1', kind: 'Service', ...(wg.spec.service as Record<string, unknown>) } as Obj;
        modelRoundTrip(svc);
        expect(wg.spec.service!.spec.selector).toEqual({
          ...wg.spec.deployment.spec.template.metadata.labels,
          'networking.liqo.io/active': 'true',
        });
        expect(wg.spec.service!.spec.ports).toEqual([{ port: 51840, protocol: 'UDP', targetPort: 51840 }]);
      } else {
        expect(wg.spec.service).toBeUndefined();
      }
    });
  }

  test("server with spec.endpoint.ports/nodePorts: the Service exposes the first, the port Liqo's client sends to (tunnel 0)", () => {
    const tmpl = find('WgGatewayServerTemplate', 'weft-wireguard-server') as unknown as Parameters<
      typeof renderGatewayTemplate
    >[0];
    const gw = structuredClone(gatewayServer);
    gw.spec['endpoint'] = { ports: [51841, 51842], nodePorts: [32001, 32002], serviceType: 'NodePort' };
    // The GatewayServer itself is valid for Liqo's CRD (CEL: ports xor port, no duplicates).
    expect(
      validate(
        { apiVersion: NET, kind: 'GatewayServer', metadata: gw.metadata, spec: gw.spec },
        crd('GatewayServer').schema,
        'strict',
      ),
    ).toEqual([]);
    const wg = renderGatewayTemplate(tmpl, gw) as Obj & { spec: { service: Obj & { spec: { ports: unknown[] } } } };
    expect(validate(wg, crd('WgGatewayServer').schema, 'strict')).toEqual([]);
    expect(wg.spec.service.spec.ports).toEqual([{ port: 51841, protocol: 'UDP', targetPort: 51841, nodePort: 32001 }]);
    modelRoundTrip({ apiVersion: 'v1', kind: 'Service', ...(wg.spec.service as Record<string, unknown>) } as Obj);
    // With the single (deprecated) field the Service is as before.
    expect((renderGatewayTemplate(tmpl, gatewayServer) as typeof wg).spec.service.spec.ports).toEqual([
      { port: 51840, protocol: 'UDP', targetPort: 51840 },
    ]);
  });

  test("the fabric DaemonSet runs the node agent only where Liqo's fabric (with values.yaml) does not", () => {
    const ds = find('DaemonSet') as Obj & {
      spec: { template: { spec: PodSpec & { hostNetwork: boolean; nodeSelector: Record<string, string> } } };
    };
    const pod = ds.spec.template.spec;
    expect(pod.hostNetwork).toBe(true);
    const c = pod.containers[0]!;
    const s = parseK8sArgs(
      parseArgs(expand(c.args, { NODE_NAME: 'worker-3', POD_NAME: 'weft-fabric-abcde' }).slice(1), K8S_SPEC),
      { WEFT_CLUSTER_ID: 'cluster-a' },
    );
    expect([s.role, s.nodeName, s.clusterId]).toEqual(['node', 'worker-3', 'cluster-a']);
    const cid = (c.env as { name: string; valueFrom?: { configMapKeyRef?: { name: string; key: string } } }[]).find(
      (e) => e.name === 'WEFT_CLUSTER_ID',
    )!;
    expect(cid.valueFrom!.configMapKeyRef).toEqual({ name: 'liqo-clusterid-configmap', key: 'CLUSTER_ID' });
    // Liqo's fabric, with values.yaml merged over the chart's defaults as Helm merges them: on
    // no node the Weft DaemonSet selects, nor on a virtual node (the chart's own condition).
    const [[key, value]] = Object.entries(pod.nodeSelector) as [[string, string]];
    const liqoFabric = renderLiqoChart(ourValues()).find(({ obj }) => obj.kind === 'DaemonSet')!.obj as Obj & {
      spec: { template: { spec: { affinity: Affinity } } };
    };
    const terms =
      liqoFabric.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
        .nodeSelectorTerms;
    const nodes: Record<string, string>[] = [
      {},
      { [key]: value },
      { 'liqo.io/type': 'virtual-node' },
      { 'liqo.io/type': 'virtual-node', [key]: value },
      { [key]: 'kernel' },
    ];
    expect(nodes.map((labels) => nodeMatches(terms, labels))).toEqual([true, false, false, false, true]);
  });

  test("values.yaml composes with Liqo's chart: Liqo's own affinity terms survive, Weft's are added; the controller-manager gets Weft's ClusterRole", () => {
    const defaults = liqoChartDefaults() as unknown as Values;
    const merged = mergeValues(defaults, ourValues()) as Values;
    const fabricTerms = (v: Values) =>
      v.networking.fabric.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
    const liqoTerms = fabricTerms(defaults);
    expect(liqoTerms.length).toBeGreaterThan(0);
    const ds = find('DaemonSet') as Obj & { spec: { template: { spec: { nodeSelector: Record<string, string> } } } };
    const [[key, value]] = Object.entries(ds.spec.template.spec.nodeSelector) as [[string, string]];
    const weft = { key, operator: 'NotIn', values: [value] };
    // Terms are alternatives (OR), a term's expressions all hold (AND): every merged term carries
    // all of a Liqo term's expressions and Weft's, so each condition holds whichever term matches.
    expect(fabricTerms(merged).length).toBe(liqoTerms.length);
    for (const [i, t] of fabricTerms(merged).entries()) {
      expect(t.matchExpressions).toEqual(expect.arrayContaining([...liqoTerms[i]!.matchExpressions, weft]));
    }
    // Everything else of the chart's fabric values is untouched.
    expect({ ...merged.networking.fabric, affinity: null }).toEqual({ ...defaults.networking.fabric, affinity: null });
    // The controller-manager binds Weft's ClusterRole to the gateways it creates.
    const role = find('ClusterRole', 'weft-liqo-gateway').metadata.name;
    expect(merged.controllerManager.pod.extraArgs).toEqual([
      `--wg-gateway-server-cluster-role-name=${role}`,
      `--wg-gateway-client-cluster-role-name=${role}`,
    ]);
    // Helm replaces the list: an installation's own extra arguments would go, hence the README's
    // procedure (its current values, these two appended, in one file).
    const installed = mergeValues(defaults, {
      controllerManager: { pod: { extraArgs: ['--enable-x=true'] } },
    }) as Values;
    expect((mergeValues(installed, ourValues()) as Values).controllerManager.pod.extraArgs).not.toContain(
      '--enable-x=true',
    );
    const appended = {
      controllerManager: {
        pod: {
          extraArgs: [...installed.controllerManager.pod.extraArgs, ...ourValues().controllerManager.pod.extraArgs],
        },
      },
    };
    expect((mergeValues(installed, appended) as Values).controllerManager.pod.extraArgs).toEqual([
      '--enable-x=true',
      ...ourValues().controllerManager.pod.extraArgs,
    ]);
  });
});
