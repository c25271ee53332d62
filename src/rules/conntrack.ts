/**
 * The connection tracking of RulesRuntime (runtime.ts), as nf_conntrack and the NAT core do it:
 * the packet's connection looked up or created unconfirmed (TCP: a SYN, or a pure ACK picked up
 * mid-stream as nf_conntrack_tcp_loose does; SYN-ACK/FIN/RST without a connection, an echo reply
 * or an ICMP error without one are invalid: untracked), an ICMP error related to the connection
 * it quotes, a non-first fragment given its datagram's connection (fragments.ts); NAT bindings
 * recorded on the entry's reply tuple and applied to every packet (reversed for replies; for a
 * related error nf_nat_icmp_reply_translation's treatment). Per packet: no allocation.
 * IPv6 (ip6 tables): track6 / decide6, the same with ICMPv6 (echo 128/129; errors, types below
 * 128, related) and 16-byte addresses; a non-first IPv6 fragment is untracked.
 * The per-packet state (e, dir, isNew…) is valid from PREROUTING/OUTPUT to the packet's last hook.
 */
import type { IpView } from '../packet/ip-view.js';
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
} from '../nat/flows.js';
import type { QuotedPacket } from '../nat/quoted.js';
import {
  CSUM_ALWAYS,
  CSUM_NONE,
  l4ChecksumKind,
  l4ChecksumOffset,
  fixZeroIcmpv4Checksum,
  read16,
  rewriteAddress,
  rewriteWord,
} from '../nat/rewrite.js';
import { VERDICT_ACCEPT, VERDICT_DROP } from '../router/hooks.js';
import { N_DNAT, N_MAP, N_MASQ, type CChain, type CNatRule } from './compile.js';
import { addressEquals } from '../packet/addr.js';
import type { RuleCounters, RulesStats } from './counters.js';
import { FragmentMemory } from './fragments.js';
import { condsMatch } from './match.js';
import { readU32BE } from '../packet/flow-mix.js';
import { ICMP_ERR_TYPES, rewriteIpv4Address } from './mirror.js';
import { uniqueSourcePort } from './nat-port.js';

const SYN = 0x02,
  ACK = 0x10,
  FIN = 0x01,
  RST = 0x04;

export class RulesConntrack {
  /** Per entry: binding identity of its DNAT / SNAT (index into bindNames; -1 none). */
  private readonly dnatBy: Int32Array;
  private readonly snatBy: Int32Array;
  private readonly bindIndex = new Map<string, number>();
  private readonly bindNames: string[] = [];
  private readonly frags = new FragmentMemory();
  private readonly scratch = new Uint8Array(16);
  // Per-packet state, valid from PREROUTING/OUTPUT to the last hook of the packet.
  /** The packet's entry (-1: untracked) and its direction. */
  e = -1;
  dir = DIR_ORIG;
  /** The entry was created by this packet (unconfirmed). */
  isNew = false;
  /** A notrack rule before conntrack matched. */
  notrack = false;
  /** An ICMP error related to the entry. */
  related = false;
  /** The new entry to confirm at the end of POSTROUTING/INPUT. */
  pending = -1;
  /** A dropped packet's new entry, freed at the next packet; `attached`: the router's error about it uses it. */
  private held = -1;
  private attached = -1;

  constructor(
    readonly flows: FlowTable,
    /** Shared with the runtime (mirror errors): one packet at a time. */
    private readonly q: QuotedPacket,
    private readonly st: RulesStats,
  ) {
    this.dnatBy = new Int32Array(flows.capacity).fill(-1);
    this.snatBy = new Int32Array(flows.capacity).fill(-1);
  }

  /** The packet's first hook: per-packet state reset (`selfError`: see release). */
  begin(selfError: boolean): void {
    this.release(selfError);
    this.e = -1;
    this.isNew = false;
    this.notrack = false;
    this.related = false;
  }

  /** Removes the connections whose NAT binding's rule is not in `keep`; returns how many. */
  flushGone(keep: ReadonlySet<string>): number {
    const gone = (b: number): boolean => b >= 0 && !keep.has(this.bindNames[b]!);
    return this.flows.removeWhere((e) => gone(this.dnatBy[e]!) || gone(this.snatBy[e]!));
  }

  /**
   * A nat chain deciding the new connection's binding for one manipulation (source: POSTROUTING /
   * INPUT, destination: PREROUTING / OUTPUT): the first matching rule binds; none matching, the
   * chain's policy (counted in `cnt`). VERDICT_DROP: no free source port, or a drop policy.
   * `masqAddr`: the address masquerade takes on the packet's output.
   */
  decide(
    ch: CChain,
    srcManip: boolean,
    buf: Uint8Array,
    v: IpView,
    inName: string,
    outName: string,
    masqAddr: number,
    cnt: RuleCounters,
    now: number,
  ): number {
    const e = this.e;
    if ((this.flows.natBits(e) & (srcManip ? FLOW_SNAT : FLOW_DNAT)) !== 0) return VERDICT_ACCEPT;
    const rules = ch.natRules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      let target: number;
      let bind: string;
      if (r.kind === N_MAP) {
        const m = r.map!.get(readU32BE(buf, v.dstOff));
        if (m === undefined) continue;
        target = m.addr;
        bind = m.bind;
      } else {
        if (!condsMatch(r.conds, buf, v, inName, outName)) continue;
        bind = r.bind;
        target = r.kind === N_MASQ ? masqAddr : this.targetOf(r, buf, v);
      }
      if (!this.bindTo(e, srcManip, target, bind, now)) {
        this.st.natNoPort++;
        return VERDICT_DROP;
      }
      return VERDICT_ACCEPT;
    }
    cnt.packets[ch.policyId]!++;
    return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
  }

  /**
   * decide() for an IPv6 packet (ip6 tables' nat chains). `masqAddr`: the output's IPv6 address
   * (undefined: none, masquerade drops the packet, counted natNoAddress).
   */
  decide6(
    ch: CChain,
    srcManip: boolean,
    buf: Uint8Array,
    v: IpView,
    inName: string,
    outName: string,
    masqAddr: Uint8Array | undefined,
    cnt: RuleCounters,
    now: number,
  ): number {
    const e = this.e;
    if ((this.flows.natBits(e) & (srcManip ? FLOW_SNAT : FLOW_DNAT)) !== 0) return VERDICT_ACCEPT;
    const rules = ch.natRules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      if (!condsMatch(r.conds, buf, v, inName, outName)) continue;
      let a: Uint8Array;
      if (r.kind === N_MASQ) {
        if (masqAddr === undefined) {
          this.st.natNoAddress++;
          return VERDICT_DROP;
        }
        a = masqAddr;
      } else if (r.remap !== null) {
        r.remap.translate(buf, r.kind === N_DNAT ? v.dstOff : v.srcOff, this.scratch, 0);
        a = this.scratch;
      } else a = r.addr6!;
      const rb = this.flows.tupleAddr(e, DIR_REPLY);
      this.flows.setReplyAddr6(e, srcManip, a, 0);
      if (!this.bound(e, srcManip, rb, r.bind, now)) {
        this.st.natNoPort++;
        return VERDICT_DROP;
      }
      return VERDICT_ACCEPT;
    }
    cnt.packets[ch.policyId]!++;
    return ch.dropPolicy ? VERDICT_DROP : VERDICT_ACCEPT;
  }

  private targetOf(r: CNatRule, buf: Uint8Array, v: IpView): number {
    if (r.remap === null) return r.addr;
    // PrefixRemap.translate on the packet's own address bytes (netmap: host bits kept).
    r.remap.translate(buf, r.kind === N_DNAT ? v.dstOff : v.srcOff, this.scratch, 0);
    return readU32BE(this.scratch, 0);
  }

  /** The packet is dropped: its new entry is held (unconfirmed, unfindable) for the router's error about it. */
  abandon(): void {
    if (this.pending < 0) return;
    if (this.held >= 0) this.flows.free(this.held);
    this.held = this.pending;
    this.pending = -1;
  }

  /** At a packet's first hook: frees what the last packet left, but the entry its router error (`self`) is attached to. */
  release(self: boolean): void {
    this.abandon();
    this.attached = self ? this.held : -1;
    if (!self && this.held >= 0) {
      this.flows.free(this.held);
      this.held = -1;
    }
  }

  /** Conntrack lookup / new entry (see header). */
  track(buf: Uint8Array, v: IpView, now: number): void {
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
    const k = f.lookup4(proto, readU32BE(buf, v.srcOff) | 0, readU32BE(buf, v.dstOff) | 0, sp, dp, now);
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

  /** track() for an IPv6 packet (see header). */
  track6(buf: Uint8Array, v: IpView, now: number): void {
    if (this.notrack) {
      this.st.untracked++;
      return;
    }
    const l4 = v.l4;
    if (l4 < 0) {
      this.st.fragments++;
      this.st.untracked++;
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
    } else if (proto === 58) {
      const t = v.l4Len < 8 ? -1 : buf[l4]!;
      if (t === 128 || t === 129) sp = dp = read16(buf, l4 + 4);
      else if (t >= 0 && t < 128) {
        this.trackRelated(buf, v, now);
        return;
      } else {
        // Neighbour discovery and other informational messages, truncated ones: untracked.
        this.st.untracked++;
        return;
      }
    }
    const f = this.flows;
    const k = f.lookup(6, proto, buf, v.srcOff, v.dstOff, sp, dp, now);
    if (k >= 0) {
      this.e = k >> 1;
      this.dir = k & 1;
      f.seen(this.e, this.dir, flags, now);
      return;
    }
    const tcpInvalid = proto === 6 && ((flags & (RST | FIN)) !== 0 || (flags & (SYN | ACK)) === (SYN | ACK));
    if (tcpInvalid || (proto === 58 && buf[l4] === 129)) {
      this.st.untracked++;
      return;
    }
    const e = f.create(6, proto, buf, v.srcOff, v.dstOff, sp, dp, state, now);
    this.dnatBy[e] = -1;
    this.snatBy[e] = -1;
    f.seen(e, DIR_ORIG, flags, now);
    this.e = e;
    this.dir = DIR_ORIG;
    this.isNew = true;
    this.pending = e;
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
    if (q.parse(buf, v) !== 0 || !q.ports) {
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
    const k = this.flows.lookup(v.family, p, buf, q.dst, q.src, dp, sp, now);
    if (k < 0) {
      this.st.untracked++;
      return;
    }
    this.e = k >> 1;
    this.dir = k & 1;
    this.related = true;
  }

  /** Edits the pending entry's reply tuple for the binding; false when no port is free. */
  bindTo(e: number, srcManip: boolean, addr: number, bind: string, now: number): boolean {
    const f = this.flows;
    const rb = f.tupleAddr(e, DIR_REPLY);
    // Reply tuple: source = where the original goes (DNAT), destination = where it comes from (SNAT).
    f.setReplyAddr4(e, srcManip, addr);
    return this.bound(e, srcManip, rb, bind, now);
  }

  /** The binding recorded on entry e whose reply tuple (at `rb`) was just edited; false when no port is free. */
  private bound(e: number, srcManip: boolean, rb: number, bind: string, now: number): boolean {
    const f = this.flows;
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
  apply(buf: Uint8Array, v: IpView, srcManip: boolean): void {
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
      // ICMPv6's checksum covers the outer addresses (pseudo header), ICMPv4's does not.
      const six = v.family === 6;
      rewriteAddress(
        buf,
        srcManip ? v.srcOff : v.dstOff,
        v.addrLen,
        f.addr,
        srcManip ? ob + 16 : ob,
        v.ipCsumOff,
        six ? l4 + 2 : -1,
        six ? CSUM_ALWAYS : CSUM_NONE,
      );
      return;
    }
    if (v.family === 6) {
      this.apply6(buf, v, srcManip, ob, op);
      return;
    }
    // IPv4 address against the tuple's number (no byte loop, no call when equal).
    const ao = srcManip ? v.srcOff : v.dstOff;
    rewriteIpv4Address(buf, v, ao, f.a32[e * 4 + other * 2 + (srcManip ? 1 : 0)]! | 0);
    const csum = l4ChecksumOffset(proto, l4, v.l4Len);
    const kind = l4ChecksumKind(proto, csum);
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

  /** apply() for an IPv6 packet not related to its connection: `ob`/`op` the other direction's address / port index. */
  private apply6(buf: Uint8Array, v: IpView, srcManip: boolean, ob: number, op: number): void {
    const f = this.flows;
    const l4 = v.l4;
    const proto = v.proto;
    const ao = srcManip ? v.srcOff : v.dstOff;
    const from = srcManip ? ob + 16 : ob;
    const icmp = proto === 58;
    const csum = icmp ? (l4 >= 0 && v.l4Len >= 4 ? l4 + 2 : -1) : l4ChecksumOffset(proto, l4, v.l4Len);
    const kind = icmp ? (csum < 0 ? CSUM_NONE : CSUM_ALWAYS) : l4ChecksumKind(proto, csum);
    if (!addressEquals(buf, ao, f.addr, from, 16)) rewriteAddress(buf, ao, 16, f.addr, from, -1, csum, kind);
    if (l4 < 0) return;
    const port = srcManip ? f.port[op + 1]! : f.port[op]!;
    if (proto === 6 || proto === 17) {
      const po = l4 + (srcManip ? 0 : 2);
      if (read16(buf, po) !== port) rewriteWord(buf, po, port, csum, kind);
    } else if (icmp && v.l4Len >= 8 && (buf[l4] === 128 || buf[l4] === 129)) {
      if (read16(buf, l4 + 4) !== port) rewriteWord(buf, l4 + 4, port, l4 + 2, CSUM_ALWAYS);
    }
  }

  /** A quoted port / echo identifier (ICMP / ICMPv6 echo: both tuple ports are the identifier). */
  private quotedPort(buf: Uint8Array, off: number, value: number): void {
    const q = this.q;
    if (q.proto === 1 || q.proto === 58) off = q.l4 + 4;
    if (read16(buf, off) !== value) q.word(buf, off, value);
  }
}
