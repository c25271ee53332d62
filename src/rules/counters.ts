/**
 * What RulesRuntime (runtime.ts) counts: per compiled rule id the packets and bytes of rules with
 * `counter` and of chain policies, and the packets each rule on the general matcher matched (all
 * restart when a rule set is installed); and the runtime's own totals (RulesStats).
 * The arrays are written on the packet path by index; rows are built only when asked.
 */
import type { FlowStats } from '../nat/flows.js';
import type { CompiledRules } from './compile.js';

export interface RuleCounterRow {
  readonly id: string;
  readonly packets: number;
  readonly bytes: number;
}

export interface RulesStats {
  flows: FlowStats;
  /** Packets dropped by reject (a reply sent or not). */
  rejected: number;
  /** Reject replies not sent: not allowed (about an ICMP error, a fragment), no headroom, rate. */
  rejectNoReply: number;
  /** Packets not tracked: invalid for conntrack, non-first fragments, notrack. */
  untracked: number;
  /** Non-first fragments (no reassembly: IPv4 ones take their first fragment's connection, IPv6 ones are untracked). */
  fragments: number;
  /** New connections refused: no free source port for SNAT / reply tuple taken. */
  natNoPort: number;
  /** New IPv6 connections masquerade dropped: the output has no IPv6 address (RulesDevices.*Addr6). */
  natNoAddress: number;
  /** Connections removed by install() because the rule that bound their NAT is gone. */
  flushed: number;
  /** Packets translated (or passed) by the stateless mirror shortcut, without conntrack. */
  stateless: number;
  /** SYN / SYN-ACK segments whose MSS option tcpmssclamp lowered. */
  mssClamped: number;
}

export function emptyRulesStats(flows: FlowStats): RulesStats {
  return {
    flows,
    rejected: 0,
    rejectNoReply: 0,
    untracked: 0,
    fragments: 0,
    natNoPort: 0,
    natNoAddress: 0,
    flushed: 0,
    stateless: 0,
    mssClamped: 0,
  };
}

export class RuleCounters {
  private compiled: CompiledRules | null = null;
  private ids: readonly string[] = [];
  /** By compiled id: packets and bytes counted (rules with `counter`, chain policies). */
  packets = new Float64Array(0);
  bytes = new Float64Array(0);
  /** By compiled id: packets matched on the general path. */
  general = new Float64Array(0);

  /** Zeroed counters for `c`'s ids. */
  reset(c: CompiledRules | null): void {
    this.compiled = c;
    this.ids = c === null ? [] : c.ids;
    this.packets = new Float64Array(this.ids.length);
    this.bytes = new Float64Array(this.ids.length);
    this.general = new Float64Array(this.ids.length);
  }

  /** Rows of rules with `counter` and of chain policies (packets/bytes since install). */
  rows(): RuleCounterRow[] {
    const rows: RuleCounterRow[] = [];
    const counted = this.compiled?.counted ?? [];
    for (let i = 0; i < this.ids.length; i++)
      if (counted[i] === true) rows.push({ id: this.ids[i]!, packets: this.packets[i]!, bytes: this.bytes[i]! });
    return rows;
  }

  /** Packets counted by rule (or policy) `id`; 0 when unknown. */
  packetsOf(id: string): number {
    const i = this.ids.indexOf(id);
    return i < 0 ? 0 : this.packets[i]!;
  }

  /** Per rule on the general matcher (plan form `general`): packets it matched since install. */
  generalRows(): { id: string; packets: number }[] {
    const plan = this.compiled?.plan ?? [];
    return plan.filter((r) => r.form === 'general').map((r) => ({ id: r.id, packets: this.generalOf(r.id) }));
  }

  /** Packets matched by rule `id` on the general path (0 for compiled forms). */
  generalOf(id: string): number {
    const i = this.ids.indexOf(id);
    return i < 0 ? 0 : this.general[i]!;
  }
}
