/**
 * Keeps a gateway Router's hook points in step with a rule set — Liqo's FirewallConfigurations
 * (Kubernetes mode) or the tables the YAML configuration translates into (from-nat.ts).
 *
 * Contract (stable; the Liqo wiring calls exactly this):
 *   const rules = new RulesAttachment(devices, { flows: { capacity } });
 *   rules.attachTo(router);            // once: one stage per hook point, all chain types
 *   rules.update(objects)              // FirewallConfiguration JSON list → RuleParseError[]
 *   rules.setTables(tables)            // or already-parsed RuleTables (YAML mode, tests)
 *   rules.expire(now)                  // conntrack housekeeping, from a timer
 *   rules.counters(), rules.generalCounters(), rules.stats(), rules.plan()
 *   rules.setDevices(devices)          // addresses learned later (masquerade, reject source)
 *   rules.detachFrom(router)
 * Each update compiles (compile.ts) and swaps the compiled rules in between two packets; the
 * connection table is kept: only connections whose NAT was bound by a rule that is gone are
 * removed (runtime.ts). An object that fails to parse keeps its previously accepted version
 * (Liqo's controller likewise leaves a failing object's kernel rules as they were), and its
 * RuleParseError is returned for the caller to report. Deleted objects go.
 * Marks: a stage sets PacketMeta.mark (metamarkfromctmark) for the policy router to read.
 */
import type { IpView } from '../packet/ip-view.js';
import { HOOK_COUNT, type PacketHook, type PacketMeta } from '../router/hooks.js';
import { compileRules, type RulePlanRow } from './compile.js';
import type { RulesDevices } from './devices.js';
import { HOOKS, ruleIdName, type RuleTable } from './model.js';
import { RuleParseError, parseFirewallConfiguration } from './parse.js';
import type { RuleCounterRow, RulesStats } from './counters.js';
import type { RuleCounterSample } from '../control/metrics.js';
import { RulesRuntime, type RulesRuntimeOptions } from './runtime.js';

/** `<object…>/<table>/<chain>/<rule>` (compile.ts ids; the object may hold a slash) → parts. */
export function splitRuleId(id: string): { object: string; table: string; chain: string; rule: string } {
  const p = id.split('/');
  const rule = ruleIdName(p.pop() ?? ''),
    chain = ruleIdName(p.pop() ?? ''),
    table = ruleIdName(p.pop() ?? '');
  return { object: p.join('/'), table, chain, rule };
}

/** What attach() needs of a router (src/router/router.ts Router). */
export interface HookTarget {
  attach(hook: number, stage: PacketHook): void;
  detach(hook: number, stage: PacketHook): boolean;
}

class Delegate implements PacketHook {
  readonly name: string;
  readonly owner: RulesRuntime;
  constructor(
    private readonly rt: RulesRuntime,
    private readonly hook: number,
  ) {
    this.name = `liqo-firewall:${HOOKS[hook]}`;
    this.owner = rt;
  }

  process(buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    return this.rt.run(this.hook, buf, v, meta, now);
  }
}

function keyOf(o: unknown): string {
  const md = (o as { metadata?: { namespace?: string; name?: string } } | null)?.metadata;
  return `${md?.namespace ?? ''}/${md?.name ?? '?'}`;
}

export class RulesAttachment {
  readonly runtime: RulesRuntime;
  private readonly stages: PacketHook[] = [];
  private accepted = new Map<string, RuleTable>();

  constructor(devices: RulesDevices, opts: RulesRuntimeOptions = {}) {
    this.runtime = new RulesRuntime(devices, opts);
    for (let h = 0; h < HOOK_COUNT; h++) this.stages.push(new Delegate(this.runtime, h));
  }

  /** The runtime when rules are in force, else null (compatibility with the filter-only API). */
  get engine(): RulesRuntime | null {
    return this.accepted.size === 0 ? null : this.runtime;
  }

  attachTo(router: HookTarget): void {
    for (let h = 0; h < HOOK_COUNT; h++) router.attach(h, this.stages[h]!);
  }

  detachFrom(router: HookTarget): void {
    for (let h = 0; h < HOOK_COUNT; h++) router.detach(h, this.stages[h]!);
  }

  setDevices(devices: RulesDevices): void {
    this.runtime.setDevices(devices);
  }

  /** Tables in force, by namespace/name. */
  tables(): ReadonlyMap<string, RuleTable> {
    return this.accepted;
  }

  /** Replaces the rule set by `objects` (FirewallConfiguration JSON); returns the objects' errors. */
  update(objects: readonly unknown[]): RuleParseError[] {
    const next = new Map<string, RuleTable>();
    const errors: RuleParseError[] = [];
    for (const o of [...objects].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1))) {
      const k = keyOf(o);
      try {
        next.set(k, parseFirewallConfiguration(o));
      } catch (e) {
        if (!(e instanceof RuleParseError)) throw e;
        errors.push(e);
        const prev = this.accepted.get(k);
        if (prev !== undefined) next.set(k, prev);
      }
    }
    this.install(next);
    return errors;
  }

  /** Replaces the rule set by already-parsed tables (keyed by their `object`). */
  setTables(tables: readonly RuleTable[]): void {
    const next = new Map<string, RuleTable>();
    for (const t of tables) next.set(`${t.object}#${t.name}`, t);
    this.install(next);
  }

  private install(next: Map<string, RuleTable>): void {
    this.accepted = next;
    this.runtime.install(next.size === 0 ? null : compileRules([...next.values()]));
  }

  /** How each rule in force was compiled. */
  plan(): readonly RulePlanRow[] {
    return this.runtime.rules?.plan ?? [];
  }

  /** Rules with `counter` and chain policies: packets/bytes (for `weft show` and metrics). */
  counters(): RuleCounterRow[] {
    return this.runtime.counters();
  }

  /** Rules on the general matcher and the packets each matched. */
  generalCounters(): { id: string; packets: number }[] {
    return this.runtime.generalCounters();
  }

  /** counters() split into object / table / chain / rule (`weft show`, metrics). */
  counterSamples(): RuleCounterSample[] {
    return this.runtime.counters().map((r) => ({ ...splitRuleId(r.id), packets: r.packets, bytes: r.bytes }));
  }

  /** generalCounters() split likewise. */
  generalSamples(): RuleCounterSample[] {
    return this.runtime.generalCounters().map((r) => ({ ...splitRuleId(r.id), packets: r.packets }));
  }

  stats(): RulesStats {
    return this.runtime.stats();
  }

  expire(now: number, budget = 1024): number {
    return this.runtime.expire(now, budget);
  }
}
