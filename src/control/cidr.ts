/**
 * Address and prefix parsing for the control plane (configuration text → bytes).
 *
 * This is deliberately local to src/control: configuration validation needs a parser that
 * reports *what* is wrong in words a user can act on, and it runs once per (re)load, never on
 * the packet path. Every function here allocates freely.
 *
 * Accepted text: IPv4 dotted quad (no leading zeros, RFC 6943 §3.1.1 strict form), IPv6 per
 * RFC 4291 §2.2 (with `::` compression and an embedded dotted IPv4 tail); output of IPv6 is the
 * RFC 5952 canonical form.
 */

export type IpFamily = 4 | 6;

/** A parsed prefix. `addr` has host bits zero; 4 or 16 bytes. */
export interface Cidr {
  readonly family: IpFamily;
  readonly addr: Uint8Array;
  readonly prefixLen: number;
}

/** Bad address or prefix text. `reason` is the human explanation without the offending text. */
export class CidrParseError extends Error {
  override readonly name = 'CidrParseError';
  constructor(readonly text: string, readonly reason: string) {
    super(`invalid address or prefix ${JSON.stringify(text)}: ${reason}`);
  }
}

const DEC_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

function parseIPv4Into(text: string, out: Uint8Array, off: number): string | null {
  const parts = text.split('.');
  if (parts.length !== 4) return 'an IPv4 address has four dot-separated decimal octets';
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!DEC_OCTET.test(p)) return `octet ${JSON.stringify(p)} is not a decimal number without leading zeros`;
    const v = Number(p);
    if (v > 255) return `octet ${v} is greater than 255`;
    out[off + i] = v;
  }
  return null;
}

function parseIPv6Into(text: string, out: Uint8Array): string | null {
  const dbl = text.indexOf('::');
  if (dbl !== -1 && text.indexOf('::', dbl + 1) !== -1) return '"::" may appear only once';
  const head = dbl === -1 ? text : text.slice(0, dbl);
  const tail = dbl === -1 ? '' : text.slice(dbl + 2);
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === '' ? [] : tail.split(':');
  const words: number[] = [];
  const tailWords: number[] = [];
  let v4Tail: Uint8Array | null = null;
  const all = [...headParts.map((p) => [p, false] as const), ...tailParts.map((p) => [p, true] as const)];
  for (let i = 0; i < all.length; i++) {
    const [p, isTail] = all[i]!;
    const target = isTail ? tailWords : words;
    if (i === all.length - 1 && p.includes('.')) {
      v4Tail = new Uint8Array(4);
      const err = parseIPv4Into(p, v4Tail, 0);
      if (err !== null) return `embedded IPv4: ${err}`;
      target.push((v4Tail[0]! << 8) | v4Tail[1]!, (v4Tail[2]! << 8) | v4Tail[3]!);
      continue;
    }
    if (!HEX_GROUP.test(p)) return `group ${JSON.stringify(p)} is not 1 to 4 hexadecimal digits`;
    target.push(parseInt(p, 16));
  }
  const n = words.length + tailWords.length;
  if (dbl === -1 && n !== 8) return 'an IPv6 address has eight groups (or uses "::")';
  if (dbl !== -1 && n > 7) return 'too many groups around "::"';
  const full = [...words, ...new Array<number>(8 - n).fill(0), ...tailWords];
  for (let i = 0; i < 8; i++) {
    out[2 * i] = full[i]! >> 8;
    out[2 * i + 1] = full[i]! & 0xff;
  }
  return null;
}

/** Parse an IPv4 or IPv6 address into 4 or 16 new bytes. Throws CidrParseError. */
export function parseIp(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length === 0) throw new CidrParseError(String(text), 'empty address');
  if (text.includes(':')) {
    const out = new Uint8Array(16);
    const err = parseIPv6Into(text, out);
    if (err !== null) throw new CidrParseError(text, err);
    return out;
  }
  const out = new Uint8Array(4);
  const err = parseIPv4Into(text, out, 0);
  if (err !== null) throw new CidrParseError(text, err);
  return out;
}

/** True when `text` parses as an address. */
export function isIp(text: string): boolean {
  try {
    parseIp(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Parse "addr/len". With `strict` (the default) host bits must be zero — a prefix with host
 * bits set in a configuration is almost always a typo, and the message suggests the network.
 * A bare address without "/len" is rejected (say "/32" or "/128" explicitly).
 */
export function parseCidr(text: string, strict = true): Cidr {
  if (typeof text !== 'string') throw new CidrParseError(String(text), 'not a string');
  const slash = text.indexOf('/');
  if (slash === -1) throw new CidrParseError(text, 'missing "/prefix-length" (use /32 or /128 for a single address)');
  const addr = parseIp(text.slice(0, slash));
  const family: IpFamily = addr.length === 4 ? 4 : 6;
  const lenText = text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText)) throw new CidrParseError(text, 'prefix length is not a decimal number');
  const prefixLen = Number(lenText);
  const max = addr.length * 8;
  if (prefixLen > max) throw new CidrParseError(text, `prefix length ${prefixLen} exceeds ${max}`);
  const masked = maskAddr(addr, prefixLen);
  if (strict && !bytesEqual(masked, addr)) {
    throw new CidrParseError(text, `host bits are set; did you mean ${formatCidr({ family, addr: masked, prefixLen })}?`);
  }
  return { family, addr: masked, prefixLen };
}

/** A copy of `addr` with the bits after `prefixLen` cleared. */
export function maskAddr(addr: Uint8Array, prefixLen: number): Uint8Array {
  const out = new Uint8Array(addr);
  for (let i = 0; i < out.length; i++) {
    const bitsHere = Math.min(8, Math.max(0, prefixLen - i * 8));
    out[i] = out[i]! & ((0xff00 >> bitsHere) & 0xff);
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Format 4 or 16 address bytes (IPv6 in RFC 5952 §4 canonical form). */
export function formatIp(addr: Uint8Array): string {
  if (addr.length === 4) return `${addr[0]}.${addr[1]}.${addr[2]}.${addr[3]}`;
  if (addr.length !== 16) throw new TypeError(`formatIp: expected 4 or 16 bytes, got ${addr.length}`);
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push((addr[2 * i]! << 8) | addr[2 * i + 1]!);
  // RFC 5952 §4.2: compress the longest run of ≥2 zero groups, the first one on a tie.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hex = w.map((x) => x.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function formatCidr(c: Cidr): string {
  return `${formatIp(c.addr)}/${c.prefixLen}`;
}

/** Canonical text of a prefix ("10.0.0.0/16", "fd00::/64"). Throws CidrParseError. */
export function canonicalCidr(text: string): string {
  return formatCidr(parseCidr(text));
}

/** True when two prefixes of the same family share at least one address. */
export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  if (a.family !== b.family) return false;
  const len = Math.min(a.prefixLen, b.prefixLen);
  return bytesEqual(maskAddr(a.addr, len), maskAddr(b.addr, len));
}

/** True when `addr` (4 or 16 bytes) lies inside `c`. */
export function cidrContains(c: Cidr, addr: Uint8Array): boolean {
  if (addr.length !== c.addr.length) return false;
  return bytesEqual(maskAddr(addr, c.prefixLen), c.addr);
}

/** True when prefix `inner` lies entirely inside `outer`. */
export function cidrContainsCidr(outer: Cidr, inner: Cidr): boolean {
  return outer.family === inner.family && inner.prefixLen >= outer.prefixLen && cidrContains(outer, inner.addr);
}

/** A parsed "host:port" / "[v6]:port" endpoint. `host` is an IP literal (no brackets) or a DNS name. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

const DNS_NAME = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Parse "host:port" (IPv6 literal must be in brackets, RFC 3986 §3.2.2). Throws CidrParseError. */
export function parseEndpoint(text: string): Endpoint {
  if (typeof text !== 'string' || text.length === 0) throw new CidrParseError(String(text), 'empty endpoint');
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close === -1 || text[close + 1] !== ':') throw new CidrParseError(text, 'expected "[ipv6]:port"');
    host = text.slice(1, close);
    portText = text.slice(close + 2);
    const ip = parseIp(host); // throws with a reason
    if (ip.length !== 16) throw new CidrParseError(text, 'brackets are only for IPv6 addresses');
    host = formatIp(ip);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon === -1) throw new CidrParseError(text, 'missing ":port"');
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) throw new CidrParseError(text, 'an IPv6 endpoint must be written "[address]:port"');
    if (/^[0-9.]+$/.test(host)) parseIp(host);
    else if (!DNS_NAME.test(host)) throw new CidrParseError(text, `host ${JSON.stringify(host)} is neither an IP address nor a DNS name`);
  }
  if (!/^[1-9][0-9]{0,4}$/.test(portText) || Number(portText) > 65535) {
    throw new CidrParseError(text, `port ${JSON.stringify(portText)} is not in 1..65535`);
  }
  return { host, port: Number(portText) };
}

/** "host:port", bracketing IPv6 literals. */
export function formatEndpoint(e: Endpoint): string {
  return e.host.includes(':') ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`;
}
