/**
 * Helm's rendering of Liqo's chart templates (/work/shared/liqo/helm-templates) for tests that
 * need the objects a Liqo install creates, and Helm's merge of values files.
 *
 * The Go template language is implemented only as far as those templates use it: text with
 * `{{ }}`/`{{- -}}` trimming; `if`/`else if`/`else`/`end`, `range` (list or map, with `$v :=` /
 * `$i, $v :=`), `with`; variables (`$x :=`, `$x =`, `$`, `$x.field`); field chains on maps;
 * pipelines and parentheses; string, number and boolean literals; the functions dict, list,
 * merge, include, nindent, toYaml, quote, toString, replace, default, and, or, not, eq, ne, gt,
 * int, printf (%s %d %v). Anything else throws, naming the construct, so a template that grows a
 * new construct fails the test rather than rendering wrong.
 *
 * Named templates (`include`) are Liqo's _helpers.tpl ones (helm-liqo-helpers.ts); the language
 * is parsed in go-template-parse.ts and evaluated in go-template-eval.ts.
 *
 * Helm's own behaviour kept: a missing map key renders as "" (Helm removes "<no value>"), toYaml
 * sorts map keys and drops the final newline, values are merged as `helm install -f` merges them
 * (mergeValues).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { isMap, Renderer, Scope, type Map_ } from './go-template-eval.js';
import { lex, parseTree } from './go-template-parse.js';
import { liqoInclude } from './helm-liqo-helpers.js';
import { loadCrds, validate, type CrdInfo } from './schema.js';
import { LIQO_CRD_DIR } from './server.js';

export const LIQO_SHARED_DIR =
  process.env.WEFT_LIQO_SHARED ??
  [fileURLToPath(new URL('../../../shared/liqo', import.meta.url)), '/work/shared/liqo'].find((d) => existsSync(d)) ??
  fileURLToPath(new URL('../../../shared/liqo', import.meta.url));

/**
 * Helm's merge of a values file over the values below it (chart defaults, earlier -f files):
 * maps merge key by key, recursively; a list or a scalar replaces what was there; `null`
 * deletes the key. Neither input is changed.
 */
export function mergeValues(base: unknown, over: unknown): unknown {
  if (!isMap(base) || !isMap(over)) return structuredClone(over);
  const out: Map_ = structuredClone(base);
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else out[k] = isMap(out[k]) && isMap(v) ? mergeValues(out[k], v) : structuredClone(v);
  }
  return out;
}

/** Liqo's chart default values (deployments/liqo/values.yaml). */
export function liqoChartDefaults(): Map_ {
  return parseAllDocuments(readFileSync(join(LIQO_SHARED_DIR, 'helm-values.yaml'), 'utf8'))[0]!.toJS() as Map_;
}

export interface Release {
  name: string;
  namespace: string;
}
export const LIQO_RELEASE: Release = { name: 'liqo', namespace: 'liqo' };

/** One template file rendered to text, as `helm template` would print it. */
export function renderTemplateText(src: string, values: unknown, file = 'template', release = LIQO_RELEASE): string {
  const root: Map_ = {
    Values: values,
    Release: { Name: release.name, Namespace: release.namespace, Service: 'Helm' },
    Chart: { Name: 'liqo', AppVersion: '' },
  };
  const scope = new Scope(null);
  scope.declare('$', root);
  return new Renderer(liqoInclude).run(parseTree(lex(src, file), file), root, scope);
}

export type K8sObject = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

/**
 * One template file rendered and split into objects (empty documents dropped, as Helm does);
 * objects without a namespace get the release's, as `helm install` creates them.
 */
export function renderTemplate(src: string, values: unknown, file = 'template', release = LIQO_RELEASE): K8sObject[] {
  const text = renderTemplateText(src, values, file, release);
  const out: K8sObject[] = [];
  for (const d of parseAllDocuments(text, { uniqueKeys: true })) {
    if (d.errors.length > 0) throw new Error(`${file}: rendered YAML: ${d.errors.map((e) => e.message).join('; ')}`);
    const o = d.toJS() as K8sObject | null;
    if (o === null) continue;
    if (o.metadata.namespace === undefined) o.metadata.namespace = release.namespace;
    out.push(o);
  }
  return out;
}

/**
 * What `liqoctl install` adds to the chart's defaults from the cluster it installs into
 * (pkg/liqoctl/install/handler.go: the release tag, ipam.podCIDRs and ipam.serviceCIDR it finds);
 * with Weft's test clusters' CIDRs and a release tag.
 */
export const LIQOCTL_INSTALL_VALUES = {
  tag: 'v1.0.0',
  ipam: { podCIDRs: ['10.0.0.0/16'], serviceCIDR: '10.96.0.0/12' },
} as const;

/**
 * Every object Liqo's Helm templates in /work/shared/liqo/helm-templates create with the chart's
 * default values, `liqoctl install`'s values and then each of `overrides` merged over them.
 */
export function renderLiqoChart(...overrides: unknown[]): { file: string; obj: K8sObject }[] {
  let values: unknown = mergeValues(liqoChartDefaults(), LIQOCTL_INSTALL_VALUES);
  for (const o of overrides) values = mergeValues(values, o);
  const dir = join(LIQO_SHARED_DIR, 'helm-templates');
  const out: { file: string; obj: K8sObject }[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    for (const obj of renderTemplate(readFileSync(join(dir, f), 'utf8'), values, f)) out.push({ file: f, obj });
  }
  return out;
}

let crds: CrdInfo[] | undefined;

/**
 * `obj` as the API server stores and serves it: checked against Liqo's CRD for its kind, with
 * the schema's defaults filled in (e.g. a filter rule's `counter`, which Liqo's MSS template
 * leaves out: true). Throws the server's complaint for an object it would refuse.
 */
export function asServed(obj: K8sObject): K8sObject {
  crds ??= loadCrds(LIQO_CRD_DIR);
  const [group, version] = obj.apiVersion.split('/');
  const crd = crds.find((c) => c.group === group && c.version === version && c.kind === obj.kind);
  if (crd === undefined) throw new Error(`no CRD for ${obj.apiVersion} ${obj.kind}`);
  const o = structuredClone(obj);
  const errs = validate(o, crd.schema, 'prune');
  if (errs.length > 0) throw new Error(`${obj.kind} ${obj.metadata.name} is invalid: ${errs.join(', ')}`);
  return o;
}
