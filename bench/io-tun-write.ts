/**
 * TUN write mechanisms of the I/O benchmark: fs.write (async, one in flight), fs.writeSync,
 * koffi write(), the native addon's write1 and writeBatch.
 */
import * as fs from 'node:fs';
import { PacketBatch } from '../src/io/batch.js';
import { getLibc } from '../src/io/libc.js';
import type { NativeIo } from '../src/io/native.js';
import { timeLoop, type WriteResult } from './io-measure.js';
import { tunOpen } from './io-tun.js';

/** Writes IPv4/UDP packets 198.18.0.2:1234 → 198.18.0.1:9 (delivered locally, port closed). */
function buildTunPackets(size: number, n: number): PacketBatch {
  const b = new PacketBatch({ maxLen: 1420, capacity: n });
  for (let i = 0; i < n; i++) {
    const o = b.offs[i];
    const p = b.buf;
    p[o] = 0x45;
    p[o + 2] = size >> 8;
    p[o + 3] = size & 0xff;
    p[o + 8] = 64;
    p[o + 9] = 17;
    p.set([198, 18, 0, 2], o + 12);
    p.set([198, 18, 0, 1], o + 16);
    let s = 0;
    for (let k = 0; k < 20; k += 2) s += (p[o + k] << 8) | p[o + k + 1];
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    const c = ~s & 0xffff;
    p[o + 10] = c >> 8;
    p[o + 11] = c & 0xff;
    p[o + 20] = 0x04;
    p[o + 21] = 0xd2;
    p[o + 22] = 0;
    p[o + 23] = 9;
    p[o + 24] = (size - 20) >> 8;
    p[o + 25] = (size - 20) & 0xff; // UDP checksum 0: none
    b.lens[i] = size;
  }
  b.count = n;
  return b;
}

export async function tunWrite(mech: string, size: number, ms: number, native: NativeIo): Promise<WriteResult> {
  const dev = tunOpen(mech === 'koffi write()' ? 'koffi' : 'native');
  const pk = buildTunPackets(size, 64);
  const libc = getLibc();
  const one = pk.buf.subarray(pk.offs[0], pk.offs[0] + size);
  const buf = Buffer.from(one);
  try {
    switch (mech) {
      case 'fs.write (async, 1 in flight)': {
        let n = 0;
        let stop = false;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await new Promise<void>((resolve) => {
          const next = (): void => {
            if (stop) {
              resolve();
              return;
            }
            fs.write(dev.fd, buf, 0, size, null, () => {
              n++;
              next();
            });
          };
          next();
          setTimeout(() => {
            stop = true;
          }, ms);
        });
        const cpu = process.cpuUsage(cpu0);
        return { pps: n / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / n };
      }
      case 'fs.writeSync':
        return await timeLoop(ms, () => {
          fs.writeSync(dev.fd, buf, 0, size);
          return 1;
        });
      case 'koffi write()':
        return await timeLoop(ms, () => (libc.write(dev.fd, one, size) >= 0 ? 1 : 0));
      case 'native write1':
        return await timeLoop(ms, () => (native.write1(dev.fd, pk.buf, pk.offs[0], size) >= 0 ? 1 : 0));
      case 'native writeBatch ×64':
        return await timeLoop(ms, () => native.writeBatch(dev.fd, pk.buf, pk.offs, pk.lens, 64));
      default:
        throw new Error(mech);
    }
  } finally {
    await dev.close();
  }
}
