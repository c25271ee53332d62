/**
 * Liqo mode glue for `weft k8s` (kept out of k8s.ts): the running gateway as a SteerTarget —
 * its node tunnels named by Liqo's interface names (InternalNode .spec.interface.gateway.name,
 * `liqo.` + 10 random characters, from pkg/liqo-controller-manager/networking/internal-network/
 * interface.go) and its peers' in-tunnel addresses as the gw of Liqo's external routes.
 */
import { fabricFirewallSelectors, fabricRouteSelectors } from '../../control/k8s/firewall-watch.js';
import type { InternalNode, LiqoResources } from '../../control/k8s/resources.js';
import type { Gateway } from '../../gateway/gateway.js';
import type { GeneveTunnel } from '../../geneve/table.js';
import { ipToNumber } from '../../rules/model.js';
import type { SteerTarget } from './k8s-rules.js';

export function gatewaySteerTarget(gw: Gateway, internalNodes: () => readonly InternalNode[]): SteerTarget<GeneveTunnel> {
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
    addresses: () => {
      const internal = ipToNumber(gw.current.geneve.tunnels[0]?.localInternalAddress ?? '') ?? 0;
      return { peerAddr: ipToNumber(gw.tunnelAddresses().peers[0]?.local ?? '') ?? 0, nodeAddr: internal, hostAddr: internal };
    },
  };
}

/**
 * The node role's selection (Liqo's fabric: cmd/fabric) and device name: the node-side Geneve
 * interface of the first InternalFabric naming one (.spec.interface.node.name).
 */
export function nodeRulesOptions(nodeName: string, res: LiqoResources | undefined): { nodeName: string; selectors: { firewall: string[]; routes: string[] }; devices: { node: string } | undefined } {
  const dev = res?.internalFabrics.map((f) => f.spec?.interface?.node?.name).find((n): n is string => typeof n === 'string' && n !== '');
  return { nodeName, selectors: { firewall: fabricFirewallSelectors(nodeName), routes: fabricRouteSelectors() }, devices: dev === undefined ? undefined : { node: dev } };
}
