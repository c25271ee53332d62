/**
 * The native handshake steps (native/weft_noise.c through backend.noise) against noise.ts's own
 * step-by-step code: byte-identical messages and transport keys on random keys, PSKs, ephemerals
 * and odd message offsets, in both directions (native initiator with a step-by-step responder and
 * the reverse), the same refusals of forged messages and low-order ephemerals, and API misuse
 * (short state or message spans) throwing instead of reading out of bounds. Peer tables (the
 * fixed-base DH with a peer's static key, both roles) against node:crypto.
 */
import { describe, expect, it } from 'vitest';
import { loadNativeHash } from '../../src/crypto/native-hash.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import {
  HANDSHAKE_RESPONSE_CONSUMED,
  Handshake,
  INITIATION_DECRYPT_FAILED,
  INITIATION_OK,
  NoiseContext,
  StaticIdentity,
} from '../../src/wireguard/noise.js';
import { INITIATION_SIZE, RESPONSE_SIZE } from '../../src/wireguard/messages.js';

function rng(seed: number): (n: number) => Uint8Array {
  let x = seed >>> 0;
  return (n) => {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      out[i] = x & 0xff;
    }
    return out;
  };
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

interface Side {
  ctx: NoiseContext;
  id: StaticIdentity;
  hs: Handshake;
}

function side(backend: CryptoBackend, priv: Uint8Array, remotePub: Uint8Array, psk: Uint8Array): Side {
  const id = new StaticIdentity();
  id.set(backend, priv);
  const hs = new Handshake(remotePub);
  hs.presharedKey.set(psk);
  hs.precompute(backend, id);
  return { ctx: new NoiseContext(backend), id, hs };
}

/** A full handshake; returns every message and key as hex (or where it stopped). */
function run(ini: Side, res: Side, r: (n: number) => Uint8Array, off: number): string[] {
  const out: string[] = [];
  const m1 = new Uint8Array(off + INITIATION_SIZE + 3);
  if (!ini.ctx.createInitiation(ini.id, ini.hs, m1, off, r(32), r(12), 0x01020304)) return ['initiation failed'];
  out.push(hex(m1));
  const st = new Uint8Array(32);
  if (!res.ctx.beginConsumeInitiation(res.id, m1, off, st)) return [...out, 'begin failed'];
  out.push(hex(st));
  const code = res.ctx.finishConsumeInitiation(res.hs, m1, off, 1000);
  if (code !== INITIATION_OK) return [...out, `finish ${code}`];
  out.push(hex(res.ctx.lastConsumedTimestamp()));
  const m2 = new Uint8Array(off + RESPONSE_SIZE + 5);
  if (!res.ctx.createResponse(res.hs, m2, off, r(32), 0x0a0b0c0d)) return [...out, 'response failed'];
  out.push(hex(m2));
  if (!ini.ctx.consumeResponse(ini.id, ini.hs, m2, off)) return [...out, 'consume failed'];
  expect(ini.hs.state).toBe(HANDSHAKE_RESPONSE_CONSUMED);
  const k = [new Uint8Array(32), new Uint8Array(32), new Uint8Array(32), new Uint8Array(32)];
  expect(ini.ctx.deriveTransportKeys(ini.hs, k[0], k[1])).toBe(1);
  expect(res.ctx.deriveTransportKeys(res.hs, k[2], k[3])).toBe(0);
  expect(hex(k[0])).toBe(hex(k[3]));
  expect(hex(k[1])).toBe(hex(k[2]));
  return [...out, ...k.map(hex)];
}

describe('native handshake steps', () => {
  const native = createOpensslBackend();
  const steps = createOpensslBackend({ nativeNoise: false });

  it('are what the openssl backend offers (and can be turned off); a peer gets a table of its key', () => {
    expect(native.noise).toBeDefined();
    expect(steps.noise).toBeUndefined();
    const gen = rng(3);
    const pub = new Uint8Array(32);
    native.publicKey(pub, gen(32));
    expect(side(native, gen(32), pub, new Uint8Array(32)).hs.peerTable).not.toBeNull();
    expect(side(steps, gen(32), pub, new Uint8Array(32)).hs.peerTable).toBeNull();
  });

  it('peer tables: X25519 through a table equals node:crypto; twist and small-order keys get none', () => {
    const s = native.noise!;
    const node = createNodeBackend({ keyCache: false });
    const gen = rng(0x7ab1e);
    const table = new Uint8Array(s.tableSize);
    const x = loadNativeHash() as unknown as { x25519TableMul(out: Uint8Array, k: Uint8Array, t: Uint8Array): boolean };
    const a = new Uint8Array(32);
    const b = new Uint8Array(32);
    let diff = 0;
    let built = 0;
    for (let i = 0; i < 40; i++) {
      const u = gen(32);
      if (i % 4 !== 0) node.publicKey(u, gen(32)); // on the curve; every 4th a random string
      const ok = s.buildTable(table, u);
      if (i % 4 !== 0) expect(ok).toBe(true);
      if (!ok) continue;
      built++;
      for (let j = 0; j < 50; j++) {
        const k = gen(32);
        if (x.x25519TableMul(a, k, table) !== node.dh(b, k, u) || hex(a) !== hex(b)) diff++;
      }
    }
    expect(built).toBeGreaterThanOrEqual(30);
    expect(diff).toBe(0);
    // Small order (u = 0, 1, an order-8 point) and u = p - 1 (no affine Edwards image): no table.
    for (const u of [
      '00'.repeat(32),
      `01${'00'.repeat(31)}`,
      'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800',
      `ec${'ff'.repeat(30)}7f`,
    ]) {
      expect(s.buildTable(table, Uint8Array.from(Buffer.from(u, 'hex')))).toBe(false);
    }
  });

  it('a table built for another key is ignored (the ladder runs): same messages', () => {
    const gen = rng(11);
    const a = gen(32);
    const b = gen(32);
    const pa = new Uint8Array(32);
    const pb = new Uint8Array(32);
    native.publicKey(pa, a);
    native.publicKey(pb, b);
    const psk = gen(32);
    const ref = run(side(steps, a, pb, psk), side(steps, b, pa, psk), rng(5), 0);
    const ini = side(native, a, pb, psk);
    const res = side(native, b, pa, psk);
    const wrong = ini.hs.peerTable;
    ini.hs.peerTable = res.hs.peerTable; // the other key's tables, swapped
    res.hs.peerTable = wrong;
    expect(run(ini, res, rng(5), 0)).toEqual(ref);
  });

  it('give the same bytes as the step-by-step code, native on either side, over 100 random handshakes', () => {
    const gen = rng(0x5eed);
    for (let i = 0; i < 100; i++) {
      const a = gen(32);
      const b = gen(32);
      const pa = new Uint8Array(32);
      const pb = new Uint8Array(32);
      native.publicKey(pa, a);
      native.publicKey(pb, b);
      const psk = i % 3 === 0 ? new Uint8Array(32) : gen(32);
      const seed = 1 + i;
      const off = i % 7;
      const ref = run(side(steps, a, pb, psk), side(steps, b, pa, psk), rng(seed), off);
      const nn = run(side(native, a, pb, psk), side(native, b, pa, psk), rng(seed), off);
      const ns = run(side(native, a, pb, psk), side(steps, b, pa, psk), rng(seed), off);
      const sn = run(side(steps, a, pb, psk), side(native, b, pa, psk), rng(seed), off);
      expect(ref.length).toBe(8); // 2 messages, static, timestamp, 4 transport keys
      expect(nn).toEqual(ref);
      expect(ns).toEqual(ref);
      expect(sn).toEqual(ref);
    }
  });

  it('refuse the same forged messages as the step-by-step code', () => {
    const gen = rng(99);
    const a = gen(32);
    const b = gen(32);
    const pa = new Uint8Array(32);
    const pb = new Uint8Array(32);
    native.publicKey(pa, a);
    native.publicKey(pb, b);
    for (const backend of [native, steps]) {
      const ini = side(backend, a, pb, new Uint8Array(32));
      const res = side(backend, b, pa, new Uint8Array(32));
      const m1 = new Uint8Array(INITIATION_SIZE);
      expect(ini.ctx.createInitiation(ini.id, ini.hs, m1, 0, gen(32), gen(12), 1)).toBe(true);
      const st = new Uint8Array(32);
      for (const at of [8, 45, 87]) {
        // ephemeral, static ciphertext, static tag
        m1[at] ^= 0x20;
        expect(res.ctx.beginConsumeInitiation(res.id, m1, 0, st)).toBe(false);
        m1[at] ^= 0x20;
      }
      m1[100] ^= 1; // timestamp ciphertext
      expect(res.ctx.beginConsumeInitiation(res.id, m1, 0, st)).toBe(true);
      expect(res.ctx.finishConsumeInitiation(res.hs, m1, 0, 1000)).toBe(INITIATION_DECRYPT_FAILED);
      m1[100] ^= 1;
      expect(res.ctx.beginConsumeInitiation(res.id, m1, 0, st)).toBe(true);
      expect(res.ctx.finishConsumeInitiation(res.hs, m1, 0, 1000)).toBe(INITIATION_OK);
      const m2 = new Uint8Array(RESPONSE_SIZE);
      expect(res.ctx.createResponse(res.hs, m2, 0, gen(32), 2)).toBe(true);
      for (const at of [12, 50, 59]) {
        // ephemeral, empty tag
        m2[at] ^= 4;
        expect(ini.ctx.consumeResponse(ini.id, ini.hs, m2, 0)).toBe(false);
        m2[at] ^= 4;
      }
      // A low-order ephemeral (u = 0) in the response: the first DH is all zeros.
      const low = m2.slice();
      low.fill(0, 12, 44);
      expect(ini.ctx.consumeResponse(ini.id, ini.hs, low, 0)).toBe(false);
      expect(ini.ctx.consumeResponse(ini.id, ini.hs, m2, 0)).toBe(true);
    }
  });

  it('refuse a low-order initiation ephemeral, and throw on short spans (API misuse)', () => {
    const gen = rng(7);
    const b = gen(32);
    const id = new StaticIdentity();
    id.set(native, b);
    const ctx = new NoiseContext(native);
    const m1 = new Uint8Array(INITIATION_SIZE);
    expect(ctx.beginConsumeInitiation(id, m1, 0, new Uint8Array(32))).toBe(false);
    const s = native.noise!;
    expect(() => s.response(new Uint8Array(224), new Uint8Array(RESPONSE_SIZE), 1, null)).toThrow(RangeError);
    expect(() => s.response(new Uint8Array(223), new Uint8Array(RESPONSE_SIZE), 0, null)).toThrow(RangeError);
    expect(() => s.initiation(new Uint8Array(224), new Uint8Array(64), m1, 0, new Uint8Array(11), null)).toThrow(
      RangeError,
    );
    expect(() =>
      s.response(new Uint8Array(224), new Uint8Array(RESPONSE_SIZE), 0, [] as unknown as Uint8Array),
    ).toThrow(TypeError);
    expect(() => s.beginConsume(new Uint8Array(96), new Uint8Array(64), m1, 1, new Uint8Array(32))).toThrow(RangeError);
    expect(() =>
      s.consumeResponse(new Uint8Array(96), new Uint8Array(224), [] as unknown as Uint8Array, m1, 0),
    ).toThrow(TypeError);
  });
});
