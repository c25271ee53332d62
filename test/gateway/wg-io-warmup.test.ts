/**
 * weft-wg's I/O warm-up drives the real I/O classes on a private loopback tunnel: TUN reads and
 * writes through TunDevice (one end of a socket pair, with and without the virtio-net header of
 * an offloading TUN), UDP sends and receives through WireGuardPort's sockets on 127.0.0.1, a
 * handshake through the port, and echoes back to the host end; packets to no peer are dropped
 * by the engine. It leaves no handle behind.
 * TunDevice.pair itself: a packet written at one end is read at the other, header stripped.
 * (No root: a socket pair and loopback UDP on ephemeral ports.)
 */
import { describe, expect, it } from 'vitest';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { warmUpIo, IO_WARMUP_TARGET_ECHOES } from '../../src/gateway/wg-io-warmup.js';
import { PacketBatch } from '../../src/io/batch.js';
import { TunDevice } from '../../src/io/tun.js';
import type { TunOffloadState } from '../../src/io/tun-link.js';

const VNET: TunOffloadState = { vnetHdrLen: 10, flags: 0, csum: true, tso: true, uso: true };

function handles(): number {
  return process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').length;
}

describe('weft-wg I/O warm-up', () => {
  it.each([
    ['a plain TUN, no UDP offload', null, false],
    ['a TUN with a virtio-net header, UDP GSO/GRO', VNET, true],
  ] as const)('echoes through the real TUN and UDP classes (%s)', async (_name, tunOffload, udpOffload) => {
    const before = handles();
    const target = 200;
    // The budget is only an upper bound here: the run ends at the echo target.
    const r = await warmUpIo({
      backend: getCryptoBackend('auto'),
      mtu: 1420,
      tunOffload,
      udpOffload,
      budgetMs: 20_000,
      targetEchoes: target,
    });
    expect(r.skipped).toBeNull();
    expect(r.packets).toBeGreaterThanOrEqual(target);
    // Every echo was read from the TUN end and crossed UDP twice (request and answer), plus
    // the handshake's two messages.
    expect(r.tunRxBatches).toBeGreaterThan(0);
    expect(r.udpTxPackets).toBeGreaterThanOrEqual(2 * target + 2);
    expect(r.udpRxPackets).toBeGreaterThanOrEqual(2 * target + 2);
    // Packets to multicast groups no peer routes went in at the TUN end too, and were dropped.
    expect(r.noRouteDrops).toBeGreaterThan(0);
    expect(handles()).toBeLessThanOrEqual(before);
  });

  it('a budget of 0 does nothing', async () => {
    const r = await warmUpIo({
      backend: getCryptoBackend('auto'),
      mtu: 1420,
      tunOffload: null,
      udpOffload: false,
      budgetMs: 0,
    });
    expect(r).toMatchObject({ packets: 0, skipped: null, tunRxBatches: 0, udpTxPackets: 0, noRouteDrops: 0 });
    expect(IO_WARMUP_TARGET_ECHOES).toBeGreaterThan(0);
  });

  it.each([null, VNET])('TunDevice.pair carries packets end to end (offload %o)', async (off) => {
    const [a, b] = TunDevice.pair(1420, off);
    try {
      const hdr = off?.vnetHdrLen ?? 0;
      const got: number[][] = [];
      const batch = new PacketBatch({ capacity: 4, headroom: hdr, maxLen: off ? 65535 + 40 : 1500 });
      const seen = new Promise<void>((resolve) =>
        b.start(batch, (bt) => {
          for (let i = 0; i < bt.count; i++) got.push([...bt.buf.subarray(bt.offs[i], bt.offs[i] + bt.lens[i])]);
          if (got.length === 2) resolve();
        }),
      );
      const buf = new Uint8Array([0x45, 0, 0, 4, 0x60, 0, 0, 0, 9]);
      expect(a.writeBatch(buf, new Uint32Array([0, 4]), new Uint32Array([4, 5]), 2)).toBe(2);
      await seen;
      expect(got).toEqual([
        [0x45, 0, 0, 4],
        [0x60, 0, 0, 0, 9],
      ]);
      expect(a.stats.txPackets).toBe(2);
      expect(b.stats.rxPackets).toBe(2);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
