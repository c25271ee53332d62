/**
 * Stateless shortcut for Liqo's mirrored remap pairs (runtime.ts uses it; compile.ts is its input).
 *
 * Shape: a prerouting nat rule `ip daddr REM, iifname != T [, iifname != X…] → dnat prefix REAL`
 * and a postrouting nat rule `ip saddr REAL, iifname == T [, oifname != Y…] → snat prefix REM`
 * (REM and REAL of one length; Liqo's remap-podcidr / remap-externalcidr add X = Y = eth0, the
 * YAML mode's pairs have none) form a bijection whose replies are its inverse. For packets
 * between a local address `a` and the peer side of such a pair, conntrack's answer does not
 * depend on the connection's history:
 *   D  (iif ∉ {T, X…}, dst ∈ REM, src a): dst → REAL at prerouting — whether conntrack sees it
 *      as a new connection (dnat rule) or as the reply of an S connection (binding reversed);
 *   S  (iif = T, src ∈ REAL, dst a): src → REM at postrouting when oif ∉ {Y…} — new (snat rule)
 *      or reply of D; out of Y it is untranslated (new: no rule may match it, checked below);
 *   ICMP errors quoting (src REM, dst a) / (src a, dst REAL): the related translation of the
 *      quoted packet and the outer destination / source (nf_nat_icmp_reply_translation).
 * A packet entering by an X is left to conntrack. It holds when `a` is in SAFE: no other nat
 * rule can match such a packet (other postrouting rules exclude source a unless they need
 * iif = T, and with Y… destination a if they may see the tunnel's REAL sources; other
 * prerouting rules exclude destination a unless they need iif ≠ T), a is no NAT target of
 * another rule nor an interface address (masquerade), nor in any REM. `a` may be in a REAL
 * (the peer's real CIDR overlapping ours, Liqo's reason to remap): the pair's dnat needs
 * iif ≠ T and its snat iif = T, so the interface keeps D and S apart; an error quoting
 * (REAL, REAL) is read as about a D packet only when it comes from the tunnel; no ct mark or meta
 * mark rule can see a D-direction (source a) or S-direction (destination a) packet; earlier
 * rules of the hook's nat chains (walked as one list: the first binding wins) cannot match
 * the pair's packets; no notrack rule anywhere; no nat chain at input, none with a drop
 * policy; at output only the pairs' own dnat (the host's connections: never on the shortcut).
 * Otherwise plan() returns null and every packet takes conntrack.
 * Deviations (README "Rules: deviations"): a packet conntrack would find invalid (a TCP
 * SYN-ACK/FIN/RST or echo reply without a connection) is translated here; the reply of a D flow
 * routed out of a Y (asymmetric) is not; a pair's tuple also used by an excluded packet (host
 * OUTPUT, an X) is not remembered.
 * Per packet: no allocation.
 */
import { HOOK_INPUT, HOOK_OUTPUT, HOOK_POSTROUTING, HOOK_PREROUTING } from '../router/hooks.js';
import {
  N_DNAT,
  N_MAP,
  N_MASQ,
  N_SNAT,
  S_CHAIN,
  S_NAT,
  A_CTMARK,
  A_METAMARK,
  A_NOTRACK,
  type CChain,
  type CFilterRule,
  type CompiledRules,
  type CNatRule,
} from './compile.js';
import type { IpView } from '../packet/ip-view.js';
import type { QuotedPacket } from '../nat/quoted.js';
import { CSUM_ALWAYS, CSUM_NONE, l4ChecksumKind, l4ChecksumOffset, patchWord, rewriteAddress } from '../nat/rewrite.js';
import { C_DEV_IN, C_DEV_OUT, C_IP_DST, C_IP_SRC, type CCond } from './match.js';
import { readU32BE } from '../packet/flow-mix.js';

export const M_NONE = 0,
  M_D = 1,
  M_S = 2,
  M_ERR_PRE = 3,
  M_ERR_POST = 4;
/** ICMPv4 error types (3, 4, 5, 11, 12) as bits. */
export const ICMP_ERR_TYPES = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 11) | (1 << 12);

type Ranges = [number, number][];

function subtract(s: Ranges, lo: number, hi: number): Ranges {
  const out: Ranges = [];
  for (const [a, b] of s) {
    if (hi < a || lo > b) {
      out.push([a, b]);
      continue;
    }
    if (a < lo) out.push([a, lo - 1]);
    if (b > hi) out.push([hi + 1, b]);
  }
  return out;
}

/** The addresses a rule's conditions at `kind` (C_IP_SRC/C_IP_DST) accept, as ranges. */
function accepted(conds: readonly CCond[], kind: number): Ranges {
  let lo = 0,
    hi = 0xffffffff;
  for (const c of conds)
    if (c.kind === kind && !c.neq) {
      lo = Math.max(lo, c.lo);
      hi = Math.min(hi, c.hi);
    }
  if (lo > hi) return [];
  let r: Ranges = [[lo, hi]];
  for (const c of conds) if (c.kind === kind && c.neq) r = subtract(r, c.lo, c.hi);
  return r;
}

const devIs = (conds: readonly CCond[], neq: boolean, t: string): boolean =>
  conds.some((c) => c.kind === C_DEV_IN && c.neq === neq && c.name === t);
/** The rule needs `oifname == t`: never an S packet (iif = T; a gateway does not send a peer's packet back into the tunnel). */
const outIs = (conds: readonly CCond[], t: string): boolean =>
  conds.some((c) => c.kind === C_DEV_OUT && !c.neq && c.name === t);

function prefixOf(p: { addr: Uint8Array; prefixLen: number }): [number, number] {
  const lo = ((p.addr[0]! << 24) | (p.addr[1]! << 16) | (p.addr[2]! << 8) | p.addr[3]!) >>> 0;
  const host = p.prefixLen === 32 ? 0 : p.prefixLen === 0 ? 0xffffffff : (0xffffffff >>> p.prefixLen) >>> 0;
  return [lo, (lo | host) >>> 0];
}

/**
 * A mirror-shaped rule or null: a prefix dnat whose conditions are `ip daddr == REM` and one or
 * more `iifname != X` (the tunnel among them: Liqo adds its default interface), or a prefix
 * snat with `ip saddr == REAL`, `iifname == T` and any `oifname != Y` (Liqo: the default
 * interface). from: REM / REAL range of the match, to: the target range.
 */
function shape(
  r: CNatRule,
  kind: number,
): { from: [number, number]; to: [number, number]; tunnel: string; notIn: string[]; notOut: string[] } | null {
  if (r.kind !== kind || r.remap === null || r.remap.family !== 4) return null;
  const dnat = kind === N_DNAT;
  let ip: CCond | undefined;
  let tunnel = '';
  const notIn: string[] = [],
    notOut: string[] = [];
  for (const c of r.conds) {
    if (c.kind === (dnat ? C_IP_DST : C_IP_SRC) && !c.neq && ip === undefined) ip = c;
    else if (c.kind === C_DEV_IN && c.neq && dnat) notIn.push(c.name);
    else if (c.kind === C_DEV_IN && !c.neq && !dnat && tunnel === '') tunnel = c.name;
    else if (c.kind === C_DEV_OUT && c.neq && !dnat) notOut.push(c.name);
    else return null;
  }
  if (ip === undefined || (dnat ? notIn.length === 0 : tunnel === '')) return null;
  const from = prefixOf(r.remap.from);
  if (ip.lo !== from[0] || ip.hi !== from[1]) return null;
  return { from, to: prefixOf(r.remap.to), tunnel, notIn, notOut };
}

const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x) => b.includes(x));

export class MirrorPlan {
  constructor(
    readonly tunnel: string,
    /** Per pair: REM network, REAL network, host mask, network mask (as int32 bit patterns). */
    readonly rem: Int32Array,
    readonly real: Int32Array,
    readonly mask: Int32Array,
    readonly net: Int32Array,
    /** SAFE as sorted ranges (lo, hi) pairs. */
    readonly safe: Float64Array,
    /** Per hook: its filter chains in order, and how many run before the NAT core (the translation point). */
    readonly chains: readonly (readonly CChain[])[],
    readonly natAt: Uint8Array,
    /** Input interfaces the pairs' dnat excludes besides the tunnel (Liqo: eth0): conntrack's. */
    readonly notIn: readonly string[],
    /** Output interfaces the pairs' snat excludes (Liqo: eth0): an S packet leaving there is not translated. */
    readonly notOut: readonly string[],
  ) {}

  /** Pair of the last classify() (per packet). */
  pair = 0;

  /**
   * The mirror class (M_*) of an IPv4 packet at PREROUTING entering by interface `name`
   * ('' unknown), its pair in `pair`; M_NONE: conntrack decides. `q` is scratch.
   */
  classify(buf: Uint8Array, v: IpView, name: string, q: QuotedPacket): number {
    const p = v.proto;
    const l4 = v.l4;
    if (l4 >= 0) {
      // What conntrack leaves untracked stays with it (too short; ICMP other than echo).
      if (p === 6 && v.l4Len < 20) return M_NONE;
      if (p === 17 && v.l4Len < 8) return M_NONE;
      if (p === 1) {
        if (v.l4Len < 8) return M_NONE;
        const t = buf[l4]!;
        if (t < 32 && ((ICMP_ERR_TYPES >>> t) & 1) !== 0) {
          // Related: translated by the connection whatever the error's interfaces.
          if (q.parse(buf, v) !== 0 || !q.ports || q.addrLen !== 4) return M_NONE;
          const qs = readU32BE(buf, q.src),
            qd = readU32BE(buf, q.dst);
          let i = this.remOf(qs);
          if (i >= 0 && this.isSafe(qd)) {
            this.pair = i;
            return M_ERR_PRE;
          }
          // A quoted (a, REAL) leaves by the tunnel: its error comes back from there. When a is
          // in REAL too (the peer's real CIDR is ours), (REAL, a) from elsewhere could be an
          // untranslated S packet's: only the tunnel's is read as a D packet's.
          i = this.realOf(qd);
          if (i >= 0 && this.isSafe(qs) && (name === this.tunnel || this.realOf(qs) < 0)) {
            this.pair = i;
            return M_ERR_POST;
          }
          return M_NONE;
        }
        if (t !== 8 && t !== 0) return M_NONE;
      }
    }
    if (name === '') return M_NONE;
    if (name !== this.tunnel) {
      const x = this.notIn;
      for (let j = 0; j < x.length; j++) if (x[j] === name) return M_NONE;
      const i = this.remOf(readU32BE(buf, v.dstOff));
      if (i >= 0 && this.isSafe(readU32BE(buf, v.srcOff))) {
        this.pair = i;
        return M_D;
      }
    } else {
      const i = this.realOf(readU32BE(buf, v.srcOff));
      if (i >= 0 && this.isSafe(readU32BE(buf, v.dstOff))) {
        this.pair = i;
        return M_S;
      }
    }
    return M_NONE;
  }

  /** Whether an S packet leaving by `out` gets the pair's snat ('' unknown: a neq match fails). */
  snatOut(out: string): boolean {
    const x = this.notOut;
    if (x.length === 0) return true;
    if (out === '') return false;
    for (let j = 0; j < x.length; j++) if (x[j] === out) return false;
    return true;
  }

  /** Pair whose REM contains `a` (any 32-bit form), else -1. Int32 arithmetic only. */
  remOf(a: number): number {
    const rem = this.rem,
      net = this.net;
    for (let i = 0; i < rem.length; i++) if ((a & net[i]!) === rem[i]) return i;
    return -1;
  }

  realOf(a: number): number {
    const real = this.real,
      net = this.net;
    for (let i = 0; i < real.length; i++) if ((a & net[i]!) === real[i]) return i;
    return -1;
  }

  isSafe(a: number): boolean {
    const s = this.safe;
    for (let i = 0; i < s.length; i += 2) if (a >= s[i]! && a <= s[i + 1]!) return true;
    return false;
  }
}

/**
 * The shortcut for `c` with interface addresses `devAddrs` (masquerade targets), or null when the
 * rule set is not of the proven shape (see header).
 */
export function planMirror(c: CompiledRules, devAddrs: readonly number[]): MirrorPlan | null {
  if (!c.tracked) return null;
  // The nat chains of a hook, in order, as one rule list: the first binding wins (the kernel
  // stops walking nat chains once the connection has this manipulation).
  const natAt = (h: number): CChain[] => {
    const out: CChain[] = [];
    for (const s of c.steps[h]!) if (s.chain !== null && s.chain.nat && !out.includes(s.chain)) out.push(s.chain);
    return out;
  };
  const marks: CFilterRule[] = [];
  for (const steps of c.steps)
    for (const s of steps) {
      if (s.kind !== S_CHAIN) continue;
      for (const r of s.chain!.filter) {
        if (r.action === A_NOTRACK) return null;
        if (r.action === A_CTMARK || r.action === A_METAMARK) marks.push(r);
      }
    }
  if (natAt(HOOK_INPUT).length > 0) return null;
  const pres = natAt(HOOK_PREROUTING),
    posts = natAt(HOOK_POSTROUTING);
  if (pres.length === 0 || posts.length === 0 || [...pres, ...posts].some((ch) => ch.dropPolicy)) return null;
  const pre = pres.flatMap((ch) => ch.natRules),
    post = posts.flatMap((ch) => ch.natRules);
  // Pairs: a prerouting mirror dnat REM→REAL with its postrouting snat REAL→REM, one tunnel,
  // the same excluded interfaces for every pair.
  let tunnel = '';
  let notIn: string[] = [],
    notOut: string[] = [];
  const pairs: { rem: [number, number]; real: [number, number]; di: number; si: number }[] = [];
  for (let i = 0; i < pre.length; i++) {
    const d = shape(pre[i]!, N_DNAT);
    if (d === null) continue;
    let si = -1;
    for (let j = 0; j < post.length && si < 0; j++) {
      const s = shape(post[j]!, N_SNAT);
      if (
        s !== null &&
        d.notIn.includes(s.tunnel) &&
        s.from[0] === d.to[0] &&
        s.from[1] === d.to[1] &&
        s.to[0] === d.from[0] &&
        s.to[1] === d.from[1] &&
        (pairs.length === 0 ||
          (s.tunnel === tunnel &&
            sameSet(
              d.notIn.filter((x) => x !== tunnel),
              notIn,
            ) &&
            sameSet(s.notOut, notOut)))
      ) {
        si = j;
        if (pairs.length === 0) {
          tunnel = s.tunnel;
          notIn = d.notIn.filter((x) => x !== tunnel);
          notOut = s.notOut;
        }
      }
    }
    if (si >= 0) pairs.push({ rem: d.from, real: d.to, di: i, si });
  }
  if (pairs.length === 0) return null;
  // Output nat chains only as a pair's dnat for the host's own connections (the YAML mode's):
  // host packets never take the shortcut, and a reply to such a connection gets the pair's answer.
  const same = (a: [number, number], b: [number, number]): boolean => a[0] === b[0] && a[1] === b[1];
  for (const ch of natAt(HOOK_OUTPUT)) {
    if (ch.dropPolicy) return null;
    for (const r of ch.natRules) {
      if (r.kind !== N_DNAT || r.remap === null || r.remap.family !== 4) return null;
      const from = prefixOf(r.remap.from),
        to = prefixOf(r.remap.to);
      if (
        !pairs.some((p) => same(p.rem, from) && same(p.real, to)) ||
        !r.conds.every((c) => c.kind === C_IP_DST && !c.neq && c.lo === from[0] && c.hi === from[1])
      )
        return null;
    }
  }
  const all = pairs.flatMap((p) => [p.rem, p.real]);
  for (let i = 0; i < all.length; i++)
    for (let j = i + 1; j < all.length; j++) if (!(all[i]![1] < all[j]![0] || all[j]![1] < all[i]![0])) return null;
  const overlaps = (rs: Ranges, lo: number, hi: number): boolean => rs.some(([a, b]) => !(b < lo || a > hi));
  const touchesPairs = (rs: Ranges): boolean => all.some(([lo, hi]) => overlaps(rs, lo, hi));
  const isPairRule = (r: CNatRule): boolean => pairs.some((p) => pre[p.di] === r || post[p.si] === r);
  // Earlier rules must not match the pair's packets (first match).
  for (const p of pairs) {
    for (let j = 0; j < p.di; j++) {
      const r = pre[j]!;
      if (isPairRule(r) || devIs(r.conds, false, tunnel)) continue;
      if (
        r.kind === N_MAP
          ? [...r.map!.keys()].some((k) => k >= p.rem[0] && k <= p.rem[1])
          : overlaps(accepted(r.conds, C_IP_DST), p.rem[0], p.rem[1])
      )
        return null;
    }
    for (let j = 0; j < p.si; j++) {
      const r = post[j]!;
      if (isPairRule(r) || devIs(r.conds, true, tunnel) || outIs(r.conds, tunnel)) continue;
      if (overlaps(accepted(r.conds, C_IP_SRC), p.real[0], p.real[1])) return null;
    }
  }
  // REAL stays in SAFE: a local address may lie in a peer's real CIDR (Liqo remaps because they
  // overlap). The interface tells the directions apart (D enters elsewhere, S by the tunnel),
  // and classify() reads an ambiguous error only from the tunnel.
  let safe: Ranges = [[0, 0xffffffff]];
  for (const p of pairs) safe = subtract(safe, p.rem[0], p.rem[1]);
  let masq = false;
  for (const r of pre) {
    if (isPairRule(r)) continue;
    if (r.kind === N_MAP) {
      for (const [k, t] of r.map!) {
        safe = subtract(safe, k, k);
        safe = subtract(safe, t.addr, t.addr);
      }
      continue;
    }
    const [tlo, thi] = r.remap !== null ? prefixOf(r.remap.to) : [r.addr, r.addr];
    safe = subtract(safe, tlo, thi);
    if (devIs(r.conds, true, tunnel)) continue; // never sees S packets (iif = T)
    for (const [lo, hi] of accepted(r.conds, C_IP_DST)) safe = subtract(safe, lo, hi);
  }
  for (const r of post) {
    if (isPairRule(r)) continue;
    if (r.kind === N_MASQ) masq = true;
    else if (r.kind === N_MAP)
      for (const [k, t] of r.map!) {
        safe = subtract(safe, k, k);
        safe = subtract(safe, t.addr, t.addr);
      }
    else {
      const [tlo, thi] = r.remap !== null ? prefixOf(r.remap.to) : [r.addr, r.addr];
      safe = subtract(safe, tlo, thi);
    }
    // An S packet leaving by an excluded interface is not the pair's: later rules decide it
    // (stateless here: untranslated), so none may see one from the tunnel.
    const outOk = (y: string): boolean => r.conds.every((x) => x.kind !== C_DEV_OUT || (x.name === y) !== x.neq);
    if (
      notOut.some(outOk) &&
      !devIs(r.conds, true, tunnel) &&
      pairs.some((p) => overlaps(accepted(r.conds, C_IP_SRC), p.real[0], p.real[1]))
    ) {
      for (const [lo, hi] of accepted(r.conds, C_IP_DST)) safe = subtract(safe, lo, hi);
    }
    if (devIs(r.conds, false, tunnel)) continue; // never sees D packets (iif ≠ T)
    for (const [lo, hi] of accepted(r.conds, C_IP_SRC)) safe = subtract(safe, lo, hi);
  }
  if (masq) for (const a of devAddrs) if (a !== 0) safe = subtract(safe, a, a);
  // ct mark / meta mark from ct mark: no such rule may see a mirror connection's packet (its
  // mark lives on a connection the shortcut does not keep). D-direction packets (iif ≠ T)
  // have source a and the other address in REM/REAL; S-direction (iif = T) destination a.
  for (const r of marks) {
    const src = accepted(r.conds, C_IP_SRC),
      dst = accepted(r.conds, C_IP_DST);
    const inEq = r.conds.find((x) => x.kind === C_DEV_IN && !x.neq)?.name;
    const seesD = inEq === undefined || inEq !== tunnel;
    const seesS = inEq === undefined ? !devIs(r.conds, true, tunnel) : inEq === tunnel;
    if (seesD && touchesPairs(dst)) for (const [lo, hi] of src) safe = subtract(safe, lo, hi);
    if (seesS && touchesPairs(src)) for (const [lo, hi] of dst) safe = subtract(safe, lo, hi);
  }
  if (safe.length === 0) return null;
  return new MirrorPlan(
    tunnel,
    Int32Array.from(pairs.map((p) => p.rem[0] | 0)),
    Int32Array.from(pairs.map((p) => p.real[0] | 0)),
    Int32Array.from(pairs.map((p) => (p.rem[1] - p.rem[0]) | 0)),
    Int32Array.from(pairs.map((p) => ~(p.rem[1] - p.rem[0]) | 0)),
    Float64Array.from(safe.flat()),
    c.steps.map((l) => l.filter((s) => s.kind === S_CHAIN).map((s) => s.chain!)),
    Uint8Array.from(
      c.steps.map((l) => {
        const n = l.findIndex((s) => s.kind === S_NAT && s.chain === null);
        return l.slice(0, n < 0 ? l.length : n).filter((s) => s.kind === S_CHAIN).length;
      }),
    ),
    notIn,
    notOut,
  );
}

/**
 * An IPv4 address of the packet set to `na` (any 32-bit form: int32 or unsigned), every checksum
 * covering it patched (RFC 1624). Callers pass `x | 0`: an int32 stays unboxed more often than
 * an unsigned value ≥ 2^31 (no per-packet heap number when the call is not inlined).
 */
export function rewriteIpv4Address(buf: Uint8Array, v: IpView, ao: number, na: number): void {
  const l4 = v.l4;
  const proto = v.proto;
  const csum = l4ChecksumOffset(proto, l4, v.l4Len);
  const kind = l4ChecksumKind(proto, csum);
  const oh = (buf[ao]! << 8) | buf[ao + 1]!;
  const ol = (buf[ao + 2]! << 8) | buf[ao + 3]!;
  const nh = (na >>> 16) & 0xffff;
  const nl = na & 0xffff;
  if (oh === nh && ol === nl) return;
  let os = oh + ol,
    ns = nh + nl;
  os = (os & 0xffff) + (os >>> 16);
  ns = (ns & 0xffff) + (ns >>> 16);
  patchWord(buf, v.ipCsumOff, CSUM_ALWAYS, os, ns);
  if (csum >= 0) patchWord(buf, csum, kind, os, ns);
  buf[ao] = nh >>> 8;
  buf[ao + 1] = nh & 255;
  buf[ao + 2] = nl >>> 8;
  buf[ao + 3] = nl & 255;
}

/**
 * The related translation of an ICMP error about a mirror flow of pair k: post (srcManip) the
 * quoted destination REAL → REM and the outer source to it; pre the quoted source REM → REAL and
 * the outer destination to it — what the runtime's apply() does with a connection's tuples.
 */
export function mirrorError(
  q: QuotedPacket,
  scratch: Uint8Array,
  m: MirrorPlan,
  k: number,
  buf: Uint8Array,
  v: IpView,
  srcManip: boolean,
): void {
  if (q.parse(buf, v) !== 0) return;
  const qa = srcManip ? q.dst : q.src;
  const old = (buf[qa]! << 24) | (buf[qa + 1]! << 16) | (buf[qa + 2]! << 8) | buf[qa + 3]!;
  const na = ((srcManip ? m.rem[k]! : m.real[k]!) | (old & m.mask[k]!)) >>> 0;
  scratch[0] = na >>> 24;
  scratch[1] = (na >>> 16) & 255;
  scratch[2] = (na >>> 8) & 255;
  scratch[3] = na & 255;
  q.address(buf, qa, scratch, 0);
  q.finish(buf, v.l4);
  rewriteAddress(buf, srcManip ? v.srcOff : v.dstOff, 4, scratch, 0, v.ipCsumOff, -1, CSUM_NONE);
}
