/**
 * Policy routing: the small RIB behind Liqo's RouteConfiguration (networking.liqo.io/v1beta1,
 * spec.table.rules[] with iif/src/dst/fwmark/priority and per-rule routes dst → gw/dev).
 *
 * Semantics follow Linux policy routing (ip-rule(8)): rules are tried in ascending priority
 * (ties in insertion order); a rule whose selectors all match sends the lookup to its table; if
 * that table has no matching route the search CONTINUES with the next rule. Selectors: input id
 * (`iif`, an opaque number naming the interface/tunnel the packet came from), source prefix,
 * destination prefix, firewall mark. A rule with a src or dst prefix only matches packets of
 * that prefix's family.
 *
 * Mapping a RouteConfiguration: Liqo puts every rule and every route of one RouteConfiguration
 * into the single table `spec.table.name`, so: addTable(name); for each rule addRule({priority,
 * iif, src, dst, fwmark, table: name}); for each of its routes addRoute(name, route.dst, hop)
 * where `hop` is whatever the caller needs (gw/dev/peer). Not modelled: `oif` (only meaningful for
 * locally generated traffic in the kernel), route scope/onlink/src (kernel neighbour details).
 *
 * route() reads addresses in place and allocates nothing; all other methods are control-plane.
 */

import { type Prefix, parsePrefix, prefixContains } from '../packet/addr.js';
import { IPV4_DST_OFFSET, IPV4_SRC_OFFSET } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_SRC_OFFSET } from '../packet/ipv6.js';
import { PrefixTable } from './table.js';

export type TableId = string | number;

/** A prefix as a parsed value or as text ("10.0.0.0/16"); text is parsed with host bits zeroed. */
export type PrefixLike = Prefix | string;

export interface RuleSpec {
  /** Lower is tried first (Linux convention). */
  priority: number;
  /** Input interface/tunnel id; absent = any. */
  iif?: number;
  src?: PrefixLike;
  dst?: PrefixLike;
  /** Firewall mark compared with the `mark` passed to route(); absent = any. */
  fwmark?: number;
  table: TableId;
}

/** A rule as stored (prefixes parsed). */
export interface Rule {
  readonly priority: number;
  readonly iif: number | undefined;
  readonly src: Prefix | undefined;
  readonly dst: Prefix | undefined;
  readonly fwmark: number | undefined;
  readonly table: TableId;
  /** 0 = both families, else 4 or 6 (from src/dst). */
  readonly family: 0 | 4 | 6;
}

/** A configuration mistake in the routing model (unknown table, mixed families, …). */
export class RouteConfigError extends Error {
  override readonly name = 'RouteConfigError';
}

class RouteTable<N> {
  readonly v4 = new PrefixTable<N>(4);
  readonly v6 = new PrefixTable<N>(6);
  constructor(readonly id: TableId) {}
}

function toPrefix(p: PrefixLike): Prefix {
  return typeof p === 'string' ? parsePrefix(p) : p;
}

export class Router<N> {
  private readonly tables = new Map<TableId, RouteTable<N>>();
  /** Sorted by priority, stable. Parallel array of resolved tables for the hot path. */
  private rules: Rule[] = [];
  private ruleTables: RouteTable<N>[] = [];

  /** Create a table (idempotent). */
  addTable(id: TableId): void {
    if (!this.tables.has(id)) this.tables.set(id, new RouteTable<N>(id));
  }

  hasTable(id: TableId): boolean {
    return this.tables.has(id);
  }

  /** Remove a table and every rule pointing at it. Returns whether it existed. */
  removeTable(id: TableId): boolean {
    if (!this.tables.delete(id)) return false;
    this.setRules(this.rules.filter((r) => r.table !== id));
    return true;
  }

  /** Add a rule. Throws RouteConfigError for an unknown table or src/dst of different families. */
  addRule(spec: RuleSpec): Rule {
    if (!this.tables.has(spec.table))
      throw new RouteConfigError(
        `rule priority ${spec.priority}: table ${String(spec.table)} does not exist (addTable first)`,
      );
    if (!Number.isInteger(spec.priority) || spec.priority < 0)
      throw new RouteConfigError(`rule priority ${spec.priority} must be a non-negative integer`);
    const src = spec.src === undefined ? undefined : toPrefix(spec.src);
    const dst = spec.dst === undefined ? undefined : toPrefix(spec.dst);
    if (src !== undefined && dst !== undefined && src.family !== dst.family) {
      throw new RouteConfigError(`rule priority ${spec.priority}: src and dst prefixes are of different IP families`);
    }
    const family = src?.family ?? dst?.family ?? 0;
    const rule: Rule = {
      priority: spec.priority,
      iif: spec.iif,
      src,
      dst,
      fwmark: spec.fwmark,
      table: spec.table,
      family,
    };
    const next = this.rules.slice();
    let i = next.length;
    while (i > 0 && next[i - 1]!.priority > rule.priority) i--;
    next.splice(i, 0, rule);
    this.setRules(next);
    return rule;
  }

  /** Remove a rule previously returned by addRule. */
  removeRule(rule: Rule): boolean {
    const i = this.rules.indexOf(rule);
    if (i < 0) return false;
    const next = this.rules.slice();
    next.splice(i, 1);
    this.setRules(next);
    return true;
  }

  /** Rules in evaluation order (a copy). */
  listRules(): Rule[] {
    return this.rules.slice();
  }

  /** Add or replace the route for `prefix` in `table`. */
  addRoute(table: TableId, prefix: PrefixLike, nextHop: N): void {
    const p = toPrefix(prefix);
    const t = this.table(table);
    (p.family === 4 ? t.v4 : t.v6).insert(p.addr, p.prefixLen, nextHop);
  }

  removeRoute(table: TableId, prefix: PrefixLike): boolean {
    const p = toPrefix(prefix);
    const t = this.table(table);
    return (p.family === 4 ? t.v4 : t.v6).remove(p.addr, p.prefixLen);
  }

  /** Remove every route whose next hop === nextHop, in all tables. Returns the count. */
  removeNextHop(nextHop: N): number {
    let n = 0;
    for (const t of this.tables.values()) n += t.v4.removeValue(nextHop) + t.v6.removeValue(nextHop);
    return n;
  }

  /** The PrefixTable of one family of a table (for direct use, e.g. listing routes). */
  prefixTable(table: TableId, family: 4 | 6): PrefixTable<N> {
    const t = this.table(table);
    return family === 4 ? t.v4 : t.v6;
  }

  /**
   * Route the IP packet whose header starts at buf[ipOff] and arrived on input `iif`, with
   * firewall mark `mark`. Returns the next hop of the first rule whose selectors match and whose
   * table has a route for the destination, or undefined (no route: drop and count). The caller
   * has validated the IP header (at least the fixed header bytes are present). No allocation.
   */
  route(buf: Uint8Array, ipOff: number, iif: number, mark = 0): N | undefined {
    const version = buf[ipOff]! >>> 4;
    let srcOff: number;
    let dstOff: number;
    if (version === 4) {
      srcOff = ipOff + IPV4_SRC_OFFSET;
      dstOff = ipOff + IPV4_DST_OFFSET;
    } else if (version === 6) {
      srcOff = ipOff + IPV6_SRC_OFFSET;
      dstOff = ipOff + IPV6_DST_OFFSET;
    } else {
      return undefined;
    }
    const rules = this.rules;
    const tables = this.ruleTables;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      if (r.family !== 0 && r.family !== version) continue;
      if (r.iif !== undefined && r.iif !== iif) continue;
      if (r.fwmark !== undefined && r.fwmark !== mark) continue;
      if (r.src !== undefined && !prefixContains(r.src, buf, srcOff)) continue;
      if (r.dst !== undefined && !prefixContains(r.dst, buf, dstOff)) continue;
      const t = tables[i]!;
      const hop = version === 4 ? t.v4.lookup(buf, dstOff) : t.v6.lookup(buf, dstOff);
      if (hop !== undefined) return hop;
    }
    return undefined;
  }

  private table(id: TableId): RouteTable<N> {
    const t = this.tables.get(id);
    if (t === undefined) throw new RouteConfigError(`table ${String(id)} does not exist (addTable first)`);
    return t;
  }

  /** Swap in a new rule list; route() always sees a consistent (rules, tables) pair. */
  private setRules(next: Rule[]): void {
    const tables = next.map((r) => this.tables.get(r.table)!);
    this.rules = next;
    this.ruleTables = tables;
  }
}
