/**
 * The kernel state Weft owns, as data, and its comparison with what the kernel reports — no I/O.
 *
 * Owners (iproute.ts KernelState for a TUN's link, addresses and main-table routes;
 * node/fabric-kernel.ts for Liqo's policy rules, route tables and nftables tables) describe what
 * they installed as KernelItems. reconcile.ts reads the kernel (`ip -j`, `nft list tables`),
 * parses it here into a KernelSnapshot, and restores the items missingItems() returns with each
 * item's own restore command.
 *
 * Only absence is repaired: what the kernel has beyond the description is not Weft's to remove.
 * A route counts as present when its destination is in the item's table with the item's device,
 * gateway and source (those given); a rule when one with the same selectors and table exists.
 */

/** An `ip` argument list (without `ip` and `-n NS`) or an nft script that puts an item back. */
export type RestoreCommand =
  { readonly tool: 'ip'; readonly args: readonly string[] } | { readonly tool: 'nft'; readonly script: string };

export interface LinkItem {
  readonly kind: 'link';
  readonly dev: string;
}
export interface AddrItem {
  readonly kind: 'addr';
  readonly dev: string;
  /** Canonical "addr/len". */
  readonly cidr: string;
}
/** A route wanted: the fields the kernel reports of one (ActualRoute), in a table. */
export interface RouteItem extends ActualRoute {
  readonly kind: 'route';
  /** 'main' or a numeric table id as text. */
  readonly table: string;
  readonly restore: RestoreCommand;
}
/** A rule wanted: the fields the kernel reports of one (ActualRule). */
export interface RuleItem extends ActualRule {
  readonly kind: 'rule';
  readonly restore: RestoreCommand;
}
export interface NftTableItem {
  readonly kind: 'nft';
  readonly family: string;
  readonly name: string;
  readonly restore: RestoreCommand;
}
export type KernelItem = LinkItem | AddrItem | RouteItem | RuleItem | NftTableItem;

/** What the kernel reported. A device absent from `links` does not exist. */
export interface KernelSnapshot {
  readonly links: ReadonlyMap<string, { readonly up: boolean; readonly addrs: ReadonlySet<string> }>;
  /** Routes by table ('main' holds only those queried by device). */
  readonly routes: ReadonlyMap<string, readonly ActualRoute[]>;
  readonly rules: readonly ActualRule[];
  /** "family name" of every nftables table; null when not read. */
  readonly nft: ReadonlySet<string> | null;
}

export interface ActualRoute {
  /** Canonical prefix ("10.0.0.0/16"); host routes as "/32" / "/128". */
  readonly dst: string;
  readonly dev?: string;
  readonly via?: string;
  readonly src?: string;
}
export interface ActualRule {
  readonly table: string;
  readonly pref?: number;
  readonly iif?: string;
  readonly oif?: string;
  readonly from?: string;
  readonly to?: string;
  readonly fwmark?: number;
}

/** What to read: one `ip -batch` line each, in this order, then `nft list tables` if `nft`. */
export interface KernelQueries {
  readonly ip: readonly string[];
  /** What each `ip` line answers, parallel to `ip`. */
  readonly what: readonly (
    { kind: 'dev'; dev: string } | { kind: 'routes'; table: string; dev?: string } | { kind: 'rules' }
  )[];
  readonly nft: boolean;
}

/** The reads that cover `items` (devices once each, main-table routes by device, other tables whole). */
export function queriesFor(items: readonly KernelItem[]): KernelQueries {
  const devs = new Set<string>();
  const mainDevs = new Set<string>();
  const tables = new Set<string>();
  let rules = false;
  let nft = false;
  for (const it of items) {
    if (it.kind === 'link' || it.kind === 'addr') devs.add(it.dev);
    else if (it.kind === 'route') {
      if (it.table === 'main' && it.dev !== undefined) mainDevs.add(it.dev);
      else tables.add(it.table);
    } else if (it.kind === 'rule') rules = true;
    else nft = true;
  }
  const ip: string[] = [];
  const what: KernelQueries['what'][number][] = [];
  for (const d of devs) {
    ip.push(`addr show dev ${d}`);
    what.push({ kind: 'dev', dev: d });
  }
  for (const d of mainDevs) {
    ip.push(`route show table main dev ${d}`);
    what.push({ kind: 'routes', table: 'main', dev: d });
  }
  for (const t of tables) {
    ip.push(`route show table ${t}`);
    what.push({ kind: 'routes', table: t });
  }
  if (rules) {
    ip.push('rule show');
    what.push({ kind: 'rules' });
  }
  return { ip, what, nft };
}

/** A prefix as "addr/len" (`ip -j` prints host routes without a length). */
function prefixText(dst: string, family6: boolean): string {
  if (dst.includes('/')) return dst;
  if (dst === 'default') return family6 ? '::/0' : '0.0.0.0/0';
  return `${dst}/${dst.includes(':') ? 128 : 32}`;
}

type Json = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function arrayOf(line: string): Json[] {
  const v = JSON.parse(line.trim() === '' ? '[]' : line) as unknown;
  if (!Array.isArray(v)) throw new SyntaxError('expected a JSON array');
  return v.filter((x): x is Json => typeof x === 'object' && x !== null);
}

/**
 * Parses the output of `ip -j -batch -` for `q` (one JSON array per line, in query order) and the
 * text of `nft list tables` (null when not read). Throws SyntaxError on output it cannot read.
 */
export function parseSnapshot(q: KernelQueries, ipOut: string, nftOut: string | null): KernelSnapshot {
  const lines = ipOut.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== q.ip.length)
    throw new SyntaxError(`ip printed ${lines.length} answers for ${q.ip.length} queries`);
  const links = new Map<string, { up: boolean; addrs: Set<string> }>();
  const routes = new Map<string, ActualRoute[]>();
  const rules: ActualRule[] = [];
  q.what.forEach((w, i) => {
    const arr = arrayOf(lines[i]!);
    if (w.kind === 'dev') {
      const l = arr[0];
      if (l === undefined) return;
      const flags = Array.isArray(l.flags) ? (l.flags as unknown[]) : [];
      const addrs = new Set<string>();
      for (const a of Array.isArray(l.addr_info) ? (l.addr_info as Json[]) : []) {
        const local = str(a.local);
        if (local !== undefined && typeof a.prefixlen === 'number') addrs.add(`${local}/${a.prefixlen}`);
      }
      links.set(w.dev, { up: flags.includes('UP'), addrs });
    } else if (w.kind === 'routes') {
      const list = routes.get(w.table) ?? [];
      for (const r of arr) {
        const dst = str(r.dst);
        if (dst === undefined) continue;
        const gw = str(r.gateway);
        const dev = str(r.dev) ?? w.dev;
        const src = str(r.prefsrc);
        list.push({
          dst: prefixText(dst, (gw ?? dst).includes(':')),
          ...(dev === undefined ? {} : { dev }),
          ...(gw === undefined ? {} : { via: gw }),
          ...(src === undefined ? {} : { src }),
        });
      }
      routes.set(w.table, list);
    } else {
      for (const r of arr) {
        const table = str(r.table);
        if (table === undefined) continue;
        const pref = typeof r.priority === 'number' ? r.priority : undefined;
        const src = str(r.src);
        const dst = str(r.dst);
        const mark = str(r.fwmark);
        rules.push({
          table,
          ...(pref === undefined ? {} : { pref }),
          ...(str(r.iif) === undefined ? {} : { iif: str(r.iif)! }),
          ...(str(r.oif) === undefined ? {} : { oif: str(r.oif)! }),
          ...(src === undefined || src === 'all'
            ? {}
            : { from: `${src}/${typeof r.srclen === 'number' ? r.srclen : src.includes(':') ? 128 : 32}` }),
          ...(dst === undefined || dst === 'all'
            ? {}
            : { to: `${dst}/${typeof r.dstlen === 'number' ? r.dstlen : dst.includes(':') ? 128 : 32}` }),
          ...(mark === undefined ? {} : { fwmark: Number(mark) }),
        });
      }
    }
  });
  let nft: Set<string> | null = null;
  if (nftOut !== null) {
    nft = new Set();
    for (const m of nftOut.matchAll(/^table (\S+) (\S+)/gm)) nft.add(`${m[1]} ${m[2]}`);
  }
  return { links, routes, rules, nft };
}

function routePresent(it: RouteItem, s: KernelSnapshot): boolean {
  return (s.routes.get(it.table) ?? []).some(
    (r) =>
      r.dst === it.dst &&
      (it.dev === undefined || r.dev === it.dev) &&
      (it.via === undefined || r.via === it.via) &&
      (it.src === undefined || r.src === it.src),
  );
}

function rulePresent(it: RuleItem, s: KernelSnapshot): boolean {
  return s.rules.some(
    (r) =>
      r.table === it.table &&
      (it.pref === undefined || r.pref === it.pref) &&
      r.iif === it.iif &&
      r.oif === it.oif &&
      r.from === it.from &&
      r.to === it.to &&
      r.fwmark === it.fwmark,
  );
}

/**
 * The items of `desired` the snapshot lacks, in `desired`'s order except that links come first
 * and addresses before routes (a route's source must be an address the kernel owns). Items on
 * a device that does not exist are left out (nothing can restore them; see missingDevices).
 */
export function missingItems(desired: readonly KernelItem[], s: KernelSnapshot): KernelItem[] {
  const devOk = (d: string | undefined): boolean => d === undefined || s.links.has(d) || !tracked(desired, d);
  const out: KernelItem[] = [];
  for (const rank of [0, 1, 2] as const) {
    for (const it of desired) {
      if (rankOf(it) !== rank) continue;
      switch (it.kind) {
        case 'link': {
          const l = s.links.get(it.dev);
          if (l !== undefined && !l.up) out.push(it);
          break;
        }
        case 'addr': {
          const l = s.links.get(it.dev);
          if (l !== undefined && !l.addrs.has(it.cidr)) out.push(it);
          break;
        }
        case 'route':
          if (devOk(it.dev) && !routePresent(it, s)) out.push(it);
          break;
        case 'rule':
          if (devOk(it.iif) && devOk(it.oif) && !rulePresent(it, s)) out.push(it);
          break;
        case 'nft':
          if (s.nft !== null && !s.nft.has(`${it.family} ${it.name}`)) out.push(it);
          break;
      }
    }
  }
  return out;
}

const rankOf = (it: KernelItem): number => (it.kind === 'link' ? 0 : it.kind === 'addr' ? 1 : 2);
/** A device whose existence the snapshot knows (it has a link item). */
const tracked = (desired: readonly KernelItem[], dev: string): boolean =>
  desired.some((d) => d.kind === 'link' && d.dev === dev);

/** Devices described by link items that the kernel does not have. */
export function missingDevices(desired: readonly KernelItem[], s: KernelSnapshot): string[] {
  return desired.filter((d): d is LinkItem => d.kind === 'link' && !s.links.has(d.dev)).map((d) => d.dev);
}

/** The command that puts `it` back. */
export function restoreCommand(it: KernelItem): RestoreCommand {
  switch (it.kind) {
    case 'link':
      return { tool: 'ip', args: ['link', 'set', 'dev', it.dev, 'up'] };
    case 'addr':
      return {
        tool: 'ip',
        args: ['addr', 'replace', it.cidr, 'dev', it.dev, ...(it.cidr.includes(':') ? ['nodad'] : [])],
      };
    default:
      return it.restore;
  }
}

/** One short phrase naming `it` for the log ("route 10.71.0.0/16 dev liqo-tunnel"). */
export function describeItem(it: KernelItem): string {
  switch (it.kind) {
    case 'link':
      return `link ${it.dev} up`;
    case 'addr':
      return `address ${it.cidr} on ${it.dev}`;
    case 'route':
      return `route ${it.dst}${it.via === undefined ? '' : ` via ${it.via}`}${it.dev === undefined ? '' : ` dev ${it.dev}`}${it.table === 'main' ? '' : ` table ${it.table}`}`;
    case 'rule':
      return `rule${it.pref === undefined ? '' : ` pref ${it.pref}`}${it.iif === undefined ? '' : ` iif ${it.iif}`}${it.oif === undefined ? '' : ` oif ${it.oif}`}${it.from === undefined ? '' : ` from ${it.from}`}${it.to === undefined ? '' : ` to ${it.to}`}${it.fwmark === undefined ? '' : ` fwmark ${it.fwmark}`} lookup ${it.table}`;
    case 'nft':
      return `nftables table ${it.family} ${it.name}`;
  }
}
