import { afterEach, describe, expect, it } from 'vitest';
import * as dgram from 'node:dgram';
import { spawnSync } from 'node:child_process';
import { PacketBatch } from '../../src/io/batch.js';
import { ADDR_RECORD_LEN, loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { UdpError, UdpSocket, encodeAddress, type UdpMechanism } from '../../src/io/udp.js';
import { AddressInterner, recordPort } from '../../src/io/udp-address.js';
import { waitFor } from '../util/wait.js';
import { skipUnlessRoot, isRoot } from '../util/requirements.js';

const open: UdpSocket[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function sock(family: 4 | 6, mechanism: UdpMechanism, port = 0): Promise<UdpSocket> {
  const s = await UdpSocket.open({ family, address: family === 4 ? '127.0.0.1' : '::1', port, mechanism });
  open.push(s);
  return s;
}

function fill(buf: Uint8Array, off: number, len: number, seed: number): void {
  for (let i = 0; i < len; i++) buf[off + i] = (seed * 31 + i) & 0xff;
}

describe('encodeAddress / AddressInterner', () => {
  it('encodes IPv4, IPv6 and scopes and interns the text', () => {
    const rec = new Uint8Array(ADDR_RECORD_LEN * 3);
    encodeAddress('192.0.2.7', 51820, rec, 0);
    encodeAddress('fd00::1', 6091, rec, ADDR_RECORD_LEN);
    encodeAddress('fe80::1%3', 1, rec, 2 * ADDR_RECORD_LEN);
    expect([...rec.subarray(0, 8)]).toEqual([4, 0, 0xca, 0x6c, 192, 0, 2, 7]);
    expect(recordPort(rec, ADDR_RECORD_LEN)).toBe(6091);
    const int = new AddressInterner();
    const a = int.text(rec, 0);
    expect(a).toBe('192.0.2.7');
    expect(int.text(rec, 0)).toBe(a);
    expect(int.text(rec, ADDR_RECORD_LEN)).toBe('fd00::1');
    expect(int.text(rec, 2 * ADDR_RECORD_LEN)).toBe('fe80::1%3');
    expect(() => encodeAddress('[::1]', 1, rec, 0)).toThrow();
    expect(() => encodeAddress('1.2.3.4', 70000, rec, 0)).toThrow(RangeError);
  });

  it('stays bounded', () => {
    const int = new AddressInterner(8);
    const rec = new Uint8Array(ADDR_RECORD_LEN);
    for (let i = 0; i < 100; i++) {
      encodeAddress(`10.0.0.${i}`, 1, rec, 0);
      expect(int.text(rec, 0)).toBe(`10.0.0.${i}`);
    }
    expect((int as unknown as { size: number }).size).toBeLessThanOrEqual(8);
  });
});

const nativeMissing = skipUnlessRoot(
  loadNativeIo() === null
    ? `native addon unusable (${nativeIoLoadError()}): run node native/build.mjs (scripts/setup.sh does it)`
    : null,
);
const cases: [UdpMechanism, 4 | 6][] = [
  ['dgram', 4],
  ['dgram', 6],
  ['native', 4],
  ['native', 6],
];

for (const [mechanism, family] of cases) {
  const skip = mechanism === 'native' ? nativeMissing : null;
  describe.skipIf(skip !== null)(`UdpSocket ${mechanism} IPv${family}${skip ? ` (skipped: ${skip})` : ''}`, () => {
    it('delivers a sendBatch in order with payloads and source address, without truncation', async () => {
      const a = await sock(family, mechanism);
      const b = await sock(family, mechanism);
      expect(a.mechanism).toBe(mechanism);
      const rx = new PacketBatch({ maxLen: 1500, capacity: 32, withAddresses: true });
      const got: { len: number; ok: boolean; from: string; port: number }[] = [];
      let batches = 0;
      b.onBatch(rx, (batch) => {
        batches++;
        for (let i = 0; i < batch.count; i++) {
          const off = batch.offs[i];
          const seed = batch.buf[off];
          let ok = true;
          for (let k = 1; k < batch.lens[i]; k++) ok &&= batch.buf[off + k] === ((seed * 31 + k) & 0xff);
          got.push({ len: batch.lens[i], ok, from: b.addressOf(batch, i), port: b.portOf(batch, i) });
        }
      });
      const N = 100;
      const tx = new PacketBatch({ maxLen: 1500, capacity: N, withAddresses: true });
      const dest = family === 4 ? '127.0.0.1' : '::1';
      for (let i = 0; i < N; i++) {
        tx.lens[i] = 1 + ((i * 97) % 1400);
        fill(tx.buf, tx.offs[i], tx.lens[i], i);
        tx.buf[tx.offs[i]] = i; // seed byte, checked against the rest by the receiver
      }
      encodeAddress(dest, b.port, tx.addrs, 0);
      const idx = new Uint32Array(N); // every datagram to record 0
      expect(a.sendBatch(tx.buf, tx.offs, tx.lens, tx.addrs, idx, N)).toBe(N);
      await waitFor('all datagrams', () => got.length === N, 5000, 5);
      for (let i = 0; i < N; i++) {
        expect(got[i].len).toBe(1 + ((i * 97) % 1400));
        expect(got[i].ok).toBe(true);
        expect(got[i].from).toBe(dest);
        expect(got[i].port).toBe(a.port);
      }
      expect(b.stats.rxPackets).toBe(N);
      if (mechanism === 'native') expect(batches).toBeLessThan(N); // several datagrams per wake-up
    });

    it('send() by address string and a truncated datagram is counted, not delivered', async () => {
      const b = await sock(family, mechanism);
      const a = await sock(family, mechanism);
      const rx = new PacketBatch({ maxLen: 100, capacity: 4, withAddresses: true });
      const lens: number[] = [];
      b.onBatch(rx, (batch) => {
        for (let i = 0; i < batch.count; i++) lens.push(batch.lens[i]);
      });
      const buf = new Uint8Array(300);
      const dest = family === 4 ? '127.0.0.1' : '::1';
      expect(a.send(buf, 0, 200, dest, b.port)).toBe(true); // too long for the 100-byte slots
      expect(a.send(buf, 10, 50, dest, b.port)).toBe(true);
      await waitFor('small datagram', () => lens.length === 1, 5000, 5);
      expect(lens).toEqual([50]);
      expect(b.stats.rxTruncated).toBe(1);
      // sendTo with the destination as the second record of a table.
      const recs = new Uint8Array(2 * ADDR_RECORD_LEN);
      encodeAddress(dest, b.port, recs, ADDR_RECORD_LEN);
      expect(a.sendTo(buf, 0, 30, recs, ADDR_RECORD_LEN)).toBe(true);
      await waitFor('sendTo datagram', () => lens.length === 2, 5000, 5);
      expect(lens).toEqual([50, 30]);
    });

    it('reports granted buffer sizes and fails with a typed error on a taken port', async () => {
      const a = await sock(family, mechanism);
      const sizes = a.bufferSizes();
      expect(sizes.requestedRcvbuf).toBe(8 << 20);
      expect(sizes.rcvbuf).toBeGreaterThan(0);
      expect(sizes.sndbuf).toBeGreaterThan(0);
      if (mechanism === 'native' && process.getuid?.() === 0) {
        // As root SO_RCVBUFFORCE passes rmem_max; Linux reports twice the request.
        expect(sizes.forced).toBe(true);
        expect(sizes.rcvbuf).toBe(2 * (8 << 20));
      }
      await expect(
        UdpSocket.open({ family, address: family === 4 ? '127.0.0.1' : '::1', port: a.port, mechanism }),
      ).rejects.toBeInstanceOf(UdpError);
    });
  });
}

describe('fwmark (SO_MARK)', () => {
  it.skipIf(nativeMissing !== null || !isRoot())(
    `native: the kernel reports the mark on the socket${isRoot() ? '' : ' (skipped: needs root)'}`,
    async () => {
      const s = await sock(4, 'native');
      s.setMark(0x5a17);
      const out = spawnSync('ss', ['-u', '-a', '-n', '-H', 'fwmark = 0x5a17'], { encoding: 'utf8' }).stdout;
      expect(out).toContain(`127.0.0.1:${s.port}`);
      s.setMark(0);
      expect(spawnSync('ss', ['-u', '-a', '-n', '-H', 'fwmark = 0x5a17'], { encoding: 'utf8' }).stdout).not.toContain(
        `127.0.0.1:${s.port}`,
      );
    },
  );

  it('dgram: refuses with a typed error naming the addon', async () => {
    const s = await sock(4, 'dgram');
    expect(() => s.setMark(1)).toThrow(/native I\/O addon/);
    expect(() => s.setMark(-1)).toThrow(RangeError);
  });
});

describe.skipIf(nativeMissing !== null)('native and node:dgram interoperate', () => {
  it('a plain node:dgram client reaches the native socket and back', async () => {
    const srv = await sock(4, 'native');
    const rx = new PacketBatch({ maxLen: 1500, capacity: 8, withAddresses: true });
    srv.onBatch(rx, (batch) => {
      // Echo each datagram back to its source straight from the arena.
      expect(srv.sendBatch(batch.buf, batch.offs, batch.lens, batch.addrs, null, batch.count)).toBe(batch.count);
    });
    const client = dgram.createSocket('udp4');
    try {
      const reply = await new Promise<Buffer>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no echo')), 5000);
        client.on('message', (m) => {
          clearTimeout(t);
          resolve(m);
        });
        client.send(Buffer.from('hello weft'), srv.port, '127.0.0.1');
      });
      expect(reply.toString()).toBe('hello weft');
    } finally {
      client.close();
    }
  });
});
