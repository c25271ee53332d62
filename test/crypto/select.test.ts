/**
 * Backend selection (src/crypto/select.ts) and the detection behind 'auto' (node.ts).
 */
import type * as NodeCrypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CryptoBackendError } from '../../src/crypto/errors.js';
import { createNodeBackend, loadNodeCrypto, nodeBackendUnavailableReason } from '../../src/crypto/node.js';
import {
  opensslBackendUnavailableReason,
  opensslHashingUnavailableReason,
  opensslX25519UnavailableReason,
} from '../../src/crypto/openssl.js';
import {
  autoBackendName,
  getCryptoBackend,
  parseCryptoBackendName,
  type CryptoBackendName,
} from '../../src/crypto/select.js';

describe('getCryptoBackend', () => {
  it('returns the named backend, one shared instance per name', () => {
    expect(getCryptoBackend('openssl').name).toBe('openssl');
    expect(getCryptoBackend('node').name).toBe('node');
    expect(getCryptoBackend('pure').name).toBe('pure');
    expect(getCryptoBackend('pure')).toBe(getCryptoBackend('pure'));
    expect(getCryptoBackend('node')).toBe(getCryptoBackend('node'));
  });

  it("'auto' (the default) is the first of openssl, node, pure that can run here", () => {
    const expected =
      opensslBackendUnavailableReason() === null
        ? 'openssl'
        : nodeBackendUnavailableReason() === null
          ? 'node'
          : 'pure';
    expect(autoBackendName()).toBe(expected);
    expect(getCryptoBackend().name).toBe(expected);
    expect(getCryptoBackend('auto')).toBe(getCryptoBackend(expected));
  });

  it('on this runtime (Node with OpenSSL 3 exporting EVP) every backend is available', () => {
    expect(opensslBackendUnavailableReason()).toBeNull();
    expect(opensslHashingUnavailableReason()).toBeNull(); // BLAKE2s/HMAC/MAC through EVP as well
    expect(opensslX25519UnavailableReason()).toBeNull(); // and X25519 through EVP_PKEY, not KeyObjects
    expect(autoBackendName()).toBe('openssl');
  });

  it('rejects an unknown name with CryptoBackendError', () => {
    expect(() => getCryptoBackend('libsodium' as CryptoBackendName)).toThrow(CryptoBackendError);
  });
});

describe('parseCryptoBackendName (WEFT_CRYPTO)', () => {
  it.each([
    [undefined, 'auto'],
    ['', 'auto'],
    ['  ', 'auto'],
    ['node', 'node'],
    [' PURE\n', 'pure'],
    ['Auto', 'auto'],
    ['OpenSSL', 'openssl'],
  ] as const)('%j -> %s', (text, expected) => {
    expect(parseCryptoBackendName(text)).toBe(expected);
  });

  it('names the variable and the accepted values when the value is wrong', () => {
    expect(() => parseCryptoBackendName('libsodium')).toThrow(CryptoBackendError);
    expect(() => parseCryptoBackendName('libsodium')).toThrow(/WEFT_CRYPTO="libsodium".*auto, openssl, node, pure/);
  });
});

describe('node:crypto detection', () => {
  const real = loadNodeCrypto();

  it('finds a working node:crypto on this runtime', () => {
    expect(real).not.toBeNull();
    expect(nodeBackendUnavailableReason(real)).toBeNull();
  });

  it('reports a missing node:crypto', () => {
    expect(nodeBackendUnavailableReason(null)).toMatch(/node:crypto is not available/);
  });

  it('reports an OpenSSL without chacha20-poly1305', () => {
    const fake = { ...real, getCiphers: () => ['aes-128-gcm'] } as unknown as typeof NodeCrypto;
    expect(nodeBackendUnavailableReason(fake)).toMatch(/lacks chacha20-poly1305/);
  });

  it('reports an OpenSSL whose X25519 fails', () => {
    const fake = {
      ...real,
      generateKeyPairSync: () => {
        throw new Error('Unsupported key type');
      },
    } as unknown as typeof NodeCrypto;
    expect(nodeBackendUnavailableReason(fake)).toMatch(/X25519 does not work: Unsupported key type/);
  });
});

describe('createNodeBackend on a runtime missing pieces', () => {
  const real = loadNodeCrypto()!;

  it('throws CryptoBackendError naming the missing primitive and the pure backend', () => {
    const noChacha = { ...real, getCiphers: () => ['aes-256-gcm'] } as unknown as typeof NodeCrypto;
    expect(() => createNodeBackend({ nodeCrypto: noChacha })).toThrow(CryptoBackendError);
    expect(() => createNodeBackend({ nodeCrypto: noChacha })).toThrow(/chacha20-poly1305.*WEFT_CRYPTO=pure/);
    expect(() => createNodeBackend({ nodeCrypto: null })).toThrow(/node:crypto is not available/);
  });

  it('falls back to noble for BLAKE2s when OpenSSL lacks blake2s256, with the same results', () => {
    const noBlake = { ...real, getHashes: () => ['sha256'] } as unknown as typeof NodeCrypto;
    const b = createNodeBackend({ nodeCrypto: noBlake });
    const out = new Uint8Array(32);
    b.hash(out, new TextEncoder().encode('abc'));
    expect(Buffer.from(out).toString('hex')).toBe('508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982');
    const viaOpenssl = new Uint8Array(32);
    createNodeBackend().hmac(viaOpenssl, out, out);
    b.hmac(out, out.slice(), out.slice());
    expect(Buffer.from(out).toString('hex')).toBe(Buffer.from(viaOpenssl).toString('hex'));
  });
});
