/**
 * The node role's fabric objects in the node's kernel, the way Liqo's fabric installs them
 * (liqotech/liqo pkg/firewall, pkg/route) with the node-side Geneve interface replaced by the
 * agent's TUN:
 * - each FirewallConfiguration's kernel chains (rules/fabric-split.ts) as one nftables table,
 *   created or replaced in ONE nft transaction (`add table; delete table; table … {…}`), so a
 *   change never leaves the table half-built and other tables — and the conntrack entries of
 *   their flows — are not touched;
 * - each RouteConfiguration as Liqo's route controller does: table id from the table name
 *   (liqoTableId), per rule `ip rule add … lookup ID` (no pref: the kernel's default preference,
 *   as Liqo leaves it) and its routes `ip route replace … table ID`. A change adds what is new
 *   first, then removes what went (a route that stays is replaced in place). The first install
 *   of a table id clears rules and routes a crashed instance left for it (no duplicates).
 * Liqo also names its tables in /etc/iproute2/rt_tables; Weft does not write /etc (the ids are
 * what the kernel uses; `ip rule show` prints them as numbers).
 * A change the kernel refuses is a KernelRuleError / KernelRouteError naming object, chain or
 * rule, field and fix; that object's previous version stays in force (its table is untouched,
 * or its rules and routes are restored). clear() removes exactly what this instance installed.
 * All operations run one at a time, in call order.
 */
import { formatPrefix } from '../packet/addr.js';
import { ip, RouteCommandError } from '../kernel/iproute.js';
import { ConntrackCommandError, runConntrack, type ConntrackRunner } from '../kernel/conntrack.js';
import { NftCommandError, runNft, type NftRunner } from '../kernel/nft.js';
import { flowMatchesNotrack, notrackConds, parseConntrackLine } from '../rules/notrack-flows.js';
import type { KernelTable } from '../rules/fabric-split.js';
import type { KernelItem } from '../kernel/kernel-desired.js';
import type { RouteConfigSpec } from '../rules/routes.js';

export class KernelRuleError extends Error {
  override readonly name = 'KernelRuleError';
  /** `applied`: the table is in force, only the flush its notrack rules ask for failed. */
  constructor(
    readonly object: string,
    readonly chain: string,
    readonly rule: string,
    readonly field: string,
    readonly problem: string,
    readonly fix: string,
    readonly applied = false,
  ) {
    super(
      `FirewallConfiguration ${object}${chain ? ` chain ${chain}` : ''}${rule ? ` rule ${rule}` : ''}: ${field}: ${
        applied
          ? `in force, but the conntrack entries its notrack rules exempt could not be flushed: ${problem} (fix: ${fix})`
          : `the node's kernel refused it: ${problem} (fix: ${fix}); its previous version stays in force`
      }`,
    );
  }
}

export class KernelRouteError extends Error {
  override readonly name = 'KernelRouteError';
  constructor(
    readonly object: string,
    readonly where: string,
    readonly field: string,
    readonly problem: string,
    readonly fix: string,
  ) {
    super(
      `RouteConfiguration ${object} ${where}: ${field}: the node's kernel refused it: ${problem} (fix: ${fix}); its previous version stays in force`,
    );
  }
}

/** `ip` with its arguments, in `netns` (iproute.ts's runner; tests pass a fake). */
export type IpRunner = (args: readonly string[], netns?: string) => Promise<string>;

export interface FabricKernelOptions {
  readonly netns?: string;
  /** The agent's TUN, standing for every node-side Geneve interface. */
  readonly tun: string;
  /** The node-side Geneve interface names Liqo's objects use (InternalFabric .spec.interface.node.name). */
  readonly nodeDevs: () => ReadonlySet<string>;
  readonly nft?: NftRunner;
  readonly ip?: IpRunner;
  readonly conntrack?: ConntrackRunner;
}

interface Cmd {
  readonly args: readonly string[];
  readonly where: string;
  readonly field: string;
}

interface InstalledRoutes {
  readonly spec: RouteConfigSpec;
  readonly routes: readonly Cmd[];
  readonly rules: readonly Cmd[];
}

const GONE = [/No such process/i, /No such file or directory/i, /Cannot find device/i, /does not exist/i, /not found/i];

function nftFix(stderr: string): string {
  if (/ENOENT|not found/i.test(stderr) && !/Error:/.test(stderr))
    return 'install nftables (the `nft` tool) on the node';
  if (/Operation not supported|Protocol not supported|No such file or directory|Could not process rule/i.test(stderr)) {
    return 'the kernel lacks nf_tables or one of its expressions: load nf_tables, nft_chain_nat, nft_nat, nft_masq, nft_ct (modprobe) or use a kernel with them';
  }
  if (/Operation not permitted/i.test(stderr))
    return 'needs CAP_NET_ADMIN: run as root or add NET_ADMIN to the container';
  return 'correct the object so that nft accepts it';
}

function ipFix(stderr: string): string {
  if (/Cannot find device/i.test(stderr))
    return "the interface does not exist on this node (the InternalFabric's node interface maps to the agent's TUN; any other must exist)";
  if (/Nexthop has invalid gateway|Network is unreachable/i.test(stderr))
    return 'the gw must be reachable through a route of the same table (list it first) or of main';
  if (/Operation not permitted/i.test(stderr))
    return 'needs CAP_NET_ADMIN: run as root or add NET_ADMIN to the container';
  return 'correct the object so that `ip` accepts it';
}

export class FabricKernel {
  private readonly nft: NftRunner;
  private readonly ipRun: IpRunner;
  private readonly ct: ConntrackRunner;
  private readonly tables = new Map<string, KernelTable>();
  private readonly routes = new Map<string, InstalledRoutes>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: FabricKernelOptions) {
    this.nft = o.nft ?? runNft;
    this.ipRun = o.ip ?? ((args, netns) => ip(args, netns));
    this.ct = o.conntrack ?? runConntrack;
  }

  /** The kernel tables in force, by object. */
  firewall(): ReadonlyMap<string, KernelTable> {
    return this.tables;
  }

  /** The RouteConfigurations in force in the kernel, by object. */
  routeSpecs(): RouteConfigSpec[] {
    return [...this.routes.values()].map((r) => r.spec);
  }

  /** Runs `f` between this instance's operations (reconcile.ts reads and restores in it). */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    return this.serial(f);
  }

  /**
   * What this instance installed, as data (ports/kernel-desired.ts): each table, and each rule
   * and route with the command that installed it (so a restore repeats exactly that).
   */
  desired(): KernelItem[] {
    const out: KernelItem[] = [];
    for (const t of this.tables.values()) {
      const script = [`add table ip ${t.kernelName}`, `delete table ip ${t.kernelName}`, t.nft].join('\n');
      out.push({ kind: 'nft', family: 'ip', name: t.kernelName, restore: { tool: 'nft', script } });
    }
    for (const r of this.routes.values()) {
      for (const c of r.rules) out.push(ruleItem(c.args));
      for (const c of r.routes) out.push(routeItem(c.args));
    }
    return out;
  }

  /** Resolves when every operation asked for so far is done. */
  idle(): Promise<void> {
    return this.serial(async () => {});
  }

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.queue.then(f, f);
    this.queue = p.catch(() => {});
    return p;
  }

  /** Makes the kernel's tables exactly `want` (by object); returns the objects refused. */
  syncFirewall(want: ReadonlyMap<string, KernelTable>): Promise<KernelRuleError[]> {
    return this.serial(async () => {
      const errors: KernelRuleError[] = [];
      for (const [k, t] of want) {
        const cur = this.tables.get(k);
        if (cur !== undefined && cur.nft === t.nft && cur.kernelName === t.kernelName) continue;
        // Replace in one transaction: `add` makes the delete valid when the table is new.
        const head = [`add table ip ${t.kernelName}`, `delete table ip ${t.kernelName}`];
        const drop = cur !== undefined && cur.kernelName !== t.kernelName ? [`delete table ip ${cur.kernelName}`] : [];
        try {
          await this.nft([...drop, ...head, t.nft].join('\n'), this.o.netns);
          this.tables.set(k, t);
          const e = await this.flushNotracked(t);
          if (e !== null) errors.push(e);
        } catch (e) {
          if (!(e instanceof NftCommandError)) throw e;
          const line = e
            .lines()
            .map((n) => n - head.length - drop.length)
            .find((n) => n >= 0 && n < t.lines.length);
          const src = line === undefined ? { chain: '', rule: '', field: 'spec.table' } : t.lines[line]!;
          const problem =
            e.stderr
              .split('\n')
              .find((l) => /Error/.test(l))
              ?.replace(/^[^:]*:\d+:[\d-]+: /, '') ?? e.stderr.trim();
          errors.push(new KernelRuleError(t.object, src.chain, src.rule, src.field, problem, nftFix(e.stderr)));
        }
      }
      for (const [k, cur] of [...this.tables]) {
        if (want.has(k)) continue;
        try {
          await this.nft(`delete table ip ${cur.kernelName}`, this.o.netns);
        } catch (e) {
          if (!(e instanceof NftCommandError)) throw e;
          if (!/No such file or directory/i.test(e.stderr)) {
            errors.push(new KernelRuleError(cur.object, '', '', 'spec.table', e.stderr.trim(), nftFix(e.stderr)));
            continue;
          }
        }
        this.tables.delete(k);
      }
      return errors;
    });
  }

  /**
   * As Liqo after applying notrack rules: the tracked connections they would have exempted are
   * deleted (new rules do not affect existing entries). Returns the failure, if any.
   */
  private async flushNotracked(t: KernelTable): Promise<KernelRuleError | null> {
    const rules = notrackConds(t.table);
    if (rules.length === 0) return null;
    try {
      const out = await this.ct(['-L'], this.o.netns);
      for (const line of out.split('\n')) {
        const f = parseConntrackLine(line);
        if (f !== null && flowMatchesNotrack(f, rules)) await this.ct(['-D', ...f.deleteArgs], this.o.netns);
      }
      return null;
    } catch (e) {
      if (!(e instanceof ConntrackCommandError)) throw e;
      const fix = /ENOENT/.test(e.stderr)
        ? 'install conntrack (conntrack-tools) on the node'
        : 'check that the agent has CAP_NET_ADMIN';
      return new KernelRuleError(t.object, '', '', 'notrack', e.stderr.trim(), fix, true);
    }
  }

  private dev(name: string): string {
    return this.o.nodeDevs().has(name) ? this.o.tun : name;
  }

  private commands(s: RouteConfigSpec): { routes: Cmd[]; rules: Cmd[] } {
    const id = String(s.tableId);
    const routes: Cmd[] = [];
    const rules: Cmd[] = [];
    s.rules.forEach((r, ri) => {
      const args = ['rule', 'add'];
      if (r.priority !== undefined) args.push('pref', String(r.priority));
      if (r.iif !== undefined) args.push('iif', this.dev(r.iif));
      if (r.oif !== undefined) args.push('oif', this.dev(r.oif));
      if (r.src !== undefined) args.push('from', formatPrefix(r.src));
      if (r.dst !== undefined) args.push('to', formatPrefix(r.dst));
      if (r.fwmark !== undefined) args.push('fwmark', String(r.fwmark));
      args.push('lookup', id);
      rules.push({ args, where: `rule #${ri}`, field: 'rule' });
      r.routes.forEach((x, xi) => {
        const a = ['route', 'replace', formatPrefix(x.dst)];
        if (x.hop.gw !== undefined) a.push('via', x.hop.gw);
        if (x.hop.dev !== undefined) a.push('dev', this.dev(x.hop.dev));
        if (x.scope !== undefined) a.push('scope', x.scope);
        if (x.src !== undefined) a.push('src', x.src);
        if (x.onlink === true) a.push('onlink');
        a.push('table', id);
        routes.push({ args: a, where: `rule #${ri} route #${xi}`, field: x.hop.dev !== undefined ? 'dev' : 'gw' });
      });
    });
    return { routes, rules };
  }

  /** Makes the kernel's policy rules and tables exactly those of `specs` (in order); returns the objects refused. */
  syncRoutes(specs: readonly RouteConfigSpec[]): Promise<KernelRouteError[]> {
    return this.serial(async () => {
      const errors: KernelRouteError[] = [];
      const want = new Map(specs.map((s) => [s.object, s] as const));
      for (const [k, cur] of [...this.routes]) {
        if (want.has(k)) continue;
        await this.removeCmds(cur.rules, cur.routes, [], []);
        this.routes.delete(k);
      }
      for (const s of specs) {
        const cur = this.routes.get(s.object);
        const next = this.commands(s);
        if (cur !== undefined && same(cur.routes, next.routes) && same(cur.rules, next.rules)) continue;
        const e = await this.applyRoutes(s, cur, next);
        if (e !== null) errors.push(e);
      }
      return errors;
    });
  }

  /**
   * Before this instance first installs table `id`: rules that look it up and its routes are
   * leftovers (a previous instance that crashed; the id is derived from a name only Liqo's
   * objects use), removed as Liqo's controller replaces what it finds for a table id.
   */
  private async clearLeftovers(id: string): Promise<void> {
    const out = await this.ipRun(['-j', 'rule', 'show', 'table', id], this.o.netns).catch(() => '[]');
    let rules: { priority?: number }[] = [];
    try {
      rules = JSON.parse(out.trim() || '[]') as { priority?: number }[];
    } catch {
      rules = [];
    }
    for (const r of rules)
      if (r.priority !== undefined)
        await this.ipRun(['rule', 'del', 'pref', String(r.priority), 'lookup', id], this.o.netns).catch(ignoreGone);
    await this.ipRun(['route', 'flush', 'table', id], this.o.netns).catch(() => {});
  }

  private async applyRoutes(
    s: RouteConfigSpec,
    cur: InstalledRoutes | undefined,
    next: { routes: Cmd[]; rules: Cmd[] },
  ): Promise<KernelRouteError | null> {
    if (cur === undefined && ![...this.routes.values()].some((r) => r.spec.tableId === s.tableId))
      await this.clearLeftovers(String(s.tableId));
    const have = new Set((cur?.rules ?? []).map(key));
    const added: Cmd[] = [];
    const addedRoutes: Cmd[] = [];
    try {
      // Liqo's order: a rule, then its routes (a later route's gw is reached by an earlier one).
      for (const c of next.routes) {
        await this.ipRun(c.args, this.o.netns);
        addedRoutes.push(c);
      }
      for (const c of next.rules) {
        if (have.has(key(c))) continue;
        await this.ipRun(c.args, this.o.netns);
        added.push(c);
      }
    } catch (e) {
      if (!(e instanceof RouteCommandError)) throw e;
      const failed = [...next.routes, ...next.rules].find((c) => !addedRoutes.includes(c) && !added.includes(c))!;
      // Back to the previous version: new rules and routes out, old routes re-replaced.
      await this.removeCmds(
        added,
        addedRoutes.filter((c) => !(cur?.routes ?? []).some((o) => dstKey(o) === dstKey(c))),
        [],
        [],
      ).catch(() => {});
      for (const c of cur?.routes ?? []) await this.ipRun(c.args, this.o.netns).catch(() => {});
      return new KernelRouteError(
        s.object,
        failed.where,
        failed.field,
        `${failed.args.join(' ')}: ${e.stderr.trim()}`,
        ipFix(e.stderr),
      );
    }
    if (cur !== undefined) await this.removeCmds(cur.rules, cur.routes, next.rules, next.routes);
    this.routes.set(s.object, { spec: s, routes: next.routes, rules: next.rules });
    return null;
  }

  /** Deletes `rules` and `routes` except those also in `keepRules` / (by destination) `keepRoutes`. */
  private async removeCmds(
    rules: readonly Cmd[],
    routes: readonly Cmd[],
    keepRules: readonly Cmd[],
    keepRoutes: readonly Cmd[],
  ): Promise<void> {
    const kr = new Set(keepRules.map(key));
    const kd = new Set(keepRoutes.map(dstKey));
    for (const c of rules)
      if (!kr.has(key(c))) await this.ipRun(['rule', 'del', ...c.args.slice(2)], this.o.netns).catch(ignoreGone);
    for (const c of routes)
      if (!kd.has(dstKey(c)))
        await this.ipRun(['route', 'del', c.args[2]!, 'table', c.args[c.args.length - 1]!], this.o.netns).catch(
          ignoreGone,
        );
  }

  /** Removes every table, rule and route this instance installed. Throws the first failure after trying all. */
  clear(): Promise<void> {
    return this.serial(async () => {
      let first: unknown;
      for (const cur of this.routes.values()) {
        try {
          await this.removeCmds(cur.rules, cur.routes, [], []);
        } catch (e) {
          first ??= e;
        }
      }
      this.routes.clear();
      for (const t of this.tables.values()) {
        try {
          await this.nft(`delete table ip ${t.kernelName}`, this.o.netns);
        } catch (e) {
          if (!(e instanceof NftCommandError && /No such file or directory/i.test(e.stderr))) first ??= e;
        }
      }
      this.tables.clear();
      if (first !== undefined) throw first;
    });
  }
}

/** Value after `flag` in an `ip` argument list. */
function argOf(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag, 2);
  return i < 0 ? undefined : args[i + 1];
}

const hostPrefix = (p: string): string => (p.includes('/') ? p : `${p}/${p.includes(':') ? 128 : 32}`);

/** The RuleItem of `rule add … lookup ID` as commands() builds it. */
function ruleItem(args: readonly string[]): KernelItem {
  const pref = argOf(args, 'pref');
  const iif = argOf(args, 'iif');
  const oif = argOf(args, 'oif');
  const from = argOf(args, 'from');
  const to = argOf(args, 'to');
  const mark = argOf(args, 'fwmark');
  return {
    kind: 'rule',
    table: argOf(args, 'lookup')!,
    ...(pref === undefined ? {} : { pref: Number(pref) }),
    ...(iif === undefined ? {} : { iif }),
    ...(oif === undefined ? {} : { oif }),
    ...(from === undefined ? {} : { from: hostPrefix(from) }),
    ...(to === undefined ? {} : { to: hostPrefix(to) }),
    ...(mark === undefined ? {} : { fwmark: Number(mark) }),
    restore: { tool: 'ip', args },
  };
}

/** The RouteItem of `route replace DST … table ID` as commands() builds it. */
function routeItem(args: readonly string[]): KernelItem {
  const dev = argOf(args, 'dev');
  const via = argOf(args, 'via');
  const src = argOf(args, 'src');
  return {
    kind: 'route',
    table: argOf(args, 'table')!,
    dst: hostPrefix(args[2]!),
    ...(dev === undefined ? {} : { dev }),
    ...(via === undefined ? {} : { via }),
    ...(src === undefined ? {} : { src }),
    restore: { tool: 'ip', args },
  };
}

const key = (c: Cmd): string => c.args.join(' ');
/** A route's identity in the kernel: destination and table. */
const dstKey = (c: Cmd): string => `${c.args[2]} ${c.args[c.args.length - 1]}`;
const same = (a: readonly Cmd[], b: readonly Cmd[]): boolean =>
  a.length === b.length && a.every((c, i) => key(c) === key(b[i]!));

function ignoreGone(e: unknown): void {
  if (e instanceof RouteCommandError && GONE.some((r) => r.test(e.stderr))) return;
  throw e;
}
