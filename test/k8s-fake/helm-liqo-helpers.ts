/**
 * Liqo's named templates (_helpers.tpl) that its chart templates include, restated in TypeScript
 * from what they produce (github:liqotech/liqo deployments/liqo/templates/_helpers.tpl, snapshot
 * 557c199cf41a): liqo.name / liqo.prefixedName / liqo.version / liqo.suffix / liqo.labels /
 * liqo.selectorLabels / liqo.imagePullSecrets / liqo.concatenateMap and the gateway-template ones
 * (liqo.metadataTemplate, liqo.selectorTemplate).
 */
import { sprigIndent, str, truth, yamlOf, type Map_ } from './go-template-eval.js';

const SEMVER =
  /^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

interface Ctx {
  name?: string;
  module?: string;
  version?: string;
  isGwTemplate?: boolean;
  isService?: boolean;
  Values: Map_ & { tag?: string; nameOverride?: string; imagePullSecrets?: unknown[] };
  Release: { Name: string; Service: string };
  Chart: { Name: string; AppVersion?: string };
}

const q = (s: string): string => JSON.stringify(s);
const trunc63 = (s: string): string => s.slice(0, 63).replace(/-+$/, '');

function liqoName(c: Ctx): string {
  return trunc63(c.Values.nameOverride || c.Chart.Name);
}
function liqoVersion(c: Ctx): string {
  const v = c.version || c.Values.tag || c.Chart.AppVersion;
  if (!v) throw new Error('liqo.version: at least one between .Values.tag and .Chart.AppVersion should be set');
  return v;
}
function selectorLabels(c: Ctx): string {
  return [
    `app.kubernetes.io/name: ${q(c.name ?? '')}`,
    `app.kubernetes.io/instance: ${q(`${c.Release.Name}-${c.name ?? ''}`)}`,
    `app.kubernetes.io/component: ${q(c.module ?? '')}`,
    `app.kubernetes.io/part-of: ${q(liqoName(c))}`,
  ].join('\n');
}
function chartLabels(c: Ctx): string[] {
  return [
    `helm.sh/chart: ${q(trunc63(`${c.Chart.Name}-${liqoVersion(c)}`.replace(/\+/g, '_')))}`,
    `app.kubernetes.io/version: ${q(liqoVersion(c))}`,
  ];
}
/** The gateway templates' selector: Liqo's labels with `{{ .Name }}` left for the controller-manager. */
function selectorTemplate(c: Ctx): string {
  return [
    `app.kubernetes.io/name: ${q('{{ .Name }}')}`,
    `app.kubernetes.io/instance: ${q(`${c.Release.Name}-{{ .Name }}`)}`,
    `app.kubernetes.io/component: ${q(c.module ?? '')}`,
    `app.kubernetes.io/part-of: ${q(liqoName(c))}`,
    `app.kubernetes.io/managed-by: ${q(c.Release.Service)}`,
    'networking.liqo.io/component: "gateway"',
    'networking.liqo.io/gateway-name: "{{ .Name }}"',
    'networking.liqo.io/gateway-namespace: "{{ .Namespace }}"',
    ...(c.isService ? ['networking.liqo.io/active: "true"'] : []),
  ].join('\n');
}
function replicas(c: Ctx): number {
  const gt = (c.Values['networking'] as Map_ | undefined)?.['gatewayTemplates'] as Map_ | undefined;
  return Math.trunc(Number(gt?.['replicas'] ?? 0));
}

const HELPERS: Record<string, (c: Ctx) => string> = {
  'liqo.name': liqoName,
  'liqo.version': liqoVersion,
  'liqo.prefixedName': (c) => `${liqoName(c)}-${c.name ?? ''}`,
  'liqo.suffix': (c) => (!c.Values.tag || SEMVER.test(c.Values.tag) || c.version ? '' : '-ci'),
  'liqo.selectorLabels': selectorLabels,
  'liqo.labels': (c) =>
    [selectorLabels(c), ...chartLabels(c), `app.kubernetes.io/managed-by: ${q(c.Release.Service)}`].join('\n'),
  'liqo.imagePullSecrets': (c) =>
    truth(c.Values.imagePullSecrets) ? `imagePullSecrets:\n${yamlOf(c.Values.imagePullSecrets)}` : '',
  'liqo.concatenateMap': (c) => {
    const d = c as unknown as { commandName: string; dictionary: Map_ };
    const pairs = Object.keys(d.dictionary)
      .sort()
      .map((k) => `${k}=${str(d.dictionary[k], 'liqo.concatenateMap')}`);
    return `- ${d.commandName}=${pairs.join(',')}`;
  },
  'liqo.selectorTemplate': selectorTemplate,
  'liqo.metadataTemplate': (c) => {
    const labels = [
      selectorTemplate(c),
      ...chartLabels(c),
      ...(c.isGwTemplate && replicas(c) === 1 ? ['networking.liqo.io/active: "true"'] : []),
    ].join('\n');
    return [`name: ${q('{{ .Name }}')}`, `namespace: ${q('{{ .Namespace }}')}`, 'labels:', sprigIndent(2, labels)].join(
      '\n',
    );
  },
};

export function liqoInclude(name: string, ctx: unknown, where: string): string {
  const h = HELPERS[name];
  if (h === undefined) throw new Error(`${where}: named template ${name} is not defined here`);
  return h(ctx as Ctx);
}
