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
 * Only field references `{{ .A.B }}` are supported (Go field names, matched case-insensitively
 * against the JSON names); anything else throws, so templates stay within what this checks.
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

/** Renders one Go template string (field references only). */
export function renderString(text: string, data: Record<string, unknown>): string {
  return text.replace(/\{\{(.*?)\}\}/g, (_m, inner: string) => {
    const expr = inner.trim();
    if (!/^(\.[A-Za-z][A-Za-z0-9]*)+$/.test(expr)) throw new Error(`template ${JSON.stringify(text)}: only field references like {{ .Spec.Endpoint.Port }} are supported here, not ${JSON.stringify(expr)}`);
    const v = lookup(data, expr.slice(1).split('.'));
    return v === undefined || v === null ? '' : String(v);
  });
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
export function renderGatewayTemplate(template: { spec: { objectKind: { apiVersion: string; kind: string }; template: { metadata: Record<string, unknown>; spec: unknown } } }, gw: GatewayObject): Record<string, unknown> {
  const clusterId = gw.metadata.labels['liqo.io/remote-cluster-id'];
  if (clusterId === undefined) throw new Error(`${gw.kind} ${gw.metadata.name}: no liqo.io/remote-cluster-id label`);
  const data: Record<string, unknown> = {
    Spec: gw.spec, Name: gw.metadata.name, Namespace: gw.metadata.namespace, GatewayUID: gw.metadata.uid,
    ClusterID: clusterId, SecretName: gw.spec.secretRef?.name ?? '',
  };
  const md = template.spec.template.metadata;
  const labels = render(md['labels'] ?? {}, data, true) as Record<string, string>;
  return {
    apiVersion: template.spec.objectKind.apiVersion, kind: template.spec.objectKind.kind,
    metadata: {
      name: render(md['name'], data, true), namespace: render(md['namespace'], data, true),
      labels: { ...labels, 'liqo.io/remote-cluster-id': clusterId },
      ownerReferences: [{ apiVersion: gw.apiVersion, kind: gw.kind, name: gw.metadata.name, uid: gw.metadata.uid, controller: true }],
    },
    spec: render(structuredClone(template.spec.template.spec), data, false),
  };
}
