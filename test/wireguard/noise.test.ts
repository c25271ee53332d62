import { describe, expect, it } from 'vitest';
import { CookieChecker, CookieGenerator } from '../../src/wireguard/cookie.js';
import {
  HANDSHAKE_INITIATION_CONSUMED,
  HANDSHAKE_INITIATION_CREATED,
  HANDSHAKE_RESPONSE_CONSUMED,
  HANDSHAKE_RESPONSE_CREATED,
  HANDSHAKE_ZEROED,
  Handshake,
  INITIATION_DECRYPT_FAILED,
  INITIATION_FLOOD,
  INITIATION_OK,
  INITIATION_REPLAYED,
  NoiseContext,
  StaticIdentity,
} from '../../src/wireguard/noise.js';
import { INITIATION_SIZE, RESPONSE_SIZE } from '../../src/wireguard/messages.js';
import { tai64n } from '../../src/wireguard/tai64n.js';
import {
  WS_INITIATION_HEX,
  WS_INITIATION_TIMESTAMP_NANOS,
  WS_KEYS,
  WS_RESPONSE_HEX,
  WS_TRANSPORT_HEX,
  fromBase64,
} from './vectors.js';
import { BACKENDS } from './backends.js';
import { toHex, fromHex } from '../util/hex.js';

function nonceFor(counter: number): Uint8Array {
  const n = new Uint8Array(12);
  new DataView(n.buffer).setUint32(4, counter, true);
  return n;
}

describe.each(BACKENDS)('Noise IKpsk2 against a real WireGuard capture ($name backend)', ({ create }) => {
  const backend = create();
  const ctx = new NoiseContext(backend);
  const k = Object.fromEntries(Object.entries(WS_KEYS).map(([n, v]) => [n, fromBase64(v)])) as Record<
    keyof typeof WS_KEYS,
    Uint8Array
  >;
  const initiation = fromHex(WS_INITIATION_HEX);
  const response = fromHex(WS_RESPONSE_HEX);
  const transport = fromHex(WS_TRANSPORT_HEX);

  function responder(): { id: StaticIdentity; hs: Handshake } {
    const id = new StaticIdentity();
    id.set(backend, k.Spriv_r);
    const hs = new Handshake(k.Spub_i);
    hs.precompute(backend, id);
    return { id, hs };
  }

  function initiator(): { id: StaticIdentity; hs: Handshake } {
    const id = new StaticIdentity();
    id.set(backend, k.Spriv_i);
    const hs = new Handshake(k.Spub_r);
    hs.precompute(backend, id);
    return { id, hs };
  }

  it('the captured initiation has a valid mac1 for the responder key', () => {
    const checker = new CookieChecker(backend);
    checker.init(k.Spub_r);
    expect(checker.checkMac1(initiation, 0, INITIATION_SIZE)).toBe(true);
    checker.init(k.Spub_i);
    expect(checker.checkMac1(initiation, 0, INITIATION_SIZE)).toBe(false);
    const c2 = new CookieChecker(backend);
    c2.init(k.Spub_i);
    expect(c2.checkMac1(response, 0, RESPONSE_SIZE)).toBe(true);
  });

  it('the responder consumes the captured initiation: static key and timestamp as Wireshark reports', () => {
    const r = responder();
    const staticOut = new Uint8Array(32);
    expect(ctx.beginConsumeInitiation(r.id, initiation, 0, staticOut)).toBe(true);
    expect(toHex(staticOut)).toBe(toHex(k.Spub_i));
    expect(ctx.finishConsumeInitiation(r.hs, initiation, 0, 1000)).toBe(INITIATION_OK);
    const ts = ctx.lastConsumedTimestamp();
    expect(new DataView(ts.buffer, ts.byteOffset).getUint32(8)).toBe(WS_INITIATION_TIMESTAMP_NANOS);
    expect(r.hs.state).toBe(HANDSHAKE_INITIATION_CONSUMED);
    expect(r.hs.remoteIndex).toBe(0x30d037d8);
  });

  it('reproduces the whole exchange byte for byte (ephemeral keys, index and timestamp injected)', () => {
    // Timestamp: decrypt it from the capture with the responder's key (it is inside the AEAD).
    const r = responder();
    const st = new Uint8Array(32);
    expect(ctx.beginConsumeInitiation(r.id, initiation, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, initiation, 0, 0)).toBe(INITIATION_OK);
    const timestamp = Uint8Array.from(ctx.lastConsumedTimestamp());

    const i = initiator();
    const msg1 = new Uint8Array(INITIATION_SIZE);
    expect(ctx.createInitiation(i.id, i.hs, msg1, 0, k.Epriv_i0, timestamp, 0x30d037d8)).toBe(true);
    new CookieGenerator(backend, k.Spub_r).addMacs(msg1, 0, INITIATION_SIZE, 0);
    expect(toHex(msg1)).toBe(WS_INITIATION_HEX);
    expect(i.hs.state).toBe(HANDSHAKE_INITIATION_CREATED);

    const msg2 = new Uint8Array(RESPONSE_SIZE);
    expect(ctx.createResponse(r.hs, msg2, 0, k.Epriv_r0, 0xab7df406)).toBe(true);
    new CookieGenerator(backend, k.Spub_i).addMacs(msg2, 0, RESPONSE_SIZE, 0);
    expect(toHex(msg2)).toBe(WS_RESPONSE_HEX);
    expect(r.hs.state).toBe(HANDSHAKE_RESPONSE_CREATED);

    expect(ctx.consumeResponse(i.id, i.hs, response, 0)).toBe(true);
    expect(i.hs.state).toBe(HANDSHAKE_RESPONSE_CONSUMED);
    expect(i.hs.remoteIndex).toBe(0xab7df406);

    const iSend = new Uint8Array(32);
    const iRecv = new Uint8Array(32);
    const rSend = new Uint8Array(32);
    const rRecv = new Uint8Array(32);
    expect(ctx.deriveTransportKeys(i.hs, iSend, iRecv)).toBe(1);
    expect(ctx.deriveTransportKeys(r.hs, rSend, rRecv)).toBe(0);
    expect(toHex(iSend)).toBe(toHex(rRecv));
    expect(toHex(iRecv)).toBe(toHex(rSend));
    expect(i.hs.state).toBe(HANDSHAKE_ZEROED);
    expect(toHex(i.hs.chainKey)).toBe('0'.repeat(64));

    // Frame 3: decrypt with the responder's receive key, re-encrypt with the initiator's send key.
    const plain = new Uint8Array(transport.length - 32);
    expect(backend.open(rRecv, nonceFor(0), null, transport, 16, transport.length - 16, plain, 0)).toBe(true);
    expect(plain[0] >> 4).toBe(4); // IPv4
    expect(plain[9]).toBe(1); // ICMP
    const ihl = (plain[0] & 0xf) * 4;
    expect(plain[ihl]).toBe(8); // echo request, as Wireshark's test expects for frame 3
    const totalLen = (plain[2] << 8) | plain[3];
    expect(plain.length).toBe(Math.ceil(totalLen / 16) * 16); // padded to 16
    expect(plain.subarray(totalLen).every((b) => b === 0)).toBe(true);
    const again = new Uint8Array(transport.length);
    again.set(transport.subarray(0, 16));
    backend.seal(iSend, nonceFor(0), null, plain, 0, plain.length, again, 16);
    expect(toHex(again)).toBe(WS_TRANSPORT_HEX);
  });

  it('rejects a replayed initiation (same timestamp) and a flood (< 20 ms), accepts a newer one later', () => {
    const r = responder();
    const st = new Uint8Array(32);
    expect(ctx.beginConsumeInitiation(r.id, initiation, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, initiation, 0, 5000)).toBe(INITIATION_OK);
    expect(ctx.beginConsumeInitiation(r.id, initiation, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, initiation, 0, 10_000)).toBe(INITIATION_REPLAYED);

    const i = initiator();
    const fresh = new Uint8Array(INITIATION_SIZE);
    const later = tai64n(Date.UTC(2030, 0, 1));
    expect(ctx.createInitiation(i.id, i.hs, fresh, 0, backend.generatePrivateKey(), later, 7)).toBe(true);
    expect(ctx.beginConsumeInitiation(r.id, fresh, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, fresh, 0, 5020)).toBe(INITIATION_FLOOD);
    expect(ctx.beginConsumeInitiation(r.id, fresh, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, fresh, 0, 5021)).toBe(INITIATION_OK);
  });

  it('a bit flip anywhere in the encrypted parts fails authentication', () => {
    const st = new Uint8Array(32);
    for (const pos of [8, 39, 40, 87, 88, 115]) {
      const r = responder();
      const m = Uint8Array.from(initiation);
      m[pos] ^= 0x01;
      const began = ctx.beginConsumeInitiation(r.id, m, 0, st);
      if (pos >= 88) {
        expect(began).toBe(true);
        expect(ctx.finishConsumeInitiation(r.hs, m, 0, 0)).toBe(INITIATION_DECRYPT_FAILED);
      } else {
        expect(began).toBe(false);
      }
      expect(r.hs.state).toBe(HANDSHAKE_ZEROED);
    }
    for (const pos of [12, 44, 59]) {
      const i = initiator();
      const st2 = new Uint8Array(32);
      const r = responder();
      ctx.beginConsumeInitiation(r.id, initiation, 0, st2);
      ctx.finishConsumeInitiation(r.hs, initiation, 0, 0);
      const ts = Uint8Array.from(ctx.lastConsumedTimestamp());
      const m1 = new Uint8Array(INITIATION_SIZE);
      ctx.createInitiation(i.id, i.hs, m1, 0, k.Epriv_i0, ts, 0x30d037d8);
      const m = Uint8Array.from(response);
      m[pos] ^= 0x80;
      expect(ctx.consumeResponse(i.id, i.hs, m, 0)).toBe(false);
      expect(i.hs.state).toBe(HANDSHAKE_INITIATION_CREATED);
      expect(ctx.consumeResponse(i.id, i.hs, response, 0)).toBe(true);
    }
  });

  it('PSK: both sides must agree on it', () => {
    const psk = new Uint8Array(32).fill(0x42);
    const i = initiator();
    const r = responder();
    i.hs.presharedKey.set(psk);
    r.hs.presharedKey.set(psk);
    const m1 = new Uint8Array(INITIATION_SIZE);
    expect(ctx.createInitiation(i.id, i.hs, m1, 0, backend.generatePrivateKey(), tai64n(1e12), 1)).toBe(true);
    const st = new Uint8Array(32);
    expect(ctx.beginConsumeInitiation(r.id, m1, 0, st)).toBe(true);
    expect(ctx.finishConsumeInitiation(r.hs, m1, 0, 0)).toBe(INITIATION_OK);
    const m2 = new Uint8Array(RESPONSE_SIZE);
    expect(ctx.createResponse(r.hs, m2, 0, backend.generatePrivateKey(), 2)).toBe(true);
    const wrong = initiator();
    wrong.hs.presharedKey.fill(0x43);
    const m1b = new Uint8Array(INITIATION_SIZE);
    ctx.createInitiation(wrong.id, wrong.hs, m1b, 0, backend.generatePrivateKey(), tai64n(1e12), 1);
    wrong.hs.localEphemeral.set(i.hs.localEphemeral);
    wrong.hs.hash.set(i.hs.hash);
    wrong.hs.chainKey.set(i.hs.chainKey);
    expect(ctx.consumeResponse(wrong.id, wrong.hs, m2, 0)).toBe(false);
    expect(ctx.consumeResponse(i.id, i.hs, m2, 0)).toBe(true);
  });

  it('without a private key no initiation is made and none is consumed', () => {
    const none = new StaticIdentity();
    const hs = new Handshake(k.Spub_r);
    hs.precompute(backend, none);
    expect(ctx.createInitiation(none, hs, new Uint8Array(INITIATION_SIZE), 0, k.Epriv_i0, tai64n(0), 1)).toBe(false);
    expect(ctx.beginConsumeInitiation(none, initiation, 0, new Uint8Array(32))).toBe(false);
  });
});
