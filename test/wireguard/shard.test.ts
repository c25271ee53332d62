/**
 * The data path split over workers, in one thread: an owner Device with shared session slots,
 * two ShardEngines on its snapshot, and a plain Device as the remote peer. Counters stay
 * unique across workers, the shared replay window accepts each counter once whichever worker
 * sees it, folded counters equal what went over the wire, and the responder's next keypair is
 * confirmed through a worker.
 */
import { describe, expect, it } from 'vitest';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { parsePrefix } from '../../src/packet/addr.js';
import {
  Device,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  ReceiveResult,
} from '../../src/wireguard/device.js';
import { DROP_REPLAYED_COUNTER } from '../../src/wireguard/drops.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { REPLAY_WINDOW_SIZE, ReplayFilter } from '../../src/wireguard/replay.js';
import {
  KEYPAIR_SLOT_WORDS,
  SHARED_REPLAY_WINDOW,
  SharedReplayFilter,
  allocateSharedSessions,
  sendCounterIndex,
} from '../../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../../src/wireguard/shard.js';
import {
  HANDOFF_DATAGRAM,
  HANDOFF_PLAINTEXT,
  HANDOFF_SCREENED,
  type ShardPeer,
} from '../../src/wireguard/shard-peer.js';
import { REKEY_TIMEOUT } from '../../src/wireguard/constants.js';
import { ShardSlots } from '../../src/wireguard/shard-slots.js';
import { Prng } from '../util/prng.js';

const backend = getCryptoBackend('auto');
const NOW = 1_700_000_000_000;

describe('SharedReplayFilter', () => {
  it('accepts every counter of a shuffled in-window run exactly once, from two views of one slot', () => {
    const words = new Int32Array(new SharedArrayBuffer(3 * KEYPAIR_SLOT_WORDS * 4));
    const a = new SharedReplayFilter(words, KEYPAIR_SLOT_WORDS);
    const b = new SharedReplayFilter(words, KEYPAIR_SLOT_WORDS);
    const g7 = new Prng(7);
    const rnd = (): number => g7.next();
    let accepted = 0;
    let wrong = 0;
    for (let base = 0; base < 100_000; base += 1000) {
      // 1000 counters, shuffled within the block (reordering < the window), each offered twice.
      const run = Array.from({ length: 1000 }, (_, i) => base + i);
      for (let i = run.length - 1; i > 0; i--) {
        const j = Math.floor(rnd() * (i + 1));
        [run[i], run[j]] = [run[j], run[i]];
      }
      for (const c of run) {
        const f = rnd() < 0.5 ? a : b;
        const g = f === a ? b : a;
        if (f.check(c, 0) && f.validate(c, 0)) accepted++;
        if (g.check(c, 0) || g.validate(c, 0)) wrong++;
      }
    }
    expect(accepted).toBe(100_000);
    expect(wrong).toBe(0);
    // Other slots untouched.
    expect(words.subarray(0, KEYPAIR_SLOT_WORDS).every((w) => w === 0)).toBe(true);
  });

  it("writes nothing in the 128 bytes from a slot's send counter (the senders' line), and slots start such lines", () => {
    // The send counter is written by the sending workers, the window by the receiving one.
    const words = new Int32Array(new SharedArrayBuffer(2 * KEYPAIR_SLOT_WORDS * 4));
    const f = new SharedReplayFilter(words, KEYPAIR_SLOT_WORDS);
    for (let c = 0; c < 50_000; c += 3) expect(f.validate(c, 0)).toBe(true);
    const slot = sendCounterIndex(1);
    expect(slot).toBe(KEYPAIR_SLOT_WORDS);
    expect((slot * 4) % 128).toBe(0);
    expect(words.subarray(slot, slot + 32).every((w) => w === 0)).toBe(true);
    expect(words.subarray(slot + 32).some((w) => w !== 0)).toBe(true);
  });

  it('rejects counters behind the window, counters ≥ 2^32, and agrees with ReplayFilter on a random walk', () => {
    const words = new Int32Array(new SharedArrayBuffer(KEYPAIR_SLOT_WORDS * 4));
    const s = new SharedReplayFilter(words, 0);
    expect(s.validate(100_000, 0)).toBe(true);
    expect(s.check(100_000 - SHARED_REPLAY_WINDOW - 16, 0)).toBe(false);
    expect(s.validate(100_000 - SHARED_REPLAY_WINDOW - 16, 0)).toBe(false);
    expect(s.validate(100_000 - SHARED_REPLAY_WINDOW + 16, 0)).toBe(true);
    expect(s.validate(5, 1)).toBe(false);

    // Counters at most 8000 behind the newest (inside both windows): both filters decide alike.
    const t = new SharedReplayFilter(new Int32Array(new SharedArrayBuffer(KEYPAIR_SLOT_WORDS * 4)), 0);
    const r = new ReplayFilter();
    const g11 = new Prng(11);
    const rnd = (): number => g11.next();
    let top = 0;
    let differ = 0;
    for (let i = 0; i < 200_000; i++) {
      const c = rnd() < 0.3 ? top + Math.floor(rnd() * 3000) : Math.max(0, top - Math.floor(rnd() * 8000));
      if (r.validate(c, 0) !== t.validate(c, 0)) differ++;
      if (c > top) top = c;
    }
    expect(top).toBeGreaterThan(1 << 24);
    expect(differ).toBe(0);
  });
});

interface Handoff {
  kind: number;
  bytes: Uint8Array;
  address: string;
  port: number;
}

function worker(shared: ReturnType<typeof allocateSharedSessions>, index: number) {
  const handed: Handoff[] = [];
  const confirmed: number[] = [];
  const roamed: string[] = [];
  const engine = new ShardEngine(backend, shared, index, {
    handoff: (kind, buf, off, len, address, port) => {
      handed.push({ kind, bytes: buf.slice(off, off + len), address, port });
      return true;
    },
    underLoad: () => false,
    confirmed: (i) => confirmed.push(i),
    roamed: (_slot, address, port) => roamed.push(`${address}:${port}`),
  });
  return { engine, handed, confirmed, roamed };
}

/** An IPv4/UDP packet 10.1.0.1 → 10.2.0.1 (or reversed) with `n` in its payload, at off 16 of a slot. */
function packet(n: number, reverse = false): { buf: Uint8Array; off: number; len: number } {
  const len = 20 + 8 + 8;
  const buf = new Uint8Array(16 + len + 32);
  const off = 16;
  buf[off] = 0x45;
  buf[off + 2] = len >> 8;
  buf[off + 3] = len & 0xff;
  buf[off + 8] = 64;
  buf[off + 9] = 17;
  buf.set(reverse ? [10, 2, 0, 1, 10, 1, 0, 1] : [10, 1, 0, 1, 10, 2, 0, 1], off + 12);
  new DataView(buf.buffer).setUint32(off + 28, n);
  return { buf, off, len };
}

function setup(initiator: 'a' | 'b') {
  const shared = allocateSharedSessions(2, 8, 32);
  const slots = new ShardSlots(shared);
  const a = new Device({ backend, sessionSlots: slots });
  const b = new Device({ backend });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const pab = a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  a.addAllowedIp(pab, parsePrefix('10.2.0.0/16'));
  b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
  const epA: Endpoint = { address: '192.0.2.1', port: 1 };
  const epB: Endpoint = { address: '192.0.2.2', port: 2 };
  a.setEndpoint(pab, epB);
  b.setEndpoint(pba, epA);
  const out = new OutgoingMessage<Peer>();
  const rr = new ReceiveResult();
  const pump = (from: Device, to: Device, src: Endpoint): void => {
    while (from.popOutgoing(out)) {
      to.receive(out.buf, out.start, out.length, src, NOW, false, rr);
      from.releaseOutgoing(out.slot);
    }
  };
  if (initiator === 'a') {
    a.initiateHandshake(pab, NOW);
    pump(a, b, epA);
    pump(b, a, epB);
    pump(a, b, epA); // A's confirming keepalive, under the shared counter
  } else {
    b.initiateHandshake(pba, NOW);
    pump(b, a, epB);
    pump(a, b, epA);
  }
  const w = [worker(shared, 0), worker(shared, 1)];
  let version = 0;
  const publish = (): void => {
    version++;
    const snap = a.shardSnapshot(version, (p) => slots.peerSlot(p), NOW);
    slots.published = version;
    for (const x of w) x.engine.apply(snap);
  };
  publish();
  return { shared, slots, a, b, pab, pba, epA, epB, w, publish, pump };
}

describe('ShardEngine with an owner Device', () => {
  it('two workers send under one session with unique counters; the peer takes every packet; wg counters are exact', () => {
    const { slots, a, b, pab, pba, epA, w } = setup('a');
    const eo = new EncryptResult<ShardPeer>();
    const rr = new ReceiveResult();
    const wire: { bytes: Uint8Array; from: number }[] = [];
    for (let i = 0; i < 400; i++) {
      const k = i % 2;
      const p = packet(i);
      expect(w[k].engine.encrypt(p.buf, p.off, p.len, NOW + 1, eo)).toBe(ENCRYPT_SEND);
      wire.push({ bytes: p.buf.slice(eo.start, eo.start + eo.length), from: k });
    }
    const counters = new Set(wire.map((d) => new DataView(d.bytes.buffer).getUint32(8, true)));
    expect(counters.size).toBe(400);
    // Worker 1's datagrams overtake worker 0's (two sockets, two queues): all are accepted.
    const order = [...wire.filter((d) => d.from === 1), ...wire.filter((d) => d.from === 0)];
    const got: number[] = [];
    let wireBytes = 0;
    for (const d of order) {
      wireBytes += d.bytes.length;
      expect(b.receive(d.bytes, 0, d.bytes.length, epA, NOW + 2, false, rr)).toBe(RECEIVE_DELIVER);
      got.push(new DataView(d.bytes.buffer).getUint32(rr.start + 28));
    }
    expect(got.sort((x, y) => x - y)).toEqual(Array.from({ length: 400 }, (_, i) => i));
    const before = pab.txBytes;
    slots.fold(a.peers(), (p, act) => a.foldShardActivity(p, act, NOW + 3));
    expect(pab.txBytes - before).toBe(wireBytes);
    expect(pab.txBytes).toBe(pba.rxBytes);
    expect(pab.txPackets).toBe(pba.rxPackets);
  });

  it("a datagram a worker's socket refused comes off the folded tx counters (wg show counts what left)", () => {
    const { slots, a, pab, w } = setup('a');
    const eo = new EncryptResult<ShardPeer>();
    let sent = 0;
    let refused = 0;
    for (let i = 0; i < 10; i++) {
      const k = i % 2;
      const p = packet(i);
      expect(w[k].engine.encrypt(p.buf, p.off, p.len, NOW + 1, eo)).toBe(ENCRYPT_SEND);
      if (i >= 7) {
        w[k].engine.sendFailed(eo.peer!, eo.length);
        refused++;
      } else sent += eo.length;
    }
    const before = { bytes: pab.txBytes, packets: pab.txPackets };
    slots.fold(a.peers(), (p, act) => a.foldShardActivity(p, act, NOW + 2));
    expect(pab.txBytes - before.bytes).toBe(sent);
    expect(pab.txPackets - before.packets).toBe(10 - refused);
  });

  it("a worker's datagram overtaken by more than the peer's replay window of the other worker's is dropped by the peer", () => {
    // No per-peer sequencer: a worker that stalls between taking its counter and sending while
    // the other sends a window's worth to the same peer loses that datagram at any receiver.
    const { b, epA, w } = setup('a');
    const eo = new EncryptResult<ShardPeer>();
    const rr = new ReceiveResult();
    const late: Uint8Array[] = [];
    for (const overtaken of [100, REPLAY_WINDOW_SIZE + 1]) {
      const p = packet(0);
      expect(w[0].engine.encrypt(p.buf, p.off, p.len, NOW + 1, eo)).toBe(ENCRYPT_SEND);
      late.push(p.buf.slice(eo.start, eo.start + eo.length));
      for (let i = 0; i < overtaken; i++) {
        const q = packet(i + 1);
        expect(w[1].engine.encrypt(q.buf, q.off, q.len, NOW + 1, eo)).toBe(ENCRYPT_SEND);
        expect(b.receive(q.buf, eo.start, eo.length, epA, NOW + 2, false, rr)).toBe(RECEIVE_DELIVER);
      }
      const d = late[late.length - 1];
      const expected = overtaken <= REPLAY_WINDOW_SIZE ? RECEIVE_DELIVER : RECEIVE_DROP;
      expect(b.receive(d, 0, d.length, epA, NOW + 2, false, rr)).toBe(expected);
    }
    expect(b.drops[DROP_REPLAYED_COUNTER]).toBe(1);
  });

  it('the receive window is shared: a datagram taken by one worker is a replay at the other and at the owner', () => {
    const { slots, a, b, pab, pba, epB, w } = setup('a');
    const eo = new EncryptResult();
    const rr = new ReceiveResult<ShardPeer>();
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 50; i++) {
      const p = packet(i, true);
      expect(b.encrypt(p.buf, p.off, p.len, NOW + 1, eo)).toBe(ENCRYPT_SEND);
      sent.push(p.buf.slice(eo.start, eo.start + eo.length));
    }
    for (const d of sent) {
      expect(w[0].engine.receive(d.slice(), 0, d.length, epB, NOW + 2, false, rr)).toBe(RECEIVE_DELIVER);
    }
    for (const d of sent) {
      expect(w[1].engine.receive(d.slice(), 0, d.length, epB, NOW + 2, false, rr)).not.toBe(RECEIVE_DELIVER);
      expect(a.receive(d.slice(), 0, d.length, epB, NOW + 2, false, new ReceiveResult())).not.toBe(RECEIVE_DELIVER);
    }
    expect(w[1].engine.drops[DROP_REPLAYED_COUNTER]).toBe(50);
    slots.fold(a.peers(), (p, act) => a.foldShardActivity(p, act, NOW + 3));
    expect(pab.rxBytes).toBe(pba.txBytes);
    expect(w[0].roamed).toEqual([]);
  });

  it("a responder's next keypair is confirmed through a worker; without a session packets go to the owner", () => {
    const { a, b, pab, pba, epB, w, publish } = setup('b');
    expect(pab.keypairs.next).not.toBeNull();
    const eo = new EncryptResult<ShardPeer>();
    // A may not send yet (responder before confirmation): the worker hands the packet over.
    const p0 = packet(1);
    expect(w[0].engine.encrypt(p0.buf, p0.off, p0.len, NOW + 1, eo)).toBe(ENCRYPT_STAGED);
    expect(w[0].handed.map((h) => h.kind)).toEqual([HANDOFF_PLAINTEXT]);
    // B's first data under the session arrives at worker 1.
    const be = new EncryptResult();
    const p = packet(2, true);
    expect(b.encrypt(p.buf, p.off, p.len, NOW + 1, be)).toBe(ENCRYPT_SEND);
    const rr = new ReceiveResult<ShardPeer>();
    expect(w[1].engine.receive(p.buf, be.start, be.length, epB, NOW + 2, false, rr)).toBe(RECEIVE_DELIVER);
    expect(w[1].confirmed.length).toBe(1);
    // The worker that saw the confirmation answers under the new session before the owner knows.
    const pr = packet(9);
    expect(w[1].engine.encrypt(pr.buf, pr.off, pr.len, NOW + 2, eo)).toBe(ENCRYPT_SEND);
    expect(
      b.receive(pr.buf, eo.start, eo.length, { address: '192.0.2.1', port: 1 }, NOW + 2, false, new ReceiveResult()),
    ).toBe(RECEIVE_DELIVER);
    const peer = a.confirmShardSession(w[1].confirmed[0], NOW + 2);
    expect(peer).toBe(pab);
    expect(pab.keypairs.current).not.toBeNull();
    expect(pab.keypairs.next).toBeNull();
    publish();
    const p1 = packet(3);
    expect(w[0].engine.encrypt(p1.buf, p1.off, p1.len, NOW + 3, eo)).toBe(ENCRYPT_SEND);
    expect(
      b.receive(p1.buf, eo.start, eo.length, { address: '192.0.2.1', port: 1 }, NOW + 3, false, new ReceiveResult()),
    ).toBe(RECEIVE_DELIVER);
    // A handshake message at a worker goes to the owner with its source, screened there (mac1).
    const init = new Uint8Array(148);
    init[0] = 1;
    const handed = w[1].handed.length;
    w[1].engine.screenHandshake(init, 0, 148, epB, NOW, false, rr);
    expect(w[1].handed.length).toBe(handed);
    b.initiateHandshake(pba, NOW + REKEY_TIMEOUT);
    const m = new OutgoingMessage<Peer>();
    while (b.popOutgoing(m) && m.buf[m.start] !== 1) b.releaseOutgoing(m.slot);
    expect(m.length).toBe(148);
    w[1].engine.screenHandshake(m.buf, m.start, m.length, epB, NOW + REKEY_TIMEOUT, false, rr);
    expect(w[1].handed.at(-1)).toMatchObject({ kind: HANDOFF_SCREENED, address: '192.0.2.2', port: 2 });
    // A cookie reply is the owner's to check (its receiver index).
    const cookie = new Uint8Array(64);
    cookie[0] = 3;
    w[1].engine.screenHandshake(cookie, 0, 64, epB, NOW, false, rr);
    expect(w[1].handed.at(-1)).toMatchObject({ kind: HANDOFF_DATAGRAM, address: '192.0.2.2', port: 2 });
  });
});
