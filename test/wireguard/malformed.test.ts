/**
 * Every message type truncated, extended, bit-flipped and with bad reserved bytes: always a
 * counted drop (exactly one counter step), never an exception, and never a change of state
 * (the genuine message is still accepted afterwards).
 */
import { describe, expect, it } from 'vitest';
import { RECEIVE_DELIVER, RECEIVE_DROP, RECEIVE_HANDSHAKE } from '../../src/wireguard/device.js';
import { CookieGenerator } from '../../src/wireguard/cookie.js';
import {
  DROP_BAD_LENGTH,
  DROP_COOKIE_REQUIRED,
  DROP_INITIATION_DECRYPT_FAILED,
  DROP_INVALID_MAC1,
  DROP_RESPONSE_DECRYPT_FAILED,
  DROP_TOO_SHORT,
  DROP_UNKNOWN_RECEIVER,
  DROP_UNKNOWN_TYPE,
} from '../../src/wireguard/drops.js';
import { BACKENDS } from './backends.js';
import { VirtualNet, ipv4Packet, type SimNode } from './sim.js';
import { Prng } from '../util/prng.js';

function totalDrops(n: SimNode): number {
  return n.device.drops.reduce((s, x) => s + x, 0);
}

describe.each(BACKENDS)('malformed messages are counted drops ($name backend)', ({ create }) => {
  const backend = create();

  function world() {
    const net = new VirtualNet(backend, 11);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    return { net, a, b };
  }

  /** Delivers `m` to `to` and checks: a drop, exactly one counter step, with `reason` if given. */
  function expectDrop(net: VirtualNet, to: SimNode, from: SimNode, m: Uint8Array, reason?: number): void {
    const before = totalDrops(to);
    const beforeReason = reason === undefined ? 0 : to.device.drops[reason];
    let code = -1;
    expect(() => {
      code = net.deliverRaw(to, m, from.address, from.port);
    }).not.toThrow();
    expect(code).toBe(RECEIVE_DROP);
    expect(totalDrops(to)).toBe(before + 1);
    if (reason !== undefined) expect(to.device.drops[reason]).toBe(beforeReason + 1);
  }

  function lengthVariants(m: Uint8Array): Uint8Array[] {
    const out = [m.subarray(0, 0), m.subarray(0, 1), m.subarray(0, 3), m.subarray(0, 4), m.subarray(0, m.length - 1)];
    const longer = new Uint8Array(m.length + 1);
    longer.set(m);
    out.push(longer);
    const much = new Uint8Array(m.length + 100);
    much.set(m);
    out.push(much);
    return out;
  }

  it('handshake initiation', () => {
    const { net, a, b } = world();
    b.offline = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    b.offline = false;
    const init = net.sent(a, 1)[0].bytes;
    for (const v of lengthVariants(init)) expectDrop(net, b, a, v, v.length < 4 ? DROP_TOO_SHORT : DROP_BAD_LENGTH);
    // One flipped bit in every byte before mac2: mac1 (or the type word) rejects it before any DH.
    // (A flip in byte 0 turns the type into another type or none: bad length or unknown type.)
    for (let pos = 0; pos < 132; pos++) {
      const m = Uint8Array.from(init);
      m[pos] ^= 1 << (pos % 8);
      expectDrop(net, b, a, m, pos === 0 ? undefined : pos < 4 ? DROP_UNKNOWN_TYPE : DROP_INVALID_MAC1);
    }
    // An attacker who knows B's public key can recompute mac1: the AEADs still reject it.
    const macs = new CookieGenerator(backend, b.publicKey);
    for (let pos = 8; pos < 116; pos++) {
      const m = Uint8Array.from(init);
      m[pos] ^= 0x80 >> (pos % 8);
      macs.addMacs(m, 0, m.length, net.now);
      expectDrop(net, b, a, m, DROP_INITIATION_DECRYPT_FAILED);
    }
    // mac2 is only checked under load; a corrupted mac2 then earns a cookie reply, not a DH.
    b.underLoad = true;
    for (let pos = 132; pos < 148; pos++) {
      const m = Uint8Array.from(init);
      m[pos] ^= 1;
      expectDrop(net, b, a, m, DROP_COOKIE_REQUIRED);
    }
    b.underLoad = false;
    net.now += 2000;
    // State untouched: the genuine message is still accepted.
    expect(net.deliverRaw(b, init, a.address, a.port)).toBe(RECEIVE_HANDSHAKE);
  });

  it('handshake response', () => {
    const { net, a, b } = world();
    a.offline = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(5);
    a.offline = false;
    const resp = net.sent(b, 2)[0].bytes;
    for (const v of lengthVariants(resp)) expectDrop(net, a, b, v, v.length < 4 ? DROP_TOO_SHORT : DROP_BAD_LENGTH);
    for (let pos = 0; pos < 76; pos++) {
      const m = Uint8Array.from(resp);
      m[pos] ^= 1 << (pos % 8);
      expectDrop(net, a, b, m, pos === 0 ? undefined : pos < 4 ? DROP_UNKNOWN_TYPE : DROP_INVALID_MAC1);
    }
    const macs = new CookieGenerator(backend, a.publicKey);
    for (let pos = 8; pos < 60; pos++) {
      const m = Uint8Array.from(resp);
      m[pos] ^= 0x80 >> (pos % 8);
      macs.addMacs(m, 0, m.length, net.now);
      expectDrop(net, a, b, m, pos < 12 ? DROP_UNKNOWN_RECEIVER : DROP_RESPONSE_DECRYPT_FAILED);
    }
    a.underLoad = true;
    for (let pos = 76; pos < 92; pos++) {
      const m = Uint8Array.from(resp);
      m[pos] ^= 1;
      expectDrop(net, a, b, m, DROP_COOKIE_REQUIRED);
    }
    a.underLoad = false;
    net.now += 2000;
    expect(net.deliverRaw(a, resp, b.address, b.port)).toBe(RECEIVE_HANDSHAKE);
  });

  it('cookie reply', () => {
    const { net, a, b } = world();
    b.underLoad = true;
    a.offline = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(5);
    a.offline = false;
    const cookie = net.sent(b, 3)[0].bytes;
    expect(cookie.length).toBe(64);
    for (const v of lengthVariants(cookie)) expectDrop(net, a, b, v, v.length < 4 ? DROP_TOO_SHORT : DROP_BAD_LENGTH);
    for (let pos = 0; pos < 64; pos++) {
      const m = Uint8Array.from(cookie);
      m[pos] ^= 1 << (pos % 8);
      expectDrop(
        net,
        a,
        b,
        m,
        pos === 0 ? undefined : pos < 4 ? DROP_UNKNOWN_TYPE : pos < 8 ? DROP_UNKNOWN_RECEIVER : undefined,
      );
    }
    expect(net.deliverRaw(a, cookie, b.address, b.port)).toBe(RECEIVE_HANDSHAKE);
  });

  it('transport data', () => {
    const { net, a, b } = world();
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(20);
    b.offline = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 100));
    b.offline = false;
    const data = net.wire[net.wire.length - 1].bytes;
    expect(data[0]).toBe(4);
    for (const v of lengthVariants(data)) expectDrop(net, b, a, v);
    expectDrop(net, b, a, data.subarray(0, 31), DROP_TOO_SHORT);
    expectDrop(net, b, a, data.subarray(0, 32));
    for (let pos = 0; pos < data.length; pos++) {
      const m = Uint8Array.from(data);
      m[pos] ^= 1 << (pos % 8);
      expectDrop(
        net,
        b,
        a,
        m,
        pos === 0 ? undefined : pos < 4 ? DROP_UNKNOWN_TYPE : pos < 8 ? DROP_UNKNOWN_RECEIVER : undefined,
      );
    }
    expect(net.deliverRaw(b, data, a.address, a.port)).toBe(RECEIVE_DELIVER);
  });

  it('random garbage with plausible type words never throws', () => {
    const { net, a, b } = world();
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(20);
    const rng = new Prng(99);
    const sizes = [0, 1, 4, 31, 32, 33, 64, 92, 148, 200, 1500];
    for (let i = 0; i < 3000; i++) {
      const len = i % 3 === 0 ? sizes[rng.int(0, sizes.length - 1)] : rng.int(0, 300);
      const m = rng.bytes(len);
      if (len >= 4 && rng.next() < 0.8) {
        m[0] = rng.int(1, 4);
        m[1] = 0;
        m[2] = 0;
        m[3] = 0;
      }
      if (len >= 8 && m[0] === 4 && rng.next() < 0.5) m.set(net.sent(a, 4)[0].bytes.subarray(4, 8), 4); // a live receiver index
      const target = rng.next() < 0.5 ? a : b;
      target.underLoad = rng.next() < 0.2;
      expectDrop(net, target, target === a ? b : a, m);
    }
  });
});
