/**
 * UdpSocket.steerReusePort against the kernel: the classic BPF program on an SO_REUSEPORT group
 * sends WireGuard transport (first byte 4) to socket hash(source) % workers and everything else
 * to the socket bound after the workers'. The kernel's own 4-tuple hash (no program) is the
 * control: it spreads handshake messages over every socket.
 */
import * as dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { UdpSocket } from '../../src/io/udp.js';
import { skipUnlessRoot } from '../util/requirements.js';
import { waitFor } from '../util/wait.js';

const nativeMissing = skipUnlessRoot(
  loadNativeIo() === null
    ? `native addon unusable (${nativeIoLoadError()}): run node native/build.mjs (scripts/setup.sh does it)`
    : null,
);

interface Got {
  readonly type: number;
  readonly from: number;
}

const opened: UdpSocket[] = [];
const senders: dgram.Socket[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  for (const s of senders.splice(0)) s.close();
});

/** Opens `n` SO_REUSEPORT sockets on one port of loopback; steers the group first when asked. */
async function group(
  family: 4 | 6,
  n: number,
  steerWorkers: number | null,
): Promise<{ socks: UdpSocket[]; got: Got[][] }> {
  const address = family === 4 ? '127.0.0.1' : '::1';
  const socks: UdpSocket[] = [];
  const got: Got[][] = [];
  for (let i = 0; i < n; i++) {
    const s = await UdpSocket.open({
      family,
      address,
      port: i === 0 ? 0 : socks[0].port,
      mechanism: 'native',
      reusePort: true,
    });
    opened.push(s);
    if (i === 0 && steerWorkers !== null) expect(s.steerReusePort(steerWorkers)).toBe(true);
    const mine: Got[] = [];
    const rx = new PacketBatch({ maxLen: 256, capacity: 32, withAddresses: true });
    s.onBatch(rx, (b) => {
      for (let k = 0; k < b.count; k++) mine.push({ type: b.buf[b.offs[k]], from: s.portOf(b, k) });
    });
    socks.push(s);
    got.push(mine);
  }
  return { socks, got };
}

/** 16 senders; each sends one message of every type in `types` (148 bytes, the type first). */
async function send(family: 4 | 6, port: number, types: number[]): Promise<number> {
  const address = family === 4 ? '127.0.0.1' : '::1';
  for (let i = 0; i < 16; i++) {
    const s = dgram.createSocket(family === 4 ? 'udp4' : 'udp6');
    senders.push(s);
    await new Promise<void>((resolve) => s.bind(0, address, resolve));
    for (const t of types) {
      const msg = Buffer.alloc(148);
      msg[0] = t;
      await new Promise<void>((resolve, reject) => s.send(msg, port, address, (e) => (e ? reject(e) : resolve())));
    }
  }
  return 16 * types.length;
}

for (const family of [4, 6] as const) {
  describe.skipIf(nativeMissing !== null)(
    `SO_REUSEPORT steering, IPv${family}${nativeMissing ? ` (skipped: ${nativeMissing})` : ''}`,
    () => {
      it('transport by source to one of the workers, handshake messages and the rest to the socket after them', async () => {
        const { socks, got } = await group(family, 3, 2);
        const total = await send(family, socks[0].port, [1, 4, 4, 2, 4, 3, 0]);
        await waitFor('every datagram', () => got.flat().length === total, 5000, 5);
        // Nothing but transport reaches the two workers' sockets; every other type the third.
        for (const w of [0, 1]) expect(got[w].every((g) => g.type === 4)).toBe(true);
        expect(got[2].every((g) => g.type !== 4)).toBe(true);
        expect(got[2].length).toBe(16 * 4);
        // One sender's transport stays on one socket; the 16 senders use both.
        const socketOf = new Map<number, number>();
        for (const w of [0, 1])
          for (const g of got[w]) {
            expect(socketOf.get(g.from) ?? w).toBe(w);
            socketOf.set(g.from, w);
          }
        expect(socketOf.size).toBe(16);
        expect(new Set(socketOf.values()).size).toBe(2);
      });

      it('the kernel picks while the socket after the workers is not bound yet: nothing is lost', async () => {
        const { socks, got } = await group(family, 2, 2);
        const total = await send(family, socks[0].port, [1, 4, 3]);
        await waitFor('every datagram', () => got.flat().length === total, 5000, 5);
        expect(got[0].length + got[1].length).toBe(total);
      });

      it('control: without the program the kernel spreads handshake messages over every socket', async () => {
        const { socks, got } = await group(family, 3, null);
        const total = await send(family, socks[0].port, [1]);
        await waitFor('every datagram', () => got.flat().length === total, 5000, 5);
        expect(got.filter((g) => g.length > 0).length).toBeGreaterThan(1);
      });
    },
  );
}
