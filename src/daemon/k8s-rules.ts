/**
 * `weft k8s --liqo-firewall` (gateway role): Liqo mode. The FirewallConfigurations and
 * RouteConfigurations Liqo addresses to gateways, watched with Liqo's label sets (cmd/gateway),
 * are the whole data-plane contract:
 * - every chain, filter AND nat, is attached to the gateway Router's hook points, and the
 *   Router's built-in remap/masquerade NAT is switched off (it runs steered, see
 *   src/router/steer.ts), so nothing is translated twice;
 * - the RouteConfigurations steer forwarding: the policy route's next hop picks the peer tunnel,
 *   a node's Geneve tunnel or the host; nodes' Geneve tunnels carry Liqo's interface names
 *   (InternalNode .spec.interface.gateway.name) so rules naming them match.
 * Node role (startGatewayRules with the fabric selectors and the node agent as target): the
 * fabric category for this node, as Liqo's fabric selects it (cmd/fabric): chains that concern
 * only TUN traffic on the agent's stages, the rest and the RouteConfigurations in the node's
 * kernel (splitFirewall and onRoutes, k8s-fabric.ts).
 * A bad object is refused with an error naming object, chain, rule and field (onProblem, and
 * onObjectProblem for a Kubernetes Event on it); its previous version stays in force.
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { GatewayRulesWatcher } from '../control/k8s/firewall-watch.js';
import type { Steering } from '../router/steer.js';
import { RulesAttachment, type HookTarget } from '../rules/attach.js';
import type { RulesDevices } from '../rules/devices.js';
import { RouteParseError, type RouteConfigSpec } from '../rules/routes.js';
import { buildSteering, parseRouteObjects } from '../rules/steering.js';

/** Liqo's interface names on the gateway (pkg/gateway/tunnel/const.go; the remap rules' default interface). */
export const LIQO_TUNNEL_IF = 'liqo-tunnel';
export const LIQO_DEFAULT_IF = 'eth0';

/** What Liqo mode steers: the gateway Router and its node tunnels by Liqo's interface names. */
export interface SteerTarget<G> {
  setSteering(s: Steering<G> | null): void;
  /** The node tunnels in force and their Geneve interface names. */
  nodes(): { tunnel: G; dev: string }[];
  /** True for a peer's in-tunnel address (a RouteConfiguration gw reached through the tunnel). */
  isPeerAddress(gw: string): boolean;
  /**
   * The gateway's own addresses per lane (masquerade, reject replies), IPv4 as unsigned 32-bit,
   * and the MTU of its routes (tcpmssclamp with value 0: nft `rt mtu`, src/rules/mss.ts).
   */
  addresses?(): { peerAddr: number; nodeAddr: number; hostAddr: number; pathMtu?: number };
}

export interface GatewayRulesOptions<G> {
  kubeConfig: KubeConfig;
  router: HookTarget;
  /** Liqo mode's routing (absent: rules attached, routing left to the Router's own tables). */
  steer?: SteerTarget<G>;
  remoteClusterIds: readonly string[] | undefined;
  nodeName: string;
  namespace?: string;
  /** The node agent's: fabric*Selectors (default: the gateway's label sets). */
  selectors?: { firewall: readonly string[]; routes: readonly string[] };
  /** Device names where the router names none (the node agent: its Geneve interface). */
  devices?: Partial<RulesDevices>;
  /** null when every object is accepted. */
  onProblem: (problem: string | null) => void;
  /** The RouteConfigurations in force after each change (the node role routes towards its gateways). */
  onRoutes?: (specs: readonly RouteConfigSpec[]) => void;
  /**
   * The node role: takes the watched objects and returns the FirewallConfigurations (or parts)
   * to enforce in process; the rest it puts into the node's kernel (k8s-fabric.ts).
   */
  splitFirewall?: (fw: KubernetesObject[], rt: KubernetesObject[]) => KubernetesObject[];
  /** Each refused object with its error (for a Warning Event on it). */
  onObjectProblem?: (obj: KubernetesObject, message: string) => void;
  onError: (err: unknown) => void;
}

export interface GatewayRules {
  readonly attachment: RulesAttachment;
  /** The RouteConfigurations in force, by namespace/name. */
  routes(): ReadonlyMap<string, RouteConfigSpec>;
  /** Re-resolves node tunnels and names (after the gateway's tunnels changed). */
  refresh(): void;
  stop(): Promise<void>;
}

const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? '?'}`;

export async function startGatewayRules<G>(o: GatewayRulesOptions<G>): Promise<GatewayRules> {
  // Lane names when the router does not name a device (a node tunnel without InternalNode name).
  const devices: RulesDevices = {
    peer: LIQO_TUNNEL_IF,
    node: 'liqo.geneve',
    host: LIQO_DEFAULT_IF,
    peerAddr: 0,
    nodeAddr: 0,
    hostAddr: 0,
    pathMtu: 1500,
    ...o.devices,
  };
  const attachment = new RulesAttachment(devices);
  attachment.attachTo(o.router);
  let specs: ReadonlyMap<string, RouteConfigSpec> = new Map();
  const steer = (): void => {
    const s = o.steer;
    if (s === undefined) return;
    const a = s.addresses?.();
    if (a !== undefined) attachment.setDevices({ ...devices, ...a, pathMtu: a.pathMtu ?? devices.pathMtu });
    s.setSteering(
      buildSteering(
        {
          devices: { tunnel: LIQO_TUNNEL_IF, host: LIQO_DEFAULT_IF },
          nodes: s.nodes(),
          isPeerAddress: (g) => s.isPeerAddress(g),
        },
        [...specs.values()],
      ),
    );
  };
  // Steered from the start: until the objects arrive nothing is translated nor routed by the old NAT.
  steer();
  const watcher = new GatewayRulesWatcher({
    kubeConfig: o.kubeConfig,
    remoteClusterIds: o.remoteClusterIds,
    nodeName: o.nodeName,
    ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
    ...(o.selectors !== undefined ? { selectors: o.selectors } : {}),
    onError: o.onError,
    onChange: (fw, rt) => {
      const fwErrors = attachment.update(o.splitFirewall !== undefined ? o.splitFirewall(fw, rt) : fw);
      const r = parseRouteObjects(rt, specs);
      specs = r.specs;
      steer();
      o.onRoutes?.([...specs.values()]);
      // List items may lack kind/apiVersion; an Event needs them.
      const typed = (x: KubernetesObject, kind: string): KubernetesObject => ({
        ...x,
        kind: x.kind ?? kind,
        apiVersion: x.apiVersion ?? 'networking.liqo.io/v1beta1',
      });
      const byKey = new Map(
        [...fw.map((x) => typed(x, 'FirewallConfiguration')), ...rt.map((x) => typed(x, 'RouteConfiguration'))].map(
          (x) => [`${x.kind}:${keyOf(x)}`, x] as const,
        ),
      );
      const problems: string[] = [];
      for (const e of [...fwErrors, ...r.errors]) {
        problems.push(e.message);
        const kind = e instanceof RouteParseError ? 'RouteConfiguration' : 'FirewallConfiguration';
        const obj = byKey.get(`${kind}:${e.object.includes('/') ? e.object : `/${e.object}`}`);
        if (obj !== undefined) o.onObjectProblem?.(obj, e.message);
      }
      o.onProblem(problems.length === 0 ? null : problems.join('; '));
    },
  });
  // Conntrack housekeeping (the data plane's clock is Date.now by default, as here).
  const housekeeping = setInterval(() => attachment.expire(Date.now()), 1000);
  housekeeping.unref();
  const undo = (): void => {
    clearInterval(housekeeping);
    attachment.detachFrom(o.router);
    o.steer?.setSteering(null);
  };
  try {
    await watcher.start();
  } catch (e) {
    undo();
    throw e;
  }
  return {
    attachment,
    routes: () => specs,
    refresh: steer,
    async stop() {
      await watcher.stop();
      undo();
    },
  };
}
