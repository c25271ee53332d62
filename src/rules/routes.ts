/**
 * RouteConfiguration (networking.liqo.io/v1beta1, plain JSON) → the policy router of
 * src/route/policy.ts, with the semantics Liqo's route controller gives it in the kernel
 * (liqotech/liqo pkg/route):
 * - one kernel table per RouteConfiguration, its id derived from the table name (below); every
 *   rule of the object looks up that table and every rule's routes go into it;
 * - a rule without priority (or 0) gets the kernel's default preference: one less than the
 *   preference of the first rule after `local` (32765 below `main` at first, then decreasing);
 * - a rule with `oif` never matches forwarded traffic (the kernel compares it with the flow's
 *   output interface, unset for a packet being routed in): such rules are kept out;
 * - route scope / src / onlink only steer the kernel's neighbour and source choice: parsed, not
 *   used for the lookup.
 * Pure; errors are RouteParseError naming object, rule, route and field.
 */
import { createHash } from 'node:crypto';
import { parsePrefix, type Prefix } from '../packet/addr.js';
import { type Router as PolicyRouter } from '../route/policy.js';
import { ipToNumber } from './model.js';

export class RouteParseError extends Error {
  constructor(
    readonly object: string,
    readonly where: string,
    readonly field: string,
    readonly problem: string,
  ) {
    super(`RouteConfiguration ${object}${where ? ` ${where}` : ''}: ${field}: ${problem}`);
    this.name = 'RouteParseError';
  }
}

export interface RouteHop {
  readonly dev: string | undefined;
  readonly gw: string | undefined;
}

export interface RouteSpec {
  readonly dst: Prefix;
  readonly hop: RouteHop;
  /** Kept for the kernel (the node role installs routes with them); not used by the lookup. */
  readonly scope?: string;
  readonly src?: string;
  readonly onlink?: boolean;
}

/** Liqo's route scopes (networking.liqo.io/v1beta1 Route .scope). */
export const ROUTE_SCOPES = ['global', 'link', 'host', 'site', 'nowhere'] as const;

export interface PolicyRuleSpec {
  /** undefined: the kernel's default preference, assigned when applied. */
  readonly priority: number | undefined;
  readonly iif: string | undefined;
  readonly oif: string | undefined;
  readonly src: Prefix | undefined;
  readonly dst: Prefix | undefined;
  readonly fwmark: number | undefined;
  readonly routes: readonly RouteSpec[];
}

export interface RouteConfigSpec {
  readonly object: string;
  readonly table: string;
  readonly tableId: number;
  readonly rules: readonly PolicyRuleSpec[];
}

/** Liqo's table id for a table name: the first four bytes of SHA-256, adjusted as Liqo does (never 0 nor a reserved id). */
export function liqoTableId(name: string): number {
  const h = createHash('sha256').update(name).digest();
  const b3 = h[3]! >>> 1;
  const b1 = h[1]! | 1;
  return ((b3 << 24) | (h[2]! << 16) | (b1 << 8) | h[0]!) >>> 0;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function prefixOf(o: string, where: string, field: string, v: unknown): Prefix | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new RouteParseError(o, where, field, 'must be a string');
  try {
    return parsePrefix(v.includes('/') ? v : `${v}/${v.includes(':') ? 128 : 32}`);
  } catch {
    throw new RouteParseError(o, where, field, `'${v}' is not an address or CIDR`);
  }
}

function optString(o: string, where: string, field: string, v: unknown): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new RouteParseError(o, where, field, 'must be a string');
  return v;
}

export function parseRouteConfiguration(rc: unknown): RouteConfigSpec {
  let o = '?';
  if (!isObj(rc)) throw new RouteParseError(o, '', 'object', 'must be an object');
  const md = isObj(rc.metadata) ? rc.metadata : {};
  o = `${typeof md.namespace === 'string' ? `${md.namespace}/` : ''}${typeof md.name === 'string' ? md.name : '?'}`;
  if (!isObj(rc.spec) || !isObj(rc.spec.table)) throw new RouteParseError(o, '', 'spec.table', 'missing');
  const t = rc.spec.table;
  if (typeof t.name !== 'string' || t.name === '') throw new RouteParseError(o, '', 'spec.table.name', 'missing');
  if (!Array.isArray(t.rules)) throw new RouteParseError(o, '', 'spec.table.rules', 'must be a list');
  const rules = t.rules.map((r: unknown, ri: number): PolicyRuleSpec => {
    const w = `rule #${ri}`;
    if (!isObj(r)) throw new RouteParseError(o, w, 'rule', 'must be an object');
    let priority: number | undefined;
    if (r.priority !== undefined && r.priority !== null) {
      if (typeof r.priority !== 'number' || !Number.isInteger(r.priority) || r.priority < 0 || r.priority > 0xffffffff)
        throw new RouteParseError(o, w, 'priority', 'must be a non-negative integer');
      priority = r.priority > 0 ? r.priority : undefined;
    }
    let fwmark: number | undefined;
    if (r.fwmark !== undefined && r.fwmark !== null) {
      if (typeof r.fwmark !== 'number' || !Number.isInteger(r.fwmark) || r.fwmark < 0 || r.fwmark > 0xffffffff)
        throw new RouteParseError(o, w, 'fwmark', 'must be an integer in 0..2^32-1');
      fwmark = r.fwmark;
    }
    const src = prefixOf(o, w, 'src', r.src);
    const dst = prefixOf(o, w, 'dst', r.dst);
    if (src && dst && src.family !== dst.family)
      throw new RouteParseError(o, w, 'dst', 'src and dst are of different IP families');
    if (!Array.isArray(r.routes)) throw new RouteParseError(o, w, 'routes', 'must be a list');
    const routes = r.routes.map((x: unknown, xi: number): RouteSpec => {
      const wr = `${w} route #${xi}`;
      if (!isObj(x)) throw new RouteParseError(o, wr, 'route', 'must be an object');
      const d = prefixOf(o, wr, 'dst', x.dst);
      if (!d) throw new RouteParseError(o, wr, 'dst', 'missing');
      const gw = optString(o, wr, 'gw', x.gw);
      if (gw !== undefined && ipToNumber(gw) === null)
        throw new RouteParseError(o, wr, 'gw', `'${gw}' is not an IPv4 address`);
      const dev = optString(o, wr, 'dev', x.dev);
      if (gw === undefined && dev === undefined) throw new RouteParseError(o, wr, 'dev', 'a route needs a gw or a dev');
      const scope = optString(o, wr, 'scope', x.scope);
      if (scope !== undefined && !(ROUTE_SCOPES as readonly string[]).includes(scope))
        throw new RouteParseError(o, wr, 'scope', `must be one of ${ROUTE_SCOPES.join(', ')}`);
      const src = optString(o, wr, 'src', x.src);
      if (src !== undefined && ipToNumber(src) === null)
        throw new RouteParseError(o, wr, 'src', `'${src}' is not an IPv4 address`);
      if (x.onlink !== undefined && x.onlink !== null && typeof x.onlink !== 'boolean')
        throw new RouteParseError(o, wr, 'onlink', 'must be a boolean');
      return {
        dst: d,
        hop: { dev, gw },
        ...(scope !== undefined ? { scope } : {}),
        ...(src !== undefined ? { src } : {}),
        ...(x.onlink === true ? { onlink: true } : {}),
      };
    });
    return {
      priority,
      iif: optString(o, w, 'iif', r.iif),
      oif: optString(o, w, 'oif', r.oif),
      src,
      dst,
      fwmark,
      routes,
    };
  });
  return { object: o, table: t.name, tableId: liqoTableId(t.name), rules };
}

/** Preferences of the kernel's built-in rules (local, main, default). */
export const KERNEL_MAIN_PREF = 32766;

/**
 * Installs RouteConfigurations, in order, into a policy router whose tables are Liqo table ids.
 * `iifId` names input interfaces as the router's `iif` numbers. Rules without priority get the
 * kernel's default preference (computed over the rules added so far plus `main`).
 */
export function installRouteConfigurations(
  router: PolicyRouter<RouteHop>,
  specs: readonly RouteConfigSpec[],
  iifId: (name: string) => number,
): void;
/** The same with each route's next hop mapped by `hopOf` (e.g. to the lane it leaves by). */
export function installRouteConfigurations<N>(
  router: PolicyRouter<N>,
  specs: readonly RouteConfigSpec[],
  iifId: (name: string) => number,
  hopOf: (h: RouteHop) => N,
): void;
export function installRouteConfigurations<N>(
  router: PolicyRouter<N>,
  specs: readonly RouteConfigSpec[],
  iifId: (name: string) => number,
  hopOf?: (h: RouteHop) => N,
): void {
  const prefs: number[] = [KERNEL_MAIN_PREF, KERNEL_MAIN_PREF + 1];
  for (const s of specs) {
    router.addTable(s.tableId);
    for (const r of s.rules) {
      let pref = r.priority;
      if (pref === undefined) {
        // Kernel (fib_default_rule_pref): one less than the first rule after `local` (pref 0).
        const first = Math.min(...prefs.filter((p) => p > 0));
        pref = first > 0 ? first - 1 : 0;
      }
      prefs.push(pref);
      for (const x of r.routes) router.addRoute(s.tableId, x.dst, hopOf === undefined ? (x.hop as N) : hopOf(x.hop));
      if (r.oif !== undefined) continue;
      router.addRule({
        priority: pref,
        table: s.tableId,
        ...(r.iif !== undefined ? { iif: iifId(r.iif) } : {}),
        ...(r.src !== undefined ? { src: r.src } : {}),
        ...(r.dst !== undefined ? { dst: r.dst } : {}),
        ...(r.fwmark !== undefined ? { fwmark: r.fwmark } : {}),
      });
    }
  }
}
