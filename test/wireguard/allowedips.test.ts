import { describe, expect, it } from 'vitest';
import { AllowedIps } from '../../src/wireguard/allowedips.js';
import { formatPrefix, makePrefix, parsePrefix, type Prefix } from '../../src/packet/addr.js';
import { Prng } from '../util/prng.js';

/** Naive reference: a list of (prefix, peer), longest containing prefix wins, last insert owns. */
class Naive<P> {
  entries: { prefix: Prefix; peer: P }[] = [];
  insert(prefix: Prefix, peer: P): void {
    this.entries = this.entries.filter(
      (e) => !(e.prefix.prefixLen === prefix.prefixLen && same(e.prefix.addr, prefix.addr)),
    );
    this.entries.push({ prefix, peer });
  }
  removeByPeer(peer: P): void {
    this.entries = this.entries.filter((e) => e.peer !== peer);
  }
  lookup(addr: Uint8Array): P | undefined {
    let best: { prefix: Prefix; peer: P } | undefined;
    for (const e of this.entries) {
      if (e.prefix.addr.length !== addr.length) continue;
      if (!contains(e.prefix, addr)) continue;
      if (best === undefined || e.prefix.prefixLen > best.prefix.prefixLen) best = e;
    }
    return best?.peer;
  }
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function contains(p: Prefix, addr: Uint8Array): boolean {
  let bits = p.prefixLen;
  for (let i = 0; i < addr.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((addr[i] & mask) !== p.addr[i]) return false;
  }
  return true;
}

/** An IPv4 (or IPv6) packet header with `addr` at both source and destination offsets. */
function packetWith(addr: Uint8Array): { buf: Uint8Array; off: number } {
  const off = 3;
  const buf = new Uint8Array(off + 40);
  if (addr.length === 4) {
    buf.set(addr, off + 12);
    buf.set(addr, off + 16);
  } else {
    buf.set(addr, off + 8);
    buf.set(addr, off + 24);
  }
  return { buf, off };
}

describe('AllowedIps (cryptokey routing)', () => {
  it('matches a naive longest-prefix reference over random prefixes, IPv4 and IPv6 (fixed seed)', () => {
    for (const family of [4, 6] as const) {
      const rng = new Prng(family === 4 ? 404 : 606);
      const peers = ['p0', 'p1', 'p2', 'p3', 'p4'];
      const t = new AllowedIps<string>();
      const ref = new Naive<string>();
      const width = family === 4 ? 4 : 16;
      // Clustered addresses so that prefixes overlap a lot.
      const base = rng.bytes(width);
      const randomAddr = () => {
        const a = Uint8Array.from(base);
        const k = rng.int(0, width);
        for (let i = width - k; i < width; i++) a[i] = rng.nextU32() & 0xff;
        if (rng.next() < 0.1) a[0] ^= 0x80;
        return a;
      };
      for (let round = 0; round < 600; round++) {
        const r = rng.next();
        if (r < 0.7) {
          const len = rng.next() < 0.05 ? 0 : rng.int(0, width * 8);
          const p = makePrefix(randomAddr(), len);
          const peer = peers[rng.int(0, peers.length - 1)];
          t.insert(p, peer);
          ref.insert(p, peer);
        } else if (r < 0.75) {
          const peer = peers[rng.int(0, peers.length - 1)];
          t.removeByPeer(peer);
          ref.removeByPeer(peer);
        }
        for (let q = 0; q < 20; q++) {
          const addr = randomAddr();
          const { buf, off } = packetWith(addr);
          const want = ref.lookup(addr);
          const gotDst = family === 4 ? t.lookupV4Destination(buf, off) : t.lookupV6Destination(buf, off);
          const gotSrc = family === 4 ? t.lookupV4Source(buf, off) : t.lookupV6Source(buf, off);
          expect(gotDst).toBe(want);
          expect(gotSrc).toBe(want);
        }
      }
      // The per-peer listing equals the reference's entries.
      for (const peer of peers) {
        const mine = t.prefixesOf(peer).map(formatPrefix).sort();
        const theirs = ref.entries
          .filter((e) => e.peer === peer)
          .map((e) => formatPrefix(e.prefix))
          .sort();
        expect(mine).toEqual(theirs);
      }
    }
  });

  it('a prefix belongs to one peer: inserting it for another moves it; remove() needs the owner', () => {
    const t = new AllowedIps<string>();
    const p = parsePrefix('10.0.0.0/8');
    t.insert(p, 'a');
    t.insert(p, 'b');
    expect(t.owner(p)).toBe('b');
    expect(t.prefixesOf('a')).toEqual([]);
    expect(t.remove(p, 'a')).toBe(false);
    expect(t.remove(p, 'b')).toBe(true);
    expect(t.size).toBe(0);
  });

  it('IPv4 and IPv6 tables are separate; /0 routes everything of its family', () => {
    const t = new AllowedIps<string>();
    t.insert(parsePrefix('0.0.0.0/0'), 'v4all');
    t.insert(parsePrefix('::/0'), 'v6all');
    t.insert(parsePrefix('192.168.1.1/32'), 'host');
    const v4 = packetWith(Uint8Array.of(192, 168, 1, 1));
    expect(t.lookupV4Destination(v4.buf, v4.off)).toBe('host');
    const v4b = packetWith(Uint8Array.of(8, 8, 8, 8));
    expect(t.lookupV4Destination(v4b.buf, v4b.off)).toBe('v4all');
    const v6 = packetWith(parsePrefix('2001:db8::1/128').addr);
    expect(t.lookupV6Destination(v6.buf, v6.off)).toBe('v6all');
    expect(t.prefixesOf('v4all').map(formatPrefix)).toEqual(['0.0.0.0/0']);
  });
});
