/**
 * A peer's flows spread over its WireGuard tunnels (Liqo: one interface per
 * `spec.endpoint.ports` entry, liqo-tunnel, liqo-tunnel1, …), as a multipath route with
 * fib_multipath_hash_policy=1 spreads them: one flow, one tunnel, chosen by a hash of its
 * 5-tuple, weighted per tunnel (RouteConfiguration `nextHops[].weight`, the kernel's weight
 * being weight + 1).
 *
 * The hash is symmetric: a packet and its reply (addresses and ports swapped) hash alike, so
 * two Weft gateways with the same tunnels up send a flow and its replies through one tunnel.
 * ICMP echo hashes its identifier as both ports (request and reply carry the same); IPv4
 * fragments and packets without ports hash addresses and protocol only, so every fragment of a
 * datagram takes one tunnel.
 *
 * A tunnel the connection check finds dead, or that has no session yet, is taken out
 * (setUp(i, false)) and its flows re-hash over the others; it returns when it answers again.
 * With every tunnel out the spread uses tunnel 0, the one a single-port peer (and Liqo's routes)
 * use.
 *
 * Pure: no I/O, no clock, no allocation in `pick`.
 */
import { finishMix, mixWord as mix, readU32BE as word } from '../packet/flow-mix.js';
import type { IpView } from '../packet/ip-view.js';
import { IPV4_FLAG_MF, IPV4_FRAGMENT_OFFSET_MASK, ipv4FlagsFragment } from '../packet/ipv4.js';

/** Liqo's limit: 64 /30 blocks in 169.254.18.0/24. */
export const MAX_TUNNELS = 64;
/** Liqo's NextHop weight range (0..255, the kernel's weight − 1). */
export const MAX_NEXTHOP_WEIGHT = 255;

const IP_PROTO_ICMP = 1;
const IP_PROTO_TCP = 6;
const IP_PROTO_UDP = 17;
const IP_PROTO_ICMPV6 = 58;
const IP_PROTO_SCTP = 132;

/** -1, 0, 1: the address at a against the one at b (addrLen bytes each). */
function compareAddr(buf: Uint8Array, a: number, b: number, addrLen: number): number {
  for (let i = 0; i < addrLen; i++) {
    const d = buf[a + i]! - buf[b + i]!;
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

/**
 * Unsigned 32-bit symmetric flow hash of the parsed packet `v` in `buf` (see the module header).
 * Reads only the header fields `v` located.
 */
export function symmetricFlowHash(buf: Uint8Array, v: IpView): number {
  const n = v.addrLen;
  const proto = v.proto;
  let sp = 0;
  let dp = 0;
  let fragment = false;
  if (v.family === 4) {
    fragment = (ipv4FlagsFragment(buf, v.off) & (IPV4_FLAG_MF | IPV4_FRAGMENT_OFFSET_MASK)) !== 0;
  }
  const l4 = v.l4;
  if (!fragment && l4 >= 0) {
    if ((proto === IP_PROTO_TCP || proto === IP_PROTO_UDP || proto === IP_PROTO_SCTP) && v.l4Len >= 4) {
      sp = (buf[l4]! << 8) | buf[l4 + 1]!;
      dp = (buf[l4 + 2]! << 8) | buf[l4 + 3]!;
    } else if ((proto === IP_PROTO_ICMP || proto === IP_PROTO_ICMPV6) && v.l4Len >= 6) {
      // Echo request/reply (v4 8/0, v6 128/129): the identifier is the conversation.
      const t = buf[l4]!;
      if (t === 8 || t === 0 || t === 128 || t === 129) sp = dp = (buf[l4 + 4]! << 8) | buf[l4 + 5]!;
    }
  }
  // Order the two endpoints (address, then port) so both directions read the same sequence.
  let c = compareAddr(buf, v.srcOff, v.dstOff, n);
  if (c === 0) c = sp < dp ? -1 : sp > dp ? 1 : 0;
  const lo = c <= 0 ? v.srcOff : v.dstOff;
  const hi = c <= 0 ? v.dstOff : v.srcOff;
  const loPort = c <= 0 ? sp : dp;
  const hiPort = c <= 0 ? dp : sp;
  let h: number = v.family;
  for (let i = 0; i < n; i += 4) h = mix(h, word(buf, lo + i));
  for (let i = 0; i < n; i += 4) h = mix(h, word(buf, hi + i));
  h = mix(h, proto);
  h = mix(h, (loPort << 16) | hiPort);
  return finishMix(h) >>> 0;
}

/** The tunnels of one peer and which carry flows, by weight. */
export class TunnelSpread<L> {
  private readonly weights: Uint16Array;
  private readonly up: Uint8Array;
  /** Cumulative kernel weights of the tunnels in use, in tunnel order; `idx` their indexes. */
  private readonly cum: Uint32Array;
  private readonly idx: Uint8Array;
  private used = 0;
  private total = 0;

  /** `links[i]` is tunnel i's link (what the shell encrypts with); all start up, weight 0 (kernel 1). */
  constructor(readonly links: readonly L[]) {
    if (links.length < 1 || links.length > MAX_TUNNELS)
      throw new RangeError(`tunnel spread: ${links.length} tunnels (1..${MAX_TUNNELS})`);
    const k = links.length;
    this.weights = new Uint16Array(k).fill(1);
    this.up = new Uint8Array(k).fill(1);
    this.cum = new Uint32Array(k);
    this.idx = new Uint8Array(k);
    this.rebuild();
  }

  get size(): number {
    return this.links.length;
  }

  /** Whether tunnel i carries flows (the connection check's view). */
  isUp(i: number): boolean {
    return this.up[i] === 1;
  }

  /** Tunnels in use (tunnel 0 when none is up). */
  get inUse(): number {
    return this.used;
  }

  /** Takes tunnel i out of the spread (false) or puts it back (true). */
  setUp(i: number, up: boolean): void {
    this.check(i);
    const u = up ? 1 : 0;
    if (this.up[i] === u) return;
    this.up[i] = u;
    this.rebuild();
  }

  /**
   * Liqo NextHop weights per tunnel (0..255; the kernel's weight is weight + 1); a tunnel
   * without an entry (undefined) carries no flow while another has one. Throws on a bad value (API misuse).
   */
  setWeights(weights: readonly (number | undefined)[]): void {
    if (weights.length > this.links.length) throw new RangeError('tunnel spread: more weights than tunnels');
    const any = weights.some((w) => w !== undefined);
    for (let i = 0; i < this.links.length; i++) {
      const w = weights[i];
      if (w !== undefined && (!Number.isInteger(w) || w < 0 || w > MAX_NEXTHOP_WEIGHT))
        throw new RangeError(`tunnel spread: weight ${w} (0..${MAX_NEXTHOP_WEIGHT})`);
      this.weights[i] = w === undefined ? (any ? 0 : 1) : w + 1;
    }
    this.rebuild();
  }

  /** The kernel weight of tunnel i (0: not a next hop). */
  weight(i: number): number {
    this.check(i);
    return this.weights[i]!;
  }

  /** The tunnel index for a flow hash (unsigned 32-bit). */
  pick(hash: number): number {
    if (this.used === 1) return this.idx[0]!;
    const r = hash % this.total;
    const cum = this.cum;
    let i = 0;
    while (r >= cum[i]!) i++;
    return this.idx[i]!;
  }

  /** The link for a flow hash. */
  linkFor(hash: number): L {
    return this.links[this.pick(hash)]!;
  }

  private rebuild(): void {
    let used = 0;
    let total = 0;
    for (let i = 0; i < this.links.length; i++) {
      if (this.up[i] === 0) continue;
      const w = this.weights[i]!;
      if (w === 0) continue;
      total += w;
      this.cum[used] = total;
      this.idx[used] = i;
      used++;
    }
    if (used === 0) {
      // Nothing up, or only zero weights (no nextHop names an up tunnel): tunnel 0.
      this.cum[0] = 1;
      this.idx[0] = 0;
      used = 1;
      total = 1;
    }
    this.used = used;
    this.total = total;
  }

  private check(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.links.length) throw new RangeError(`tunnel spread: no tunnel ${i}`);
  }
}
