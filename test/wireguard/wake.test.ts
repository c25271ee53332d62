/**
 * A fresh device (a restarted process, a new active replica) does not wait for the peer's
 * timers: transport data under an unknown receiver index from a peer's endpoint starts one
 * handshake (paced, device-wide limited); from any other address it is only a counted drop;
 * initiateIdlePeers() initiates towards every peer with an endpoint. A device whose handshakes
 * are held (a replica handing over) starts none of these. Virtual clock throughout.
 */
import { describe, expect, it } from 'vitest';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { parsePrefix } from '../../src/packet/addr.js';
import {
  Device,
  ENCRYPT_SEND,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  ReceiveResult,
} from '../../src/wireguard/device.js';
import { DROP_UNKNOWN_RECEIVER } from '../../src/wireguard/drops.js';
import { MESSAGE_INITIATION, readU32LE } from '../../src/wireguard/messages.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { WAKE_BURST } from '../../src/wireguard/wake-state.js';
import { SPECULATIVE_RETRY_AFTER } from '../../src/wireguard/wake.js';
import { REKEY_TIMEOUT } from '../../src/wireguard/constants.js';
import { BACKENDS } from './backends.js';
import { sessionPair } from './pair.js';
import { T0, ipv4Packet } from './sim.js';

interface Sent {
  address: string;
  port: number;
  type: number;
  bytes: Uint8Array;
}

function drain(d: Device): Sent[] {
  const out = new OutgoingMessage<Peer>();
  const sent: Sent[] = [];
  while (d.popOutgoing(out)) {
    const bytes = out.buf.slice(out.start, out.start + out.length);
    sent.push({ address: out.address, port: out.port, type: readU32LE(bytes, 0), bytes });
    d.releaseOutgoing(out.slot);
  }
  return sent;
}

/** A transport datagram A → B on A's current session (an inner packet 10.1.0.1 → 10.2.0.1). */
function transport(a: Device, now: number): Uint8Array {
  const p = ipv4Packet('10.1.0.1', '10.2.0.1', 40);
  const buf = new Uint8Array(16 + p.length + 64);
  buf.set(p, 16);
  const r = new EncryptResult();
  expect(a.encrypt(buf, 16, p.length, now, r)).toBe(ENCRYPT_SEND);
  return buf.slice(r.start, r.start + r.length);
}

/** B restarted: the same key, peer A with (or without) A's endpoint, no session. */
function freshB(backend: CryptoBackend, aKey: Uint8Array, epA: Endpoint | null): { b: Device; pba: Peer } {
  const b = new Device({ backend });
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const pba = b.addPeer(aKey);
  b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
  if (epA !== null) b.setEndpoint(pba, epA);
  return { b, pba };
}

function deliver(to: Device, msgs: Sent[], from: Endpoint, now: number): void {
  const rr = new ReceiveResult();
  for (const m of msgs) to.receive(m.bytes, 0, m.bytes.length, from, now, false, rr);
}

describe.each(BACKENDS.slice(0, 2))('wake on unknown session ($name)', ({ create }) => {
  it('transport from the peer endpoint starts one handshake, paced per Rekey-Timeout; the peer switches to it', () => {
    const backend = create();
    const { a, pab, epA, epB } = sessionPair(backend, T0);
    const { b } = freshB(backend, a.publicKey!, epA);
    const rr = new ReceiveResult();
    let now = T0 + 1000;
    const d1 = transport(a, now);
    expect(b.receive(d1, 0, d1.length, epA, now, false, rr)).toBe(RECEIVE_DROP);
    expect(rr.reason).toBe(DROP_UNKNOWN_RECEIVER);
    const first = drain(b);
    expect(first.map((m) => [m.type, m.address, m.port])).toEqual([[MESSAGE_INITIATION, epA.address, epA.port]]);
    expect(b.unknownSessionInitiations).toBe(1);

    // More old-session packets within Rekey-Timeout: counted drops, no further initiation.
    for (let i = 1; i <= 10; i++) {
      const d = transport(a, now + i * 20);
      expect(b.receive(d, 0, d.length, epA, now + i * 20, false, rr)).toBe(RECEIVE_DROP);
    }
    expect(drain(b)).toEqual([]);
    expect(b.unknownSessionInitiations).toBe(1);
    expect(b.unknownSessionSuppressed).toBe(10);
    expect(b.drops[DROP_UNKNOWN_RECEIVER]).toBe(11);

    // The standard handshake completes: A answers, B confirms, A sends on the new session.
    now += 300;
    deliver(a, first, epB, now);
    const response = drain(a);
    expect(response.length).toBe(1);
    deliver(b, response, epA, now);
    deliver(a, drain(b), epB, now); // the confirming keepalive
    const d2 = transport(a, now + 1);
    expect(b.receive(d2, 0, d2.length, epA, now + 1, false, rr)).toBe(RECEIVE_DELIVER);
    expect(rr.peer).toBe(b.peers()[0]);
    expect(pab.keypairs.current).not.toBeNull();

    // After Rekey-Timeout a lost session can be woken again.
    const { b: b2 } = freshB(backend, a.publicKey!, epA);
    const t2 = now + 10;
    const d3 = transport(a, t2);
    b2.receive(d3, 0, d3.length, epA, t2, false, rr);
    expect(drain(b2).length).toBe(1);
    const d4 = transport(a, t2 + REKEY_TIMEOUT - 1);
    b2.receive(d4, 0, d4.length, epA, t2 + REKEY_TIMEOUT - 1, false, rr);
    expect(drain(b2).length).toBe(0);
    const d5 = transport(a, t2 + REKEY_TIMEOUT);
    b2.receive(d5, 0, d5.length, epA, t2 + REKEY_TIMEOUT, false, rr);
    expect(drain(b2).map((m) => m.type)).toEqual([MESSAGE_INITIATION]);
    expect(b2.unknownSessionInitiations).toBe(2);
  });

  it('transport from an address that is no peer endpoint is a counted drop and starts nothing', () => {
    const backend = create();
    const { a, epA } = sessionPair(backend, T0);
    const { b } = freshB(backend, a.publicKey!, epA);
    const rr = new ReceiveResult();
    const stranger = { address: '198.51.100.7', port: epA.port };
    const otherPort = { address: epA.address, port: epA.port + 1 };
    for (const [i, from] of [stranger, otherPort].entries()) {
      const d = transport(a, T0 + 1000 + i);
      expect(b.receive(d, 0, d.length, from, T0 + 1000 + i, false, rr)).toBe(RECEIVE_DROP);
      expect(rr.reason).toBe(DROP_UNKNOWN_RECEIVER);
    }
    expect(drain(b)).toEqual([]);
    expect(b.drops[DROP_UNKNOWN_RECEIVER]).toBe(2);
    expect(b.unknownSessionInitiations).toBe(0);
    expect(b.peers()[0].endpoint).toEqual(epA);
  });

  it('a single peer without an endpoint (the server side) adopts the source and is initiated to', () => {
    const backend = create();
    const { a, epA, epB } = sessionPair(backend, T0);
    const { b, pba } = freshB(backend, a.publicKey!, null);
    const rr = new ReceiveResult();
    const d = transport(a, T0 + 1000);
    b.receive(d, 0, d.length, epA, T0 + 1000, false, rr);
    const sent = drain(b);
    expect(sent.map((m) => [m.type, m.address, m.port])).toEqual([[MESSAGE_INITIATION, epA.address, epA.port]]);
    expect(pba.endpoint).toEqual(epA);
    deliver(a, sent, epB, T0 + 1001);
    expect(drain(a).length).toBe(1); // A answers the initiation of the fresh B

    // With two endpoint-less peers the source names neither: nothing starts.
    const { b: b3 } = freshB(backend, a.publicKey!, null);
    b3.addPeer(new Uint8Array(32).fill(9));
    b3.receive(d, 0, d.length, epA, T0 + 1000, false, rr);
    expect(drain(b3)).toEqual([]);
    expect(b3.peers().every((p) => p.endpoint === null)).toBe(true);
  });

  it('two peers: the one whose endpoint is the source is initiated to; one endpoint shared by two: none', () => {
    const backend = create();
    const { a, epA } = sessionPair(backend, T0);
    const { b } = freshB(backend, a.publicKey!, epA);
    const other = b.addPeer(new Uint8Array(32).fill(7));
    b.setEndpoint(other, { address: '192.0.2.9', port: 9 });
    const rr = new ReceiveResult();
    const d = transport(a, T0 + 1000);
    b.receive(d, 0, d.length, epA, T0 + 1000, false, rr);
    expect(drain(b).map((m) => [m.address, m.port])).toEqual([[epA.address, epA.port]]);

    b.setEndpoint(other, epA);
    const d2 = transport(a, T0 + 1000 + REKEY_TIMEOUT);
    b.receive(d2, 0, d2.length, epA, T0 + 1000 + REKEY_TIMEOUT, false, rr);
    expect(drain(b)).toEqual([]);
  });

  it('a flood from many peer endpoints initiates at most the device-wide burst at once', () => {
    const backend = create();
    const b = new Device({ backend });
    b.setPrivateKey(new Uint8Array(32).fill(2));
    const n = WAKE_BURST * 3;
    for (let i = 0; i < n; i++) {
      const key = new Uint8Array(32).fill(0);
      key[0] = 100 + i;
      key[1] = 1;
      const p = b.addPeer(key);
      b.setEndpoint(p, { address: `192.0.2.${10 + i}`, port: 51820 });
    }
    // Garbage transport (type 4, unknown index) from every peer's endpoint, twice.
    const junk = new Uint8Array(64);
    junk[0] = 4;
    const rr = new ReceiveResult();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < n; i++) {
        expect(b.receive(junk, 0, junk.length, { address: `192.0.2.${10 + i}`, port: 51820 }, T0, false, rr)).toBe(
          RECEIVE_DROP,
        );
      }
    }
    expect(drain(b).length).toBe(WAKE_BURST);
    expect(b.unknownSessionInitiations).toBe(WAKE_BURST);
    expect(b.unknownSessionSuppressed).toBe(2 * n - WAKE_BURST);
    expect(b.drops[DROP_UNKNOWN_RECEIVER]).toBe(2 * n);
  });

  it('initiateIdlePeers: one initiation per peer with an endpoint and no session, paced', () => {
    const backend = create();
    const { a, b, epA } = sessionPair(backend, T0);
    const { b: fresh } = freshB(backend, a.publicKey!, epA);
    fresh.addPeer(new Uint8Array(32).fill(9)); // no endpoint: nothing to send to
    expect(fresh.initiateIdlePeers(T0 + 10)).toBe(1);
    expect(drain(fresh).map((m) => [m.type, m.address, m.port])).toEqual([[MESSAGE_INITIATION, epA.address, epA.port]]);
    expect(fresh.initiateIdlePeers(T0 + 20)).toBe(0); // within Rekey-Timeout
    expect(drain(fresh)).toEqual([]);
    // Data waiting for a session may initiate once more after an unanswered speculative
    // initiation (the peer may have dropped it), not within SPECULATIVE_RETRY_AFTER of it.
    const p = ipv4Packet('10.2.0.1', '10.1.0.1', 40);
    const send = (now: number): Sent[] => {
      const buf = new Uint8Array(16 + p.length + 64);
      buf.set(p, 16);
      fresh.encrypt(buf, 16, p.length, now, new EncryptResult());
      return drain(fresh);
    };
    expect(send(T0 + 10 + SPECULATIVE_RETRY_AFTER - 1)).toEqual([]);
    expect(send(T0 + 10 + SPECULATIVE_RETRY_AFTER).map((m) => m.type)).toEqual([MESSAGE_INITIATION]);
    expect(send(T0 + 10 + 2 * SPECULATIVE_RETRY_AFTER)).toEqual([]); // paced as usual again
    // A device whose peer has a usable session initiates nothing.
    expect(b.initiateIdlePeers(T0 + 10)).toBe(0);
    expect(drain(b)).toEqual([]);
  });

  it('holdHandshakes (a replica handing over): forwards on its session, starts no handshake when the peer moved to the successor, still answers one', () => {
    const backend = create();
    const { a, b, pab, epA, epB } = sessionPair(backend, T0);
    b.holdHandshakes();
    // The successor (same key) handshakes with A; A confirms and sends on the new session.
    const { b: successor } = freshB(backend, a.publicKey!, epA);
    let now = T0 + 1000;
    expect(successor.initiateIdlePeers(now)).toBe(1);
    deliver(a, drain(successor), epB, now);
    deliver(successor, drain(a), epA, now);
    deliver(a, drain(successor), epB, now); // the confirming keepalive
    // The held replica still sends on its own session, and A takes it.
    const p = ipv4Packet('10.2.0.1', '10.1.0.1', 40);
    const buf = new Uint8Array(16 + p.length + 64);
    buf.set(p, 16);
    const er = new EncryptResult();
    expect(b.encrypt(buf, 16, p.length, now, er)).toBe(ENCRYPT_SEND);
    const rr = new ReceiveResult();
    expect(a.receive(buf, er.start, er.length, epB, now, false, rr)).toBe(RECEIVE_DELIVER);
    // A answers on its current session (the successor's): unknown to the held replica, which
    // drops and counts it and starts nothing (not even after Rekey-Timeout).
    for (const t of [now + 1, now + REKEY_TIMEOUT + 1]) {
      const d = transport(a, t);
      expect(b.receive(d, 0, d.length, epA, t, false, rr)).toBe(RECEIVE_DROP);
      expect(rr.reason).toBe(DROP_UNKNOWN_RECEIVER);
    }
    expect(drain(b)).toEqual([]);
    expect(b.unknownSessionInitiations).toBe(0);
    expect(b.unknownSessionSuppressed).toBe(2);
    // Neither does initiateIdlePeers on a held device without a session; an initiation of the
    // peer is still answered.
    const { b: idle } = freshB(backend, a.publicKey!, epA);
    idle.holdHandshakes();
    expect(idle.initiateIdlePeers(now)).toBe(0);
    expect(drain(idle)).toEqual([]);
    now += REKEY_TIMEOUT * 2;
    a.initiateHandshake(pab, now);
    deliver(idle, drain(a), epA, now);
    expect(drain(idle).length).toBe(1);
  });
});
