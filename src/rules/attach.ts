/**
 * Keeps a gateway Router's firewall stages in step with the FirewallConfigurations it is given:
 * one stable PacketHook per hook point is attached once; each update compiles a new
 * RulesEngine and swaps it in between two packets (the hooks delegate to the current engine).
 *
 * `update(objects)` parses every object; an object that fails keeps its previously accepted
 * version (Liqo's controller likewise leaves the kernel's rules of a failing object as they
 * were), and its RuleParseError is returned for the caller to report. Deleted objects go.
 */
import type { IpView } from '../packet/ip-view.js';
import { HOOK_COUNT, VERDICT_ACCEPT, type PacketHook, type PacketMeta } from '../router/hooks.js';
import { RulesEngine, type RulesDevices } from './engine.js';
import { HOOKS, type RuleTable } from './model.js';
import { RuleParseError, parseFirewallConfiguration } from './parse.js';

/** What attach() needs of a router (src/router/router.ts Router). */
export interface HookTarget {
  attach(hook: number, stage: PacketHook): void;
  detach(hook: number, stage: PacketHook): boolean;
}

class Delegate implements PacketHook {
  readonly name: string;
  constructor(private readonly owner: RulesAttachment, private readonly hook: number) {
    this.name = `liqo-firewall:${HOOKS[hook]}`;
  }

  process(buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    const e = this.owner.engine;
    return e === null ? VERDICT_ACCEPT : e.hooks[this.hook]!.process(buf, v, meta, now);
  }
}

function keyOf(o: unknown): string {
  const md = (o as { metadata?: { namespace?: string; name?: string } } | null)?.metadata;
  return `${md?.namespace ?? ''}/${md?.name ?? '?'}`;
}

export class RulesAttachment {
  /** The engine in force (null: no rules, every packet accepted). */
  engine: RulesEngine | null = null;
  private readonly stages: PacketHook[] = [];
  private accepted = new Map<string, RuleTable>();

  constructor(private readonly devices: RulesDevices) {
    for (let h = 0; h < HOOK_COUNT; h++) this.stages.push(new Delegate(this, h));
  }

  attachTo(router: HookTarget): void {
    for (let h = 0; h < HOOK_COUNT; h++) router.attach(h, this.stages[h]!);
  }

  detachFrom(router: HookTarget): void {
    for (let h = 0; h < HOOK_COUNT; h++) router.detach(h, this.stages[h]!);
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
    this.accepted = next;
    this.engine = next.size === 0 ? null : new RulesEngine([...next.values()], this.devices);
    return errors;
  }
}
