import { describe, expect, it } from 'vitest';
import {
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  RECEIVE_HANDSHAKE,
  RECEIVE_KEEPALIVE,
} from '../../src/wireguard/device.js';
import { paddedLength } from '../../src/wireguard/padding.js';
import {
  DROP_COOKIE_REQUIRED,
  DROP_DECRYPT_FAILED,
  DROP_INITIATION_FLOOD,
  DROP_INITIATION_REPLAY,
  DROP_INNER_INVALID,
  DROP_INNER_SOURCE_NOT_ALLOWED,
  DROP_KEYPAIR_EXPIRED,
  DROP_NO_ROUTE,
  DROP_OUTBOUND_INVALID,
  DROP_RATE_LIMITED,
  DROP_REPLAYED_COUNTER,
  DROP_RESPONSE_DECRYPT_FAILED,
  DROP_STAGED_FLUSHED,
  DROP_STAGED_QUEUE_FULL,
  DROP_UNKNOWN_RECEIVER,
} from '../../src/wireguard/drops.js';
import {
  KEEPALIVE_TIMEOUT,
  MAX_TIMER_HANDSHAKES,
  REJECT_AFTER_TIME,
  REKEY_AFTER_TIME,
  REKEY_TIMEOUT,
  REKEY_TIMEOUT_JITTER_MAX,
  ZERO_KEY_MATERIAL_AFTER,
} from '../../src/wireguard/constants.js';
import { KEEPALIVE_SIZE } from '../../src/wireguard/messages.js';
import { BACKENDS } from './backends.js';
import { T0, VirtualNet, ipv4Packet, ipv6Packet, type SimNode } from './sim.js';

const INIT = 1;
const RESP = 2;
const COOKIE = 3;
const DATA = 4;

function setup(
  backend: ReturnType<(typeof BACKENDS)[number]['create']>,
  seed = 1,
  psk: [Uint8Array | null, Uint8Array | null] = [null, null],
) {
  const net = new VirtualNet(backend, seed);
  const a = net.addNode('a', '192.0.2.1');
  const b = net.addNode('b', '192.0.2.2');
  a.connect(b, ['10.2.0.0/16', 'fd02::/64'], true, psk[0]);
  b.connect(a, ['10.1.0.0/16', 'fd01::/64'], true, psk[1]);
  return { net, a, b };
}

function same(x: Uint8Array, y: Uint8Array): boolean {
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** Completes a handshake initiated by `from` by sending one packet and running the network. */
function establish(net: VirtualNet, from: SimNode, to: SimNode, v6 = false): Uint8Array {
  const pkt = v6
    ? ipv6Packet(from === net.nodes[0] ? 'fd01::1' : 'fd02::1', from === net.nodes[0] ? 'fd02::1' : 'fd01::1', 100)
    : ipv4Packet(from === net.nodes[0] ? '10.1.0.1' : '10.2.0.1', from === net.nodes[0] ? '10.2.0.1' : '10.1.0.1', 100);
  from.send(pkt);
  net.advance(50);
  return pkt;
}

describe.each(BACKENDS)('Device over a virtual network ($name backend)', ({ create }) => {
  const backend = create();

  it('handshake from A, then data both ways, IPv4 and IPv6', () => {
    const { net, a, b } = setup(backend);
    const p1 = ipv4Packet('10.1.0.1', '10.2.0.7', 200);
    expect(a.send(p1)).toBe(ENCRYPT_STAGED);
    expect(net.sent(a, INIT)).toHaveLength(1);
    net.advance(10);
    expect(net.sent(b, RESP)).toHaveLength(1);
    expect(b.delivered).toHaveLength(1);
    expect(same(b.delivered[0], p1)).toBe(true);
    // Now a session exists both ways: direct in-place encryption.
    const p2 = ipv6Packet('fd02::9', 'fd01::3', 333);
    expect(b.send(p2)).toBe(ENCRYPT_SEND);
    const p3 = ipv6Packet('fd01::3', 'fd02::9', 1);
    expect(a.send(p3)).toBe(ENCRYPT_SEND);
    net.advance(10);
    expect(a.delivered.map((d) => same(d, p2))).toEqual([true]);
    expect(b.delivered.map((d) => same(d, p3))).toEqual([false, true]);
    expect(net.sent(a, INIT)).toHaveLength(1);
    expect(net.sent(b, INIT)).toHaveLength(0);
    const pa = a.peerOf(b);
    const pb = b.peerOf(a);
    expect(pa.lastHandshakeMs).toBeGreaterThanOrEqual(T0);
    expect(pb.lastHandshakeMs).toBeGreaterThanOrEqual(T0);
    // Byte counters: UDP payload sizes of everything authenticated, both directions agree.
    expect(pa.txBytes).toBe(pb.rxBytes);
    expect(pb.txBytes).toBe(pa.rxBytes);
    expect(pa.txBytes).toBe(148 + net.sent(a, DATA).reduce((s, w) => s + w.bytes.length, 0));
    // Packet counters: the same messages as datagrams (A: initiation + data, B: response + data).
    expect(pa.txPackets).toBe(pb.rxPackets);
    expect(pb.txPackets).toBe(pa.rxPackets);
    expect(pa.txPackets).toBe(1 + net.sent(a, DATA).length);
    expect(pb.txPackets).toBe(1 + net.sent(b, DATA).length);
  });

  it('handshake initiated by B works the same (roles swap)', () => {
    const { net, a, b } = setup(backend);
    establish(net, b, a);
    expect(net.sent(b, INIT)).toHaveLength(1);
    expect(a.delivered).toHaveLength(1);
    expect(b.peerOf(a).keypairs.current!.isInitiator).toBe(true);
    expect(a.peerOf(b).keypairs.current!.isInitiator).toBe(false);
  });

  it('responder keeps the new keypair in "next" until the first transport message confirms it', () => {
    const { net, a, b } = setup(backend);
    a.device.initiateHandshake(a.peerOf(b), net.now);
    net.drainAll();
    // Deliver only the initiation: stop A from receiving the response.
    a.offline = true;
    net.advance(5);
    const kb = b.peerOf(a).keypairs;
    expect(kb.next).not.toBeNull();
    expect(kb.current).toBeNull();
    // B cannot send yet: packets are staged.
    expect(b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10))).toBe(ENCRYPT_STAGED);
    a.offline = false;
    // Retransmission makes a new handshake; complete it and let A's keepalive confirm.
    net.advance(REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX + 20);
    expect(kb.current).not.toBeNull();
    expect(kb.next).toBeNull();
    expect(a.delivered).toHaveLength(1); // B's staged packet went out once the session was confirmed
  });

  it('simultaneous initiations from both sides converge to one working session each way', () => {
    const { net, a, b } = setup(backend, 12);
    net.delay = 20; // both initiations are in flight at the same time
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    net.advance(2 * (REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX) + 200);
    expect(b.delivered).toHaveLength(1);
    expect(a.delivered).toHaveLength(1);
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 11))).toBe(ENCRYPT_SEND);
    expect(b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 11))).toBe(ENCRYPT_SEND);
    net.advance(100);
    expect(b.delivered).toHaveLength(2);
    expect(a.delivered).toHaveLength(2);
  });

  it('a response to an initiation its initiator replaced is a counted unknown_receiver, and nothing else is lost', () => {
    // Both sides initiate at once: consuming the other's initiation replaces each side's own
    // handshake state and index (whitepaper §5.4.2, as wireguard-go), so each side's response
    // then arrives for an index its receiver no longer holds. The same happens to a response
    // that arrives after its initiator retried. Counted, never fatal: the retry completes.
    const { net, a, b } = setup(backend, 12);
    net.delay = 20;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    net.advance(100);
    expect(net.dropsOf(a, DROP_UNKNOWN_RECEIVER)).toBe(1);
    expect(net.dropsOf(b, DROP_UNKNOWN_RECEIVER)).toBe(1);
    net.advance(2 * (REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX));
    expect([a.delivered.length, b.delivered.length]).toEqual([1, 1]);
    const total = (n: SimNode): number => n.device.drops.reduce((x, y) => x + y, 0);
    expect([total(a), total(b)]).toEqual([1, 1]);
  });

  it('a response delayed past its initiation retry is a counted unknown_receiver; the retry completes', () => {
    const { net, a, b } = setup(backend);
    net.delay = 3_000; // the first initiation and its response take 6 s: the retry leaves first
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(3_001);
    net.delay = 1;
    net.advance(4_000);
    expect(net.sent(a, INIT)).toHaveLength(2);
    expect(b.delivered).toHaveLength(1);
    expect(net.dropsOf(a, DROP_UNKNOWN_RECEIVER)).toBe(1);
    expect(a.device.drops.reduce((x, y) => x + y, 0)).toBe(1);
  });

  it('pads plaintext to 16 bytes (capped at the MTU) and trims it on delivery', () => {
    expect(paddedLength(1, 1420)).toBe(16);
    expect(paddedLength(16, 1420)).toBe(16);
    expect(paddedLength(1419, 1420)).toBe(1420);
    expect(paddedLength(1420, 1420)).toBe(1420);
    expect(paddedLength(1405, 1420)).toBe(1408);
    expect(paddedLength(0, 1420)).toBe(0);
    expect(paddedLength(17, 0)).toBe(32);
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    for (const n of [1, 15, 16, 17, 100, 1380]) {
      const p = ipv4Packet('10.1.0.1', '10.2.0.1', n);
      expect(a.send(p)).toBe(ENCRYPT_SEND);
      const w = net.wire[net.wire.length - 1];
      expect(w.bytes.length).toBe(32 + paddedLength(p.length, 1420));
      net.advance(5);
      expect(same(b.delivered[b.delivered.length - 1], p)).toBe(true);
    }
  });

  it('passive keepalive: 10 s after receiving data with nothing to send', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const t = net.now;
    net.advance(KEEPALIVE_TIMEOUT - 100);
    expect(net.sent(b, DATA, t)).toHaveLength(0);
    net.advance(200);
    const ka = net.sent(b, DATA, t);
    expect(ka).toHaveLength(1);
    expect(ka[0].bytes.length).toBe(KEEPALIVE_SIZE);
    expect(a.results.some(([code]) => code === RECEIVE_KEEPALIVE)).toBe(true);
    // One-way traffic for 35 s: B keeps answering with keepalives about every 10 s.
    const t2 = net.now;
    for (let i = 0; i < 35; i++) {
      a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 20));
      net.advance(1000);
    }
    const kas = net.sent(b, DATA, t2);
    expect(kas.length).toBeGreaterThanOrEqual(3);
    expect(kas.length).toBeLessThanOrEqual(4);
    expect(kas.every((w) => w.bytes.length === KEEPALIVE_SIZE)).toBe(true);
    expect(net.sent(a, INIT, t2)).toHaveLength(0); // keepalives keep A from re-handshaking
  });

  it('persistent keepalive every N seconds, starting when switched on', () => {
    const { net, a, b } = setup(backend);
    a.device.setPersistentKeepalive(a.peerOf(b), 25, net.now);
    net.drainAll();
    expect(net.sent(a, INIT)).toHaveLength(1); // keepalive needs a session
    net.advance(100);
    const t = net.now;
    net.advance(100_000);
    const kas = net.sent(a, DATA, t).filter((w) => w.bytes.length === KEEPALIVE_SIZE);
    expect(kas.length).toBe(4);
  });

  it('initiator rekeys after REKEY_AFTER_TIME when sending, without losing packets', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const first = a.peerOf(b).keypairs.current!;
    let sent = 1;
    for (let s = 0; s < 200; s++) {
      a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 40));
      sent++;
      net.advance(1000);
      const cur = a.peerOf(b).keypairs.current!;
      if (net.now - T0 < REKEY_AFTER_TIME) expect(cur).toBe(first);
    }
    const inits = net.sent(a, INIT);
    expect(inits.length).toBe(2);
    expect(inits[1].time - inits[0].time).toBeGreaterThan(REKEY_AFTER_TIME);
    expect(inits[1].time - inits[0].time).toBeLessThan(REKEY_AFTER_TIME + 2000);
    expect(a.peerOf(b).keypairs.current).not.toBe(first);
    expect(b.delivered).toHaveLength(sent);
    expect(net.sent(b, INIT)).toHaveLength(0); // the responder never rekeys by time
  });

  it('initiator rekeys when receiving on a keypair older than 165 s (once)', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    net.advance(KEEPALIVE_TIMEOUT + 1000); // B's keepalive reaches A; then everything is quiet
    const quiet = net.now;
    expect(net.sent(a, INIT, quiet)).toHaveLength(0);
    net.advanceTo(T0 + 160_000);
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    net.advance(10);
    expect(net.sent(a, INIT, quiet)).toHaveLength(0);
    net.advanceTo(T0 + 166_000);
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    expect(net.sent(a, INIT, quiet)).toHaveLength(0);
    net.advance(2); // delivery to A triggers it
    expect(net.sent(a, INIT, quiet)).toHaveLength(1);
  });

  it('rekeys after REKEY_AFTER_MESSAGES and stops at REJECT_AFTER_MESSAGES (exact 64-bit counters)', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    net.advance(REKEY_TIMEOUT); // handshakes are paced: at most one initiation per Rekey-Timeout
    const kp = a.peerOf(b).keypairs.current!;
    const before = net.sent(a, INIT).length;
    kp.setSendCounter(0xffffffff, 0x0fffffff); // 2^60 - 1
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 8))).toBe(ENCRYPT_SEND);
    expect(net.sent(a, INIT)).toHaveLength(before);
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 8))).toBe(ENCRYPT_SEND); // counter 2^60, next 2^60+1
    expect(net.sent(a, INIT)).toHaveLength(before + 1);
    // The receiver's window jumps forward exactly.
    net.advance(5);
    expect(b.delivered).toHaveLength(3);

    const { net: n2, a: a2, b: b2 } = setup(backend, 2);
    establish(n2, a2, b2);
    const kp2 = a2.peerOf(b2).keypairs.current!;
    kp2.setSendCounter(0xffffdffe, 0xffffffff); // 2^64 - 2^13 - 2: the last usable counter
    expect(a2.send(ipv4Packet('10.1.0.1', '10.2.0.1', 8))).toBe(ENCRYPT_SEND);
    const last = n2.wire[n2.wire.length - 1];
    expect(Array.from(last.bytes.subarray(8, 16))).toEqual([0xfe, 0xdf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    n2.advance(5);
    expect(b2.delivered).toHaveLength(2);
    expect(kp2.sendExhausted).toBe(true);
    expect(a2.send(ipv4Packet('10.1.0.1', '10.2.0.1', 8))).toBe(ENCRYPT_STAGED);
  });

  it('retries the handshake every 5 s and gives up after the attempt budget, dropping staged packets', () => {
    const net = new VirtualNet(backend, 3);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    b.offline = true;
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10))).toBe(ENCRYPT_STAGED);
    net.advance(200_000);
    const inits = net.sent(a, INIT);
    // The first initiation plus MAX_TIMER_HANDSHAKES + 1 retransmissions (wireguard-go counts 20).
    expect(inits).toHaveLength(MAX_TIMER_HANDSHAKES + 2);
    for (let i = 1; i < inits.length; i++) {
      const gap = inits[i].time - inits[i - 1].time;
      expect(gap).toBeGreaterThanOrEqual(REKEY_TIMEOUT);
      expect(gap).toBeLessThan(REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX);
    }
    expect(net.dropsOf(a, DROP_STAGED_FLUSHED)).toBe(1);
    expect(a.peerOf(b).stagedCount).toBe(0);
    // Every initiation re-keyed: distinct ephemeral keys and sender indices.
    expect(new Set(inits.map((w) => Buffer.from(w.bytes.subarray(8, 40)).toString('hex'))).size).toBe(inits.length);
    // After giving up, only the zero-key-material timer remains.
    const giveUp = inits[inits.length - 1].time;
    expect(a.device.nextDeadline()).toBeGreaterThan(giveUp + ZERO_KEY_MATERIAL_AFTER - 10_000);
    // New data starts a fresh round.
    b.offline = false;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(100);
    expect(b.delivered).toHaveLength(1);
  });

  it('rejects transport data on a keypair older than REJECT_AFTER_TIME; new data re-handshakes', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 30));
    const captured = net.wire[net.wire.length - 1];
    expect(captured.type).toBe(DATA);
    net.advance(20_000);
    const t = a.peerOf(b).keypairs.current!.created;
    net.advanceTo(t + REJECT_AFTER_TIME - 1000);
    expect(net.deliverRaw(a, captured.bytes, b.address, b.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(a, DROP_REPLAYED_COUNTER)).toBe(1);
    net.advanceTo(t + REJECT_AFTER_TIME + 1);
    expect(net.deliverRaw(a, captured.bytes, b.address, b.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(a, DROP_KEYPAIR_EXPIRED)).toBe(1);
    const inits = net.sent(a, INIT).length;
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 30))).toBe(ENCRYPT_STAGED);
    expect(net.sent(a, INIT)).toHaveLength(inits + 1);
    net.advance(100);
    expect(b.delivered).toHaveLength(2);
  });

  it('erases all key material 540 s after the last handshake', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const pa = a.peerOf(b);
    const kp = pa.keypairs.current!;
    expect(kp.sendKey.some((x) => x !== 0)).toBe(true);
    net.advanceTo(T0 + ZERO_KEY_MATERIAL_AFTER - 1000);
    expect(pa.keypairs.current).toBe(kp);
    net.advanceTo(T0 + ZERO_KEY_MATERIAL_AFTER + 1000);
    expect(pa.keypairs.current).toBeNull();
    expect(pa.keypairs.previous).toBeNull();
    expect(pa.keypairs.next).toBeNull();
    expect(kp.sendKey.every((x) => x === 0)).toBe(true);
    expect(kp.receiveKey.every((x) => x === 0)).toBe(true);
    expect(pa.handshake.chainKey.every((x) => x === 0)).toBe(true);
    expect(a.device.indexCount).toBe(0);
    expect(b.device.indexCount).toBe(0);
    expect(a.device.nextDeadline()).toBe(Number.POSITIVE_INFINITY);
  });

  it('roaming: the endpoint follows the source of authenticated packets only', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    a.address = '198.51.100.7';
    a.port = 40000;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(5);
    expect(b.peerOf(a).endpoint).toEqual({ address: '198.51.100.7', port: 40000 });
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    expect(net.wire[net.wire.length - 1].toAddress).toBe('198.51.100.7');
    net.advance(5);
    expect(a.delivered).toHaveLength(1);
    // A forged (unauthenticated) packet from elsewhere does not move the endpoint.
    const forged = Uint8Array.from(net.wire[net.wire.length - 1].bytes);
    forged[forged.length - 1] ^= 1;
    net.deliverRaw(b, forged, '203.0.113.66', 1);
    expect(b.peerOf(a).endpoint).toEqual({ address: '198.51.100.7', port: 40000 });
    // A handshake from a new address moves it too (IPv6 endpoint without brackets). On the
    // network an IPv6 source reaches B at an IPv6 address of B's.
    b.address = '2001:db8::2';
    a.device.setEndpoint(a.peerOf(b), { address: '2001:db8::2', port: b.port });
    a.address = '2001:db8::1';
    a.device.initiateHandshake(a.peerOf(b), net.now + REKEY_TIMEOUT);
    net.drainAll();
    net.advance(5);
    expect(b.peerOf(a).endpoint).toEqual({ address: '2001:db8::1', port: 40000 });
  });

  it('PSK: equal keys work; different keys never complete', () => {
    const psk = new Uint8Array(32).fill(7);
    const ok = setup(backend, 4, [psk, psk]);
    establish(ok.net, ok.a, ok.b);
    expect(ok.b.delivered).toHaveLength(1);
    expect(ok.a.peerOf(ok.b).presharedKey).toEqual(psk);
    const other = new Uint8Array(32).fill(8);
    const bad = setup(backend, 5, [psk, other]);
    establish(bad.net, bad.a, bad.b);
    expect(bad.b.delivered).toHaveLength(0);
    expect(bad.net.dropsOf(bad.a, DROP_RESPONSE_DECRYPT_FAILED)).toBe(1);
    const noPsk = setup(backend, 6, [psk, null]);
    establish(noPsk.net, noPsk.a, noPsk.b);
    expect(noPsk.b.delivered).toHaveLength(0);
  });

  it('cookie path: under load an initiation without mac2 gets a cookie reply; the retry with the cookie is accepted', () => {
    const { net, a, b } = setup(backend);
    b.underLoad = true;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(10);
    expect(net.dropsOf(b, DROP_COOKIE_REQUIRED)).toBe(1);
    const replies = net.sent(b, COOKIE);
    expect(replies).toHaveLength(1);
    expect(replies[0].bytes.length).toBe(64);
    expect(net.sent(b, RESP)).toHaveLength(0);
    const firstInit = net.sent(a, INIT)[0];
    expect(firstInit.bytes.subarray(132).every((x) => x === 0)).toBe(true); // no mac2 yet
    net.advance(REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX);
    const retry = net.sent(a, INIT)[1];
    expect(retry.bytes.subarray(132).some((x) => x !== 0)).toBe(true); // mac2 from the cookie
    expect(net.sent(b, RESP)).toHaveLength(1);
    expect(b.delivered).toHaveLength(1);
    // A cookie is bound to the source address: the same message from elsewhere needs a new one.
    expect(net.deliverRaw(b, retry.bytes, '192.0.2.99', 51820)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_COOKIE_REQUIRED)).toBe(2);
    // Under-load state lingers 1 s after the last report, then mac2 is no longer required.
    b.underLoad = false;
    expect(b.device.isUnderLoad(net.now)).toBe(true);
    expect(b.device.isUnderLoad(net.now + 1001)).toBe(false);
  });

  it('rate limiter: under load, at most a burst of 5 then 20/s handshakes per source', () => {
    const { net, a, b } = setup(backend);
    b.underLoad = true;
    // Obtain a cookie first so that mac2 is valid.
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(10);
    expect(net.sent(b, COOKIE)).toHaveLength(1);
    // Eight fresh initiations carrying that cookie, 50 ms apart in their timestamps.
    const pa = a.peerOf(b);
    b.offline = true;
    for (let i = 0; i < 8; i++) {
      pa.handshake.lastSentHandshake = Number.NEGATIVE_INFINITY;
      a.device.initiateHandshake(pa, net.now + i * 50);
      net.drainAll();
    }
    b.offline = false;
    const msgs = net
      .sent(a, INIT)
      .slice(-8)
      .map((w) => w.bytes);
    expect(msgs.every((m) => m.subarray(132).some((x) => x !== 0))).toBe(true);
    // All arrive at one instant from one source: 5 pass the bucket, 3 are refused before any DH.
    const codes = msgs.map((m) => net.deliverRaw(b, m, a.address, a.port));
    expect(net.dropsOf(b, DROP_RATE_LIMITED)).toBe(3);
    expect(codes.slice(5)).toEqual([RECEIVE_DROP, RECEIVE_DROP, RECEIVE_DROP]);
    // Of the 5 admitted, the first is consumed; the rest hit the 20 ms flood protection.
    expect(codes[0]).toBe(RECEIVE_HANDSHAKE);
    expect(net.dropsOf(b, DROP_INITIATION_FLOOD)).toBe(4);
    // 50 ms later exactly one more token is available (1000 ms / 20).
    net.now += 50;
    expect(net.deliverRaw(b, msgs[6], a.address, a.port)).toBe(RECEIVE_HANDSHAKE);
    expect(net.deliverRaw(b, msgs[7], a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_RATE_LIMITED)).toBe(4);
    // Another source has its own bucket.
    net.now += 30;
    pa.handshake.lastSentHandshake = Number.NEGATIVE_INFINITY;
    a.address = '192.0.2.77';
    b.offline = true;
    a.device.initiateHandshake(pa, net.now + 1000);
    net.drainAll();
    b.offline = false;
    const fromElsewhere = net.sent(a, INIT).slice(-1)[0].bytes;
    // A new source needs its own cookie first (the cookie is bound to the source address).
    expect(net.deliverRaw(b, fromElsewhere, a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_COOKIE_REQUIRED)).toBe(2);
  });

  it('rejects a replayed initiation (timestamp not newer)', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const init = net.sent(a, INIT)[0];
    net.advance(1000);
    expect(net.deliverRaw(b, init.bytes, a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_INITIATION_REPLAY)).toBe(1);
    // B's session is untouched by the replay.
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(5);
    expect(b.delivered).toHaveLength(2);
  });

  it('drops replayed and duplicated transport messages, accepts reordered ones', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    b.offline = true;
    const msgs: Uint8Array[] = [];
    for (let i = 0; i < 5; i++) {
      a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10 + i));
      msgs.push(net.wire[net.wire.length - 1].bytes);
    }
    b.offline = false;
    for (const i of [4, 0, 2, 1, 3]) expect(net.deliverRaw(b, msgs[i], a.address, a.port)).toBe(RECEIVE_DELIVER);
    for (const i of [0, 4]) expect(net.deliverRaw(b, msgs[i], a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_REPLAYED_COUNTER)).toBe(2);
  });

  it('cryptokey routing: no route drops outbound; inner source must belong to the sending peer', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const r = new EncryptResult();
    const p = ipv4Packet('10.1.0.1', '10.99.0.1', 10);
    const buf = new Uint8Array(p.length + 64);
    buf.set(p, 16);
    expect(a.device.encrypt(buf, 16, p.length, net.now, r)).toBe(ENCRYPT_DROP);
    expect(r.reason).toBe(DROP_NO_ROUTE);
    buf[16] = 0x55; // version 5
    expect(a.device.encrypt(buf, 16, p.length, net.now, r)).toBe(ENCRYPT_DROP);
    expect(r.reason).toBe(DROP_OUTBOUND_INVALID);
    expect(a.device.encrypt(buf, 16, 0, net.now, r)).toBe(ENCRYPT_DROP);
    expect(() => a.device.encrypt(buf, 8, p.length, net.now, r)).toThrow(RangeError);
    // A spoofs a source outside its allowed IPs (B only allows 10.1.0.0/16 and fd01::/64 from A).
    a.send(ipv4Packet('10.3.0.1', '10.2.0.1', 10));
    a.send(ipv6Packet('fd03::1', 'fd02::1', 10));
    net.advance(5);
    expect(net.dropsOf(b, DROP_INNER_SOURCE_NOT_ALLOWED)).toBe(2);
    expect(b.delivered).toHaveLength(1);
  });

  it('validates the inner packet: version and length field, trimming padding', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    // IPv4 total length larger than the packet, and smaller than a header.
    for (const [total, ok] of [
      [200, false],
      [19, false],
      [40, true],
      [60, true],
    ] as const) {
      const p = ipv4Packet('10.1.0.1', '10.2.0.1', 40);
      p[2] = total >> 8;
      p[3] = total & 0xff;
      a.send(p);
      net.advance(5);
      if (ok) expect(b.delivered[b.delivered.length - 1].length).toBe(total);
    }
    expect(net.dropsOf(b, DROP_INNER_INVALID)).toBe(2);
    const p6 = ipv6Packet('fd01::1', 'fd02::1', 40);
    p6[5] = 41; // payload length beyond the packet
    a.send(p6);
    net.advance(5);
    expect(net.dropsOf(b, DROP_INNER_INVALID)).toBe(3);
  });

  it('stages at most 128 packets per peer, dropping the oldest, and sends them in order', () => {
    const net = new VirtualNet(backend, 7);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    b.offline = true;
    const pkts = Array.from({ length: 130 }, (_, i) => ipv4Packet('10.1.0.1', '10.2.0.1', new Uint8Array([i, i >> 8])));
    for (const p of pkts) expect(a.send(p)).toBe(ENCRYPT_STAGED);
    expect(net.dropsOf(a, DROP_STAGED_QUEUE_FULL)).toBe(2);
    b.offline = false;
    net.advance(REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX + 10);
    expect(b.delivered).toHaveLength(128);
    expect(b.delivered.every((d, i) => same(d, pkts[i + 2]))).toBe(true);
  });

  it('three peers: routing by allowed IPs, each with its own session', () => {
    const net = new VirtualNet(backend, 8);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    const c = net.addNode('c', '192.0.2.3');
    a.connect(b, ['10.2.0.0/16']);
    a.connect(c, ['10.3.0.0/16', '10.2.5.0/24']); // more specific route to C inside B's range
    b.connect(a, ['10.1.0.0/16']);
    c.connect(a, ['10.1.0.0/16']);
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    a.send(ipv4Packet('10.1.0.1', '10.2.5.1', 10));
    a.send(ipv4Packet('10.1.0.1', '10.3.0.1', 10));
    net.advance(100);
    expect(b.delivered).toHaveLength(1);
    expect(c.delivered).toHaveLength(2);
    expect(a.device.indexCount).toBe(2);
  });

  it('survives loss, duplication and reordering: no duplicate delivery, traffic flows across rekeys', () => {
    const { net, a, b } = setup(backend, 9);
    net.impair = { loss: 0.1, duplicate: 0.1, reorderMs: 30 };
    const sentAB = new Set<string>();
    const sentBA = new Set<string>();
    for (let i = 0; i < 600; i++) {
      const p = ipv4Packet('10.1.0.1', '10.2.0.1', new Uint8Array([i & 0xff, i >> 8, 1]));
      sentAB.add(Buffer.from(p).toString('hex'));
      a.send(p);
      if (i % 3 === 0) {
        const q = ipv6Packet('fd02::1', 'fd01::1', new Uint8Array([i & 0xff, i >> 8, 2]));
        sentBA.add(Buffer.from(q).toString('hex'));
        b.send(q);
      }
      net.advance(500);
    }
    net.advance(60_000);
    const gotB = b.delivered.map((d) => Buffer.from(d).toString('hex'));
    const gotA = a.delivered.map((d) => Buffer.from(d).toString('hex'));
    expect(new Set(gotB).size).toBe(gotB.length);
    expect(new Set(gotA).size).toBe(gotA.length);
    expect(gotB.every((h) => sentAB.has(h))).toBe(true);
    expect(gotA.every((h) => sentBA.has(h))).toBe(true);
    expect(gotB.length).toBeGreaterThan(sentAB.size * 0.75);
    expect(gotA.length).toBeGreaterThan(sentBA.size * 0.6);
    expect(net.sent(a, INIT).length + net.sent(b, INIT).length).toBeGreaterThanOrEqual(3); // 300 s: rekeys happened
    expect(net.mem.droppedLoss).toBeGreaterThan(0); // the network did impair
    expect(net.mem.duplicated).toBeGreaterThan(0);
  });

  it('a response for an unknown index, and data for an unknown session, are dropped', () => {
    const { net, a, b } = setup(backend);
    establish(net, a, b);
    const resp = net.sent(b, RESP)[0];
    expect(net.deliverRaw(a, resp.bytes, b.address, b.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(a, DROP_UNKNOWN_RECEIVER)).toBe(1);
    const data = Uint8Array.from(net.sent(a, DATA)[0].bytes);
    data[4] ^= 0xff;
    expect(net.deliverRaw(b, data, a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_UNKNOWN_RECEIVER)).toBe(1);
    const data2 = Uint8Array.from(net.sent(a, DATA)[0].bytes);
    data2[20] ^= 1;
    data2[8] = 99; // unseen counter, but the tag fails
    expect(net.deliverRaw(b, data2, a.address, a.port)).toBe(RECEIVE_DROP);
    expect(net.dropsOf(b, DROP_DECRYPT_FAILED)).toBe(1);
  });
});
