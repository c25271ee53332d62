/**
 * Offloads on real kernels (root, network namespaces prefixed "ofl-"):
 * - UDP GSO: one sendBatch of a run of equal-sized datagrams (and a shorter last one) leaves as
 *   ONE sendmmsg entry and a plain socket receives each datagram, intact;
 * - UDP GRO: that run, received on a UDP_GRO socket over loopback, arrives coalesced in one slot
 *   with the segment size in batch.segs;
 * - vnet-header TUN with TSO: a kernel TCP flow (node client in one namespace, server in another)
 *   crosses this process between two offload TUNs; super-packets larger than the MTU are read,
 *   cut with gsoSegment (every segment's IPv4 and TCP checksum verified), merged again with the
 *   Coalescer and written with writeVnetBatch; the bytes arrive intact (SHA-256).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { TUN_OFFLOAD_MAX_PACKET, TunDevice } from '../../src/io/tun.js';
import { withNetns } from '../../src/io/thread-netns.js';
import { UDP_GRO_MAX_LEN, UdpSocket, encodeAddress } from '../../src/io/udp.js';
import { Coalescer } from '../../src/packet/gro.js';
import { gsoSegment } from '../../src/packet/gso.js';
import { IP_PROTO_TCP, ipv4HeaderValid, ipv4Protocol } from '../../src/packet/ipv4.js';
import { PacketList } from '../../src/packet/packet-list.js';
import { tcpChecksumValidV4 } from '../../src/packet/tcp.js';
import { udpChecksumValidV4 } from '../../src/packet/udp.js';
import { VIRTIO_NET_HDR_GSO_UDP_L4, vnetGsoType } from '../../src/packet/virtio-net-hdr.js';
import { Topology, e2eUnavailableReason, isRoot, run, sleep, waitFor } from '../util/netns.js';

const reason =
  e2eUnavailableReason(['node', 'ss']) ??
  (loadNativeIo() === null ? `native addon: ${nativeIoLoadError()} (run scripts/setup.sh)` : null);
// As root nothing is skipped: a missing prerequisite fails the first test, naming it.
const skip = !isRoot();

describe.skipIf(skip)(`offloads on a real kernel${skip ? ` (skipped: ${reason})` : ''}`, () => {
  const topo = new Topology('ofl-');
  let nsU: string;
  let nsA: string;
  let nsB: string;

  it('has what it needs (iproute2 with netns, node, ss from iproute2, the native addon)', () => {
    expect(reason).toBeNull();
  });

  beforeAll(() => {
    if (reason !== null) return;
    nsU = topo.addNamespace('u');
    nsA = topo.addNamespace('a');
    nsB = topo.addNamespace('b');
  });
  afterAll(async () => {
    await topo.cleanup();
  });

  async function udpIn(ns: string, opts: { gso?: boolean; gro?: boolean }): Promise<UdpSocket> {
    return withNetns(ns, () => UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, ...opts }));
  }

  /** 10 datagrams of 1000 bytes and one of 300, each filled with its own index. */
  function run11(): { buf: Uint8Array; offs: Uint32Array; lens: Uint32Array } {
    const buf = new Uint8Array(11 * 1024);
    const offs = new Uint32Array(11);
    const lens = new Uint32Array(11);
    for (let i = 0; i < 11; i++) {
      offs[i] = i * 1024 + 16;
      lens[i] = i < 10 ? 1000 : 300;
      buf.fill(i + 1, offs[i], offs[i] + lens[i]);
    }
    return { buf, offs, lens };
  }

  it('UDP GSO: one sendmmsg entry carries a run; a plain socket receives every datagram', async () => {
    const rx = await udpIn(nsU, {});
    const tx = await udpIn(nsU, { gso: true });
    try {
      expect(tx.offload.gso).toBe(true);
      const got: number[][] = [];
      const batch = new PacketBatch({ maxLen: 2048, capacity: 32, withAddresses: true });
      rx.onBatch(batch, (b) => {
        for (let i = 0; i < b.count; i++) got.push([b.lens[i], b.buf[b.offs[i]], b.buf[b.offs[i] + b.lens[i] - 1]]);
      });
      const { buf, offs, lens } = run11();
      const addrs = new Uint8Array(24);
      encodeAddress('127.0.0.1', rx.port, addrs, 0);
      const idx = new Uint32Array(11); // all to record 0
      expect(tx.sendBatch(buf, offs, lens, addrs, idx, 11)).toBe(11);
      expect(tx.gsoMessages).toBe(1);
      expect(tx.stats.gsoFallbacks).toBe(0);
      await waitFor('11 datagrams', () => got.length === 11, 5000, 10);
      expect(got).toEqual(Array.from({ length: 11 }, (_, i) => [i < 10 ? 1000 : 300, i + 1, i + 1]));
      // Different lengths or destinations split runs: 3 entries here.
      lens[3] = 999;
      encodeAddress('127.0.0.1', rx.port, addrs, 0);
      const before = tx.gsoMessages;
      expect(tx.sendBatch(buf, offs, lens, addrs, idx, 11)).toBe(11);
      expect(tx.gsoMessages - before).toBe(2); // [0..3] (999 ends the run) and [4..10]
      await waitFor('22 datagrams', () => got.length === 22, 5000, 10);
      expect(got[14]).toEqual([999, 4, 4]);
    } finally {
      await rx.close();
      await tx.close();
    }
  });

  it('UDP GRO: a run arrives coalesced in one slot with its segment size', async () => {
    const rx = await udpIn(nsU, { gro: true });
    const tx = await udpIn(nsU, { gso: true });
    try {
      expect(rx.offload.gro).toBe(true);
      const small = new PacketBatch({ maxLen: 2048, capacity: 4, withAddresses: true, withSegments: true });
      expect(() => rx.onBatch(small, () => {})).toThrow(RangeError);
      const batch = new PacketBatch({ maxLen: UDP_GRO_MAX_LEN, capacity: 8, withAddresses: true, withSegments: true });
      const datagrams: number[][] = [];
      let maxSeg = 0;
      rx.onBatch(batch, (b) => {
        for (let i = 0; i < b.count; i++) {
          const seg = b.segs[i] !== 0 ? b.segs[i] : b.lens[i];
          maxSeg = Math.max(maxSeg, b.segs[i]);
          for (let o = 0; o < b.lens[i]; o += seg) {
            const l = Math.min(seg, b.lens[i] - o);
            datagrams.push([l, b.buf[b.offs[i] + o], b.buf[b.offs[i] + o + l - 1]]);
          }
        }
      });
      const { buf, offs, lens } = run11();
      const addrs = new Uint8Array(24);
      encodeAddress('127.0.0.1', rx.port, addrs, 0);
      expect(tx.sendBatch(buf, offs, lens, addrs, new Uint32Array(11), 11)).toBe(11);
      await waitFor('11 datagrams', () => datagrams.length === 11, 5000, 10);
      expect(datagrams).toEqual(Array.from({ length: 11 }, (_, i) => [i < 10 ? 1000 : 300, i + 1, i + 1]));
      expect(maxSeg).toBe(1000);
      expect(rx.stats.rxBatches).toBe(1);
      expect(rx.stats.rxPackets).toBe(11);
    } finally {
      await rx.close();
      await tx.close();
    }
  });

  interface Counters {
    superIn: number;
    largestIn: number;
    segments: number;
    badSegments: number;
    gsoErrors: number;
    superOut: number;
    written: number;
    writeFailed: number;
  }
  const newCounters = (): Counters => ({
    superIn: 0,
    largestIn: 0,
    segments: 0,
    badSegments: 0,
    gsoErrors: 0,
    superOut: 0,
    written: 0,
    writeFailed: 0,
  });
  const STRIDE = 2048;

  /** Our "wire" between two offload TUNs: read (super-)packets, cut them, check every segment, merge again, write. */
  function forwardOffload(from: TunDevice, to: TunDevice, c: Counters): void {
    const batch = new PacketBatch({
      maxLen: TUN_OFFLOAD_MAX_PACKET,
      capacity: 4,
      headroom: 16,
      scratch: 260 * STRIDE + 4 * 65600,
    });
    const segs = new PacketList(260);
    const out = new PacketList(260);
    const gro = new Coalescer({ maxFlows: 4 });
    const segArea = batch.scratchOff + 16;
    const groArea = batch.scratchOff + 260 * STRIDE;
    from.start(batch, (b) => {
      segs.clear();
      for (let i = 0; i < b.count; i++) {
        const o = b.offs[i];
        if (vnetGsoType(b.buf, o - 10) !== 0) {
          c.superIn++;
          c.largestIn = Math.max(c.largestIn, b.lens[i]);
        }
        if (gsoSegment(b.buf, o - 10, o, b.lens[i], segArea + segs.count * STRIDE, STRIDE, segs) < 0) c.gsoErrors++;
      }
      for (let k = 0; k < segs.count; k++) {
        c.segments++;
        if (!tcpValid(b.buf, segs.offs[k], segs.lens[k])) c.badSegments++;
      }
      out.clear();
      gro.begin(b.buf, groArea, 4 * 65600, out);
      for (let k = 0; k < segs.count; k++) gro.add(segs.offs[k], segs.lens[k]);
      gro.flush();
      for (let k = 0; k < out.count; k++) if (vnetGsoType(b.buf, out.offs[k]) !== 0) c.superOut++;
      const ok = to.writeVnetBatch(b.buf, out.offs, out.lens, out.count);
      c.written += ok;
      c.writeFailed += out.count - ok;
    });
  }

  /** Between two plain TUNs: check every TCP packet's checksums, then pass it on. */
  function forwardPlain(from: TunDevice, to: TunDevice, c: Counters): void {
    const batch = new PacketBatch({ maxLen: 1500, capacity: 64, headroom: 16 });
    from.start(batch, (b) => {
      for (let i = 0; i < b.count; i++) {
        c.segments++;
        c.largestIn = Math.max(c.largestIn, b.lens[i]);
        if (!tcpValid(b.buf, b.offs[i], b.lens[i])) c.badSegments++;
      }
      const ok = to.writeBatch(b.buf, b.offs, b.lens, b.count);
      c.written += ok;
      c.writeFailed += b.count - ok;
    });
  }

  function tcpValid(buf: Uint8Array, o: number, l: number): boolean {
    if (buf[o] >> 4 !== 4 || ipv4Protocol(buf, o) !== IP_PROTO_TCP) return true;
    return ipv4HeaderValid(buf, o, l) && tcpChecksumValidV4(buf, o, o + 20, l - 20);
  }

  /** Sends BYTES of a fixed pseudo-random stream from nsClient to 198.18.2.1 in nsServer; checks count and SHA-256. */
  async function tcpTransfer(nsClient: string, nsServer: string, bytes: number): Promise<void> {
    const port = 5300 + Math.floor(Math.random() * 500);
    const server = topo.spawnIn(
      nsServer,
      'tcp-server',
      [
        'node',
        '-e',
        `
      const h = require('crypto').createHash('sha256'); let n = 0;
      const s = require('net').createServer((c) => { c.on('data', (d) => { n += d.length; h.update(d); });
        c.on('end', () => { console.log('RESULT', n, h.digest('hex')); s.close(); }); });
      s.listen(${port}, '198.18.2.1');`,
      ],
      { lifetimeS: 60 },
    );
    await waitFor(
      'server listening',
      () => topo.exec(nsServer, ['ss', '-Hltn', `sport = :${port}`], { allowFail: true }).trim().length > 0,
      10_000,
    );
    const client = topo.spawnIn(
      nsClient,
      'tcp-client',
      [
        'node',
        '-e',
        `
      const buf = Buffer.alloc(${bytes}); let x = 12345;
      for (let i = 0; i < buf.length; i++) { x = (x * 1103515245 + 12345) >>> 0; buf[i] = x >>> 24; }
      const c = require('net').connect(${port}, '198.18.2.1', () => { c.end(buf); });
      c.on('error', (e) => { console.error(e); process.exit(1); });`,
      ],
      { lifetimeS: 60 },
    );
    const code = await Promise.race([client.exited, sleep(20_000).then(() => 'timeout (the flow stalled)')]);
    expect(code, client.output()).toBe(0);
    await Promise.race([server.exited, sleep(10_000)]);
    await topo.stop(server);
    const m = /RESULT (\d+) ([0-9a-f]{64})/.exec(server.output());
    expect(m, server.output()).not.toBeNull();
    const want = Buffer.alloc(bytes);
    let x = 12345;
    for (let i = 0; i < bytes; i++) {
      x = (x * 1103515245 + 12345) >>> 0;
      want[i] = x >>> 24;
    }
    expect(Number(m![1])).toBe(bytes);
    expect(m![2]).toBe(createHash('sha256').update(want).digest('hex'));
  }

  it('TSO TUN: a kernel TCP flow crosses two offload TUNs as segmented and re-coalesced super-packets', async () => {
    const ta = TunDevice.open({ name: 'ofl-ta', mtu: 1500, netns: nsA, offload: true });
    const tb = TunDevice.open({ name: 'ofl-tb', mtu: 1500, netns: nsB, offload: true });
    const c = newCounters();
    try {
      expect(ta.offload).not.toBeNull();
      expect(ta.offload!.tso).toBe(true);
      expect(ta.offload!.csum).toBe(true);
      run(['ip', '-n', nsA, 'addr', 'add', '198.18.1.1/24', 'dev', 'ofl-ta']);
      run(['ip', '-n', nsA, 'route', 'add', '198.18.2.0/24', 'dev', 'ofl-ta']);
      run(['ip', '-n', nsB, 'addr', 'add', '198.18.2.1/24', 'dev', 'ofl-tb']);
      run(['ip', '-n', nsB, 'route', 'add', '198.18.1.0/24', 'dev', 'ofl-tb']);
      forwardOffload(ta, tb, c);
      forwardOffload(tb, ta, c);
      await tcpTransfer(nsA, nsB, 24 << 20);
      // Super-packets larger than the MTU came out of the kernel, every segment was valid, and
      // the kernel took the super-packets we built.
      expect(c.superIn).toBeGreaterThan(0);
      expect(c.largestIn).toBeGreaterThan(1500);
      expect(c.badSegments).toBe(0);
      expect(c.gsoErrors).toBe(0);
      expect(c.superOut).toBeGreaterThan(0);
      expect(c.writeFailed).toBe(0);
      console.log('offload TUN counters', JSON.stringify(c));
    } finally {
      await ta.close();
      await tb.close();
    }
  }, 60_000);

  it('our super-packets are what Linux expects: forwarded to a plain TUN, the kernel cuts them into valid segments', async () => {
    // A → [offload TUN ta | us | offload TUN tb] → B forwards → [plain TUN tc | us | plain TUN td] → C.
    // B segments our super-packets in software for tc, completing checksums from the
    // pseudo-header sum we left in them: a wrong one would show as bad segments read from tc.
    const nsC = topo.addNamespace('c');
    run(['ip', 'netns', 'exec', nsB, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    const ta = TunDevice.open({ name: 'ofl-fa', mtu: 1500, netns: nsA, offload: true });
    const tb = TunDevice.open({ name: 'ofl-fb', mtu: 1500, netns: nsB, offload: true });
    const tc = TunDevice.open({ name: 'ofl-fc', mtu: 1500, netns: nsB });
    const td = TunDevice.open({ name: 'ofl-fd', mtu: 1500, netns: nsC });
    const wire = newCounters();
    const plain = newCounters();
    try {
      run(['ip', '-n', nsA, 'addr', 'add', '198.18.1.1/24', 'dev', 'ofl-fa']);
      run(['ip', '-n', nsA, 'route', 'replace', '198.18.2.0/24', 'dev', 'ofl-fa']);
      run(['ip', '-n', nsB, 'route', 'replace', '198.18.1.0/24', 'dev', 'ofl-fb']);
      run(['ip', '-n', nsB, 'route', 'replace', '198.18.2.0/24', 'dev', 'ofl-fc']);
      run(['ip', '-n', nsC, 'addr', 'add', '198.18.2.1/24', 'dev', 'ofl-fd']);
      run(['ip', '-n', nsC, 'route', 'add', '198.18.1.0/24', 'dev', 'ofl-fd']);
      forwardOffload(ta, tb, wire);
      forwardOffload(tb, ta, wire);
      forwardPlain(tc, td, plain);
      forwardPlain(td, tc, plain);
      await tcpTransfer(nsA, nsC, 8 << 20);
      expect(wire.superOut).toBeGreaterThan(0);
      expect(plain.segments).toBeGreaterThan(wire.superOut);
      expect(plain.largestIn).toBeLessThanOrEqual(1500);
      expect(plain.badSegments).toBe(0);
      console.log('forwarded counters', JSON.stringify({ wire, plain }));
    } finally {
      for (const t of [ta, tb, tc, td]) await t.close();
    }
  }, 60_000);

  it('USO TUN: a UDP GSO send in the namespace is read as one UDP super-packet and cut into the datagrams', async () => {
    const t = TunDevice.open({ name: 'ofl-tu', mtu: 1500, netns: nsU, offload: true });
    let tx: UdpSocket | null = null;
    try {
      expect(t.offload!.uso, 'TUNSETOFFLOAD refused USO (needs Linux >= 6.2)').toBe(true);
      run(['ip', '-n', nsU, 'addr', 'add', '198.18.7.1/24', 'dev', 'ofl-tu']);
      const batch = new PacketBatch({
        maxLen: TUN_OFFLOAD_MAX_PACKET,
        capacity: 4,
        headroom: 16,
        scratch: 64 * STRIDE,
      });
      const segs = new PacketList(64);
      const datagrams: number[][] = [];
      let superLen = 0;
      t.start(batch, (b) => {
        for (let i = 0; i < b.count; i++) {
          const o = b.offs[i];
          if (b.buf[o] >> 4 !== 4 || ipv4Protocol(b.buf, o) !== 17) continue;
          if (vnetGsoType(b.buf, o - 10) === VIRTIO_NET_HDR_GSO_UDP_L4) superLen = Math.max(superLen, b.lens[i]);
          segs.clear();
          expect(gsoSegment(b.buf, o - 10, o, b.lens[i], b.scratchOff + 16, STRIDE, segs)).toBeGreaterThan(0);
          for (let k = 0; k < segs.count; k++) {
            const so = segs.offs[k];
            const sl = segs.lens[k];
            expect(ipv4HeaderValid(b.buf, so, sl)).toBe(true);
            expect(udpChecksumValidV4(b.buf, so, so + 20, sl - 20)).toBe(true);
            datagrams.push([sl - 28, b.buf[so + 28]]);
          }
        }
      });
      const { buf, offs, lens } = run11();
      const addrs = new Uint8Array(24);
      encodeAddress('198.18.7.2', 9999, addrs, 0);
      tx = await withNetns(nsU, () => UdpSocket.open({ family: 4, address: '198.18.7.1', port: 0, gso: true }));
      expect(tx.sendBatch(buf, offs, lens, addrs, new Uint32Array(11), 11)).toBe(11);
      expect(tx.gsoMessages).toBe(1);
      await waitFor('11 datagrams through the TUN', () => datagrams.length >= 11, 5000, 10);
      expect(datagrams).toEqual(Array.from({ length: 11 }, (_, i) => [i < 10 ? 1000 : 300, i + 1]));
      expect(superLen).toBe(20 + 8 + 10 * 1000 + 300);
    } finally {
      await tx?.close();
      await t.close();
    }
  });

  it('UDP GSO through a device without checksum offload: the kernel segments in software, checksums valid', async () => {
    // A plain TUN has no checksum offload. (Kernels that refuse such a send with EIO make
    // sendBatchGso resend the run without GSO and count stats.gsoFallbacks; this one does not.)
    const t = TunDevice.open({ name: 'ofl-tz', mtu: 1500, netns: nsU });
    let tx: UdpSocket | null = null;
    try {
      run(['ip', '-n', nsU, 'addr', 'add', '198.18.8.1/24', 'dev', 'ofl-tz']);
      const seen: number[][] = [];
      const batch = new PacketBatch({ maxLen: 1500, capacity: 32 });
      t.start(batch, (b) => {
        for (let i = 0; i < b.count; i++) {
          const o = b.offs[i];
          const l = b.lens[i];
          if (b.buf[o + 9] === 17)
            seen.push([l - 28, b.buf[o + 28], udpChecksumValidV4(b.buf, o, o + 20, l - 20) ? 1 : 0]);
        }
      });
      tx = await withNetns(nsU, () => UdpSocket.open({ family: 4, address: '198.18.8.1', port: 0, gso: true }));
      const { buf, offs, lens } = run11();
      const addrs = new Uint8Array(24);
      encodeAddress('198.18.8.2', 9999, addrs, 0);
      expect(tx.sendBatch(buf, offs, lens, addrs, new Uint32Array(11), 11)).toBe(11);
      await waitFor('11 datagrams', () => seen.length === 11, 5000, 10);
      expect(seen).toEqual(Array.from({ length: 11 }, (_, i) => [i < 10 ? 1000 : 300, i + 1, 1]));
      expect(tx.gsoMessages + tx.stats.gsoFallbacks).toBeGreaterThan(0);
    } finally {
      await tx?.close();
      await t.close();
    }
  });

  it('UDP GSO: a run above the path MTU (refused as one GSO message) is still sent, as plain datagrams', async () => {
    const t = TunDevice.open({ name: 'ofl-tm', mtu: 1280, netns: nsU });
    let tx: UdpSocket | null = null;
    try {
      run(['ip', '-n', nsU, 'addr', 'add', '198.18.6.1/24', 'dev', 'ofl-tm']);
      const seen: number[] = [];
      const batch = new PacketBatch({ maxLen: 1280, capacity: 64 });
      t.start(batch, (b) => {
        for (let i = 0; i < b.count; i++) if (b.buf[b.offs[i] + 9] === 17) seen.push(b.lens[i]);
      });
      tx = await withNetns(nsU, () => UdpSocket.open({ family: 4, address: '198.18.6.1', port: 0, gso: true }));
      const buf = new Uint8Array(4 * 2048);
      const offs = new Uint32Array([16, 2064, 4112, 6160]);
      const lens = new Uint32Array([1400, 1400, 1400, 1400]); // 1428-byte packets on a 1280 MTU
      const addrs = new Uint8Array(24);
      encodeAddress('198.18.6.2', 9999, addrs, 0);
      expect(tx.sendBatch(buf, offs, lens, addrs, new Uint32Array(4), 4)).toBe(4);
      expect(tx.offload.gso).toBe(true); // not a device limitation: GSO stays on
      // Each datagram leaves fragmented, as a plain send would: 4 first fragments at least.
      await waitFor('fragments of 4 datagrams', () => seen.length >= 8, 5000, 10);
    } finally {
      await tx?.close();
      await t.close();
    }
  });

  it('plain write/writeBatch still take IP packets on an offload TUN; writeVnetBatch needs offload', async () => {
    const t = TunDevice.open({ name: 'ofl-tp', mtu: 1400, netns: nsU, offload: true });
    const plain = TunDevice.open({ name: 'ofl-tq', mtu: 1400, netns: nsU });
    try {
      expect(plain.offload).toBeNull();
      const b = new Uint8Array(64);
      expect(() => plain.writeVnetBatch(b, new Uint32Array(1), new Uint32Array([40]), 1)).toThrow(/offload/);
      const small = new PacketBatch({ maxLen: 1400, headroom: 16 });
      expect(() => t.start(small, () => {})).toThrow(RangeError); // TSO needs 64 KiB slots
      run(['ip', '-n', nsU, 'addr', 'add', '198.18.9.1/24', 'dev', 'ofl-tp']);
      // An ICMP echo request to our own address, written as a plain packet, is answered by the kernel.
      const replies: number[] = [];
      const batch = new PacketBatch({ maxLen: TUN_OFFLOAD_MAX_PACKET, capacity: 4, headroom: 16 });
      t.start(batch, (bb) => {
        for (let i = 0; i < bb.count; i++)
          if (bb.buf[bb.offs[i] + 9] === 1 && bb.buf[bb.offs[i] + 20] === 0) replies.push(bb.lens[i]);
      });
      const p = new Uint8Array(16 + 84);
      const o = 16;
      p.set([0x45, 0, 0, 84, 0, 1, 0x40, 0, 64, 1, 0, 0, 198, 18, 9, 2, 198, 18, 9, 1], o);
      let s = 0;
      for (let i = 0; i < 20; i += 2) s += (p[o + i] << 8) | p[o + i + 1];
      while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
      p[o + 10] = (~s >> 8) & 0xff;
      p[o + 11] = ~s & 0xff;
      p.set([8, 0, 0, 0, 0, 7, 0, 1], o + 20);
      s = 0;
      for (let i = 20; i < 84; i += 2) s += (p[o + i] << 8) | p[o + i + 1];
      while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
      p[o + 22] = (~s >> 8) & 0xff;
      p[o + 23] = ~s & 0xff;
      expect(t.write(p, o, 84)).toBe(true);
      expect(t.writeBatch(p, new Uint32Array([o]), new Uint32Array([84]), 1)).toBe(1);
      await waitFor('two echo replies', () => replies.length === 2, 5000, 10);
      expect(replies).toEqual([84, 84]);
    } finally {
      await t.close();
      await plain.close();
    }
  });
});
