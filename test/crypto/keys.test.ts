/**
 * Key text forms (src/crypto/keys.ts): strict base64/hex codecs, clamping, and interoperability
 * with the real `wg` tool (wireguard-tools, installed on the test machine): keys we generate are
 * accepted by `wg pubkey`, and our public key of a `wg genkey` key equals what `wg pubkey` prints.
 * Node's Buffer base64/hex codecs serve as the independent oracle for the encodings.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  KeyFormatError,
  clampPrivateKey,
  generatePresharedKeyBase64,
  generatePrivateKeyBase64,
  isZeroKey,
  keyFromBase64,
  keyFromHex,
  keyToBase64,
  keyToHex,
  keysEqual,
  publicKeyBase64,
} from '../../src/crypto/keys.js';
import { BACKENDS, hex, seeded } from './helpers.js';
import { toHex } from '../util/hex.js';

function wg(args: string[], input?: string): string {
  return execFileSync('wg', args, { input, encoding: 'utf8', timeout: 10_000, stdio: ['pipe', 'pipe', 'pipe'] }).trim();
}

describe('base64 and hex codecs', () => {
  const rnd = seeded(99);

  it('round-trip 200 seeded keys and agree with Buffer', () => {
    for (let i = 0; i < 200; i++) {
      const k = rnd(32);
      const b64 = keyToBase64(k);
      expect(b64).toBe(Buffer.from(k).toString('base64'));
      expect(toHex(keyFromBase64(b64))).toBe(toHex(k));
      const h = keyToHex(k);
      expect(h).toBe(Buffer.from(k).toString('hex'));
      expect(toHex(keyFromHex(h))).toBe(toHex(k));
    }
  });

  it('the RFC 7748 §6.1 Alice key in both forms', () => {
    const alice = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
    expect(keyToBase64(alice)).toBe('dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=');
    expect(toHex(keyFromBase64('dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo='))).toBe(toHex(alice));
    expect(toHex(keyFromHex('77076D0A7318A57D3C16C17251B26645DF4C2F87EBC0992AB177FBA51DB92C2A'))).toBe(toHex(alice));
  });

  it('ignores surrounding whitespace such as the newline of a key file', () => {
    expect(toHex(keyFromBase64('  dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n'))).toBe(
      '77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a',
    );
  });

  const good = 'dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=';
  it.each([
    ['too short', good.slice(1)],
    ['too long', good + 'A'],
    ['no padding', good.slice(0, 43) + 'A'],
    ['non-canonical trailing bits', good.slice(0, 42) + 'p='], // 'p' has low bits set
    ['URL-safe alphabet', good.slice(0, 5) + '_' + good.slice(6)],
    ['a space inside', good.slice(0, 10) + ' ' + good.slice(11)],
    ['empty', ''],
  ])('base64 rejects %s with KeyFormatError, without echoing the text', (_what, text) => {
    let err: unknown;
    try {
      keyFromBase64(text, 'peer public key');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KeyFormatError);
    const message = (err as Error).message;
    expect(message).toMatch(/^peer public key /);
    if (text.length > 8) expect(message).not.toContain(text.trim().slice(4, 20));
  });

  it.each([
    ['63 digits', 'a'.repeat(63)],
    ['65 digits', 'a'.repeat(65)],
    ['a non-hex digit', 'g' + 'a'.repeat(63)],
  ])('hex rejects %s', (_what, text) => {
    expect(() => keyFromHex(text)).toThrow(KeyFormatError);
  });

  it('the `wg` tool rejects the same non-canonical base64 we reject', () => {
    const bad = good.slice(0, 42) + 'p=';
    expect(() => keyFromBase64(bad)).toThrow(KeyFormatError);
    expect(() => wg(['pubkey'], bad + '\n')).toThrow();
  });
});

describe('clamping and comparisons', () => {
  it('clampPrivateKey clears bits 0-2 and 255 and sets bit 254 (RFC 7748 §5)', () => {
    expect(toHex(clampPrivateKey(new Uint8Array(32).fill(0xff)))).toBe('f8' + 'ff'.repeat(30) + '7f');
    expect(toHex(clampPrivateKey(new Uint8Array(32)))).toBe('00'.repeat(31) + '40');
  });

  it('keysEqual and isZeroKey', () => {
    const a = seeded(3)(32);
    const b = a.slice();
    expect(keysEqual(a, b)).toBe(true);
    b[31] ^= 1;
    expect(keysEqual(a, b)).toBe(false);
    expect(isZeroKey(new Uint8Array(32))).toBe(true);
    expect(isZeroKey(b)).toBe(false);
    expect(() => keysEqual(a, new Uint8Array(31))).toThrow(RangeError);
  });
});

describe.each(BACKENDS)('%s backend: wg genkey / wg pubkey compatibility', (_name, create) => {
  const b = create();

  it('a generated private key is canonical base64 of a clamped key that `wg pubkey` accepts, with the same public key', () => {
    const priv = generatePrivateKeyBase64(b);
    const raw = keyFromBase64(priv);
    expect(toHex(raw)).toBe(toHex(clampPrivateKey(raw.slice())));
    expect(publicKeyBase64(b, priv)).toBe(wg(['pubkey'], priv + '\n'));
  });

  it('the public key of a `wg genkey` key equals what `wg pubkey` prints', () => {
    for (let i = 0; i < 3; i++) {
      const priv = wg(['genkey']);
      expect(publicKeyBase64(b, priv)).toBe(wg(['pubkey'], priv + '\n'));
    }
  });

  it('generatePresharedKeyBase64 gives distinct 32-byte keys', () => {
    const a = generatePresharedKeyBase64(b);
    const c = generatePresharedKeyBase64(b);
    expect(keyFromBase64(a).length).toBe(32);
    expect(a).not.toBe(c);
  });
});
