// The in-memory PacketDevice / DatagramSocket (src/io/memory-net.ts): batches into the caller's
// PacketBatch, bounded queues that drop and count, time from the injected clock.
import { describe, expect, test } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { MemoryNet } from '../../src/io/memory-net.js';
import { UdpError } from '../../src/io/udp.js';

function rxBatch(capacity = 8): PacketBatch {
  return new PacketBatch({ capacity, headroom: 32, tailroom: 16, maxLen: 1500, withAddresses: true });
}

const bytes = (...v: number[]): Uint8Array => new Uint8Array(v);

describe('MemoryNet', () => {
  test('delivers due datagrams in order, one batch per socket per round, with the source address', () => {
    const net = new MemoryNet();
    const a = net.host('10.0.0.1', '192.0.2.1');
    const b = net.host('10.0.0.2');
    const sa = a.openUdp({ family: 4, port: 5000 }); // wildcard: sends from the address nearest the destination
    const sb = b.openUdp({ family: 4, address: '10.0.0.2', port: 6000 });
    const got: string[] = [];
    let batches = 0;
    sb.onBatch(rxBatch(), (bt) => {
      batches++;
      for (let i = 0; i < bt.count; i++) {
        expect(bt.offs[i]! % bt.slotSize).toBe(32); // the caller's headroom
        got.push(`${sb.addressOf(bt, i)}:${sb.portOf(bt, i)}=${[...bt.packet(i)].join(',')}`);
      }
    });
    expect(sa.send(bytes(1, 2), 0, 2, '10.0.0.2', 6000)).toBe(true);
    expect(sa.send(bytes(9, 3, 4), 1, 2, '10.0.0.2', 6000)).toBe(true);
    expect(net.pending).toBe(2);
    expect(net.pump()).toBe(2);
    expect(batches).toBe(1);
    expect(got).toEqual(['10.0.0.1:5000=1,2', '10.0.0.1:5000=3,4']);
    expect(sa.offload).toEqual({ gso: false, gro: false });
  });

  test('bounded: a full wire drops and counts; a destination nobody binds is counted at its turn', () => {
    const net = new MemoryNet({ slots: 2 });
    const s = net.host('10.0.0.1').openUdp({ family: 4, port: 1 });
    for (let i = 0; i < 3; i++) s.send(bytes(i), 0, 1, '10.0.0.9', 1);
    expect(net.droppedFull).toBe(1);
    expect(s.stats.txDropped).toBe(1);
    expect(net.pump()).toBe(0);
    expect(net.droppedNoListener).toBe(2);
  });

  test('a full receive batch leaves the rest for the next round', () => {
    const net = new MemoryNet();
    const s = net.host('10.0.0.1').openUdp({ family: 4, port: 1 });
    const r = net.host('10.0.0.2').openUdp({ family: 4, port: 2 });
    const sizes: number[] = [];
    r.onBatch(rxBatch(2), (bt) => sizes.push(bt.count));
    for (let i = 0; i < 5; i++) s.send(bytes(i), 0, 1, '10.0.0.2', 2);
    expect(net.pump()).toBe(5);
    expect(sizes).toEqual([2, 2, 1]);
  });

  test('latency on the injected clock: nothing is due before its time', () => {
    let now = 1000;
    const net = new MemoryNet({ clock: () => now, latencyMs: 5 });
    const s = net.host('10.0.0.1').openUdp({ family: 4, port: 1 });
    const r = net.host('10.0.0.2').openUdp({ family: 4, port: 2 });
    let n = 0;
    r.onBatch(rxBatch(), (bt) => (n += bt.count));
    s.send(bytes(1), 0, 1, '10.0.0.2', 2);
    now = 1004;
    expect(net.pump()).toBe(0);
    now = 1005;
    expect(net.pump()).toBe(1);
    expect(n).toBe(1);
  });

  test('binding: a taken port and a foreign address are typed errors; port 0 picks a free one', () => {
    const net = new MemoryNet();
    const h = net.host('10.0.0.1');
    h.openUdp({ family: 4, port: 7 });
    expect(() => h.openUdp({ family: 4, address: '10.0.0.1', port: 7 })).toThrow(UdpError);
    expect(() => h.openUdp({ family: 4, address: '10.0.0.2', port: 8 })).toThrow(/not an address of this host/);
    expect(() => net.host('10.0.0.1')).toThrow(/already/);
    expect(h.openUdp({ family: 4, port: 0 }).port).toBeGreaterThan(0);
  });

  test('a device: the host side injects (bounded), the application reads batches and writes to onWrite', () => {
    const net = new MemoryNet();
    const dev = net.host('10.0.0.1').openDevice({ name: 'tun0', mtu: 1400, queue: 2 });
    expect(dev.offload).toBeNull();
    const read: number[][] = [];
    dev.start(new PacketBatch({ capacity: 4, headroom: 16, maxLen: 1400 }), (b) => {
      for (let i = 0; i < b.count; i++) read.push([...b.packet(i)]);
    });
    expect(dev.inject(bytes(1), 0, 1)).toBe(true);
    expect(dev.inject(bytes(2), 0, 1)).toBe(true);
    expect(dev.inject(bytes(3), 0, 1)).toBe(false); // full
    expect(dev.inject(new Uint8Array(1401), 0, 1401)).toBe(false); // above the MTU
    expect(dev.droppedFull).toBe(2);
    expect(net.pump()).toBe(2);
    expect(read).toEqual([[1], [2]]);
    const wrote: number[][] = [];
    dev.onWrite = (buf, off, len) => wrote.push([...buf.subarray(off, off + len)]);
    const buf = bytes(0, 5, 6, 7);
    expect(dev.writeBatch(buf, new Uint32Array([1, 3]), new Uint32Array([2, 1]), 2)).toBe(2);
    expect(wrote).toEqual([[5, 6], [7]]);
    expect(dev.stats.txPackets).toBe(2);
    expect(() => dev.writeVnetBatch()).toThrow(/no offload/);
  });
});
