/**
 * UDP on loopback for the I/O benchmark: node:dgram against the native recvmmsg/sendmmsg
 * batches, receiving from the packet source and sending to a socket nobody reads.
 */
import * as fs from 'node:fs';
import { PacketBatch } from '../src/io/batch.js';
import type { NativeIo } from '../src/io/native.js';
import { UdpSocket, encodeAddress } from '../src/io/udp.js';
import { measureRead, sleep, startBlaster, timeLoop, type ReadResult, type WriteResult } from './io-measure.js';

export async function udpRecv(mechanism: 'dgram' | 'native', size: number, ms: number): Promise<ReadResult> {
  const s = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism });
  let n = 0;
  s.onBatch(new PacketBatch({ maxLen: 1500, capacity: 64, withAddresses: true }), (b) => {
    n += b.count;
  });
  try {
    return await measureRead(
      size,
      ms,
      () => n,
      () => startBlaster(null, '127.0.0.1', s.port, size, ms + 500),
    );
  } finally {
    await s.close();
  }
}

export async function udpSend(
  mechanism: 'dgram' | 'native',
  size: number,
  ms: number,
  native: NativeIo,
): Promise<WriteResult> {
  // Sink: a bound socket nobody reads (the kernel drops once its buffer is full).
  const sink = native.udpOpen(4, new Uint8Array([127, 0, 0, 1]), 0, 0, 0, 0) as number[];
  const s = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism });
  const b = new PacketBatch({ maxLen: 1500, capacity: 64, withAddresses: true });
  for (let i = 0; i < 64; i++) b.lens[i] = size;
  encodeAddress('127.0.0.1', sink[1], b.addrs, 0);
  const idx = new Uint32Array(64);
  try {
    if (mechanism === 'native') return await timeLoop(ms, () => s.sendBatch(b.buf, b.offs, b.lens, b.addrs, idx, 64));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const end = t0 + ms;
    while (performance.now() < end) {
      s.sendBatch(b.buf, b.offs, b.lens, b.addrs, idx, 64); // bounded: beyond 4096 in flight are dropped
      await new Promise<void>((r) => setImmediate(r));
    }
    const elapsed = (performance.now() - t0) / 1000;
    await sleep(200); // let the last completions arrive (counted sends only)
    const cpu = process.cpuUsage(cpu0);
    return { pps: s.stats.txPackets / elapsed, cpuUs: (cpu.user + cpu.system) / s.stats.txPackets };
  } finally {
    await s.close();
    fs.closeSync(sink[0]);
  }
}
