/**
 * The ip6 tables' steps for one IPv6 packet at one hook: chains, conntrack, NAT, confirm — as
 * the IPv4 path of runtime.ts without its shortcuts (every hook runs). No I/O, no allocation.
 */
import type { IpView } from '../packet/ip-view.js';
import type { FlowTable } from '../nat/flows.js';
import { HOOK_INPUT, HOOK_POSTROUTING, VERDICT_ACCEPT, VERDICT_DROP, type PacketMeta } from '../router/hooks.js';
import { S_CHAIN, S_CONFIRM, S_CT, S_NAT, type CChain, type CStep } from './compile.js';
import type { RulesConntrack } from './conntrack.js';
import type { RuleCounters } from './counters.js';
import { inDevName, masqueradeAddr6, outDevName, type RulesDevices } from './devices.js';

/** What the ip6 steps use of the runtime that owns them. */
export interface Ip6StepContext {
  chain(ch: CChain, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number;
  readonly ct: RulesConntrack;
  readonly flows: FlowTable;
  readonly cnt: RuleCounters;
  devices(): RulesDevices;
}

/** An IPv6 packet at hook h: the ip6 tables' steps, every hook run (no shortcut, no skipping). */
export function runIp6Steps(
  x: Ip6StepContext,
  steps: readonly CStep[],
  h: number,
  buf: Uint8Array,
  v: IpView,
  meta: PacketMeta,
  now: number,
): number {
  const devices = x.devices();
  const src = h === HOOK_POSTROUTING || h === HOOK_INPUT;
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!;
    switch (s.kind) {
      case S_CHAIN: {
        const r = x.chain(s.chain!, buf, v, meta, now);
        if (r !== VERDICT_ACCEPT) {
          x.ct.abandon();
          return r;
        }
        break;
      }
      case S_CT:
        x.ct.track6(buf, v, now);
        break;
      case S_NAT:
        if (s.chain !== null) {
          if (
            x.ct.isNew &&
            x.ct.e >= 0 &&
            x.ct.decide6(
              s.chain,
              src,
              buf,
              v,
              inDevName(devices, meta),
              outDevName(devices, meta),
              masqueradeAddr6(devices, meta),
              x.cnt,
              now,
            ) === VERDICT_DROP
          ) {
            x.ct.abandon();
            return VERDICT_DROP;
          }
        } else if (x.ct.e >= 0) x.ct.apply(buf, v, src);
        break;
      case S_CONFIRM:
        if (x.ct.pending >= 0) {
          const ok = x.flows.confirm(x.ct.pending, now);
          x.ct.pending = -1;
          if (!ok) {
            x.ct.e = -1;
            return VERDICT_DROP;
          }
        }
        break;
    }
  }
  return VERDICT_ACCEPT;
}
