/**
 * Property (fast-check): the longest-prefix-match structures answer like a linear scan over the
 * prefixes they hold, after any sequence of inserts (including replacements and host bits set),
 * removes and removeValue calls:
 * - PrefixTable (the multibit trie) for IPv4 and IPv6: lookup, exact get, size, entries();
 * - PrefixMatcher (both families; a linear scan up to SMALL_V4_SET IPv4 prefixes, the trie
 *   beyond), so sequences cross that threshold in both directions.
 * Addresses are drawn from a few values per byte so that prefixes nest and collide often.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import type { IpFamily, Prefix } from '../../src/packet/addr.js';
import { PrefixMatcher, SMALL_V4_SET } from '../../src/route/prefix-matcher.js';
import { PrefixTable } from '../../src/route/table.js';

const byte = fc.oneof(fc.constantFrom(0, 1, 0x80, 0xc0, 0xff), fc.integer({ min: 0, max: 255 }));
const addr = (bytes: number): fc.Arbitrary<Uint8Array> =>
  fc.array(byte, { minLength: bytes, maxLength: bytes }).map((a) => Uint8Array.from(a));

function bitsOf(a: Uint8Array, i: number): number {
  return (a[i >> 3]! >> (7 - (i & 7))) & 1;
}

function contains(net: Uint8Array, len: number, a: Uint8Array, aOff = 0): boolean {
  for (let i = 0; i < len; i++) if (bitsOf(net, i) !== ((a[aOff + (i >> 3)]! >> (7 - (i & 7))) & 1)) return false;
  return true;
}

function keyOf(a: Uint8Array, len: number): string {
  let s = `${len}/`;
  for (let i = 0; i < len; i++) s += bitsOf(a, i);
  return s;
}

/** The specification: a list of (prefix, value), replaced by key, scanned linearly. */
class LinearModel<T> {
  readonly entries = new Map<string, { family: IpFamily; addr: Uint8Array; len: number; value: T }>();
  insert(family: IpFamily, a: Uint8Array, len: number, value: T): void {
    this.entries.set(`${family}:${keyOf(a, len)}`, { family, addr: a, len, value });
  }
  remove(family: IpFamily, a: Uint8Array, len: number): boolean {
    return this.entries.delete(`${family}:${keyOf(a, len)}`);
  }
  removeValue(value: T): number {
    let n = 0;
    for (const [k, e] of this.entries)
      if (e.value === value) {
        this.entries.delete(k);
        n++;
      }
    return n;
  }
  get(family: IpFamily, a: Uint8Array, len: number): T | undefined {
    return this.entries.get(`${family}:${keyOf(a, len)}`)?.value;
  }
  lookup(family: IpFamily, buf: Uint8Array, off: number): T | undefined {
    let best: { len: number; value: T } | undefined;
    for (const e of this.entries.values()) {
      if (e.family !== family || !contains(e.addr, e.len, buf, off)) continue;
      if (best === undefined || e.len > best.len) best = e;
    }
    return best?.value;
  }
  count(family?: IpFamily): number {
    let n = 0;
    for (const e of this.entries.values()) if (family === undefined || e.family === family) n++;
    return n;
  }
}

type Op =
  | { op: 'insert'; family: IpFamily; addr: Uint8Array; len: number; value: number }
  | { op: 'remove'; family: IpFamily; addr: Uint8Array; len: number }
  | { op: 'removeValue'; value: number };

function opArb(families: readonly IpFamily[]): fc.Arbitrary<Op> {
  const keyed = fc.constantFrom(...families).chain((family) => {
    const bits = family === 4 ? 32 : 128;
    return fc.record({
      family: fc.constant(family),
      addr: addr(bits / 8),
      // Short, stride-boundary, odd and full lengths all show up.
      len: fc.oneof(fc.integer({ min: 0, max: bits }), fc.constantFrom(0, 1, 4, 8, bits - 1, bits)),
    });
  });
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .tuple(keyed, fc.integer({ min: 1, max: 6 }))
        .map(([k, value]): Op => ({ op: 'insert', ...k, value })),
    },
    { weight: 3, arbitrary: keyed.map((k): Op => ({ op: 'remove', ...k })) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 6 }).map((value): Op => ({ op: 'removeValue', value })) },
  );
}

/** Probes: every address used by an op, each with its last bits flipped, plus random ones. */
function probesOf(ops: readonly Op[], extra: readonly Uint8Array[]): Uint8Array[] {
  const out: Uint8Array[] = [...extra];
  for (const o of ops) {
    if (o.op === 'removeValue') continue;
    out.push(o.addr);
    const flipped = new Uint8Array(o.addr);
    flipped[flipped.length - 1]! ^= 0x01;
    out.push(flipped);
    if (o.len > 0 && o.len <= o.addr.length * 8) {
      const beside = new Uint8Array(o.addr); // the first address outside the prefix on its last bit
      beside[(o.len - 1) >> 3]! ^= 0x80 >> ((o.len - 1) & 7);
      out.push(beside);
    }
  }
  return out;
}

for (const family of [4, 6] as const) {
  const bytes = family === 4 ? 4 : 16;
  test.prop([fc.array(opArb([family]), { minLength: 1, maxLength: 60 }), fc.array(addr(bytes), { maxLength: 10 })], {
    numRuns: 200,
  })(
    `PrefixTable IPv${family}: lookup, get, size and entries() equal a linear scan after any inserts/removes`,
    (ops, extra) => {
      const t = new PrefixTable<number>(family);
      const m = new LinearModel<number>();
      const probes = probesOf(ops, extra);
      // A probe placed at an offset inside a larger buffer, as packets are.
      const buf = new Uint8Array(bytes + 3);
      for (const o of ops) {
        if (o.op === 'insert') {
          t.insert(o.addr, o.len, o.value);
          m.insert(family, o.addr, o.len, o.value);
        } else if (o.op === 'remove') expect(t.remove(o.addr, o.len)).toBe(m.remove(family, o.addr, o.len));
        else expect(t.removeValue(o.value)).toBe(m.removeValue(o.value));
        expect(t.size).toBe(m.count());
        for (const p of probes) {
          buf.set(p, 3);
          expect(t.lookup(buf, 3)).toBe(m.lookup(family, buf, 3));
        }
        if (o.op !== 'removeValue') expect(t.get(o.addr, o.len)).toBe(m.get(family, o.addr, o.len));
      }
      const listed = [...t.entries()].map((e) => `${keyOf(e.addr, e.prefixLen)}=${e.value}`).sort();
      const want = [...m.entries.values()].map((e) => `${keyOf(e.addr, e.len)}=${e.value}`).sort();
      expect(listed).toEqual(want);
    },
  );
}

test.prop(
  [
    fc.array(opArb([4, 4, 4, 6]), { minLength: 1, maxLength: 40 }),
    fc.array(fc.oneof(addr(4), addr(16)), { maxLength: 10 }),
  ],
  { numRuns: 200 },
)(
  `PrefixMatcher (both families, across the ${SMALL_V4_SET}-prefix linear-scan threshold) equals a linear scan`,
  (ops, extra) => {
    const pm = new PrefixMatcher<number>();
    const m = new LinearModel<number>();
    const probes = probesOf(ops, extra);
    for (const o of ops) {
      if (o.op === 'insert') {
        const p: Prefix = { family: o.family, addr: o.addr, prefixLen: o.len };
        pm.insert(p, o.value);
        m.insert(o.family, o.addr, o.len, o.value);
      } else if (o.op === 'remove') {
        expect(pm.remove({ family: o.family, addr: o.addr, prefixLen: o.len })).toBe(m.remove(o.family, o.addr, o.len));
      } else {
        expect(pm.removeValue(o.value)).toBe(m.removeValue(o.value));
      }
      expect(pm.size).toBe(m.count());
      for (const p of probes) {
        const fam: IpFamily = p.length === 4 ? 4 : 6;
        expect(pm.lookup(p, 0, fam)).toBe(m.lookup(fam, p, 0));
      }
    }
  },
);
