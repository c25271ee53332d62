/**
 * Liqo's Helm chart's MSS clamp as a default install renders it: the template
 * liqo-gw-mssclamp-firewallconfiguration.yaml with the chart default
 * `networking.gateway.mssclamp: { enabled: true, value: 0 }` ("0": automatic, the tunnel route's
 * MTU; Liqo turns it into nft `rt mtu`). HELM_MSS_CLAMP states the object; renderHelmMssClamp()
 * renders the template file with the chart's values file, so a test can check the two agree
 * (test/rules/mss-route.test.ts) and the statement cannot drift from the chart.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** shared/liqo beside the repository (as LIQO_CRD_DIR in server.ts); WEFT_LIQO_DIR overrides. */
export const LIQO_SHARED_DIR =
  process.env.WEFT_LIQO_DIR ??
  [fileURLToPath(new URL('../../../shared/liqo', import.meta.url)), '/work/shared/liqo'].find((d) => existsSync(d)) ??
  fileURLToPath(new URL('../../../shared/liqo', import.meta.url));

const TEMPLATE = 'helm-templates/liqo-gw-mssclamp-firewallconfiguration.yaml';

/** The object Helm renders with the chart defaults (value 0 quoted: "0"), in `namespace` (the release's). */
export function helmMssClamp(namespace: string): Record<string, unknown> {
  return {
    apiVersion: 'networking.liqo.io/v1beta1',
    kind: 'FirewallConfiguration',
    metadata: {
      name: 'gw-mss-clamping',
      namespace,
      labels: {
        'networking.liqo.io/firewall-category': 'gateway',
        'networking.liqo.io/firewall-subcategory': 'all-gateways',
        'liqo.io/webhook-skip': 'true',
      },
    },
    spec: {
      table: {
        family: 'IPV4',
        name: 'mss-clamping',
        chains: [
          {
            name: 'mss-clamping',
            type: 'filter',
            hook: 'forward',
            policy: 'accept',
            priority: 0,
            rules: {
              filterRules: [
                {
                  action: 'tcpmssclamp',
                  value: '0',
                  match: [{ op: 'eq', dev: { position: 'out', value: 'liqo-tunnel' }, proto: { value: 'tcp' } }],
                  name: 'mss-clamping-out',
                },
              ],
            },
          },
        ],
      },
    },
  };
}

/**
 * The template file rendered with the chart's values file: its two directives (the `enabled`
 * guard, the value `| toString | quote`) evaluated; any other directive throws (the template
 * changed: look at it). null when the chart disables the clamp.
 */
export function renderHelmMssClamp(): Record<string, unknown> | null {
  const values = parse(readFileSync(join(LIQO_SHARED_DIR, 'helm-values.yaml'), 'utf8')) as {
    networking: { gateway: { mssclamp: { enabled: boolean; value: number } } };
  };
  const m = values.networking.gateway.mssclamp;
  let text = readFileSync(join(LIQO_SHARED_DIR, TEMPLATE), 'utf8');
  const guard = /^\{\{- if \.Values\.networking\.gateway\.mssclamp\.enabled \}\}\n([\s\S]*)\{\{- end \}\}\s*$/.exec(
    text,
  );
  if (guard === null) throw new Error(`${TEMPLATE}: the enabled guard is not where it was`);
  if (!m.enabled) return null;
  text = guard[1]!.replace(
    '{{ .Values.networking.gateway.mssclamp.value | toString | quote }}',
    JSON.stringify(String(m.value)),
  );
  if (text.includes('{{')) throw new Error(`${TEMPLATE}: a directive this renderer does not know`);
  return parse(text) as Record<string, unknown>;
}

/**
 * `o` as the API server stores it: the FirewallConfiguration CRD's default `counter: true` on each
 * filter rule that omits it (the Helm template does; test/k8s-fake's server validates without
 * applying CRD defaults).
 */
export function asStored(o: Record<string, unknown>): Record<string, unknown> {
  const c = structuredClone(o) as {
    spec: { table: { chains: { rules?: { filterRules?: { counter?: boolean }[] } }[] } };
  };
  for (const ch of c.spec.table.chains) for (const r of ch.rules?.filterRules ?? []) r.counter ??= true;
  return c as unknown as Record<string, unknown>;
}
