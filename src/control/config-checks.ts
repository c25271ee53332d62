/**
 * Cross-field checks of a configuration that passed its schema: CIDRs that must not overlap,
 * names and keys that must be unique, addresses that must lie inside a range, remappings that
 * must be 1:1, in-tunnel addresses outside every routed CIDR. Apart from the schemas because
 * each check relates several fields (and reports on the later one); apart from config.ts's entry
 * point so that the checks read only the schemas' output, never the model they guard.
 */
import {
  formatAddress,
  parseAddress,
  parsePrefix,
  prefixContains,
  prefixContainsPrefix,
  prefixesOverlap,
  type Prefix,
} from '../packet/addr.js';
import { LIQO_TUNNEL_SERVER_ADDRESS } from './tunnel-address.js';
import type { RawGateway, RawNode } from './config-schema.js';

/** Where the checks report: one call per problem, with the field path as an array. */
export interface IssueSink {
  issue(path: PropertyKey[], message: string): void;
}

/** Format a zod/our path array as `a.b[2].c`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out;
}

/** A peer after normalisation: `remapped` completed from `remote` where it was left out. */
export type CompletedPeer = Omit<RawGateway['peers'][number], 'remapped'> & {
  remapped: { podCIDRs: string[]; externalCIDRs: string[] };
};

/** A gateway configuration as the checks read it (config.ts's GatewayConfig is one). */
export type CheckedGateway = Omit<RawGateway, 'peers'> & { peers: CompletedPeer[] };

interface NamedCidr {
  path: PropertyKey[];
  what: string;
  text: string;
  cidr: Prefix;
}

function named(path: PropertyKey[], what: string, text: string): NamedCidr {
  return { path, what, text, cidr: parsePrefix(text, true) };
}

function localCidrs(cluster: RawGateway['cluster']): NamedCidr[] {
  const out: NamedCidr[] = [];
  cluster.podCIDRs.forEach((t, i) => out.push(named(['cluster', 'podCIDRs', i], 'local pod CIDR', t)));
  cluster.serviceCIDRs.forEach((t, i) => out.push(named(['cluster', 'serviceCIDRs', i], 'local service CIDR', t)));
  out.push(named(['cluster', 'externalCIDR'], 'local external CIDR', cluster.externalCIDR));
  out.push(named(['cluster', 'internalCIDR'], 'local internal CIDR', cluster.internalCIDR));
  return out;
}

/**
 * Report entries of `set` from index `from` on that overlap an earlier entry: one issue per
 * entry, naming everything it overlaps (each pair is reported once, on the later entry).
 */
function checkNoOverlap(ctx: IssueSink, set: NamedCidr[], from = 0): void {
  for (let i = from; i < set.length; i++) {
    const b = set[i]!;
    const hits = set.slice(0, i).filter((a) => prefixesOverlap(a.cidr, b.cidr));
    if (hits.length === 0) continue;
    const list = hits.map((a) => `${a.what} ${a.text} (at ${formatPath(a.path)})`).join(', ');
    ctx.issue(
      b.path,
      `${b.what} ${b.text} overlaps ${list}; choose a non-overlapping prefix (remap the peer if its real CIDR collides)`,
    );
  }
}

function checkUnique<T>(
  ctx: IssueSink,
  items: readonly T[],
  key: (t: T) => string | number,
  path: (i: number) => PropertyKey[],
  what: string,
): void {
  const seen = new Map<string | number, number>();
  items.forEach((it, i) => {
    const k = key(it);
    const prev = seen.get(k);
    if (prev !== undefined)
      ctx.issue(path(i), `duplicate ${what} ${JSON.stringify(k)} (also at index ${prev}); must be unique`);
    else seen.set(k, i);
  });
}

function checkInside(
  ctx: IssueSink,
  path: PropertyKey[],
  addr: string,
  outer: Prefix,
  outerText: string,
  what: string,
): void {
  const a = parseAddress(addr);
  if (a.length !== outer.addr.length || !prefixContains(outer, a, 0))
    ctx.issue(path, `${what} ${addr} must lie inside ${outerText}`);
}

export function validateGateway(ctx: IssueSink, c: CheckedGateway): void {
  const local = localCidrs(c.cluster);
  checkNoOverlap(ctx, local);
  checkTunnelPorts(ctx, c);

  checkUnique(
    ctx,
    c.peers,
    (p) => p.name,
    (i) => ['peers', i, 'name'],
    'peer name',
  );
  checkUnique(
    ctx,
    c.peers,
    (p) => p.clusterId,
    (i) => ['peers', i, 'clusterId'],
    'peer clusterId',
  );
  checkUnique(
    ctx,
    c.peers,
    (p) => p.publicKey,
    (i) => ['peers', i, 'publicKey'],
    'peer publicKey',
  );
  if (c.cluster.id !== '') {
    c.peers.forEach((p, i) => {
      if (p.clusterId === c.cluster.id)
        ctx.issue(['peers', i, 'clusterId'], `a peer cannot have the local cluster ID ${p.clusterId}`);
    });
  }

  // 1:1 prefix translation: remapped[i] ↔ remote[i], same family and size.
  const remappedAll: NamedCidr[] = [];
  c.peers.forEach((p, i) => {
    for (const kind of ['podCIDRs', 'externalCIDRs'] as const) {
      const real = p.remote[kind];
      const rem = p.remapped[kind];
      if (real.length !== rem.length) {
        ctx.issue(
          ['peers', i, 'remapped', kind],
          `expected ${real.length} entries, one per remote.${kind} entry (1:1 prefix remapping); got ${rem.length}`,
        );
        continue;
      }
      rem.forEach((t, j) => {
        const a = parsePrefix(real[j]!, true);
        const b = parsePrefix(t, true);
        if (a.family !== b.family || a.prefixLen !== b.prefixLen) {
          ctx.issue(
            ['peers', i, 'remapped', kind, j],
            `remapped ${t} must have the same family and prefix length as remote.${kind}[${j}] ${real[j]}`,
          );
        }
        remappedAll.push(named(['peers', i, 'remapped', kind, j], `peer ${p.name} remapped CIDR`, t));
      });
    }
  });
  // No overlap between local CIDRs and any remapped peer CIDR, nor between peers.
  checkNoOverlap(ctx, [...local, ...remappedAll], local.length);
  validateTunnelAddresses(ctx, c, local, remappedAll);

  // Geneve towards nodes.
  const internal = parsePrefix(c.cluster.internalCIDR, true);
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.id,
    (i) => ['geneve', 'tunnels', i, 'id'],
    'tunnel id (VNI)',
  );
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.nodeName,
    (i) => ['geneve', 'tunnels', i, 'nodeName'],
    'tunnel nodeName',
  );
  checkUnique(
    ctx,
    c.geneve.tunnels,
    (t) => t.remoteInternalAddress,
    (i) => ['geneve', 'tunnels', i, 'remoteInternalAddress'],
    'remoteInternalAddress',
  );
  c.geneve.tunnels.forEach((t, i) => {
    checkInside(
      ctx,
      ['geneve', 'tunnels', i, 'localInternalAddress'],
      t.localInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    checkInside(
      ctx,
      ['geneve', 'tunnels', i, 'remoteInternalAddress'],
      t.remoteInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
  });
  const nodeAddrs = new Set(c.geneve.tunnels.map((t) => t.remoteInternalAddress));
  checkUnique(
    ctx,
    c.geneve.podRoutes,
    (r) => r.podCIDR,
    (i) => ['geneve', 'podRoutes', i, 'podCIDR'],
    'podRoute podCIDR',
  );
  c.geneve.podRoutes.forEach((r, i) => {
    if (!nodeAddrs.has(r.nodeInternalAddress)) {
      ctx.issue(
        ['geneve', 'podRoutes', i, 'nodeInternalAddress'],
        `${r.nodeInternalAddress} is not the remoteInternalAddress of any geneve.tunnels entry`,
      );
    }
    const pc = parsePrefix(r.podCIDR, true);
    if (
      c.cluster.podCIDRs.length > 0 &&
      !c.cluster.podCIDRs.some((t) => prefixContainsPrefix(parsePrefix(t, true), pc))
    ) {
      ctx.issue(
        ['geneve', 'podRoutes', i, 'podCIDR'],
        `${r.podCIDR} must lie inside one of cluster.podCIDRs (${c.cluster.podCIDRs.join(', ')})`,
      );
    }
  });

  // Liqo IP resources: the external address must be in the local external CIDR, not its first
  // address (reserved as the SNAT source for host traffic), and unique.
  const ext = parsePrefix(c.cluster.externalCIDR, true);
  const first = formatAddress(ext.addr);
  checkUnique(
    ctx,
    c.ipMappings,
    (m) => m.externalAddress,
    (i) => ['ipMappings', i, 'externalAddress'],
    'externalAddress',
  );
  c.ipMappings.forEach((m, i) => {
    checkInside(
      ctx,
      ['ipMappings', i, 'externalAddress'],
      m.externalAddress,
      ext,
      c.cluster.externalCIDR,
      'externalAddress',
    );
    if (m.externalAddress === first) {
      ctx.issue(
        ['ipMappings', i, 'externalAddress'],
        `${first} is the first address of the external CIDR, reserved as the SNAT source`,
      );
    }
  });
}

/**
 * Explicit in-tunnel addresses (wireguard.tunnelAddress, peers[].tunnelAddress): they travel
 * without NAT, so they must not lie in any CIDR the gateway routes or translates; peers' must be
 * distinct, differ from ours and have our tunnel address's family. Defaults (Liqo's
 * 169.254.18.1/.2) are not checked here: src/control/tunnel-address.ts leaves a peer whose
 * default collides out of the check and says which field to set.
 */
function validateTunnelAddresses(
  ctx: IssueSink,
  c: CheckedGateway,
  local: readonly NamedCidr[],
  remapped: readonly NamedCidr[],
): void {
  const routed: NamedCidr[] = [...local, ...remapped];
  c.peers.forEach((p, i) => {
    for (const kind of ['podCIDRs', 'externalCIDRs'] as const) {
      p.remote[kind].forEach((t, j) =>
        routed.push(named(['peers', i, 'remote', kind, j], `peer ${p.name} real CIDR`, t)),
      );
    }
  });
  const check = (path: PropertyKey[], addr: string): void => {
    const a = parseAddress(addr);
    const hit = routed.find((r) => r.cidr.addr.length === a.length && prefixContains(r.cidr, a, 0));
    if (hit !== undefined) {
      ctx.issue(
        path,
        `tunnel address ${addr} lies inside ${hit.what} ${hit.text} (at ${formatPath(hit.path)}); use an address outside every routed CIDR (Liqo: 169.254.18.0/30)`,
      );
    }
  };
  const ours = c.wireguard.tunnelAddress;
  if (ours !== undefined) check(['wireguard', 'tunnelAddress'], ours);
  const ourFamily = parseAddress(ours ?? LIQO_TUNNEL_SERVER_ADDRESS).length;
  const seen = new Map<string, number>();
  c.peers.forEach((p, i) => {
    const addr = p.tunnelAddress;
    if (addr === undefined) return;
    const prev = seen.get(addr);
    if (prev !== undefined)
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `duplicate peer tunnelAddress ${addr} (also at peers[${prev}]); must be unique`,
      );
    else seen.set(addr, i);
    check(['peers', i, 'tunnelAddress'], addr);
    if (addr === ours)
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `${addr} is this gateway's own wireguard.tunnelAddress; the peer needs another`,
      );
    if (parseAddress(addr).length !== ourFamily) {
      ctx.issue(
        ['peers', i, 'tunnelAddress'],
        `${addr} must have the family of this gateway's tunnel address (${ours ?? `default ${LIQO_TUNNEL_SERVER_ADDRESS}, IPv4`})`,
      );
    }
  });
}

export function validateNode(ctx: IssueSink, c: RawNode): void {
  const local = localCidrs(c.cluster);
  checkNoOverlap(ctx, local);
  if (c.geneve.tunnels.length > 0)
    ctx.issue(
      ['geneve', 'tunnels'],
      'geneve.tunnels is for gateways; a node agent lists its tunnels under node.gateways',
    );
  if (c.geneve.podRoutes.length > 0)
    ctx.issue(['geneve', 'podRoutes'], 'geneve.podRoutes is for gateways; remove it from a node configuration');
  const gws = c.node.gateways;
  checkUnique(
    ctx,
    gws,
    (g) => g.name,
    (i) => ['node', 'gateways', i, 'name'],
    'gateway name',
  );
  checkUnique(
    ctx,
    gws,
    (g) => g.vni,
    (i) => ['node', 'gateways', i, 'vni'],
    'gateway vni',
  );
  const internal = parsePrefix(c.cluster.internalCIDR, true);
  const remotes: NamedCidr[] = [];
  gws.forEach((g, i) => {
    checkInside(
      ctx,
      ['node', 'gateways', i, 'gatewayInternalAddress'],
      g.gatewayInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    checkInside(
      ctx,
      ['node', 'gateways', i, 'localInternalAddress'],
      g.localInternalAddress,
      internal,
      c.cluster.internalCIDR,
      'internal address',
    );
    g.remoteCIDRs.forEach((t, j) =>
      remotes.push(named(['node', 'gateways', i, 'remoteCIDRs', j], `gateway ${g.name} remote CIDR`, t)),
    );
  });
  checkNoOverlap(ctx, [...local, ...remotes], local.length);
}

/** Several tunnels: distinct ports, tunnel 0's the single port's (listenPort / the endpoint's). */
function checkTunnelPorts(ctx: IssueSink, c: CheckedGateway): void {
  const lp = c.wireguard.listenPorts;
  if (lp !== undefined) {
    if (lp[0] !== c.wireguard.listenPort)
      ctx.issue(
        ['wireguard', 'listenPorts', 0],
        `${lp[0]} differs from wireguard.listenPort ${c.wireguard.listenPort}; tunnel 0 listens on listenPort`,
      );
    lp.forEach((p, i) => {
      if (lp.indexOf(p) !== i)
        ctx.issue(['wireguard', 'listenPorts', i], `port ${p} appears twice; one port per tunnel`);
    });
  }
  c.peers.forEach((peer, i) => {
    const ep = peer.endpointPorts;
    if (ep === undefined) return;
    if (peer.endpoint === undefined) {
      ctx.issue(['peers', i, 'endpointPorts'], 'needs an endpoint (the host the tunnels go to)');
      return;
    }
    const m = /:(\d+)$/.exec(peer.endpoint);
    if (m !== null && Number(m[1]) !== ep[0])
      ctx.issue(
        ['peers', i, 'endpointPorts', 0],
        `${ep[0]} differs from the endpoint's port ${m[1]}; tunnel 0 goes to the endpoint`,
      );
    ep.forEach((p, j) => {
      if (ep.indexOf(p) !== j)
        ctx.issue(['peers', i, 'endpointPorts', j], `port ${p} appears twice; one port per tunnel`);
    });
  });
}
