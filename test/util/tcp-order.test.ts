/** flowOrder on synthetic captures: reordering counted, loss and retransmission not. */
import { describe, expect, it } from 'vitest';
import { TCP_FLAG_ACK } from '../../src/packet/tcp.js';
import { tcpPacket } from '../packet/factory.js';
import { LINKTYPE_RAW, PcapWriter } from './pcap.js';
import { flowOrder } from './tcp-order.js';

const MSS = 100;

/** A capture of data segments [id, segment index] from 10.0.0.1:5000 (plus noise from elsewhere). */
function capture(segs: [number, number][]): Uint8Array {
  const w = new PcapWriter(LINKTYPE_RAW);
  for (const [id, k] of segs) {
    const p = tcpPacket({
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 5000,
      dport: 80,
      id,
      seq: (0xffffff00 + k * MSS) >>> 0, // wraps past 2^32 on the way
      flags: TCP_FLAG_ACK,
      payload: new Uint8Array(MSS),
    });
    w.add(p.buf, p.off, p.len);
    const ack = tcpPacket({ src: '10.0.0.2', dst: '10.0.0.1', sport: 80, dport: 5000, id: 7, flags: TCP_FLAG_ACK });
    w.add(ack.buf, ack.off, ack.len);
  }
  return w.toBytes();
}

describe('flowOrder', () => {
  it('an in-order flow whose identification wraps: nothing reordered', () => {
    const segs: [number, number][] = [];
    for (let k = 0; k < 50; k++) segs.push([(0xffe0 + k) & 0xffff, k]);
    expect(flowOrder(capture(segs), '10.0.0.1')).toEqual({ segments: 50, reordered: 0, belowHighest: 0 });
  });

  it('a lost segment and its retransmission (a new, higher identification) are not reordering', () => {
    // Segment 3 lost; 4..6 sent; 3 sent again with the next identification.
    const segs: [number, number][] = [
      [100, 0],
      [101, 1],
      [102, 2],
      [104, 4],
      [105, 5],
      [106, 6],
      [107, 3],
      [108, 7],
    ];
    expect(flowOrder(capture(segs), '10.0.0.1')).toEqual({ segments: 8, reordered: 0, belowHighest: 1 });
  });

  it('segments that overtake earlier ones are reordering', () => {
    // 3 and 4 sent before 5 and 6 but arrive after them.
    const segs: [number, number][] = [
      [100, 0],
      [101, 1],
      [102, 2],
      [105, 5],
      [106, 6],
      [103, 3],
      [104, 4],
      [107, 7],
    ];
    expect(flowOrder(capture(segs), '10.0.0.1')).toEqual({ segments: 8, reordered: 2, belowHighest: 2 });
  });
});
