import { describe, expect, it } from 'vitest';
import { PrefixTable } from '../../src/route/table.js';
import { parseAddress } from '../../src/packet/addr.js';
import { Prng } from '../util/prng.js';

/** Naive reference: a list scanned linearly for the longest matching prefix. */
class NaiveTable<T> {
  private list: { addr: Uint8Array; len: number; value: T }[] = [];

  insert(addr: Uint8Array, len: number, value: T): void {
    const masked = mask(addr, len);
    const hit = this.list.find((e) => e.len === len && eq(e.addr, masked));
    if (hit) hit.value = value;
    else this.list.push({ addr: masked, len, value });
  }

  remove(addr: Uint8Array, len: number): boolean {
    const masked = mask(addr, len);
    const i = this.list.findIndex((e) => e.len === len && eq(e.addr, masked));
    if (i < 0) return false;
    this.list.splice(i, 1);
    return true;
  }

  get(addr: Uint8Array, len: number): T | undefined {
    const masked = mask(addr, len);
    return this.list.find((e) => e.len === len && eq(e.addr, masked))?.value;
  }

  lookup(addr: Uint8Array): T | undefined {
    let best: { len: number; value: T } | undefined;
    for (const e of this.list) {
      if ((best === undefined || e.len > best.len) && eq(mask(addr, e.len), e.addr)) best = e;
    }
    return best?.value;
  }

  get size(): number {
    return this.list.length;
  }
}

function mask(a: Uint8Array, len: number): Uint8Array {
  const out = new Uint8Array(a);
  for (let i = 0; i < out.length; i++) {
    const b = len - i * 8;
    if (b >= 8) continue;
    out[i] = b <= 0 ? 0 : out[i]! & (0xff00 >>> b);
  }
  return out;
}

function eq(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

const ip = parseAddress;

describe('PrefixTable basics', () => {
  it('longest prefix wins, /0 is the default, host bits are ignored', () => {
    const t = new PrefixTable<string>(4);
    t.insert(ip('0.0.0.0'), 0, 'default');
    t.insert(ip('10.0.0.0'), 8, 'ten');
    t.insert(ip('10.1.255.255'), 16, 'ten-one'); // host bits set on purpose
    t.insert(ip('10.1.2.3'), 32, 'host');
    expect(t.size).toBe(4);
    expect(t.lookup(ip('10.1.2.3'), 0)).toBe('host');
    expect(t.lookup(ip('10.1.2.4'), 0)).toBe('ten-one');
    expect(t.lookup(ip('10.2.0.1'), 0)).toBe('ten');
    expect(t.lookup(ip('192.168.0.1'), 0)).toBe('default');
    expect(t.get(ip('10.1.0.0'), 16)).toBe('ten-one');
    expect(t.get(ip('10.1.0.0'), 17)).toBeUndefined();
  });

  it('reads the address at an offset inside a larger buffer', () => {
    const t = new PrefixTable<number>(4);
    t.insert(ip('172.16.0.0'), 12, 1);
    const pkt = new Uint8Array(40);
    pkt.set(ip('172.31.9.9'), 16);
    expect(t.lookup(pkt, 16)).toBe(1);
    pkt.set(ip('172.32.0.1'), 16);
    expect(t.lookup(pkt, 16)).toBeUndefined();
  });

  it('replace keeps size; remove is exact; removeValue removes every match', () => {
    const t = new PrefixTable<string>(6);
    t.insert(ip('fd00::'), 8, 'a');
    t.insert(ip('fd00::'), 8, 'b');
    expect(t.size).toBe(1);
    expect(t.lookup(ip('fd12::1'), 0)).toBe('b');
    expect(t.remove(ip('fd00::'), 9)).toBe(false);
    t.insert(ip('fd00:1::'), 32, 'p');
    t.insert(ip('fd00:2::'), 32, 'p');
    t.insert(ip('::'), 0, 'p');
    expect(t.removeValue('p')).toBe(3);
    expect(t.size).toBe(1);
    expect(t.lookup(ip('fd00:1::5'), 0)).toBe('b');
    expect(t.lookup(ip('2001:db8::1'), 0)).toBeUndefined();
    expect(t.remove(ip('fd00::'), 8)).toBe(true);
    expect(t.size).toBe(0);
    expect(t.nodeUsage).toBe(1); // only the root remains
  });

  it('entries lists every prefix with host bits zeroed', () => {
    const t = new PrefixTable<number>(4);
    t.insert(ip('10.9.9.9'), 8, 1);
    t.insert(ip('192.168.1.1'), 32, 2);
    const got = [...t.entries()].map((e) => `${e.addr.join('.')}/${e.prefixLen}=${e.value}`).sort();
    expect(got).toEqual(['10.0.0.0/8=1', '192.168.1.1/32=2']);
  });

  it('rejects addresses of the wrong family and bad lengths (API misuse throws)', () => {
    const t = new PrefixTable<number>(4);
    expect(() => t.insert(new Uint8Array(16), 8, 1)).toThrow(TypeError);
    expect(() => t.insert(new Uint8Array(4), 33, 1)).toThrow(RangeError);
    expect(() => t.get(new Uint8Array(4), -1)).toThrow(RangeError);
    expect(() => new PrefixTable<number>(5 as 4)).toThrow(TypeError);
  });

  it('clear empties the table', () => {
    const t = new PrefixTable<number>(4);
    t.insert(ip('1.2.3.0'), 24, 1);
    t.clear();
    expect(t.size).toBe(0);
    expect(t.lookup(ip('1.2.3.4'), 0)).toBeUndefined();
    t.insert(ip('1.2.3.0'), 24, 2);
    expect(t.lookup(ip('1.2.3.4'), 0)).toBe(2);
  });
});

/**
 * Random prefixes clustered under a few roots so that they overlap heavily (random prefixes over
 * the whole space would almost never nest), plus random probe addresses drawn from the same
 * clusters and from anywhere.
 */
function randomized(family: 4 | 6, seed: number, ops: number): void {
  const rng = new Prng(seed);
  const bytes = family === 4 ? 4 : 16;
  const bits = bytes * 8;
  const roots = Array.from({ length: 6 }, () => rng.bytes(bytes));
  const table = new PrefixTable<number>(family);
  const naive = new NaiveTable<number>();
  const inserted: [Uint8Array, number][] = [];
  const randomAddr = (): Uint8Array => {
    const a = rng.chance(0.8) ? new Uint8Array(rng.pick(roots)) : rng.bytes(bytes);
    // Flip some low bits so addresses share long prefixes with the root.
    const flipFrom = rng.int(0, bits);
    for (let b = flipFrom; b < bits; b++) if (rng.chance(0.5)) a[b >>> 3]! ^= 0x80 >>> (b & 7);
    return a;
  };
  const randomLen = (): number => {
    const r = rng.next();
    if (r < 0.03) return 0;
    if (r < 0.1) return bits;
    return rng.int(1, bits);
  };
  for (let i = 0; i < ops; i++) {
    const op = rng.next();
    if (op < 0.6 || inserted.length === 0) {
      const a = randomAddr();
      const len = randomLen();
      table.insert(a, len, i);
      naive.insert(a, len, i);
      inserted.push([a, len]);
    } else if (op < 0.85) {
      const [a, len] = rng.pick(inserted);
      expect(table.remove(a, len)).toBe(naive.remove(a, len));
    } else {
      // remove something that likely does not exist
      const a = randomAddr();
      const len = randomLen();
      expect(table.remove(a, len)).toBe(naive.remove(a, len));
    }
    expect(table.size).toBe(naive.size);
    for (let q = 0; q < 8; q++) {
      const probe = randomAddr();
      expect(table.lookup(probe, 0)).toBe(naive.lookup(probe));
    }
    if (i % 50 === 0) {
      const [a, len] = rng.pick(inserted);
      expect(table.get(a, len)).toBe(naive.get(a, len));
    }
  }
  // Every stored prefix's own network address and last address resolve identically.
  for (const e of table.entries()) {
    expect(naive.get(e.addr, e.prefixLen)).toBe(e.value);
    expect(table.lookup(e.addr, 0)).toBe(naive.lookup(e.addr));
  }
  // Draining everything frees every node but the root.
  for (const e of [...table.entries()]) expect(table.remove(e.addr, e.prefixLen)).toBe(true);
  expect(table.size).toBe(0);
  expect(table.nodeUsage).toBe(1);
}

describe('PrefixTable matches a linear-scan reference (fixed seeds)', () => {
  it('IPv4', () => randomized(4, 0xc0ffee, 3000));
  it('IPv4, second seed', () => randomized(4, 7, 3000));
  it('IPv6', () => randomized(6, 0xbeef, 3000));
  it('IPv6, second seed', () => randomized(6, 99, 3000));
});
