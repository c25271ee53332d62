/**
 * Executes CompiledRules (compile.ts) on the router's hook points with conntrack, as nftables
 * does with nf_conntrack and the NAT core:
 * - PREROUTING/OUTPUT at priority -200: the packet's connection is looked up (src/nat/flows.ts);
 *   a first packet gets an unconfirmed entry (TCP: a SYN, or a pure ACK picked up mid-stream as
 *   the kernel's nf_conntrack_tcp_loose does; SYN-ACK/FIN/RST without a connection, an echo
 *   reply or an ICMP error without one are invalid: untracked, never NATed);
 * - the NAT core (-100 at PREROUTING/OUTPUT: destination; 100 at POSTROUTING/INPUT: source):
 *   for a new connection the nat chains decide (first match; the binding edits the entry's reply
 *   tuple), then the binding is applied to the packet — for every later packet too, reversed for
 *   replies; an ICMP error about a tracked connection is related: its quoted packet and outer
 *   address get nf_nat_icmp_reply_translation's treatment;
 * - confirmation at the end of POSTROUTING/INPUT (a packet dropped before never leaves an entry);
 * - ct mark lives on the entry; metamarkfromctmark copies it to PacketMeta.mark (policy routing);
 * - reject answers with ICMP net-unreachable (Liqo renders `reject` so) from the input
 *   interface's address, written in the headroom (VERDICT_REPLY), rate-limited.
 * Only IPv4 is seen (Liqo's tables are family ip): IPv6 packets pass untouched and untracked.
 * Fragments are not reassembled (the kernel's conntrack does, then re-fragments): a first
 * fragment is tracked by its transport header and remembered; the datagram's later fragments
 * get its connection's address translation. A later fragment seen before the first one is
 * untracked (the kernel would hold it until the datagram is complete).
 * Live update: install() swaps the compiled rules between two packets; connections keep their
 * entries unless their NAT binding's rule is gone (then they are removed and re-decided).
 * Deviations from the kernel are listed in README ("Rules: deviations").
 */
import type { IpView } from '../packet/ip-view.js';
import { TIME_EXCEEDED_V4_PREFIX } from '../packet/icmp-error.js';
import {
  FLOW_DNAT,
  FLOW_ESTABLISHED,
  FLOW_OTHER,
  FLOW_SNAT,
  FLOW_SYN_SENT,
  FLOW_UDP,
  DIR_ORIG,
  DIR_REPLY,
  FlowTable,
  type FlowTableInit,
  type FlowStats,
} from '../nat/flows.js';
import { QuotedPacket } from '../nat/quoted.js';
import {
  CSUM_ALWAYS,
  CSUM_NONE,
  CSUM_UDP,
  fixZeroIcmpv4Checksum,
  patchWord,
  read16,
  rewriteAddress,
  rewriteWord,
} from '../nat/rewrite.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import {
  HOOK_COUNT,
  HOOK_FORWARD,
  HOOK_INPUT,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_HOST,
  OUTPUT_NODE,
  OUTPUT_PEER,
  SOURCE_HOST,
  SOURCE_NODE,
  SOURCE_PEER,
  SOURCE_SELF,
  VERDICT_ACCEPT,
  VERDICT_DROP,
  VERDICT_REPLY,
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
  N_DNAT,
  N_MAP,
  N_MASQ,
  S_CHAIN,
  S_CONFIRM,
  S_CT,
  S_NAT,
  type CChain,
  type CompiledRules,
  type CNatRule,
} from './compile.js';
import type { RulesDevices } from './devices.js';
import { FragmentMemory } from './fragments.js';
import { uniqueSourcePort } from './nat-port.js';
import { writeReject } from './reject.js';
import { clampMss, condsMatch, readU32 } from './match.js';
import { HOOKS } from './model.js';
import {
  ICMP_ERR_TYPES,
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

export interface RuleCounterRow {
  readonly id: string;
  readonly packets: number;
  readonly bytes: number;
}

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

export interface RulesStats {
  flows: FlowStats;
  /** Packets dropped by reject (a reply sent or not). */
  rejected: number;
  /** Reject replies not sent: not allowed (about an ICMP error, a fragment), no headroom, rate. */
  rejectNoReply: number;
  /** Packets not tracked: invalid for conntrack, non-first fragments, notrack. */
  untracked: number;
  /** Non-first IPv4 fragments (no reassembly: untracked, not translated). */
  fragments: number;
  /** New connections refused: no free source port for SNAT / reply tuple taken. */
  natNoPort: number;
  /** Connections removed by install() because the rule that bound their NAT is gone. */
  flushed: number;
  /** Packets translated (or passed) by the stateless mirror shortcut, without conntrack. */
  stateless: number;
  /** SYN / SYN-ACK segments whose MSS option tcpmssclamp lowered. */
  mssClamped: number;
}

const SYN = 0x02,
  ACK = 0x10,
  FIN = 0x01,
  RST = 0x04;
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
  private ids: readonly string[] = [];
  private packets = new Float64Array(0);
  private bytes = new Float64Array(0);
  /** Per compiled id: packets matched on the general path. */
  private general = new Float64Array(0);
  /** Per entry: binding identity of its DNAT / SNAT (index into bindNames; -1 none). */
  private readonly dnatBy: Int32Array;
  private readonly snatBy: Int32Array;
  private readonly bindIndex = new Map<string, number>();
  private readonly bindNames: string[] = [];
  private readonly rejectBucket: TokenBucket;
  private readonly q = new QuotedPacket();
  private readonly scratch = new Uint8Array(4);
  // Per-packet state, valid from PREROUTING/OUTPUT to the last hook of the packet.
  private e = -1;
  private dir = DIR_ORIG;
  private isNew = false;
  private notrack = false;
  private related = false;
  private pending = -1;
  /** A dropped packet's new entry, freed at the next packet; `attached`: the router's error about it uses it. */
  private held = -1;
  private attached = -1;
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
  private readonly frags = new FragmentMemory();

  constructor(
    private devices: RulesDevices,
    opts: RulesRuntimeOptions = {},
  ) {
    this.flows = new FlowTable({
      capacity: opts.flows?.capacity ?? 65536,
      ...(opts.flows?.timeouts ? { timeouts: opts.flows.timeouts } : {}),
      ...(opts.flows?.seed !== undefined ? { seed: opts.flows.seed } : {}),
    });
    this.dnatBy = new Int32Array(this.flows.capacity).fill(-1);
    this.snatBy = new Int32Array(this.flows.capacity).fill(-1);
    this.rejectBucket = new TokenBucket(opts.rejectRatePerSecond ?? 100, opts.rejectBurst ?? 20);
    this.st = {
      flows: this.flows.stats(),
      rejected: 0,
      rejectNoReply: 0,
      untracked: 0,
      fragments: 0,
      natNoPort: 0,
      flushed: 0,
      stateless: 0,
      mssClamped: 0,
    };
    this.mirrorOn = opts.statelessMirror ?? true;
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
    this.ids = c === null ? [] : c.ids;
    this.packets = new Float64Array(this.ids.length);
    this.bytes = new Float64Array(this.ids.length);
    this.general = new Float64Array(this.ids.length);
    this.release(false);
    this.replan();
    const keep = c === null ? new Set<string>() : c.binds;
    const gone = (b: number): boolean => b >= 0 && !keep.has(this.bindNames[b]!);
    const n = this.flows.removeWhere((e) => gone(this.dnatBy[e]!) || gone(this.snatBy[e]!));
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
    const rows: RuleCounterRow[] = [];
    const counted = this.compiled?.counted ?? [];
    for (let i = 0; i < this.ids.length; i++)
      if (counted[i] === true) rows.push({ id: this.ids[i]!, packets: this.packets[i]!, bytes: this.bytes[i]! });
    return rows;
  }

  /** Packets counted by rule (or policy) `id`; 0 when unknown. */
  counterOf(id: string): number {
    const i = this.ids.indexOf(id);
    return i < 0 ? 0 : this.packets[i]!;
  }

  /** Per rule on the general matcher (plan form `general`): packets it matched since install. */
  generalCounters(): { id: string; packets: number }[] {
    const plan = this.compiled?.plan ?? [];
    return plan.filter((r) => r.form === 'general').map((r) => ({ id: r.id, packets: this.generalOf(r.id) }));
  }

  /** Packets matched by rule `id` on the general path (0 for compiled forms). */
  generalOf(id: string): number {
    const i = this.ids.indexOf(id);
    return i < 0 ? 0 : this.general[i]!;
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
    return this.e < 0 ? -1 : this.flows.mark[this.e]!;
  }

  /** The packet is dropped: its new entry is held (unconfirmed, unfindable) for the router's error about it. */
  private abandon(): void {
    if (this.pending < 0) return;
    if (this.held >= 0) this.flows.free(this.held);
    this.held = this.pending;
    this.pending = -1;
  }

  /** At a packet's first hook: frees what the last packet left, but the entry its router error (`self`) is attached to. */
  private release(self: boolean): void {
    this.abandon();
    this.attached = self ? this.held : -1;
    if (!self && this.held >= 0) {
      this.flows.free(this.held);
      this.held = -1;
    }
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
      v.proto === 1 &&
      v.l4 >= 0 &&
      (buf[v.l4] === 3 || buf[v.l4] === 11);
    const selfAfterMirror = selfError && this.mcls !== M_NONE,
      dyingD = this.mcls === M_D;
    if (h === HOOK_PREROUTING || h === HOOK_OUTPUT) {
      this.fwd = FWD_RUN;
      this.release(selfError);
      this.e = -1;
      this.isNew = false;
      this.notrack = false;
      this.related = false;
      this.mcls = M_NONE;
    }
    const c = this.compiled;
    if (c === null || v.family !== 4) return VERDICT_ACCEPT;
    if ((h === HOOK_PREROUTING || selfAfterMirror) && this.mirror !== null) {
      // The router's own error about a dying D packet is read as the peer's would be (from the tunnel).
      this.mcls = this.mirror.classify(
        buf,
        v,
        selfAfterMirror && dyingD ? this.mirror.tunnel : this.inName(meta),
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
        this.track(buf, v, now);
        if (!this.isNew) {
          if (this.e >= 0) this.apply(buf, v, false);
          this.skipEstablished(h, v, meta);
          return VERDICT_ACCEPT;
        }
        i = 1; // the conntrack step is done
      } else if (!this.isNew) {
        if (this.e >= 0) this.apply(buf, v, true);
        return VERDICT_ACCEPT;
      }
    }
    for (; i < steps.length; i++) {
      const s = steps[i]!;
      switch (s.kind) {
        case S_CHAIN: {
          const r = this.chain(s.chain!, buf, v, meta, now);
          if (r !== VERDICT_ACCEPT) {
            this.abandon();
            return r;
          }
          break;
        }
        case S_CT:
          this.track(buf, v, now);
          break;
        case S_NAT:
          if (s.chain !== null) {
            if (this.isNew && this.e >= 0 && this.decide(s.chain, h, buf, v, meta, now) === VERDICT_DROP) {
              this.abandon();
              return VERDICT_DROP;
            }
          } else if (this.e >= 0) {
            this.apply(buf, v, h === HOOK_POSTROUTING || h === HOOK_INPUT);
          }
          break;
        case S_CONFIRM:
          if (this.pending >= 0) {
            const ok = this.flows.confirm(this.pending, now);
            this.pending = -1;
            if (!ok) {
              this.e = -1;
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
    if (this.dir === DIR_REPLY) bit ^= FLOW_SNAT | FLOW_DNAT;
    let skip = 0;
    if (this.e < 0 || (this.flows.natBits(this.e) & bit) === 0) {
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
    const ids = this.fwdPolicies;
    const len = v.end - v.off;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      this.packets[id]!++;
      this.bytes[id]! += len;
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
        rewriteIpv4Address(buf, v, v.srcOff, m.rem[k]! | (readU32(buf, v.srcOff) & m.mask[k]!));
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
    if (this.mcls === M_D) rewriteIpv4Address(buf, v, v.dstOff, m.real[k]! | (readU32(buf, v.dstOff) & m.mask[k]!));
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
      const ids = this.fwdPolicies;
      const len = v.end - v.off;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        this.packets[id]!++;
        this.bytes[id]! += len;
      }
      skip |= 1 << HOOK_FORWARD;
      this.fwd = FWD_DONE;
    }
    meta.skip = skip;
    if (meta.skipOwner !== this) meta.skipOwner = this;
  }

  /** The router's names first (Liqo mode names the node tunnels' Geneve interfaces), else the lane's. */
  private inName(meta: PacketMeta): string {
    if (meta.inDev !== '') return meta.inDev;
    const s = meta.source;
    return s === SOURCE_PEER ? this.devices.peer : s === SOURCE_NODE ? this.devices.node : '';
  }

  private outName(meta: PacketMeta): string {
    if (meta.outDev !== '') return meta.outDev;
    const o = meta.output;
    return o === OUTPUT_PEER
      ? this.devices.peer
      : o === OUTPUT_NODE
        ? this.devices.node
        : o === OUTPUT_HOST
          ? this.devices.host
          : '';
  }

  private chain(ch: CChain, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    const rules = ch.filter;
    if (ch.onlyProto >= 0 && v.proto !== ch.onlyProto) {
      this.packets[ch.policyId]!++;
      this.bytes[ch.policyId]! += v.end - v.off;
      return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
    }
    const inName = this.inName(meta);
    const outName = this.outName(meta);
    const len = v.end - v.off;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      if (!condsMatch(r.conds, buf, v, inName, outName)) continue;
      if (r.counter) {
        this.packets[r.id]!++;
        this.bytes[r.id]! += len;
      }
      if (r.general) this.general[r.id]!++;
      switch (r.action) {
        case A_ACCEPT:
          return VERDICT_ACCEPT;
        case A_DROP:
          return VERDICT_DROP;
        case A_REJECT:
          return this.reject(buf, v, meta, now);
        case A_CTMARK:
          if (this.e >= 0) this.flows.mark[this.e] = r.value;
          break;
        case A_METAMARK:
          if (this.e >= 0) meta.mark = this.flows.mark[this.e]!;
          break;
        case A_NOTRACK:
          if (ch.beforeConntrack) this.notrack = true;
          break;
        case A_MSS:
          if (clampMss(buf, v, r.value !== 0 ? r.value : this.devices.pathMtu - 40)) this.st.mssClamped++;
          break;
        case A_SETSRC:
          rewriteIpv4Address(buf, v, v.srcOff, r.value);
          break;
        default:
          break;
      }
    }
    this.packets[ch.policyId]!++;
    this.bytes[ch.policyId]! += len;
    return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
  }

  /** nft `reject` (Liqo: icmp net-unreachable) about the packet, from the input interface's address. */
  private reject(buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    this.st.rejected++;
    const d = this.devices;
    const from =
      meta.source === SOURCE_PEER
        ? d.peerAddr
        : meta.source === SOURCE_NODE
          ? d.nodeAddr
          : meta.source === SOURCE_HOST
            ? d.hostAddr
            : 0;
    const n =
      from === 0 || v.off < TIME_EXCEEDED_V4_PREFIX + 64 || !this.rejectBucket.take(now)
        ? 0
        : writeReject(buf, v, from, this.scratch);
    if (n === 0) {
      this.st.rejectNoReply++;
      return VERDICT_DROP;
    }
    meta.replyOff = v.off - TIME_EXCEEDED_V4_PREFIX;
    meta.replyLen = n;
    return VERDICT_REPLY;
  }

  /** Conntrack lookup / new entry (see header). */
  private track(buf: Uint8Array, v: IpView, now: number): void {
    if (this.notrack) {
      this.st.untracked++;
      return;
    }
    const l4 = v.l4;
    if (l4 < 0) {
      this.trackFragment(buf, v, now);
      return;
    }
    const proto = v.proto;
    let sp = 0,
      dp = 0,
      flags = 0,
      state = FLOW_OTHER;
    if (proto === 6 || proto === 17) {
      if (v.l4Len < (proto === 6 ? 20 : 8)) {
        this.st.untracked++;
        return;
      }
      sp = read16(buf, l4);
      dp = read16(buf, l4 + 2);
      if (proto === 6) flags = buf[l4 + 13]!;
      state = proto === 6 ? ((flags & (SYN | ACK)) === SYN ? FLOW_SYN_SENT : FLOW_ESTABLISHED) : FLOW_UDP;
    } else if (proto === 1) {
      if (v.l4Len < 8) {
        this.st.untracked++;
        return;
      }
      const t = buf[l4]!;
      if (t === 8 || t === 0) {
        sp = dp = read16(buf, l4 + 4);
      } else if (t < 32 && ((ICMP_ERR_TYPES >>> t) & 1) !== 0) {
        this.trackRelated(buf, v, now);
        return;
      } else {
        this.st.untracked++;
        return;
      }
    }
    const f = this.flows;
    const k = f.lookup4(proto, readU32(buf, v.srcOff) | 0, readU32(buf, v.dstOff) | 0, sp, dp, now);
    const first = (buf[v.off + 6]! & 0x20) !== 0;
    if (k >= 0) {
      this.e = k >> 1;
      this.dir = k & 1;
      f.seen(this.e, this.dir, flags, now);
      if (first) this.frags.remember(buf, v, k, now);
      return;
    }
    // Not a connection's first packet: invalid, untracked (the NAT never sees it).
    const tcpInvalid = proto === 6 && ((flags & (RST | FIN)) !== 0 || (flags & (SYN | ACK)) === (SYN | ACK));
    if (tcpInvalid || (proto === 1 && buf[l4] === 0)) {
      this.st.untracked++;
      return;
    }
    const e = f.create(4, proto, buf, v.srcOff, v.dstOff, sp, dp, state, now);
    this.dnatBy[e] = -1;
    this.snatBy[e] = -1;
    f.seen(e, DIR_ORIG, flags, now);
    this.e = e;
    this.dir = DIR_ORIG;
    this.isNew = true;
    this.pending = e;
    if (first) this.frags.remember(buf, v, e * 2, now);
  }

  /** A non-first fragment: the connection of its datagram's first fragment, if seen. */
  private trackFragment(buf: Uint8Array, v: IpView, now: number): void {
    this.st.fragments++;
    const k = this.frags.lookup(buf, v, now);
    if (k < 0 || this.flows.state[k >> 1] === 0 || this.flows.unconfirmed(k >> 1)) {
      this.st.untracked++;
      return;
    }
    this.e = k >> 1;
    this.dir = k & 1;
  }

  /** An ICMP error: related to the connection its quoted packet belongs to, if any. */
  private trackRelated(buf: Uint8Array, v: IpView, now: number): void {
    if (this.attached >= 0) {
      this.e = this.attached;
      this.dir = DIR_REPLY;
      this.related = true;
      return;
    }
    const q = this.q;
    if (q.parse(buf, v) !== 0 || !q.ports || q.addrLen !== 4) {
      this.st.untracked++;
      return;
    }
    const p = q.proto;
    let sp: number, dp: number;
    if (p === 6 || p === 17) {
      sp = read16(buf, q.l4);
      dp = read16(buf, q.l4 + 2);
    } else {
      sp = dp = read16(buf, q.l4 + 4);
    }
    // The quoted packet went the other way: look its tuple up inverted.
    const k = this.flows.lookup(4, p, buf, q.dst, q.src, dp, sp, now);
    if (k < 0) {
      this.st.untracked++;
      return;
    }
    this.e = k >> 1;
    this.dir = k & 1;
    this.related = true;
  }

  /** A nat chain deciding a new connection's binding for this hook's manipulation. */
  private decide(ch: CChain, h: number, buf: Uint8Array, v: IpView, meta: PacketMeta, now: number): number {
    const srcManip = h === HOOK_POSTROUTING || h === HOOK_INPUT;
    const f = this.flows;
    const e = this.e;
    if ((f.natBits(e) & (srcManip ? FLOW_SNAT : FLOW_DNAT)) !== 0) return VERDICT_ACCEPT;
    const inName = this.inName(meta);
    const outName = this.outName(meta);
    const rules = ch.natRules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      let target: number;
      let bind: string;
      if (r.kind === N_MAP) {
        const m = r.map!.get(readU32(buf, v.dstOff));
        if (m === undefined) continue;
        target = m.addr;
        bind = m.bind;
      } else {
        if (!condsMatch(r.conds, buf, v, inName, outName)) continue;
        bind = r.bind;
        target = this.targetOf(r, buf, v, meta);
      }
      if (!this.bindTo(e, srcManip, target, bind, now)) {
        this.st.natNoPort++;
        return VERDICT_DROP;
      }
      return VERDICT_ACCEPT;
    }
    this.packets[ch.policyId]!++;
    return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
  }

  private targetOf(r: CNatRule, buf: Uint8Array, v: IpView, meta: PacketMeta): number {
    if (r.kind === N_MASQ) {
      const d = this.devices;
      return meta.output === OUTPUT_PEER ? d.peerAddr : meta.output === OUTPUT_NODE ? d.nodeAddr : d.hostAddr;
    }
    if (r.remap === null) return r.addr;
    // PrefixRemap.translate on the packet's own address bytes (netmap: host bits kept).
    r.remap.translate(buf, r.kind === N_DNAT ? v.dstOff : v.srcOff, this.scratch, 0);
    return readU32(this.scratch, 0);
  }

  /** Edits the pending entry's reply tuple for the binding; false when no port is free. */
  private bindTo(e: number, srcManip: boolean, addr: number, bind: string, now: number): boolean {
    const f = this.flows;
    const rb = f.tupleAddr(e, DIR_REPLY);
    // Reply tuple: source = where the original goes (DNAT), destination = where it comes from (SNAT).
    f.setReplyAddr4(e, srcManip, addr);
    let bi = this.bindIndex.get(bind);
    if (bi === undefined) {
      bi = this.bindNames.length;
      this.bindNames.push(bind);
      this.bindIndex.set(bind, bi);
    }
    if (srcManip) {
      f.setNat(e, FLOW_SNAT);
      this.snatBy[e] = bi;
    } else {
      f.setNat(e, FLOW_DNAT);
      this.dnatBy[e] = bi;
    }
    // Source port clash: another port of the original's class (nat-port.ts).
    return !srcManip || uniqueSourcePort(f, e, rb, now);
  }

  /** Applies the connection's binding for this hook's manipulation to the packet. */
  private apply(buf: Uint8Array, v: IpView, srcManip: boolean): void {
    const f = this.flows;
    const e = this.e;
    const bits = f.natBits(e);
    if (bits === 0) return;
    // Which binding this manipulation undoes/applies depends on the packet's direction.
    let bit = srcManip ? FLOW_SNAT : FLOW_DNAT;
    if (this.dir === DIR_REPLY) bit ^= FLOW_SNAT | FLOW_DNAT;
    if ((bits & bit) === 0) return;
    const other = 1 - this.dir;
    const ob = f.tupleAddr(e, other);
    const op = e * 4 + other * 2;
    const l4 = v.l4;
    const proto = v.proto;
    if (this.related) {
      // nf_nat_icmp_reply_translation: inner packet gets the opposite manipulation from the
      // other direction's tuple, the outer header this manipulation from its inverse.
      const q = this.q;
      // Re-located: a manipulation at an earlier hook changed the quoted bytes' sum.
      if (q.parse(buf, v) !== 0) return;
      if (srcManip) {
        q.address(buf, q.dst, f.addr, ob + 16);
        this.quotedPort(buf, q.l4 + 2, f.port[op + 1]!);
      } else {
        q.address(buf, q.src, f.addr, ob);
        this.quotedPort(buf, q.l4, f.port[op]!);
      }
      q.finish(buf, l4);
      rewriteAddress(
        buf,
        srcManip ? v.srcOff : v.dstOff,
        4,
        f.addr,
        srcManip ? ob + 16 : ob,
        v.ipCsumOff,
        -1,
        CSUM_NONE,
      );
      return;
    }
    // IPv4 address against the tuple's number (no byte loop, no call when equal).
    const ao = srcManip ? v.srcOff : v.dstOff;
    rewriteIpv4Address(buf, v, ao, f.a32[e * 4 + other * 2 + (srcManip ? 1 : 0)]! | 0);
    let csum = -1;
    let kind = CSUM_NONE;
    if (l4 >= 0) {
      if (proto === 6 && v.l4Len >= 18) {
        csum = l4 + 16;
        kind = CSUM_ALWAYS;
      } else if (proto === 17 && v.l4Len >= 8) {
        csum = l4 + 6;
        kind = CSUM_UDP;
      }
    }
    if (l4 < 0) return;
    const port = srcManip ? f.port[op + 1]! : f.port[op]!;
    if (proto === 6 || proto === 17) {
      const po = l4 + (srcManip ? 0 : 2);
      if (read16(buf, po) !== port) rewriteWord(buf, po, port, csum, kind);
    } else if (proto === 1 && v.l4Len >= 8 && (buf[l4] === 8 || buf[l4] === 0)) {
      if (read16(buf, l4 + 4) !== port) {
        rewriteWord(buf, l4 + 4, port, l4 + 2, CSUM_ALWAYS);
        fixZeroIcmpv4Checksum(buf, l4, v.l4Len); // an all-zero echo needs 0xffff (rewrite.ts)
      }
    }
  }

  /** A quoted port / echo identifier (ICMP echo: both tuple ports are the identifier). */
  private quotedPort(buf: Uint8Array, off: number, value: number): void {
    const q = this.q;
    if (q.proto === 1) off = q.l4 + 4;
    if (read16(buf, off) !== value) q.word(buf, off, value);
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
