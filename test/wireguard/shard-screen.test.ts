/**
 * A worker screens handshake messages itself (ShardEngine.screenHandshake, on a virtual clock):
 * only initiations with a valid mac1 — and under load a valid mac2 within the rate limit — are
 * handed to the owner, marked screened; under load a missing mac2 gets a cookie reply from the
 * worker (at most the per-source limiter's burst, then its rate) and no handoff; the owner
 * processes a screened message without checking mac2 again, even under load.
 */
import { describe, expect, it } from 'vitest';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { zeroDatagramStats, type DatagramSocket } from '../../src/io/datagram.js';
import type { PacketBatch } from '../../src/io/batch.js';
import { WireGuardPort } from '../../src/pipelines/wireguard-port.js';
import { RATELIMIT_BURST, RATELIMIT_PACKETS_PER_SECOND, REKEY_TIMEOUT } from '../../src/wireguard/constants.js';
import { Device, RECEIVE_HANDSHAKE, ReceiveResult } from '../../src/wireguard/device.js';
import {
  DROP_COOKIE_REQUIRED,
  DROP_INVALID_MAC1,
  DROP_NO_PRIVATE_KEY,
  DROP_RATE_LIMITED,
} from '../../src/wireguard/drops.js';
import { COOKIE_REPLY_SIZE, MESSAGE_COOKIE_REPLY, MESSAGE_RESPONSE } from '../../src/wireguard/messages.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { allocateSharedSessions } from '../../src/wireguard/shared-sessions.js';
import { ShardEngine } from '../../src/wireguard/shard.js';
import { HANDOFF_SCREENED, type ShardPeer } from '../../src/wireguard/shard-peer.js';
import { ShardSlots } from '../../src/wireguard/shard-slots.js';

const backend = getCryptoBackend('auto');
const NOW = 1_700_000_000_000;
const epA: Endpoint = { address: '192.0.2.1', port: 51820 };
const epB: Endpoint = { address: '192.0.2.2', port: 40000 };

interface Handoff {
  kind: number;
  bytes: Uint8Array;
  address: string;
  port: number;
}

function setup() {
  const shared = allocateSharedSessions(1, 8, 8);
  const slots = new ShardSlots(shared);
  const a = new Device({ backend, sessionSlots: slots });
  const b = new Device({ backend });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const pab = a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  b.setEndpoint(pba, epA);
  const handed: Handoff[] = [];
  const link = {
    loaded: false,
    handoff: (kind: number, buf: Uint8Array, off: number, len: number, address: string, port: number) => {
      handed.push({ kind, bytes: buf.slice(off, off + len), address, port });
      return true;
    },
    underLoad: () => link.loaded,
    confirmed: () => {},
    roamed: () => {},
  };
  const w = new ShardEngine(backend, shared, 0, link);
  let version = 0;
  const publish = (): void => {
    w.apply(a.shardSnapshot(++version, (p) => slots.peerSlot(p), NOW));
  };
  publish();
  const msg = new OutgoingMessage<Peer>();
  /** B's next initiation (a copy), sent at `now`. */
  const initiation = (now: number): Uint8Array => {
    b.initiateHandshake(pba, now);
    expect(b.popOutgoing(msg)).toBe(true);
    const m = msg.buf.slice(msg.start, msg.start + msg.length);
    b.releaseOutgoing(msg.slot);
    return m;
  };
  const rr = new ReceiveResult<ShardPeer>();
  const screen = (m: Uint8Array, now: number): boolean => w.screenHandshake(m, 0, m.length, epB, now, false, rr);
  /** Cookie replies the worker queued for its socket. */
  const replies = (): { bytes: Uint8Array; to: string }[] => {
    const out: { bytes: Uint8Array; to: string }[] = [];
    const o = new OutgoingMessage<ShardPeer>();
    while (w.popOutgoing(o)) {
      out.push({ bytes: o.buf.slice(o.start, o.start + o.length), to: `${o.address}:${o.port}` });
      w.releaseOutgoing(o.slot);
    }
    return out;
  };
  return { a, b, pab, pba, w, link, handed, publish, initiation, screen, replies, rr };
}

describe('ShardEngine screens handshake messages before the owner sees them', () => {
  it('an initiation with a bad mac1 is never handed off; a valid one (not under load) is, screened', () => {
    const { w, handed, initiation, screen, replies } = setup();
    const m = initiation(NOW);
    const bad = m.slice();
    bad[bad.length - 20] ^= 1; // inside mac1
    expect(screen(bad, NOW)).toBe(false);
    expect(handed).toEqual([]);
    expect(w.drops[DROP_INVALID_MAC1]).toBe(1);
    expect(screen(m, NOW)).toBe(false); // never queued at the worker
    expect(handed).toEqual([{ kind: HANDOFF_SCREENED, bytes: m, address: epB.address, port: epB.port }]);
    expect(replies()).toEqual([]);
  });

  it('without a private key in the snapshot nothing is handed off; a new key re-keys mac1', () => {
    const { a, w, handed, initiation, screen, publish } = setup();
    const m = initiation(NOW);
    a.setPrivateKey(null);
    publish();
    expect(screen(m, NOW)).toBe(false);
    expect(w.drops[DROP_NO_PRIVATE_KEY]).toBe(1);
    a.setPrivateKey(new Uint8Array(32).fill(1));
    publish();
    expect(screen(m, NOW)).toBe(false);
    expect(handed.length).toBe(1);
  });

  it('under load, a zero mac2 gets a cookie reply (the burst, then the rate per source) and no handoff; its cookie passes', () => {
    const { b, w, link, handed, initiation, screen, replies } = setup();
    link.loaded = true;
    const m = initiation(NOW);
    for (let i = 0; i < 2 * RATELIMIT_BURST; i++) expect(screen(m, NOW)).toBe(false);
    expect(handed).toEqual([]);
    expect(w.drops[DROP_COOKIE_REQUIRED]).toBe(2 * RATELIMIT_BURST);
    let r = replies();
    expect(r.length).toBe(RATELIMIT_BURST);
    expect(r.every((x) => x.to === `${epB.address}:${epB.port}` && x.bytes.length === COOKIE_REPLY_SIZE)).toBe(true);
    expect(r[0]!.bytes[0]).toBe(MESSAGE_COOKIE_REPLY);
    // One packet's worth of the rate later: one more reply, not two.
    const later = NOW + 1000 / RATELIMIT_PACKETS_PER_SECOND;
    screen(m, later);
    screen(m, later);
    expect(replies().length).toBe(1);
    // B takes the cookie; its retry carries mac2 and is handed off, screened.
    const first = r[0]!.bytes;
    const rb = new ReceiveResult();
    expect(b.receive(first, 0, first.length, epA, later, false, rb)).toBe(RECEIVE_HANDSHAKE);
    const retry = initiation(NOW + REKEY_TIMEOUT);
    expect(screen(retry, NOW + REKEY_TIMEOUT)).toBe(false);
    expect(handed.map((h) => h.kind)).toEqual([HANDOFF_SCREENED]);
    expect(handed[0]!.bytes).toEqual(retry);
    r = replies();
    expect(r).toEqual([]);
  });

  it('under load, valid mac2 past the per-source rate is rate_limited; the state lasts UNDER_LOAD_AFTER_TIME', () => {
    const { b, w, link, handed, initiation, screen, replies } = setup();
    link.loaded = true;
    screen(initiation(NOW), NOW);
    const c = replies()[0]!.bytes;
    b.receive(c, 0, c.length, epA, NOW, false, new ReceiveResult());
    link.loaded = false;
    // 500 ms later, nothing loaded now: still under load (hysteresis), mac2 checked, rate applied.
    const t = NOW + 500;
    const m = initiation(NOW + REKEY_TIMEOUT); // mac2 from the cookie (valid 120 s)
    for (let i = 0; i < RATELIMIT_BURST + 2; i++) screen(m, t);
    expect(handed.length).toBe(RATELIMIT_BURST);
    expect(w.drops[DROP_RATE_LIMITED]).toBe(2);
    // Past the hysteresis and not loaded: mac1 alone lets a zero-mac2 initiation through.
    const plain = m.slice();
    plain.fill(0, plain.length - 16);
    expect(w.screen.isUnderLoad(NOW + 1500)).toBe(false);
    screen(plain, NOW + 1500);
    expect(handed.length).toBe(RATELIMIT_BURST + 1);
  });

  it('the owner processes a screened initiation under load without asking for mac2 again', async () => {
    const { a, w, handed, initiation, screen } = setup();
    const m = initiation(NOW);
    screen(m, NOW);
    expect(handed[0]!.kind).toBe(HANDOFF_SCREENED);
    // The owner is under load: its own screen demands mac2 of the same zero-mac2 message.
    const rr = new ReceiveResult();
    expect(a.screenHandshake(m, 0, m.length, epB, NOW, true, rr)).toBe(false);
    expect(a.drops[DROP_COOKIE_REQUIRED]).toBe(1);
    expect(a.isUnderLoad(NOW + 1)).toBe(true);
    const o = new OutgoingMessage<Peer>();
    while (a.popOutgoing(o)) a.releaseOutgoing(o.slot); // that cookie reply
    const sent: Uint8Array[] = [];
    const port = new WireGuardPort({
      device: a,
      sink: { writeBatch: (_b, _o, _l, _p, n) => n },
      mtu: 1420,
      clock: () => NOW + 1,
      openUdp: (o) => Promise.resolve(new RecordingSocket(o.family, sent)),
    });
    await port.bind(51820);
    const h = handed[0]!;
    expect(port.queueScreened(h.bytes, 0, h.bytes.length, h.address, h.port)).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(a.drops[DROP_COOKIE_REQUIRED]).toBe(1);
    expect(sent.map((s) => s[0])).toEqual([MESSAGE_RESPONSE]);
    expect(port.stats.handshakesProcessed).toBe(1);
    await port.close();
    void w;
  });
});

/** A socket stand-in that records what is sent. */
class RecordingSocket implements DatagramSocket {
  readonly port = 51820;
  readonly offload = { gso: false, gro: false };
  readonly stats = zeroDatagramStats();
  readonly canScatter = false;
  readonly gsoMessages = 0;
  constructor(
    readonly family: 4 | 6,
    private readonly sent: Uint8Array[],
  ) {}
  onBatch(_b: PacketBatch, _cb: (b: PacketBatch) => void): void {}
  addressOf(): string {
    return '';
  }
  portOf(): number {
    return 0;
  }
  send(buf: Uint8Array, off: number, len: number): boolean {
    this.sent.push(buf.slice(off, off + len));
    return true;
  }
  sendTo(buf: Uint8Array, off: number, len: number): boolean {
    return this.send(buf, off, len);
  }
  sendBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, _a: Uint8Array, _i: unknown, count: number): number {
    for (let i = 0; i < count; i++) this.send(buf, offs[i]!, lens[i]!);
    return count;
  }
  bufferSizes() {
    return { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }
  setMark(): void {}
  async close(): Promise<void> {}
}
