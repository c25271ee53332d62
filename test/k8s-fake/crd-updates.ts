/**
 * Changes Liqo made to its CRDs after the snapshot in shared/liqo/crds, applied to the loaded
 * schemas so that the test API server accepts exactly what Liqo's current CRDs accept. Each entry
 * names its source and is written from the fields' names and types there (not copied); an entry
 * whose change the loaded CRD already has is left alone.
 *
 * - GeneveTunnel (networking.liqo.io/v1beta1): the status subresource with `value` (string: one
 *   of Liqo's ConnectionStatusValue, Connected/Connecting/Error) and `latency` ({value: string,
 *   timestamp: string, format date-time}) — liqotech/liqo pull request 3277 ("Geneve tunnel
 *   conncheck", merged; apis/networking/v1beta1/genevetunnel_types.go GeneveTunnelStatus and
 *   deployments/liqo/charts/liqo-crds/crds/networking.liqo.io_genevetunnels.yaml), which also
 *   adds printer columns (Status, Age, Latency) that do not change what is accepted.
 */
import type { CrdInfo } from './schema.js';

export function withLiqoCrdUpdates(c: CrdInfo): CrdInfo {
  if (c.group === 'networking.liqo.io' && c.version === 'v1beta1' && c.kind === 'GeneveTunnel') {
    const props = c.schema.properties ?? {};
    if (props['status'] !== undefined && c.statusSubresource) return c;
    return {
      ...c,
      statusSubresource: true,
      schema: {
        ...c.schema,
        properties: {
          ...props,
          status: {
            type: 'object',
            properties: {
              value: { type: 'string' },
              latency: {
                type: 'object',
                properties: { value: { type: 'string' }, timestamp: { type: 'string', format: 'date-time' } },
              },
            },
          },
        },
      },
    };
  }
  return c;
}
