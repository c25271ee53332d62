import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Topology, e2eUnavailableReason } from '../util/netns.js';

// Simulates a machine where the addon did not build: WEFT_NO_ADDON=1 and fresh module instances
// (the loader caches its answer per module instance).
describe('without the native addon', () => {
  const saved = process.env.WEFT_NO_ADDON;
  beforeEach(() => {
    process.env.WEFT_NO_ADDON = '1';
    vi.resetModules();
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.WEFT_NO_ADDON;
    else process.env.WEFT_NO_ADDON = saved;
    vi.resetModules();
  });

  it('the loader says why, and UDP falls back to node:dgram with the same API', async () => {
    const native = await import('../../src/io/native.js');
    expect(native.loadNativeIo()).toBeNull();
    expect(native.nativeIoLoadError()).toMatch(/WEFT_NO_ADDON/);
    const { UdpSocket, UdpError } = await import('../../src/io/udp.js');
    const { PacketBatch } = await import('../../src/io/batch.js');
    const a = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0 });
    const b = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0 });
    try {
      expect(a.mechanism).toBe('dgram');
      const got: string[] = [];
      b.onBatch(new PacketBatch({ maxLen: 100, capacity: 4, withAddresses: true }), (batch) => {
        for (let i = 0; i < batch.count; i++) got.push(Buffer.from(batch.packet(i)).toString());
      });
      expect(a.send(new TextEncoder().encode('xxfallback'), 2, 8, '127.0.0.1', b.port)).toBe(true);
      const deadline = Date.now() + 5000;
      while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(got).toEqual(['fallback']);
      await expect(UdpSocket.open({ family: 4, port: 0, mechanism: 'native' })).rejects.toBeInstanceOf(UdpError);
    } finally {
      await a.close();
      await b.close();
    }
  });

  const reason = e2eUnavailableReason();
  describe.skipIf(reason !== null)(`TUN${reason ? ` (skipped: ${reason})` : ''}`, () => {
    const topo = new Topology('wio-');
    afterAll(async () => {
      await topo.cleanup();
    });

    it('TunDevice picks the koffi path by itself', async () => {
      const ns = topo.addNamespace('fb');
      const { TunDevice } = await import('../../src/io/tun.js');
      const dev = TunDevice.open({ name: 'wio-fb0', netns: ns });
      try {
        expect(dev.mechanism).toBe('koffi');
        // Even when the native path is asked for, it degrades instead of failing.
        const dev2 = TunDevice.open({ name: 'wio-fb1', netns: ns, mechanism: 'native' });
        expect(dev2.mechanism).toBe('koffi');
        await dev2.close();
      } finally {
        await dev.close();
      }
    });
  });
});
