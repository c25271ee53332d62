/**
 * The router's address sets built from configuration: whole-address matchers (the gateway's own
 * addresses, the in-tunnel ones) and the source address of generated ICMP errors. Apart from
 * the router because it is parsing and table building, done on a configuration change; per
 * packet the router only looks the matchers up.
 */
import { parseAddress } from '../packet/addr.js';
import { PrefixMatcher } from '../route/prefix-matcher.js';

/** A matcher of whole addresses (/32, /128), each to its value. Throws on an address that does not parse. */
export function hostMatcher<T>(entries: Iterable<readonly [address: string, value: T]>): PrefixMatcher<T> {
  const m = new PrefixMatcher<T>();
  for (const [a, value] of entries) {
    const b = parseAddress(a);
    m.insert({ family: b.length === 4 ? 4 : 6, addr: b, prefixLen: b.length * 8 }, value);
  }
  return m;
}

/** The first address of each family in `addrs` (null: none of that family). */
export function firstOfEachFamily(addrs: readonly string[]): { v4: Uint8Array | null; v6: Uint8Array | null } {
  let v4: Uint8Array | null = null;
  let v6: Uint8Array | null = null;
  for (const a of addrs) {
    const b = parseAddress(a);
    if (b.length === 4) v4 ??= b;
    else v6 ??= b;
  }
  return { v4, v6 };
}
