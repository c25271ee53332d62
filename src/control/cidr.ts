/**
 * Configuration text helpers of the control plane: canonical CIDR text and "host:port" endpoints.
 *
 * Addresses and prefixes are parsed by src/packet/addr.ts (parseAddress/parsePrefix), the one
 * parser of the project, so the data plane and the configuration accept exactly the same text;
 * its AddressParseError carries a `reason` that the configuration loader puts next to the field
 * path. This module adds only what configuration needs on top: the strict canonical form of a
 * CIDR and endpoint parsing. Everything here runs once per (re)load and allocates freely.
 */
import { AddressParseError, formatAddress, formatPrefix, parseAddress, parsePrefix } from '../packet/addr.js';

/**
 * Canonical text of a prefix ("10.0.0.0/16", "fd00::/64"; IPv6 per RFC 5952). Strict: host bits
 * set are an error (in a configuration nearly always a typo; the message suggests the network),
 * and so is a bare address without "/len". Throws AddressParseError.
 */
export function canonicalCidr(text: string): string {
  return formatPrefix(parsePrefix(text, true));
}

/** A parsed "host:port" / "[v6]:port" endpoint. `host` is an IP literal (no brackets) or a DNS name. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** Bad endpoint text (configuration input). `reason` is the explanation without the offending text. */
export class EndpointParseError extends Error {
  override readonly name = 'EndpointParseError';
  constructor(
    readonly text: string,
    readonly reason: string,
  ) {
    super(`invalid endpoint ${JSON.stringify(text)}: ${reason}`);
  }
}

const DNS_NAME =
  /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** The address of an endpoint's host part; an address error becomes an EndpointParseError. */
function endpointAddress(endpoint: string, host: string): Uint8Array {
  try {
    return parseAddress(host);
  } catch (e) {
    if (e instanceof AddressParseError) throw new EndpointParseError(endpoint, e.reason);
    throw e;
  }
}

/**
 * Parse "host:port" (an IPv6 literal must be in brackets, RFC 3986 §3.2.2). An IPv6 host is
 * returned in RFC 5952 form; a dotted-quad host must be a valid IPv4 address, anything else a DNS
 * name. Throws EndpointParseError.
 */
export function parseEndpoint(text: string): Endpoint {
  if (typeof text !== 'string' || text.length === 0) throw new EndpointParseError(String(text), 'empty endpoint');
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close === -1 || text[close + 1] !== ':') throw new EndpointParseError(text, 'expected "[ipv6]:port"');
    portText = text.slice(close + 2);
    const ip = endpointAddress(text, text.slice(1, close));
    if (ip.length !== 16) throw new EndpointParseError(text, 'brackets are only for IPv6 addresses');
    host = formatAddress(ip);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon === -1) throw new EndpointParseError(text, 'missing ":port"');
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) throw new EndpointParseError(text, 'an IPv6 endpoint must be written "[address]:port"');
    if (/^[0-9.]+$/.test(host)) endpointAddress(text, host);
    else if (!DNS_NAME.test(host))
      throw new EndpointParseError(text, `host ${JSON.stringify(host)} is neither an IP address nor a DNS name`);
  }
  if (!/^[1-9][0-9]{0,4}$/.test(portText) || Number(portText) > 65535) {
    throw new EndpointParseError(text, `port ${JSON.stringify(portText)} is not in 1..65535`);
  }
  return { host, port: Number(portText) };
}

/** "host:port", bracketing IPv6 literals. */
export function formatEndpoint(e: Endpoint): string {
  return e.host.includes(':') ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`;
}
