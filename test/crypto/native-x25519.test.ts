/**
 * The addon's own X25519 (native/weft_x25519.c via src/crypto/native-x25519.ts): RFC 7748's
 * vectors, low-order points, and agreement with node:crypto (OpenSSL) on 10,000 random scalars
 * and u-coordinates for both the ladder and the fixed-base table. The same vectors also run
 * through the 'openssl' backend (which uses it) in vectors.test.ts, and through its EVP
 * fallback as 'openssl-evpx25519'.
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import { loadNativeHash } from '../../src/crypto/native-hash.js';
import { loadNativeX25519, type NativeX25519 } from '../../src/crypto/native-x25519.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { hex, seeded } from './helpers.js';
import { toHex } from '../util/hex.js';

function addon(): NativeX25519 {
  const x = loadNativeX25519();
  // Built by `npm ci` (scripts/setup.sh); a missing addon is a failure, not a skip.
  if (typeof x === 'string') throw new Error(`${x} (needs a C compiler: apt-get install build-essential)`);
  return x;
}

describe('native X25519', () => {
  it('is what the openssl backend uses for dh and publicKey', () => {
    const x = addon();
    const b = createOpensslBackend();
    const k = seeded(5)(32);
    const u = seeded(6)(32);
    const viaBackend = new Uint8Array(32);
    const direct = new Uint8Array(32);
    b.dh(viaBackend, k, u);
    x.x25519(direct, k, u);
    expect(toHex(viaBackend)).toBe(toHex(direct));
  });

  it('RFC 7748 §5.2 vectors', () => {
    const x = addon();
    const out = new Uint8Array(32);
    expect(
      x.x25519(
        out,
        hex('a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4'),
        hex('e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c'),
      ),
    ).toBe(true);
    expect(toHex(out)).toBe('c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552');
    expect(
      x.x25519(
        out,
        hex('4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d'),
        hex('e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493'),
      ),
    ).toBe(true);
    expect(toHex(out)).toBe('95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957');
  });

  it("DH runs OpenSSL's ossl_x25519 when this Node exports it, and says so", () => {
    const x = addon();
    // Node's official x86-64/arm64 binaries export it; a build without it keeps the C ladder.
    expect(x.osslReason).toBeNull();
    expect(x.impl).toContain('ossl_x25519');
    expect(createOpensslBackend().x25519Impl).toBe(x.impl);
    expect(createOpensslBackend({ nativeX25519: 'ladder' }).x25519Impl).toContain('ladder');
  });

  it.each(['x25519', 'x25519Ladder'] as const)('RFC 7748 §5.2 iterated vectors: 1 and 1,000 iterations (%s)', (fn) => {
    const x = addon();
    const dh = x[fn];
    let k: Uint8Array = hex('0900000000000000000000000000000000000000000000000000000000000000');
    let u: Uint8Array = k.slice();
    const out = new Uint8Array(32);
    for (let i = 1; i <= 1000; i++) {
      dh(out, k, u);
      u = k;
      k = out.slice();
      if (i === 1) expect(toHex(k)).toBe('422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079');
    }
    expect(toHex(k)).toBe('684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51');
  });

  it('RFC 7748 §6.1: public keys (fixed base and ladder at u = 9) and the shared secret', () => {
    const x = addon();
    const a = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
    const b = hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb');
    const nine = new Uint8Array(32);
    nine[0] = 9;
    const out = new Uint8Array(32);
    x.x25519Base(out, a);
    expect(toHex(out)).toBe('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
    x.x25519(out, a, nine);
    expect(toHex(out)).toBe('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
    x.x25519Base(out, b);
    expect(toHex(out)).toBe('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
    const k1 = new Uint8Array(32);
    const k2 = new Uint8Array(32);
    expect(x.x25519(k1, a, hex('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f'))).toBe(true);
    expect(x.x25519(k2, b, hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a'))).toBe(true);
    expect(toHex(k1)).toBe('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
    expect(toHex(k2)).toBe(toHex(k1));
  });

  // u-coordinates of points of order 1, 2, 4 and 8 on the curve or its twist, canonical and
  // non-canonical (>= p, or with the ignored top bit set; checked against a Python transcription
  // of RFC 7748 §5): every one gives an all-zero secret.
  it.each([
    '0000000000000000000000000000000000000000000000000000000000000000',
    '0100000000000000000000000000000000000000000000000000000000000000',
    'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800',
    '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157',
    'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    '0000000000000000000000000000000000000000000000000000000000000080',
    '0100000000000000000000000000000000000000000000000000000000000080',
    'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
    'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880',
    '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f11d7',
  ])('low-order u = %s: false, output zeroed, and the openssl backend refuses it too', (u) => {
    const x = addon();
    const rnd = seeded(77);
    for (let i = 0; i < 4; i++) {
      const out = new Uint8Array(32).fill(0xaa);
      expect(x.x25519(out, rnd(32), hex(u))).toBe(false);
      expect(toHex(out)).toBe('00'.repeat(32));
      out.fill(0xaa);
      expect(x.x25519Ladder(out, rnd(32), hex(u))).toBe(false);
      expect(toHex(out)).toBe('00'.repeat(32));
    }
    const out = new Uint8Array(32).fill(0xaa);
    expect(createOpensslBackend().dh(out, rnd(32), hex(u))).toBe(false);
    expect(toHex(out)).toBe('00'.repeat(32));
  });

  it('10,000 random scalars and u-coordinates equal node:crypto for DH (ossl_x25519 and the C ladder) and the fixed base', () => {
    const x = addon();
    const node = createNodeBackend({ keyCache: false });
    const rnd = seeded(0x25519);
    const a = new Uint8Array(32);
    const b = new Uint8Array(32);
    let diff = 0;
    for (let i = 0; i < 10_000; i++) {
      const k = rnd(32);
      // Every 4th u is a random 32-byte string (mostly twist points, top bit set half the
      // time); the others are public keys, i.e. points on the curve.
      const u = rnd(32);
      if (i % 4 !== 0) node.publicKey(u, rnd(32));
      const okA = x.x25519(a, k, u);
      const okB = node.dh(b, k, u);
      if (okA !== okB || toHex(a) !== toHex(b)) diff++;
      const okL = x.x25519Ladder(a, k, u);
      if (okL !== okB || toHex(a) !== toHex(b)) diff++;
      x.x25519Base(a, k);
      node.publicKey(b, k);
      if (toHex(a) !== toHex(b)) diff++;
    }
    expect(diff).toBe(0);
  });

  it('peer tables (fixed-base DH with a fixed public key): 100 keys x 100 scalars equal node:crypto', () => {
    const mod = loadNativeHash() as unknown as {
      x25519TableSize: number;
      x25519Table(buf: Uint8Array, u: Uint8Array): boolean;
      x25519TableMul(out: Uint8Array, k: Uint8Array, buf: Uint8Array): boolean;
    };
    const node = createNodeBackend({ keyCache: false });
    const rnd = seeded(0x7ab1e);
    const table = new Uint8Array(mod.x25519TableSize);
    const a = new Uint8Array(32);
    const b = new Uint8Array(32);
    let diff = 0;
    for (let i = 0; i < 100; i++) {
      const u = new Uint8Array(32);
      node.publicKey(u, rnd(32));
      if (i % 2 === 1) u[31] |= 0x80; // the ignored top bit
      expect(mod.x25519Table(table, u)).toBe(true);
      for (let j = 0; j < 100; j++) {
        const k = rnd(32);
        if (mod.x25519TableMul(a, k, table) !== node.dh(b, k, u) || toHex(a) !== toHex(b)) diff++;
      }
    }
    expect(diff).toBe(0);
  });

  it('refuses wrong argument types and lengths (API misuse throws)', () => {
    const x = addon();
    const k = new Uint8Array(32);
    expect(() => x.x25519(new Uint8Array(31), k, k)).toThrow(RangeError);
    expect(() => x.x25519(new Uint8Array(32), new Uint8Array(33), k)).toThrow(RangeError);
    expect(() => x.x25519(new Uint8Array(32), k, new Uint8Array(31))).toThrow(RangeError);
    expect(() => x.x25519Base(new Uint8Array(32), new Uint8Array(31))).toThrow(RangeError);
    expect(() => x.x25519Base([] as unknown as Uint8Array, k)).toThrow(TypeError);
  });
});
