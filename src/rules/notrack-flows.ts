/**
 * Which conntrack entries a table's notrack rules concern, as Liqo's firewall controller decides
 * after applying a FirewallConfiguration with notrack rules (liqotech/liqo
 * pkg/firewall/conntrack.go): a new notrack rule does not touch connections already tracked, so
 * the entries it would have exempted are deleted — an entry goes when, for some notrack rule,
 * its original or its reply tuple satisfies every condition of the rule (proto, address, port;
 * interface conditions ignored: a conntrack entry has no interfaces). Conditions are taken one
 * by one with their own op (Liqo negates a whole match entry: the same for single-field
 * matches, Liqo's only form in its Helm chart). Pure: parses `conntrack -L` lines.
 */
import { ipToNumber, type Cond, type RuleTable } from './model.js';

export interface CtTuple {
  readonly src: number;
  readonly dst: number;
  readonly sport: number | undefined;
  readonly dport: number | undefined;
}

export interface CtFlow {
  readonly proto: number;
  readonly orig: CtTuple;
  readonly reply: CtTuple;
  /** The text of the original tuple (src, dst, ports) as conntrack's -D filters take it. */
  readonly deleteArgs: readonly string[];
}

function tuple(fields: readonly string[], at: number): CtTuple | null {
  const get = (k: string): string | undefined =>
    fields
      .slice(at)
      .find((f) => f.startsWith(`${k}=`))
      ?.slice(k.length + 1);
  const src = ipToNumber(get('src') ?? '');
  const dst = ipToNumber(get('dst') ?? '');
  if (src === null || dst === null) return null;
  const sp = get('sport');
  const dp = get('dport');
  return {
    src,
    dst,
    sport: sp === undefined ? undefined : Number(sp),
    dport: dp === undefined ? undefined : Number(dp),
  };
}

/** One line of `conntrack -L` (IPv4), or null for anything else. */
export function parseConntrackLine(line: string): CtFlow | null {
  const f = line.trim().split(/\s+/);
  if (f.length < 4 || !/^(tcp|udp|icmp|sctp|udplite|dccp|gre|unknown)$/.test(f[0]!)) return null;
  const proto = Number(f[1]);
  const first = f.findIndex((x) => x.startsWith('src='));
  const second = f.findIndex((x, i) => i > first && x.startsWith('src='));
  if (first < 0 || second < 0 || !Number.isInteger(proto)) return null;
  const orig = tuple(f.slice(0, second), first);
  const reply = tuple(f, second);
  if (orig === null || reply === null) return null;
  const origText = f.slice(first, second).filter((x) => /^(src|dst|sport|dport)=/.test(x));
  const flag: Record<string, string> = {
    src: '--orig-src',
    dst: '--orig-dst',
    sport: '--orig-port-src',
    dport: '--orig-port-dst',
  };
  const deleteArgs = [
    '-p',
    f[0]!,
    ...origText.flatMap((x) => {
      const [k, v] = x.split('=');
      return [flag[k!]!, v!];
    }),
  ];
  return { proto, orig, reply, deleteArgs };
}

function holds(c: Cond, proto: number, t: CtTuple): boolean {
  switch (c.kind) {
    case 'dev':
      return true;
    case 'proto':
      return c.proto === proto;
    case 'ip': {
      const a = c.pos === 'src' ? t.src : t.dst;
      const inside = a >= c.lo && a <= c.hi;
      return c.op === 'eq' ? inside : !inside;
    }
    case 'ip6':
      // The tuples read here are IPv4 (Liqo writes ip tables only): an IPv6 match never holds.
      return false;
    case 'port': {
      const p = c.pos === 'src' ? t.sport : t.dport;
      const inside = p !== undefined && p >= c.lo && p <= c.hi;
      return c.op === 'eq' ? inside : !inside;
    }
  }
}

/** The notrack rules' conditions of `t` (one list per rule); empty when it has none. */
export function notrackConds(t: RuleTable): Cond[][] {
  return t.chains.flatMap((c) =>
    c.rules.filter((r) => r.kind === 'filter' && r.action.type === 'notrack').map((r) => [...r.conds]),
  );
}

export function flowMatchesNotrack(flow: CtFlow, rules: readonly (readonly Cond[])[]): boolean {
  return rules.some((conds) => [flow.orig, flow.reply].some((t) => conds.every((c) => holds(c, flow.proto, t))));
}
