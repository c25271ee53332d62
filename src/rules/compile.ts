/**
 * RuleTables → the compiled form the rules runtime (runtime.ts) executes. Public contract (kept
 * stable for the Liqo wiring; attach.ts is the usual entry point):
 *
 *   const compiled = compileRules(tables);          // pure; throws nothing for parsed tables
 *   compiled.plan                                   // how each rule was compiled (form per rule id)
 *   runtime.install(compiled)                       // swap between packets; conntrack kept
 *
 * Rule ids are `<namespace>/<object>/<table>/<chain>/<rule>` (`.../<chain>/policy` for the
 * chain policy); the same ids name counters (runtime.counters()).
 *
 * Forms, with nftables semantics (NAT decided on a connection's first packet; established and
 * reply packets translated from the connection's binding by conntrack, src/nat/flows.ts):
 * - `prefix-nat`:   dnat/snat to a subnet (Liqo's remap-podcidr / remap-externalcidr) → a
 *                   src/nat PrefixRemap computing the mapped address, bound to the connection;
 * - `addr-map`:     a run of single-address dnat rules matching one destination address each
 *                   (Liqo's `<ip>-remap-ipmapping-gw`) → one hash table address → address;
 * - `snat-ct`:      snat to one address, `masquerade-ct`: masquerade → source NAT bound to the
 *                   connection, port kept unless the reply tuple is taken (then the kernel's
 *                   port class: 1-511, 600-1023, 1024-65535);
 * - `mss-clamp`:    tcpmssclamp → the SYN MSS clamp;
 * - `ctmark`, `metamark`: the mark stored on the connection / restored to PacketMeta.mark;
 * - `set-source`:   setsrc → the source address rewritten in place, statelessly;
 * - `general`:      everything else (verdicts, counters-only, notrack, route rules) on the
 *                   general matcher, every match counted per rule (runtime.generalOf(id)).
 * Nat chains are walked for a connection's first packet only; filter chains for every packet.
 * Per packet nothing here allocates (compilation does).
 */
import { PrefixRemap } from '../nat/remap.js';
import { HOOK_FORWARD, HOOK_INPUT, HOOK_OUTPUT, HOOK_POSTROUTING, HOOK_PREROUTING } from '../router/hooks.js';
import { compileCond, type CCond, C_IP_DST, C_PROTO } from './match.js';
import { HOOKS, numberToIp, ruleIdPart, type Chain, type Rule, type RuleTable } from './model.js';

export type RuleForm =
  | 'prefix-nat'
  | 'addr-map'
  | 'snat-ct'
  | 'masquerade-ct'
  | 'mss-clamp'
  | 'ctmark'
  | 'metamark'
  | 'set-source'
  | 'general';

export interface RulePlanRow {
  readonly id: string;
  readonly form: RuleForm;
}

// Filter actions.
export const A_NONE = 0,
  A_ACCEPT = 1,
  A_DROP = 2,
  A_REJECT = 3,
  A_CTMARK = 4,
  A_METAMARK = 5,
  A_MSS = 6,
  A_NOTRACK = 7,
  A_ROUTE = 8,
  A_SETSRC = 9;
// NAT kinds.
export const N_DNAT = 0,
  N_SNAT = 1,
  N_MASQ = 2,
  N_MAP = 3;
// Step kinds.
export const S_CHAIN = 0,
  S_CT = 1,
  S_NAT = 2,
  S_CONFIRM = 3;

export class CFilterRule {
  constructor(
    readonly id: number,
    readonly conds: readonly CCond[],
    readonly counter: boolean,
    readonly action: number,
    /** ctmark value, MSS (0: route MTU − 40), setsrc address (int32). */
    readonly value: number,
    readonly general: boolean,
  ) {}
}

/** A single-address destination mapping entry of an `addr-map` run. */
export interface MapTarget {
  readonly id: number;
  readonly bind: string;
  readonly addr: number;
}

export class CNatRule {
  constructor(
    readonly id: number,
    /** Identity of the binding (rule content); conntrack entries bound by it survive updates that keep it. */
    readonly bind: string,
    readonly conds: readonly CCond[],
    readonly kind: number,
    /** N_DNAT / N_SNAT: the new address for a single address (remap null). */
    readonly addr: number,
    readonly remap: PrefixRemap | null,
    /** N_MAP: destination address → target (first rule wins, as in the walk). */
    readonly map: ReadonlyMap<number, MapTarget> | null,
    /** ip6 tables' N_DNAT / N_SNAT to a single address: the new address (16 bytes). */
    readonly addr6: Uint8Array | null = null,
  ) {}
}

export class CChain {
  constructor(
    readonly nat: boolean,
    readonly priority: number,
    readonly dropPolicy: boolean,
    readonly policyId: number,
    readonly filter: readonly CFilterRule[],
    readonly natRules: readonly CNatRule[],
    /** prerouting/output below priority -200 (raw): notrack has an effect only there. */
    readonly beforeConntrack: boolean,
    /** Every rule needs this protocol (e.g. the MSS clamp's tcp): other packets skip the rules. -1: none. */
    readonly onlyProto: number,
  ) {}
}

export class CStep {
  constructor(
    readonly kind: number,
    readonly chain: CChain | null,
  ) {}
}

export class CompiledRules {
  /** Per hook (HOOK_*), the steps of the ip tables (IPv4 packets) in priority order. */
  readonly steps: readonly (readonly CStep[])[];
  /** The same for the ip6 tables (IPv6 packets). */
  readonly steps6: readonly (readonly CStep[])[];
  /** IPv6 connection tracking is needed (ip6 tables with NAT or ct marks). */
  readonly tracked6: boolean;
  /** Counter names by compiled id ('' for rules that neither count nor run on the general path). */
  readonly ids: readonly string[];
  readonly plan: readonly RulePlanRow[];
  /** IPv4 connection tracking is needed (ip tables with NAT or ct marks). */
  readonly tracked: boolean;
  /** Binding identities of every NAT rule in this rule set. */
  readonly binds: ReadonlySet<string>;
  /** Per compiled id: a counter row is shown (rules with `counter`, chain policies). */
  readonly counted: readonly boolean[];
  /**
   * Per hook: 1 when its steps are conntrack / NAT only, the conntrack step first (the runtime's
   * fast path for established packets), else 0.
   */
  readonly natOnly: Uint8Array;
  constructor(
    steps: CStep[][],
    ids: string[],
    plan: RulePlanRow[],
    tracked: boolean,
    binds: Set<string>,
    counted: boolean[],
    steps6: CStep[][] = HOOKS.map(() => []),
    tracked6 = false,
  ) {
    this.steps6 = steps6;
    this.tracked6 = tracked6;
    this.counted = counted;
    this.steps = steps;
    this.natOnly = Uint8Array.from(
      steps.map((l, h) =>
        tracked &&
        h !== HOOK_FORWARD &&
        l.length > 0 &&
        l.every((x) => x.kind !== S_CHAIN) &&
        (h !== HOOK_PREROUTING && h !== HOOK_OUTPUT ? true : l[0]!.kind === S_CT)
          ? 1
          : 0,
      ),
    );
    this.ids = ids;
    this.plan = plan;
    this.tracked = tracked;
    this.binds = binds;
  }
}

const NAT_PRIO = [-100, 100, 0, -100, 100];
/** Evaluation order of condition kinds (C_*: proto, dev in, dev out, ip src, ip dst, port src, port dst). */
const COST = [0, 3, 3, 1, 1, 2, 2, 1, 1];

type HookChains = { prio: number; seq: number; chain: CChain }[][];

/** Compiles parsed tables (parse.ts) into the runtime's form. Allocates; call per update. */
export function compileRules(tables: readonly RuleTable[]): CompiledRules {
  const ids: string[] = [];
  const plan: RulePlanRow[] = [];
  const binds = new Set<string>();
  // Per family (ip, ip6): conntrack is per family in the kernel, so is the need for it.
  const tracked = [false, false];
  const perHook: HookChains[] = [HOOKS.map(() => []), HOOKS.map(() => [])];
  let seq = 0;
  for (const t of tables) {
    const f = t.family === 'ip6' ? 1 : 0;
    for (const c of t.chains) {
      const chain = compileChain(t, c, ids, plan, binds);
      if (chain.nat) tracked[f] = true;
      if (chain.filter.some((r) => r.action === A_CTMARK || r.action === A_METAMARK)) tracked[f] = true;
      perHook[f]![HOOKS.indexOf(c.hook)]!.push({ prio: c.priority, seq: seq++, chain });
    }
  }
  const counted = ids.map((id) => id.endsWith('/policy'));
  for (const t of tables)
    for (const c of t.chains)
      for (const r of c.rules)
        if (r.kind === 'filter' && r.counter)
          counted[ids.indexOf(`${t.object}/${ruleIdPart(t.name)}/${ruleIdPart(c.name)}/${ruleIdPart(r.name)}`)] = true;
  return new CompiledRules(
    hookSteps(perHook[0]!, tracked[0]!),
    ids,
    plan,
    tracked[0]!,
    binds,
    counted,
    hookSteps(perHook[1]!, tracked[1]!),
    tracked[1]!,
  );
}

/** One family's chains per hook → the steps in the kernel's order (conntrack and NAT core among them when tracked). */
function hookSteps(perHook: HookChains, tracked: boolean): CStep[][] {
  const steps: CStep[][] = [];
  for (let h = 0; h < HOOKS.length; h++) {
    // Equal priorities: the chain registered last first (the kernel inserts a hook before those
    // of its priority), registration being the tables' order, each table's chains in order.
    const list = perHook[h]!.sort((a, b) => a.prio - b.prio || b.seq - a.seq);
    const filters = list.filter((e) => !e.chain.nat);
    const nats = list.filter((e) => e.chain.nat);
    const out: { prio: number; step: CStep }[] = filters.map((e) => ({
      prio: e.prio,
      step: new CStep(S_CHAIN, e.chain),
    }));
    if (tracked) {
      if (h === HOOK_PREROUTING || h === HOOK_OUTPUT) out.push({ prio: -200, step: new CStep(S_CT, null) });
      // The NAT core's hook: nat chains run inside it, in their priority order.
      if (h !== HOOK_FORWARD) {
        // Nat chains decide for a new connection, then the core step applies the binding.
        for (const n of nats) out.push({ prio: NAT_PRIO[h]!, step: new CStep(S_NAT, n.chain) });
        out.push({ prio: NAT_PRIO[h]!, step: new CStep(S_NAT, null) });
      }
      if (h === HOOK_POSTROUTING || h === HOOK_INPUT)
        out.push({ prio: Number.MAX_SAFE_INTEGER, step: new CStep(S_CONFIRM, null) });
    }
    // Stable sort: at equal priority the CT / NAT core steps go after the filter chains, the
    // kernel's order when conntrack / NAT were in use before the chain was created (a new hook
    // goes before those of its priority; README deviations: a table bringing them in is after).
    steps.push(out.sort((a, b) => a.prio - b.prio).map((e) => e.step));
  }
  return steps;
}

function compileChain(t: RuleTable, c: Chain, ids: string[], plan: RulePlanRow[], binds: Set<string>): CChain {
  const base = `${t.object}/${ruleIdPart(t.name)}/${ruleIdPart(c.name)}`;
  const filter: CFilterRule[] = [];
  const natRules: CNatRule[] = [];
  let run: Map<number, MapTarget> | null = null;
  for (const r of c.rules) {
    const id = ids.length;
    ids.push(`${base}/${ruleIdPart(r.name)}`);
    // Conditions are ANDed and side-effect free: cheapest first (protocol, addresses, ports, names).
    const conds = r.conds.map(compileCond).sort((x, y) => COST[x.kind]! - COST[y.kind]!);
    if (r.kind === 'nat') {
      const a = r.action;
      const bind = `${c.hook}|${base}/${r.name}|${JSON.stringify(r.conds)}|${JSON.stringify(a)}`;
      binds.add(bind);
      if (a.type !== 'masquerade' && a.addr6 !== undefined) {
        run = null;
        natRules.push(compileNat6(r, a, a.addr6, id, bind, conds, ids, plan));
        continue;
      }
      if (a.type === 'dnat' && a.prefixLen === 32 && isSingleDst(r)) {
        plan.push({ id: ids[id]!, form: 'addr-map' });
        const key = (r.conds[0] as { lo: number }).lo;
        if (run === null) {
          run = new Map();
          natRules.push(new CNatRule(id, '', [], N_MAP, 0, null, run));
        }
        if (!run.has(key)) run.set(key, { id, bind, addr: a.addr });
        continue;
      }
      run = null;
      if (a.type === 'masquerade') {
        plan.push({ id: ids[id]!, form: 'masquerade-ct' });
        natRules.push(new CNatRule(id, bind, conds, N_MASQ, 0, null, null));
      } else if (a.prefixLen < 32) {
        plan.push({ id: ids[id]!, form: 'prefix-nat' });
        const from = matchedPrefix(r, a.type === 'dnat' ? 'dst' : 'src', a.prefixLen);
        const remap = new PrefixRemap(toPrefix(from, a.prefixLen), toPrefix(a.addr, a.prefixLen));
        natRules.push(new CNatRule(id, bind, conds, a.type === 'dnat' ? N_DNAT : N_SNAT, a.addr, remap, null));
      } else {
        plan.push({ id: ids[id]!, form: a.type === 'dnat' ? 'addr-map' : 'snat-ct' });
        natRules.push(new CNatRule(id, bind, conds, a.type === 'dnat' ? N_DNAT : N_SNAT, a.addr, null, null));
      }
      continue;
    }
    if (r.kind === 'route') {
      plan.push({ id: ids[id]!, form: 'general' });
      filter.push(new CFilterRule(id, conds, false, A_ROUTE, 0, true));
      continue;
    }
    const a = r.action;
    let action = A_NONE;
    let value = 0;
    let form: RuleForm = 'general';
    switch (a.type) {
      case 'none':
        action = A_NONE;
        break;
      case 'accept':
        action = A_ACCEPT;
        break;
      case 'drop':
        action = A_DROP;
        break;
      case 'reject':
        action = A_REJECT;
        break;
      case 'notrack':
        action = A_NOTRACK;
        break;
      case 'ctmark':
        action = A_CTMARK;
        value = a.mark;
        form = 'ctmark';
        break;
      case 'metamarkfromctmark':
        action = A_METAMARK;
        form = 'metamark';
        break;
      case 'tcpmssclamp':
        action = A_MSS;
        value = a.mss;
        form = 'mss-clamp';
        break;
      case 'setsrc':
        action = A_SETSRC;
        value = a.addr | 0;
        form = 'set-source';
        break;
    }
    plan.push({ id: ids[id]!, form });
    filter.push(new CFilterRule(id, conds, r.counter, action, value, form === 'general'));
  }
  const policyId = ids.length;
  ids.push(`${base}/policy`);
  const early = (c.hook === 'prerouting' || c.hook === 'output') && c.priority < -200;
  const protoOf = (cs: readonly CCond[]): number => cs.find((x) => x.kind === C_PROTO)?.lo ?? -1;
  const first = filter.length > 0 ? protoOf(filter[0]!.conds) : -1;
  const onlyProto = c.type !== 'nat' && first >= 0 && filter.every((r) => protoOf(r.conds) === first) ? first : -1;
  return new CChain(c.type === 'nat', c.priority, c.policy === 'drop', policyId, filter, natRules, early, onlyProto);
}

/** An ip6 table's dnat / snat: a prefix → PrefixRemap (1:1, host bits kept), one address → addr6. */
function compileNat6(
  r: Rule,
  a: { type: 'dnat' | 'snat'; prefixLen: number },
  to: Uint8Array,
  id: number,
  bind: string,
  conds: CCond[],
  ids: string[],
  plan: RulePlanRow[],
): CNatRule {
  const kind = a.type === 'dnat' ? N_DNAT : N_SNAT;
  if (a.prefixLen < 128) {
    plan.push({ id: ids[id]!, form: 'prefix-nat' });
    const from = matchedPrefix6(r, a.type === 'dnat' ? 'dst' : 'src', a.prefixLen) ?? to;
    const remap = new PrefixRemap(
      { family: 6, addr: from, prefixLen: a.prefixLen },
      { family: 6, addr: to, prefixLen: a.prefixLen },
    );
    return new CNatRule(id, bind, conds, kind, 0, remap, null);
  }
  plan.push({ id: ids[id]!, form: a.type === 'dnat' ? 'addr-map' : 'snat-ct' });
  return new CNatRule(id, bind, conds, kind, 0, null, null, to);
}

/** matchedPrefix for ip6 rules: the `ip6 [sd]addr == prefix` of that length, else null (netmap). */
function matchedPrefix6(r: Rule, pos: 'src' | 'dst', len: number): Uint8Array | null {
  for (const c of r.conds) if (c.kind === 'ip6' && c.pos === pos && c.op === 'eq' && c.prefixLen === len) return c.net;
  return null;
}

/** A rule whose only condition is `ip daddr == <address>`. */
function isSingleDst(r: Rule): boolean {
  if (r.conds.length !== 1) return false;
  const c = compileCond(r.conds[0]!);
  return c.kind === C_IP_DST && !c.neq && c.lo === c.hi;
}

/**
 * The prefix a prefix-NAT rule maps from: its address condition on the rewritten side when that
 * is a prefix of the same length (Liqo's remap rules), else the target itself (an identity
 * remap whose translate() is then the kernel's netmap: network bits from `to`, host bits kept).
 */
function matchedPrefix(r: Rule, pos: 'src' | 'dst', len: number): number {
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  for (const c of r.conds) {
    if (
      c.kind === 'ip' &&
      c.pos === pos &&
      c.op === 'eq' &&
      (c.lo & mask) >>> 0 === c.lo &&
      (c.hi & ~mask) >>> 0 === ~mask >>> 0
    )
      return c.lo;
  }
  return 0;
}

function toPrefix(n: number, len: number): { family: 4; addr: Uint8Array; prefixLen: number } {
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  const a = (n & mask) >>> 0;
  const s = numberToIp(a).split('.').map(Number);
  return { family: 4, addr: Uint8Array.from(s), prefixLen: len };
}
