/**
 * The shared words between weft-wg's owner and its workers (wg-shared-words.ts), in one thread
 * on a virtual clock, with the ShardEngines and the owner's WireGuardPort that use them:
 * workers' drops reach the device's drop counters once, by reason, summed over workers; a
 * worker's handoffs in flight bound it and put it under load at 1/8 of the limit; the owner's
 * load word follows its handshake queue, and a worker seeing it answers a zero-mac2
 * initiation with a cookie reply instead of handing it off, for UNDER_LOAD_AFTER_TIME after.
 */
import { describe, expect, it } from 'vitest';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { MemoryDatagramSocket } from '../../src/io/memory-socket.js';
import { WireGuardPort } from '../../src/pipelines/wireguard-port.js';
import { MAX_WORKERS, OwnerWords, WorkerWords } from '../../src/gateway/wg-shared-words.js';
import { UNDER_LOAD_AFTER_TIME } from '../../src/wireguard/constants.js';
import { Device, ReceiveResult } from '../../src/wireguard/device.js';
import {
  DROP_COOKIE_REQUIRED,
  DROP_INVALID_MAC1,
  DROP_REASON_COUNT,
  DROP_TOO_SHORT,
  DROP_UNKNOWN_TYPE,
} from '../../src/wireguard/drops.js';
import { COOKIE_REPLY_SIZE, MESSAGE_COOKIE_REPLY, MESSAGE_RESPONSE } from '../../src/wireguard/messages.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { allocateSharedSessions } from '../../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../../src/wireguard/shard.js';
import { HANDOFF_SCREENED, type ShardOwnerLink, type ShardPeer } from '../../src/wireguard/shard-peer.js';
import { ShardSlots } from '../../src/wireguard/shard-slots.js';
import { Prng } from '../util/prng.js';

const backend = getCryptoBackend('auto');
const NOW = 1_700_000_000_000;
const epA: Endpoint = { address: '192.0.2.1', port: 51820 };
const epB: Endpoint = { address: '192.0.2.2', port: 40000 };

interface Handoff {
  worker: number;
  kind: number;
  bytes: Uint8Array;
  address: string;
  port: number;
}

/**
 * An owner Device `a` with `workers` ShardEngines on its snapshot, each on its WorkerWords
 * (handoff limit `limit`) as wg-worker.ts wires them; `b` is a remote peer of `a`.
 */
function setup(workers: number, limit = 1024) {
  const shared = allocateSharedSessions(workers, 8, 8);
  const slots = new ShardSlots(shared);
  const a = new Device({ backend, sessionSlots: slots });
  const b = new Device({ backend });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  b.setEndpoint(pba, epA);
  const owner = new OwnerWords();
  const handed: Handoff[] = [];
  /** What the owner does with a handoff (WgWorkers.onMessage); default: nothing but record it. */
  let take: (h: Handoff) => void = () => {};
  const words: WorkerWords[] = [];
  const engines: ShardEngine[] = [];
  for (let i = 0; i < workers; i++) {
    const ww = new WorkerWords(owner, i, limit);
    const link: ShardOwnerLink = {
      handoff: (kind, buf, off, len, address, port) => {
        if (!ww.claimHandoff()) return false;
        const h = { worker: i, kind, bytes: buf.slice(off, off + len), address, port };
        handed.push(h);
        take(h);
        return true;
      },
      underLoad: () => ww.underLoad(),
      confirmed: () => {},
      roamed: () => {},
    };
    words.push(ww);
    engines.push(new ShardEngine(backend, shared, i, link, ww.drops));
  }
  for (const w of engines) w.apply(a.shardSnapshot(1, (p) => slots.peerSlot(p), NOW));
  const msg = new OutgoingMessage<Peer>();
  /** B's next initiation (mac1 valid, mac2 zero: B has no cookie), sent at `now`. */
  const initiation = (now: number): Uint8Array => {
    b.initiateHandshake(pba, now);
    expect(b.popOutgoing(msg)).toBe(true);
    const m = msg.buf.slice(msg.start, msg.start + msg.length);
    b.releaseOutgoing(msg.slot);
    return m;
  };
  const rr = new ReceiveResult<ShardPeer>();
  const screen = (w: number, m: Uint8Array, now: number): void => {
    engines[w]!.screenHandshake(m, 0, m.length, epB, now, false, rr);
  };
  const receive = (w: number, m: Uint8Array, now: number): void => {
    engines[w]!.receive(m, 0, m.length, epB, now, false, rr);
  };
  /** Cookie replies worker `w` queued for its socket. */
  const replies = (w: number): Uint8Array[] => {
    const out: Uint8Array[] = [];
    const o = new OutgoingMessage<ShardPeer>();
    while (engines[w]!.popOutgoing(o)) {
      out.push(o.buf.slice(o.start, o.start + o.length));
      engines[w]!.releaseOutgoing(o.slot);
    }
    return out;
  };
  const onTake = (f: (h: Handoff) => void): void => {
    take = f;
  };
  return { a, owner, words, engines, handed, initiation, screen, receive, replies, onTake };
}

describe("weft-wg workers' drops are folded into the device's drops", () => {
  it("once per drop, by reason, summed over workers, added to the owner's own", () => {
    const { a, owner, engines, initiation, screen, receive } = setup(2);
    // The owner's own drop, counted before any fold.
    a.receive(new Uint8Array(2), 0, 2, epB, NOW, false, new ReceiveResult());
    expect(a.drops[DROP_TOO_SHORT]).toBe(1);
    const before = Float64Array.from(a.drops);
    const m = initiation(NOW);
    const badMac1 = m.slice();
    badMac1[badMac1.length - 20] ^= 1;
    const short = new Uint8Array(3);
    const unknown = new Uint8Array(32);
    unknown[0] = 9;
    for (let i = 0; i < 3; i++) receive(0, short, NOW);
    receive(0, unknown, NOW);
    screen(1, badMac1, NOW);
    screen(1, badMac1, NOW);
    receive(1, short, NOW);
    // Each worker counts in its own row of the shared buffer.
    expect(engines[0]!.drops[DROP_TOO_SHORT]).toBe(3);
    expect(engines[1]!.drops[DROP_TOO_SHORT]).toBe(1);
    expect(engines[0]!.drops[DROP_INVALID_MAC1]).toBe(0);
    expect(engines[1]!.drops[DROP_INVALID_MAC1]).toBe(2);
    // Nothing reaches the device until the owner folds.
    expect([...a.drops]).toEqual([...before]);

    const expected = Float64Array.from(before);
    expected[DROP_TOO_SHORT] += 4;
    expected[DROP_UNKNOWN_TYPE] += 1;
    expected[DROP_INVALID_MAC1] += 2;
    owner.foldDrops(2, a.drops);
    expect([...a.drops]).toEqual([...expected]);
    // Folding again without new drops adds nothing.
    owner.foldDrops(2, a.drops);
    owner.foldDrops(2, a.drops);
    expect([...a.drops]).toEqual([...expected]);
    // New drops on one worker: only those are added.
    screen(0, badMac1, NOW);
    owner.foldDrops(2, a.drops);
    expected[DROP_INVALID_MAC1] += 1;
    expect([...a.drops]).toEqual([...expected]);
    // A worker beyond the count folded is not read.
    new WorkerWords(owner, 2, 1024).drops[DROP_TOO_SHORT] = 50;
    owner.foldDrops(2, a.drops);
    expect([...a.drops]).toEqual([...expected]);
  });

  it("after every fold the device holds its own drops plus every worker's total, whatever the interleaving", () => {
    const owner = new OwnerWords();
    const workers = Array.from({ length: 5 }, (_, i) => new WorkerWords(owner, i, 1024));
    const device = new Float64Array(DROP_REASON_COUNT);
    const own = new Float64Array(DROP_REASON_COUNT);
    const g = new Prng(11);
    let folds = 0;
    let mismatch: string | null = null;
    for (let step = 0; step < 20_000; step++) {
      const r = g.int(0, 9);
      if (r < 7) workers[g.int(0, workers.length - 1)]!.drops[g.int(0, DROP_REASON_COUNT - 1)]++;
      else if (r < 8) {
        const reason = g.int(0, DROP_REASON_COUNT - 1);
        device[reason]++;
        own[reason]++;
      } else {
        owner.foldDrops(workers.length, device);
        folds++;
        for (let k = 0; k < DROP_REASON_COUNT; k++) {
          let sum = own[k]!;
          for (const w of workers) sum += w.drops[k]!;
          if (device[k] !== sum) mismatch ??= `reason ${k} after fold ${folds}: ${device[k]}, expected ${sum}`;
        }
      }
    }
    expect(mismatch).toBe(null);
    expect(folds).toBeGreaterThan(1000);
  });

  it('refuses to fold more workers than the buffer holds, or into the wrong number of counters', () => {
    const owner = new OwnerWords();
    expect(() => owner.foldDrops(MAX_WORKERS + 1, new Float64Array(DROP_REASON_COUNT))).toThrow(RangeError);
    expect(() => owner.foldDrops(1, new Float64Array(DROP_REASON_COUNT - 1))).toThrow(RangeError);
    expect(() => new WorkerWords(owner, MAX_WORKERS, 1024)).toThrow(RangeError);
  });
});

describe("a worker's handoffs in flight", () => {
  it('are bounded by the limit (a refusal claims nothing) and released by the owner, per worker', () => {
    const owner = new OwnerWords();
    const w0 = new WorkerWords(owner, 0, 16);
    const w1 = new WorkerWords(owner, 1, 16);
    for (let i = 0; i < 16; i++) expect(w0.claimHandoff()).toBe(true);
    expect(w0.claimHandoff()).toBe(false);
    expect(owner.inFlight(0)).toBe(16);
    expect(owner.inFlight(1)).toBe(0);
    expect(w1.claimHandoff()).toBe(true);
    owner.handoffTaken(0);
    expect(w0.claimHandoff()).toBe(true);
    expect(w0.claimHandoff()).toBe(false);
  });

  it('put the worker under load from 1/8 of the limit: a zero-mac2 initiation then gets a cookie reply', () => {
    const { owner, words, engines, handed, initiation, screen, replies } = setup(2, 16);
    const m = initiation(NOW);
    // Not taken by the owner: worker 0 has 1, then 2 = 16/8 in flight.
    screen(0, m, NOW);
    expect(words[0]!.underLoad()).toBe(false);
    screen(0, m, NOW);
    expect(handed.map((h) => [h.worker, h.kind])).toEqual([
      [0, HANDOFF_SCREENED],
      [0, HANDOFF_SCREENED],
    ]);
    expect(words[0]!.underLoad()).toBe(true);
    // Worker 1 has none in flight and the owner is not loaded: it hands the same message off.
    expect(words[1]!.underLoad()).toBe(false);
    screen(1, m, NOW);
    expect(handed.length).toBe(3);
    screen(0, m, NOW);
    expect(handed.length).toBe(3);
    expect(engines[0]!.drops[DROP_COOKIE_REQUIRED]).toBe(1);
    expect(replies(0).map((r) => [r[0], r.length])).toEqual([[MESSAGE_COOKIE_REPLY, COOKIE_REPLY_SIZE]]);
    // The owner takes them; past the hysteresis, worker 0 hands off again.
    owner.handoffTaken(0);
    owner.handoffTaken(0);
    expect(words[0]!.underLoad()).toBe(false);
    screen(0, m, NOW + UNDER_LOAD_AFTER_TIME);
    expect(handed.length).toBe(4);
  });

  it('at the limit, a handoff is refused and counted by the engine', () => {
    const { engines, handed, receive } = setup(1, 8);
    // Transport under an index no snapshot knows goes to the owner as it is.
    const t = new Uint8Array(32);
    t[0] = 4;
    t[4] = 0x77;
    for (let i = 0; i < 10; i++) receive(0, t, NOW);
    expect(handed.length).toBe(8);
    expect(engines[0]!.handoffs).toBe(10);
    expect(engines[0]!.handoffsRefused).toBe(2);
  });
});

describe("the owner's load word", () => {
  it("follows the owner's handshake queue; a worker seeing it asks for mac2 with a cookie reply, for UNDER_LOAD_AFTER_TIME", async () => {
    const { a, owner, words, engines, handed, initiation, screen, replies, onTake } = setup(2);
    const sent: Uint8Array[] = [];
    let clock = NOW;
    // The owner's port with a queue of 16: under load from 2 queued handshakes.
    const port = new WireGuardPort({
      device: a,
      sink: { writeBatch: (_b, _o, _l, _p, n) => n },
      mtu: 1420,
      clock: () => clock,
      handshakeQueueSize: 16,
      openUdp: (o) =>
        Promise.resolve(
          new MemoryDatagramSocket(
            {
              net: {
                transmit: (_ta, _tp, _fa, _fp, buf, off, len) => {
                  sent.push(buf.slice(off, off + len));
                  return true;
                },
                unbind: () => {},
              },
              sourceFor: () => epA.address,
            },
            o.family,
            51820,
            [epA.address],
            null,
          ),
        ),
    });
    await port.bind(51820);
    // As WgWorkers does with a screened handoff: take it, queue it, share the queue's load.
    onTake((h) => {
      owner.handoffTaken(h.worker);
      expect(port.queueScreened(h.bytes, 0, h.bytes.length, h.address, h.port)).toBe(true);
      owner.shareLoad(port.handshakeUnderLoad);
    });
    const m = initiation(NOW);
    screen(0, m, NOW);
    expect(owner.loadShared).toBe(false);
    screen(1, m, NOW);
    expect(port.handshakeQueueDepth).toBe(2);
    expect(owner.loadShared).toBe(true);
    // Neither worker has anything in flight: the word alone puts them under load.
    expect(owner.inFlight(0) + owner.inFlight(1)).toBe(0);
    expect(words.map((w) => w.underLoad())).toEqual([true, true]);
    for (const w of [0, 1]) {
      screen(w, m, NOW);
      expect(engines[w]!.drops[DROP_COOKIE_REQUIRED]).toBe(1);
      expect(replies(w).map((r) => [r[0], r.length])).toEqual([[MESSAGE_COOKIE_REPLY, COOKIE_REPLY_SIZE]]);
    }
    expect(handed.length).toBe(2);

    // The owner processes its queue (one response, then replays) and clears the word.
    clock = NOW + 10;
    for (let i = 0; i < 100 && port.handshakeQueueDepth > 0; i++) await new Promise((r) => setImmediate(r));
    expect(port.handshakeQueueDepth).toBe(0);
    expect(sent.map((s) => s[0])).toEqual([MESSAGE_RESPONSE]);
    owner.shareLoad(port.handshakeUnderLoad);
    expect(owner.loadShared).toBe(false);
    expect(words.map((w) => w.underLoad())).toEqual([false, false]);
    // Worker 0 saw the word at NOW: still under load until NOW + UNDER_LOAD_AFTER_TIME.
    screen(0, m, NOW + UNDER_LOAD_AFTER_TIME - 1);
    expect(engines[0]!.drops[DROP_COOKIE_REQUIRED]).toBe(2);
    expect(replies(0).length).toBe(1);
    expect(handed.length).toBe(2);
    screen(0, m, NOW + UNDER_LOAD_AFTER_TIME);
    expect(handed.length).toBe(3);
    expect(replies(0)).toEqual([]);
    await port.close();
  });
});
