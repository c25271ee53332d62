/**
 * RouteConfigurations → a router Steering (src/router/steer.ts): every rule and route installed
 * as Liqo's route controller installs them in the kernel (routes.ts), each route's next hop
 * resolved to the lane it leaves by, with Liqo's device names:
 * - dev = the tunnel (liqo-tunnel), or no dev and gw = a peer's in-tunnel address (Liqo's
 *   external-network routes: gw = the remote interface IP 169.254.18.x) → the peer lane;
 * - dev = the host's interface (eth0) → the host lane;
 * - any other dev (a node's Geneve interface, `liqo.` + 10 random characters), or no dev and a
 *   gw that is not a peer's (a node's internal address: pod routes, fwmark routes) → the node
 *   lane; the tunnel is found per packet by gw (or by the destination for on-link routes).
 * Pure control plane: builds a new Steering per rule set (swapped in by the caller).
 */
import { formatPrefix } from '../packet/addr.js';
import { LANE_HOST, LANE_NODE, LANE_PEER, SteerHop, Steering, type SteerDevices } from '../router/steer.js';
import {
  RouteParseError,
  installRouteConfigurations,
  parseRouteConfiguration,
  type RouteConfigSpec,
} from './routes.js';

export interface SteeringInput<G> {
  readonly devices: SteerDevices;
  /** The node tunnels and their Geneve interface names (InternalNode .spec.interface.gateway.name). */
  readonly nodes: readonly { readonly tunnel: G; readonly dev: string }[];
  /** True for a peer's in-tunnel address (a gw reached through the tunnel). */
  readonly isPeerAddress: (gw: string) => boolean;
}

export function hopFor(
  devices: SteerDevices,
  isPeerAddress: (gw: string) => boolean,
  dev: string | undefined,
  gw: string | undefined,
): SteerHop {
  if (dev === devices.tunnel || (dev === undefined && gw !== undefined && isPeerAddress(gw)))
    return new SteerHop(LANE_PEER, dev ?? '', gw);
  if (dev === devices.host) return new SteerHop(LANE_HOST, dev, gw);
  return new SteerHop(LANE_NODE, dev ?? '', gw);
}

/** A Steering with `specs` installed (in the given order, as the kernel's default preferences depend on it). */
export function buildSteering<G>(input: SteeringInput<G>, specs: readonly RouteConfigSpec[]): Steering<G> {
  const st = new Steering<G>(input.devices);
  for (const n of input.nodes) st.setNodeDevice(n.tunnel, n.dev);
  installRouteConfigurations(
    st.policy,
    specs,
    (name) => st.iifId(name),
    (h) => hopFor(input.devices, input.isPeerAddress, h.dev, h.gw),
  );
  return st;
}

/**
 * Parses RouteConfiguration objects; one that fails keeps its previously accepted version
 * (`previous`, by namespace/name) and its error is returned. Sorted by namespace/name.
 */
export function parseRouteObjects(
  objects: readonly unknown[],
  previous: ReadonlyMap<string, RouteConfigSpec>,
): { specs: Map<string, RouteConfigSpec>; errors: RouteParseError[] } {
  const specs = new Map<string, RouteConfigSpec>();
  const errors: RouteParseError[] = [];
  const keyed = objects
    .map((o) => {
      const md = (o as { metadata?: { namespace?: string; name?: string } } | null)?.metadata;
      return { k: `${md?.namespace ?? ''}/${md?.name ?? '?'}`, o };
    })
    .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
  for (const { k, o } of keyed) {
    try {
      specs.set(k, parseRouteConfiguration(o));
    } catch (e) {
      if (!(e instanceof RouteParseError)) throw e;
      errors.push(e);
      const prev = previous.get(k);
      if (prev !== undefined) specs.set(k, prev);
    }
  }
  return { specs, errors };
}

/**
 * The node role: the destinations of the fabric RouteConfigurations' routes that lead towards a
 * gateway — out of one of `nodeDevs` (the node-side Geneve interfaces) or via one of
 * `gatewayAddrs` (gateways' internal addresses). Sorted, each once.
 */
export function fabricRouteDestinations(
  specs: Iterable<RouteConfigSpec>,
  nodeDevs: ReadonlySet<string>,
  gatewayAddrs: ReadonlySet<string>,
): string[] {
  const out = new Set<string>();
  for (const s of specs) {
    for (const r of s.rules) {
      for (const x of r.routes) {
        if (
          (x.hop.dev !== undefined && nodeDevs.has(x.hop.dev)) ||
          (x.hop.gw !== undefined && gatewayAddrs.has(x.hop.gw))
        )
          out.add(formatPrefix(x.dst));
      }
    }
  }
  return [...out].sort();
}
