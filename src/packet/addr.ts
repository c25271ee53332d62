/**
 * IP addresses and prefixes as bytes.
 *
 * An address is 4 (IPv4) or 16 (IPv6) bytes in network order. Parsing and formatting allocate
 * and are meant for configuration and diagnostics; the comparison/containment helpers that take
 * `(buf, off)` read an address in place inside a packet and never allocate.
 *
 * Accepted text: IPv4 dotted quad in the strict form (four decimal octets, no leading zeros,
 * RFC 6943 §3.1.1), IPv6 per RFC 4291 §2.2 (hex groups, one `::`, optional dotted IPv4 tail).
 * IPv6 output is the RFC 5952 §4 canonical form.
 */

export type IpFamily = 4 | 6;

export const IPV4_ADDR_LEN = 4;
export const IPV6_ADDR_LEN = 16;

/** A prefix with its host bits zeroed. `addr` is owned by the prefix; do not mutate it. */
export interface Prefix {
  readonly family: IpFamily;
  readonly addr: Uint8Array;
  readonly prefixLen: number;
}

/** Bad address or prefix text (configuration input). Names the offending text and the reason. */
export class AddressParseError extends Error {
  override readonly name = 'AddressParseError';
  constructor(
    readonly text: string,
    readonly reason: string,
  ) {
    super(`invalid IP address or prefix ${JSON.stringify(text)}: ${reason}`);
  }
}

/** Byte length of an address of `family`. */
export function addrLen(family: IpFamily): number {
  return family === 4 ? IPV4_ADDR_LEN : IPV6_ADDR_LEN;
}

/** Family of a 4- or 16-byte address; throws TypeError on any other length (API misuse). */
export function familyOf(addr: Uint8Array): IpFamily {
  if (addr.length === IPV4_ADDR_LEN) return 4;
  if (addr.length === IPV6_ADDR_LEN) return 6;
  throw new TypeError(`an IP address is 4 or 16 bytes, got ${addr.length}`);
}

const CH_0 = 0x30;
const CH_9 = 0x39;

/** Parse strict dotted-quad text into out[off..off+4). Returns an error reason or null. */
function parseV4Into(text: string, out: Uint8Array, off: number): string | null {
  let octet = 0;
  let digits = 0;
  let index = 0;
  let leadingZero = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e; // virtual trailing '.'
    if (c === 0x2e) {
      if (digits === 0) return 'empty octet';
      if (index > 3) return 'more than four octets';
      out[off + index] = octet;
      index++;
      octet = 0;
      digits = 0;
      leadingZero = false;
      continue;
    }
    if (c < CH_0 || c > CH_9) return `unexpected character ${JSON.stringify(text[i])}`;
    if (leadingZero) return 'octet with a leading zero (ambiguous: octal in some parsers)';
    if (digits === 0 && c === CH_0) leadingZero = true;
    octet = octet * 10 + (c - CH_0);
    digits++;
    if (octet > 255) return 'octet greater than 255';
  }
  if (index !== 4) return 'an IPv4 address has four octets';
  return null;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** Parse IPv6 text into out[0..16). Returns an error reason or null. */
function parseV6Into(text: string, out: Uint8Array): string | null {
  const words = new Array<number>(8).fill(0);
  let n = 0; // groups written so far
  let gap = -1; // index in `words` where "::" sits
  let i = 0;
  const len = text.length;
  if (len < 2) return 'too short';
  if (text.startsWith('::')) {
    gap = 0;
    i = 2;
    if (i === len) {
      out.fill(0);
      return null;
    }
  } else if (text.charCodeAt(0) === 0x3a) {
    return 'a single leading ":"';
  }
  while (i < len) {
    if (n >= 8) return 'more than eight groups';
    // Embedded IPv4 tail (RFC 4291 §2.2 form 3): the rest of the string contains a '.'.
    const nextColon = text.indexOf(':', i);
    const groupEnd = nextColon === -1 ? len : nextColon;
    const group = text.slice(i, groupEnd);
    if (nextColon === -1 && group.includes('.')) {
      if (n > 6) return 'no room for an embedded IPv4 address';
      const v4 = new Uint8Array(4);
      const err = parseV4Into(group, v4, 0);
      if (err !== null) return `embedded IPv4: ${err}`;
      words[n++] = (v4[0]! << 8) | v4[1]!;
      words[n++] = (v4[2]! << 8) | v4[3]!;
      i = len;
      break;
    }
    if (group.length === 0 || group.length > 4) return `group ${JSON.stringify(group)} is not 1 to 4 hex digits`;
    let w = 0;
    for (let k = 0; k < group.length; k++) {
      const h = hexValue(group.charCodeAt(k));
      if (h < 0) return `unexpected character ${JSON.stringify(group[k])}`;
      w = (w << 4) | h;
    }
    words[n++] = w;
    i = groupEnd;
    if (i === len) break;
    // at a ':'
    if (i + 1 < len && text.charCodeAt(i + 1) === 0x3a) {
      if (gap !== -1) return '"::" may appear only once';
      gap = n;
      i += 2;
    } else {
      i += 1;
      if (i === len) return 'a trailing single ":"';
    }
  }
  if (gap === -1) {
    if (n !== 8) return 'an IPv6 address has eight groups unless "::" is used';
  } else {
    if (n > 7) return '"::" must stand for at least one group';
    const tail = n - gap;
    for (let k = 0; k < tail; k++) words[7 - k] = words[n - 1 - k]!;
    for (let k = gap; k < 8 - tail; k++) words[k] = 0;
  }
  for (let k = 0; k < 8; k++) {
    out[2 * k] = words[k]! >>> 8;
    out[2 * k + 1] = words[k]! & 0xff;
  }
  return null;
}

/** Parse an IPv4 or IPv6 address into a new 4- or 16-byte array. Throws AddressParseError. */
export function parseAddress(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length === 0) throw new AddressParseError(String(text), 'empty address');
  if (text.includes(':')) {
    const out = new Uint8Array(IPV6_ADDR_LEN);
    const err = parseV6Into(text, out);
    if (err !== null) throw new AddressParseError(text, err);
    return out;
  }
  const out = new Uint8Array(IPV4_ADDR_LEN);
  const err = parseV4Into(text, out, 0);
  if (err !== null) throw new AddressParseError(text, err);
  return out;
}

/** True when `text` is a valid address of any family (or of `family` when given). */
export function isAddress(text: string, family?: IpFamily): boolean {
  try {
    const a = parseAddress(text);
    return family === undefined || a.length === addrLen(family);
  } catch (e) {
    if (e instanceof AddressParseError) return false;
    throw e;
  }
}

/**
 * Format the address at buf[off..]. Without `family`, off must be 0 and the buffer exactly one
 * address (4 or 16 bytes); inside a packet pass the family. IPv6 follows RFC 5952 §4: lowercase, no
 * leading zeros, the longest run (≥ 2, first on a tie) of zero groups as "::", and IPv4-mapped
 * addresses (::ffff:0:0/96) in mixed notation (§5).
 */
export function formatAddress(buf: Uint8Array, off = 0, family?: IpFamily): string {
  if (family === undefined && off !== 0)
    throw new TypeError('formatAddress: pass the family when reading at an offset');
  const fam: IpFamily = family ?? familyOf(buf);
  const need = addrLen(fam);
  if (off < 0 || off + need > buf.length)
    throw new RangeError(`formatAddress: ${need} bytes at ${off} exceed buffer of ${buf.length}`);
  if (fam === 4) return `${buf[off]}.${buf[off + 1]}.${buf[off + 2]}.${buf[off + 3]}`;
  const w = new Array<number>(8);
  for (let i = 0; i < 8; i++) w[i] = (buf[off + 2 * i]! << 8) | buf[off + 2 * i + 1]!;
  // RFC 5952 §5: the well-known IPv4-mapped prefix ::ffff:0:0/96 is written in mixed notation.
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) {
    return `::ffff:${buf[off + 12]}.${buf[off + 13]}.${buf[off + 14]}.${buf[off + 15]}`;
  }
  let bestStart = -1;
  let bestLen = 1; // RFC 5952 §4.2.2: a single zero group is not compressed
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = w.map((x) => x.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/**
 * Parse "addr/len". Host bits are zeroed in the result. With `strict`, set host bits are an
 * error (in a configuration they are nearly always a typo; the message suggests the network).
 * A bare address without "/len" is rejected.
 */
export function parsePrefix(text: string, strict = false): Prefix {
  if (typeof text !== 'string') throw new AddressParseError(String(text), 'not a string');
  const slash = text.indexOf('/');
  if (slash === -1) throw new AddressParseError(text, 'missing "/prefix-length" (use /32 or /128 for one address)');
  let addr: Uint8Array;
  try {
    addr = parseAddress(text.slice(0, slash));
  } catch (e) {
    if (e instanceof AddressParseError) throw new AddressParseError(text, e.reason);
    throw e;
  }
  const lenText = text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText))
    throw new AddressParseError(text, 'prefix length is not a decimal number');
  const prefixLen = Number(lenText);
  const family = familyOf(addr);
  if (prefixLen > addr.length * 8)
    throw new AddressParseError(text, `prefix length ${prefixLen} exceeds ${addr.length * 8}`);
  const masked = new Uint8Array(addr);
  maskInPlace(masked, prefixLen);
  if (strict && compareAddress(masked, 0, addr, 0, addr.length) !== 0) {
    throw new AddressParseError(
      text,
      `host bits are set; did you mean ${formatPrefix({ family, addr: masked, prefixLen })}?`,
    );
  }
  return { family, addr: masked, prefixLen };
}

/** Build a prefix from bytes (copied, host bits cleared). Throws RangeError on a bad length. */
export function makePrefix(addr: Uint8Array, prefixLen: number): Prefix {
  const family = familyOf(addr);
  if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > addr.length * 8) {
    throw new RangeError(`prefix length ${prefixLen} is not in 0..${addr.length * 8}`);
  }
  const copy = new Uint8Array(addr);
  maskInPlace(copy, prefixLen);
  return { family, addr: copy, prefixLen };
}

export function formatPrefix(p: Prefix): string {
  return `${formatAddress(p.addr, 0, p.family)}/${p.prefixLen}`;
}

/** Clear every bit after the first `prefixLen` bits of `addr` (in place). */
export function maskInPlace(addr: Uint8Array, prefixLen: number): void {
  for (let i = 0; i < addr.length; i++) {
    const bits = prefixLen - i * 8;
    if (bits >= 8) continue;
    addr[i] = bits <= 0 ? 0 : addr[i]! & (0xff00 >>> bits);
  }
}

/**
 * True when the address at buf[off..off+addrLen) lies inside `p`. No allocation. The caller
 * guarantees the bytes are present and of p's family.
 */
export function prefixContains(p: Prefix, buf: Uint8Array, off: number): boolean {
  const a = p.addr;
  const full = p.prefixLen >>> 3;
  for (let i = 0; i < full; i++) if (buf[off + i] !== a[i]) return false;
  const rem = p.prefixLen & 7;
  if (rem === 0) return true;
  const mask = (0xff00 >>> rem) & 0xff;
  return (buf[off + full]! & mask) === a[full];
}

/** True when `inner` lies entirely inside `outer` (same family, at least as long). */
export function prefixContainsPrefix(outer: Prefix, inner: Prefix): boolean {
  return outer.family === inner.family && inner.prefixLen >= outer.prefixLen && prefixContains(outer, inner.addr, 0);
}

/** True when two prefixes share at least one address (one contains the other). */
export function prefixesOverlap(a: Prefix, b: Prefix): boolean {
  if (a.family !== b.family) return false;
  return a.prefixLen <= b.prefixLen ? prefixContains(a, b.addr, 0) : prefixContains(b, a.addr, 0);
}

/** Same family, same length, same network. */
export function prefixEquals(a: Prefix, b: Prefix): boolean {
  return (
    a.family === b.family && a.prefixLen === b.prefixLen && compareAddress(a.addr, 0, b.addr, 0, a.addr.length) === 0
  );
}

/** Lexicographic comparison of `len` bytes: negative, zero or positive. No allocation. */
export function compareAddress(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, len: number): number {
  for (let i = 0; i < len; i++) {
    const d = a[aOff + i]! - b[bOff + i]!;
    if (d !== 0) return d;
  }
  return 0;
}

/** Equality of `len` bytes at two offsets. No allocation. */
export function addressEquals(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (a[aOff + i] !== b[bOff + i]) return false;
  return true;
}

/** Copy `len` address bytes from src[srcOff..] to dst[dstOff..]. No allocation. */
export function copyAddress(dst: Uint8Array, dstOff: number, src: Uint8Array, srcOff: number, len: number): void {
  for (let i = 0; i < len; i++) dst[dstOff + i] = src[srcOff + i]!;
}

/** The IPv4 address at buf[off..off+4) as an unsigned 32-bit integer. No allocation. */
export function readIpv4U32(buf: Uint8Array, off: number): number {
  return ((buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!) >>> 0;
}

/** Write an unsigned 32-bit integer as an IPv4 address at buf[off..off+4). */
export function writeIpv4U32(buf: Uint8Array, off: number, v: number): void {
  buf[off] = v >>> 24;
  buf[off + 1] = (v >>> 16) & 0xff;
  buf[off + 2] = (v >>> 8) & 0xff;
  buf[off + 3] = v & 0xff;
}

/** The `n`-th address (0-based) of prefix `p` as a new array; throws RangeError if outside. */
export function prefixNthAddress(p: Prefix, n: number): Uint8Array {
  const hostBits = p.addr.length * 8 - p.prefixLen;
  if (!Number.isInteger(n) || n < 0 || (hostBits < 53 && n >= 2 ** hostBits)) {
    throw new RangeError(`address #${n} is outside ${formatPrefix(p)}`);
  }
  const out = new Uint8Array(p.addr);
  let carry = n;
  for (let i = out.length - 1; i >= 0 && carry > 0; i--) {
    const sum = out[i]! + (carry % 256);
    out[i] = sum & 0xff;
    carry = Math.floor(carry / 256) + (sum >> 8);
  }
  return out;
}
