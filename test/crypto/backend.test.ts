/**
 * Behaviour of the CryptoBackend contract (src/crypto/backend.ts) beyond the published vectors:
 * in-place operation, views at odd offsets, rejection of tampered input without throwing, API
 * misuse throwing, and the two backends agreeing byte for byte on seeded random inputs.
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { createPureBackend } from '../../src/crypto/pure.js';
import { BACKENDS, hex, placed, seeded } from './helpers.js';
import { toHex } from '../util/hex.js';

const TAG = 16;

describe.each(BACKENDS)('%s backend: AEAD contract', (_name, create) => {
  const b = create();
  const rnd = seeded(0x5eed);
  const key = rnd(32);
  const nonce = rnd(12);
  const xnonce = rnd(24);
  const ad = rnd(32);

  it('seals and opens in place inside a packet buffer with headroom, at an odd offset', () => {
    const payload = rnd(1001);
    const packet = new Uint8Array(1600);
    const off = 33;
    packet.set(payload, off);
    expect(b.seal(key, nonce, ad, packet, off, payload.length, packet, off)).toBe(payload.length + TAG);
    expect(toHex(packet.subarray(off, off + 16))).not.toBe(toHex(payload.subarray(0, 16)));
    // Bytes outside [off, off + len + 16) are untouched.
    expect(packet[off - 1]).toBe(0);
    expect(packet[off + payload.length + TAG]).toBe(0);
    // Same result as an out-of-place seal.
    const separate = new Uint8Array(payload.length + TAG);
    b.seal(key, nonce, ad, payload, 0, payload.length, separate, 0);
    expect(toHex(packet.subarray(off, off + payload.length + TAG))).toBe(toHex(separate));

    expect(b.open(key, nonce, ad, packet, off, payload.length + TAG, packet, off)).toBe(true);
    expect(toHex(packet.subarray(off, off + payload.length))).toBe(toHex(payload));
  });

  it('accepts key, nonce and AD as views at odd offsets of larger buffers', () => {
    const payload = rnd(64);
    const expected = new Uint8Array(64 + TAG);
    b.seal(key, nonce, ad, payload, 0, 64, expected, 0);
    const out = new Uint8Array(200);
    b.seal(placed(key, 5), placed(nonce, 3), placed(ad, 9), placed(payload, 1), 0, 64, out, 11);
    expect(toHex(out.subarray(11, 11 + 64 + TAG))).toBe(toHex(expected));
    const pt = new Uint8Array(99);
    expect(b.open(placed(key, 7), placed(nonce, 1), placed(ad, 13), out, 11, 64 + TAG, pt, 17)).toBe(true);
    expect(toHex(pt.subarray(17, 17 + 64))).toBe(toHex(payload));
  });

  it.each([1, -1, 7, -16])('seal and open with source and destination overlapping at a shift of %i bytes', (shift) => {
    const payload = rnd(300);
    const expected = new Uint8Array(300 + TAG);
    b.seal(key, nonce, ad, payload, 0, 300, expected, 0);
    const buf = new Uint8Array(400);
    const srcOff = 40;
    buf.set(payload, srcOff);
    b.seal(key, nonce, ad, buf, srcOff, 300, buf, srcOff + shift);
    expect(toHex(buf.subarray(srcOff + shift, srcOff + shift + 300 + TAG))).toBe(toHex(expected));
    const sealedOff = srcOff + shift;
    expect(b.open(key, nonce, ad, buf, sealedOff, 300 + TAG, buf, sealedOff - shift)).toBe(true);
    expect(toHex(buf.subarray(sealedOff - shift, sealedOff - shift + 300))).toBe(toHex(payload));
  });

  it('works for an empty plaintext (a WireGuard keepalive) and with null AD', () => {
    const out = new Uint8Array(TAG);
    expect(b.seal(key, nonce, null, new Uint8Array(0), 0, 0, out, 0)).toBe(TAG);
    expect(b.open(key, nonce, null, out, 0, TAG, new Uint8Array(0), 0)).toBe(true);
    // Null AD and empty AD are the same thing.
    const out2 = new Uint8Array(TAG);
    b.seal(key, nonce, new Uint8Array(0), new Uint8Array(0), 0, 0, out2, 0);
    expect(toHex(out2)).toBe(toHex(out));
  });

  describe('rejects tampering: open returns false and does not throw', () => {
    const payload = rnd(80);
    const sealed = new Uint8Array(80 + TAG);
    b.seal(key, nonce, ad, payload, 0, 80, sealed, 0);

    it.each([
      [
        'a flipped tag bit',
        (c: Uint8Array) => {
          c[80 + 5] ^= 0x01;
        },
      ],
      [
        'a flipped ciphertext bit',
        (c: Uint8Array) => {
          c[0] ^= 0x80;
        },
      ],
      [
        'a flipped last ciphertext bit',
        (c: Uint8Array) => {
          c[79] ^= 0x01;
        },
      ],
    ])('%s', (_what, tamper) => {
      const c = sealed.slice();
      tamper(c);
      const dst = new Uint8Array(80);
      expect(b.open(key, nonce, ad, c, 0, c.length, dst, 0)).toBe(false);
    });

    it('a different AD, a missing AD, a different nonce or key', () => {
      const dst = new Uint8Array(80);
      const ad2 = ad.slice();
      ad2[31] ^= 1;
      expect(b.open(key, nonce, ad2, sealed, 0, sealed.length, dst, 0)).toBe(false);
      expect(b.open(key, nonce, null, sealed, 0, sealed.length, dst, 0)).toBe(false);
      const nonce2 = nonce.slice();
      nonce2[4] ^= 1;
      expect(b.open(key, nonce2, ad, sealed, 0, sealed.length, dst, 0)).toBe(false);
      const key2 = key.slice();
      key2[0] ^= 1;
      expect(b.open(key2, nonce, ad, sealed, 0, sealed.length, dst, 0)).toBe(false);
    });

    it('a failed in-place open leaves no plaintext in the buffer', () => {
      const c = sealed.slice();
      c[80] ^= 1; // bad tag
      expect(b.open(key, nonce, ad, c, 0, c.length, c, 0)).toBe(false);
      expect(toHex(c.subarray(0, 80))).not.toBe(toHex(payload));
      for (let i = 0; i + 8 <= 80; i += 8) {
        expect(toHex(c.subarray(i, i + 8))).not.toBe(toHex(payload.subarray(i, i + 8)));
      }
    });

    it('input shorter than a tag, and a truncated message', () => {
      const dst = new Uint8Array(80);
      expect(b.open(key, nonce, ad, sealed, 0, 15, dst, 0)).toBe(false);
      expect(b.open(key, nonce, ad, sealed, 0, 0, dst, 0)).toBe(false);
      expect(b.open(key, nonce, ad, sealed, 0, sealed.length - 1, dst, 0)).toBe(false);
    });

    it('xopen rejects a tampered XChaCha20-Poly1305 message', () => {
      const x = new Uint8Array(16 + TAG);
      b.xseal(key, xnonce, ad, rnd(16), 0, 16, x, 0);
      const dst = new Uint8Array(16);
      const good = x.slice();
      expect(b.xopen(key, xnonce, ad, good, 0, good.length, dst, 0)).toBe(true);
      x[3] ^= 4;
      expect(b.xopen(key, xnonce, ad, x, 0, x.length, dst, 0)).toBe(false);
      const xn2 = xnonce.slice();
      xn2[20] ^= 1; // the part of the nonce that is not fed to HChaCha20
      expect(b.xopen(key, xn2, ad, good, 0, good.length, dst, 0)).toBe(false);
      xn2.set(xnonce);
      xn2[2] ^= 1; // the part that is
      expect(b.xopen(key, xn2, ad, good, 0, good.length, dst, 0)).toBe(false);
    });
  });

  it('throws on API misuse: wrong key or nonce length, spans outside the buffer', () => {
    const buf = new Uint8Array(64);
    expect(() => b.seal(new Uint8Array(31), nonce, null, buf, 0, 16, buf, 0)).toThrow(RangeError);
    expect(() => b.seal(key, new Uint8Array(24), null, buf, 0, 16, buf, 0)).toThrow(RangeError);
    expect(() => b.xseal(key, nonce, null, buf, 0, 16, buf, 0)).toThrow(RangeError);
    expect(() => b.seal(key, nonce, null, buf, 60, 16, buf, 0)).toThrow(RangeError);
    expect(() => b.seal(key, nonce, null, buf, 0, 16, buf, 40)).toThrow(RangeError); // no room for the tag
    expect(() => b.seal(key, nonce, null, buf, -1, 16, buf, 0)).toThrow(RangeError);
    expect(() => b.open(key, nonce, null, buf, 0, 65, buf, 0)).toThrow(RangeError);
    expect(() => b.open(key, nonce, null, buf, 0, 32, buf, 60)).toThrow(RangeError);
    expect(() => b.dh(new Uint8Array(32), new Uint8Array(31), new Uint8Array(32))).toThrow(RangeError);
    expect(() => b.hash(new Uint8Array(31), buf)).toThrow(RangeError);
    expect(() => b.mac(new Uint8Array(16), new Uint8Array(0), buf)).toThrow(RangeError);
  });
});

describe.each(BACKENDS)('%s backend: hashing, keys and randomness', (_name, create) => {
  const b = create();

  it('hash may write its output over one of its inputs (H := HASH(H ‖ x))', () => {
    const rnd = seeded(11);
    const h = rnd(32);
    const x = rnd(50);
    const expected = new Uint8Array(32);
    b.hash(expected, h.slice(), x);
    b.hash(h, h, x);
    expect(toHex(h)).toBe(toHex(expected));
  });

  it('hash/mac/hmac write into views at odd offsets and leave the bytes around them alone', () => {
    const big = new Uint8Array(100).fill(0x55);
    const rnd = seeded(12);
    const msg = rnd(40);
    const k = rnd(32);
    b.hash(big.subarray(1, 33), msg);
    b.mac(big.subarray(35, 51), k, msg);
    b.hmac(big.subarray(53, 90), k, msg); // a 37-byte view: only 32 bytes are written
    const h = new Uint8Array(32);
    const m = new Uint8Array(16);
    const hm = new Uint8Array(32);
    b.hash(h, msg);
    b.mac(m, k, msg);
    b.hmac(hm, k, msg);
    expect(toHex(big.subarray(1, 33))).toBe(toHex(h));
    expect(toHex(big.subarray(35, 51))).toBe(toHex(m));
    expect(toHex(big.subarray(53, 85))).toBe(toHex(hm));
    expect([big[0], big[33], big[34], big[51], big[52], big[85], big[89]]).toEqual([
      0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55,
    ]);
  });

  it('generatePrivateKey returns distinct clamped keys whose public keys agree with dh', () => {
    const a = b.generatePrivateKey();
    const c = b.generatePrivateKey();
    expect(a.length).toBe(32);
    expect(toHex(a)).not.toBe(toHex(c));
    for (const k of [a, c]) {
      expect(k[0] & 7).toBe(0);
      expect(k[31] & 0x80).toBe(0);
      expect(k[31] & 0x40).toBe(0x40);
    }
    const pa = new Uint8Array(32);
    const pc = new Uint8Array(32);
    b.publicKey(pa, a);
    b.publicKey(pc, c);
    const s1 = new Uint8Array(32);
    const s2 = new Uint8Array(32);
    expect(b.dh(s1, a, pc)).toBe(true);
    expect(b.dh(s2, c, pa)).toBe(true);
    expect(toHex(s1)).toBe(toHex(s2));
  });

  it('randomFill fills buffers larger than one 65536-byte chunk, at an offset', () => {
    const big = new Uint8Array(200_003);
    b.randomFill(big.subarray(3));
    expect(big[0] | big[1] | big[2]).toBe(0);
    // Every 1000-byte stretch got random bytes (all-zero has probability 2^-8000).
    for (let off = 3; off + 1000 <= big.length; off += 1000) {
      expect(big.subarray(off, off + 1000).some((x) => x !== 0)).toBe(true);
    }
  });

  it('dh sees a changed private or public key even when the same array is reused', () => {
    const priv = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
    const pub = hex('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
    const out = new Uint8Array(32);
    b.dh(out, priv, pub);
    expect(toHex(out)).toBe('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
    // Reuse both arrays with Bob's private key and Alice's public key (RFC 7748 §6.1).
    priv.set(hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb'));
    pub.set(hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a'));
    out.fill(0);
    b.dh(out, priv, pub);
    expect(toHex(out)).toBe('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
    // And a different public key in the same array changes the result.
    pub[0] ^= 0x40;
    b.dh(out, priv, pub);
    expect(toHex(out)).not.toBe('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
  });
});

describe('the node, openssl and pure backends agree on seeded random inputs', () => {
  const node = createNodeBackend();
  const openssl = createOpensslBackend();
  const pure = createPureBackend();
  const rnd = seeded(20240601);
  const sizes = [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 1419, 1420];

  it.each(sizes)('seal/open and xseal/xopen, %i-byte plaintext', (len) => {
    const key = rnd(32);
    const nonce = rnd(12);
    const xnonce = rnd(24);
    const ad = len % 2 === 0 ? rnd(len % 40) : null;
    const pt = rnd(len);
    for (const [s, n, open] of [
      ['seal', nonce, 'open'],
      ['xseal', xnonce, 'xopen'],
    ] as const) {
      const a = new Uint8Array(len + TAG);
      const c = new Uint8Array(len + TAG);
      const o = new Uint8Array(len + TAG);
      node[s](key, n, ad, pt, 0, len, a, 0);
      pure[s](key, n, ad, pt, 0, len, c, 0);
      openssl[s](key, n, ad, pt, 0, len, o, 0);
      expect(toHex(a)).toBe(toHex(c));
      expect(toHex(o)).toBe(toHex(c));
      const p3 = new Uint8Array(len);
      expect(openssl[open](key, n, ad, c, 0, c.length, p3, 0)).toBe(true);
      expect(toHex(p3)).toBe(toHex(pt));
      // Each opens what the other sealed.
      const p1 = new Uint8Array(len);
      const p2 = new Uint8Array(len);
      expect(pure[open](key, n, ad, a, 0, a.length, p1, 0)).toBe(true);
      expect(node[open](key, n, ad, c, 0, c.length, p2, 0)).toBe(true);
      expect(toHex(p1)).toBe(toHex(pt));
      expect(toHex(p2)).toBe(toHex(pt));
    }
  });

  it.each(sizes)('hash, mac and hmac, %i-byte input', (len) => {
    const msg = rnd(len);
    const key = rnd(32);
    const longKey = rnd(70);
    const out = (n: number) => [new Uint8Array(n), new Uint8Array(n)] as const;
    const [h1, h2] = out(32);
    node.hash(h1, msg);
    pure.hash(h2, msg);
    expect(toHex(h1)).toBe(toHex(h2));
    const [m1, m2] = out(16);
    node.mac(m1, key, msg);
    pure.mac(m2, key, msg);
    expect(toHex(m1)).toBe(toHex(m2));
    const [a1, a2] = out(32);
    node.hmac(a1, key, msg);
    pure.hmac(a2, key, msg);
    expect(toHex(a1)).toBe(toHex(a2));
    node.hmac(a1, longKey, msg);
    pure.hmac(a2, longKey, msg);
    expect(toHex(a1)).toBe(toHex(a2));
  });

  it('X25519 public keys and shared secrets for 8 random key pairs', () => {
    for (let i = 0; i < 8; i++) {
      const priv = rnd(32); // deliberately unclamped: both must clamp per RFC 7748 §5
      const peer = rnd(32);
      const p1 = new Uint8Array(32);
      const p2 = new Uint8Array(32);
      node.publicKey(p1, priv);
      pure.publicKey(p2, priv);
      expect(toHex(p1)).toBe(toHex(p2));
      const s1 = new Uint8Array(32);
      const s2 = new Uint8Array(32);
      expect(node.dh(s1, priv, peer)).toBe(pure.dh(s2, priv, peer));
      expect(toHex(s1)).toBe(toHex(s2));
    }
  });

  it('openssl (EVP_PKEY X25519) agrees with pure on public keys and secrets, unclamped keys included', () => {
    for (let i = 0; i < 8; i++) {
      const priv = rnd(32);
      const peer = rnd(32);
      const p1 = new Uint8Array(32);
      const p2 = new Uint8Array(32);
      openssl.publicKey(p1, priv);
      pure.publicKey(p2, priv);
      expect(toHex(p1)).toBe(toHex(p2));
      const s1 = new Uint8Array(32);
      const s2 = new Uint8Array(32);
      expect(openssl.dh(s1, priv, peer)).toBe(pure.dh(s2, priv, peer));
      expect(toHex(s1)).toBe(toHex(s2));
    }
  });

  it('openssl X25519 stays correct past its 64-entry private-key cache (eviction, then reuse)', () => {
    // 100 live private-key arrays: the first ones are evicted and must be re-imported on reuse.
    const keys = Array.from({ length: 100 }, () => rnd(32));
    const peer = rnd(32);
    const expected = keys.map((k) => {
      const s = new Uint8Array(32);
      pure.dh(s, k, peer);
      return toHex(s);
    });
    const out = new Uint8Array(32);
    for (let round = 0; round < 2; round++) {
      keys.forEach((k, i) => {
        expect(openssl.dh(out, k, peer)).toBe(true);
        expect(toHex(out)).toBe(expected[i]);
      });
    }
  });

  it('the node backend without its KeyObject cache gives the same results', () => {
    const uncached = createNodeBackend({ keyCache: false });
    const priv = rnd(32);
    const peer = rnd(32);
    const s1 = new Uint8Array(32);
    const s2 = new Uint8Array(32);
    node.dh(s1, priv, peer);
    uncached.dh(s2, priv, peer);
    expect(toHex(s1)).toBe(toHex(s2));
  });
});
