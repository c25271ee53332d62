/**
 * Executes CompiledRules (compile.ts) on the router's hook points with conntrack, as nftables
 * does with nf_conntrack and the NAT core:
 * - PREROUTING/OUTPUT at priority -200: the packet's connection is looked up (conntrack.ts);
 * - the NAT core (-100 at PREROUTING/OUTPUT: destination; 100 at POSTROUTING/INPUT: source):
 *   for a new connection the nat chains decide (first match; the binding edits the entry's reply
 *   tuple), then the binding is applied to the packet — for every later packet too, reversed for
 *   replies; an ICMP error about a tracked connection is related: its quoted packet and outer
 *   address get nf_nat_icmp_reply_translation's treatment;
 * - confirmation at the end of POSTROUTING/INPUT (a packet dropped before never leaves an entry);
 * - ct mark lives on the entry; metamarkfromctmark copies it to PacketMeta.mark (policy routing);
 * - reject answers with ICMP net-unreachable (Liqo renders `reject` so) from the input
 *   interface's address, written in the headroom (VERDICT_REPLY), rate-limited (reject.ts);
 * - tcpmssclamp lowers a SYN's MSS (match.ts), to the route's MTU − 40 for value 0 (mss.ts);
 * - counters per rule and the runtime's totals: counters.ts.
 * IPv4 packets run the ip tables' steps, IPv6 packets the ip6 tables' (run6: the same steps on
 * IPv6 conntrack, without the mirror shortcut or hook skipping); a family without tables passes
 * untouched and untracked, as in the kernel.
 * Fragments are not reassembled (the kernel's conntrack does, then re-fragments): a first
 * fragment is tracked by its transport header and remembered; the datagram's later fragments
 * get its connection's address translation. A later fragment seen before the first one is
 * untracked (the kernel would hold it until the datagram is complete).
 * Live update: install() swaps the compiled rules between two packets; connections keep their
 * entries unless their NAT binding's rule is gone (then they are removed and re-decided).
 * Deviations from the kernel are listed in README ("Rules: deviations").
 */
import type { IpView } from '../packet/ip-view.js';
import { FLOW_DNAT, FLOW_SNAT, DIR_REPLY, FlowTable, type FlowTableInit } from '../nat/flows.js';
import { QuotedPacket } from '../nat/quoted.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import {
  HOOK_COUNT,
  HOOK_FORWARD,
  HOOK_INPUT,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  SOURCE_SELF,
  VERDICT_ACCEPT,
  VERDICT_DROP,
  type PacketHook,
  type PacketMeta,
} from '../router/hooks.js';
import {
  A_ACCEPT,
  A_CTMARK,
  A_DROP,
  A_METAMARK,
  A_MSS,
  A_NOTRACK,
  A_REJECT,
  A_SETSRC,
  S_CHAIN,
  S_CONFIRM,
  S_CT,
  S_NAT,
  type CChain,
  type CStep,
  type CompiledRules,
} from './compile.js';
import { RulesConntrack } from './conntrack.js';
import { runIp6Steps, type Ip6StepContext } from './ip6-steps.js';
import { RuleCounters, emptyRulesStats, type RuleCounterRow, type RulesStats } from './counters.js';
import { inDevName, masqueradeAddr, outDevName, type RulesDevices } from './devices.js';
import { rejectPacket } from './reject.js';
import { clampMss, condsMatch } from './match.js';
import { readU32BE } from '../packet/flow-mix.js';
import { MSS_OVERHEAD_V4, MSS_OVERHEAD_V6, routeMss } from './mss.js';
import { HOOKS } from './model.js';
import {
  M_D,
  M_ERR_POST,
  M_ERR_PRE,
  M_NONE,
  M_S,
  mirrorError,
  planMirror,
  rewriteIpv4Address,
  type MirrorPlan,
} from './mirror.js';

export interface RulesRuntimeOptions {
  /** Connection table size and timeouts (default 65536 entries, the RFC timeouts of src/nat). */
  readonly flows?: Partial<FlowTableInit>;
  /** Rate of reject replies (per second, burst). Default 100/20. */
  readonly rejectRatePerSecond?: number;
  readonly rejectBurst?: number;
  /**
   * Use the proven stateless shortcut for mirrored remap pairs when the rule set has its shape
   * (mirror.ts). Default true; false runs every packet through conntrack (tests compare both).
   */
  readonly statelessMirror?: boolean;
}

/**
 * Forward chains of the packet: run at FORWARD (RUN); decided and counted at PREROUTING
 * (DONE: a mirror packet, skipLater); or skipped with their policies counted at POSTROUTING
 * (AT_POST: skipEstablished). When the router calls FORWARD anyway (another stage shares the
 * hook) DONE returns at once and AT_POST falls back to RUN: nothing is counted twice.
 */
const FWD_RUN = 0,
  FWD_DONE = 1,
  FWD_AT_POST = 2;

export class RulesRuntime {
  readonly flows: FlowTable;
  readonly hooks: readonly PacketHook[];
  private compiled: CompiledRules | null = null;
  private readonly cnt = new RuleCounters();
  /** The packet's connection (conntrack.ts). */
  private readonly ct: RulesConntrack;
  private readonly rejectBucket: TokenBucket;
  private readonly q = new QuotedPacket();
  private readonly scratch = new Uint8Array(4);
  private readonly st: RulesStats;
  private readonly mirrorOn: boolean;
  private mirror: MirrorPlan | null = null;
  /** Mirror class of the packet being processed (M_*) and its pair. */
  private mcls = M_NONE;
  /** Per IP protocol: 1 when no forward chain can match it nor drops by policy (skipEstablished, skipLater). */
  private fwdSkip = new Uint8Array(256);
  /** Policy counter ids of the forward chains. */
  private fwdPolicies = new Int32Array(0);
  /** Mirror plan constants: PREROUTING / POSTROUTING without filter chain; skip masks of D / S packets; snat excludes an oif. */
  private mPostPlain = false;
  private mPrePlain = false;
  private mSkipD = 0;
  private mSkipS = 0;
  private mNotOut = false;
  private mOutOk = new Uint8Array(3);
  /** FWD_*: how this packet's forward chains are run. */
  private fwd = FWD_RUN;
  private mpair = 0;
  /** What the ip6 steps use (ip6-steps.ts); made once. */
  private readonly ip6: Ip6StepContext;

  constructor(
    private devices: RulesDevices,
    opts: RulesRuntimeOptions = {},
  ) {
    this.flows = new FlowTable({
      capacity: opts.flows?.capacity ?? 65536,
      ...(opts.flows?.timeouts ? { timeouts: opts.flows.timeouts } : {}),
      ...(opts.flows?.seed !== undefined ? { seed: opts.flows.seed } : {}),
    });
    this.rejectBucket = new TokenBucket(opts.rejectRatePerSecond ?? 100, opts.rejectBurst ?? 20);
    this.st = emptyRulesStats(this.flows.stats());
    this.ct = new RulesConntrack(this.flows, this.q, this.st);
    this.mirrorOn = opts.statelessMirror ?? true;
    this.ip6 = {
      chain: (ch, buf, v, meta, now) => this.chain(ch, buf, v, meta, now),
      ct: this.ct,
      flows: this.flows,
      cnt: this.cnt,
      devices: () => this.devices,
    };
    const hooks: PacketHook[] = [];
    for (let h = 0; h < HOOK_COUNT; h++) hooks.push(new RuntimeHook(this, h));
    this.hooks = hooks;
  }

  /**
   * Puts `c` in force between two packets. Counters restart; connections whose NAT binding's
   * rule is not in `c` are removed (returned), the others keep their entries and bindings.
   */
  install(c: CompiledRules | null): number {
    this.compiled = c;
    this.cnt.reset(c);
    this.ct.release(false);
    this.replan();
    const n = this.ct.flushGone(c === null ? new Set<string>() : c.binds);
    this.st.flushed += n;
    return n;
  }

  /** Interface names and addresses (masquerade, reject source) from now on. */
  setDevices(d: RulesDevices): void {
    this.devices = d;
    this.replan();
  }

  private replan(): void {
    const c = this.compiled;
    const d = this.devices;
    this.mirror = c === null || !this.mirrorOn ? null : planMirror(c, [d.peerAddr, d.nodeAddr, d.hostAddr]);
    const fwd = c === null ? [] : c.steps[HOOK_FORWARD]!.map((x) => x.chain!);
    this.fwdSkip = new Uint8Array(256).fill(fwd.every((x) => x.onlyProto >= 0 && !x.dropPolicy) ? 1 : 0);
    for (const x of fwd) if (x.onlyProto >= 0) this.fwdSkip[x.onlyProto] = 0;
    this.fwdPolicies = Int32Array.from(fwd.map((x) => x.policyId));
    // The mirror's per-packet constants (skipLater, run, mirrorPost).
    const m = this.mirror;
    const none = (h: number): boolean => m !== null && m.chains[h]!.length === 0;
    this.mPostPlain = none(HOOK_POSTROUTING);
    this.mPrePlain = none(HOOK_PREROUTING);
    this.mSkipS = none(HOOK_INPUT) ? 1 << HOOK_INPUT : 0;
    this.mSkipD = this.mSkipS | (none(HOOK_POSTROUTING) ? 1 << HOOK_POSTROUTING : 0);
    this.mNotOut = m !== null && m.notOut.length > 0;
    this.mOutOk = Uint8Array.from([d.host, d.node, d.peer].map((x) => (m?.snatOut(x) === true ? 1 : 0))); // by OUTPUT_HOST/NODE/PEER
  }

  /** Whether the stateless mirror shortcut is in force (mirror.ts). */
  get statelessShortcut(): boolean {
    return this.mirror !== null;
  }

  get rules(): CompiledRules | null {
    return this.compiled;
  }

  /** Rows of rules with `counter` and of chain policies (packets/bytes since install). */
  counters(): RuleCounterRow[] {
    return this.cnt.rows();
  }

  /** Packets counted by rule (or policy) `id`; 0 when unknown. */
  counterOf(id: string): number {
    return this.cnt.packetsOf(id);
  }

  /** Per rule on the general matcher (plan form `general`): packets it matched since install. */
  generalCounters(): { id: string; packets: number }[] {
    return this.cnt.generalRows();
  }

  /** Packets matched by rule `id` on the general path (0 for compiled forms). */
  generalOf(id: string): number {
    return this.cnt.generalOf(id);
  }

  stats(): RulesStats {
    return { ...this.st, flows: this.flows.stats() };
  }

  /** Conntrack housekeeping (call from a timer). */
  expire(now: number, budget = 1024): number {
    return this.flows.expire(now, budget);
  }

  /** The ct mark of the connection of the packet being processed (-1: untracked). */
  get currentMark(): number {
    return this.ct.e < 0 ? -1 : this.flows.mark[this.ct.e]!;
  }

  // ------------------------------------------------------------------ per packet

  run(h: number, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    this.flows.zone = meta.zone;
    // A mirror packet past PREROUTING at a hook without filter chains: only POSTROUTING's
    // source translation (kept small so the call stays cheap).
    if (this.mcls !== M_NONE && h === HOOK_POSTROUTING && this.mPostPlain) return this.mirrorPost(buf, v, meta);
    if (this.fwd !== FWD_RUN && h !== HOOK_PREROUTING && h !== HOOK_OUTPUT) {
      // The forward chains were decided at PREROUTING (see FWD_*); the router still called.
      if (h === HOOK_FORWARD) {
        if (this.fwd === FWD_DONE) return VERDICT_ACCEPT;
        this.fwd = FWD_RUN;
      } else if (h === HOOK_POSTROUTING && this.fwd === FWD_AT_POST) this.countForward(v);
    }
    // The router's own ICMP error about the packet it drops (Time Exceeded, reject, Fragmentation
    // Needed) is related to that packet's connection, new ones included: the kernel attaches the
    // dying packet's conntrack entry to the error (nf_ct_attach), so a mirror packet's error is
    // translated back, and a new connection's entry is used, never confirmed (freed at the next packet).
    const selfError =
      h === HOOK_OUTPUT &&
      meta.source === SOURCE_SELF &&
      v.l4 >= 0 &&
      (v.proto === 1 ? buf[v.l4] === 3 || buf[v.l4] === 11 : v.proto === 58 && buf[v.l4]! >= 1 && buf[v.l4]! <= 3);
    const selfAfterMirror = selfError && this.mcls !== M_NONE,
      dyingD = this.mcls === M_D;
    if (h === HOOK_PREROUTING || h === HOOK_OUTPUT) {
      this.fwd = FWD_RUN;
      this.ct.begin(selfError);
      this.mcls = M_NONE;
    }
    const c = this.compiled;
    if (c === null) return VERDICT_ACCEPT;
    if (v.family !== 4) return runIp6Steps(this.ip6, c.steps6[h]!, h, buf, v, meta, now);
    if ((h === HOOK_PREROUTING || selfAfterMirror) && this.mirror !== null) {
      // The router's own error about a dying D packet is read as the peer's would be (from the tunnel).
      this.mcls = this.mirror.classify(
        buf,
        v,
        selfAfterMirror && dyingD ? this.mirror.tunnel : inDevName(this.devices, meta),
        this.q,
      );
      this.mpair = this.mirror.pair;
      if (this.mcls !== M_NONE && h === HOOK_PREROUTING) this.skipLater(v, meta);
    }
    if (this.mcls !== M_NONE) {
      if (h === HOOK_PREROUTING && this.mPrePlain) {
        this.mirrorPre(buf, v);
        return VERDICT_ACCEPT;
      }
      return this.runMirror(h, buf, v, meta, now);
    }
    const steps = c.steps[h]!;
    let i = 0;
    if (c.natOnly[h] === 1) {
      // No filter chain at this hook: an established (or related) packet only needs the
      // conntrack lookup and its binding; a new one takes the general loop below.
      if (h === HOOK_PREROUTING || h === HOOK_OUTPUT) {
        this.ct.track(buf, v, now);
        if (!this.ct.isNew) {
          if (this.ct.e >= 0) this.ct.apply(buf, v, false);
          this.skipEstablished(h, v, meta);
          return VERDICT_ACCEPT;
        }
        i = 1; // the conntrack step is done
      } else if (!this.ct.isNew) {
        if (this.ct.e >= 0) this.ct.apply(buf, v, true);
        return VERDICT_ACCEPT;
      }
    }
    for (; i < steps.length; i++) {
      const s = steps[i]!;
      switch (s.kind) {
        case S_CHAIN: {
          const r = this.chain(s.chain!, buf, v, meta, now);
          if (r !== VERDICT_ACCEPT) {
            this.ct.abandon();
            return r;
          }
          break;
        }
        case S_CT:
          this.ct.track(buf, v, now);
          break;
        case S_NAT:
          if (s.chain !== null) {
            if (
              this.ct.isNew &&
              this.ct.e >= 0 &&
              this.ct.decide(
                s.chain,
                h === HOOK_POSTROUTING || h === HOOK_INPUT,
                buf,
                v,
                inDevName(this.devices, meta),
                outDevName(this.devices, meta),
                masqueradeAddr(this.devices, meta),
                this.cnt,
                now,
              ) === VERDICT_DROP
            ) {
              this.ct.abandon();
              return VERDICT_DROP;
            }
          } else if (this.ct.e >= 0) {
            this.ct.apply(buf, v, h === HOOK_POSTROUTING || h === HOOK_INPUT);
          }
          break;
        case S_CONFIRM:
          if (this.ct.pending >= 0) {
            const ok = this.flows.confirm(this.ct.pending, now);
            this.ct.pending = -1;
            if (!ok) {
              this.ct.e = -1;
              return VERDICT_DROP;
            }
          }
          break;
      }
    }
    return VERDICT_ACCEPT;
  }

  /**
   * A packet of an established connection (or untracked) after PREROUTING/OUTPUT: the later
   * hooks where this runtime has nothing to do, for the router to skip (PacketMeta.skip) —
   * INPUT / POSTROUTING when they have no filter chain and the connection's binding changes
   * nothing there; FORWARD when each of its chains needs another protocol and POSTROUTING still
   * runs: their accept policies are then counted at POSTROUTING, which a forwarded packet
   * reaches exactly when it passed FORWARD (the router's hop, which may drop it, comes before).
   */
  private skipEstablished(h: number, v: IpView, meta: PacketMeta): void {
    const c = this.compiled!;
    let bit = FLOW_SNAT;
    if (this.ct.dir === DIR_REPLY) bit ^= FLOW_SNAT | FLOW_DNAT;
    let skip = 0;
    if (this.ct.e < 0 || (this.flows.natBits(this.ct.e) & bit) === 0) {
      if (c.natOnly[HOOK_POSTROUTING] === 1) skip |= 1 << HOOK_POSTROUTING;
      if (c.natOnly[HOOK_INPUT] === 1) skip |= 1 << HOOK_INPUT;
    }
    if (h === HOOK_PREROUTING && this.fwdSkip[v.proto] === 1 && (skip & (1 << HOOK_POSTROUTING)) === 0) {
      skip |= 1 << HOOK_FORWARD;
      if (this.fwdPolicies.length > 0) this.fwd = FWD_AT_POST;
    }
    if (skip !== 0) {
      meta.skip = skip;
      if (meta.skipOwner !== this) meta.skipOwner = this;
    }
  }

  /** The accept policies of the forward chains skipped for this packet (skipEstablished). */
  private countForward(v: IpView): void {
    this.fwd = FWD_RUN;
    this.countForwardPolicies(v.end - v.off);
  }

  /** Counts a packet of `len` bytes to every forward chain's accept policy. */
  private countForwardPolicies(len: number): void {
    const ids = this.fwdPolicies;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      this.cnt.packets[id]!++;
      this.cnt.bytes[id]! += len;
    }
  }

  /** The pair's source translation (S) or an error's related one, at POSTROUTING. */
  private mirrorPost(buf: Uint8Array, v: IpView, meta: PacketMeta): number {
    const m = this.mirror!;
    const k = this.mpair;
    if (this.mcls === M_S) {
      if (
        !this.mNotOut ||
        (meta.outDev === '' ? meta.output >= 0 && this.mOutOk[meta.output] === 1 : m.snatOut(meta.outDev))
      )
        rewriteIpv4Address(buf, v, v.srcOff, m.rem[k]! | (readU32BE(buf, v.srcOff) & m.mask[k]!));
    } else if (this.mcls === M_ERR_POST) mirrorError(this.q, this.scratch, m, k, buf, v, true);
    return VERDICT_ACCEPT;
  }

  /** A packet of a mirror class: filter chains as usual, the pair's translation instead of conntrack. */
  private runMirror(h: number, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    const chains = this.mirror!.chains[h]!;
    // Filter chains in order, the pair's translation at the NAT core's place among them.
    const at = chains.length === 0 ? 0 : this.mirror!.natAt[h]!;
    for (let i = 0; i <= chains.length; i++) {
      if (i === at) {
        if (h === HOOK_PREROUTING) this.mirrorPre(buf, v);
        else if (h === HOOK_POSTROUTING) this.mirrorPost(buf, v, meta);
      }
      if (i === chains.length) break;
      const r = this.chain(chains[i]!, buf, v, meta, now);
      if (r !== VERDICT_ACCEPT) return r;
    }
    return VERDICT_ACCEPT;
  }

  private mirrorPre(buf: Uint8Array, v: IpView): void {
    const m = this.mirror!;
    const k = this.mpair;
    this.st.stateless++;
    if (this.mcls === M_D) rewriteIpv4Address(buf, v, v.dstOff, m.real[k]! | (readU32BE(buf, v.dstOff) & m.mask[k]!));
    else if (this.mcls === M_ERR_PRE) mirrorError(this.q, this.scratch, m, k, buf, v, false);
  }

  /**
   * A mirror packet: the later hooks with nothing to do for it, for the router to skip
   * (PacketMeta.skip). Forward chains whose rules all need another protocol are decided here:
   * their accept policy is counted now (a packet the router drops before forwarding — no
   * route, TTL — is then counted too).
   */
  private skipLater(v: IpView, meta: PacketMeta): void {
    let skip = this.mcls === M_D || this.mcls === M_ERR_PRE ? this.mSkipD : this.mSkipS;
    if (this.fwdSkip[v.proto] === 1) {
      this.countForwardPolicies(v.end - v.off);
      skip |= 1 << HOOK_FORWARD;
      this.fwd = FWD_DONE;
    }
    meta.skip = skip;
    if (meta.skipOwner !== this) meta.skipOwner = this;
  }

  private chain(ch: CChain, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    const rules = ch.filter;
    if (ch.onlyProto >= 0 && v.proto !== ch.onlyProto) {
      this.cnt.packets[ch.policyId]!++;
      this.cnt.bytes[ch.policyId]! += v.end - v.off;
      return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
    }
    const inName = inDevName(this.devices, meta);
    const outName = outDevName(this.devices, meta);
    const len = v.end - v.off;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      if (!condsMatch(r.conds, buf, v, inName, outName)) continue;
      if (r.counter) {
        this.cnt.packets[r.id]!++;
        this.cnt.bytes[r.id]! += len;
      }
      if (r.general) this.cnt.general[r.id]!++;
      switch (r.action) {
        case A_ACCEPT:
          return VERDICT_ACCEPT;
        case A_DROP:
          return VERDICT_DROP;
        case A_REJECT:
          return rejectPacket(buf, v, meta, now, this.devices, this.rejectBucket, this.scratch, this.st);
        case A_CTMARK:
          if (this.ct.e >= 0) this.flows.mark[this.ct.e] = r.value;
          break;
        case A_METAMARK:
          if (this.ct.e >= 0) meta.mark = this.flows.mark[this.ct.e]!;
          break;
        case A_NOTRACK:
          if (ch.beforeConntrack) this.ct.notrack = true;
          break;
        case A_MSS: {
          const oh = v.family === 4 ? MSS_OVERHEAD_V4 : MSS_OVERHEAD_V6;
          const mss = r.value !== 0 ? r.value : routeMss(this.devices, meta.source, meta.output, oh);
          if (clampMss(buf, v, mss)) this.st.mssClamped++;
          break;
        }
        case A_SETSRC:
          rewriteIpv4Address(buf, v, v.srcOff, r.value);
          break;
        default:
          break;
      }
    }
    this.cnt.packets[ch.policyId]!++;
    this.cnt.bytes[ch.policyId]! += len;
    return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
  }
}

class RuntimeHook implements PacketHook {
  readonly name: string;
  readonly owner: RulesRuntime;
  constructor(
    private readonly rt: RulesRuntime,
    private readonly hook: number,
  ) {
    this.name = `rules:${HOOKS[hook]}`;
    this.owner = rt;
  }

  process(buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    return this.rt.run(this.hook, buf, v, meta, now);
  }
}
