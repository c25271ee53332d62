/**
 * The general matcher shared by the rule evaluators: a rule's conditions compiled to small
 * integers and tested against one packet (see model.ts for Liqo's match semantics), and the
 * TCP MSS clamp write. Per packet: no allocation.
 */
import { readU32BE } from '../packet/flow-mix.js';
import type { IpView } from '../packet/ip-view.js';
import { CSUM_ALWAYS, patchWord, read16, swap16 } from '../nat/rewrite.js';
import type { Cond } from './model.js';

export const C_PROTO = 0,
  C_DEV_IN = 1,
  C_DEV_OUT = 2,
  C_IP_SRC = 3,
  C_IP_DST = 4,
  C_PORT_SRC = 5,
  C_PORT_DST = 6,
  C_IP6_SRC = 7,
  C_IP6_DST = 8;

export class CCond {
  constructor(
    readonly kind: number,
    readonly neq: boolean,
    readonly lo: number,
    readonly hi: number,
    readonly name: string,
    /** C_IP6_*: the network (host bits zero); lo = prefix length. */
    readonly net: Uint8Array | null = null,
  ) {}
}

export function compileCond(c: Cond): CCond {
  switch (c.kind) {
    case 'proto':
      return new CCond(C_PROTO, false, c.proto, c.proto, '');
    case 'dev':
      return new CCond(c.dir === 'in' ? C_DEV_IN : C_DEV_OUT, c.op === 'neq', 0, 0, c.name);
    case 'ip':
      return new CCond(c.pos === 'src' ? C_IP_SRC : C_IP_DST, c.op === 'neq', c.lo, c.hi, '');
    case 'ip6':
      return new CCond(c.pos === 'src' ? C_IP6_SRC : C_IP6_DST, c.op === 'neq', c.prefixLen, c.prefixLen, '', c.net);
    case 'port':
      return new CCond(c.pos === 'src' ? C_PORT_SRC : C_PORT_DST, c.op === 'neq', c.lo, c.hi, '');
  }
}

/** Whether the 16-byte address at buf[o] lies in `net`/`len` (host bits of `net` zero). */
export function inPrefix6(buf: Uint8Array, o: number, net: Uint8Array, len: number): boolean {
  let i = 0;
  for (; len >= 8; i++, len -= 8) if (buf[o + i] !== net[i]) return false;
  return len === 0 || (buf[o + i]! & ((0xff00 >>> len) & 0xff)) === net[i];
}

/**
 * Whether every condition holds for the packet `v` (IPv4 for ip tables' rules, IPv6 for ip6's). `inName`/`outName` are the packet's
 * interface names, '' for none (oifname before routing, iifname of the router's own packets):
 * the kernel's meta compares the empty name, so eq fails and neq holds.
 */
export function condsMatch(
  conds: readonly CCond[],
  buf: Uint8Array,
  v: IpView,
  inName: string,
  outName: string,
): boolean {
  for (let i = 0; i < conds.length; i++) {
    const c = conds[i]!;
    let hit: boolean;
    switch (c.kind) {
      case C_PROTO:
        if (v.proto !== c.lo) return false;
        continue;
      case C_DEV_IN:
      case C_DEV_OUT:
        hit = (c.kind === C_DEV_IN ? inName : outName) === c.name;
        break;
      case C_IP_SRC:
      case C_IP_DST: {
        const a = readU32BE(buf, c.kind === C_IP_SRC ? v.srcOff : v.dstOff);
        hit = a >= c.lo && a <= c.hi;
        break;
      }
      case C_IP6_SRC:
      case C_IP6_DST:
        hit = inPrefix6(buf, c.kind === C_IP6_SRC ? v.srcOff : v.dstOff, c.net!, c.lo);
        break;
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

/**
 * A TCP SYN's MSS option lowered to `mss` (never raised: the kernel's tcp option maxseg write
 * only lowers), TCP checksum patched. Packets without SYN or without the option are untouched.
 * Returns whether the option was lowered.
 */
export function clampMss(buf: Uint8Array, v: IpView, mss: number): boolean {
  if (v.proto !== 6 || v.l4 < 0 || v.l4Len < 20) return false;
  const t = v.l4;
  if ((buf[t + 13]! & 0x02) === 0) return false;
  const hl = (buf[t + 12]! >>> 4) * 4;
  if (hl < 20 || hl > v.l4Len) return false;
  let o = t + 20;
  const end = t + hl;
  while (o < end) {
    const kind = buf[o]!;
    if (kind === 0) return false;
    if (kind === 1) {
      o++;
      continue;
    }
    if (o + 1 >= end) return false;
    const olen = buf[o + 1]!;
    if (olen < 2 || o + olen > end) return false;
    if (kind === 2 && olen === 4) {
      const old = read16(buf, o + 2);
      if (old <= mss) return false;
      // An option word at an odd distance from the header start is summed byte-swapped.
      const odd = ((o + 2 - t) & 1) === 1;
      patchWord(buf, t + 16, CSUM_ALWAYS, odd ? swap16(old) : old, odd ? swap16(mss) : mss);
      buf[o + 2] = mss >>> 8;
      buf[o + 3] = mss & 0xff;
      return true;
    }
    o += olen;
  }
  return false;
}
