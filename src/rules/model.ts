/**
 * One rule model with the semantics Liqo's data plane gives a FirewallConfiguration when it
 * renders it into nftables (liqotech/liqo pkg/firewall): a table of base chains, each attached
 * at a hook with a priority and a policy; rules evaluated in order, first terminal verdict wins.
 *
 * Semantics kept from Liqo's rendering (they differ from a naive reading of the CRD):
 * - a chain's rules come from the list matching its type only (filter → filterRules,
 *   nat → natRules, route → routeRules); the other lists are ignored;
 * - a table's family says which packets it sees: `ip` (IPV4) IPv4 only, `ip6` (IPV6) IPv6 only;
 *   addresses are the family's (IPv4: 4 bytes at network-header offset 12/16; IPv6: nft's `ip6
 *   saddr` / `ip6 daddr`), NAT writes them (a prefix target maps 1:1, host bits kept);
 * - `proto` always compares with eq (the match's op is not applied to it), port ranges always
 *   compare start ≤ port ≤ end (op not applied); dev, single IP, subnet, IP range and single
 *   port use the op;
 * - ports are read at transport-header offset 0/2 whatever the protocol (no dependency is
 *   added), so for ICMP they read type·code and the checksum; with no transport header
 *   (non-first fragment) the match fails, for neq too;
 * - a packet without an interface (oifname before routing, iifname of the router's own
 *   packets) has the empty name, as the kernel's meta: a dev eq match fails there, neq holds;
 * - a filter rule without an action only counts; ctmark / metamarkfromctmark / tcpmssclamp /
 *   notrack do not end evaluation; accept ends the chain (later chains at the hook still run),
 *   drop and reject end the packet;
 * - nat chains run for the first packet of a connection only; `masquerade` is source NAT to the
 *   output interface's address; a subnet `to` maps the address onto that prefix.
 * Pure data; no I/O.
 */

export const HOOKS = ['prerouting', 'input', 'forward', 'output', 'postrouting'] as const;
export type HookName = (typeof HOOKS)[number];

export type ChainType = 'filter' | 'nat' | 'route';
export type Policy = 'accept' | 'drop';
export type MatchOp = 'eq' | 'neq';
export type Position = 'src' | 'dst';
export type TableFamily = 'ip' | 'ip6';

/** One condition; a CRD `match` entry becomes one to four of these (proto, dev, ip, port). */
export type Cond =
  | { readonly kind: 'proto'; readonly proto: number }
  | { readonly kind: 'dev'; readonly dir: 'in' | 'out'; readonly op: MatchOp; readonly name: string }
  /** Address in [lo, hi] (unsigned 32-bit): an IP is lo = hi, a subnet its first/last address. */
  | {
      readonly kind: 'ip';
      readonly pos: Position;
      readonly op: MatchOp;
      readonly lo: number;
      readonly hi: number;
      readonly text: string;
    }
  /** IPv6 address in a prefix (ip6 tables): network bytes (host bits zero) and length (128: one address). */
  | {
      readonly kind: 'ip6';
      readonly pos: Position;
      readonly op: MatchOp;
      readonly net: Uint8Array;
      readonly prefixLen: number;
      readonly text: string;
    }
  | { readonly kind: 'port'; readonly pos: Position; readonly op: MatchOp; readonly lo: number; readonly hi: number };

export type FilterAction =
  | { readonly type: 'none' }
  | { readonly type: 'accept' }
  | { readonly type: 'drop' }
  | { readonly type: 'reject' }
  | { readonly type: 'ctmark'; readonly mark: number }
  | { readonly type: 'metamarkfromctmark' }
  /** mss 0 (value "0" or none): nft `rt mtu`, the route's MTU − 40 (mss.ts); else lowered to `mss`. */
  | { readonly type: 'tcpmssclamp'; readonly mss: number }
  | { readonly type: 'notrack' }
  /**
   * Stateless source rewrite (nft `ip saddr set`; not in Liqo's CRD: the YAML translation's,
   * src/rules/from-nat.ts). Does not end evaluation. Conntrack does not see it: only for packets
   * that never create a connection (ICMP errors).
   */
  | { readonly type: 'setsrc'; readonly addr: number; readonly text: string };

export type NatAction =
  | {
      readonly type: 'dnat' | 'snat';
      /** IPv4 target (0 in ip6 tables). */
      readonly addr: number;
      /** 32 (IPv4) or 128 (IPv6): one address; less: a prefix mapped 1:1. */
      readonly prefixLen: number;
      readonly text: string;
      /** IPv6 target, host bits zero (ip6 tables only). */
      readonly addr6?: Uint8Array;
    }
  | { readonly type: 'masquerade' };

export interface FilterRule {
  readonly kind: 'filter';
  readonly name: string;
  readonly conds: readonly Cond[];
  readonly counter: boolean;
  readonly action: FilterAction;
}

export interface NatRule {
  readonly kind: 'nat';
  readonly name: string;
  readonly conds: readonly Cond[];
  readonly action: NatAction;
}

/**
 * A table, chain or rule name as one segment of a rule id (`<namespace>/<object>/<table>/<chain>/<rule>`):
 * '%' and '/' escaped as %25 and %2F, since nft names (and the YAML translation's, which carry
 * CIDRs) may contain '/'. Kubernetes names cannot, so the object part is not escaped.
 */
export function ruleIdPart(name: string): string {
  return name.includes('/') || name.includes('%') ? name.replaceAll('%', '%25').replaceAll('/', '%2F') : name;
}

/** The inverse of ruleIdPart. */
export function ruleIdName(part: string): string {
  return part.includes('%') ? part.replaceAll('%2F', '/').replaceAll('%25', '%') : part;
}

/** A route rule (chain type route): re-routes with a mark; kept, evaluated as "no verdict". */
export interface RouteRule {
  readonly kind: 'route';
  readonly name: string;
  readonly conds: readonly Cond[];
}

export type Rule = FilterRule | NatRule | RouteRule;

export interface Chain {
  readonly name: string;
  readonly hook: HookName;
  readonly type: ChainType;
  readonly priority: number;
  readonly policy: Policy;
  readonly rules: readonly Rule[];
}

export interface RuleTable {
  /** The FirewallConfiguration's namespace/name (for errors and counters). */
  readonly object: string;
  readonly name: string;
  /** nft family: `ip` sees IPv4 packets only, `ip6` IPv6 packets only. */
  readonly family: TableFamily;
  readonly chains: readonly Chain[];
}

export function ipToNumber(text: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text.trim());
  if (!m) return null;
  let n = 0;
  for (let i = 1; i <= 4; i++) {
    const b = Number(m[i]);
    if (b > 255) return null;
    n = n * 256 + b;
  }
  return n;
}

export function numberToIp(n: number): string {
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}
