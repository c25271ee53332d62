/**
 * Connection tracking with both tuples, as netfilter keeps it: each entry stores the ORIGINAL
 * tuple (the first packet as it arrived) and the REPLY tuple (what a reply looks like on the wire
 * after the NAT bound to the connection), so one table serves DNAT, SNAT, masquerade and prefix
 * NAT alike, plus the connection mark (ct mark): the one connection tracker, to which the
 * compiled rules (src/rules/compile.ts) bind their NAT.
 *
 * Tuple: family, protocol, source and destination address, source and destination "port"
 * (TCP/UDP ports; the ICMP echo identifier in both for echo request/reply; 0 otherwise).
 * An entry is created unconfirmed (not findable), its reply tuple edited by the NAT decisions,
 * then confirmed (hashed in both directions) or abandoned (packet dropped before confirmation),
 * like nf_conntrack's confirm at the last hook.
 *
 * Storage: struct-of-arrays sized once; no allocation per packet. Bounded: at capacity the
 * sweep cursor's next live entry is evicted (counted). Time is the caller's `now` (ms).
 */
import { DEFAULT_CONNTRACK_TIMEOUTS, type ConntrackTimeouts } from './config.js';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_RST, TCP_FLAG_SYN } from '../packet/tcp.js';
import { readU32BE } from '../packet/flow-mix.js';

export const FLOW_FREE = 0;
export const FLOW_SYN_SENT = 1;
export const FLOW_SYN_RECV = 2;
export const FLOW_ESTABLISHED = 3;
export const FLOW_FIN_WAIT = 4;
export const FLOW_TIME_WAIT = 5;
export const FLOW_CLOSE = 6;
export const FLOW_UDP = 7;
export const FLOW_OTHER = 8;
/** Allocated, not yet confirmed (not in the hash chains). */
const F_UNCONFIRMED = 1;
const F_REPLIED = 2;
const F_FIN_ORIG = 4;
const F_FIN_REPLY = 8;
/** NAT bound to the connection (set by the rules): destination / source manipulated. */
export const FLOW_DNAT = 16;
export const FLOW_SNAT = 32;

export const DIR_ORIG = 0;
export const DIR_REPLY = 1;

const NIL = -1;
/** Bytes per entry in `addr`: [orig src, orig dst, reply src, reply dst] × 16. */
const ASTRIDE = 64;

export interface FlowTableInit {
  readonly capacity: number;
  readonly timeouts?: ConntrackTimeouts;
  readonly seed?: number;
}

export interface FlowStats {
  entries: number;
  capacity: number;
  created: number;
  evicted: number;
  expired: number;
  /** Confirmations refused: the reply tuple was taken by another connection (packet dropped). */
  clashes: number;
}

function mix(h: number, w: number): number {
  const x = Math.imul(h ^ w, 0x9e3779b1);
  return x ^ (x >>> 15);
}

export class FlowTable {
  readonly capacity: number;
  readonly timeouts: ConntrackTimeouts;
  readonly state: Uint8Array;
  readonly family: Uint8Array;
  readonly proto: Uint8Array;
  readonly flags: Uint8Array;
  /** ct mark. */
  readonly mark: Uint32Array;
  /** Addresses, ASTRIDE bytes per entry (see tupleAddr). */
  readonly addr: Uint8Array;
  /** Ports: [orig sport, orig dport, reply sport, reply dport] per entry. */
  readonly port: Uint16Array;
  /** IPv4 entries: the four addresses as numbers, [orig src, orig dst, reply src, reply dst]. */
  readonly a32: Uint32Array;
  readonly expires: Float64Array;
  /** Conntrack zone of each entry (Linux `ct zone`): tuples are unique within a zone. */
  readonly zones: Uint16Array;
  /** The zone of the packet being looked up or tracked (PacketMeta.zone); lookups, taken() and create() use it. */
  zone = 0;
  private readonly seed: number;
  private readonly mask: number;
  private readonly head: Int32Array;
  /** Chain links per (entry * 2 + dir). */
  private readonly next: Int32Array;
  private readonly bucket: Int32Array;
  private freeHead = NIL;
  private count = 0;
  private cursor = 0;
  private created = 0;
  private evicted = 0;
  private expiredCount = 0;
  clashes = 0;

  constructor(init: FlowTableInit) {
    const cap = init.capacity;
    if (!Number.isInteger(cap) || cap < 1 || cap > 1 << 22)
      throw new RangeError(`flow table capacity must be an integer in 1..2^22, got ${cap}`);
    this.capacity = cap;
    this.timeouts = init.timeouts ?? DEFAULT_CONNTRACK_TIMEOUTS;
    this.seed = (init.seed ?? 0x2545f491) | 0;
    let b = 16;
    while (b < cap * 4) b *= 2;
    this.mask = b - 1;
    this.head = new Int32Array(b).fill(NIL);
    this.next = new Int32Array(cap * 2);
    this.bucket = new Int32Array(cap * 2);
    this.state = new Uint8Array(cap);
    this.family = new Uint8Array(cap);
    this.proto = new Uint8Array(cap);
    this.flags = new Uint8Array(cap);
    this.mark = new Uint32Array(cap);
    this.addr = new Uint8Array(cap * ASTRIDE);
    this.port = new Uint16Array(cap * 4);
    this.a32 = new Uint32Array(cap * 4);
    this.expires = new Float64Array(cap);
    this.zones = new Uint16Array(cap);
    for (let i = 0; i < cap; i++) this.next[i * 2] = i + 1 < cap ? i + 1 : NIL;
    this.freeHead = 0;
  }

  get size(): number {
    return this.count;
  }

  stats(): FlowStats {
    return {
      entries: this.count,
      capacity: this.capacity,
      created: this.created,
      evicted: this.evicted,
      expired: this.expiredCount,
      clashes: this.clashes,
    };
  }

  /** Offset in `addr` of entry e's tuple `dir` source (destination: + 16). */
  tupleAddr(e: number, dir: number): number {
    return e * ASTRIDE + dir * 32;
  }

  private hash(
    fam: number,
    proto: number,
    a: Uint8Array,
    srcOff: number,
    dstOff: number,
    sport: number,
    dport: number,
    zone: number,
  ): number {
    const alen = fam === 4 ? 4 : 16;
    let h = mix(this.seed, (zone << 16) | (fam << 8) | proto);
    for (let i = 0; i < alen; i += 4)
      h = mix(h, (a[srcOff + i]! << 24) | (a[srcOff + i + 1]! << 16) | (a[srcOff + i + 2]! << 8) | a[srcOff + i + 3]!);
    for (let i = 0; i < alen; i += 4)
      h = mix(h, (a[dstOff + i]! << 24) | (a[dstOff + i + 1]! << 16) | (a[dstOff + i + 2]! << 8) | a[dstOff + i + 3]!);
    h = mix(h, (sport << 16) | dport);
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    return h & this.mask;
  }

  private hash4(proto: number, src: number, dst: number, sport: number, dport: number, zone: number): number {
    let h = mix(this.seed, (zone << 16) | (4 << 8) | proto);
    h = mix(h, src);
    h = mix(h, dst);
    h = mix(h, (sport << 16) | dport);
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    return h & this.mask;
  }

  private hashOf(e: number, d: number): number {
    const p = e * 4 + d * 2;
    if (this.family[e] === 4)
      return this.hash4(
        this.proto[e]!,
        this.a32[e * 4 + d * 2]!,
        this.a32[e * 4 + d * 2 + 1]!,
        this.port[p]!,
        this.port[p + 1]!,
        this.zones[e]!,
      );
    const base = e * ASTRIDE + d * 32;
    return this.hash(
      this.family[e]!,
      this.proto[e]!,
      this.addr,
      base,
      base + 16,
      this.port[p]!,
      this.port[p + 1]!,
      this.zones[e]!,
    );
  }

  /**
   * lookup() for IPv4 addresses given as numbers, int32 or unsigned (callers pass `x | 0`: an
   * address ≥ 2^31 is then no heap number per call).
   */
  lookup4(proto: number, src: number, dst: number, sport: number, dport: number, now: number): number {
    src >>>= 0;
    dst >>>= 0;
    const zone = this.zone;
    let k = this.head[this.hash4(proto, src, dst, sport, dport, zone)]!;
    while (k !== NIL) {
      const q = k << 1; // (e * 2 + d) * 2 = e * 4 + d * 2
      if (
        this.a32[q] === src &&
        this.a32[q + 1] === dst &&
        this.port[q] === sport &&
        this.port[q + 1] === dport &&
        this.proto[k >> 1] === proto &&
        this.family[k >> 1] === 4 &&
        this.zones[k >> 1] === zone
      )
        return this.liveOrFree(k, now);
      k = this.next[k]!;
    }
    return NIL;
  }

  /** A lookup's hit k (e * 2 + dir): k while the entry lives, else NIL with the entry freed (counted). */
  private liveOrFree(k: number, now: number): number {
    const e = k >> 1;
    if (this.expires[e]! > now) return k;
    this.freeExpired(e);
    return NIL;
  }

  /** Frees entry e for having expired (counted). */
  private freeExpired(e: number): void {
    this.expiredCount++;
    this.free(e);
  }

  /** Sets an IPv4 entry's reply-tuple address: `dst` false = source, true = destination. */
  setReplyAddr4(e: number, dst: boolean, a: number): void {
    const o = e * ASTRIDE + 32 + (dst ? 16 : 0);
    const b = this.addr;
    b[o] = a >>> 24;
    b[o + 1] = (a >>> 16) & 255;
    b[o + 2] = (a >>> 8) & 255;
    b[o + 3] = a & 255;
    this.a32[e * 4 + 2 + (dst ? 1 : 0)] = a >>> 0;
  }

  /** Sets an IPv6 entry's reply-tuple address from a[off..off+16): `dst` false = source, true = destination. */
  setReplyAddr6(e: number, dst: boolean, a: Uint8Array, off: number): void {
    const o = e * ASTRIDE + 32 + (dst ? 16 : 0);
    for (let i = 0; i < 16; i++) this.addr[o + i] = a[off + i]!;
  }

  /**
   * The confirmed connection one of whose tuples is (src, dst, sport, dport): returns
   * e * 2 + dir, or -1. An expired entry found is freed (counted) and -1 returned.
   */
  lookup(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    dstOff: number,
    sport: number,
    dport: number,
    now: number,
  ): number {
    if (fam === 4) return this.lookup4(proto, readU32BE(buf, srcOff), readU32BE(buf, dstOff), sport, dport, now);
    const alen = fam === 4 ? 4 : 16;
    let k = this.head[this.hash(fam, proto, buf, srcOff, dstOff, sport, dport, this.zone)]!;
    const a = this.addr;
    while (k !== NIL) {
      const e = k >> 1;
      const d = k & 1;
      if (
        this.port[e * 4 + d * 2] === sport &&
        this.port[e * 4 + d * 2 + 1] === dport &&
        this.proto[e] === proto &&
        this.family[e] === fam &&
        this.zones[e] === this.zone
      ) {
        const base = e * ASTRIDE + d * 32;
        let same = true;
        for (let i = 0; i < alen && same; i++)
          same = a[base + i] === buf[srcOff + i] && a[base + 16 + i] === buf[dstOff + i];
        if (same) return this.liveOrFree(k, now);
      }
      k = this.next[k]!;
    }
    return NIL;
  }

  /** Whether a confirmed connection has tuple (buf[srcOff], buf[dstOff], sport, dport). */
  taken(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    dstOff: number,
    sport: number,
    dport: number,
    now: number,
  ): boolean {
    return this.lookup(fam, proto, buf, srcOff, dstOff, sport, dport, now) !== NIL;
  }

  /**
   * A new unconfirmed entry for a packet with tuple (src, dst, sport, dport): original = that,
   * reply = its inverse. Evicts one entry at capacity. `state` is FLOW_*.
   */
  create(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    dstOff: number,
    sport: number,
    dport: number,
    state: number,
    now: number,
  ): number {
    if (this.freeHead === NIL) this.evictOne(now);
    const e = this.freeHead;
    this.freeHead = this.next[e * 2]!;
    const alen = fam === 4 ? 4 : 16;
    const base = e * ASTRIDE;
    const a = this.addr;
    a.fill(0, base, base + ASTRIDE);
    for (let i = 0; i < alen; i++) {
      a[base + i] = buf[srcOff + i]!;
      a[base + 16 + i] = buf[dstOff + i]!;
      a[base + 32 + i] = buf[dstOff + i]!;
      a[base + 48 + i] = buf[srcOff + i]!;
    }
    if (fam === 4) {
      const s4 = readU32BE(buf, srcOff),
        d4 = readU32BE(buf, dstOff);
      this.a32[e * 4] = s4;
      this.a32[e * 4 + 1] = d4;
      this.a32[e * 4 + 2] = d4;
      this.a32[e * 4 + 3] = s4;
    }
    const p = e * 4;
    this.port[p] = sport;
    this.port[p + 1] = dport;
    this.port[p + 2] = dport;
    this.port[p + 3] = sport;
    this.family[e] = fam;
    this.proto[e] = proto;
    this.zones[e] = this.zone;
    this.state[e] = state;
    this.flags[e] = F_UNCONFIRMED;
    this.mark[e] = 0;
    this.expires[e] = now + this.timeoutOf(e);
    this.count++;
    this.created++;
    return e;
  }

  unconfirmed(e: number): boolean {
    return (this.flags[e]! & F_UNCONFIRMED) !== 0;
  }

  /**
   * Hashes an unconfirmed entry in both directions. false (entry freed, counted as a clash) when
   * its reply tuple is already another connection's tuple: the packet is to be dropped.
   */
  confirm(e: number, now: number): boolean {
    const fam = this.family[e]!;
    const pr = this.proto[e]!;
    const a = this.addr;
    const base = e * ASTRIDE;
    const p = e * 4;
    if (
      this.lookup(fam, pr, a, base + 32, base + 48, this.port[p + 2]!, this.port[p + 3]!, now) !== NIL ||
      this.lookup(fam, pr, a, base, base + 16, this.port[p]!, this.port[p + 1]!, now) !== NIL
    ) {
      this.clashes++;
      this.free(e);
      return false;
    }
    for (let d = 0; d < 2; d++) {
      const k = e * 2 + d;
      const h = this.hashOf(e, d);
      this.bucket[k] = h;
      this.next[k] = this.head[h]!;
      this.head[h] = k;
    }
    this.flags[e] = this.flags[e]! & ~F_UNCONFIRMED;
    return true;
  }

  /** Frees entry e (confirmed or not). */
  free(e: number): void {
    if (this.state[e] === FLOW_FREE) return;
    if ((this.flags[e]! & F_UNCONFIRMED) === 0) {
      for (let d = 0; d < 2; d++) {
        const k = e * 2 + d;
        const h = this.bucket[k]!;
        let p = this.head[h]!;
        if (p === k) this.head[h] = this.next[k]!;
        else {
          while (p !== NIL && this.next[p] !== k) p = this.next[p]!;
          if (p !== NIL) this.next[p] = this.next[k]!;
        }
      }
    }
    this.state[e] = FLOW_FREE;
    this.flags[e] = 0;
    this.next[e * 2] = this.freeHead;
    this.freeHead = e;
    this.count--;
  }

  private evictOne(now: number): void {
    // Prefer an expired entry among the next few; else the next confirmed one (bounded scan).
    let victim = NIL;
    for (let i = 0; i < this.capacity; i++) {
      const e = this.cursor;
      this.cursor = e + 1 === this.capacity ? 0 : e + 1;
      if (this.state[e] === FLOW_FREE || (this.flags[e]! & F_UNCONFIRMED) !== 0) continue;
      if (this.expires[e]! <= now) {
        this.freeExpired(e);
        return;
      }
      if (victim === NIL) victim = e;
      if (i >= 8) break;
    }
    if (victim === NIL) throw new Error('flow table: every entry is unconfirmed (more pending packets than capacity)');
    // The next scan starts right after the victim, so evictions go round every slot in turn
    // (the freed slot is the one the new flow takes).
    this.cursor = victim + 1 === this.capacity ? 0 : victim + 1;
    this.evicted++;
    this.free(victim);
  }

  private timeoutOf(e: number): number {
    const t = this.timeouts;
    const replied = (this.flags[e]! & F_REPLIED) !== 0;
    switch (this.state[e]) {
      case FLOW_ESTABLISHED:
        return replied ? t.tcpEstablished : t.tcpTransitory;
      case FLOW_TIME_WAIT:
        return t.tcpTimeWait;
      case FLOW_CLOSE:
        return t.tcpClose;
      case FLOW_UDP:
        return replied ? t.udpReplied : t.udp;
      case FLOW_OTHER:
        return t.icmp;
      default:
        return t.tcpTransitory;
    }
  }

  /** Accounts a packet of e in direction `dir` (TCP state from its flags; idle timeout). */
  seen(e: number, dir: number, tcpFlags: number, now: number): void {
    let fl = this.flags[e]!;
    if (dir === DIR_REPLY) fl |= F_REPLIED;
    let st = this.state[e]!;
    if (st <= FLOW_CLOSE) {
      if ((tcpFlags & TCP_FLAG_RST) !== 0) st = FLOW_CLOSE;
      else if ((tcpFlags & TCP_FLAG_SYN) !== 0) {
        if ((tcpFlags & TCP_FLAG_ACK) !== 0) {
          if (dir === DIR_REPLY && st === FLOW_SYN_SENT) st = FLOW_SYN_RECV;
        } else if (dir === DIR_ORIG && (st === FLOW_TIME_WAIT || st === FLOW_CLOSE)) {
          st = FLOW_SYN_SENT;
          fl &= ~(F_REPLIED | F_FIN_ORIG | F_FIN_REPLY);
        }
      } else if ((tcpFlags & TCP_FLAG_FIN) !== 0) {
        fl |= dir === DIR_ORIG ? F_FIN_ORIG : F_FIN_REPLY;
        if ((fl & (F_FIN_ORIG | F_FIN_REPLY)) === (F_FIN_ORIG | F_FIN_REPLY)) st = FLOW_TIME_WAIT;
        else if (st !== FLOW_CLOSE) st = FLOW_FIN_WAIT;
      } else if ((tcpFlags & TCP_FLAG_ACK) !== 0 && st === FLOW_SYN_RECV && dir === DIR_ORIG) {
        st = FLOW_ESTABLISHED;
      }
      this.state[e] = st;
    }
    this.flags[e] = fl;
    this.expires[e] = now + this.timeoutOf(e);
  }

  /** Frees up to `budget` expired entries' slots (round robin). Returns the count. */
  expire(now: number, budget = 1024): number {
    let freed = 0;
    const n = budget < this.capacity ? budget : this.capacity;
    for (let i = 0; i < n; i++) {
      const e = this.cursor;
      this.cursor = e + 1 === this.capacity ? 0 : e + 1;
      if (this.state[e] !== FLOW_FREE && (this.flags[e]! & F_UNCONFIRMED) === 0 && this.expires[e]! <= now) {
        this.freeExpired(e);
        freed++;
      }
    }
    return freed;
  }

  /** Frees every confirmed entry for which `pred(e)` is true (configuration time). */
  removeWhere(pred: (e: number) => boolean): number {
    let n = 0;
    for (let e = 0; e < this.capacity; e++) {
      if (this.state[e] !== FLOW_FREE && (this.flags[e]! & F_UNCONFIRMED) === 0 && pred(e)) {
        this.free(e);
        n++;
      }
    }
    return n;
  }

  /** Sets NAT-bound flag bits (FLOW_DNAT / FLOW_SNAT). */
  setNat(e: number, bit: number): void {
    this.flags[e] = this.flags[e]! | bit;
  }

  natBits(e: number): number {
    return this.flags[e]! & (FLOW_DNAT | FLOW_SNAT);
  }
}
