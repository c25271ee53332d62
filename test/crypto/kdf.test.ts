/**
 * WireGuard KDF (whitepaper §5.4) and the HMAC-BLAKE2s under it.
 * Vectors: WireGuard/wireguard-rs src/wireguard/handshake/noise.rs, test `hkdf` ("Test vectors
 * generated using WireGuard-Go"): (key, input) -> (τ1, τ2, τ3).
 * HMAC is also checked against its RFC 2104 definition, computed here from the backend's BLAKE2s
 * (itself checked against RFC 7693 in vectors.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { kdf1, kdf2, kdf3 } from '../../src/crypto/kdf.js';
import { BACKENDS, hex, seeded, utf8 } from './helpers.js';
import { toHex } from '../util/hex.js';

const VECTORS: ReadonlyArray<{ key: Uint8Array; input: Uint8Array; t: readonly [string, string, string] }> = [
  {
    key: new Uint8Array(0),
    input: new Uint8Array(0),
    t: [
      '8387b46bf43eccfcf349552a095d8315c4055beb90208fb1be23b894bc2ed5d0',
      '58a0e5f6faefccf4807bff1f05fa8a9217945762040bcec2f4b4a62bdfe0e86e',
      '0ce6ea98ec548f8e281e93e32db65621c45eb18dc6f0a7ad94178610a2f7338e',
    ],
  },
  {
    key: hex('deadbeef'),
    input: new Uint8Array(0),
    t: [
      '55329dc80e690fd86bd9661f0851c9b3686df2b1fda0347bc3d27958254b32c6',
      '8dfc6d33a8118ffe408b31ddac25f72aee9115a45b69ba176ad012b243834fee',
      'd69e852a2896569ea54a67969aa1800287921dac53ce6db4b4e12192f263c4c4',
    ],
  },
];

/** HMAC per RFC 2104 over a 64-byte block, from the backend's unkeyed BLAKE2s. */
function hmacByDefinition(b: CryptoBackend, key: Uint8Array, msg: Uint8Array): Uint8Array {
  const block = new Uint8Array(64);
  if (key.length > 64) b.hash(block, key);
  else block.set(key);
  const ipad = block.map((x) => x ^ 0x36);
  const opad = block.map((x) => x ^ 0x5c);
  const inner = new Uint8Array(32);
  b.hash(inner, ipad, msg);
  const out = new Uint8Array(32);
  b.hash(out, opad, inner);
  return out;
}

describe.each(BACKENDS)('%s backend: KDF and HMAC-BLAKE2s', (_name, create) => {
  const b = create();

  it.each(VECTORS.map((v, i) => [i, v] as const))('wireguard-rs KDF vector %i: KDF1, KDF2 and KDF3', (_i, v) => {
    const t1 = new Uint8Array(32);
    const t2 = new Uint8Array(32);
    const t3 = new Uint8Array(32);
    kdf1(b, t1, v.key, v.input);
    expect(toHex(t1)).toBe(v.t[0]);
    t1.fill(0);
    kdf2(b, t1, t2, v.key, v.input);
    expect([toHex(t1), toHex(t2)]).toEqual([v.t[0], v.t[1]]);
    t1.fill(0);
    t2.fill(0);
    kdf3(b, t1, t2, t3, v.key, v.input);
    expect([toHex(t1), toHex(t2), toHex(t3)]).toEqual([...v.t]);
  });

  it.each([0, 4, 32, 64, 65, 100])('HMAC with a %i-byte key equals the RFC 2104 construction', (keyLen) => {
    const rnd = seeded(1000 + keyLen);
    const key = rnd(keyLen);
    const msg = rnd(77);
    const out = new Uint8Array(32);
    b.hmac(out, key, msg);
    expect(toHex(out)).toBe(toHex(hmacByDefinition(b, key, msg)));
    // Parts are concatenated.
    const split = new Uint8Array(32);
    b.hmac(split, key, msg.subarray(0, 10), msg.subarray(10));
    expect(toHex(split)).toBe(toHex(out));
  });

  it('an output may be the key or the input array (C := KDF1(C, x))', () => {
    const rnd = seeded(7);
    const ck = rnd(32);
    const x = rnd(32);
    const expected1 = new Uint8Array(32);
    const expected2 = new Uint8Array(32);
    kdf2(b, expected1, expected2, ck, x);

    const c = ck.slice();
    const k = new Uint8Array(32);
    kdf2(b, c, k, c, x); // (C, k) := KDF2(C, x), C updated in place
    expect([toHex(c), toHex(k)]).toEqual([toHex(expected1), toHex(expected2)]);

    const x2 = x.slice();
    const other = new Uint8Array(32);
    kdf2(b, other, x2, ck, x2); // output aliases the input
    expect([toHex(other), toHex(x2)]).toEqual([toHex(expected1), toHex(expected2)]);
  });

  it('writes exactly 32 bytes into longer outputs and views at odd offsets', () => {
    const big = new Uint8Array(100).fill(0xee);
    const t1 = big.subarray(3, 40); // 37 bytes
    const t2 = big.subarray(41, 80);
    kdf2(b, t1, t2, utf8('key'), utf8('input'));
    const r1 = new Uint8Array(32);
    const r2 = new Uint8Array(32);
    kdf2(b, r1, r2, utf8('key'), utf8('input'));
    expect(toHex(big.subarray(3, 35))).toBe(toHex(r1));
    expect(toHex(big.subarray(41, 73))).toBe(toHex(r2));
    expect(big[35]).toBe(0xee);
    expect(big[73]).toBe(0xee);
    expect(big[2]).toBe(0xee);
  });

  it('rejects outputs that are the same array or too short (API misuse)', () => {
    const a = new Uint8Array(32);
    expect(() => kdf2(b, a, a, a, a)).toThrow(RangeError);
    expect(() => kdf3(b, a, new Uint8Array(32), a, a, a)).toThrow(RangeError);
    expect(() => kdf1(b, new Uint8Array(31), a, a)).toThrow(RangeError);
  });
});
