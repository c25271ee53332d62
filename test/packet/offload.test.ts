/**
 * Software GSO/GRO (src/packet/gso.ts, gro.ts) with seeded random super-packets:
 * - every segment is a valid packet whose checksums equal a full recomputation, with the
 *   per-segment fields Linux's segmentation produces, and the payloads concatenate back;
 * - coalesce(segment(x)) == x byte for byte, virtio_net_hdr included;
 * - segment(coalesce(S)) == S for random interleavings, reorderings and flag changes of
 *   segments of several flows (nothing lost, nothing reordered within a flow, nothing merged
 *   that should not be), plus explicit refusals;
 * - no allocation per packet.
 */
import { describe, expect, it } from 'vitest';
import { checksumVerifies, finishChecksum, foldSum, pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import { Coalescer } from '../../src/packet/gro.js';
import {
  GSO_ERR_MALFORMED,
  GSO_ERR_NO_ROOM,
  GSO_ERR_UNSUPPORTED,
  completeChecksum,
  gsoSegment,
} from '../../src/packet/gso.js';
import {
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  ipv4HeaderValid,
  ipv4Identification,
  ipv4TotalLength,
  ipv4TransportSum,
} from '../../src/packet/ipv4.js';
import { ipv6PayloadLength, ipv6TransportSum } from '../../src/packet/ipv6.js';
import { PacketList } from '../../src/packet/packet-list.js';
import {
  TCP_FLAG_ACK,
  TCP_FLAG_CWR,
  TCP_FLAG_ECE,
  TCP_FLAG_FIN,
  TCP_FLAG_PSH,
  TCP_FLAG_SYN,
  tcpFlags,
  tcpSeq,
} from '../../src/packet/tcp.js';
import { udpChecksum, udpLength } from '../../src/packet/udp.js';
import {
  VIRTIO_NET_HDR_F_NEEDS_CSUM,
  VIRTIO_NET_HDR_GSO_NONE,
  VIRTIO_NET_HDR_GSO_TCPV4,
  VIRTIO_NET_HDR_GSO_UDP,
  vnetFlags,
  vnetGsoSize,
  vnetGsoType,
  writeVnetHdr,
} from '../../src/packet/virtio-net-hdr.js';
import { Prng } from '../util/prng.js';
import { randomSpec, writeSuper, type SuperSpec } from './offload-gen.js';
import { heapBytesPerOp } from '../util/alloc.js';

const VHL = 10;
const STRIDE = 2048; // one segment slot: headers (≤ 120) + gso_size (≤ 1500) + room
const IN_AT = 0; // super-packet region
const SEG_AT = 80 * 1024; // segments region (64 slots, 16 bytes of headroom each)
const AREA_AT = SEG_AT + 70 * STRIDE; // coalescer area
const AREA_LEN = 4 * (VHL + 65575);
const RESEG_AT = AREA_AT + AREA_LEN; // re-segmentation of coalescer output
const BUF_LEN = RESEG_AT + 256 * STRIDE;

function transportValid(buf: Uint8Array, off: number, len: number): boolean {
  const v = buf[off]! >>> 4;
  const l4 = off + (v === 4 ? 20 : 40);
  const proto = buf[off + (v === 4 ? 9 : 6)]!;
  const sum =
    v === 4
      ? ipv4TransportSum(buf, off, proto, l4, off + len - l4)
      : ipv6TransportSum(buf, off, proto, l4, off + len - l4);
  return finishChecksum(sum) === 0;
}

function bytes(buf: Uint8Array, off: number, len: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('hex');
}

describe('gsoSegment', () => {
  it('cuts random TCP/UDP super-packets (IPv4/IPv6) into valid segments that concatenate back', () => {
    const rng = new Prng(0x6502);
    const buf = new Uint8Array(BUF_LEN);
    const out = new PacketList(64);
    for (let iter = 0; iter < 300; iter++) {
      const spec = randomSpec(rng, {
        flags: rng.pick([
          TCP_FLAG_ACK,
          TCP_FLAG_ACK | TCP_FLAG_PSH,
          TCP_FLAG_ACK | TCP_FLAG_FIN | TCP_FLAG_PSH,
          TCP_FLAG_ACK | TCP_FLAG_CWR | TCP_FLAG_ECE,
        ]),
      });
      const sp = writeSuper(buf, IN_AT, spec, rng);
      const orig = buf.slice(sp.off, sp.off + sp.len);
      out.clear();
      const n = gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, out);
      const payload = spec.payload;
      expect(n).toBe(Math.ceil(payload / spec.gsoSize));
      expect(out.count).toBe(n);
      let pos = 0;
      for (let k = 0; k < n; k++) {
        const o = out.offs[k]!;
        const len = out.lens[k]!;
        const segPayload = len - sp.hdrLen;
        expect(segPayload).toBe(k < n - 1 ? spec.gsoSize : payload - (n - 1) * spec.gsoSize);
        // The payload slice is the original's, in order.
        expect(bytes(buf, o + sp.hdrLen, segPayload)).toBe(bytes(orig, sp.hdrLen + pos, segPayload));
        pos += segPayload;
        const l4 = o + (spec.version === 4 ? 20 : 40);
        if (spec.version === 4) {
          expect(ipv4HeaderValid(buf, o, len)).toBe(true);
          expect(ipv4TotalLength(buf, o)).toBe(len);
          expect(ipv4Identification(buf, o)).toBe((spec.id! + k) & 0xffff);
        } else {
          expect(40 + ipv6PayloadLength(buf, o)).toBe(len);
        }
        expect(transportValid(buf, o, len)).toBe(true);
        if (spec.proto === IP_PROTO_TCP) {
          expect(tcpSeq(buf, l4)).toBe((spec.seq! + k * spec.gsoSize) >>> 0);
          const f = tcpFlags(buf, l4);
          const last = k === n - 1;
          expect((f & TCP_FLAG_PSH) !== 0).toBe(last && (spec.flags! & TCP_FLAG_PSH) !== 0);
          expect((f & TCP_FLAG_FIN) !== 0).toBe(last && (spec.flags! & TCP_FLAG_FIN) !== 0);
          expect((f & TCP_FLAG_CWR) !== 0).toBe(k === 0 && (spec.flags! & TCP_FLAG_CWR) !== 0);
          expect(f & TCP_FLAG_ECE).toBe(spec.flags! & TCP_FLAG_ECE);
          // Everything else in the headers is the original's (ports, ack, window, options).
          expect(bytes(buf, l4 + 8, sp.hdrLen - (l4 - o) - 8).replace(/^(.{10})(..)(....)(....)/, '$1__$3____')).toBe(
            bytes(orig, sp.l4 - sp.off + 8, sp.hdrLen - (sp.l4 - sp.off) - 8).replace(
              /^(.{10})(..)(....)(....)/,
              '$1__$3____',
            ),
          );
        } else {
          expect(udpLength(buf, l4)).toBe(len - (l4 - o));
          expect(udpChecksum(buf, l4)).not.toBe(0);
        }
      }
      expect(pos).toBe(payload);
    }
  });

  it('completes a NEEDS_CSUM checksum of a packet without GSO in place, copying nothing', () => {
    const rng = new Prng(7);
    const buf = new Uint8Array(BUF_LEN);
    const out = new PacketList(4);
    for (const spec of [
      { version: 4, proto: 6, payload: 100, gsoSize: 1400 },
      { version: 6, proto: 17, payload: 1, gsoSize: 1400 },
      { version: 4, proto: 17, payload: 999, gsoSize: 1400 },
    ] as SuperSpec[]) {
      const sp = writeSuper(buf, IN_AT, spec, rng);
      writeVnetHdr(
        buf,
        sp.hdrOff,
        VHL,
        VIRTIO_NET_HDR_F_NEEDS_CSUM,
        VIRTIO_NET_HDR_GSO_NONE,
        0,
        0,
        sp.l4 - sp.off,
        spec.proto === 6 ? 16 : 6,
      );
      expect(transportValid(buf, sp.off, sp.len)).toBe(false);
      out.clear();
      expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT, STRIDE, out)).toBe(1);
      expect([out.offs[0], out.lens[0]]).toEqual([sp.off, sp.len]);
      expect(transportValid(buf, sp.off, sp.len)).toBe(true);
    }
  });

  it('refuses malformed, unsupported and oversized work with a reason code', () => {
    const rng = new Prng(8);
    const buf = new Uint8Array(BUF_LEN);
    const out = new PacketList(8);
    const sp = writeSuper(buf, IN_AT, { version: 4, proto: 6, payload: 20000, gsoSize: 1000 }, rng);
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT, STRIDE, out)).toBe(GSO_ERR_NO_ROOM); // 20 segments, list of 8
    expect(out.count).toBe(0);
    const big = new PacketList(64);
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT, 500, big)).toBe(GSO_ERR_NO_ROOM); // stride < headers + gso_size
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, sp.off + 100, STRIDE, big)).toBe(GSO_ERR_NO_ROOM); // overlaps the input
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len - 1, SEG_AT, STRIDE, big)).toBe(GSO_ERR_MALFORMED); // length mismatch
    buf[sp.hdrOff + 1] = VIRTIO_NET_HDR_GSO_UDP;
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT, STRIDE, big)).toBe(GSO_ERR_UNSUPPORTED);
    buf[sp.hdrOff + 1] = VIRTIO_NET_HDR_GSO_TCPV4;
    buf[sp.hdrOff + 4] = 0;
    buf[sp.hdrOff + 5] = 0; // gso_size 0
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT, STRIDE, big)).toBe(GSO_ERR_MALFORMED);
    expect(big.count).toBe(0);
  });
});

/** Splits super-packet outputs of the coalescer back into segments (in a second buffer region). */
function resegment(buf: Uint8Array, list: PacketList, scratchAt: number): { flow: string; hex: string }[] {
  const res: { flow: string; hex: string }[] = [];
  const segs = new PacketList(64);
  let at = scratchAt;
  for (let i = 0; i < list.count; i++) {
    segs.clear();
    const n = gsoSegment(buf, list.offs[i]!, list.offs[i]! + VHL, list.lens[i]! - VHL, at, STRIDE, segs);
    expect(n).toBeGreaterThan(0);
    for (let k = 0; k < segs.count; k++)
      res.push({ flow: flowKey(buf, segs.offs[k]!), hex: bytes(buf, segs.offs[k]!, segs.lens[k]!) });
    at += n * STRIDE;
  }
  return res;
}

function flowKey(buf: Uint8Array, off: number): string {
  const v = buf[off]! >>> 4;
  return v === 4 ? bytes(buf, off + 9, 1) + bytes(buf, off + 12, 12) : bytes(buf, off + 6, 1) + bytes(buf, off + 8, 36);
}

function byFlow(list: { flow: string; hex: string }[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const e of list) {
    const l = m.get(e.flow) ?? [];
    l.push(e.hex);
    m.set(e.flow, l);
  }
  return m;
}

describe('Coalescer', () => {
  it('coalesce(segment(x)) == x for random TCP and UDP super-packets, header included', () => {
    const rng = new Prng(0x9e0);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const out = new PacketList(64);
    const gro = new Coalescer({ udp: true });
    let merged = 0;
    for (let iter = 0; iter < 300; iter++) {
      const spec = randomSpec(rng, {
        flags: rng.pick([TCP_FLAG_ACK, TCP_FLAG_ACK | TCP_FLAG_PSH, TCP_FLAG_ACK | TCP_FLAG_ECE]),
      });
      const sp = writeSuper(buf, IN_AT, spec, rng);
      const want = bytes(buf, sp.hdrOff, VHL + sp.len);
      segs.clear();
      const n = gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, segs);
      buf.fill(0, IN_AT, SEG_AT); // the result must not come from the original
      out.clear();
      gro.begin(buf, AREA_AT, AREA_LEN, out);
      for (let k = 0; k < segs.count; k++) gro.add(segs.offs[k]!, segs.lens[k]!);
      gro.flush();
      expect(out.count).toBe(1);
      if (n === 1) {
        // One segment is passed on as it is, with an all-zero header.
        expect(bytes(buf, out.offs[0]!, VHL)).toBe('00'.repeat(VHL));
        expect(out.offs[0]!).toBe(segs.offs[0]! - VHL);
        expect(transportValid(buf, segs.offs[0]!, segs.lens[0]!)).toBe(true);
      } else {
        expect(bytes(buf, out.offs[0]!, out.lens[0]!)).toBe(want);
        merged++;
      }
    }
    expect(merged).toBeGreaterThan(150);
    expect(gro.stats.superPackets).toBe(merged);
  });

  it('segment(coalesce(S)) == S for shuffled, interleaved and altered segments of several flows', () => {
    const rng = new Prng(0xc0a1);
    const buf = new Uint8Array(BUF_LEN);
    const out = new PacketList(200);
    const gro = new Coalescer({ udp: true, maxFlows: 3 });
    let superPackets = 0;
    for (let iter = 0; iter < 150; iter++) {
      // Three flows, segments of each in one region, then a random interleaving with damage.
      const pool: { off: number; len: number }[] = [];
      let at = SEG_AT + 16;
      for (let fl = 0; fl < 3; fl++) {
        const spec = randomSpec(rng, { flags: TCP_FLAG_ACK });
        spec.srcHost = fl + 1;
        spec.payload = Math.min(spec.payload, spec.gsoSize * 20);
        const sp = writeSuper(buf, IN_AT, spec, rng);
        const segs = new PacketList(64);
        gsoSegment(buf, sp.hdrOff, sp.off, sp.len, at, STRIDE, segs);
        for (let k = 0; k < segs.count; k++) pool.push({ off: segs.offs[k]!, len: segs.lens[k]! });
        at += segs.count * STRIDE;
      }
      // Interleave flows while keeping each flow's order, then damage: swaps, drops, flag/TTL changes.
      const order = pool
        .map((p, i) => ({ p, key: i + rng.int(0, 4) * 7 }))
        .sort((a, b) => a.key - b.key)
        .map((e) => e.p);
      for (let d = rng.int(0, 3); d > 0; d--) {
        const i = rng.int(0, order.length - 2);
        const kind = rng.int(0, 3);
        if (kind === 0) [order[i], order[i + 1]] = [order[i + 1]!, order[i]!];
        else if (kind === 1) order.splice(i, 1);
        else {
          const p = order[i]!;
          const v = buf[p.off]! >>> 4;
          const proto = buf[p.off + (v === 4 ? 9 : 6)];
          if (kind === 2 && proto === IP_PROTO_TCP)
            buf[p.off + (v === 4 ? 20 : 40) + 13] |= rng.pick([TCP_FLAG_PSH, TCP_FLAG_FIN, TCP_FLAG_SYN, TCP_FLAG_CWR]);
          else if (v === 4)
            buf[p.off + 8] ^= 1; // TTL
          else buf[p.off + 7] ^= 1; // hop limit
          // Keep the damaged packet itself valid.
          const l4 = p.off + (v === 4 ? 20 : 40);
          if (v === 4) {
            buf[p.off + 10] = 0;
            buf[p.off + 11] = 0;
            const c = finishChecksum(sumHdr(buf, p.off));
            buf[p.off + 10] = c >>> 8;
            buf[p.off + 11] = c & 0xff;
          }
          const co = l4 + (proto === IP_PROTO_TCP ? 16 : 6);
          buf[co] = 0;
          buf[co + 1] = 0;
          const s =
            v === 4
              ? ipv4TransportSum(buf, p.off, proto!, l4, p.off + p.len - l4)
              : ipv6TransportSum(buf, p.off, proto!, l4, p.off + p.len - l4);
          let c = finishChecksum(s);
          if (c === 0 && proto === IP_PROTO_UDP) c = 0xffff;
          buf[co] = c >>> 8;
          buf[co + 1] = c & 0xff;
        }
      }
      const input = order.map((p) => ({ flow: flowKey(buf, p.off), hex: bytes(buf, p.off, p.len) }));
      out.clear();
      gro.begin(buf, AREA_AT, AREA_LEN, out);
      for (const p of order) gro.add(p.off, p.len);
      gro.flush();
      expect(out.count).toBeLessThanOrEqual(order.length);
      for (let i = 0; i < out.count; i++)
        if (vnetGsoType(buf, out.offs[i]!) !== VIRTIO_NET_HDR_GSO_NONE) superPackets++;
      // Re-segmenting what came out gives back exactly what went in, flow by flow, in order.
      const back = resegment(buf, out, RESEG_AT);
      expect(byFlow(back)).toEqual(byFlow(input));
    }
    expect(superPackets).toBeGreaterThan(100);
  });

  it('refuses out-of-order, other-flow, other-flags, other-TTL and bad-checksum segments', () => {
    const rng = new Prng(3);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const out = new PacketList(64);
    const gro = new Coalescer();
    const sp = writeSuper(buf, IN_AT, { version: 4, proto: 6, payload: 4000, gsoSize: 1000 }, rng);
    gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, segs);
    const s = (k: number): [number, number] => [segs.offs[k]!, segs.lens[k]!];
    const run = (list: [number, number][]): number[] => {
      out.clear();
      gro.begin(buf, AREA_AT, AREA_LEN, out);
      for (const [o, l] of list) gro.add(o, l);
      gro.flush();
      return Array.from({ length: out.count }, (_, i) =>
        vnetGsoType(buf, out.offs[i]!) === 0 ? 1 : (out.lens[i]! - VHL - 40) / 1000,
      );
    };
    expect(run([s(0), s(1), s(2), s(3)])).toEqual([4]);
    expect(run([s(0), s(2), s(1), s(3)])).toEqual([1, 1, 1, 1]); // each out of order against its predecessor
    expect(run([s(0), s(1), s(3)])).toEqual([2, 1]); // gap
    // Another flow: the same segments from another source port (checksum fixed incrementally by refilling).
    const other = segs.offs[3]!;
    buf[other + 20] ^= 0x10;
    refill(buf, other, segs.lens[3]!);
    expect(run([s(0), s(1), s(2), s(3)]).sort()).toEqual([1, 3]);
    buf[other + 20] ^= 0x10;
    refill(buf, other, segs.lens[3]!);
    // Other flags (ECE on one), other TTL.
    buf[segs.offs[1]! + 33] |= TCP_FLAG_ECE;
    refill(buf, segs.offs[1]!, segs.lens[1]!);
    expect(run([s(0), s(1), s(2), s(3)])).toEqual([1, 1, 2]);
    buf[segs.offs[1]! + 33] &= ~TCP_FLAG_ECE;
    buf[segs.offs[2]! + 8] = 3;
    refill(buf, segs.offs[1]!, segs.lens[1]!);
    refill(buf, segs.offs[2]!, segs.lens[2]!);
    expect(run([s(0), s(1), s(2), s(3)])).toEqual([2, 1, 1]);
    buf[segs.offs[2]! + 8] = 64;
    refill(buf, segs.offs[2]!, segs.lens[2]!);
    expect(run([s(0), s(1), s(2), s(3)])).toEqual([4]);
    // A corrupted payload byte: not merged (the kernel will drop it on its own checksum).
    buf[segs.offs[2]! + 500] ^= 0xff;
    const before = gro.stats.badChecksum;
    expect(run([s(0), s(1), s(2), s(3)])).toEqual([2, 1, 1]);
    expect(gro.stats.badChecksum).toBe(before + 1);
    // UDP passes through unless enabled.
    const u = writeSuper(buf, IN_AT, { version: 6, proto: 17, payload: 3000, gsoSize: 1000 }, rng);
    segs.clear();
    gsoSegment(buf, u.hdrOff, u.off, u.len, SEG_AT + 16, STRIDE, segs);
    expect(run([s(0), s(1), s(2)])).toEqual([1, 1, 1]);
    expect(vnetFlags(buf, out.offs[0]!)).toBe(0);
  });

  it('builds a super-packet Linux accepts: NEEDS_CSUM, gso fields, pseudo sum in the field', () => {
    const rng = new Prng(4);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const out = new PacketList(64);
    const sp = writeSuper(
      buf,
      IN_AT,
      { version: 4, proto: 6, payload: 2900, gsoSize: 1448, optLen: 12, flags: TCP_FLAG_ACK | TCP_FLAG_PSH },
      rng,
    );
    gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, segs);
    const gro = new Coalescer();
    gro.begin(buf, AREA_AT, AREA_LEN, out);
    for (let k = 0; k < segs.count; k++) gro.add(segs.offs[k]!, segs.lens[k]!);
    gro.flush();
    const h = out.offs[0]!;
    expect(vnetFlags(buf, h)).toBe(VIRTIO_NET_HDR_F_NEEDS_CSUM);
    expect(vnetGsoType(buf, h)).toBe(VIRTIO_NET_HDR_GSO_TCPV4);
    expect(vnetGsoSize(buf, h)).toBe(1448);
    expect(bytes(buf, h + 2, 8)).toBe('3400a80514001000'); // hdr_len 52, gso_size 1448, csum_start 20, csum_offset 16 (little-endian)
    const p = h + VHL;
    expect(checksumVerifies(buf, p, 20)).toBe(true);
    // The TCP checksum field holds the folded pseudo-header sum over the whole transport length.
    const l4Len = out.lens[0]! - VHL - 20;
    expect((buf[p + 36]! << 8) | buf[p + 37]!).toBe(
      foldSum(pseudoHeaderSumV4(buf, p + 12, p + 16, IP_PROTO_TCP, l4Len)),
    );
    // Completing it as a device would (sum from csum_start to the end, field included) gives the
    // checksum an independent full computation verifies.
    expect(completeChecksum(buf, p, out.lens[0]! - VHL, 20, 16)).toBe(true);
    expect(transportValid(buf, p, out.lens[0]! - VHL)).toBe(true);
    expect(tcpFlags(buf, p + 20) & TCP_FLAG_PSH).toBe(TCP_FLAG_PSH);
  });

  it('allocates nothing per packet (segment + coalesce)', () => {
    const rng = new Prng(5);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const out = new PacketList(64);
    const gro = new Coalescer();
    const sp = writeSuper(buf, IN_AT, { version: 4, proto: 6, payload: 1448 * 40, gsoSize: 1448, optLen: 12 }, rng);
    const hdr = buf.slice(sp.hdrOff, sp.off + sp.hdrLen);
    const trip = (): void => {
      buf.set(hdr, sp.hdrOff); // restore the checksum field the kernel would give
      segs.clear();
      gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, segs);
      out.clear();
      gro.begin(buf, AREA_AT, AREA_LEN, out);
      for (let k = 0; k < segs.count; k++) gro.add(segs.offs[k]!, segs.lens[k]!);
      gro.flush();
    };
    for (let i = 0; i < 300; i++) trip();
    expect(out.count).toBe(1);
    // 40 segments per trip.
    expect(heapBytesPerOp(trip, 1000) / 40).toBeLessThan(1);
  });
});

function sumHdr(buf: Uint8Array, off: number): number {
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += (buf[off + i]! << 8) | buf[off + i + 1]!;
  return s;
}

/** Recomputes the IPv4 header and TCP checksums of a 20-byte-header IPv4/TCP packet. */
function refill(buf: Uint8Array, off: number, len: number): void {
  buf[off + 10] = 0;
  buf[off + 11] = 0;
  const c = finishChecksum(sumHdr(buf, off));
  buf[off + 10] = c >>> 8;
  buf[off + 11] = c & 0xff;
  buf[off + 36] = 0;
  buf[off + 37] = 0;
  const t = finishChecksum(ipv4TransportSum(buf, off, IP_PROTO_TCP, off + 20, len - 20));
  buf[off + 36] = t >>> 8;
  buf[off + 37] = t & 0xff;
}
