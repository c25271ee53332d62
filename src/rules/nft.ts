/**
 * RuleTable → `nft -f` text, expression for expression as Liqo's firewall controller builds
 * its netlink rules (pkg/firewall/utils): raw transport-header loads for ports (no protocol
 * dependency), `meta l4proto` for proto, payload compare / mask / range for addresses, the SYN
 * test then an MSS option write for tcpmssclamp, net-unreachable for reject, prefix NAT for a
 * subnet `to`; in an ip6 table `ip6 saddr` / `ip6 daddr` and IPv6 NAT targets. Used as the kernel oracle of the evaluator (test/rules) and for inspection.
 */
import { formatAddress } from '../packet/addr.js';
import { numberToIp, type Cond, type FilterRule, type NatRule, type Rule, type RuleTable } from './model.js';

function q(s: string): string {
  return `"${s.replace(/["\\]/g, '')}"`;
}

function cond(c: Cond): string {
  const ne = 'op' in c && c.op === 'neq' ? '!= ' : '';
  switch (c.kind) {
    case 'proto':
      return `meta l4proto ${c.proto === 6 ? 'tcp' : c.proto === 17 ? 'udp' : c.proto === 1 ? 'icmp' : String(c.proto)}`;
    case 'dev':
      return `${c.dir === 'in' ? 'iifname' : 'oifname'} ${ne}${q(c.name)}`;
    case 'ip6':
      return `${c.pos === 'src' ? 'ip6 saddr' : 'ip6 daddr'} ${ne}${c.prefixLen === 128 ? formatAddress(c.net, 0, 6) : `${formatAddress(c.net, 0, 6)}/${c.prefixLen}`}`;
    case 'ip': {
      const field = c.pos === 'src' ? 'ip saddr' : 'ip daddr';
      if (c.text.includes('/')) return `${field} ${ne}${c.text.trim()}`;
      if (c.lo === c.hi) return `${field} ${ne}${numberToIp(c.lo)}`;
      return `${field} ${ne}${numberToIp(c.lo)}-${numberToIp(c.hi)}`;
    }
    case 'port': {
      const field = c.pos === 'src' ? '@th,0,16' : '@th,16,16';
      return c.lo === c.hi ? `${field} ${ne}${c.lo}` : `${field} ${c.lo}-${c.hi}`;
    }
  }
}

function filterAction(r: FilterRule): string {
  const a = r.action;
  switch (a.type) {
    case 'none':
      return '';
    case 'accept':
      return 'accept';
    case 'drop':
      return 'drop';
    case 'reject':
      return 'reject with icmp type net-unreachable';
    case 'ctmark':
      return `ct mark set ${a.mark}`;
    case 'metamarkfromctmark':
      return 'meta mark set ct mark';
    case 'tcpmssclamp':
      return `@th,104,8 & 0x02 != 0 tcp option maxseg size set ${a.mss === 0 ? 'rt mtu' : String(a.mss)}`;
    case 'notrack':
      return 'notrack';
    case 'setsrc':
      return `ip saddr set ${a.text}`;
  }
}

function natAction(r: NatRule): string {
  const a = r.action;
  if (a.type === 'masquerade') return 'masquerade';
  if (a.addr6 !== undefined) {
    const t = formatAddress(a.addr6, 0, 6);
    return a.prefixLen === 128 ? `${a.type} to ${t}` : `${a.type} prefix to ${t}/${a.prefixLen}`;
  }
  if (a.prefixLen === 32) return `${a.type} to ${numberToIp(a.addr)}`;
  return `${a.type} prefix to ${numberToIp(a.addr)}/${a.prefixLen}`;
}

function rule(r: Rule): string {
  const parts = r.conds.map(cond);
  if (r.kind === 'filter') {
    if (r.counter) parts.push('counter');
    const a = filterAction(r);
    if (a !== '') parts.push(a);
  } else if (r.kind === 'nat') {
    parts.push(natAction(r));
  } else {
    // A route rule has no expression of its own in Liqo's CRD; it only matches.
  }
  parts.push(`comment ${q(r.name)}`);
  return parts.join(' ');
}

/** The table as one `nft -f` document (adds the table; does not flush others). */
export function toNft(t: RuleTable): string {
  const lines = [`table ${t.family} ${t.name} {`];
  for (const c of t.chains) {
    lines.push(`  chain ${c.name} {`);
    lines.push(`    type ${c.type} hook ${c.hook} priority ${c.priority}; policy ${c.policy};`);
    for (const r of c.rules) lines.push(`    ${rule(r)}`);
    lines.push('  }');
  }
  lines.push('}');
  return lines.join('\n') + '\n';
}
