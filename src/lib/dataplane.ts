/**
 * Library entry points for the two data planes `weft up` runs: a Liqo gateway (Geneve to the
 * nodes, NAT, WireGuard to the peers, a local TUN) and a node agent (TUN + routes + Geneve to
 * the gateways). Both need CAP_NET_ADMIN. The modules are loaded on first use (they bring the
 * TUN/UDP native code), so importing 'weft' stays cheap.
 */
import type { GatewayConfig, NodeConfig } from '../control/config.js';
import type { Gateway, GatewayOptions } from '../gateway/gateway.js';
import type { NodeAgent, NodeAgentOptions } from '../node/agent.js';

/**
 * Starts a gateway for a validated configuration (`loadConfig` / `parseConfig`, role gateway).
 * Read its state with `gateway.stats()` (peers, tunnels, NAT, drops by reason, queues); it also
 * implements the Prometheus StatsSource (peers/drops/natEntries/queueDepths). Apply a reload
 * with `gateway.apply(diffConfig(gateway.current, next), next)`; stop with `gateway.stop()`.
 * @throws TunPermissionError without CAP_NET_ADMIN, and the typed errors of Gateway.start.
 */
export async function startGateway(config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> {
  if (config?.role !== 'gateway') throw new TypeError('startGateway needs a configuration with role: gateway');
  const { Gateway: G } = await import('../gateway/gateway.js');
  return G.start(config, options);
}

/**
 * Starts a node agent for a validated configuration (role node): `agent.stats()`,
 * `agent.apply(ops, next)`, `agent.stop()` (removes the routes and addresses it added).
 * @throws TunPermissionError without CAP_NET_ADMIN, RouteCommandError when `ip` fails.
 */
export async function startNodeAgent(config: NodeConfig, options: NodeAgentOptions = {}): Promise<NodeAgent> {
  if (config?.role !== 'node') throw new TypeError('startNodeAgent needs a configuration with role: node');
  const { NodeAgent: N } = await import('../node/agent.js');
  return N.start(config, options);
}
