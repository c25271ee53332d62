/**
 * Invariant checks shared by the fuzz targets. A target throws InvariantError when an invariant
 * fails; any other exception escaping a target is a finding too (bad input must be a counted drop
 * or a typed error, never a crash). The checks recompute from scratch what the code under test
 * maintains incrementally (checksums), so they do not share its arithmetic.
 */
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';

export class InvariantError extends Error {
  override readonly name = 'InvariantError';
}

export function must(cond: boolean, what: string): asserts cond {
  if (!cond) throw new InvariantError(what);
}

/** A throw from `fn` must be one of `allowed` (typed errors); anything else is rethrown as a finding. */
export function onlyTyped<T>(
  fn: () => T,
  allowed: readonly (abstract new (...a: never[]) => Error)[],
  what: string,
): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (allowed.some((c) => e instanceof c)) return undefined;
    throw new InvariantError(
      `${what}: untyped exception ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`,
    );
  }
}

/** Sum of the counters in `a` (Float64Array of drops by reason). */
export function total(a: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]!;
  return s;
}

/** One's-complement sum of 16-bit words (independent of src/packet/checksum.ts). */
function sum16(buf: Uint8Array, off: number, len: number, acc = 0): number {
  let s = acc;
  let i = 0;
  for (; i + 1 < len; i += 2) s += (buf[off + i]! << 8) | buf[off + i + 1]!;
  if (i < len) s += buf[off + i]! << 8;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

function pseudo(buf: Uint8Array, v: IpView, proto: number, l4len: number): number {
  let s = sum16(buf, v.srcOff, v.addrLen) + sum16(buf, v.dstOff, v.addrLen) + proto;
  s += v.family === 4 ? l4len : (l4len >>> 16) + (l4len & 0xffff);
  return s;
}

const scratch = new IpView();

/**
 * The checksums of the IP packet at buf[off, off+len) that can be verified, checked: the IPv4
 * header checksum; for a first fragment holding the whole transport segment, the TCP, UDP
 * (non-zero over IPv4), ICMP or ICMPv6 checksum. Returns a description of the first wrong one,
 * or null when all verify (or the packet does not parse: `parses` says so separately).
 */
export function checksumProblem(buf: Uint8Array, off: number, len: number): string | null {
  const v = scratch;
  if (parseIp(buf, off, len, v) !== IP_OK) return 'does not parse as IP';
  if (v.family === 4) {
    const hl = (buf[off]! & 0x0f) * 4;
    if (sum16(buf, off, hl) !== 0xffff) return 'IPv4 header checksum';
  }
  if (v.l4 < 0) return null;
  // A fragment (IPv4 MF, or IPv6 with a fragment header: l4 is -1 then) carries part of the segment.
  if (v.family === 4 && (buf[off + 6]! & 0x20) !== 0) return null;
  const l4len = v.l4Len;
  if (v.proto === 6) {
    if (l4len < 20) return null;
    return sum16(buf, v.l4, l4len, pseudo(buf, v, 6, l4len)) === 0xffff ? null : 'TCP checksum';
  }
  if (v.proto === 17) {
    if (l4len < 8) return null;
    const c = (buf[v.l4 + 6]! << 8) | buf[v.l4 + 7]!;
    if (c === 0 && v.family === 4) return null;
    return sum16(buf, v.l4, l4len, pseudo(buf, v, 17, l4len)) === 0xffff ? null : 'UDP checksum';
  }
  if (v.proto === 1 && v.family === 4) {
    if (l4len < 8) return null;
    return sum16(buf, v.l4, l4len) === 0xffff ? null : 'ICMP checksum';
  }
  if (v.proto === 58 && v.family === 6) {
    if (l4len < 8) return null;
    return sum16(buf, v.l4, l4len, pseudo(buf, v, 58, l4len)) === 0xffff ? null : 'ICMPv6 checksum';
  }
  return null;
}

function put16(buf: Uint8Array, off: number, x: number): void {
  buf[off] = x >>> 8;
  buf[off + 1] = x & 0xff;
}

/**
 * Makes every checksum checksumProblem verifies correct, in place (the fuzzer's packets then
 * reach the paths behind checksum checks, and a translator's output can be held to "checksums
 * still verify"). A zero IPv4 UDP checksum stays zero. Returns false when the packet does not parse.
 */
export function fixChecksums(buf: Uint8Array, off: number, len: number): boolean {
  const v = scratch;
  if (parseIp(buf, off, len, v) !== IP_OK) return false;
  if (v.family === 4) {
    const hl = (buf[off]! & 0x0f) * 4;
    put16(buf, off + 10, 0);
    put16(buf, off + 10, ~sum16(buf, off, hl) & 0xffff);
  }
  if (v.l4 < 0) return true;
  if (v.family === 4 && (buf[off + 6]! & 0x20) !== 0) return true;
  const l4len = v.l4Len;
  let at = -1;
  let init = 0;
  if (v.proto === 6 && l4len >= 20) {
    at = 16;
    init = pseudo(buf, v, 6, l4len);
  } else if (v.proto === 17 && l4len >= 8) {
    if (v.family === 4 && buf[v.l4 + 6] === 0 && buf[v.l4 + 7] === 0) return true;
    at = 6;
    init = pseudo(buf, v, 17, l4len);
  } else if (v.proto === 1 && v.family === 4 && l4len >= 8) {
    at = 2;
    init = 0;
  } else if (v.proto === 58 && v.family === 6 && l4len >= 8) {
    at = 2;
    init = pseudo(buf, v, 58, l4len);
  }
  if (at < 0) return true;
  put16(buf, v.l4 + at, 0);
  let c = ~sum16(buf, v.l4, l4len, init) & 0xffff;
  if (c === 0 && v.proto === 17) c = 0xffff; // UDP sends a computed zero as all ones
  put16(buf, v.l4 + at, c);
  return true;
}

/** Hex of a region, for messages. */
export function hex(buf: Uint8Array, off = 0, len = buf.length - off): string {
  return Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('hex');
}
