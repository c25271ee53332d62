/**
 * Cross-check of the PSK path (the published capture has no PSK) against an independent
 * implementation of the whitepaper's formulas (§5.4.2, §5.4.3, §5.4.4, §5.4.5) written here with
 * @noble primitives directly — no code shared with src/wireguard or src/crypto.
 */
import { describe, expect, it } from 'vitest';
import { chacha20poly1305 } from '@noble/ciphers/chacha.js';
import { blake2s } from '@noble/hashes/blake2.js';
import { hmac } from '@noble/hashes/hmac.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { CookieGenerator } from '../../src/wireguard/cookie.js';
import { Handshake, INITIATION_OK, NoiseContext, StaticIdentity } from '../../src/wireguard/noise.js';
import { tai64n } from '../../src/wireguard/tai64n.js';
import { BACKENDS } from './backends.js';
import { Prng } from '../util/prng.js';
import { toHex } from '../util/hex.js';

const enc = new TextEncoder();
const cat = (...a: Uint8Array[]) => {
  const out = new Uint8Array(a.reduce((s, x) => s + x.length, 0));
  let o = 0;
  for (const x of a) {
    out.set(x, o);
    o += x.length;
  }
  return out;
};
const HASH = (...a: Uint8Array[]) => blake2s(cat(...a));
const MAC = (key: Uint8Array, ...a: Uint8Array[]) => blake2s(cat(...a), { key, dkLen: 16 });
const HMAC = (key: Uint8Array, ...a: Uint8Array[]) => hmac(blake2s, key, cat(...a));
function KDF(n: number, key: Uint8Array, input: Uint8Array): Uint8Array[] {
  const t0 = HMAC(key, input);
  const out: Uint8Array[] = [];
  let prev: Uint8Array = new Uint8Array(0);
  for (let i = 1; i <= n; i++) {
    prev = HMAC(t0, prev, Uint8Array.of(i));
    out.push(prev);
  }
  return out;
}
const AEAD = (key: Uint8Array, counter: number, plain: Uint8Array, ad: Uint8Array) => {
  const nonce = new Uint8Array(12);
  new DataView(nonce.buffer).setUint32(4, counter, true);
  return chacha20poly1305(key, nonce, ad).encrypt(plain);
};
const DH = (priv: Uint8Array, pub: Uint8Array) => x25519.getSharedSecret(priv, pub);
const PUB = (priv: Uint8Array) => x25519.getPublicKey(priv);
const le32 = (v: number) => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, true);
  return b;
};

/** The whole handshake from the whitepaper, returning both messages (with mac1, zero mac2) and the keys. */
function reference(o: {
  Si: Uint8Array;
  Sr: Uint8Array;
  Ei: Uint8Array;
  Er: Uint8Array;
  Q: Uint8Array;
  ts: Uint8Array;
  I_i: number;
  I_r: number;
}) {
  const Spub_i = PUB(o.Si);
  const Spub_r = PUB(o.Sr);
  const Epub_i = PUB(o.Ei);
  const Epub_r = PUB(o.Er);
  let C: Uint8Array = HASH(enc.encode('Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s'));
  let H: Uint8Array = HASH(C, enc.encode('WireGuard v1 zx2c4 Jason@zx2c4.com'));
  H = HASH(H, Spub_r);
  [C] = KDF(1, C, Epub_i);
  H = HASH(H, Epub_i);
  let k: Uint8Array;
  [C, k] = KDF(2, C, DH(o.Ei, Spub_r));
  const encStatic = AEAD(k, 0, Spub_i, H);
  H = HASH(H, encStatic);
  [C, k] = KDF(2, C, DH(o.Si, Spub_r));
  const encTs = AEAD(k, 0, o.ts, H);
  H = HASH(H, encTs);
  const m1body = cat(Uint8Array.of(1, 0, 0, 0), le32(o.I_i), Epub_i, encStatic, encTs);
  const m1 = cat(m1body, MAC(HASH(enc.encode('mac1----'), Spub_r), m1body), new Uint8Array(16));

  [C] = KDF(1, C, Epub_r);
  H = HASH(H, Epub_r);
  [C] = KDF(1, C, DH(o.Er, Epub_i));
  [C] = KDF(1, C, DH(o.Er, Spub_i));
  let tau: Uint8Array;
  [C, tau, k] = KDF(3, C, o.Q);
  H = HASH(H, tau);
  const encEmpty = AEAD(k, 0, new Uint8Array(0), H);
  const m2body = cat(Uint8Array.of(2, 0, 0, 0), le32(o.I_r), le32(o.I_i), Epub_r, encEmpty);
  const m2 = cat(m2body, MAC(HASH(enc.encode('mac1----'), Spub_i), m2body), new Uint8Array(16));
  const [Tsend_i, Trecv_i] = KDF(2, C, new Uint8Array(0));
  return { m1, m2, Tsend_i, Trecv_i, Spub_i, Spub_r };
}

describe.each(BACKENDS)('handshake vs an independent whitepaper implementation ($name backend)', ({ create }) => {
  const backend = create();
  const ctx = new NoiseContext(backend);

  it('random keys, with and without PSK: identical messages and transport keys', () => {
    const rng = new Prng(2024);
    for (let round = 0; round < 6; round++) {
      const o = {
        Si: rng.bytes(32),
        Sr: rng.bytes(32),
        Ei: rng.bytes(32),
        Er: rng.bytes(32),
        Q: round % 2 === 0 ? rng.bytes(32) : new Uint8Array(32),
        ts: tai64n(1_600_000_000_000 + round * 1000),
        I_i: rng.nextU32(),
        I_r: rng.nextU32(),
      };
      const ref = reference(o);
      const idI = new StaticIdentity();
      idI.set(backend, o.Si);
      const idR = new StaticIdentity();
      idR.set(backend, o.Sr);
      const hsI = new Handshake(ref.Spub_r);
      hsI.precompute(backend, idI);
      hsI.presharedKey.set(o.Q);
      const hsR = new Handshake(ref.Spub_i);
      hsR.precompute(backend, idR);
      hsR.presharedKey.set(o.Q);

      const m1 = new Uint8Array(148);
      expect(ctx.createInitiation(idI, hsI, m1, 0, o.Ei, o.ts, o.I_i)).toBe(true);
      new CookieGenerator(backend, ref.Spub_r).addMacs(m1, 0, 148, 0);
      expect(toHex(m1)).toBe(toHex(ref.m1));

      const st = new Uint8Array(32);
      expect(ctx.beginConsumeInitiation(idR, m1, 0, st)).toBe(true);
      expect(ctx.finishConsumeInitiation(hsR, m1, 0, 0)).toBe(INITIATION_OK);
      const m2 = new Uint8Array(92);
      expect(ctx.createResponse(hsR, m2, 0, o.Er, o.I_r)).toBe(true);
      new CookieGenerator(backend, ref.Spub_i).addMacs(m2, 0, 92, 0);
      expect(toHex(m2)).toBe(toHex(ref.m2));

      expect(ctx.consumeResponse(idI, hsI, m2, 0)).toBe(true);
      const s = new Uint8Array(32);
      const r = new Uint8Array(32);
      expect(ctx.deriveTransportKeys(hsI, s, r)).toBe(1);
      expect(toHex(s)).toBe(toHex(ref.Tsend_i));
      expect(toHex(r)).toBe(toHex(ref.Trecv_i));
    }
  });
});
