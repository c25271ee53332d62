/**
 * The offload data path of weft-wg without a TUN:
 * - TunSegmenter: super-packets as a vnet-header TUN hands them over become MTU-sized
 *   segments with WireGuard headroom/tailroom, carrying exactly the original payload, in order,
 *   with valid checksums; drops counted by reason.
 * - WireGuardPort with udpOffload over loopback UDP (no root): a GSO burst from a peer arrives
 *   through GRO slots and every datagram is decrypted, in order; encryptBatch of equal-sized
 *   segments leaves as GSO messages the peer decrypts; and that path allocates nothing per packet.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { PacketBatch } from '../../src/io/batch.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { TUN_OFFLOAD_MAX_PACKET } from '../../src/io/tun.js';
import { encodeAddress, UdpSocket } from '../../src/io/udp.js';
import { finishChecksum } from '../../src/packet/checksum.js';
import { ipv4TransportSum } from '../../src/packet/ipv4.js';
import { ipv6TransportSum } from '../../src/packet/ipv6.js';
import { parsePrefix } from '../../src/packet/addr.js';
import { writeVnetHdr, writeVnetHdrNone, VIRTIO_NET_HDR_GSO_TCPV4 } from '../../src/packet/virtio-net-hdr.js';
import { segmenterScratch, TunSegmenter } from '../../src/pipelines/tun-offload.js';
import { WireGuardPort } from '../../src/pipelines/wireguard-port.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../../src/wireguard/device.js';
import type { Peer } from '../../src/wireguard/peer.js';
import { waitFor } from '../util/wait.js';
import { Prng } from '../util/prng.js';
import { ipv4Packet } from '../wireguard/sim.js';
import { randomSpec, writeSuper } from '../packet/offload-gen.js';
import { nullAeadBackend, sampledAllocations } from '../util/alloc.js';
import { memoryDevice, memoryHandshake } from '../util/wg-memory.js';

const T = 1_700_000_000_000;
const MTU = 1420;
const nativeMissing = loadNativeIo() === null ? nativeIoLoadError() : null;

function transportValid(buf: Uint8Array, off: number, len: number): boolean {
  const v = buf[off]! >>> 4;
  const proto = buf[off + (v === 4 ? 9 : 6)]!;
  const l4 = off + (v === 4 ? (buf[off]! & 15) * 4 : 40);
  const sum =
    v === 4
      ? ipv4TransportSum(buf, off, proto, l4, off + len - l4)
      : ipv6TransportSum(buf, off, proto, l4, off + len - l4);
  return finishChecksum(sum) === 0;
}

function tunBatch(): PacketBatch {
  return new PacketBatch({
    capacity: 4,
    headroom: 16,
    maxLen: TUN_OFFLOAD_MAX_PACKET,
    tailroom: 32,
    scratch: segmenterScratch(MTU, 16, 32, 64),
  });
}

describe('TunSegmenter', () => {
  it('cuts random super-packets into MTU-sized segments with 16 B before and 32 B after each, payload intact', () => {
    const rng = new Prng(13);
    for (let round = 0; round < 40; round++) {
      const b = tunBatch();
      const got: { off: number; len: number }[] = [];
      const payloads: number[][] = [];
      const seg = new TunSegmenter(b, 10, MTU, 16, 32, (buf, offs, lens, n) => {
        for (let i = 0; i < n; i++) {
          got.push({ off: offs[i]!, len: lens[i]! });
          const v = buf[offs[i]!]! >>> 4;
          const proto = buf[offs[i]! + (v === 4 ? 9 : 6)]!;
          const l4 = offs[i]! + (v === 4 ? 20 : 40);
          const hl = proto === 6 ? (buf[l4 + 12]! >>> 4) * 4 : 8;
          payloads.push(Array.from(buf.subarray(l4 + hl, offs[i]! + lens[i]!)));
          expect(transportValid(buf, offs[i]!, lens[i]!)).toBe(true);
        }
      });
      const expected: number[] = [];
      const n = rng.int(1, 3);
      let segs = 0;
      for (let k = 0; k < n; k++) {
        const spec = randomSpec(rng);
        spec.gsoSize = Math.min(spec.gsoSize, MTU - 120); // what a TUN of this MTU produces
        spec.payload = Math.min(spec.payload, spec.gsoSize * 20);
        const at = k * b.slotSize + 16 - 10;
        const s = writeSuper(b.buf, at, spec, rng);
        b.lens[k] = s.len;
        expected.push(...b.buf.subarray(s.off + s.hdrLen, s.off + s.len));
        segs += Math.ceil(spec.payload / spec.gsoSize);
      }
      b.filled(n);
      for (let k = 0; k < n; k++) expect(b.offs[k]).toBe(k * b.slotSize + 16);
      seg.process(b);
      expect(got.length).toBe(segs);
      expect(payloads.flat()).toEqual(expected);
      // Room for the WireGuard header before and padding + tag after every segment.
      for (let i = 0; i < got.length; i++) {
        expect(got[i]!.len).toBeLessThanOrEqual(MTU);
        if (i > 0 && got[i]!.off > got[i - 1]!.off)
          expect(got[i]!.off - 16).toBeGreaterThanOrEqual(got[i - 1]!.off + got[i - 1]!.len + 32);
      }
      expect(seg.stats.segments).toBe(segs);
    }
  });

  it('passes a packet without GSO through in place; counts oversize and malformed drops', () => {
    const b = tunBatch();
    const got: number[] = [];
    const seg = new TunSegmenter(b, 10, MTU, 16, 32, (_buf, offs, _lens, n) => {
      for (let i = 0; i < n; i++) got.push(offs[i]!);
    });
    const plain = ipv4Packet('10.0.0.1', '10.0.0.2', 100);
    b.buf.set(plain, b.slotSize + 16);
    b.lens[1] = plain.length;
    writeVnetHdrNone(b.buf, b.slotSize + 6, 10);
    // Slot 0: gso_size 1500 > MTU (would overrun its neighbour): dropped as oversize.
    const s = writeSuper(b.buf, 6, { version: 4, proto: 6, payload: 4000, gsoSize: 1500 }, new Prng(1));
    b.lens[0] = s.len;
    // Slot 2: a TCPv4 header on a packet whose length field disagrees: malformed.
    b.buf.set(plain, 2 * b.slotSize + 16);
    b.lens[2] = plain.length + 4;
    writeVnetHdr(b.buf, 2 * b.slotSize + 6, 10, 0, VIRTIO_NET_HDR_GSO_TCPV4, 40, 500, 20, 16);
    b.filled(3);
    seg.process(b);
    expect(got).toEqual([b.slotSize + 16]);
    expect(seg.stats.oversize).toBe(1);
    expect(seg.stats.malformed).toBe(1);
  });
});

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** Port A (udpOffload) and a plain Device B with its own loopback socket, one session. */
async function world(
  backend: CryptoBackend,
  sink: (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number) => void,
) {
  const a = memoryDevice(backend, 1, { mtu: MTU });
  const b = memoryDevice(backend, 2, { mtu: MTU });
  const port = new WireGuardPort({
    device: a,
    mtu: MTU,
    clock: () => T,
    udpMechanism: 'native',
    udpOffload: true,
    sink: {
      writeBatch: (buf, offs, lens, _p, n) => {
        sink(buf, offs, lens, n);
        return n;
      },
    },
  });
  open.push(port);
  await port.bind(0);
  const sockB = await UdpSocket.open({ family: 4, address: '127.0.0.1', port: 0, mechanism: 'native', gso: true });
  open.push(sockB);
  const epA = { address: '127.0.0.1', port: port.port };
  const epB = { address: '127.0.0.1', port: sockB.port };
  const pb = a.addPeer(b.publicKey!);
  a.addAllowedIp(pb, parsePrefix('10.9.0.0/16'));
  a.setEndpoint(pb, epB);
  const pab = b.addPeer(a.publicKey!);
  b.addAllowedIp(pab, parsePrefix('10.1.0.0/16'));
  b.setEndpoint(pab, epA);
  memoryHandshake(b, pab, a, epB, epA, T);
  return { a, b, pb, pab, port, sockB, epA };
}

/** n equal-sized packets from B, encrypted, in one arena (each 16 B headroom, 64 B tailroom). */
function sealedBurst(b: Device, pab: Peer, n: number, size: number, tag: number) {
  const slot = 2048;
  const buf = new Uint8Array(slot * n);
  const offs = new Uint32Array(n);
  const lens = new Uint32Array(n);
  const er = new EncryptResult();
  const plain: Uint8Array[] = [];
  for (let i = 0; i < n; i++) {
    const body = new Uint8Array(size).fill((tag + i) & 0xff);
    const p = ipv4Packet('10.9.0.1', '10.1.0.1', body);
    plain.push(p);
    buf.set(p, i * slot + 16);
    if (b.encryptFor(pab, buf, i * slot + 16, p.length, T, er) !== ENCRYPT_SEND)
      throw new Error(`encrypt: ${er.reason}`);
    offs[i] = er.start;
    lens[i] = er.length;
  }
  return { buf, offs, lens, plain };
}

describe.skipIf(nativeMissing !== null)('WireGuardPort with UDP GSO/GRO (loopback)', () => {
  it('decrypts every datagram of a GRO run, in order; sends equal-sized segments as GSO messages', async () => {
    const got: Uint8Array[] = [];
    const w = await world(createNodeBackend(), (buf, offs, lens, n) => {
      for (let i = 0; i < n; i++) got.push(buf.slice(offs[i]!, offs[i]! + lens[i]!));
    });
    expect(w.port.udpOffload()).toEqual({ gso: true, gro: true });
    const burst = sealedBurst(w.b, w.pab, 40, 1000, 7);
    const rec = new Uint8Array(24 * 40);
    for (let i = 0; i < 40; i++) encodeAddress('127.0.0.1', w.port.port, rec, i * 24);
    expect(w.sockB.sendBatch(burst.buf, burst.offs, burst.lens, rec, null, 40)).toBe(40);
    expect(w.sockB.gsoMessages).toBeGreaterThan(0);
    await waitFor('40 packets at the sink', () => got.length >= 40, 5000, 5);
    expect(got).toEqual(burst.plain);
    // A → B: 30 equal-sized packets to one peer leave as GSO messages; B decrypts them all.
    const atB: Uint8Array[] = [];
    const rr = new ReceiveResult();
    w.sockB.onBatch(new PacketBatch({ capacity: 64, maxLen: 2048, withAddresses: true }), (bt) => {
      for (let i = 0; i < bt.count; i++) {
        if (w.b.receive(bt.buf, bt.offs[i]!, bt.lens[i]!, w.epA, T, false, rr) === RECEIVE_DELIVER)
          atB.push(bt.buf.slice(rr.start, rr.start + rr.length));
      }
    });
    const slot = 2048;
    const buf = new Uint8Array(slot * 30);
    const offs = new Uint32Array(30);
    const lens = new Uint32Array(30);
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 30; i++) {
      const p = ipv4Packet('10.1.0.1', '10.9.0.1', new Uint8Array(1200).fill(i));
      sent.push(p);
      buf.set(p, i * slot + 16);
      offs[i] = i * slot + 16;
      lens[i] = p.length;
    }
    const before = w.port.gsoMessages;
    w.port.encryptBatch(buf, offs, lens, 30);
    expect(w.port.gsoMessages - before).toBe(1);
    await waitFor('30 packets at B', () => atB.length >= 30, 5000, 5);
    expect(atB).toEqual(sent);
  });

  it('the GRO receive path allocates nothing per packet (sampling heap profiler)', async () => {
    let sunk = 0;
    const backend = nullAeadBackend();
    const w = await world(backend, (_b, _o, _l, n) => {
      sunk += n;
    });
    const N = 128; // per round: per-batch costs (a timer deadline's heap number) amortize as in bulk traffic
    const rec = new Uint8Array(24 * N);
    for (let i = 0; i < N; i++) encodeAddress('127.0.0.1', w.port.port, rec, i * 24);
    // Every datagram B will send, sealed up front: only A's receive path runs while sampling.
    const ROUNDS = 400;
    const slot = 288;
    const buf = new Uint8Array(slot * N * ROUNDS);
    const offs = new Uint32Array(N * ROUNDS);
    const lens = new Uint32Array(N * ROUNDS);
    const one = ipv4Packet('10.9.0.1', '10.1.0.1', 200);
    const er = new EncryptResult();
    for (let i = 0; i < N * ROUNDS; i++) {
      buf.set(one, i * slot + 16);
      if (w.b.encryptFor(w.pab, buf, i * slot + 16, one.length, T, er) !== ENCRYPT_SEND)
        throw new Error(`encrypt ${er.reason}`);
      offs[i] = er.start;
      lens[i] = er.length;
    }
    let r = 0;
    const round = async (): Promise<void> => {
      const want = sunk + N;
      w.sockB.sendBatch(buf, offs.subarray(r * N, r * N + N), lens.subarray(r * N, r * N + N), rec, null, N);
      r++;
      for (let k = 0; k < 2000 && sunk < want; k++) await new Promise<void>((res) => setImmediate(res));
      if (sunk < want) throw new Error(`only ${sunk} of ${want} arrived`);
    };
    for (let i = 0; i < ROUNDS / 2; i++) await round();
    let packets = 0;
    const { bytes, where } = await sampledAllocations(
      async () => {
        const before = sunk;
        for (let i = 0; i < ROUNDS / 2; i++) await round();
        packets = sunk - before;
      },
      // B's sendBatch (the test's sender) excluded: the receive path is what is measured.
      ({ url, functionName }) =>
        url.includes('/src/wireguard/') ||
        url.includes('/src/pipelines/') ||
        (url.includes('/src/io/udp') && functionName !== 'sendBatch'),
    );
    expect(packets).toBe((ROUNDS / 2) * N);
    expect(bytes / packets, where.join('; ')).toBeLessThan(2);
    expect(w.port.udpStats().v4!.rxPackets).toBeGreaterThanOrEqual(ROUNDS * N);
    expect(w.port.udpStats().v4!.rxBatches).toBeLessThan((ROUNDS * N) / 8); // runs arrived coalesced
  }, 60_000);
});
