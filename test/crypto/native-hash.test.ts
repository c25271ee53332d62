/**
 * The native BLAKE2s/HMAC/KDF addon (native/weft_crypto.c via src/crypto/native-hash.ts) against
 * noble and kdf.ts's definition on noble's HMAC. RFC 7693 and the wireguard-go KDF vectors run
 * through it as the 'openssl' backend in vectors.test.ts and kdf.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { kdf1, kdf2, kdf3 } from '../../src/crypto/kdf.js';
import { loadNativeHash, type NativeHash } from '../../src/crypto/native-hash.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { createPureBackend, nobleHash, nobleHmac, nobleMac } from '../../src/crypto/pure.js';
import { seeded } from './helpers.js';
import { toHex } from '../util/hex.js';

function addon(): NativeHash {
  const n = loadNativeHash();
  // Built by `npm ci` (scripts/setup.sh); a missing addon is a failure, not a skip.
  if (typeof n === 'string') throw new Error(`${n} (needs a C compiler: apt-get install build-essential)`);
  return n;
}

describe('native BLAKE2s addon', () => {
  const rnd = seeded(1307);
  const pure = createPureBackend();

  it('is loaded, and the openssl backend uses its one-call KDF', () => {
    addon();
    expect(createOpensslBackend().kdf).toBeTypeOf('function');
    expect(createOpensslBackend({ nativeHash: false }).kdf).toBeUndefined();
  });

  it('hash, mac and hmac agree with noble for random inputs and key lengths', () => {
    const n = addon();
    const a = new Uint8Array(32);
    const b = new Uint8Array(32);
    for (const len of [0, 1, 31, 32, 63, 64, 65, 128, 129, 148, 300]) {
      const msg = rnd(len);
      const cut = len >> 1;
      n.hash(a, msg.subarray(0, cut), msg.subarray(cut));
      nobleHash(b, [msg]);
      expect(toHex(a)).toBe(toHex(b));
      for (const kl of [1, 16, 32]) {
        const key = rnd(kl);
        n.mac(a, key, msg);
        nobleMac(b, key, [msg]);
        expect(toHex(a.subarray(0, 16))).toBe(toHex(b.subarray(0, 16)));
      }
      for (const kl of [0, 1, 32, 64, 65, 100]) {
        const key = rnd(kl);
        n.hmac(a, key, msg.subarray(0, cut), msg.subarray(cut));
        nobleHmac(b, key, [msg]);
        expect(toHex(a)).toBe(toHex(b));
      }
    }
  });

  it('kdf1/2/3 equal the HKDF definition computed on the pure backend, including aliased outputs', () => {
    const ossl = createOpensslBackend();
    for (let i = 0; i < 10; i++) {
      const key = rnd(32);
      const input = rnd(i * 7);
      const e = [new Uint8Array(32), new Uint8Array(32), new Uint8Array(32)];
      const g = [new Uint8Array(32), new Uint8Array(32), new Uint8Array(32)];
      kdf3(pure, e[0], e[1], e[2], key, input);
      kdf3(ossl, g[0], g[1], g[2], key, input);
      expect(g.map((b) => toHex(b))).toEqual(e.map((b) => toHex(b)));
      kdf2(ossl, g[0], g[1], key, input);
      expect(toHex(g[0]) + toHex(g[1])).toBe(toHex(e[0]) + toHex(e[1]));
      // C := KDF1(C, x): the output is the key array itself.
      const ck = key.slice();
      kdf1(ossl, ck, ck, input);
      expect(toHex(ck)).toBe(toHex(e[0]));
    }
  });

  it('outputs may alias inputs (H := HASH(H ‖ x), out = key for hmac)', () => {
    const n = addon();
    const h = rnd(32);
    const x = rnd(32);
    const want = new Uint8Array(32);
    nobleHash(want, [h, x]);
    n.hash(h, h, x);
    expect(toHex(h)).toBe(toHex(want));
    const k = rnd(32);
    nobleHmac(want, k, [x]);
    n.hmac(k, k, x);
    expect(toHex(k)).toBe(toHex(want));
  });

  it('throws on misuse: non-Uint8Array arguments, short outputs, bad MAC key lengths', () => {
    const n = addon();
    const x = new Uint8Array(8);
    expect(() => n.hash([] as unknown as Uint8Array, x)).toThrow(TypeError);
    expect(() => n.hash(new Uint8Array(31), x)).toThrow(RangeError);
    expect(() => n.hmac(new Uint8Array(32), 'key' as unknown as Uint8Array, x)).toThrow(TypeError);
    expect(() => n.mac(new Uint8Array(16), new Uint8Array(0), x)).toThrow(RangeError);
    expect(() => n.mac(new Uint8Array(16), new Uint8Array(33), x)).toThrow(RangeError);
    expect(() => n.mac(new Uint8Array(15), new Uint8Array(32), x)).toThrow(RangeError);
    expect(() => n.kdf(new Uint8Array(32), new Uint8Array(16), null, x, x)).toThrow(RangeError);
    expect(() => n.hash(new Uint8Array(32), new Uint16Array(4) as unknown as Uint8Array)).toThrow(TypeError);
  });
});
