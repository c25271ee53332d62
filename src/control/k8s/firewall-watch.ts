/**
 * Watches the FirewallConfigurations and RouteConfigurations a Liqo gateway enforces, selected
 * by the same label sets as Liqo's gateway (liqotech/liqo cmd/gateway: one selector per set, an
 * object is wanted when it matches any):
 * (Weft's `weft k8s` gateway may serve several peers: the per-peer sets then take every
 * remote cluster id served, or any when none is given.)
 * - FirewallConfiguration: category gateway + subcategory all-gateways (Helm MSS clamp,
 *   NOTRACK); gateway + fabric (e.g. service-nodeport-routing); gateway + unique = remote
 *   cluster id (remap-podcidr / remap-externalcidr); gateway + ip-mapping (`<ip>-remap-ipmapping-gw`);
 * - RouteConfiguration: route-category gateway + unique = remote cluster id; gateway + fabric;
 *   gateway + fabric-node + unique = this node.
 * One informer per label set; every change (debounced) hands the union of the caches to
 * `onChange`. Errors of list/watch go to `onError`; the informer restarts after `restartMs`.
 */
import {
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type ObjectCache,
} from '@kubernetes/client-node';
import { listFunction, wrapApiError } from './client.js';
import { collectionPath, type ResourceKind } from './resources.js';
import { WatchTimers } from './watch-timers.js';

export const FIREWALL_CONFIGURATIONS: ResourceKind = {
  group: 'networking.liqo.io',
  version: 'v1beta1',
  plural: 'firewallconfigurations',
  kind: 'FirewallConfiguration',
  namespaced: true,
};
export const ROUTE_CONFIGURATIONS: ResourceKind = {
  group: 'networking.liqo.io',
  version: 'v1beta1',
  plural: 'routeconfigurations',
  kind: 'RouteConfiguration',
  namespaced: true,
};

const FW_CAT = 'networking.liqo.io/firewall-category';
const FW_SUB = 'networking.liqo.io/firewall-subcategory';
const FW_UNIQUE = 'networking.liqo.io/firewall-unique';
const RT_CAT = 'networking.liqo.io/route-category';
const RT_SUB = 'networking.liqo.io/route-subcategory';
const RT_UNIQUE = 'networking.liqo.io/route-unique';

/** Label selectors (k8s syntax) of the FirewallConfigurations a gateway for `remoteClusterId` applies. */
export function gatewayFirewallSelectors(remoteClusterIds: readonly string[] | undefined): string[] {
  return [
    `${FW_CAT}=gateway,${FW_SUB}=all-gateways`,
    `${FW_CAT}=gateway,${FW_SUB}=fabric`,
    // Weft's gateway serves every peer unless told otherwise: then any peer's (label present).
    remoteClusterIds === undefined
      ? `${FW_CAT}=gateway,${FW_UNIQUE}`
      : `${FW_CAT}=gateway,${FW_UNIQUE} in (${remoteClusterIds.join(',')})`,
    `${FW_CAT}=gateway,${FW_SUB}=ip-mapping`,
  ];
}

/** Label selectors of the RouteConfigurations a gateway for `remoteClusterId` on `nodeName` applies. */
export function gatewayRouteSelectors(remoteClusterIds: readonly string[] | undefined, nodeName: string): string[] {
  return [
    remoteClusterIds === undefined
      ? `${RT_CAT}=gateway,!${RT_SUB},${RT_UNIQUE}`
      : `${RT_CAT}=gateway,${RT_UNIQUE} in (${remoteClusterIds.join(',')})`,
    `${RT_CAT}=gateway,${RT_SUB}=fabric`,
    `${RT_CAT}=gateway,${RT_SUB}=fabric-node,${RT_UNIQUE}=${nodeName}`,
  ];
}

/**
 * Label selectors of the FirewallConfigurations the fabric on `nodeName` applies (liqotech/liqo
 * cmd/fabric/main.go with pkg/fabric/label.go and external-network/remapping/label.go): fabric +
 * all-nodes (e.g. `<cfg>-masquerade-bypass`), fabric + ip-mapping, fabric + single-node + unique =
 * this node (the gateway masquerade bypass `<node>` objects).
 */
export function fabricFirewallSelectors(nodeName: string): string[] {
  return [
    `${FW_CAT}=fabric,${FW_SUB}=all-nodes`,
    `${FW_CAT}=fabric,${FW_SUB}=ip-mapping`,
    `${FW_CAT}=fabric,${FW_SUB}=single-node,${FW_UNIQUE}=${nodeName}`,
  ];
}

/** RouteConfigurations the fabric applies: route-category fabric (e.g. `<internalfabric>-node-gw`). */
export function fabricRouteSelectors(): string[] {
  return [`${RT_CAT}=fabric`];
}

type Inf = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;

export interface GatewayRulesWatcherOptions {
  kubeConfig: KubeConfig;
  /** The peers served (Liqo's gateway serves one); undefined = every peer. */
  remoteClusterIds: readonly string[] | undefined;
  nodeName: string;
  /** undefined: all namespaces (Liqo's controllers list cluster-wide). */
  namespace?: string;
  debounceMs?: number;
  restartMs?: number;
  /** Other label selectors than the gateway's (the node agent: fabric*Selectors). */
  selectors?: { firewall: readonly string[]; routes: readonly string[] };
  onChange: (firewall: KubernetesObject[], routes: KubernetesObject[]) => void;
  onError?: (err: unknown) => void;
}

export class GatewayRulesWatcher {
  private readonly fw: Inf[] = [];
  private readonly rt: Inf[] = [];
  private readonly timers = new WatchTimers();
  private stopped = false;
  private started = false;

  constructor(private readonly opts: GatewayRulesWatcherOptions) {}

  /** Lists everything, emits once, then follows changes. */
  async start(): Promise<void> {
    const o = this.opts;
    const make = (kind: ResourceKind, sel: string, into: Inf[]): void => {
      const inf = makeInformer<KubernetesObject>(
        o.kubeConfig,
        collectionPath(kind, o.namespace),
        listFunction(o.kubeConfig, kind, o.namespace, sel),
        sel,
      ) as Inf;
      for (const ev of ['add', 'update', 'delete'] as const) inf.on(ev, () => this.schedule());
      inf.on('error', (err) => {
        if (this.stopped) return;
        o.onError?.(wrapApiError(`list/watch ${kind.plural} (${sel})`, err));
        this.timers.after(o.restartMs ?? 5000, () => {
          if (!this.stopped) void inf.start();
        });
      });
      into.push(inf);
    };
    for (const s of o.selectors?.firewall ?? gatewayFirewallSelectors(o.remoteClusterIds))
      make(FIREWALL_CONFIGURATIONS, s, this.fw);
    for (const s of o.selectors?.routes ?? gatewayRouteSelectors(o.remoteClusterIds, o.nodeName))
      make(ROUTE_CONFIGURATIONS, s, this.rt);
    await Promise.all([...this.fw, ...this.rt].map((i) => i.start()));
    this.started = true;
    this.emit();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clear();
    await Promise.all([...this.fw, ...this.rt].map((i) => i.stop()));
  }

  private schedule(): void {
    if (this.stopped || !this.started) return;
    this.timers.debounced(this.opts.debounceMs ?? 200, () => this.emit());
  }

  private emit(): void {
    if (this.stopped) return;
    this.opts.onChange(union(this.fw), union(this.rt));
  }
}

/** Objects of several caches, each once (by namespace/name), in name order. */
function union(infs: readonly Inf[]): KubernetesObject[] {
  const m = new Map<string, KubernetesObject>();
  for (const i of infs) for (const o of i.list()) m.set(`${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`, o);
  return [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map((e) => e[1]);
}
