// Shared by the Kubernetes-mode tests: load Liqo's fixture resources into the fake API server.
import type { KubernetesObject } from '@kubernetes/client-node';
import { KINDS, type LiqoResourceName, type LiqoResources } from '../../../src/control/k8s/resources.js';
import type { FakeApiServer } from '../../k8s-fake/server.js';
import { liqoResources } from './liqo-fixtures.js';

/**
 * Stores Liqo's resources (the fixtures by default) in the fake API server, status included (as
 * if Liqo's controllers had filled it in).
 */
export function loadLiqo(server: FakeApiServer, res: LiqoResources = liqoResources()): void {
  for (const [name, list] of Object.entries(res) as [LiqoResourceName, KubernetesObject[]][]) {
    for (const o of list) server.put(o.apiVersion!, KINDS[name].plural, o as Record<string, unknown>);
  }
}
