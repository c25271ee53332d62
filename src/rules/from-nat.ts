/**
 * The YAML mode's NAT configuration (src/nat/config.ts) as rules of the one rule model, the
 * way Liqo's controllers express the same intent as FirewallConfigurations, so that the YAML mode
 * and Kubernetes mode share one data path (compile.ts → runtime.ts):
 * - per peer and remapped CIDR (remapped ≠ real): Liqo's remap-podcidr / remap-externalcidr —
 *   prerouting `dnat prefix` remapped → real for traffic not from the tunnel, postrouting
 *   `snat prefix` real → remapped for traffic from the tunnel; the same dnat at output for the
 *   gateway host's own connections (beyond Liqo's rules: its gateway originates none);
 * - per IP mapping: prerouting `dnat` external → real (Liqo's `<ip>-remap-ipmapping-gw`), and
 *   postrouting `snat` real → external for connections the mapped host opens towards a peer's
 *   CIDRs (the mapped host's own connections);
 * - masquerade of non-pod sources (every source with fullMasquerade) towards a peer's CIDRs
 *   through the tunnel: `snat` to the external CIDR's first address (Liqo's service-nodeport /
 *   unknown-source SNAT), one rule per peer CIDR;
 * - MSS clamp (clampMss): tcpmssclamp to the smallest peer MTU − 40 both ways through the tunnel;
 * - beyond Liqo's rules (YAML mode only): ICMP errors (destination unreachable, time exceeded,
 *   parameter problem) leaving through the tunnel from a source outside the local pod and
 *   external CIDRs — a node's, or the router's own about a packet from a peer — get the external
 *   CIDR's first address as source, statelessly (`ip saddr set`, forward and output): an error
 *   is related to its connection, so no snat rule reaches it (the kernel's semantics), and the
 *   peer's WireGuard would drop a source outside the CIDRs it routes to us (Liqo's own peers
 *   accept any source: AllowedIPs 0.0.0.0/0, one peer per gateway).
 * These go in an `ip` table (IPv4 packets, as Liqo's); the IPv6 CIDRs get the same in an `ip6`
 * table (from-nat6.ts). Pure; allocates.
 */
import { formatPrefix, type Prefix } from '../packet/addr.js';
import { parseNatConfig, parseNatPeer, type NatConfig, type NatPeerConfig, type ParsedPeer } from '../nat/config.js';
import { ipv6Table } from './from-nat6.js';
import { ipToNumber, type Chain, type Cond, type FilterRule, type NatRule, type RuleTable } from './model.js';

export interface DerivedRulesOptions {
  /** Interface name of the tunnel (Liqo: liqo-tunnel), as RulesDevices.peer. */
  readonly tunnel: string;
  /**
   * Each peer's own tunnel name (the router's RouterPeer.dev), when one gateway has several
   * peers whose real CIDRs may overlap: the rules then tell them apart by interface, as Liqo's
   * one-gateway-per-peer does. Default: `tunnel` for every peer.
   */
  readonly peerTunnel?: (peer: string) => string;
  /** Object name used in rule ids (default `weft/derived`). */
  readonly object?: string;
}

function v4(p: Prefix): { lo: number; hi: number; text: string; len: number } | null {
  if (p.family !== 4) return null;
  const lo = ((p.addr[0]! << 24) | (p.addr[1]! << 16) | (p.addr[2]! << 8) | p.addr[3]!) >>> 0;
  const host = p.prefixLen === 32 ? 0 : (0xffffffff >>> p.prefixLen) >>> 0;
  return { lo, hi: (lo | host) >>> 0, text: formatPrefix(p), len: p.prefixLen };
}

const ipCond = (pos: 'src' | 'dst', op: 'eq' | 'neq', r: { lo: number; hi: number; text: string }): Cond => ({
  kind: 'ip',
  pos,
  op,
  lo: r.lo,
  hi: r.hi,
  text: r.text,
});
const devCond = (dir: 'in' | 'out', op: 'eq' | 'neq', name: string): Cond => ({ kind: 'dev', dir, op, name });

/** The rule tables equivalent to `cfg` with `peers` (throws NatConfigError naming the field). */
export function rulesFromNatConfig(
  cfg: NatConfig,
  peers: readonly NatPeerConfig[],
  opts: DerivedRulesOptions,
): RuleTable[] {
  const g = parseNatConfig(cfg);
  const parsed: ParsedPeer[] = [];
  for (const p of peers) parsed.push(parseNatPeer(p, g, parsed));
  const object = opts.object ?? 'weft/derived';
  const pre: NatRule[] = [];
  const post: NatRule[] = [];
  /** The gateway host's own connections (Liqo's gateway originates none): the same remapped → real dnat at output. */
  const out: NatRule[] = [];
  const tun = (peer: string): string => opts.peerTunnel?.(peer) ?? opts.tunnel;
  const tunnels = [...new Set(parsed.map((p) => tun(p.name)))];
  if (tunnels.length === 0) tunnels.push(opts.tunnel);
  /** Not from any peer's tunnel. */
  const notTunnel = tunnels.map((t) => devCond('in', 'neq', t));
  for (const p of parsed) {
    for (const r of p.remaps) {
      const real = v4(r.real);
      const rem = v4(r.remapped);
      if (real === null || rem === null || (real.lo === rem.lo && real.len === rem.len)) continue;
      pre.push({
        kind: 'nat',
        name: `${p.name}-remap-${real.text}`,
        conds: [ipCond('dst', 'eq', rem), ...notTunnel],
        action: { type: 'dnat', addr: real.lo, prefixLen: real.len, text: real.text },
      });
      out.push({
        kind: 'nat',
        name: `${p.name}-remap-${real.text}`,
        conds: [ipCond('dst', 'eq', rem)],
        action: { type: 'dnat', addr: real.lo, prefixLen: real.len, text: real.text },
      });
      post.push({
        kind: 'nat',
        name: `${p.name}-remap-${real.text}`,
        conds: [ipCond('src', 'eq', real), devCond('in', 'eq', tun(p.name))],
        action: { type: 'snat', addr: rem.lo, prefixLen: rem.len, text: rem.text },
      });
    }
  }
  // The source NAT applies only towards a peer's CIDRs (not, e.g., to the
  // in-tunnel connection check): at postrouting those are the real ones (after the dnat).
  const towards: { peer: string; cidr: { lo: number; hi: number; text: string } }[] = [];
  for (const p of parsed)
    for (const r of p.remaps) {
      const x = v4(r.real);
      if (x !== null) towards.push({ peer: p.name, cidr: x });
    }
  for (const m of g.mappings) {
    if (m.family !== 4) continue;
    const ext = ipToNumber([...m.external].join('.'))!;
    const real = ipToNumber([...m.real].join('.'))!;
    const e = { lo: ext, hi: ext, text: [...m.external].join('.') };
    const r = { lo: real, hi: real, text: [...m.real].join('.') };
    pre.push({
      kind: 'nat',
      name: `${e.text}-remap-ipmapping-gw`,
      conds: [ipCond('dst', 'eq', e)],
      action: { type: 'dnat', addr: real, prefixLen: 32, text: r.text },
    });
    towards.forEach((t, i) =>
      post.push({
        kind: 'nat',
        name: `${e.text}-ipmapping-out-${t.peer}-${i}`,
        conds: [ipCond('src', 'eq', r), devCond('out', 'eq', tun(t.peer)), ipCond('dst', 'eq', t.cidr)],
        action: { type: 'snat', addr: ext, prefixLen: 32, text: e.text },
      }),
    );
  }
  const ext = v4(g.external4);
  if (ext !== null) {
    const conds: Cond[] = [];
    if (!g.fullMasquerade)
      for (const lp of g.localPod) {
        const x = v4(lp);
        if (x !== null) conds.push(ipCond('src', 'neq', x));
      }
    towards.forEach((t, i) =>
      post.push({
        kind: 'nat',
        name: `unknown-source-snat-${t.peer}-${i}`,
        conds: [devCond('out', 'eq', tun(t.peer)), ...conds, ipCond('dst', 'eq', t.cidr)],
        action: { type: 'snat', addr: ext.lo, prefixLen: 32, text: ext.text.split('/')[0]! },
      }),
    );
  }
  const chains: Chain[] = [];
  if (ext !== null) {
    const first = ext.text.split('/')[0]!;
    const notOurs: Cond[] = [
      ...g.localPod
        .map(v4)
        .filter((x) => x !== null)
        .map((x) => ipCond('src', 'neq', x!)),
      ipCond('src', 'neq', ext),
    ];
    // ICMP type·code is what a port match reads at the transport header's offset 0.
    const errorRules = (): FilterRule[] =>
      tunnels.flatMap((tn) =>
        [3, 11, 12].map((t): FilterRule => ({
          kind: 'filter',
          name: `icmp-error-source-${t}${tunnels.length > 1 ? `-${tn}` : ''}`,
          counter: false,
          action: { type: 'setsrc', addr: ext.lo, text: first },
          conds: [
            devCond('out', 'eq', tn),
            { kind: 'proto', proto: 1 },
            ...notOurs,
            { kind: 'port', pos: 'src', op: 'eq', lo: t << 8, hi: (t << 8) | 255 },
          ],
        })),
      );
    for (const hook of ['forward', 'output'] as const)
      chains.push({
        name: `icmp-error-source-${hook}`,
        hook,
        type: 'filter',
        priority: 0,
        policy: 'accept',
        rules: errorRules(),
      });
  }
  if (pre.length > 0)
    chains.push({ name: 'prerouting', hook: 'prerouting', type: 'nat', priority: -100, policy: 'accept', rules: pre });
  if (out.length > 0)
    chains.push({ name: 'output', hook: 'output', type: 'nat', priority: -100, policy: 'accept', rules: out });
  if (post.length > 0)
    chains.push({
      name: 'postrouting',
      hook: 'postrouting',
      type: 'nat',
      priority: 100,
      policy: 'accept',
      rules: post,
    });
  if (g.clampMss && parsed.length > 0) {
    // Per tunnel, the smallest MTU of its peers.
    const clamp = (tn: string, dir: 'in' | 'out'): FilterRule => ({
      kind: 'filter',
      name: `mss-${dir}${tunnels.length > 1 ? `-${tn}` : ''}`,
      conds: [devCond(dir, 'eq', tn), { kind: 'proto', proto: 6 }],
      counter: false,
      action: {
        type: 'tcpmssclamp',
        mss: Math.min(...parsed.filter((p) => tun(p.name) === tn).map((p) => p.mtu)) - 40,
      },
    });
    chains.push({
      name: 'mss-clamping',
      hook: 'forward',
      type: 'filter',
      priority: 0,
      policy: 'accept',
      rules: tunnels.flatMap((tn) => [clamp(tn, 'out'), clamp(tn, 'in')]),
    });
  }
  const six = ipv6Table(g, parsed, tun, tunnels, object);
  const v4Table: RuleTable = { object, name: 'weft-derived', family: 'ip', chains };
  return six === null ? [v4Table] : [v4Table, six];
}
