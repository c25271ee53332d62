/**
 * Liqo mode glue for `weft k8s` (kept out of k8s.ts): the running gateway as a SteerTarget —
 * its node tunnels named by Liqo's interface names (InternalNode .spec.interface.gateway.name,
 * `liqo.` + 10 random characters, from pkg/liqo-controller-manager/networking/internal-network/
 * interface.go) and its peers' in-tunnel addresses as the gw of Liqo's external routes.
 */
import { fabricFirewallSelectors, fabricRouteSelectors } from '../control/k8s/firewall-watch.js';
import type { NodeConfig } from '../control/config.js';
import type { InternalNode, LiqoResources } from '../control/k8s/resources.js';
import type { Gateway } from '../gateway/gateway.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import { ipToNumber } from '../rules/model.js';
import type { RouteConfigSpec } from '../rules/routes.js';
import { fabricRouteDestinations } from '../rules/steering.js';
import { formatPrefix, parsePrefix } from '../packet/addr.js';
import type { SteerTarget } from './k8s-rules.js';

export function gatewaySteerTarget(
  gw: Gateway,
  internalNodes: () => readonly InternalNode[],
): SteerTarget<GeneveTunnel> {
  return {
    setSteering: (s) => gw.router.setSteering(s),
    nodes: () => {
      const names = new Map<string, string>();
      for (const n of internalNodes()) {
        const dev = n.spec?.interface?.gateway?.name;
        if (n.metadata?.name !== undefined && typeof dev === 'string' && dev !== '') names.set(n.metadata.name, dev);
      }
      return gw.nodeTunnels().flatMap((t) => {
        const dev = names.get(t.nodeName);
        return dev === undefined ? [] : [{ tunnel: t.tunnel, dev }];
      });
    },
    isPeerAddress: (g) => gw.tunnelAddresses().peers.some((p) => p.remote === g),
    // Towards a peer: our in-tunnel address; towards nodes and the host: the internal address.
    // Every lane's route MTU is the tunnel's (wireguard.mtu, Liqo's liqo-tunnel MTU): the gateway
    // sizes its TUN so, and Liqo gives its Geneve interfaces the same chart MTU (InternalFabric .spec.mtu).
    addresses: () => {
      const internal = ipToNumber(gw.current.geneve.tunnels[0]?.localInternalAddress ?? '') ?? 0;
      return {
        peerAddr: ipToNumber(gw.tunnelAddresses().peers[0]?.local ?? '') ?? 0,
        nodeAddr: internal,
        hostAddr: internal,
        pathMtu: gw.current.wireguard.mtu,
      };
    },
  };
}

/**
 * The node role's selection (Liqo's fabric: cmd/fabric) and devices: the node-side Geneve
 * interface of the first InternalFabric naming one (.spec.interface.node.name), and the route MTU
 * of traffic through the agent, its TUN's (tcpmssclamp with value 0: nft `rt mtu`).
 */
export function nodeRulesOptions(
  nodeName: string,
  res: LiqoResources | undefined,
  tunMtu: number,
): {
  nodeName: string;
  selectors: { firewall: string[]; routes: string[] };
  devices: { node?: string; pathMtu: number };
} {
  const dev = res?.internalFabrics
    .map((f) => f.spec?.interface?.node?.name)
    .find((n): n is string => typeof n === 'string' && n !== '');
  return {
    nodeName,
    selectors: { firewall: fabricFirewallSelectors(nodeName), routes: fabricRouteSelectors() },
    devices: dev === undefined ? { pathMtu: tunMtu } : { node: dev, pathMtu: tunMtu },
  };
}

/**
 * Liqo mode, node role: what each gateway carries comes from the fabric RouteConfigurations, not
 * from InternalFabric.spec.remoteCIDRs — a gateway's remoteCIDRs (the node kernel's routes into
 * the TUN and the agent's choice of Geneve tunnel) become the destinations routed towards it:
 * via its internal address, or out of its InternalFabric's node-side interface (`nodeDevs`:
 * gateway name = InternalFabric name → interface). Its own internal address (always routed, the
 * tunnel's far end) is left out. Before any RouteConfiguration arrives a gateway carries nothing.
 */
export function liqoNodeConfig(
  cfg: NodeConfig,
  specs: readonly RouteConfigSpec[],
  nodeDevs: ReadonlyMap<string, string>,
): NodeConfig {
  const gateways = cfg.node.gateways.map((g) => {
    const dev = nodeDevs.get(g.name);
    const self = formatPrefix(
      parsePrefix(`${g.gatewayInternalAddress}/${g.gatewayInternalAddress.includes(':') ? 128 : 32}`),
    );
    const remoteCIDRs = fabricRouteDestinations(
      specs,
      new Set(dev === undefined ? [] : [dev]),
      new Set([g.gatewayInternalAddress]),
    ).filter((c) => c !== self);
    return { ...g, remoteCIDRs };
  });
  return { ...cfg, node: { ...cfg.node, gateways } };
}

/** InternalFabric name → its node-side interface name (.spec.interface.node.name), for liqoNodeConfig. */
export function fabricNodeDevices(res: LiqoResources | undefined): Map<string, string> {
  const m = new Map<string, string>();
  for (const f of res?.internalFabrics ?? []) {
    const dev = f.spec?.interface?.node?.name;
    if (f.metadata?.name !== undefined && typeof dev === 'string' && dev !== '') m.set(f.metadata.name, dev);
  }
  return m;
}
