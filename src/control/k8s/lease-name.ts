/**
 * The name of a Liqo gateway's Lease, `NAME.NAMESPACE.MODE.connections.liqo.io` in the gateway's
 * namespace. Pure and free of the Kubernetes client, so that `weft k8s` parses its arguments
 * (and a node agent starts its data plane from its last configuration) before loading one.
 */
import type { LiqoGatewayIdentity } from './liqo-gateway.js';

export function leaseName(id: Pick<LiqoGatewayIdentity, 'name' | 'namespace' | 'mode'>): string {
  return `${id.name}.${id.namespace}.${id.mode}.connections.liqo.io`;
}
