/**
 * FirewallConfiguration (networking.liqo.io/v1beta1, plain JSON as the API server returns it)
 * → RuleTable. Pure. Anything Weft cannot evaluate with Liqo's semantics is a RuleParseError
 * naming the object, chain, rule and field; the caller keeps the previous rules running.
 */
import { AddressParseError, formatAddress, maskInPlace, parseAddress } from '../packet/addr.js';
import {
  HOOKS,
  ipToNumber,
  numberToIp,
  type Chain,
  type ChainType,
  type Cond,
  type FilterAction,
  type FilterRule,
  type HookName,
  type MatchOp,
  type NatRule,
  type Policy,
  type Position,
  type Rule,
  type RuleTable,
  type TableFamily,
} from './model.js';

export class RuleParseError extends Error {
  constructor(
    readonly object: string,
    readonly chain: string,
    readonly rule: string,
    readonly field: string,
    readonly problem: string,
  ) {
    super(
      `FirewallConfiguration ${object}${chain ? ` chain ${chain}` : ''}${rule ? ` rule ${rule}` : ''}: ${field}: ${problem}`,
    );
    this.name = 'RuleParseError';
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Where {
  object: string;
  chain: string;
  rule: string;
}

function fail(w: Where, field: string, problem: string): never {
  throw new RuleParseError(w.object, w.chain, w.rule, field, problem);
}

function str(w: Where, o: Obj, key: string, field: string, required: boolean): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) fail(w, field, 'missing');
    return undefined;
  }
  if (typeof v !== 'string') fail(w, field, `must be a string, got ${typeof v}`);
  return v;
}

function oneOf<T extends string>(w: Where, v: string | undefined, allowed: readonly T[], field: string): T {
  if (v === undefined || !(allowed as readonly string[]).includes(v))
    fail(w, field, `must be one of ${allowed.join(', ')} (got ${String(v)})`);
  return v as T;
}

const V6_HINT = '(IPv6 addresses belong in an IPV6 table)';

/** An IP, CIDR or "a-b" range, as Liqo's GetIPValueType tells them apart (IPv4: ip tables). */
function parseIpValue(w: Where, text: string, field: string): { lo: number; hi: number } {
  const slash = text.indexOf('/');
  if (slash >= 0) {
    const base = ipToNumber(text.slice(0, slash));
    const len = Number(text.slice(slash + 1));
    if (base === null || !Number.isInteger(len) || len < 0 || len > 32)
      fail(w, field, `'${text}' is not an IPv4 CIDR ${V6_HINT}`);
    const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
    const lo = (base & mask) >>> 0;
    // Liqo compares the masked packet address with the UNmasked base: with host bits set the
    // rule can never match (eq) or always matches (neq). Refused rather than imitated.
    if (lo !== base) fail(w, field, `'${text}' has host bits set (did you mean ${numberToIp(lo)}/${len}?)`);
    return { lo, hi: (lo | (~mask >>> 0)) >>> 0 };
  }
  const one = ipToNumber(text);
  if (one !== null) return { lo: one, hi: one };
  const parts = text.split('-');
  if (parts.length === 2) {
    const a = ipToNumber(parts[0]!);
    const b = ipToNumber(parts[1]!);
    if (a !== null && b !== null) {
      if (a > b) fail(w, field, `range '${text}' starts after it ends`);
      return { lo: a, hi: b };
    }
  }
  return fail(w, field, `'${text}' is not an IPv4 address, CIDR or range ${V6_HINT}`);
}

/** An IPv6 address or CIDR (ip6 tables; ranges are refused). Host bits set are refused as for IPv4. */
function parseIp6Value(w: Where, text: string, field: string): { net: Uint8Array; prefixLen: number } {
  const t = text.trim();
  const slash = t.indexOf('/');
  const addrText = slash >= 0 ? t.slice(0, slash) : t;
  const len = slash >= 0 ? Number(t.slice(slash + 1)) : 128;
  let net: Uint8Array;
  try {
    net = parseAddress(addrText);
  } catch (e) {
    if (!(e instanceof AddressParseError)) throw e;
    return fail(
      w,
      field,
      `'${text}' is not an IPv6 address or CIDR (an IPV6 table matches IPv6 only; ranges are not supported)`,
    );
  }
  if (net.length !== 16)
    fail(w, field, `'${text}' is IPv4: an IPV6 table matches IPv6 addresses (IPv4 ones belong in an IPV4 table)`);
  if (!Number.isInteger(len) || len < 0 || len > 128 || (slash >= 0 && t.slice(slash + 1).trim() === ''))
    fail(w, field, `'${text}' is not an IPv6 CIDR (prefix length 0-128)`);
  const masked = Uint8Array.from(net);
  maskInPlace(masked, len);
  if (masked.some((b, i) => b !== net[i]))
    fail(w, field, `'${text}' has host bits set (did you mean ${formatAddress(masked, 0, 6)}/${len}?)`);
  return { net: masked, prefixLen: len };
}

function parsePort(w: Where, text: string, field: string): { lo: number; hi: number; range: boolean } {
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(text);
  if (!m) return fail(w, field, `'${text}' is not a port or a port range (e.g. 3000-4000)`);
  const lo = Number(m[1]);
  const hi = m[2] === undefined ? lo : Number(m[2]);
  if (lo > 65535 || hi > 65535 || lo > hi) fail(w, field, `'${text}' is not a valid port or range`);
  return { lo, hi, range: m[2] !== undefined };
}

/** One CRD match entry → its conditions, in the order Liqo renders them (proto, dev, ip, port). */
function parseMatch(w: Where, m: unknown, i: number, out: Cond[], fam: TableFamily): void {
  const f = `match[${i}]`;
  if (!isObj(m)) fail(w, f, 'must be an object');
  const op = oneOf<MatchOp>(w, str(w, m, 'op', `${f}.op`, true), ['eq', 'neq'], `${f}.op`);
  if (m.proto !== undefined && m.proto !== null) {
    if (!isObj(m.proto)) fail(w, `${f}.proto`, 'must be an object');
    const p = oneOf(w, str(w, m.proto, 'value', `${f}.proto.value`, true), ['tcp', 'udp'], `${f}.proto.value`);
    out.push({ kind: 'proto', proto: p === 'tcp' ? 6 : 17 });
  }
  if (m.dev !== undefined && m.dev !== null) {
    if (!isObj(m.dev)) fail(w, `${f}.dev`, 'must be an object');
    const dir = oneOf(w, str(w, m.dev, 'position', `${f}.dev.position`, true), ['in', 'out'], `${f}.dev.position`);
    const name = str(w, m.dev, 'value', `${f}.dev.value`, true)!;
    if (name.length === 0 || name.length > 15)
      fail(w, `${f}.dev.value`, `'${name}' is not an interface name (1-15 characters)`);
    out.push({ kind: 'dev', dir, op, name });
  }
  if (m.ip !== undefined && m.ip !== null) {
    if (!isObj(m.ip)) fail(w, `${f}.ip`, 'must be an object');
    const pos = oneOf<Position>(
      w,
      str(w, m.ip, 'position', `${f}.ip.position`, true),
      ['src', 'dst'],
      `${f}.ip.position`,
    );
    const text = str(w, m.ip, 'value', `${f}.ip.value`, true)!;
    if (fam === 'ip6') {
      const { net, prefixLen } = parseIp6Value(w, text, `${f}.ip.value`);
      out.push({ kind: 'ip6', pos, op, net, prefixLen, text });
    } else {
      const { lo, hi } = parseIpValue(w, text, `${f}.ip.value`);
      out.push({ kind: 'ip', pos, op, lo, hi, text });
    }
  }
  if (m.port !== undefined && m.port !== null) {
    if (!isObj(m.port)) fail(w, `${f}.port`, 'must be an object');
    const pos = oneOf<Position>(
      w,
      str(w, m.port, 'position', `${f}.port.position`, true),
      ['src', 'dst'],
      `${f}.port.position`,
    );
    const p = parsePort(w, str(w, m.port, 'value', `${f}.port.value`, true)!, `${f}.port.value`);
    // Liqo renders a range as gte/lte whatever the op.
    out.push({ kind: 'port', pos, op: p.range ? 'eq' : op, lo: p.lo, hi: p.hi });
  }
}

function parseConds(w: Where, r: Obj, fam: TableFamily): Cond[] {
  const conds: Cond[] = [];
  const match = r.match ?? [];
  if (!Array.isArray(match)) fail(w, 'match', 'must be a list');
  match.forEach((m, i) => parseMatch(w, m, i, conds, fam));
  return conds;
}

function intValue(w: Where, v: string | undefined, field: string, min: number, max: number): number {
  if (v === undefined) fail(w, field, 'missing');
  if (!/^\d+$/.test(v.trim())) fail(w, field, `'${v}' is not an integer`);
  const n = Number(v.trim());
  if (n < min || n > max) fail(w, field, `${n} is outside ${min}..${max}`);
  return n;
}

function parseFilterRule(w: Where, r: Obj, fam: TableFamily): FilterRule {
  const conds = parseConds(w, r, fam);
  const counter = r.counter === true;
  const a = str(w, r, 'action', 'action', false);
  const value = str(w, r, 'value', 'value', false);
  let action: FilterAction;
  switch (a) {
    case undefined:
    case '':
      action = { type: 'none' };
      break;
    case 'accept':
    case 'drop':
    case 'reject':
    case 'notrack':
    case 'metamarkfromctmark':
      action = { type: a };
      break;
    case 'ctmark':
      action = { type: 'ctmark', mark: intValue(w, value, 'value', 0, 0xffffffff) };
      break;
    case 'tcpmssclamp':
      // Liqo renders 0 (the Helm chart's default, `networking.gateway.mssclamp.value: 0`) and an
      // absent value as nft `rt mtu`: the route's MTU − 40 (mss 0 here).
      action = {
        type: 'tcpmssclamp',
        mss: value === undefined || value === '' ? 0 : intValue(w, value, 'value', 0, 65535),
      };
      break;
    default:
      return fail(
        w,
        'action',
        `'${a}' is not supported (accept, drop, reject, ctmark, metamarkfromctmark, tcpmssclamp, notrack)`,
      );
  }
  return { kind: 'filter', name: w.rule, conds, counter, action };
}

function parseNatRule(w: Where, r: Obj, fam: TableFamily): NatRule {
  const conds = parseConds(w, r, fam);
  const t = oneOf(w, str(w, r, 'natType', 'natType', true), ['dnat', 'snat', 'masquerade'], 'natType');
  const to = str(w, r, 'to', 'to', false);
  // Liqo decides by `to`: empty → masquerade whatever natType says; masquerade renders as snat.
  if (to === undefined || to === '') return { kind: 'nat', name: w.rule, conds, action: { type: 'masquerade' } };
  const type = t === 'dnat' ? 'dnat' : 'snat';
  if (fam === 'ip6') {
    const { net, prefixLen } = parseIp6Value(w, to, 'to');
    return { kind: 'nat', name: w.rule, conds, action: { type, addr: 0, prefixLen, text: to, addr6: net } };
  }
  const slash = to.indexOf('/');
  if (slash < 0) {
    const addr = ipToNumber(to);
    if (addr === null) fail(w, 'to', `'${to}' is not an IPv4 address or CIDR (ranges are not supported) ${V6_HINT}`);
    return { kind: 'nat', name: w.rule, conds, action: { type, addr, prefixLen: 32, text: to } };
  }
  const { lo } = parseIpValue(w, to, 'to');
  return {
    kind: 'nat',
    name: w.rule,
    conds,
    action: { type, addr: lo, prefixLen: Number(to.slice(slash + 1)), text: to },
  };
}

/** Parses one FirewallConfiguration object; throws RuleParseError. */
export function parseFirewallConfiguration(fc: unknown): RuleTable {
  const w: Where = { object: '?', chain: '', rule: '' };
  if (!isObj(fc)) fail(w, 'object', 'must be an object');
  const md = isObj(fc.metadata) ? fc.metadata : {};
  w.object = `${typeof md.namespace === 'string' ? `${md.namespace}/` : ''}${typeof md.name === 'string' ? md.name : '?'}`;
  if (!isObj(fc.spec) || !isObj(fc.spec.table)) fail(w, 'spec.table', 'missing');
  const t = fc.spec.table;
  const name = str(w, t, 'name', 'spec.table.name', true)!;
  const family = str(w, t, 'family', 'spec.table.family', true);
  if (family === 'INET')
    fail(
      w,
      'spec.table.family',
      "'INET' is not supported: an inet table's address matches and NAT would need a family per rule; write one IPV4 and one IPV6 table",
    );
  if (family !== 'IPV4' && family !== 'IPV6')
    fail(w, 'spec.table.family', `'${String(family)}' is not supported: IPV4 or IPV6`);
  const fam: TableFamily = family === 'IPV6' ? 'ip6' : 'ip';
  const rawChains = t.chains ?? [];
  if (!Array.isArray(rawChains)) fail(w, 'spec.table.chains', 'must be a list');
  const chains: Chain[] = [];
  const names = new Set<string>();
  rawChains.forEach((c, ci) => {
    w.chain = `#${ci}`;
    w.rule = '';
    if (!isObj(c)) fail(w, `spec.table.chains[${ci}]`, 'must be an object');
    const cname = str(w, c, 'name', 'name', true)!;
    w.chain = cname;
    if (names.has(cname)) fail(w, 'name', 'duplicate chain name in the table');
    names.add(cname);
    const hook = oneOf<HookName>(w, str(w, c, 'hook', 'hook', true), HOOKS, 'hook');
    const type = oneOf<ChainType>(w, str(w, c, 'type', 'type', true), ['filter', 'nat', 'route'], 'type');
    const policy = oneOf<Policy>(w, str(w, c, 'policy', 'policy', false) ?? 'accept', ['accept', 'drop'], 'policy');
    const prio = c.priority ?? 0;
    if (typeof prio !== 'number' || !Number.isInteger(prio)) fail(w, 'priority', 'must be an integer');
    if (type === 'nat' && hook === 'forward') fail(w, 'hook', 'a nat chain cannot attach at forward');
    // The kernel refuses a nat chain at or before conntrack (NF_IP_PRI_CONNTRACK, -200).
    if (type === 'nat' && prio <= -200)
      fail(w, 'priority', `a nat chain needs a priority above -200 (conntrack), got ${prio}`);
    if (type === 'route' && hook !== 'output') fail(w, 'hook', 'a route chain attaches at output only');
    const rs = isObj(c.rules) ? c.rules : {};
    const key = type === 'filter' ? 'filterRules' : type === 'nat' ? 'natRules' : 'routeRules';
    const list = rs[key] ?? [];
    if (!Array.isArray(list)) fail(w, `rules.${key}`, 'must be a list');
    const rules: Rule[] = list.map((r, ri) => {
      w.rule = `#${ri}`;
      if (!isObj(r)) fail(w, `rules.${key}[${ri}]`, 'must be an object');
      w.rule = typeof r.name === 'string' && r.name !== '' ? r.name : `#${ri}`;
      if (type === 'filter') {
        const f = parseFilterRule(w, r, fam);
        // Liqo renders reject as ICMP (IPv4) net-unreachable: nft refuses that in an ip6 table.
        if (f.action.type === 'reject' && fam === 'ip6')
          fail(w, 'action', 'reject (ICMP net-unreachable) is IPv4: not valid in an IPV6 table');
        // The kernel refuses these at load time (nft: "Operation not supported"); `rt mtu` (nft_rt's
        // TCPMSS key) is valid at forward, output and postrouting only, whatever the chain type.
        if (f.action.type === 'reject' && hook === 'postrouting')
          fail(w, 'action', 'reject is not valid at postrouting (prerouting, input, forward or output)');
        if (
          f.action.type === 'tcpmssclamp' &&
          f.action.mss === 0 &&
          hook !== 'forward' &&
          hook !== 'output' &&
          hook !== 'postrouting'
        )
          fail(
            w,
            'value',
            `tcpmssclamp with value 0 or none (the route's MTU, nft \`rt mtu\`) is only valid at forward, output or postrouting, this chain is at ${hook}; give a fixed MSS or move the rule`,
          );
        return f;
      }
      if (type === 'nat') {
        const n = parseNatRule(w, r, fam);
        const dst = n.action.type === 'dnat';
        // nftables refuses these at load time: destination NAT before routing, source NAT after.
        if (dst && hook !== 'prerouting' && hook !== 'output')
          fail(w, 'natType', `dnat needs a prerouting or output chain, this one is at ${hook}`);
        if (!dst && hook !== 'postrouting' && hook !== 'input')
          fail(w, 'natType', `${n.action.type} needs a postrouting or input chain, this one is at ${hook}`);
        if (n.action.type === 'masquerade' && hook !== 'postrouting')
          fail(w, 'natType', `masquerade (no \`to\`) needs a postrouting chain, this one is at ${hook}`);
        return n;
      }
      return { kind: 'route' as const, name: w.rule, conds: parseConds(w, r, fam) };
    });
    chains.push({ name: cname, hook, type, priority: prio, policy, rules });
  });
  return { object: w.object, name, family: fam, chains };
}
