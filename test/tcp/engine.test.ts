import { describe, expect, it } from 'vitest';
import {
  TCP_CLOSED,
  TCP_CLOSE_WAIT,
  TCP_ESTABLISHED,
  TCP_EV_CLOSED,
  TCP_EV_ESTABLISHED,
  TCP_EV_PEER_FIN,
  TCP_FIN_WAIT_2,
  TCP_LAST_ACK,
  TCP_TIME_WAIT,
} from '../../src/tcp/state.js';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { TcpSegment, readSegment, readSynOptions } from '../../src/tcp/segment.js';
import { TCP_DROP_REASONS } from '../../src/tcp/reasons.js';
import { Wire, pattern, transfer } from './pair.js';

const v = new IpView();
function seg(pkt: Uint8Array): TcpSegment {
  parseIp(pkt, 0, pkt.length, v);
  const s = new TcpSegment();
  readSegment(pkt, v.l4, v.l4Len, s);
  if (s.flags & 2) readSynOptions(pkt, v.l4, s);
  return s;
}
const drops = (w: Wire, side: 'a' | 'b'): Record<string, number> => (side === 'a' ? w.a : w.b).stats.dropsByReason();

describe('tcp engine: handshake and data', () => {
  it('three-way handshake with MSS and window scale from both sides', () => {
    const w = new Wire({ mtu: 1500 }, { mtu: 1400 });
    const { ca, cb } = w.connect();
    expect(ca.state).toBe(TCP_ESTABLISHED);
    expect(cb.state).toBe(TCP_ESTABLISHED);
    expect(cb.takeEvents() & TCP_EV_ESTABLISHED).toBeTruthy();
    const [syn, synAck, ack] = w.sent.map((x) => seg(x.pkt));
    expect(syn!.flags).toBe(0x02);
    expect(syn!.mss).toBe(1460);
    expect(syn!.wscale).toBeGreaterThan(0);
    expect(synAck!.flags).toBe(0x12);
    expect(synAck!.mss).toBe(1360);
    expect(synAck!.ack).toBe((syn!.seq + 1) >>> 0);
    expect(ack!.flags).toBe(0x10);
    expect(ca.snd.mss).toBe(1360);
    expect(cb.snd.mss).toBe(1360);
  });

  it('IPv6: handshake and 300 kB both ways', () => {
    const w = new Wire();
    const { ca, cb } = w.connect(40001, 6);
    expect(cb.family).toBe(6);
    const d1 = pattern(300_000, 1);
    const d2 = pattern(300_000, 2);
    expect(Buffer.from(transfer(w, ca, cb, d1)).equals(Buffer.from(d1))).toBe(true);
    expect(Buffer.from(transfer(w, cb, ca, d2)).equals(Buffer.from(d2))).toBe(true);
  });

  it('without window scaling on one side neither scales; the window stays ≤ 65535', () => {
    const w = new Wire({ windowScaling: false }, {});
    w.connect();
    const synAck = seg(w.sent[1]!.pkt);
    expect(synAck.wscale).toBe(-1);
    const d = pattern(500_000);
    const { ca, cb } = w.connect(40002);
    expect(Buffer.from(transfer(w, ca, cb, d)).equals(Buffer.from(d))).toBe(true);
  });

  it('a peer without MSS option gets 536 (RFC 9293 §3.7.1)', () => {
    const w = new Wire();
    w.connect();
    // Replay a SYN without options by stripping: build one from a's SYN with data offset 5.
    const syn = w.sent[0]!.pkt.slice();
    syn[20 + 12] = 0x50;
    const total = 40;
    syn[2] = 0;
    syn[3] = total;
    const p = syn.slice(0, total);
    fixChecksums(p);
    p[20 + 1] = 1; // another source port
    fixChecksums(p);
    w.inject('b', p);
    const out = new Uint8Array(2000);
    const n = w.b.output(out, 0, w.now);
    const sa = seg(out.slice(0, n));
    expect(sa.flags).toBe(0x12);
    expect(sa.wscale).toBe(-1); // not offered back when the peer did not
  });

  it('1 MB with a small receive buffer, read in small chunks (flow control)', () => {
    const w = new Wire({}, { recvBufferSize: 4096 });
    const { ca, cb } = w.connect();
    const d = pattern(1_000_000);
    const got = transfer(w, ca, cb, d, 1000);
    expect(Buffer.from(got).equals(Buffer.from(d))).toBe(true);
    // No segment from a ever exceeded b's window.
    expect(drops(w, 'b').out_of_window ?? 0).toBe(0);
  });
});

describe('tcp engine: loss, reordering, zero window', () => {
  it('seeded 5% loss both ways: data intact, retransmissions counted', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    let x = 42;
    w.filter = () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x % 100 < 5 ? 'drop' : 'pass';
    };
    const d = pattern(400_000);
    const got = transfer(w, ca, cb, d);
    expect(Buffer.from(got).equals(Buffer.from(d))).toBe(true);
    expect(w.a.stats.retransmits + w.a.stats.fastRetransmits).toBeGreaterThan(0);
  });

  it('one lost segment is repaired by fast retransmit (3 dup ACKs), not a timeout', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    let dataSeen = 0;
    w.filter = (from, pkt) => (from === 'a' && pkt.length > 100 && ++dataSeen === 2 ? 'drop' : 'pass');
    const d = pattern(60_000);
    ca.send(d, 0, d.length);
    w.pump();
    expect(w.a.stats.fastRetransmits).toBe(1);
    expect(w.a.stats.timeouts).toBe(0);
    const out = new Uint8Array(d.length);
    expect(cb.recv(out, 0, out.length)).toBe(d.length);
    expect(Buffer.from(out).equals(Buffer.from(d))).toBe(true);
  });

  it('reordered segments are kept in the out-of-order ranges', () => {
    const w = new Wire({}, { maxOooRanges: 64 });
    const { ca, cb } = w.connect();
    let i = 0;
    w.filter = (from, pkt) => (from === 'a' && pkt.length > 100 && i++ % 3 === 0 ? 'hold' : 'pass');
    const d = pattern(200_000);
    const got = transfer(w, ca, cb, d);
    expect(Buffer.from(got).equals(Buffer.from(d))).toBe(true);
    expect(drops(w, 'b').ooo_full ?? 0).toBe(0);
  });

  it('with no out-of-order ranges, out-of-order data is dropped and resent', () => {
    const w = new Wire({}, { maxOooRanges: 0 });
    const { ca, cb } = w.connect();
    let i = 0;
    w.filter = (from, pkt) => (from === 'a' && pkt.length > 100 && i++ % 5 === 0 ? 'hold' : 'pass');
    const d = pattern(100_000);
    expect(Buffer.from(transfer(w, ca, cb, d)).equals(Buffer.from(d))).toBe(true);
    expect(drops(w, 'b').ooo_full).toBeGreaterThan(0);
  });

  it('RTO: a lost segment with nothing after it is resent after the RTO; RTT estimate (RFC 6298)', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    // The handshake's RTT sample is 0 ms on the virtual clock: RTO = the 200 ms floor.
    expect(ca.snd.rto.rto).toBe(200);
    let drop = true;
    w.filter = (from, pkt) => (from === 'a' && pkt.length > 40 && drop ? ((drop = false), 'drop') : 'pass');
    ca.send(pattern(100), 0, 100);
    w.pump();
    expect(cb.readable).toBe(0);
    const t0 = w.now;
    expect(w.step()).toBe(true);
    expect(w.now - t0).toBe(200);
    expect(cb.readable).toBe(100);
    expect(w.a.stats.retransmits).toBe(1);
    // A clean exchange 10 ms apart gives a sample (Karn: none from the retransmitted one).
    w.filter = () => 'pass';
    ca.send(pattern(10), 0, 10);
    const out = w.a.output(new Uint8Array(2000), 0, w.now);
    expect(out).toBeGreaterThan(0);
  });

  it('retries are bounded: an unreachable peer aborts the connection (timeout, RST)', () => {
    const w = new Wire({ maxRetries: 4 });
    const { ca, cb } = w.connect();
    w.filter = (from) => (from === 'a' ? 'drop' : 'pass');
    ca.send(pattern(1000), 0, 1000);
    w.pump();
    const t0 = w.now;
    let steps = 0;
    while (ca.state !== TCP_CLOSED && steps++ < 20) w.step();
    expect(ca.state).toBe(TCP_CLOSED);
    expect(ca.closeReason).toBe('timeout');
    expect(w.a.stats.timeouts).toBe(1);
    expect(w.a.stats.retransmits).toBe(4);
    // Backoff from the 200 ms floor: 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s.
    expect(w.now - t0).toBe(6200);
    expect(ca.takeEvents() & TCP_EV_CLOSED).toBeTruthy();
    expect(cb.state).toBe(TCP_ESTABLISHED); // its RST was dropped too
  });

  it('zero window: the sender stops, probes with backoff, resumes when the reader reads', () => {
    const w = new Wire({}, { recvBufferSize: 2000 });
    const { ca, cb } = w.connect();
    const d = pattern(5000);
    expect(ca.send(d, 0, d.length)).toBe(5000);
    w.pump();
    expect(cb.readable).toBe(2000);
    // Lose the window update the read will send: the persist timer must find the window.
    w.filter = (from) => (from === 'b' ? 'drop' : 'pass');
    const out = new Uint8Array(5000);
    let got = cb.recv(out, 0, 5000);
    w.pump();
    w.filter = () => 'pass';
    const probesBefore = w.sent.length;
    for (let i = 0; i < 10 && got < 5000; i++) {
      w.step();
      got += cb.recv(out, got, 5000 - got);
      w.pump();
    }
    expect(got).toBe(5000);
    expect(Buffer.from(out).equals(Buffer.from(d))).toBe(true);
    expect(w.sent.length).toBeGreaterThan(probesBefore);
  });
});

describe('tcp engine: close and reset', () => {
  it('graceful close, a first: FIN_WAIT_1 → FIN_WAIT_2 → TIME_WAIT → CLOSED after 2MSL; b: CLOSE_WAIT → LAST_ACK → CLOSED', () => {
    const w = new Wire({ timeWaitMs: 500 });
    const { ca, cb } = w.connect();
    ca.send(pattern(3000), 0, 3000);
    ca.close();
    w.pump();
    expect(ca.state).toBe(TCP_FIN_WAIT_2);
    expect(cb.state).toBe(TCP_CLOSE_WAIT);
    expect(cb.takeEvents() & TCP_EV_PEER_FIN).toBeTruthy();
    expect(cb.readable).toBe(3000);
    // Half-close: b still sends.
    cb.send(pattern(100), 0, 100);
    w.pump();
    expect(ca.readable).toBe(100);
    cb.close();
    expect(cb.state).toBe(TCP_LAST_ACK);
    w.pump();
    expect(cb.state).toBe(TCP_CLOSED);
    expect(cb.closeReason).toBe('closed');
    expect(ca.state).toBe(TCP_TIME_WAIT);
    expect(w.a.connectionCount).toBe(1);
    expect(w.b.connectionCount).toBe(0);
    const t = w.now;
    w.step();
    expect(w.now - t).toBe(500);
    expect(ca.state).toBe(TCP_CLOSED);
    expect(w.a.connectionCount).toBe(0);
  });

  it('simultaneous close: both FIN_WAIT_1 → CLOSING → TIME_WAIT', () => {
    const w = new Wire({ timeWaitMs: 100 }, { timeWaitMs: 100 });
    const { ca, cb } = w.connect();
    ca.close();
    cb.close();
    const buf = new Uint8Array(2000);
    const fa = w.a.output(buf, 0, w.now);
    const finA = buf.slice(0, fa);
    const fb = w.b.output(buf, 0, w.now);
    const finB = buf.slice(0, fb);
    w.inject('b', finA);
    w.inject('a', finB);
    expect(ca.stateName).toBe('CLOSING');
    expect(cb.stateName).toBe('CLOSING');
    w.pump();
    expect(ca.state).toBe(TCP_TIME_WAIT);
    expect(cb.state).toBe(TCP_TIME_WAIT);
  });

  it('TIME_WAIT answers a retransmitted FIN with an ACK and restarts its timer', () => {
    const w = new Wire({ timeWaitMs: 1000 });
    const { ca, cb } = w.connect();
    ca.close();
    w.pump();
    cb.close();
    const buf = new Uint8Array(2000);
    const n = w.b.output(buf, 0, w.now);
    const fin = buf.slice(0, n);
    w.inject('a', fin);
    expect(ca.state).toBe(TCP_TIME_WAIT);
    w.now += 600;
    w.inject('a', fin); // the ACK was lost, b sends its FIN again
    expect(w.a.output(buf, 0, w.now)).toBeGreaterThan(0);
    w.now += 600;
    w.a.poll(w.now);
    expect(ca.state).toBe(TCP_TIME_WAIT);
    w.now += 500;
    w.a.poll(w.now);
    expect(ca.state).toBe(TCP_CLOSED);
  });

  it('abort sends a RST; the peer drops to CLOSED with reason reset', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    cb.abort();
    w.pump();
    expect(ca.state).toBe(TCP_CLOSED);
    expect(ca.closeReason).toBe('reset');
    expect(w.a.stats.resetsIn).toBe(1);
  });

  it('RST validation (RFC 5961): off RCV.NXT in window → challenge ACK; outside → dropped; exact → reset', () => {
    const w = new Wire();
    const { ca, cb } = w.connect();
    const buf = new Uint8Array(2000);
    cb.abort();
    const n = w.b.output(buf, 0, w.now);
    const rst = buf.slice(0, n);
    const s = seg(rst);
    const at = (delta: number): Uint8Array => {
      const p = rst.slice();
      const q = (s.seq + delta) >>> 0;
      p[24] = q >>> 24;
      p[25] = (q >>> 16) & 0xff;
      p[26] = (q >>> 8) & 0xff;
      p[27] = q & 0xff;
      fixChecksums(p);
      return p;
    };
    expect(TCP_DROP_REASONS[w.inject('a', at(1000))]).toBe('rst_invalid');
    expect(w.a.stats.challengeAcks).toBe(1);
    expect(seg(w.sent.at(-1)!.pkt).flags).not.toBe(0); // (the challenge ACK goes out on output)
    expect(w.a.output(buf, 0, w.now)).toBeGreaterThan(0);
    expect(TCP_DROP_REASONS[w.inject('a', at(0x40000000))]).toBe('out_of_window');
    expect(ca.state).toBe(TCP_ESTABLISHED);
    expect(w.inject('a', at(0))).toBe(0);
    expect(ca.state).toBe(TCP_CLOSED);
  });

  it('SYN on an established connection gets a challenge ACK (RFC 5961 §4)', () => {
    const w = new Wire();
    const { ca } = w.connect();
    const syn = w.sent[0]!.pkt.slice();
    syn[24] ^= 0x10; // another ISN, inside or outside the window
    fixChecksums(syn);
    const r = w.inject('b', syn);
    expect(['syn_in_window', 'out_of_window']).toContain(TCP_DROP_REASONS[r]);
    expect(ca.state).toBe(TCP_ESTABLISHED);
    w.pump();
    expect(ca.state).toBe(TCP_ESTABLISHED);
  });

  it('a data segment for an unknown connection gets a RST with SEQ = SEG.ACK', () => {
    const w = new Wire();
    const { ca } = w.connect();
    ca.send(pattern(10), 0, 10);
    const buf = new Uint8Array(2000);
    const n = w.a.output(buf, 0, w.now);
    const data = buf.slice(0, n);
    const fresh = new Wire();
    expect(TCP_DROP_REASONS[fresh.inject('b', data)]).toBe('no_connection');
    const m = fresh.b.output(buf, 0, fresh.now);
    const r = seg(buf.slice(0, m));
    expect(r.flags).toBe(0x04);
    expect(r.seq).toBe(seg(data).ack);
  });

  it('refused SYN (not served) gets RST+ACK, counted', () => {
    const w = new Wire({}, {}, false);
    const ca = w.a.connect(4, new Uint8Array([10, 0, 0, 1]), 1234, new Uint8Array([192, 0, 2, 7]), 80)!;
    w.pump();
    expect(ca.state).toBe(TCP_CLOSED);
    expect(ca.closeReason).toBe('refused');
    expect(drops(w, 'b').refused).toBe(1);
  });

  it('connection table limit: the SYN beyond it gets a RST and is counted; a slot freed is reused', () => {
    const w = new Wire({}, { maxConnections: 2 });
    const c1 = w.connect(1);
    w.connect(2);
    const c3 = w.a.connect(4, new Uint8Array([10, 0, 0, 1]), 3, new Uint8Array([192, 0, 2, 7]), 80)!;
    w.pump();
    expect(c3.closeReason).toBe('refused');
    expect(drops(w, 'b').table_full).toBe(1);
    c1.cb.abort();
    w.pump();
    const c4 = w.connect(4);
    expect(c4.cb.state).toBe(TCP_ESTABLISHED);
  });

  it('bad checksum and garbage are counted drops, never throws', () => {
    const w = new Wire();
    const { ca } = w.connect();
    ca.send(pattern(50), 0, 50);
    const buf = new Uint8Array(2000);
    const n = w.a.output(buf, 0, w.now);
    const p = buf.slice(0, n);
    p[n - 1] ^= 1;
    expect(TCP_DROP_REASONS[w.inject('b', p)]).toBe('bad_checksum');
    for (let i = 0; i < 2000; i++) {
      const g = pattern(1 + (i % 80), i);
      if (i % 2) g[0] = 0x45;
      expect(() => w.b.input(g, 0, g.length, w.now)).not.toThrow();
    }
    expect(w.b.stats.drops.reduce((a, b) => a + b, 0)).toBeGreaterThan(1000);
  });

  it('handshake: a lost SYN-ACK is answered again when the SYN is retransmitted', () => {
    const w = new Wire();
    let dropped = 0;
    w.filter = (from) => (from === 'b' && dropped++ === 0 ? 'drop' : 'pass');
    const ca = w.a.connect(4, new Uint8Array([10, 0, 0, 1]), 5, new Uint8Array([192, 0, 2, 7]), 80)!;
    w.pump();
    expect(ca.stateName).toBe('SYN_SENT');
    w.step();
    expect(ca.state).toBe(TCP_ESTABLISHED);
    expect(w.b.nextReady()!.state).toBe(TCP_ESTABLISHED);
  });
});

function fixChecksums(p: Uint8Array): void {
  parseIp(p, 0, p.length, v);
  // IPv4 header checksum then TCP checksum.
  p[10] = p[11] = 0;
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += (p[i]! << 8) | p[i + 1]!;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  const c = ~s & 0xffff;
  p[10] = c >>> 8;
  p[11] = c & 0xff;
  const l4 = 20;
  const len = p.length - 20;
  p[l4 + 16] = p[l4 + 17] = 0;
  s = 6 + len;
  for (let i = 12; i < 20; i += 2) s += (p[i]! << 8) | p[i + 1]!;
  for (let i = 0; i < len; i += 2) s += (p[l4 + i]! << 8) | (i + 1 < len ? p[l4 + i + 1]! : 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  const t = ~s & 0xffff;
  p[l4 + 16] = t >>> 8;
  p[l4 + 17] = t & 0xff;
}

void TCP_CLOSE_WAIT;
