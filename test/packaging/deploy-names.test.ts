// Applying two manifests that define the same object (kind, namespace, name) silently replaces
// one with the other: no two files under deploy/ may do that.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, test } from 'vitest';
import { ROOT } from '../cli/helpers.js';

/** Kinds without a namespace: their identity is kind + name. */
const CLUSTER_SCOPED = new Set([
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'Namespace',
  'Node',
  'PersistentVolume',
  'PriorityClass',
  'StorageClass',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
]);

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? yamlFiles(join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string };
}

/** kind/namespace/name of every Kubernetes object in deploy/ (Helm values files have no kind). */
function identities(): { id: string; file: string }[] {
  const out: { id: string; file: string }[] = [];
  for (const file of yamlFiles(join(ROOT, 'deploy'))) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      const o = doc.toJS() as Obj | null;
      if (o?.kind === undefined || o.apiVersion === undefined) continue;
      const group = o.apiVersion.includes('/') ? o.apiVersion.split('/')[0] : '';
      // A namespaced object without metadata.namespace lands in the namespace kubectl applies to.
      const ns = CLUSTER_SCOPED.has(o.kind) ? '' : (o.metadata?.namespace ?? '(current namespace)');
      out.push({ id: `${o.kind}.${group} ${ns}/${o.metadata?.name}`, file: relative(ROOT, file) });
    }
  }
  return out;
}

describe('deploy/ manifests', () => {
  test('no two define the same object (kind, namespace, name)', () => {
    const all = identities();
    expect(all.length).toBeGreaterThan(10);
    const seen = new Map<string, string>();
    const clashes: string[] = [];
    for (const { id, file } of all) {
      const first = seen.get(id);
      if (first !== undefined) clashes.push(`${id}: ${first} and ${file}`);
      else seen.set(id, file);
    }
    expect(clashes).toEqual([]);
  });

  test('the Liqo gateway ClusterRole and the standalone one are distinct objects', () => {
    const ids = identities();
    const of = (id: string) => ids.filter((x) => x.id === id).map((x) => x.file);
    expect(of('ClusterRole.rbac.authorization.k8s.io /weft-gateway')).toEqual(['deploy/rbac.yaml']);
    expect(of('ClusterRole.rbac.authorization.k8s.io /weft-liqo-gateway')).toEqual([
      'deploy/liqo/gateway-clusterrole.yaml',
    ]);
  });
});
