/**
 * Liqo's health check over each Geneve tunnel (node ↔ gateway), the parts that are decisions:
 * its defaults, which tunnels a process checks from which address, when a GeneveTunnel status
 * is written, and what a gateway's Connection says when its Geneve links are down. Pure: no
 * sockets, no clocks (`now` in). The PING/PONG exchange itself is the in-tunnel check's
 * (conncheck.ts: same JSON messages, same loss rule), run on another port.
 *
 * Liqo (pull requests 3277 and 3359, networking.liqo.io GeneveTunnel status): the fabric pod of
 * each node sends a PING every interval from the node's inner Geneve address
 * (InternalNode spec.interface.node.ip) to the gateway's (InternalFabric
 * spec.interface.gateway.ip) on UDP 54321, through the tunnel; the gateway's geneve container
 * answers with a PONG. The fabric writes `GeneveTunnel.status` — `value` Connected on a PONG,
 * Error after `lossThreshold` intervals without one, and `latency` {value, timestamp} — through
 * the status subresource, at most once per update interval unless the value changes. Helm
 * defaults: interval 10 s, loss threshold 5, update interval 10 s.
 *
 * Weft runs the same exchange from both ends: the node agent as Liqo's fabric (sender and status
 * writer, also answering PINGs), the gateway answering PINGs and also sending its own to each
 * node's inner address (Liqo's fabric answers PINGs from anywhere), so the gateway knows its
 * links without reading the API: it reports them in `weft show` and turns its Connection to
 * Error when every Geneve link that answered has gone down (geneveLinksDownReason).
 */
import type { WeftConfig } from './config.js';
import type { ConnectionValue, PeerCheckStatus } from './conncheck.js';

/** Liqo's Helm value networking.fabric.config.ping.port (the fabric's and the gateway's --ping-port). */
export const GENEVE_CHECK_PORT = 54321;
/** Liqo's Helm value networking.fabric.config.ping.interval. */
export const GENEVE_CHECK_INTERVAL_MS = 10_000;
/** Liqo's Helm value networking.fabric.config.ping.lossThreshold. */
export const GENEVE_CHECK_LOSS_THRESHOLD = 5;
/** Liqo's Helm value networking.fabric.config.ping.updateStatusInterval. */
export const GENEVE_STATUS_UPDATE_INTERVAL_MS = 10_000;

export interface GeneveCheckTarget {
  /** The tunnel's name in `weft show` (gateway: the node; node agent: the gateway / InternalFabric). */
  readonly clusterId: string;
  /** The far end's inner Geneve address. */
  readonly address: string;
}

/**
 * The tunnels to check, grouped by our inner address (the socket's bind address): a gateway
 * checks each node tunnel from the tunnel's local internal address to the node's; a node agent
 * each gateway from its own internal address to the gateway's. Addresses that are not IPv4 are
 * left out (Liqo's inner addresses are IPv4).
 */
export function geneveCheckTargets(config: WeftConfig): Map<string, GeneveCheckTarget[]> {
  const out = new Map<string, GeneveCheckTarget[]>();
  const add = (local: string, t: GeneveCheckTarget): void => {
    if (local.includes(':') || t.address.includes(':')) return;
    const list = out.get(local) ?? [];
    if (!list.some((x) => x.clusterId === t.clusterId)) list.push(t);
    out.set(local, list);
  };
  if (config.role === 'gateway')
    for (const t of config.geneve.tunnels)
      add(t.localInternalAddress, { clusterId: t.nodeName, address: t.remoteInternalAddress });
  else
    for (const g of config.node.gateways)
      add(g.localInternalAddress, { clusterId: g.name, address: g.gatewayInternalAddress });
  return out;
}

/** What was last written to a GeneveTunnel's status (as read back or written by us). */
export interface GeneveStatusWritten {
  value: string | undefined;
  /** ms of status.latency.timestamp; undefined when absent (Liqo's zero time). */
  latencyAt: number | undefined;
}

/**
 * Whether the check's current view is to be written (Liqo's fabric's rule): never while still
 * Connecting (Liqo writes only Connected and Error); always when the value differs from the
 * written one; for Connected, also when the written latency is older than `updateIntervalMs`.
 */
export function geneveStatusWriteDue(
  written: GeneveStatusWritten,
  value: ConnectionValue,
  now: number,
  updateIntervalMs: number,
): boolean {
  if (value === 'Connecting') return false;
  if (value !== written.value) return true;
  return value === 'Connected' && (written.latencyAt === undefined || now - written.latencyAt > updateIntervalMs);
}

/**
 * A gateway's Geneve links: the reason its Connection says Error when every link that ever
 * answered the check has stopped answering and none is up; `null` otherwise. A link that never
 * answered gives no verdict (a node whose fabric predates Liqo's Geneve check never answers), so
 * a gateway none of whose nodes ever answered keeps its Connection from the in-tunnel check.
 */
export function geneveLinksDownReason(
  links: readonly { name: string; status: PeerCheckStatus }[],
  lossWindowMs: number,
): string | null {
  const known = links.filter((l) => l.status.lastReplyAt !== undefined);
  if (known.length === 0 || links.some((l) => l.status.value === 'Connected')) return null;
  if (known.some((l) => l.status.value !== 'Error')) return null;
  const names = known.map((l) => l.name).join(', ');
  return `every Geneve tunnel to the nodes is down (${names}: no reply to the Geneve check for ${Math.round(lossWindowMs / 1000)} s)`;
}
