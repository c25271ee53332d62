/**
 * The WireGuard cross-platform configuration protocol ("UAPI"), text codec only — no sockets.
 *
 * Facts (wireguard.com "Cross-platform Userspace Implementation", configuration protocol; and
 * the behaviour of wireguard-go's device/uapi.go, read for facts only):
 * - A request is `get=1\n\n` or `set=1\n` followed by `key=value\n` lines and a blank line.
 *   The reply is optional `key=value` lines, then `errno=N\n\n`; N is 0 or a negative errno.
 * - In a set, lines up to the first `public_key=` configure the device (private_key,
 *   listen_port, fwmark, replace_peers); every `public_key=` starts a new peer section
 *   (update_only, remove, preshared_key, endpoint, persistent_keepalive_interval,
 *   replace_allowed_ips, allowed_ip, protocol_version).
 * - A line without `=` is -EPROTO; an unknown key, a bad value or a bad key is -EINVAL.
 * - Keys are 64 hex digits (either case on input, lowercase on output). An all-zero
 *   private_key clears the device key; an all-zero preshared_key means "no PSK".
 * - Booleans (replace_peers, update_only, remove, replace_allowed_ips) accept only `true`.
 * - Ports, fwmark and keepalive are unsigned decimal (16, 32 and 16 bits).
 * - IPv6 endpoints are written `[addr]:port`; internally an endpoint's address has no brackets.
 *
 * This file holds the protocol's vocabulary (errnos, the error, operations, the plan a set
 * folds into, the device snapshot a get reports), its value parsers and planSet; the text of
 * a `set=1` request is uapi-set.ts's, the text of a `get=1` reply uapi-get.ts's.
 *
 * Everything here allocates freely: this is the configuration path, never the packet path.
 */
import { formatAddress, parseAddress, parsePrefix, AddressParseError, type Prefix } from '../packet/addr.js';

/** Linux errno values that wireguard-go's UAPI replies with (negated on the wire). */
export const UAPI_EIO = 5;
export const UAPI_EINVAL = 22;
export const UAPI_EPROTO = 71;
export const UAPI_EMSGSIZE = 90;
export const UAPI_EADDRINUSE = 98;
/** wireguard-go's "unknown error" code (ENOANO). */
export const UAPI_ENOANO = 55;

/** Key length of Curve25519 keys and of the preshared key (whitepaper §5.4). */
export const UAPI_KEY_LEN = 32;

/** A UDP endpoint. `address` is an IPv4 or IPv6 literal without brackets (IPv6 may carry `%zone`). */
export interface UapiEndpoint {
  readonly address: string;
  readonly port: number;
}

/**
 * A rejected request. `errno` is the negative value written on the wire (`errno=-22`), as
 * wireguard-go does; `line` is the 1-based line of the body that failed (0 when not line-bound).
 */
export class UapiError extends Error {
  override readonly name = 'UapiError';
  constructor(
    readonly errno: number,
    message: string,
    readonly line = 0,
  ) {
    super(line > 0 ? `UAPI line ${line}: ${message}` : `UAPI: ${message}`);
  }
}

/** One line of a `set=1` request, typed, in request order. Keys are fresh 32-byte copies. */
export type UapiOperation =
  | { readonly op: 'private_key'; readonly key: Uint8Array /* all-zero: clear */ }
  | { readonly op: 'listen_port'; readonly port: number }
  | { readonly op: 'fwmark'; readonly mark: number /* 0: clear */ }
  | { readonly op: 'replace_peers' }
  | { readonly op: 'public_key'; readonly key: Uint8Array /* selects or creates the peer */ }
  | { readonly op: 'update_only' }
  | { readonly op: 'remove' }
  | { readonly op: 'preshared_key'; readonly key: Uint8Array /* all-zero: no PSK */ }
  | { readonly op: 'endpoint'; readonly endpoint: UapiEndpoint }
  | { readonly op: 'persistent_keepalive_interval'; readonly seconds: number /* 0: off */ }
  | { readonly op: 'replace_allowed_ips' }
  | { readonly op: 'allowed_ip'; readonly prefix: Prefix }
  | { readonly op: 'protocol_version'; readonly version: 1 };

export type UapiOperationName = UapiOperation['op'];

/**
 * The same request, folded per peer with wireguard-go's line-by-line semantics made explicit:
 * - device fields: last value wins; `replacePeers` removes every peer before any peer section;
 * - `updateOnly`: the peer is changed only if it already exists (anywhere in its section);
 * - `remove`: the peer is removed and the section's other lines have no effect;
 * - `replaceAllowedIps`: the peer's allowed IPs are cleared first; `allowed_ip` lines seen
 *   before a `replace_allowed_ips` line in the same section are dropped, as they would be;
 * - sections for the same key are kept separate and in order; apply them in order.
 */
export interface UapiSetPlan {
  readonly privateKey?: Uint8Array;
  readonly listenPort?: number;
  readonly fwmark?: number;
  readonly replacePeers: boolean;
  readonly peers: readonly UapiPeerPlan[];
}

export interface UapiPeerPlan {
  readonly publicKey: Uint8Array;
  readonly updateOnly: boolean;
  readonly remove: boolean;
  readonly presharedKey?: Uint8Array;
  readonly endpoint?: UapiEndpoint;
  readonly persistentKeepaliveInterval?: number;
  readonly replaceAllowedIps: boolean;
  readonly allowedIps: readonly Prefix[];
}

/** What `get=1` reports about one peer. */
export interface UapiPeerSnapshot {
  readonly publicKey: Uint8Array;
  /** null or all-zero: no PSK (printed as 64 zeros, as wireguard-go does). */
  readonly presharedKey: Uint8Array | null;
  readonly endpoint: UapiEndpoint | null;
  /** Wall-clock time of the last completed handshake in Unix milliseconds; 0 = never. */
  readonly lastHandshakeTimeMs: number;
  readonly txBytes: number | bigint;
  readonly rxBytes: number | bigint;
  readonly persistentKeepaliveInterval: number;
  readonly allowedIps: readonly Prefix[];
}

/** What `get=1` reports about the device. */
export interface UapiDeviceSnapshot {
  /** null or all-zero: no key (the line is omitted). */
  readonly privateKey: Uint8Array | null;
  /** 0: omitted. */
  readonly listenPort: number;
  /** 0: omitted. */
  readonly fwmark: number;
  readonly peers: readonly UapiPeerSnapshot[];
}

const HEX_DIGITS = '0123456789abcdef';

// ---------------------------------------------------------------------------------------------
// Value parsers. Each returns the value or throws UapiError(-EINVAL) naming the line.

/** The UapiError(-EINVAL) for a bad value on request line `line`. */
export function invalid(line: number, message: string): UapiError {
  return new UapiError(-UAPI_EINVAL, message, line);
}

/** 64 hex digits → 32 bytes (Go's hex decoding accepts both cases). */
export function parseHexKey(text: string, line = 0, what = 'key'): Uint8Array {
  if (text.length !== UAPI_KEY_LEN * 2)
    throw invalid(line, `${what} must be ${UAPI_KEY_LEN * 2} hex digits, got ${text.length} characters`);
  const out = new Uint8Array(UAPI_KEY_LEN);
  for (let i = 0; i < UAPI_KEY_LEN; i++) {
    const hi = hexNibble(text.charCodeAt(2 * i));
    const lo = hexNibble(text.charCodeAt(2 * i + 1));
    if (hi < 0 || lo < 0) throw invalid(line, `${what} is not hexadecimal`);
    out[i] = (hi << 4) | lo;
  }
  return out;
}

function hexNibble(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** 32 bytes → 64 lowercase hex digits. */
export function formatHexKey(key: Uint8Array | null): string {
  if (key === null) return '0'.repeat(UAPI_KEY_LEN * 2);
  if (key.length !== UAPI_KEY_LEN) throw new TypeError(`a key is ${UAPI_KEY_LEN} bytes, got ${key.length}`);
  let s = '';
  for (let i = 0; i < key.length; i++) s += HEX_DIGITS[key[i] >> 4] + HEX_DIGITS[key[i] & 0xf];
  return s;
}

/** Unsigned decimal of at most `bits` bits, like Go's strconv.ParseUint(s, 10, bits). */
export function parseUnsigned(text: string, bits: 16 | 32, line: number, what: string): number {
  if (!/^[0-9]+$/.test(text)) throw invalid(line, `${what} is not an unsigned decimal number: ${JSON.stringify(text)}`);
  const max = bits === 16 ? 0xffff : 0xffffffff;
  // Strip leading zeros before the length check so "00051820" is accepted as Go does.
  const digits = text.replace(/^0+(?=.)/, '');
  if (digits.length > 10 || Number(digits) > max) throw invalid(line, `${what} ${text} exceeds ${max}`);
  return Number(digits);
}

/** A boolean key's value: only `true` exists. */
export function parseTrue(text: string, line: number, key: string): void {
  if (text !== 'true') throw invalid(line, `${key} accepts only "true", got ${JSON.stringify(text)}`);
}

/**
 * `a.b.c.d:port` or `[v6]:port` (optionally `[v6%zone]:port`), like Go's netip.ParseAddrPort:
 * literal addresses only (no host names), IPv6 always bracketed, port 0..65535 decimal.
 */
export function parseEndpoint(text: string, line = 0): UapiEndpoint {
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':')
      throw invalid(line, `endpoint ${JSON.stringify(text)} must be [IPv6]:port`);
    host = text.slice(1, close);
    portText = text.slice(close + 2);
    const pct = host.indexOf('%');
    const addrPart = pct >= 0 ? host.slice(0, pct) : host;
    if (pct >= 0 && pct === host.length - 1) throw invalid(line, `endpoint ${JSON.stringify(text)} has an empty zone`);
    if (!addrPart.includes(':')) throw invalid(line, `endpoint ${JSON.stringify(text)}: brackets are only for IPv6`);
    host = canonicalAddress(addrPart, line, text) + (pct >= 0 ? host.slice(pct) : '');
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) throw invalid(line, `endpoint ${JSON.stringify(text)} has no port`);
    host = text.slice(0, colon);
    if (host.includes(':'))
      throw invalid(line, `endpoint ${JSON.stringify(text)}: an IPv6 endpoint needs brackets, e.g. [::1]:51820`);
    host = canonicalAddress(host, line, text);
    portText = text.slice(colon + 1);
  }
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 0xffff)
    throw invalid(line, `endpoint ${JSON.stringify(text)} has a bad port`);
  return { address: host, port: Number(portText) };
}

function canonicalAddress(text: string, line: number, whole: string): string {
  try {
    return formatAddress(parseAddress(text));
  } catch (e) {
    if (e instanceof AddressParseError) throw invalid(line, `endpoint ${JSON.stringify(whole)}: ${e.reason}`);
    throw e;
  }
}

/** `[v6]:port` for IPv6, `a.b.c.d:port` for IPv4. */
export function formatEndpoint(ep: UapiEndpoint): string {
  return ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`;
}

/** An `allowed_ip` value: a prefix, host bits masked off. */
export function parseAllowedIp(text: string, line: number): Prefix {
  try {
    // Not strict: like netip.ParsePrefix + Insert, host bits are accepted and masked off.
    return parsePrefix(text, false);
  } catch (e) {
    if (e instanceof AddressParseError) throw invalid(line, `allowed_ip ${JSON.stringify(text)}: ${e.reason}`);
    throw e;
  }
}

/** Folds an operation list into a per-peer plan (see UapiSetPlan for the exact semantics). */
export function planSet(ops: readonly UapiOperation[]): UapiSetPlan {
  let privateKey: Uint8Array | undefined;
  let listenPort: number | undefined;
  let fwmark: number | undefined;
  let replacePeers = false;
  const peers: UapiPeerPlan[] = [];
  let cur: {
    publicKey: Uint8Array;
    updateOnly: boolean;
    remove: boolean;
    presharedKey?: Uint8Array;
    endpoint?: UapiEndpoint;
    persistentKeepaliveInterval?: number;
    replaceAllowedIps: boolean;
    allowedIps: Prefix[];
  } | null = null;
  for (const o of ops) {
    if (cur === null) {
      switch (o.op) {
        case 'private_key':
          privateKey = o.key;
          continue;
        case 'listen_port':
          listenPort = o.port;
          continue;
        case 'fwmark':
          fwmark = o.mark;
          continue;
        case 'replace_peers':
          replacePeers = true;
          continue;
        case 'public_key':
          break;
        default:
          throw new TypeError(`operation ${o.op} before any public_key`);
      }
    }
    switch (o.op) {
      case 'public_key':
        cur = { publicKey: o.key, updateOnly: false, remove: false, replaceAllowedIps: false, allowedIps: [] };
        peers.push(cur);
        break;
      case 'private_key':
      case 'listen_port':
      case 'fwmark':
      case 'replace_peers':
        throw new TypeError(`device operation ${o.op} after a public_key`);
      case 'update_only':
        cur!.updateOnly = true;
        break;
      case 'remove':
        cur!.remove = true;
        break;
      case 'preshared_key':
        cur!.presharedKey = o.key;
        break;
      case 'endpoint':
        cur!.endpoint = o.endpoint;
        break;
      case 'persistent_keepalive_interval':
        cur!.persistentKeepaliveInterval = o.seconds;
        break;
      case 'replace_allowed_ips':
        cur!.replaceAllowedIps = true;
        cur!.allowedIps.length = 0;
        break;
      case 'allowed_ip':
        cur!.allowedIps.push(o.prefix);
        break;
      case 'protocol_version':
        break;
    }
  }
  // Once removed, nothing else in the section matters (wireguard-go turns the peer into a dummy).
  const folded = peers.map((p) =>
    p.remove
      ? { publicKey: p.publicKey, updateOnly: p.updateOnly, remove: true, replaceAllowedIps: false, allowedIps: [] }
      : p,
  );
  return { privateKey, listenPort, fwmark, replacePeers, peers: folded };
}
