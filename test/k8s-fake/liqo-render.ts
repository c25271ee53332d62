/**
 * What Liqo's controller-manager does with a WgGatewayServerTemplate/WgGatewayClientTemplate for
 * one GatewayServer/GatewayClient (read from Liqo's server-operator/client-operator and
 * external-network/utils/template.go; re-implemented, not copied), for tests:
 * - template data: Spec (the GatewayServer/Client spec), Name, Namespace, GatewayUID (its uid),
 *   ClusterID (its liqo.io/remote-cluster-id label), SecretName (spec.secretRef.name);
 * - every string value is a Go template; a result that parses as an integer becomes a number,
 *   except under `labels`/`annotations` maps (forced strings), and metadata name/namespace;
 * - a map key written `?key` is kept (as `key`) only when its rendered value is not empty/zero;
 * - the rendered object is the template's objectKind, named/namespaced from template.metadata,
 *   labelled liqo.io/remote-cluster-id and controlled by the GatewayServer/Client.
 * Only field references `{{ .A.B }}`, `{{ index .A.B N }}` and `{{ if X }}…{{ else }}…{{ end }}`
 * are supported (Go field names, matched case-insensitively against the JSON names; Go renders
 * a missing field as "<no value>", here ""); anything else throws, so templates stay within
 * what this checks.
 */
export interface GatewayObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid: string; labels: Record<string, string> };
  spec: Record<string, unknown> & { secretRef?: { name?: string } };
}

type Json = unknown;

function lookup(data: Record<string, unknown>, path: string[]): unknown {
  let cur: unknown = data;
  for (const seg of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    const key = Object.keys(cur as object).find((k) => k.toLowerCase() === seg.toLowerCase());
    cur = key === undefined ? undefined : (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/** A template value: `.A.B` (field reference) or `index .A.B N` (list element). */
function evalExpr(text: string, expr: string, data: Record<string, unknown>): unknown {
  const field = (ref: string): unknown => {
    if (!/^(\.[A-Za-z][A-Za-z0-9]*)+$/.test(ref))
      throw new Error(
        `template ${JSON.stringify(text)}: only {{ .Field }}, {{ index .Field N }}, {{ if .Field }}…{{ else }}…{{ end }} are supported here, not ${JSON.stringify(expr)}`,
      );
    return lookup(data, ref.slice(1).split('.'));
  };
  const idx = /^index\s+(\S+)\s+(\d+)$/.exec(expr);
  if (idx !== null) {
    const list = field(idx[1]!);
    if (!Array.isArray(list) || Number(idx[2]) >= list.length)
      throw new Error(`template ${JSON.stringify(text)}: ${expr}: index out of range (Go's template fails the render)`);
    return list[Number(idx[2])];
  }
  return field(expr);
}

/** Go's truth for `if`: not false, 0, nil, or an empty string, list or map. */
function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (v !== null && typeof v === 'object') return Object.keys(v).length > 0;
  return v !== undefined && v !== null && v !== false && v !== 0 && v !== '';
}

/**
 * Renders one Go template string: field references, `index`, and `if`/`else`/`end` (nestable),
 * the subset Liqo's own templates use for endpoint ports. Anything else throws.
 */
export function renderString(text: string, data: Record<string, unknown>): string {
  const tokens = text.split(/(\{\{.*?\}\})/g);
  let pos = 0;
  // `live`: this branch is taken (Go evaluates nothing in the other one).
  const block = (live: boolean): { out: string; stop: 'else' | 'end' | 'eof' } => {
    let out = '';
    while (pos < tokens.length) {
      const t = tokens[pos++]!;
      const m = /^\{\{(.*)\}\}$/.exec(t);
      if (m === null) {
        out += t;
        continue;
      }
      const expr = m[1]!.trim();
      if (expr === 'else' || expr === 'end') return { out, stop: expr };
      const cond = /^if\s+(.+)$/.exec(expr);
      if (cond !== null) {
        const yes = live && truthy(evalExpr(text, cond[1]!.trim(), data));
        const a = block(yes);
        const b = a.stop === 'else' ? block(live && !yes) : { out: '', stop: a.stop };
        if (b.stop !== 'end') throw new Error(`template ${JSON.stringify(text)}: {{ if }} without {{ end }}`);
        out += yes ? a.out : b.out;
        continue;
      }
      if (!live) continue;
      const v = evalExpr(text, expr, data);
      out += v === undefined || v === null ? '' : String(v);
    }
    return { out, stop: 'eof' };
  };
  const r = block(true);
  if (r.stop !== 'eof') throw new Error(`template ${JSON.stringify(text)}: {{ ${r.stop} }} without {{ if }}`);
  return r.out;
}

function isZero(v: unknown): boolean {
  return v === '' || v === 0 || v === undefined || v === null;
}

export function render(obj: Json, data: Record<string, unknown>, forceString: boolean): Json {
  if (typeof obj === 'string') {
    const s = renderString(obj, data);
    return !forceString && /^-?\d+$/.test(s) ? Number(s) : s;
  }
  if (Array.isArray(obj)) return obj.map((v) => render(v, data, forceString));
  if (obj !== null && typeof obj === 'object') {
    const out: Record<string, unknown> = {};
    const keys = Object.keys(obj);
    const force = forceString || keys.includes('labels') || keys.includes('annotations');
    for (const k of keys) {
      const optional = k.startsWith('?');
      const v = render((obj as Record<string, unknown>)[k], data, force);
      if (optional && isZero(v)) continue;
      out[optional ? k.slice(1) : k] = v;
    }
    return out;
  }
  return forceString && obj !== undefined ? String(obj) : obj;
}

/** The WgGatewayServer/WgGatewayClient Liqo's controller makes from `template` for `gw`. */
export function renderGatewayTemplate(
  template: {
    spec: {
      objectKind: { apiVersion: string; kind: string };
      template: { metadata: Record<string, unknown>; spec: unknown };
    };
  },
  gw: GatewayObject,
): Record<string, unknown> {
  const clusterId = gw.metadata.labels['liqo.io/remote-cluster-id'];
  if (clusterId === undefined) throw new Error(`${gw.kind} ${gw.metadata.name}: no liqo.io/remote-cluster-id label`);
  const data: Record<string, unknown> = {
    Spec: gw.spec,
    Name: gw.metadata.name,
    Namespace: gw.metadata.namespace,
    GatewayUID: gw.metadata.uid,
    ClusterID: clusterId,
    SecretName: gw.spec.secretRef?.name ?? '',
  };
  const md = template.spec.template.metadata;
  const labels = render(md['labels'] ?? {}, data, true) as Record<string, string>;
  return {
    apiVersion: template.spec.objectKind.apiVersion,
    kind: template.spec.objectKind.kind,
    metadata: {
      name: render(md['name'], data, true),
      namespace: render(md['namespace'], data, true),
      labels: { ...labels, 'liqo.io/remote-cluster-id': clusterId },
      ownerReferences: [
        { apiVersion: gw.apiVersion, kind: gw.kind, name: gw.metadata.name, uid: gw.metadata.uid, controller: true },
      ],
    },
    spec: render(structuredClone(template.spec.template.spec), data, false),
  };
}
