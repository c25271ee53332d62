/**
 * FIN and RST in every state (RFC 9293 §3.10.7.4), SACK blocks, the window's right edge, and
 * the challenge-ACK limit, on the virtual wire of pair.ts with hand-made peer segments.
 */
import { describe, expect, it } from 'vitest';
import type { TcpConnection } from '../../src/tcp/connection.js';
import { TCP_DROP_REASONS } from '../../src/tcp/reasons.js';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { TcpSegment, SegmentOptions, readSegment, writeSegment } from '../../src/tcp/segment.js';
import { seqAdd } from '../../src/tcp/seq.js';
import { Wire, pattern } from './pair.js';

const FIN = 0x01;
const RST = 0x04;
const ACK = 0x10;

/** A segment from c's peer to c (addresses swapped), with seq/ack/flags/payload. */
function fromPeer(c: TcpConnection, seq: number, ack: number, flags: number, data = 0): Uint8Array {
  const buf = new Uint8Array(2000);
  const a = {
    family: c.family,
    localAddr: c.remoteAddr,
    remoteAddr: c.localAddr,
    localPort: c.remotePort,
    remotePort: c.localPort,
  };
  const n = writeSegment(buf, 0, a, seq, ack, flags, 1000, data);
  return buf.slice(0, n);
}

function segOf(pkt: Uint8Array): TcpSegment {
  const v = new IpView();
  parseIp(pkt, 0, pkt.length, v);
  const s = new TcpSegment();
  readSegment(pkt, v.l4, v.l4Len, s);
  return s;
}

type Side = 'a' | 'b';
interface Setup {
  w: Wire;
  c: TcpConnection;
  side: Side;
}

/** Brings one end of a fresh connection into `state`. */
function into(state: string): Setup {
  const w = new Wire({ timeWaitMs: 1000 }, { timeWaitMs: 1000 });
  if (state === 'SYN_RECEIVED') {
    w.filter = (from) => (from === 'b' ? 'drop' : 'pass');
    w.a.connect(4, new Uint8Array([10, 0, 0, 1]), 4000, new Uint8Array([192, 0, 2, 7]), 80);
    w.pump();
    // The engine does not report it before the handshake completes: find it by address.
    const c = w.b.find(4, new Uint8Array([192, 0, 2, 7]), 0, 80, new Uint8Array([10, 0, 0, 1]), 0, 4000)!;
    return { w, c, side: 'b' };
  }
  if (state === 'SYN_SENT') {
    w.filter = () => 'drop';
    const c = w.a.connect(4, new Uint8Array([10, 0, 0, 1]), 4000, new Uint8Array([192, 0, 2, 7]), 80)!;
    w.pump();
    return { w, c, side: 'a' };
  }
  const { ca, cb } = w.connect();
  switch (state) {
    case 'ESTABLISHED':
      return { w, c: ca, side: 'a' };
    case 'FIN_WAIT_1':
      w.filter = (from) => (from === 'a' ? 'drop' : 'pass');
      ca.close();
      w.pump();
      return { w, c: ca, side: 'a' };
    case 'FIN_WAIT_2':
      ca.close();
      w.pump();
      return { w, c: ca, side: 'a' };
    case 'CLOSE_WAIT':
      ca.close();
      w.pump();
      return { w, c: cb, side: 'b' };
    case 'LAST_ACK':
      ca.close();
      w.pump();
      w.filter = (from) => (from === 'b' ? 'drop' : 'pass');
      cb.close();
      w.pump();
      return { w, c: cb, side: 'b' };
    case 'CLOSING': {
      ca.close();
      cb.close();
      const buf = new Uint8Array(2000);
      const finB = buf.slice(0, w.b.output(buf, 0, w.now));
      w.a.output(buf, 0, w.now); // a's FIN, lost
      w.inject('a', finB);
      return { w, c: ca, side: 'a' };
    }
    case 'TIME_WAIT':
      ca.close();
      w.pump();
      cb.close();
      w.pump();
      return { w, c: ca, side: 'a' };
  }
  throw new Error(state);
}

const STATES = [
  'SYN_SENT',
  'SYN_RECEIVED',
  'ESTABLISHED',
  'FIN_WAIT_1',
  'FIN_WAIT_2',
  'CLOSE_WAIT',
  'CLOSING',
  'LAST_ACK',
  'TIME_WAIT',
];

describe('tcp engine: RST and FIN in every state', () => {
  for (const st of STATES) {
    it(`${st}: a RST at RCV.NXT closes; one off RCV.NXT does not`, () => {
      const { w, c, side } = into(st);
      expect(c.stateName).toBe(st);
      if (st === 'SYN_SENT') {
        // RFC 9293 §3.10.7.3: acceptable only with an ACK of our SYN.
        expect(TCP_DROP_REASONS[w.inject(side, fromPeer(c, 0, c.snd.nxt, RST))]).toBe('rst_invalid');
        expect(c.stateName).toBe(st);
        expect(w.inject(side, fromPeer(c, 0, c.snd.nxt, RST | ACK))).toBe(0);
        expect(c.closeReason).toBe('refused');
      } else {
        expect(w.inject(side, fromPeer(c, seqAdd(c.rcv.nxt, 1), 0, RST))).not.toBe(0);
        expect(c.stateName).toBe(st);
        expect(w.inject(side, fromPeer(c, c.rcv.nxt, 0, RST))).toBe(0);
        expect(c.closeReason).toBe(st === 'TIME_WAIT' ? 'closed' : 'reset');
      }
      expect(c.stateName).toBe('CLOSED');
      expect((side === 'a' ? w.a : w.b).connectionCount).toBe(0);
    });
  }

  const afterFin: Record<string, string> = {
    SYN_RECEIVED: 'CLOSE_WAIT',
    ESTABLISHED: 'CLOSE_WAIT',
    FIN_WAIT_1: 'CLOSING',
    FIN_WAIT_2: 'TIME_WAIT',
    CLOSE_WAIT: 'CLOSE_WAIT',
    CLOSING: 'CLOSING',
    LAST_ACK: 'LAST_ACK',
    TIME_WAIT: 'TIME_WAIT',
  };
  for (const [st, next] of Object.entries(afterFin)) {
    it(`${st}: a FIN (acknowledging nothing new) leads to ${next} and is acknowledged`, () => {
      const { w, c, side } = into(st);
      const ep = side === 'a' ? w.a : w.b;
      // A FIN already received is sent again at RCV.NXT − 1; a new one at RCV.NXT.
      const seq = c.peerFinished ? seqAdd(c.rcv.nxt, -1) : c.rcv.nxt;
      const ack = st === 'SYN_RECEIVED' ? c.snd.nxt : c.snd.una;
      w.inject(side, fromPeer(c, seq, ack, FIN | ACK));
      expect(c.stateName).toBe(next);
      const buf = new Uint8Array(2000);
      let acked = false;
      for (let n = ep.output(buf, 0, w.now); n > 0; n = ep.output(buf, 0, w.now)) {
        const s = segOf(buf.slice(0, n));
        if (s.flags & ACK && s.ack === c.rcv.nxt) acked = true;
      }
      expect(acked).toBe(true);
    });
  }
});

describe('tcp engine: SACK, window edge, challenge ACK limit', () => {
  it('out-of-order data is reported in SACK blocks, the latest first (RFC 2018 §4)', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    expect(cb['sackOk' as keyof TcpConnection]).toBe(true);
    const base = cb.rcv.nxt;
    const data = pattern(100);
    const send = (off: number, len: number): TcpSegment => {
      const buf = new Uint8Array(2000);
      const a = {
        family: 4 as const,
        localAddr: ca.localAddr,
        remoteAddr: ca.remoteAddr,
        localPort: ca.localPort,
        remotePort: ca.remotePort,
      };
      buf.set(data.subarray(0, len), 40);
      const n = writeSegment(buf, 0, a, seqAdd(base, off), ca.rcv.nxt, ACK, 1000, len);
      w.inject('b', buf.slice(0, n));
      const n2 = w.b.output(buf, 0, w.now);
      return segOf(buf.slice(0, n2));
    };
    send(1000, 100);
    send(3000, 100);
    const s = send(2000, 100);
    expect(s.ack).toBe(base);
    // Blocks: [2000,2100) first (latest), then [1000,1100), [3000,3100).
    const o = new SegmentOptions();
    const count = cb.rcv.sackBlocks(o.sack, 4);
    expect(count).toBe(3);
    const rel = [...o.sack.subarray(0, 6)].map((x) => (x - base) >>> 0);
    expect(rel).toEqual([2000, 2100, 1000, 1100, 3000, 3100]);
  });

  it('the advertised right edge never moves back, and small openings are not advertised (SWS)', () => {
    const w = new Wire({}, { recvBufferSize: 10_000 });
    const { ca, cb } = w.connect();
    let lastEdge = -1;
    w.filter = (from, pkt) => {
      if (from === 'b') {
        const s = segOf(pkt);
        const edge = s.ack + (s.window << (cb.rcv.wscale ?? 0));
        if (lastEdge >= 0) expect(((edge - lastEdge) | 0) >= 0).toBe(true);
        lastEdge = edge;
      }
      return 'pass';
    };
    const d = pattern(50_000);
    const out = new Uint8Array(d.length);
    let sent = 0;
    let got = 0;
    for (let i = 0; i < 1000 && got < d.length; i++) {
      sent += ca.send(d, sent, d.length - sent);
      w.pump();
      got += cb.recv(out, got, 300); // small reads
      w.pump();
    }
    expect(got).toBe(d.length);
    expect(Buffer.from(out).equals(Buffer.from(d))).toBe(true);
  });

  it('challenge ACKs are limited per connection per second (RFC 5961 §7)', () => {
    const w = new Wire({ challengeAcksPerSecond: 3 });
    const { ca } = w.connect();
    for (let i = 0; i < 10; i++) w.inject('a', fromPeer(ca, seqAdd(ca.rcv.nxt, 10 + i), 0, RST));
    expect(w.a.stats.challengeAcks).toBe(3);
    w.now += 1000;
    w.inject('a', fromPeer(ca, seqAdd(ca.rcv.nxt, 10), 0, RST));
    expect(w.a.stats.challengeAcks).toBe(4);
    expect(ca.stateName).toBe('ESTABLISHED');
  });
});

describe('tcp engine: a closed window is probed, not given up, while the peer answers', () => {
  it('the peer keeps its window closed for 10 minutes: still ESTABLISHED; then it vanishes: timeout', () => {
    const w = new Wire({ maxRetries: 5 }, { recvBufferSize: 1000 });
    const { ca } = w.connect();
    ca.send(pattern(5000), 0, 5000);
    w.pump();
    expect(ca.snd.wnd).toBe(0);
    const start = w.now;
    let probes = 0;
    w.filter = (from, pkt) => {
      if (from === 'a' && segOf(pkt).seq === seqAdd(ca.snd.una, -1)) probes++;
      return 'pass';
    };
    while (w.now - start < 600_000) if (!w.step()) break;
    expect(ca.stateName).toBe('ESTABLISHED');
    expect(probes).toBeGreaterThan(5);
    w.filter = () => 'drop';
    for (let i = 0; i < 20 && ca.stateName !== 'CLOSED'; i++) w.step();
    expect(ca.closeReason).toBe('timeout');
  });
});

describe('tcp engine: TIME_WAIT reuse, RST queue bound, non-unicast', () => {
  it('a new SYN with a higher sequence number ends TIME_WAIT and opens a new connection (RFC 6191); a lower one does not', () => {
    const w = new Wire({ timeWaitMs: 60_000 }, { timeWaitMs: 60_000 });
    const { ca, cb } = w.connect(4100);
    cb.close();
    w.pump();
    ca.close();
    w.pump();
    expect(cb.stateName).toBe('TIME_WAIT');
    const SYN = 0x02;
    expect(TCP_DROP_REASONS[w.inject('b', fromPeer(cb, seqAdd(cb.rcv.nxt, -5000), 0, SYN))]).toBe('out_of_window');
    expect(cb.stateName).toBe('TIME_WAIT');
    expect(w.inject('b', fromPeer(cb, seqAdd(cb.rcv.nxt, 5000), 0, SYN))).toBe(0);
    expect(cb.stateName).toBe('CLOSED');
    const fresh = w.b.find(4, cb.localAddr, 0, 80, cb.remoteAddr, 0, 4100)!;
    expect(fresh).not.toBe(cb);
    expect(fresh.stateName).toBe('SYN_RECEIVED');
    expect(w.b.connectionCount).toBe(1);
  });

  it('RSTs for unknown connections are bounded by the queue; the overflow is counted', () => {
    const w = new Wire();
    const { ca } = w.connect();
    const fresh = new Wire({}, { rstQueueLength: 4 });
    for (let i = 0; i < 10; i++)
      fresh.inject('b', fromPeer({ ...ca, localPort: 5000 + i } as TcpConnection, 1, 1, ACK));
    expect(fresh.b.stats.dropsByReason().no_connection).toBe(10);
    expect(fresh.b.stats.rstQueueFull).toBe(6);
    const buf = new Uint8Array(2000);
    let n = 0;
    while (fresh.b.output(buf, 0, fresh.now) > 0) n++;
    expect(n).toBe(4);
  });

  it('segments from or to multicast / broadcast addresses are dropped without an answer', () => {
    const w = new Wire();
    const { ca } = w.connect();
    const mcast = { ...ca, remoteAddr: new Uint8Array([224, 0, 0, 1, ...new Array(12).fill(0)]) } as TcpConnection;
    const pkt = fromPeer(mcast, 1, 1, ACK);
    expect(TCP_DROP_REASONS[w.inject('a', pkt)]).toBe('bad_address');
    expect(w.a.output(new Uint8Array(2000), 0, w.now)).toBe(0);
  });
});
