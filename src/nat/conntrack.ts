/**
 * Connection tracking for the SNAT (masquerade) of host traffic: a bounded table of flows, each
 * remembering the original source (address + port, or ICMP echo identifier), the remote end as
 * the local cluster addresses it (the REMAPPED address, i.e. before the outbound prefix DNAT), and
 * the port chosen on the SNAT address.
 *
 * Two keys find an entry:
 * - original direction: (family, protocol, original source, original port, remote, remote port);
 * - reply direction:    (family, protocol, remote, remote port, SNAT port). The SNAT address is
 *   the same for every entry of a family (the first address of the external CIDR), so it is not
 *   part of the key; uniqueness of this key is what "no port collision" means (like Linux, a
 *   SNAT port may be reused towards a different remote endpoint).
 *
 * Storage is struct-of-arrays in typed arrays sized once at construction: no allocation per
 * packet, no Map with string keys. Hash chains (separate for both keys) use Int32Array links,
 * and a doubly linked LRU list orders entries by last use.
 *
 * Bounded: at capacity a new flow evicts an expired entry found near the LRU tail (up to
 * EVICTION_SCAN entries are inspected), else the least recently used entry, and counts it.
 * `expire(now, budget)` sweeps a bounded number of slots per call for housekeeping.
 *
 * Time is the `now` (milliseconds) the caller passes; nothing here reads a clock.
 */

import { DEFAULT_CONNTRACK_TIMEOUTS, DEFAULT_PORT_MAX, DEFAULT_PORT_MIN, type ConntrackTimeouts } from './config.js';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_RST, TCP_FLAG_SYN } from '../packet/tcp.js';

// Entry states. 0 marks a free slot.
export const CT_FREE = 0;
export const CT_TCP_SYN_SENT = 1;
export const CT_TCP_SYN_RECV = 2;
export const CT_TCP_ESTABLISHED = 3;
/** A FIN was seen in one direction. */
export const CT_TCP_FIN_WAIT = 4;
/** FINs were seen in both directions. */
export const CT_TCP_TIME_WAIT = 5;
/** A RST was seen. */
export const CT_TCP_CLOSE = 6;
export const CT_UDP = 7;
export const CT_ICMP = 8;

// Per-entry flag bits.
const F_REPLIED = 1;
const F_FIN_ORIGINAL = 2;
const F_FIN_REPLY = 4;

/** Direction of a packet relative to the flow's first packet. */
export const DIR_ORIGINAL = 0;
export const DIR_REPLY = 1;

/** Entries inspected from the LRU tail looking for an expired one before evicting the oldest. */
export const EVICTION_SCAN = 8;
/** Upper bound on the SNAT ports probed for one new flow. */
export const MAX_PORT_PROBES = 4096;

const ADDR_STRIDE = 16;
const NIL = -1;

export interface ConntrackInit {
  readonly capacity: number;
  readonly timeouts?: ConntrackTimeouts;
  readonly portMin?: number;
  readonly portMax?: number;
  readonly seed?: number;
}

export interface ConntrackStats {
  entries: number;
  capacity: number;
  created: number;
  /** Live entries evicted to make room (table full). */
  evicted: number;
  /** Entries freed because their timeout had passed. */
  expired: number;
  /** Flows refused because no SNAT port was free towards their remote endpoint. */
  portExhausted: number;
}

function mix(h: number, w: number): number {
  const x = Math.imul(h ^ w, 0x9e3779b1);
  return x ^ (x >>> 15);
}

function finalize(h: number): number {
  let x = h;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

function mixAddr(h: number, buf: Uint8Array, off: number, alen: number): number {
  let x = h;
  for (let i = 0; i < alen; i += 4) {
    x = mix(x, (buf[off + i]! << 24) | (buf[off + i + 1]! << 16) | (buf[off + i + 2]! << 8) | buf[off + i + 3]!);
  }
  return x;
}

function randomSeed(): number {
  const a = new Uint32Array(1);
  globalThis.crypto.getRandomValues(a);
  return a[0]!;
}

export class Conntrack {
  readonly capacity: number;
  readonly timeouts: ConntrackTimeouts;
  readonly portMin: number;
  readonly portMax: number;

  // Per-entry data, indexed by entry number. Read-only for callers (Nat reads ports/addresses).
  readonly state: Uint8Array;
  readonly family: Uint8Array;
  readonly proto: Uint8Array;
  readonly flags: Uint8Array;
  readonly peer: Int32Array;
  /** Original source address, 16 bytes per entry (IPv4 uses the first 4). */
  readonly origAddr: Uint8Array;
  /** Remote address as addressed locally (remapped), 16 bytes per entry. */
  readonly remoteAddr: Uint8Array;
  readonly origPort: Uint16Array;
  readonly remotePort: Uint16Array;
  readonly natPort: Uint16Array;
  readonly expires: Float64Array;

  private readonly seed: number;
  private readonly bucketMask: number;
  private readonly origHead: Int32Array;
  private readonly origNext: Int32Array;
  private readonly origBucket: Int32Array;
  private readonly replyHead: Int32Array;
  private readonly replyNext: Int32Array;
  private readonly replyBucket: Int32Array;
  private readonly lruPrev: Int32Array;
  private readonly lruNext: Int32Array;
  private lruNewest = NIL;
  private lruOldest = NIL;
  private freeHead = NIL;
  private count = 0;
  private sweepCursor = 0;
  private portCursor = 0;

  private created = 0;
  private evicted = 0;
  private expiredCount = 0;
  private portExhausted = 0;

  constructor(init: ConntrackInit) {
    const cap = init.capacity;
    if (!Number.isInteger(cap) || cap < 1 || cap > 1 << 24)
      throw new RangeError(`conntrack capacity must be an integer in 1..2^24, got ${cap}`);
    this.capacity = cap;
    this.timeouts = init.timeouts ?? DEFAULT_CONNTRACK_TIMEOUTS;
    this.portMin = init.portMin ?? DEFAULT_PORT_MIN;
    this.portMax = init.portMax ?? DEFAULT_PORT_MAX;
    if (this.portMin < 1 || this.portMax > 65535 || this.portMax < this.portMin)
      throw new RangeError(`bad SNAT port range ${this.portMin}..${this.portMax}`);
    this.seed = (init.seed ?? randomSeed()) | 0;
    let buckets = 16;
    while (buckets < cap * 2) buckets *= 2;
    this.bucketMask = buckets - 1;
    this.state = new Uint8Array(cap);
    this.family = new Uint8Array(cap);
    this.proto = new Uint8Array(cap);
    this.flags = new Uint8Array(cap);
    this.peer = new Int32Array(cap);
    this.origAddr = new Uint8Array(cap * ADDR_STRIDE);
    this.remoteAddr = new Uint8Array(cap * ADDR_STRIDE);
    this.origPort = new Uint16Array(cap);
    this.remotePort = new Uint16Array(cap);
    this.natPort = new Uint16Array(cap);
    this.expires = new Float64Array(cap);
    this.origHead = new Int32Array(buckets).fill(NIL);
    this.replyHead = new Int32Array(buckets).fill(NIL);
    this.origNext = new Int32Array(cap);
    this.replyNext = new Int32Array(cap);
    this.origBucket = new Int32Array(cap);
    this.replyBucket = new Int32Array(cap);
    this.lruPrev = new Int32Array(cap);
    this.lruNext = new Int32Array(cap);
    this.resetFreeList();
  }

  get size(): number {
    return this.count;
  }

  /** Counters snapshot (allocates; for metrics, not per packet). */
  stats(): ConntrackStats {
    return {
      entries: this.count,
      capacity: this.capacity,
      created: this.created,
      evicted: this.evicted,
      expired: this.expiredCount,
      portExhausted: this.portExhausted,
    };
  }

  /** Byte offset of entry e's addresses inside origAddr / remoteAddr. */
  addrOffset(e: number): number {
    return e * ADDR_STRIDE;
  }

  private resetFreeList(): void {
    // Free list threaded through lruNext; slot 0 first so tests see a stable order.
    for (let i = 0; i < this.capacity; i++) this.lruNext[i] = i + 1 < this.capacity ? i + 1 : NIL;
    this.freeHead = 0;
  }

  private origHash(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    srcPort: number,
    dstOff: number,
    dstPort: number,
  ): number {
    const alen = fam === 4 ? 4 : 16;
    let h = mix(this.seed, (fam << 8) | proto);
    h = mixAddr(h, buf, srcOff, alen);
    h = mixAddr(h, buf, dstOff, alen);
    h = mix(h, (srcPort << 16) | dstPort);
    return finalize(h) & this.bucketMask;
  }

  private replyHash(
    fam: number,
    proto: number,
    buf: Uint8Array,
    remoteOff: number,
    remotePort: number,
    natPort: number,
  ): number {
    const alen = fam === 4 ? 4 : 16;
    let h = mix(this.seed ^ 0x5bd1e995, (fam << 8) | proto);
    h = mixAddr(h, buf, remoteOff, alen);
    h = mix(h, (remotePort << 16) | natPort);
    return finalize(h) & this.bucketMask;
  }

  private sameAddr(store: Uint8Array, e: number, buf: Uint8Array, off: number, alen: number): boolean {
    const base = e * ADDR_STRIDE;
    for (let i = 0; i < alen; i++) if (store[base + i] !== buf[off + i]) return false;
    return true;
  }

  /**
   * The live entry whose original-direction key matches, or -1. An entry found expired is freed
   * (and counted) and -1 is returned.
   */
  findOriginal(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    srcPort: number,
    dstOff: number,
    dstPort: number,
    now: number,
  ): number {
    const alen = fam === 4 ? 4 : 16;
    let e = this.origHead[this.origHash(fam, proto, buf, srcOff, srcPort, dstOff, dstPort)]!;
    while (e !== NIL) {
      if (
        this.origPort[e] === srcPort &&
        this.remotePort[e] === dstPort &&
        this.proto[e] === proto &&
        this.family[e] === fam &&
        this.sameAddr(this.origAddr, e, buf, srcOff, alen) &&
        this.sameAddr(this.remoteAddr, e, buf, dstOff, alen)
      ) {
        return this.liveAt(e, now);
      }
      e = this.origNext[e]!;
    }
    return NIL;
  }

  /** e when it has not expired at `now`; else e is freed (counted as expired) and -1 returned. */
  private liveAt(e: number, now: number): number {
    if (this.expires[e]! > now) return e;
    this.expiredCount++;
    this.remove(e);
    return NIL;
  }

  /** The live entry whose reply-direction key matches, or -1 (expired entries are freed). */
  findReply(
    fam: number,
    proto: number,
    buf: Uint8Array,
    remoteOff: number,
    remotePort: number,
    natPort: number,
    now: number,
  ): number {
    const alen = fam === 4 ? 4 : 16;
    let e = this.replyHead[this.replyHash(fam, proto, buf, remoteOff, remotePort, natPort)]!;
    while (e !== NIL) {
      if (
        this.natPort[e] === natPort &&
        this.remotePort[e] === remotePort &&
        this.proto[e] === proto &&
        this.family[e] === fam &&
        this.sameAddr(this.remoteAddr, e, buf, remoteOff, alen)
      ) {
        return this.liveAt(e, now);
      }
      e = this.replyNext[e]!;
    }
    return NIL;
  }

  /**
   * Choose the SNAT port for a new flow towards (remote, remotePort): the original port when no
   * live flow already uses it towards that endpoint, else the first free port of the range,
   * probing from a rotating start (bounded by MAX_PORT_PROBES). -1 when none is free.
   */
  private allocPort(
    fam: number,
    proto: number,
    buf: Uint8Array,
    remoteOff: number,
    remotePort: number,
    preferred: number,
    now: number,
  ): number {
    if (this.findReply(fam, proto, buf, remoteOff, remotePort, preferred, now) === NIL) return preferred;
    const span = this.portMax - this.portMin + 1;
    let p =
      this.portMin + ((this.replyHash(fam, proto, buf, remoteOff, remotePort, preferred) + this.portCursor++) % span);
    const probes = span < MAX_PORT_PROBES ? span : MAX_PORT_PROBES;
    for (let i = 0; i < probes; i++) {
      if (this.findReply(fam, proto, buf, remoteOff, remotePort, p, now) === NIL) return p;
      p = p === this.portMax ? this.portMin : p + 1;
    }
    return NIL;
  }

  /**
   * Create the entry of a new flow seen in the original direction (the caller checked
   * findOriginal). `state` is the initial CT_* state. Returns the entry, or -1 when no SNAT port
   * is free (counted). At capacity an expired or the least recently used entry is evicted first.
   */
  create(
    fam: number,
    proto: number,
    buf: Uint8Array,
    srcOff: number,
    srcPort: number,
    dstOff: number,
    dstPort: number,
    peer: number,
    state: number,
    now: number,
  ): number {
    const port = this.allocPort(fam, proto, buf, dstOff, dstPort, srcPort, now);
    if (port === NIL) {
      this.portExhausted++;
      return NIL;
    }
    if (this.freeHead === NIL) this.evictOne(now);
    const e = this.freeHead;
    this.freeHead = this.lruNext[e]!;
    const alen = fam === 4 ? 4 : 16;
    const base = e * ADDR_STRIDE;
    for (let i = 0; i < alen; i++) {
      this.origAddr[base + i] = buf[srcOff + i]!;
      this.remoteAddr[base + i] = buf[dstOff + i]!;
    }
    this.family[e] = fam;
    this.proto[e] = proto;
    this.state[e] = state;
    this.flags[e] = 0;
    this.peer[e] = peer;
    this.origPort[e] = srcPort;
    this.remotePort[e] = dstPort;
    this.natPort[e] = port;
    const ob = this.origHash(fam, proto, buf, srcOff, srcPort, dstOff, dstPort);
    this.origBucket[e] = ob;
    this.origNext[e] = this.origHead[ob]!;
    this.origHead[ob] = e;
    const rb = this.replyHash(fam, proto, buf, dstOff, dstPort, port);
    this.replyBucket[e] = rb;
    this.replyNext[e] = this.replyHead[rb]!;
    this.replyHead[rb] = e;
    // Link as newest.
    this.lruPrev[e] = NIL;
    this.lruNext[e] = this.lruNewest;
    if (this.lruNewest !== NIL) this.lruPrev[this.lruNewest] = e;
    this.lruNewest = e;
    if (this.lruOldest === NIL) this.lruOldest = e;
    this.count++;
    this.created++;
    this.expires[e] = now + this.timeoutOf(e);
    return e;
  }

  private evictOne(now: number): void {
    let e = this.lruOldest;
    for (let i = 0; i < EVICTION_SCAN && e !== NIL; i++) {
      if (this.expires[e]! <= now) {
        this.expiredCount++;
        this.remove(e);
        return;
      }
      e = this.lruPrev[e]!;
    }
    this.evicted++;
    this.remove(this.lruOldest);
  }

  /** Free entry e (unlink from both chains and the LRU list). */
  remove(e: number): void {
    if (this.state[e] === CT_FREE) return;
    // Original chain.
    const ob = this.origBucket[e]!;
    let p = this.origHead[ob]!;
    if (p === e) this.origHead[ob] = this.origNext[e]!;
    else {
      while (p !== NIL && this.origNext[p] !== e) p = this.origNext[p]!;
      if (p !== NIL) this.origNext[p] = this.origNext[e]!;
    }
    // Reply chain.
    const rb = this.replyBucket[e]!;
    p = this.replyHead[rb]!;
    if (p === e) this.replyHead[rb] = this.replyNext[e]!;
    else {
      while (p !== NIL && this.replyNext[p] !== e) p = this.replyNext[p]!;
      if (p !== NIL) this.replyNext[p] = this.replyNext[e]!;
    }
    // LRU list.
    const prev = this.lruPrev[e]!;
    const next = this.lruNext[e]!;
    if (prev !== NIL) this.lruNext[prev] = next;
    else this.lruNewest = next;
    if (next !== NIL) this.lruPrev[next] = prev;
    else this.lruOldest = prev;
    this.state[e] = CT_FREE;
    this.lruNext[e] = this.freeHead;
    this.freeHead = e;
    this.count--;
  }

  private touch(e: number): void {
    if (this.lruNewest === e) return;
    const prev = this.lruPrev[e]!;
    const next = this.lruNext[e]!;
    // e is not the newest, so prev !== NIL.
    this.lruNext[prev] = next;
    if (next !== NIL) this.lruPrev[next] = prev;
    else this.lruOldest = prev;
    this.lruPrev[e] = NIL;
    this.lruNext[e] = this.lruNewest;
    this.lruPrev[this.lruNewest] = e;
    this.lruNewest = e;
  }

  private timeoutOf(e: number): number {
    const t = this.timeouts;
    const replied = (this.flags[e]! & F_REPLIED) !== 0;
    switch (this.state[e]) {
      case CT_TCP_ESTABLISHED:
        return replied ? t.tcpEstablished : t.tcpTransitory;
      case CT_TCP_TIME_WAIT:
        return t.tcpTimeWait;
      case CT_TCP_CLOSE:
        return t.tcpClose;
      case CT_UDP:
        return replied ? t.udpReplied : t.udp;
      case CT_ICMP:
        return t.icmp;
      default:
        return t.tcpTransitory;
    }
  }

  /**
   * Account a packet of entry e in direction `dir` (DIR_ORIGINAL / DIR_REPLY): TCP state from the
   * segment's `tcpFlags` (ignored for UDP/ICMP), "replied" mark, idle timeout and LRU position.
   *
   * TCP, simplified from RFC 9293's state diagram as a middlebox sees it: SYN → SYN_SENT; SYN-ACK
   * from the reply side → SYN_RECV; the originator's ACK → ESTABLISHED; a FIN → FIN_WAIT, FINs
   * both ways → TIME_WAIT; RST → CLOSE; a new SYN on a TIME_WAIT/CLOSE entry reopens it (port
   * reuse by the same endpoints).
   */
  update(e: number, dir: number, tcpFlags: number, now: number): void {
    let fl = this.flags[e]!;
    if (dir === DIR_REPLY) fl |= F_REPLIED;
    let st = this.state[e]!;
    if (st <= CT_TCP_CLOSE) {
      if ((tcpFlags & TCP_FLAG_RST) !== 0) st = CT_TCP_CLOSE;
      else if ((tcpFlags & TCP_FLAG_SYN) !== 0) {
        if ((tcpFlags & TCP_FLAG_ACK) !== 0) {
          if (dir === DIR_REPLY && st === CT_TCP_SYN_SENT) st = CT_TCP_SYN_RECV;
        } else if (dir === DIR_ORIGINAL && (st === CT_TCP_TIME_WAIT || st === CT_TCP_CLOSE)) {
          st = CT_TCP_SYN_SENT;
          fl = 0;
        }
      } else if ((tcpFlags & TCP_FLAG_FIN) !== 0) {
        fl |= dir === DIR_ORIGINAL ? F_FIN_ORIGINAL : F_FIN_REPLY;
        if ((fl & (F_FIN_ORIGINAL | F_FIN_REPLY)) === (F_FIN_ORIGINAL | F_FIN_REPLY)) st = CT_TCP_TIME_WAIT;
        else if (st !== CT_TCP_CLOSE) st = CT_TCP_FIN_WAIT;
      } else if ((tcpFlags & TCP_FLAG_ACK) !== 0 && st === CT_TCP_SYN_RECV && dir === DIR_ORIGINAL) {
        st = CT_TCP_ESTABLISHED;
      }
      this.state[e] = st;
    }
    this.flags[e] = fl;
    this.expires[e] = now + this.timeoutOf(e);
    this.touch(e);
  }

  /**
   * Housekeeping: inspect up to `budget` slots (round robin) and free the expired ones.
   * Returns how many were freed. Bounded work per call, for the pipeline's timer.
   */
  expire(now: number, budget = 1024): number {
    let freed = 0;
    const n = budget < this.capacity ? budget : this.capacity;
    for (let i = 0; i < n; i++) {
      const e = this.sweepCursor;
      this.sweepCursor = e + 1 === this.capacity ? 0 : e + 1;
      if (this.state[e] !== CT_FREE && this.expires[e]! <= now) {
        this.expiredCount++;
        this.remove(e);
        freed++;
      }
    }
    return freed;
  }

  /** Remove every entry of `peer` (peer removed or reconfigured). Returns the count. */
  removePeer(peer: number): number {
    let n = 0;
    for (let e = 0; e < this.capacity; e++) {
      if (this.state[e] !== CT_FREE && this.peer[e] === peer) {
        this.remove(e);
        n++;
      }
    }
    return n;
  }

  /** Drop every entry. */
  clear(): void {
    this.state.fill(CT_FREE);
    this.origHead.fill(NIL);
    this.replyHead.fill(NIL);
    this.lruNewest = NIL;
    this.lruOldest = NIL;
    this.count = 0;
    this.resetFreeList();
  }

  /** Whether entry e has seen a packet in the reply direction. */
  replied(e: number): boolean {
    return (this.flags[e]! & F_REPLIED) !== 0;
  }
}
