/**
 * The IPv6 half of the YAML mode's translation (from-nat.ts): the same intent as an `ip6` table,
 * since an `ip` table never sees IPv6 packets:
 * - per peer and remapped IPv6 CIDR (remapped ≠ real): prerouting `dnat prefix` remapped → real
 *   for traffic not from the tunnel (and at output for the gateway host's own connections),
 *   postrouting `snat prefix` real → remapped for traffic from the tunnel (1:1, host bits kept);
 * - per IPv6 IP mapping: prerouting `dnat` external → real, postrouting `snat` real → external
 *   towards a peer's IPv6 CIDRs;
 * - with an IPv6 external CIDR (localExternalCIDRv6): `snat` of non-pod sources (every source
 *   with fullMasquerade) towards a peer's IPv6 CIDRs through the tunnel, to that CIDR's first
 *   address;
 * - MSS clamp (clampMss): tcpmssclamp to the smallest peer MTU − 60 both ways through the tunnel.
 * Only for peers with IPv6 CIDRs (no table otherwise). ICMPv6 errors get no source rewrite (the
 * IPv4 table's `setsrc` has no IPv6 counterpart here). Pure; allocates.
 */
import { formatAddress, formatPrefix, type Prefix } from '../packet/addr.js';
import type { ParsedNatConfig, ParsedPeer } from '../nat/config.js';
import type { Chain, Cond, FilterRule, NatRule, RuleTable } from './model.js';

/** IPv6 and TCP headers without options (the MSS an MTU leaves). */
const MSS_OVERHEAD_V6 = 60;

const v6Cond = (pos: 'src' | 'dst', op: 'eq' | 'neq', p: Prefix): Cond => ({
  kind: 'ip6',
  pos,
  op,
  net: p.addr,
  prefixLen: p.prefixLen,
  text: formatPrefix(p),
});
const oneCond = (pos: 'src' | 'dst', a: Uint8Array): Cond => ({
  kind: 'ip6',
  pos,
  op: 'eq',
  net: a,
  prefixLen: 128,
  text: formatAddress(a, 0, 6),
});
const devCond = (dir: 'in' | 'out', op: 'eq' | 'neq', name: string): Cond => ({ kind: 'dev', dir, op, name });
const to6 = (type: 'dnat' | 'snat', a: Uint8Array, len: number) =>
  ({
    type,
    addr: 0,
    prefixLen: len,
    text: len === 128 ? formatAddress(a, 0, 6) : formatPrefix({ family: 6, addr: a, prefixLen: len }),
    addr6: a,
  }) as const;

/**
 * The ip6 table for the IPv6 CIDRs of `parsed` (null when no peer has one). `tun`: a peer's
 * tunnel name; `tunnels`: every tunnel, for the "not from a tunnel" matches.
 */
export function ipv6Table(
  g: ParsedNatConfig,
  parsed: readonly ParsedPeer[],
  tun: (peer: string) => string,
  tunnels: readonly string[],
  object: string,
): RuleTable | null {
  const v6Peers = parsed.filter((p) => p.remaps.some((r) => r.real.family === 6));
  if (v6Peers.length === 0) return null;
  const pre: NatRule[] = [];
  const out: NatRule[] = [];
  const post: NatRule[] = [];
  const notTunnel = tunnels.map((t) => devCond('in', 'neq', t));
  for (const p of v6Peers)
    for (const r of p.remaps) {
      if (r.real.family !== 6) continue;
      const same = r.real.prefixLen === r.remapped.prefixLen && r.real.addr.every((b, i) => b === r.remapped.addr[i]);
      if (same) continue;
      const name = `${p.name}-remap-${formatPrefix(r.real)}`;
      const dnat = to6('dnat', r.real.addr, r.real.prefixLen);
      pre.push({ kind: 'nat', name, conds: [v6Cond('dst', 'eq', r.remapped), ...notTunnel], action: dnat });
      out.push({ kind: 'nat', name, conds: [v6Cond('dst', 'eq', r.remapped)], action: dnat });
      post.push({
        kind: 'nat',
        name,
        conds: [v6Cond('src', 'eq', r.real), devCond('in', 'eq', tun(p.name))],
        action: to6('snat', r.remapped.addr, r.remapped.prefixLen),
      });
    }
  const towards: { peer: string; cidr: Prefix }[] = [];
  for (const p of v6Peers)
    for (const r of p.remaps) if (r.real.family === 6) towards.push({ peer: p.name, cidr: r.real });
  for (const m of g.mappings) {
    if (m.family !== 6) continue;
    const e = formatAddress(m.external, 0, 6);
    pre.push({
      kind: 'nat',
      name: `${e}-remap-ipmapping-gw`,
      conds: [oneCond('dst', m.external)],
      action: to6('dnat', m.real, 128),
    });
    towards.forEach((t, i) =>
      post.push({
        kind: 'nat',
        name: `${e}-ipmapping-out-${t.peer}-${i}`,
        conds: [oneCond('src', m.real), devCond('out', 'eq', tun(t.peer)), v6Cond('dst', 'eq', t.cidr)],
        action: to6('snat', m.external, 128),
      }),
    );
  }
  const ext = g.external6;
  if (ext !== undefined) {
    const conds: Cond[] = g.fullMasquerade
      ? []
      : g.localPod.filter((lp) => lp.family === 6).map((lp) => v6Cond('src', 'neq', lp));
    towards.forEach((t, i) =>
      post.push({
        kind: 'nat',
        name: `unknown-source-snat-${t.peer}-${i}`,
        conds: [devCond('out', 'eq', tun(t.peer)), ...conds, v6Cond('dst', 'eq', t.cidr)],
        action: to6('snat', ext.addr, 128),
      }),
    );
  }
  const chains: Chain[] = [];
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
  if (g.clampMss) {
    const used = [...new Set(v6Peers.map((p) => tun(p.name)))];
    const clamp = (tn: string, dir: 'in' | 'out'): FilterRule => ({
      kind: 'filter',
      name: `mss-${dir}${tunnels.length > 1 ? `-${tn}` : ''}`,
      conds: [devCond(dir, 'eq', tn), { kind: 'proto', proto: 6 }],
      counter: false,
      action: {
        type: 'tcpmssclamp',
        mss: Math.min(...parsed.filter((p) => tun(p.name) === tn).map((p) => p.mtu)) - MSS_OVERHEAD_V6,
      },
    });
    chains.push({
      name: 'mss-clamping',
      hook: 'forward',
      type: 'filter',
      priority: 0,
      policy: 'accept',
      rules: used.flatMap((tn) => [clamp(tn, 'out'), clamp(tn, 'in')]),
    });
  }
  return chains.length === 0 ? null : { object, name: 'weft-derived6', family: 'ip6', chains };
}
