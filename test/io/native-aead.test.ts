/**
 * The addon's transport AEAD (native/weft_aead.c aeadSeal/aeadOpen) through withNativeAead():
 * byte-identical to the independent noble implementation ('pure' backend) for every length
 * class, rejects forgeries without leaving plaintext, falls back to the base backend for what it
 * does not do (associated data, out-of-place), and throws on API misuse. Also the RFC 8439
 * §2.8.2 vector, run through the fallback path (it has associated data).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { withNativeAead } from '../../src/io/native-aead.js';
import { loadNativeIo, type NativeIo } from '../../src/io/native.js';
import { skipUnlessRoot } from '../util/requirements.js';

const native = loadNativeIo();
const available = native?.aeadAvailable?.() ?? false;
const skip = skipUnlessRoot(
  available === false
    ? 'native addon without aeadSeal/aeadOpen here (addon not built, or this Node exports no OpenSSL EVP ChaCha20-Poly1305): run node native/build.mjs on a Node with OpenSSL'
    : null,
);

function hex(s: string): Uint8Array {
  const clean = s.replace(/\s+/g, '');
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Deterministic bytes (xorshift32), so every run checks the same inputs. */
function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed | 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

describe.skipIf(skip !== null)(`withNativeAead${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const pure = getCryptoBackend('pure');
  const { backend, reason } = withNativeAead(getCryptoBackend('auto'));

  it('is enabled here and reports which implementation runs', () => {
    expect(reason).toBeNull();
    expect(['primitives', 'evp']).toContain(available);
  });

  it('seals exactly as noble does and opens its own output, in place at odd offsets', () => {
    for (const len of [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1420, 9000]) {
      const key = bytes(32, len + 1);
      const nonce = bytes(12, len + 2);
      const pt = bytes(len, len + 3);
      const off = 5 + (len % 7);
      const a = new Uint8Array(off + len + 16 + 3);
      a.set(pt, off);
      const b = a.slice();
      expect(backend.seal(key, nonce, null, a, off, len, a, off)).toBe(len + 16);
      pure.seal(key, nonce, null, b, off, len, b, off);
      expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
      expect(backend.open(key, nonce, null, a, off, len + 16, a, off)).toBe(true);
      expect(Buffer.from(a.subarray(off, off + len)).equals(Buffer.from(pt))).toBe(true);
    }
  });

  it('opens what noble sealed and rejects any flipped bit, leaving no plaintext behind', () => {
    const key = bytes(32, 11);
    const nonce = bytes(12, 12);
    const pt = bytes(100, 13);
    const sealed = new Uint8Array(116);
    sealed.set(pt);
    pure.seal(key, nonce, null, sealed, 0, 100, sealed, 0);
    for (const bit of [0, 7, 99 * 8 + 3, 100 * 8, 115 * 8 + 7]) {
      const m = sealed.slice();
      m[bit >> 3] ^= 1 << (bit & 7);
      expect(backend.open(key, nonce, null, m, 0, 116, m, 0)).toBe(false);
      // Nothing of the plaintext is exposed in the buffer after a rejected open.
      let same = 0;
      for (let i = 0; i < 100; i++) if (m[i] === pt[i]) same++;
      expect(same).toBeLessThan(10); // bytes equal by chance only
    }
    const wrongNonce = nonce.slice();
    wrongNonce[0] ^= 1;
    const m = sealed.slice();
    expect(backend.open(key, wrongNonce, null, m, 0, 116, m, 0)).toBe(false);
    expect(backend.open(key, nonce, null, sealed, 0, 15, sealed, 0)).toBe(false); // shorter than a tag
    expect(backend.open(key, nonce, null, sealed, 0, 116, sealed, 0)).toBe(true);
  });

  it('falls back to the base backend for associated data (RFC 8439 §2.8.2) and out-of-place calls', () => {
    const key = hex('808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f');
    const nonce = hex('070000004041424344454647');
    const ad = hex('50515253c0c1c2c3c4c5c6c7');
    const pt = new TextEncoder().encode(
      "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.",
    );
    const tag = hex('1ae10b594f09e26a7e902ecbd0600691');
    const out = new Uint8Array(pt.length + 16);
    backend.seal(key, nonce, ad, pt, 0, pt.length, out, 0);
    expect(Buffer.from(out.subarray(pt.length)).equals(Buffer.from(tag))).toBe(true);
    expect(Buffer.from(out.subarray(0, 4)).toString('hex')).toBe('d31a8d34');
    const back = new Uint8Array(pt.length);
    expect(backend.open(key, nonce, ad, out, 0, out.length, back, 0)).toBe(true);
    expect(Buffer.from(back).equals(Buffer.from(pt))).toBe(true);
  });

  it('throws on API misuse instead of touching memory outside the buffer', () => {
    const buf = new Uint8Array(64);
    expect(() => backend.seal(new Uint8Array(31), new Uint8Array(12), null, buf, 0, 10, buf, 0)).toThrow(RangeError);
    expect(() => backend.seal(new Uint8Array(32), new Uint8Array(8), null, buf, 0, 10, buf, 0)).toThrow(RangeError);
    expect(() => backend.seal(new Uint8Array(32), new Uint8Array(12), null, buf, 40, 10, buf, 40)).toThrow(RangeError); // no room for the tag
    expect(() => backend.open(new Uint8Array(32), new Uint8Array(12), null, buf, 60, 20, buf, 60)).toThrow(RangeError);
  });
});

/**
 * The EVP implementation is chosen once per process (WEFT_NATIVE_AEAD_MODE=evp skips the
 * primitives), so it runs in a child process, checked against noble directly.
 */
const EVP_CHILD = `
const addon = require(process.argv[1]);
import('@noble/ciphers/chacha.js').then(({ chacha20poly1305 }) => {
  const out = { mode: addon.aeadAvailable(), same: 0, opened: 0, rejected: 0, zeroed: 0 };
  for (const len of [0, 1, 64, 65, 1420]) {
    const key = new Uint8Array(32).map((_, i) => i * 7 + len), nonce = new Uint8Array(12).map((_, i) => i + len);
    const pt = new Uint8Array(len).map((_, i) => (i * 13 + 1) & 255);
    const buf = new Uint8Array(len + 16); buf.set(pt);
    addon.aeadSeal(key, nonce, buf, 0, len);
    if (Buffer.from(buf).equals(Buffer.from(chacha20poly1305(key, nonce).encrypt(pt)))) out.same++;
    const bad = buf.slice(); bad[len] ^= 0x80;
    if (addon.aeadOpen(key, nonce, bad, 0, len + 16) === 0) out.rejected++;
    if (bad.subarray(0, len).every((b) => b === 0)) out.zeroed++;
    if (addon.aeadOpen(key, nonce, buf, 0, len + 16) === 1 && Buffer.from(buf.subarray(0, len)).equals(Buffer.from(pt))) out.opened++;
  }
  console.log(JSON.stringify(out));
});`;

describe.skipIf(skip !== null)('native AEAD through the EVP interface (fallback implementation)', () => {
  it('matches noble, opens its output, and rejects a forged tag leaving zeros', () => {
    const addonPath = fileURLToPath(new URL('../../native/build/Release/weft_io.node', import.meta.url));
    const r = spawnSync(process.execPath, ['-e', EVP_CHILD, addonPath], {
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, WEFT_NATIVE_AEAD_MODE: 'evp' },
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
    });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ mode: 'evp', same: 5, opened: 5, rejected: 5, zeroed: 5 });
  });
});

describe('withNativeAead fallbacks', () => {
  const base: CryptoBackend = getCryptoBackend('pure');

  it('keeps the base backend when there is no addon, or an addon without the AEAD functions', () => {
    expect(withNativeAead(base, null)).toEqual({ backend: base, reason: expect.stringContaining('not available') });
    const old = {
      ...(native ?? {}),
      aeadSeal: undefined,
      aeadOpen: undefined,
      aeadAvailable: undefined,
    } as unknown as NativeIo;
    expect(withNativeAead(base, old).backend).toBe(base);
  });

  it('refuses an implementation that disagrees with the base backend', () => {
    const wrong = {
      aeadAvailable: () => 'evp',
      aeadSeal: (_k: Uint8Array, _n: Uint8Array, buf: Uint8Array, off: number, len: number) => {
        buf.fill(0, off, off + len + 16);
        return 1;
      },
      aeadOpen: () => 1,
    } as unknown as NativeIo;
    const r = withNativeAead(base, wrong);
    expect(r.backend).toBe(base);
    expect(r.reason).toMatch(/differs/);
  });
});
