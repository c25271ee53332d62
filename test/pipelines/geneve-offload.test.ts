/**
 * The fabric's offload data path without a TUN (loopback UDP, no root), as the node agent and
 * the gateway wire it:
 *   super-packets (as a vnet-header TUN hands them over) → TunSegmenter → GenevePort.sendBatch
 *   (each segment encapsulated in place, runs of equal-sized datagrams as UDP GSO messages)
 *   ⇒ loopback ⇒ GenevePort with UDP GRO (runs spread apart in their slot, each datagram
 *   decapsulated) → sink → Coalescer over the batch's area (super-packets per flow again).
 * Proves: every byte of every flow arrives, in order, each delivered packet with the headroom
 * and tailroom the sink contract promises; the send side used GSO and the receive side got GRO
 * runs; the coalesced super-packets carry exactly the original payload per flow (segmenting then
 * coalescing is the identity on the payload); and both paths allocate nothing per packet
 * (sampling heap profiler). With offload off the same traffic arrives one datagram per slot.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { PacketBatch } from '../../src/io/batch.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { TUN_OFFLOAD_MAX_PACKET } from '../../src/io/tun.js';
import { Coalescer } from '../../src/packet/gro.js';
import { PacketList } from '../../src/packet/packet-list.js';
import { GenevePort } from '../../src/pipelines/geneve-port.js';
import type { GeneveSink } from '../../src/pipelines/geneve-port-types.js';
import { segmenterScratch, TunSegmenter } from '../../src/pipelines/tun-offload.js';
import { waitFor } from '../util/wait.js';
import { Prng } from '../util/prng.js';
import { sampledAllocations } from '../util/alloc.js';
import { writeSuper, type SuperSpec } from '../packet/offload-gen.js';
import { udpPacket } from '../packet/factory.js';

const nativeMissing = loadNativeIo() === null ? nativeIoLoadError() : null;
const MTU = 1340;
const HEADROOM = 128;
const TAILROOM = 64;
const PORT = 47091 + Math.floor(Math.random() * 1000);
const open: GenevePort[] = [];

afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});

/** Transport payload of the IP packet buf[off, +len) (IPv4/IPv6 without options, TCP or UDP). */
function payloadOf(buf: Uint8Array, off: number, len: number): Uint8Array {
  const v = buf[off]! >>> 4;
  const ipLen = v === 4 ? (buf[off]! & 15) * 4 : 40;
  const proto = buf[off + (v === 4 ? 9 : 6)]!;
  const l4 = off + ipLen;
  const l4h = proto === 6 ? (buf[l4 + 12]! >>> 4) * 4 : 8;
  return buf.subarray(l4 + l4h, off + len);
}

/** Flow key: source port (every generated flow has its own). */
function flowOf(buf: Uint8Array, off: number): number {
  const v = buf[off]! >>> 4;
  const l4 = off + (v === 4 ? (buf[off]! & 15) * 4 : 40);
  return (buf[l4]! << 8) | buf[l4 + 1]!;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

interface World {
  node: GenevePort;
  gw: GenevePort;
  seg: TunSegmenter;
  tunBatch: PacketBatch;
}

/**
 * A node port (127.0.0.2, routes everything in 10.0.0.0/8 to the gateway) whose
 * TUN batch is cut by a TunSegmenter into node.sendBatch, and a gateway port (127.0.0.1)
 * delivering into `sink`.
 */
async function world(sink: GeneveSink, offload: boolean, reservation: number): Promise<World> {
  const gwTable = new GeneveTunnelTable();
  gwTable.add({
    vni: 7,
    remoteUnderlay: '127.0.0.2',
    remotePort: PORT,
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l3',
    name: 'node',
  });
  const nodeTable = new GeneveTunnelTable();
  nodeTable.add({
    vni: 7,
    remoteUnderlay: '127.0.0.1',
    remotePort: PORT,
    localInternalAddress: '10.80.0.2',
    remoteInternalAddress: '10.80.0.1',
    mode: 'l3',
    name: 'gw',
  });
  nodeTable.addPodRoute('10.0.0.0/8', '10.80.0.1');
  const gw = await GenevePort.open({
    table: gwTable,
    sink,
    port: PORT,
    address: '127.0.0.1',
    offload,
    rxHeadroom: HEADROOM,
    rxTailroom: TAILROOM,
    rxCoalesceReservation: reservation,
    clock: () => 0,
  });
  open.push(gw);
  const node = await GenevePort.open({
    table: nodeTable,
    sink: { deliverBatch: () => {} },
    port: PORT,
    address: '127.0.0.2',
    offload,
    clock: () => 0,
  });
  open.push(node);
  const tunBatch = new PacketBatch({
    capacity: 8,
    headroom: HEADROOM,
    maxLen: TUN_OFFLOAD_MAX_PACKET,
    tailroom: TAILROOM,
    scratch: segmenterScratch(MTU, HEADROOM, TAILROOM, 256),
  });
  const seg = new TunSegmenter(tunBatch, 10, MTU, HEADROOM, TAILROOM, (buf, offs, lens, n) => {
    node.sendBatch(buf, offs, lens, n);
  });
  return { node, gw, seg, tunBatch };
}

/** Fills the TUN batch with super-packets of `specs` (one slot each); returns their payloads. */
function fill(b: PacketBatch, specs: SuperSpec[], rng: Prng): Uint8Array[] {
  b.filled(specs.length);
  return specs.map((s, k) => {
    const built = writeSuper(b.buf, b.offs[k]! - 10, s, rng);
    b.lens[k] = built.len;
    return b.buf.slice(built.off + built.hdrLen, built.off + built.len);
  });
}

function spec(rng: Prng, k: number, version: 4 | 6, proto: 6 | 17, segments: number): SuperSpec {
  const hdr = (version === 4 ? 20 : 40) + (proto === 6 ? 32 : 8);
  const gsoSize = MTU - hdr;
  return {
    version,
    proto,
    gsoSize,
    payload: gsoSize * (segments - 1) + rng.int(1, gsoSize),
    optLen: proto === 6 ? 12 : 0,
    seq: rng.nextU32(),
    id: rng.int(0, 0xffff),
    srcPort: 20000 + k,
    dstPort: 5201,
  };
}

describe.skipIf(nativeMissing !== null)('Geneve fabric path with UDP GSO/GRO (loopback)', () => {
  for (const offload of [true, false]) {
    it(`offload ${offload ? 'on' : 'off'}: segment → encapsulate → send ⇒ receive → decapsulate → coalesce carries every flow intact`, async () => {
      const rng = new Prng(offload ? 1313 : 1314);
      const co = new Coalescer({ vnetHdrLen: 10, udp: true });
      const out = new PacketList(4096);
      const delivered = new Map<number, Uint8Array[]>();
      const coalesced = new Map<number, Uint8Array[]>();
      let packets = 0;
      let superPackets = 0;
      let contractBroken = '';
      const sink: GeneveSink = {
        deliverBatch(buf, offs, lens, tunnels: readonly GeneveTunnel[], n, areaOff, areaLen) {
          // The sink contract: HEADROOM + 8 before and TAILROOM after every packet, its own.
          const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => offs[a]! - offs[b]!);
          for (let j = 1; j < n; j++) {
            const prevEnd = offs[order[j - 1]!]! + lens[order[j - 1]!]!;
            if (offs[order[j]!]! - (HEADROOM + 8) < prevEnd + TAILROOM)
              contractBroken = `packet at ${offs[order[j]!]} too close to the one ending at ${prevEnd}`;
          }
          for (let i = 0; i < n; i++) {
            if (tunnels[i]!.name !== 'node') contractBroken = `tunnel ${tunnels[i]!.name}`;
            const f = flowOf(buf, offs[i]!);
            (delivered.get(f) ?? delivered.set(f, []).get(f)!).push(payloadOf(buf, offs[i]!, lens[i]!).slice());
          }
          packets += n;
          expect(areaLen).toBeGreaterThanOrEqual(co.reservation);
          out.count = 0;
          co.begin(buf, areaOff, areaLen, out);
          for (let i = 0; i < n; i++) co.add(offs[i]!, lens[i]!);
          co.flush();
          for (let i = 0; i < out.count; i++) {
            const p = out.offs[i]! + 10; // after the virtio_net_hdr
            const len = out.lens[i]! - 10;
            if (buf[out.offs[i]! + 1] !== 0) superPackets++;
            const f = flowOf(buf, p);
            (coalesced.get(f) ?? coalesced.set(f, []).get(f)!).push(payloadOf(buf, p, len).slice());
          }
        },
      };
      const w = await world(sink, offload, co.reservation);
      expect(w.gw.udpOffload()).toEqual(offload ? { gso: true, gro: true } : { gso: false, gro: false });
      const expected = new Map<number, Uint8Array>();
      let segments = 0;
      for (let round = 0; round < 6; round++) {
        const specs = [
          spec(rng, round * 4, 4, 6, rng.int(2, 40)),
          spec(rng, round * 4 + 1, 4, 6, rng.int(2, 40)),
          spec(rng, round * 4 + 2, 4, 17, rng.int(2, 20)),
          spec(rng, round * 4 + 3, 4, 6, 1),
        ];
        const payloads = fill(w.tunBatch, specs, rng);
        specs.forEach((s, k) => {
          expected.set(s.srcPort!, payloads[k]!);
          segments += Math.ceil(s.payload / s.gsoSize);
        });
        w.seg.process(w.tunBatch);
        await waitFor(`round ${round} delivered`, () => packets >= segments, 5000, 5);
      }
      expect(contractBroken).toBe('');
      expect(packets).toBe(segments);
      for (const [f, want] of expected) {
        // Buffer.equals: vitest's deep equality is slow on 50 KB arrays.
        const d = concat(delivered.get(f) ?? []);
        const c = concat(coalesced.get(f) ?? []);
        expect([d.length, Buffer.from(d).equals(want)], `flow ${f} delivered`).toEqual([want.length, true]);
        expect([c.length, Buffer.from(c).equals(want)], `flow ${f} coalesced`).toEqual([want.length, true]);
      }
      expect(co.stats.badChecksum).toBe(0);
      expect(superPackets).toBeGreaterThan(0);
      const rx = w.gw.udpStats().v4!;
      if (offload) {
        // One sendmmsg entry per run, and the receiver got runs: far fewer slots than datagrams.
        expect(w.node.gsoMessages).toBeGreaterThan(0);
        expect(w.node.gsoMessages).toBeLessThan(segments / 4);
        expect(rx.rxBatches).toBeLessThan(segments / 4);
      } else {
        expect(w.node.gsoMessages).toBe(0);
      }
      expect(w.gw.stats.rxGroOverrun).toBe(0);
    }, 30_000);
  }

  it('the send (segment → encapsulate → GSO) and receive (GRO → spread → decapsulate → coalesce) paths allocate nothing per packet', async () => {
    const rng = new Prng(77);
    const co = new Coalescer({ vnetHdrLen: 10 });
    const out = new PacketList(4096);
    let packets = 0;
    const sink: GeneveSink = {
      deliverBatch(buf, offs, lens, _t, n, areaOff, areaLen) {
        out.count = 0;
        co.begin(buf, areaOff, areaLen, out);
        for (let i = 0; i < n; i++) co.add(offs[i]!, lens[i]!);
        co.flush();
        packets += n;
      },
    };
    const w = await world(sink, true, co.reservation);
    // One template super-packet per slot (TCP, 40 segments), copied back in before each round:
    // segmenting rewrites nothing in the slot, but the test must not depend on that.
    const specs = [spec(rng, 1, 4, 6, 40), spec(rng, 2, 4, 6, 40)];
    fill(w.tunBatch, specs, rng);
    const template = w.tunBatch.buf.slice(0, w.tunBatch.slotSize * specs.length);
    const lens = w.tunBatch.lens.slice(0, specs.length);
    const perRound = specs.reduce((n, s) => n + Math.ceil(s.payload / s.gsoSize), 0);
    const round = async (): Promise<void> => {
      const want = packets + perRound;
      w.tunBatch.buf.set(template, 0);
      w.tunBatch.filled(specs.length);
      w.tunBatch.lens.set(lens);
      w.seg.process(w.tunBatch);
      for (let k = 0; k < 2000 && packets < want; k++) await new Promise<void>((res) => setImmediate(res));
      if (packets < want) throw new Error(`only ${packets} of ${want} arrived`);
    };
    // Warm-up until the optimiser has compiled the path: encapsulate runs once per super-packet
    // (encapsulateNext for the other segments), and interpreted code boxes its float counters.
    for (let i = 0; i < 2000; i++) await round();
    let n = 0;
    const { bytes, where } = await sampledAllocations(
      async () => {
        const before = packets;
        for (let i = 0; i < 200; i++) await round();
        n = packets - before;
      },
      ({ url }) =>
        url.includes('/src/pipelines/') ||
        url.includes('/src/geneve/') ||
        url.includes('/src/packet/') ||
        url.includes('/src/io/'),
    );
    expect(n).toBe(200 * perRound);
    expect(bytes / n, where.join('; ')).toBeLessThan(2);
    expect(co.stats.superPackets).toBeGreaterThan(0);
    expect(w.node.gsoMessages).toBeGreaterThan(0);
  }, 60_000);
  it('GRO runs arrive scattered in place at the last run size; other sizes and long single datagrams are joined first; every packet intact', async () => {
    const rng = new Prng(4242);
    const got: string[] = [];
    let contractBroken = '';
    const sink: GeneveSink = {
      deliverBatch(buf, offs, lens, _t, n) {
        const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => offs[a]! - offs[b]!);
        for (let j = 1; j < n; j++) {
          const prevEnd = offs[order[j - 1]!]! + lens[order[j - 1]!]!;
          if (offs[order[j]!]! - (HEADROOM + 8) < prevEnd + TAILROOM)
            contractBroken = `packet at ${offs[order[j]!]} too close to the one ending at ${prevEnd}`;
        }
        for (let i = 0; i < n; i++) got.push(Buffer.from(buf.subarray(offs[i]!, offs[i]! + lens[i]!)).toString('hex'));
      },
    };
    const w = await world(sink, true, 0);
    const stride = HEADROOM + 9000;
    const buf = new Uint8Array(64 * stride);
    const offs = new Uint32Array(64);
    const lens = new Uint32Array(64);
    const want: string[] = [];
    let seq = 0;
    // Runs of equal sizes: a size repeated (in place after the first batch), sizes changing
    // (joined), and single datagrams longer than the last run's size (joined).
    const sizes = [1200, 1200, 1200, 700, 700, 1300, 300, 1200, 1200, 1400, 1400, 90, 1400];
    for (let round = 0; round < sizes.length * 3; round++) {
      const size = sizes[round % sizes.length]!;
      const n = round % 5 === 4 ? 1 : rng.int(2, 30);
      const before = got.length;
      for (let i = 0; i < n; i++) {
        const payload = rng.bytes(size);
        payload[0] = seq & 0xff;
        payload[1] = (seq++ >> 8) & 0xff;
        const p = udpPacket({ src: '10.1.0.1', dst: '10.2.0.1', sport: 1000, dport: 2000, payload, headroom: 0 });
        offs[i] = i * stride + HEADROOM;
        lens[i] = p.len;
        buf.set(p.buf.subarray(p.off, p.off + p.len), offs[i]!);
        want.push(Buffer.from(p.buf.subarray(p.off, p.off + p.len)).toString('hex'));
      }
      expect(w.node.sendBatch(buf, offs, lens, n)).toBe(n);
      await waitFor(`round ${round} delivered`, () => got.length >= before + n, 5000, 2);
    }
    expect(contractBroken).toBe('');
    expect(got.length).toBe(want.length);
    for (let i = 0; i < want.length; i++)
      if (got[i] !== want[i]) expect(`packet ${i}: ${got[i]}`).toBe(`packet ${i}: ${want[i]}`);
    expect(w.gw.stats.rxRunsInPlace).toBeGreaterThan(5);
    expect(w.gw.stats.rxJoined).toBeGreaterThan(5);
    expect(w.gw.stats.rxGroOverrun).toBe(0);
  });
});
