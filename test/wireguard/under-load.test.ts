/**
 * A flood of handshake initiations with a valid mac1 (bench/flood.ts's traffic) against the
 * responder's under-load path: Device.screenHandshake answers or drops them before any
 * Diffie-Hellman, cookie replies are limited per source (a flood gets no 1:1 reflection), a
 * real initiator from another address still gets its cookie and completes, and the two-step
 * screen + receiveScreened path (what the daemon's handshake ring uses) completes handshakes
 * like receive().
 */
import { describe, expect, it } from 'vitest';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { LABEL_MAC1 } from '../../src/wireguard/cookie.js';
import { RECEIVE_DROP, RECEIVE_HANDSHAKE, ReceiveResult } from '../../src/wireguard/device.js';
import { DROP_COOKIE_REQUIRED, DROP_INITIATION_DECRYPT_FAILED, DROP_INVALID_MAC1 } from '../../src/wireguard/drops.js';
import { INITIATION_SIZE, MESSAGE_INITIATION, mac1Offset, writeU32LE } from '../../src/wireguard/messages.js';
import { BACKENDS } from './backends.js';
import { VirtualNet, ipv4Packet } from './sim.js';
import { seeded } from '../crypto/helpers.js';

const INIT = 1;
const RESP = 2;
const COOKIE = 3;

/** Random initiations carrying a valid mac1 for `responderPublic` (mac2 zero). */
function floodMessages(
  backend: ReturnType<typeof createOpensslBackend>,
  responderPublic: Uint8Array,
  n: number,
): Uint8Array[] {
  const key = new Uint8Array(32);
  backend.hash(key, LABEL_MAC1, responderPublic);
  const rnd = seeded(99);
  const m1 = mac1Offset(INITIATION_SIZE);
  return Array.from({ length: n }, () => {
    const msg = rnd(INITIATION_SIZE);
    writeU32LE(msg, 0, MESSAGE_INITIATION);
    backend.mac(msg.subarray(m1, m1 + 16), key, msg.subarray(0, m1));
    msg.fill(0, m1 + 16);
    return msg;
  });
}

describe.each(BACKENDS)('$name backend: valid-mac1 initiation flood', ({ create }) => {
  function setup() {
    const backend = create();
    const net = new VirtualNet(backend, 3);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    return { backend, net, a, b };
  }

  it('not under load: each flood message costs a DH and fails to decrypt (what the ring bounds)', () => {
    const { net, b } = setup();
    const msgs = floodMessages(createOpensslBackend(), b.publicKey, 10);
    for (const m of msgs) expect(net.deliverRaw(b, m, '198.51.100.9', 4000)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_INITIATION_DECRYPT_FAILED)).toBe(10);
    expect(net.sent(b, COOKIE)).toHaveLength(0);
  });

  it('under load: screened with no DH; cookie replies at most a burst of 5 then 20/s per source', () => {
    const { net, b } = setup();
    const msgs = floodMessages(createOpensslBackend(), b.publicKey, 300);
    const out = new ReceiveResult();
    const from = { address: '198.51.100.9', port: 4000 };
    let queued = 0;
    // 300 messages over 1 s (one per 3.33 ms) from one source.
    const t0 = net.now;
    for (let i = 0; i < msgs.length; i++) {
      net.now = t0 + Math.floor((i * 1000) / msgs.length);
      if (b.device.screenHandshake(msgs[i], 0, INITIATION_SIZE, from, net.now, true, out)) queued++;
      else expect(out.reason).toBe(DROP_COOKIE_REQUIRED);
      net.drainAll();
    }
    expect(queued).toBe(0);
    expect(net.dropsOf(b, DROP_COOKIE_REQUIRED)).toBe(300);
    expect(net.dropsOf(b, DROP_INITIATION_DECRYPT_FAILED)).toBe(0); // no message reached a DH
    const replies = net.sent(b, COOKIE).length;
    // Burst 5, then one per 50 ms over ~1 s: 5 + 19 or 20.
    expect(replies).toBeGreaterThanOrEqual(24);
    expect(replies).toBeLessThanOrEqual(25);
    // A bad mac1 is dropped by the screen as well.
    const bad = msgs[0].slice();
    bad[20] ^= 1;
    expect(b.device.screenHandshake(bad, 0, INITIATION_SIZE, from, net.now, true, out)).toBe(false);
    expect(out.reason).toBe(DROP_INVALID_MAC1);
  });

  it('under a flood from one source, a real initiator elsewhere gets its cookie and completes', () => {
    const { net, a, b } = setup();
    b.underLoad = true;
    for (const m of floodMessages(createOpensslBackend(), b.publicKey, 100)) net.deliverRaw(b, m, '198.51.100.9', 4000);
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(10);
    const toA = net.sent(b, COOKIE).filter((w) => w.toAddress === a.address);
    expect(toA).toHaveLength(1);
    net.advance(6000); // a retries after Rekey-Timeout with mac2 from the cookie
    expect(net.sent(b, RESP)).toHaveLength(1);
    expect(b.delivered).toHaveLength(1);
  });

  it('screenHandshake then receiveScreened completes a handshake like receive()', () => {
    const { net, a, b } = setup();
    b.offline = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    b.offline = false;
    const init = net.sent(a, INIT)[0].bytes;
    const out = new ReceiveResult();
    const from = { address: a.address, port: a.port };
    expect(b.device.screenHandshake(init, 0, init.length, from, net.now, false, out)).toBe(true);
    expect(b.device.receiveScreened(init, 0, init.length, from, net.now, out)).toBe(RECEIVE_HANDSHAKE);
    net.drainAll();
    expect(net.sent(b, RESP)).toHaveLength(1);
    net.advance(50);
    expect(b.delivered).toHaveLength(1);
  });
});
