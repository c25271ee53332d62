/**
 * Builds (and removes) the plan's network namespaces: veth links, bridges, addresses, routes and
 * forwarding, so that only the Weft processes are missing for two working clusters.
 *
 * What the kernel does and what Weft does:
 * - pod → node: a veth; the node namespace forwards (ip_forward=1) and has a /32 route per pod.
 *   Routes to the remote CIDRs via the node agent's TUN are installed by the node agent
 *   (NodeAgent adds them for `gateways[].remoteCIDRs`), not here.
 * - node ↔ gateway: a veth per node into a bridge in the gateway namespace (the underlay).
 * - gateway ↔ gateway: one veth ("WAN"). No namespace has a default route, so nothing can leave
 *   the machine; addresses are private (10/8, 172.16/12) or benchmarking (198.18/15) ranges.
 */
import { deleteNamespaces, inNs, runCommand } from './host.js';
import { planNamespaces, type DemoCluster, type DemoPlan } from './plan.js';

/** What a pod routes to its node: every 10/8 address (pods, remapped peers, internal CIDR). */
export const POD_ROUTE = '10.0.0.0/8';

/** Progress callback: one call per step. */
export type StepReporter = (what: string) => void;

async function ip(args: readonly string[]): Promise<void> {
  await runCommand(['ip', ...args]);
}

async function sysctl(ns: string, settings: Record<string, string>): Promise<void> {
  const args = Object.entries(settings).map(([k, v]) => `${k}=${v}`);
  await runCommand(inNs(ns, ['sysctl', '-q', '-w', ...args]));
}

/** veth pair with one end in each namespace (names are per namespace), both up. */
async function vethPair(nsA: string, ifA: string, nsB: string, ifB: string, mtu: number): Promise<void> {
  await ip([
    'link',
    'add',
    ifA,
    'mtu',
    String(mtu),
    'netns',
    nsA,
    'type',
    'veth',
    'peer',
    'name',
    ifB,
    'mtu',
    String(mtu),
    'netns',
    nsB,
  ]);
}

async function up(ns: string, ifName: string): Promise<void> {
  await ip(['-n', ns, 'link', 'set', ifName, 'up']);
}

async function addr(ns: string, ifName: string, cidr: string): Promise<void> {
  await ip(['-n', ns, 'addr', 'add', cidr, 'dev', ifName]);
}

export interface BuildOptions {
  /** MTU of every veth (default 1500: pods discover the tunnel MTU through PMTU / MSS clamping). */
  mtu?: number;
}

/**
 * Creates every namespace of the plan and wires them. Throws HostCommandError on the first
 * failure; the caller removes what exists with `destroyTopology` (also on failure).
 */
export async function buildTopology(
  plan: DemoPlan,
  report: StepReporter = () => {},
  opts: BuildOptions = {},
): Promise<void> {
  const mtu = opts.mtu ?? 1500;
  const all = planNamespaces(plan);
  report(`creating ${all.length} network namespaces (${plan.prefix}-a-*, ${plan.prefix}-b-*)`);
  for (const ns of all) {
    await ip(['netns', 'add', ns]);
    await up(ns, 'lo');
  }

  report(`WAN: veth ${plan.a.gatewayNs} ${plan.a.wanAddress} ⇄ ${plan.b.gatewayNs} ${plan.b.wanAddress}`);
  await vethPair(plan.a.gatewayNs, plan.a.wanIf, plan.b.gatewayNs, plan.b.wanIf, mtu);
  for (const c of [plan.a, plan.b]) {
    await addr(c.gatewayNs, c.wanIf, `${c.wanAddress}/${plan.wanPrefixLen}`);
    await up(c.gatewayNs, c.wanIf);
  }

  for (const c of [plan.a, plan.b]) {
    report(
      `cluster ${c.label}: underlay bridge ${c.gatewayUnderlay}/${c.underlayPrefixLen}, nodes ${c.nodes.map((n) => n.underlay).join(', ')}`,
    );
    await buildUnderlay(c, mtu);
    report(`cluster ${c.label}: pods ${c.pods.map((p) => `${p.name} ${p.ip}`).join(', ')}`);
    await buildPods(plan, c, mtu);
  }
}

async function buildUnderlay(c: DemoCluster, mtu: number): Promise<void> {
  const gw = c.gatewayNs;
  await ip(['-n', gw, 'link', 'add', c.bridgeIf, 'mtu', String(mtu), 'type', 'bridge']);
  await addr(gw, c.bridgeIf, `${c.gatewayUnderlay}/${c.underlayPrefixLen}`);
  await up(gw, c.bridgeIf);
  for (const n of c.nodes) {
    await vethPair(n.ns, n.underlayIf, gw, n.gatewayPortIf, mtu);
    await ip(['-n', gw, 'link', 'set', n.gatewayPortIf, 'master', c.bridgeIf]);
    await up(gw, n.gatewayPortIf);
    await addr(n.ns, n.underlayIf, `${n.underlay}/${c.underlayPrefixLen}`);
    await up(n.ns, n.underlayIf);
  }
}

async function buildPods(plan: DemoPlan, c: DemoCluster, mtu: number): Promise<void> {
  for (const n of c.nodes) {
    // The node routes between its pods, its TUN and the underlay.
    await sysctl(n.ns, {
      'net.ipv4.ip_forward': '1',
      'net.ipv4.conf.all.rp_filter': '0',
      'net.ipv4.conf.default.rp_filter': '0',
    });
    for (const p of n.pods) {
      await vethPair(p.ns, p.podIf, n.ns, p.nodeIf, mtu);
      await addr(p.ns, p.podIf, `${p.ip}/32`);
      await up(p.ns, p.podIf);
      await ip(['-n', p.ns, 'route', 'add', `${plan.podGateway}/32`, 'dev', p.podIf, 'scope', 'link']);
      // Not a default route: only 10/8 (local pods, remapped peers, internal CIDR) goes to the node.
      await ip(['-n', p.ns, 'route', 'add', POD_ROUTE, 'via', plan.podGateway, 'dev', p.podIf]);
      await addr(n.ns, p.nodeIf, `${plan.podGateway}/32`);
      await up(n.ns, p.nodeIf);
      await ip(['-n', n.ns, 'route', 'add', `${p.ip}/32`, 'dev', p.nodeIf]);
    }
  }
}

/** Deletes every namespace of the plan that exists (killing what runs inside). Returns the names removed. */
export async function destroyTopology(plan: DemoPlan): Promise<string[]> {
  return deleteNamespaces(planNamespaces(plan));
}
