/**
 * Published test vectors, run against both backends. Sources:
 * - RFC 8439 §2.8.2 (AEAD example) and Appendix A.5 (AEAD decryption).
 * - draft-irtf-cfrg-xchacha-03, Appendix A, AEAD_XChaCha20_Poly1305 example (brief: §A.3.1).
 * - RFC 7693 Appendix B (BLAKE2s-256 of "abc").
 * - BLAKE2 reference test vectors, testvectors/blake2s-test.txt of github.com/BLAKE2/BLAKE2
 *   (keyed BLAKE2s-256, key 00..1f).
 * - RFC 7748 §5.2 (X25519 function) and §6.1 (Diffie-Hellman example).
 * - WireGuard's Noise initial chaining key and hash, as precomputed in WireGuard/wireguard-rs
 *   src/wireguard/handshake/noise.rs (INITIAL_CK, INITIAL_HS).
 * Keyed BLAKE2s with a 16-byte digest has no published vector; those expected values were computed
 * with CPython 3.11's hashlib.blake2s(data, key=..., digest_size=16) (an independent
 * implementation, which also reproduces the reference KAT above), and noble is compared too.
 */
import { describe, expect, it } from 'vitest';
import { blake2s } from '@noble/hashes/blake2.js';
import { BACKENDS, hex, sequence, utf8 } from './helpers.js';
import { toHex } from '../util/hex.js';

const SUNSCREEN = utf8(
  "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.",
);

describe('test-vector inputs are transcribed correctly', () => {
  it('the RFC 8439 §2.8.2 plaintext is the 114 bytes the RFC lists (length block 0x72)', () => {
    expect(SUNSCREEN.length).toBe(0x72);
    expect(toHex(SUNSCREEN.subarray(0, 16))).toBe('4c616469657320616e642047656e746c');
    expect(toHex(SUNSCREEN.subarray(112))).toBe('742e');
  });
});

describe.each(BACKENDS)('%s backend: published vectors', (_name, create) => {
  const b = create();

  describe('ChaCha20-Poly1305 (RFC 8439)', () => {
    const key = hex('808182838485868788898a8b8c8d8e8f 909192939495969798999a9b9c9d9e9f');
    const nonce = hex('07000000 4041424344454647'); // fixed-common part ‖ IV
    const ad = hex('50515253c0c1c2c3c4c5c6c7');
    const ciphertext = hex(`
      d31a8d34648e60db7b86afbc53ef7ec2 a4aded51296e08fea9e2b5a736ee62d6
      3dbea45e8ca9671282fafb69da92728b 1a71de0a9e060b2905d6a5b67ecd3b36
      92ddbd7f2d778b8c9803aee328091b58 fab324e4fad675945585808b4831d7bc
      3ff4def08e4b7a9de576d26586cec64b 6116`);
    const tag = hex('1a:e1:0b:59:4f:09:e2:6a:7e:90:2e:cb:d0:60:06:91');

    it('§2.8.2: seal produces the listed ciphertext and tag', () => {
      const dst = new Uint8Array(SUNSCREEN.length + 16);
      expect(b.seal(key, nonce, ad, SUNSCREEN, 0, SUNSCREEN.length, dst, 0)).toBe(SUNSCREEN.length + 16);
      expect(toHex(dst.subarray(0, SUNSCREEN.length))).toBe(toHex(ciphertext));
      expect(toHex(dst.subarray(SUNSCREEN.length))).toBe(toHex(tag));
    });

    it('§2.8.2: open of ciphertext ‖ tag returns the plaintext', () => {
      const src = new Uint8Array([...ciphertext, ...tag]);
      const dst = new Uint8Array(ciphertext.length);
      expect(b.open(key, nonce, ad, src, 0, src.length, dst, 0)).toBe(true);
      expect(toHex(dst)).toBe(toHex(SUNSCREEN));
    });

    it('Appendix A.5: decrypts the Internet-Draft boilerplate and verifies its tag', () => {
      const k = hex('1c9240a5eb55d38af333888604f6b5f0 473917c1402b80099dca5cbc207075c0');
      const n = hex('000000000102030405060708');
      const aad = hex('f33388860000000000004e91');
      const ct = hex(`
        64a0861575861af460f062c79be643bd 5e805cfd345cf389f108670ac76c8cb2
        4c6cfc18755d43eea09ee94e382d26b0 bdb7b73c321b0100d4f03b7f355894cf
        332f830e710b97ce98c8a84abd0b9481 14ad176e008d33bd60f982b1ff37c855
        9797a06ef4f0ef61c186324e2b350638 3606907b6a7c02b0f9f6157b53c867e4
        b9166c767b804d46a59b5216cde7a4e9 9040c5a40433225ee282a1b0a06c523e
        af4534d7f83fa1155b0047718cbc546a 0d072b04b3564eea1b422273f548271a
        0bb2316053fa76991955ebd63159434e cebb4e466dae5a1073a6727627097a10
        49e617d91d361094fa68f0ff77987130 305beaba2eda04df997b714d6c6f2c29
        a6ad5cb4022b02709b`);
      const receivedTag = hex('eead9d67890cbb22392336fea1851f38');
      const expected = utf8(
        'Internet-Drafts are draft documents valid for a maximum of six months and may be ' +
          'updated, replaced, or obsoleted by other documents at any time. It is inappropriate to use ' +
          'Internet-Drafts as reference material or to cite them other than as /\u201cwork in progress./\u201d',
      );
      expect(ct.length).toBe(265);
      expect(expected.length).toBe(265);
      const src = new Uint8Array([...ct, ...receivedTag]);
      const dst = new Uint8Array(ct.length);
      expect(b.open(k, n, aad, src, 0, src.length, dst, 0)).toBe(true);
      expect(toHex(dst)).toBe(toHex(expected));
    });
  });

  describe('XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha-03)', () => {
    const key = hex('808182838485868788898a8b8c8d8e8f 909192939495969798999a9b9c9d9e9f');
    const nonce = hex('404142434445464748494a4b4c4d4e4f 5051525354555657');
    const ad = hex('50515253c0c1c2c3c4c5c6c7');
    const ciphertext = hex(`
      bd6d179d3e83d43b9576579493c0e939 572a1700252bfaccbed2902c21396cbb
      731c7f1b0b4aa6440bf3a82f4eda7e39 ae64c6708c54c216cb96b72e1213b452
      2f8c9ba40db5d945b11b69b982c1bb9e 3f3fac2bc369488f76b2383565d3fff9
      21f9664c97637da9768812f615c68b13 b52e`);
    const tag = hex('c0:87:59:24:c1:c7:98:79:47:de:af:d8:78:0a:cf:49');

    it('xseal produces the listed ciphertext and tag', () => {
      const dst = new Uint8Array(SUNSCREEN.length + 16);
      expect(b.xseal(key, nonce, ad, SUNSCREEN, 0, SUNSCREEN.length, dst, 0)).toBe(SUNSCREEN.length + 16);
      expect(toHex(dst.subarray(0, SUNSCREEN.length))).toBe(toHex(ciphertext));
      expect(toHex(dst.subarray(SUNSCREEN.length))).toBe(toHex(tag));
    });

    it('xopen returns the plaintext', () => {
      const src = new Uint8Array([...ciphertext, ...tag]);
      const dst = new Uint8Array(ciphertext.length);
      expect(b.xopen(key, nonce, ad, src, 0, src.length, dst, 0)).toBe(true);
      expect(toHex(dst)).toBe(toHex(SUNSCREEN));
    });
  });

  describe('BLAKE2s', () => {
    it('RFC 7693 Appendix B: BLAKE2s-256("abc")', () => {
      const out = new Uint8Array(32);
      b.hash(out, utf8('abc'));
      expect(toHex(out)).toBe('508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982');
    });

    it('hashes the concatenation of its parts', () => {
      const out = new Uint8Array(32);
      b.hash(out, utf8('a'), new Uint8Array(0), utf8('bc'));
      expect(toHex(out)).toBe('508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982');
    });

    it('WireGuard: C = HASH(Construction) and H = HASH(C ‖ Identifier) match the published constants', () => {
      const ck = new Uint8Array(32);
      const h = new Uint8Array(32);
      b.hash(ck, utf8('Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s'));
      b.hash(h, ck, utf8('WireGuard v1 zx2c4 Jason@zx2c4.com'));
      expect(toHex(ck)).toBe('60e26daef327efc02ec335e2a025d2d016eb4206f87277f52d38d1988b78cd36');
      expect(toHex(h)).toBe('2211b361081ac566691243db458ad5322d9c6c662293e8b70ee19c65ba079ef3');
    });

    // Keyed BLAKE2s-128 (WireGuard's MAC), key 00..1f, input 00 01 02 … of length n.
    it.each([
      [0, '9536f9b267655743dee97b8a670f9f53'],
      [1, '13bacfb85b48a1223c595f8c1e7e82cb'],
      [64, 'f1efa90d2547036841ecd3627fafbc36'],
      [65, '811ff8686d23a435ecbd0bdafcd27b1b'],
      [116, '072e94ffbfc684bd8ab2a1b9dade2fd5'],
    ])('mac (keyed, 16-byte digest) of %i bytes', (n, expected) => {
      const key = sequence(32);
      const msg = sequence(n);
      const out = new Uint8Array(16);
      b.mac(out, key, msg);
      expect(toHex(out)).toBe(expected);
      // Independent cross-check with noble's keyed BLAKE2s.
      expect(toHex(blake2s(msg, { key, dkLen: 16 }))).toBe(expected);
      // Split input gives the same MAC.
      const split = new Uint8Array(16);
      b.mac(split, key, msg.subarray(0, n >> 1), msg.subarray(n >> 1));
      expect(toHex(split)).toBe(expected);
    });
  });

  describe('X25519 (RFC 7748)', () => {
    it('§5.2 vector 1', () => {
      const out = new Uint8Array(32);
      expect(
        b.dh(
          out,
          hex('a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4'),
          hex('e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c'),
        ),
      ).toBe(true);
      expect(toHex(out)).toBe('c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552');
    });

    it('§5.2 vector 2 (input u has the top bit set, which X25519 must mask)', () => {
      const out = new Uint8Array(32);
      expect(
        b.dh(
          out,
          hex('4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d'),
          hex('e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493'),
        ),
      ).toBe(true);
      expect(toHex(out)).toBe('95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957');
    });

    const alicePriv = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
    const alicePub = '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a';
    const bobPriv = hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb');
    const bobPub = 'de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f';
    const shared = '4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742';

    it('§6.1: public keys of Alice and Bob', () => {
      const out = new Uint8Array(32);
      b.publicKey(out, alicePriv);
      expect(toHex(out)).toBe(alicePub);
      b.publicKey(out, bobPriv);
      expect(toHex(out)).toBe(bobPub);
    });

    it('§6.1: both sides compute the same shared secret K', () => {
      const k1 = new Uint8Array(32);
      const k2 = new Uint8Array(32);
      expect(b.dh(k1, alicePriv, hex(bobPub))).toBe(true);
      expect(b.dh(k2, bobPriv, hex(alicePub))).toBe(true);
      expect(toHex(k1)).toBe(shared);
      expect(toHex(k2)).toBe(shared);
    });

    // Points of small order make X25519 output all zeros (RFC 7748 §6.1); dh must report false.
    it.each([
      ['u = 0', '0000000000000000000000000000000000000000000000000000000000000000'],
      ['u = 1', '0100000000000000000000000000000000000000000000000000000000000000'],
      ['u = p - 1', 'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
    ])('low-order public key %s: dh returns false and zeroes the output', (_label, u) => {
      const out = new Uint8Array(32).fill(0xaa);
      expect(b.dh(out, alicePriv, hex(u))).toBe(false);
      expect(toHex(out)).toBe('00'.repeat(32));
    });
  });
});

describe('BLAKE2 reference KAT for keyed BLAKE2s-256 (the primitive both backends use for mac)', () => {
  // blake2s-test.txt: key 000102..1f, in = 00 01 02 … of length n.
  it.each([
    [0, '48a8997da407876b3d79c0d92325ad3b89cbb754d86ab71aee047ad345fd2c49'],
    [1, '40d15fee7c328830166ac3f918650f807e7e01e177258cdc0a39b11f598066f1'],
    [2, '6bb71300644cd3991b26ccd4d274acd1adeab8b1d7914546c1198bbe9fc9d803'],
    [64, '8975b0577fd35566d750b362b0897a26c399136df07bababbde6203ff2954ed4'],
    [65, '21fe0ceb0052be7fb0f004187cacd7de67fa6eb0938d927677f2398c132317a8'],
  ])('noble blake2s keyed, %i-byte input', (n, expected) => {
    expect(toHex(blake2s(sequence(n), { key: sequence(32) }))).toBe(expected);
  });
});
