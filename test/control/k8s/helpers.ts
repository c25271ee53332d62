// Shared by the Kubernetes-mode tests: load Liqo's fixture resources into the fake API server.
import type { KubernetesObject } from '@kubernetes/client-node';
import { KINDS, type LiqoResourceName } from '../../../src/control/k8s/resources.js';
import type { FakeApiServer } from '../../k8s-fake/server.js';
import { liqoResources } from './liqo-fixtures.js';

export const PLURAL: Record<LiqoResourceName, string> = {
  configurations: KINDS.configurations.plural,
  gatewayServers: KINDS.gatewayServers.plural,
  gatewayClients: KINDS.gatewayClients.plural,
  secrets: KINDS.secrets.plural,
  publicKeys: KINDS.publicKeys.plural,
  internalNodes: KINDS.internalNodes.plural,
  internalFabrics: KINDS.internalFabrics.plural,
  geneveTunnels: KINDS.geneveTunnels.plural,
  routeConfigurations: KINDS.routeConfigurations.plural,
  networks: KINDS.networks.plural,
  ips: KINDS.ips.plural,
};

/** Store the fixtures with their status (as if Liqo's controllers had filled it in). */
export function loadLiqo(server: FakeApiServer): void {
  for (const [name, list] of Object.entries(liqoResources()) as [LiqoResourceName, KubernetesObject[]][]) {
    for (const o of list) server.put(o.apiVersion!, PLURAL[name], o as Record<string, unknown>);
  }
}
