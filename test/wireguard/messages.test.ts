import { describe, expect, it } from 'vitest';
import {
  CLASSIFY_BAD_LENGTH,
  CLASSIFY_TOO_SHORT,
  CLASSIFY_UNKNOWN_TYPE,
  COOKIE_REPLY_SIZE,
  INITIATION_SIZE,
  MESSAGE_COOKIE_REPLY,
  MESSAGE_INITIATION,
  MESSAGE_RESPONSE,
  MESSAGE_TRANSPORT,
  RESPONSE_SIZE,
  TRANSPORT_MIN_SIZE,
  classifyMessage,
  decodeCookieReply,
  decodeInitiation,
  decodeResponse,
  decodeTransport,
  isHandshakeMessage,
  mac1Offset,
  mac2Offset,
  INITIATION_MAC1_OFFSET,
  INITIATION_MAC2_OFFSET,
  RESPONSE_MAC1_OFFSET,
  RESPONSE_MAC2_OFFSET,
  readU32LE,
  writeU32LE,
  writeTransportHeader,
} from '../../src/wireguard/messages.js';
import { createPureBackend } from '../../src/crypto/pure.js';
import { CookieChecker } from '../../src/wireguard/cookie.js';
import { WS_INITIATION_HEX, WS_RESPONSE_HEX, WS_TRANSPORT_HEX } from './vectors.js';
import { toHex, fromHex } from '../util/hex.js';

describe('message layout', () => {
  it('has the whitepaper sizes and mac offsets', () => {
    expect(INITIATION_SIZE).toBe(148);
    expect(RESPONSE_SIZE).toBe(92);
    expect(COOKIE_REPLY_SIZE).toBe(64);
    expect(TRANSPORT_MIN_SIZE).toBe(32);
    expect(mac1Offset(INITIATION_SIZE)).toBe(INITIATION_MAC1_OFFSET);
    expect(mac2Offset(INITIATION_SIZE)).toBe(INITIATION_MAC2_OFFSET);
    expect(mac1Offset(RESPONSE_SIZE)).toBe(RESPONSE_MAC1_OFFSET);
    expect(mac2Offset(RESPONSE_SIZE)).toBe(RESPONSE_MAC2_OFFSET);
  });

  it('decodes the fields of a real capture (little-endian indices chain across messages)', () => {
    const init = decodeInitiation(fromHex(WS_INITIATION_HEX));
    const resp = decodeResponse(fromHex(WS_RESPONSE_HEX));
    const t = fromHex(WS_TRANSPORT_HEX);
    const data = decodeTransport(t, 0, t.length);
    expect(init.sender).toBe(0x30d037d8);
    expect(resp.receiver).toBe(init.sender);
    expect(resp.sender).toBe(0xab7df406);
    expect(data.receiver).toBe(resp.sender);
    expect(data.counter).toBe(0n);
    expect(toHex(init.ephemeral)).toBe('5fcec7c8e5c8e2e3f7989eef60c228d82329d602b6b1e2bb9d068f89cf9d4d45');
    expect(toHex(init.mac2)).toBe('0'.repeat(32));
  });

  it('a cookie reply (§5.4.7) answers the sender index of the message it replies to', () => {
    const init = fromHex(WS_INITIATION_HEX);
    const nonce = Uint8Array.from({ length: 24 }, (_, i) => 0xa0 + i);
    const out = new Uint8Array(3 + COOKIE_REPLY_SIZE);
    const n = new CookieChecker(createPureBackend()).createReply(
      init,
      0,
      init.length,
      Uint8Array.of(192, 0, 2, 1, 0xca, 0x6c),
      0,
      nonce,
      out,
      3,
    );
    expect(n).toBe(COOKIE_REPLY_SIZE);
    expect(classifyMessage(out, 3, n)).toBe(MESSAGE_COOKIE_REPLY);
    const reply = decodeCookieReply(out, 3);
    expect(reply.receiver).toBe(decodeInitiation(init).sender);
    expect(toHex(reply.nonce)).toBe(toHex(nonce));
    expect(reply.encryptedCookie.length).toBe(32); // 16-byte cookie + Poly1305 tag
  });

  it('round-trips little-endian words and the transport header', () => {
    const b = new Uint8Array(20);
    writeU32LE(b, 1, 0xdeadbeef);
    expect(readU32LE(b, 1)).toBe(0xdeadbeef);
    writeTransportHeader(b, 2, 0x01020304, 0xffffffff, 0x89abcdef);
    const d = decodeTransport(b, 2, 18);
    expect(d.receiver).toBe(0x01020304);
    expect(d.counter).toBe(0x89abcdefffffffffn);
    expect(readU32LE(b, 2)).toBe(MESSAGE_TRANSPORT);
  });
});

describe('classifyMessage', () => {
  const cases: [string, string, number][] = [
    ['initiation', WS_INITIATION_HEX, MESSAGE_INITIATION],
    ['response', WS_RESPONSE_HEX, MESSAGE_RESPONSE],
    ['transport', WS_TRANSPORT_HEX, MESSAGE_TRANSPORT],
  ];
  for (const [name, hex, type] of cases) {
    it(`${name}: exact message accepted, at an odd offset too`, () => {
      const m = fromHex(hex);
      expect(classifyMessage(m, 0, m.length)).toBe(type);
      const big = new Uint8Array(m.length + 7);
      big.set(m, 3);
      expect(classifyMessage(big, 3, m.length)).toBe(type);
    });

    it(`${name}: any non-zero reserved byte makes the type unknown`, () => {
      for (let i = 1; i < 4; i++) {
        const m = fromHex(hex);
        m[i] = 1;
        expect(classifyMessage(m, 0, m.length)).toBe(CLASSIFY_UNKNOWN_TYPE);
        expect(isHandshakeMessage(m, 0, m.length)).toBe(false);
      }
    });
  }

  it('handshake messages must have their exact size', () => {
    for (const [type, size] of [
      [1, 148],
      [2, 92],
      [3, 64],
    ]) {
      const m = new Uint8Array(size + 1);
      m[0] = type;
      expect(classifyMessage(m, 0, size)).toBe(type);
      expect(classifyMessage(m, 0, size - 1)).toBe(CLASSIFY_BAD_LENGTH);
      expect(classifyMessage(m, 0, size + 1)).toBe(CLASSIFY_BAD_LENGTH);
      expect(isHandshakeMessage(m, 0, size)).toBe(true);
    }
    const c = new Uint8Array(64);
    c[0] = 3;
    expect(classifyMessage(c, 0, 64)).toBe(MESSAGE_COOKIE_REPLY);
  });

  it('transport needs at least header + tag; shorter than a type word is too short', () => {
    const m = new Uint8Array(40);
    m[0] = 4;
    expect(classifyMessage(m, 0, 31)).toBe(CLASSIFY_TOO_SHORT);
    expect(classifyMessage(m, 0, 32)).toBe(MESSAGE_TRANSPORT);
    expect(classifyMessage(m, 0, 40)).toBe(MESSAGE_TRANSPORT);
    expect(classifyMessage(m, 0, 3)).toBe(CLASSIFY_TOO_SHORT);
    expect(classifyMessage(m, 0, 0)).toBe(CLASSIFY_TOO_SHORT);
    expect(isHandshakeMessage(m, 0, 40)).toBe(false);
  });

  it('types 0 and 5..255 are unknown', () => {
    const m = new Uint8Array(148);
    for (const t of [0, 5, 6, 0x80, 0xff]) {
      m[0] = t;
      expect(classifyMessage(m, 0, 148)).toBe(CLASSIFY_UNKNOWN_TYPE);
    }
  });
});

describe('drop reasons', () => {
  it('every reason has a distinct name', async () => {
    const d = await import('../../src/wireguard/drops.js');
    expect(d.DROP_REASON_NAMES).toHaveLength(d.DROP_REASON_COUNT);
    expect(new Set(d.DROP_REASON_NAMES).size).toBe(d.DROP_REASON_COUNT);
    const values = Object.entries(d)
      .filter(([k]) => k.startsWith('DROP_') && k !== 'DROP_REASON_COUNT' && k !== 'DROP_REASON_NAMES')
      .map(([, v]) => v as number);
    expect(values.sort((x, y) => x - y)).toEqual(Array.from({ length: d.DROP_REASON_COUNT }, (_, i) => i));
  });

  it('Device.isHandshakeMessage matches the classifier', async () => {
    const { Device } = await import('../../src/wireguard/device.js');
    expect(Device.isHandshakeMessage(fromHex(WS_INITIATION_HEX), 0, 148)).toBe(true);
    expect(Device.isHandshakeMessage(fromHex(WS_TRANSPORT_HEX), 0, 128)).toBe(false);
  });
});
