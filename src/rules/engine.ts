/**
 * Evaluates RuleTables on the router's hook points: one PacketHook per hook point running the
 * chains attached there (of every table) in priority order, with Liqo's nftables semantics
 * (see model.ts). Compiled once per rule set; per packet no allocation.
 *
 * What differs from the kernel (documented deviations):
 * - no connection tracking: a nat chain applies its first matching rule to EVERY packet it sees
 *   (the kernel consults it for a connection's first packet and reverses replies by conntrack);
 *   use it for the first direction of a flow, the router's own NAT keeps reply reversal;
 *   ct marks live for the packet only (ctmark then metamarkfromctmark works within one packet);
 * - reject drops without sending the ICMP error / TCP reset (counted as `rejected`);
 * - NAT never changes ports (the kernel does only on a tuple clash);
 * - `tcpmssclamp` without value uses `pathMtu - 40` (the kernel's `rt mtu` of the route).
 * Interface names: a packet's in/out device is PacketMeta.inDev/outDev when the router names it
 * (Liqo mode, src/router/steer.ts), else named from PacketMeta's lanes by `RulesDevices`;
 * an unknown name ('') makes dev matches fail, as nft's iifname/oifname do where the device is
 * absent (oifname before routing, iifname of locally generated packets).
 */
import type { IpView } from '../packet/ip-view.js';
import { CSUM_ALWAYS, CSUM_NONE, CSUM_UDP, patchWord, read16 } from '../nat/rewrite.js';
import { C_DEV_IN, C_DEV_OUT, C_IP_DST, C_IP_SRC, C_PORT_SRC, C_PROTO, clampMss, compileCond, type CCond } from './match.js';
import {
  HOOK_COUNT, HOOK_OUTPUT, HOOK_PREROUTING, OUTPUT_HOST, OUTPUT_NODE, OUTPUT_PEER, SOURCE_HOST, SOURCE_NODE, SOURCE_PEER,
  VERDICT_ACCEPT, VERDICT_DROP, type PacketHook, type PacketMeta,
} from '../router/hooks.js';
import { HOOKS, type Chain, type Rule, type RuleTable } from './model.js';

/** How the router's endpoints are named as interfaces, and their addresses (masquerade). */
export interface RulesDevices {
  /** Interface a packet from/to a peer uses (Liqo: 'liqo-tunnel'). */
  readonly peer: string;
  /** Interface towards the nodes (Geneve). */
  readonly node: string;
  /** The gateway host's own interface. */
  readonly host: string;
  /** Masquerade source address per output (IPv4 as unsigned 32-bit). */
  readonly peerAddr: number;
  readonly nodeAddr: number;
  readonly hostAddr: number;
  /** MTU of the routes out (for tcpmssclamp without a value). */
  readonly pathMtu: number;
}

// Condition kinds, ops and actions as small integers (compiled form).
const A_NONE = 0, A_ACCEPT = 1, A_DROP = 2, A_REJECT = 3, A_CTMARK = 4, A_METAMARK = 5, A_MSS = 6, A_NOTRACK = 7;
const A_DNAT = 8, A_SNAT = 9, A_MASQ = 10, A_ROUTE = 11;


class CRule {
  constructor(
    readonly id: number,
    readonly conds: readonly CCond[],
    readonly counter: boolean,
    readonly action: number,
    /** ctmark value, MSS, NAT address. */
    readonly value: number,
    /** NAT: mask of the prefix bits kept from `value` (0xffffffff for a single address). */
    readonly mask: number,
  ) {}
}

class CChain {
  constructor(
    readonly nat: boolean,
    readonly dropPolicy: boolean,
    readonly rules: readonly CRule[],
    readonly policyId: number,
    /** Runs before conntrack (prerouting/output below priority -200): only there notrack has an effect. */
    readonly beforeConntrack: boolean,
  ) {}
}

/** Per-packet state carried from hook to hook (reset where a packet enters: prerouting, output). */
class PacketState {
  mark = 0;
  ctmark = 0;
  notrack = false;
  dnatDone = false;
  snatDone = false;
}

/** Counters: per rule (and per chain policy) packets and bytes; drops by reason. */
export interface RuleCounterRow {
  readonly id: string;
  readonly packets: number;
  readonly bytes: number;
}

export class RulesEngine {
  /** Per compiled rule id: matched packets / bytes (only rules with `counter`, and policies). */
  readonly packets: Float64Array;
  readonly bytes: Float64Array;
  /** Packets rejected (dropped; no ICMP error sent, see header). */
  rejected = 0;
  readonly hooks: readonly PacketHook[];
  private readonly ids: string[] = [];
  private readonly state = new PacketState();
  private readonly byHook: CChain[][];

  constructor(tables: readonly RuleTable[], readonly devices: RulesDevices) {
    const lists: { prio: number; seq: number; chain: CChain }[][] = HOOKS.map(() => []);
    let seq = 0;
    for (const t of tables) {
      for (const c of t.chains) {
        lists[HOOKS.indexOf(c.hook)]!.push({ prio: c.priority, seq: seq++, chain: this.compileChain(t, c) });
      }
    }
    this.byHook = lists.map((l) => l.sort((a, b) => a.prio - b.prio || a.seq - b.seq).map((e) => e.chain));
    this.packets = new Float64Array(this.ids.length);
    this.bytes = new Float64Array(this.ids.length);
    const hooks: PacketHook[] = [];
    for (let h = 0; h < HOOK_COUNT; h++) hooks.push(new RulesHook(this, h));
    this.hooks = hooks;
  }

  /** Counter rows of rules that count (`counter: true`) and of every chain policy. */
  counters(): RuleCounterRow[] {
    const rows: RuleCounterRow[] = [];
    for (let i = 0; i < this.ids.length; i++) {
      if (this.ids[i] !== '') rows.push({ id: this.ids[i]!, packets: this.packets[i]!, bytes: this.bytes[i]! });
    }
    return rows;
  }

  /** Packets counted by the rule `object/table/chain/rule` (or `.../policy`), 0 when unknown. */
  counterOf(id: string): number {
    const i = this.ids.indexOf(id);
    return i < 0 ? 0 : this.packets[i]!;
  }

  private compileChain(t: RuleTable, c: Chain): CChain {
    const rules = c.rules.map((r) => this.compileRule(t, c, r));
    const policyId = this.ids.length;
    this.ids.push(`${t.object}/${t.name}/${c.name}/policy`);
    const early = (c.hook === 'prerouting' || c.hook === 'output') && c.priority < -200;
    return new CChain(c.type === 'nat', c.policy === 'drop', rules, policyId, early);
  }

  private compileRule(t: RuleTable, c: Chain, r: Rule): CRule {
    const id = this.ids.length;
    const counted = r.kind === 'filter' && r.counter;
    this.ids.push(counted ? `${t.object}/${t.name}/${c.name}/${r.name}` : '');
    const conds = r.conds.map(compileCond);
    if (r.kind === 'route') return new CRule(id, conds, false, A_ROUTE, 0, 0);
    if (r.kind === 'nat') {
      const a = r.action;
      if (a.type === 'masquerade') return new CRule(id, conds, false, A_MASQ, 0, 0);
      const mask = a.prefixLen === 0 ? 0 : (0xffffffff << (32 - a.prefixLen)) >>> 0;
      return new CRule(id, conds, false, a.type === 'dnat' ? A_DNAT : A_SNAT, a.addr, mask);
    }
    const a = r.action;
    switch (a.type) {
      case 'none': return new CRule(id, conds, counted, A_NONE, 0, 0);
      case 'accept': return new CRule(id, conds, counted, A_ACCEPT, 0, 0);
      case 'drop': return new CRule(id, conds, counted, A_DROP, 0, 0);
      case 'reject': return new CRule(id, conds, counted, A_REJECT, 0, 0);
      case 'ctmark': return new CRule(id, conds, counted, A_CTMARK, a.mark, 0);
      case 'metamarkfromctmark': return new CRule(id, conds, counted, A_METAMARK, 0, 0);
      case 'tcpmssclamp': return new CRule(id, conds, counted, A_MSS, a.mss, 0);
      case 'notrack': return new CRule(id, conds, counted, A_NOTRACK, 0, 0);
    }
  }

  /** Runs the chains of hook `h` on one packet; VERDICT_ACCEPT or VERDICT_DROP. */
  run(h: number, buf: Uint8Array, v: IpView, meta: PacketMeta): number {
    const st = this.state;
    if (h === HOOK_PREROUTING || h === HOOK_OUTPUT) {
      st.mark = 0;
      st.ctmark = 0;
      st.notrack = false;
      st.dnatDone = false;
      st.snatDone = false;
    }
    // ip-family tables see IPv4 only.
    if (v.family !== 4) return VERDICT_ACCEPT;
    const chains = this.byHook[h]!;
    const len = v.end - v.off;
    for (let ci = 0; ci < chains.length; ci++) {
      const chain = chains[ci]!;
      // The kernel binds each manipulation (destination at prerouting/output, source at
      // postrouting/input) once: later nat chains for the same one are not consulted.
      if (chain.nat && (st.notrack || (h === HOOK_PREROUTING || h === HOOK_OUTPUT ? st.dnatDone : st.snatDone))) continue;
      let verdict = -1;
      const rules = chain.rules;
      for (let ri = 0; ri < rules.length && verdict < 0; ri++) {
        const r = rules[ri]!;
        if (!this.matches(r, buf, v, meta)) continue;
        if (r.counter) {
          this.packets[r.id]!++;
          this.bytes[r.id]! += len;
        }
        verdict = this.act(r, chain, buf, v, meta);
      }
      if (verdict < 0) {
        this.packets[chain.policyId]!++;
        this.bytes[chain.policyId]! += len;
        verdict = chain.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
      }
      if (verdict === VERDICT_DROP) return VERDICT_DROP;
    }
    return VERDICT_ACCEPT;
  }

  /** -1: continue with the next rule; else the chain's verdict. */
  private act(r: CRule, chain: CChain, buf: Uint8Array, v: IpView, meta: PacketMeta): number {
    const st = this.state;
    switch (r.action) {
      case A_ACCEPT: return VERDICT_ACCEPT;
      case A_DROP: return VERDICT_DROP;
      case A_REJECT: this.rejected++; return VERDICT_DROP;
      case A_CTMARK: st.ctmark = r.value; return -1;
      case A_METAMARK: st.mark = st.ctmark; meta.mark = st.ctmark; return -1;
      case A_NOTRACK: if (chain.beforeConntrack) st.notrack = true; return -1;
      case A_MSS: clampMss(buf, v, r.value !== 0 ? r.value : this.devices.pathMtu - 40); return -1;
      case A_DNAT: this.nat(buf, v, v.dstOff, r.value, r.mask); st.dnatDone = true; return VERDICT_ACCEPT;
      case A_SNAT: this.nat(buf, v, v.srcOff, r.value, r.mask); st.snatDone = true; return VERDICT_ACCEPT;
      case A_MASQ: {
        const d = this.devices;
        const a = meta.output === OUTPUT_PEER ? d.peerAddr : meta.output === OUTPUT_NODE ? d.nodeAddr : d.hostAddr;
        this.nat(buf, v, v.srcOff, a, 0xffffffff);
        st.snatDone = true;
        return VERDICT_ACCEPT;
      }
      default: return -1;
    }
  }

  private nat(buf: Uint8Array, v: IpView, off: number, value: number, mask: number): void {
    const old = ((buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!) >>> 0;
    const neu = ((value & mask) | (old & ~mask)) >>> 0;
    if (neu === old) return;
    let l4Csum = -1;
    let kind = CSUM_NONE;
    if (v.l4 >= 0) {
      if (v.proto === 6 && v.l4Len >= 18) { l4Csum = v.l4 + 16; kind = CSUM_ALWAYS; }
      else if (v.proto === 17 && v.l4Len >= 8) { l4Csum = v.l4 + 6; kind = CSUM_UDP; }
    }
    for (let w = 0; w < 4; w += 2) {
      const o = read16(buf, off + w);
      const n = w === 0 ? neu >>> 16 : neu & 0xffff;
      patchWord(buf, v.ipCsumOff, CSUM_ALWAYS, o, n);
      if (l4Csum >= 0) patchWord(buf, l4Csum, kind, o, n);
      buf[off + w] = n >>> 8;
      buf[off + w + 1] = n & 0xff;
    }
  }

  private matches(r: CRule, buf: Uint8Array, v: IpView, meta: PacketMeta): boolean {
    const conds = r.conds;
    for (let i = 0; i < conds.length; i++) {
      const c = conds[i]!;
      let hit: boolean;
      switch (c.kind) {
        case C_PROTO:
          if (v.proto !== c.lo) return false;
          continue;
        case C_DEV_IN: case C_DEV_OUT: {
          const name = c.kind === C_DEV_IN ? this.inName(meta) : this.outName(meta);
          if (name === '') return false;
          hit = name === c.name;
          break;
        }
        case C_IP_SRC: case C_IP_DST: {
          const o = c.kind === C_IP_SRC ? v.srcOff : v.dstOff;
          const a = ((buf[o]! << 24) | (buf[o + 1]! << 16) | (buf[o + 2]! << 8) | buf[o + 3]!) >>> 0;
          hit = a >= c.lo && a <= c.hi;
          break;
        }
        default: {
          if (v.l4 < 0 || v.l4Len < 4) return false;
          const p = read16(buf, v.l4 + (c.kind === C_PORT_SRC ? 0 : 2));
          hit = p >= c.lo && p <= c.hi;
        }
      }
      if (hit === c.neq) return false;
    }
    return true;
  }

  private inName(meta: PacketMeta): string {
    if (meta.inDev !== '') return meta.inDev;
    const s = meta.source;
    return s === SOURCE_PEER ? this.devices.peer : s === SOURCE_NODE ? this.devices.node : s === SOURCE_HOST ? '' : '';
  }

  private outName(meta: PacketMeta): string {
    if (meta.outDev !== '') return meta.outDev;
    const o = meta.output;
    return o === OUTPUT_PEER ? this.devices.peer : o === OUTPUT_NODE ? this.devices.node : o === OUTPUT_HOST ? this.devices.host : '';
  }
}

class RulesHook implements PacketHook {
  readonly name: string;
  constructor(private readonly engine: RulesEngine, private readonly hook: number) {
    this.name = `rules:${HOOKS[hook]}`;
  }

  process(buf: Uint8Array, v: IpView, meta: PacketMeta): number {
    return this.engine.run(this.hook, buf, v, meta);
  }
}

