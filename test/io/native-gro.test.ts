/**
 * The native whole-batch coalescer (native/weft_gro.c through io/native-offload.ts) against
 * packet/gro.ts's Coalescer, on seeded random batches: segments of several TCP/UDP flows (IPv4
 * and IPv6, options, PSH, short last segments, more than 64 UDP segments), interleaved,
 * reordered, dropped, with flags / TTL / ack / window / urgent pointer / options changed
 * (checksums kept valid), bits flipped (bad checksums), IP headers damaged, lengths cut,
 * fragments; few flow slots and small areas (evictions, a full area), 10- and 12-byte vnet
 * headers. Both must give the same output entries, the same whole buffer and the same counters.
 * Plus: misuse throws before writing, and no allocation per call.
 */
import { describe, expect, it } from 'vitest';
import { finishChecksum } from '../../src/packet/checksum.js';
import { Coalescer, type CoalescerStats } from '../../src/packet/gro.js';
import { gsoSegment } from '../../src/packet/gso.js';
import { IP_PROTO_TCP, IP_PROTO_UDP, ipv4TransportSum } from '../../src/packet/ipv4.js';
import { ipv6TransportSum } from '../../src/packet/ipv6.js';
import { PacketList } from '../../src/packet/packet-list.js';
import {
  TCP_FLAG_ACK,
  TCP_FLAG_CWR,
  TCP_FLAG_ECE,
  TCP_FLAG_FIN,
  TCP_FLAG_PSH,
  TCP_FLAG_SYN,
} from '../../src/packet/tcp.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { pickCoalesceBatch } from '../../src/io/native-offload.js';
import { Prng } from '../util/prng.js';
import { skipUnlessRoot } from '../util/requirements.js';
import { randomSpec, writeSuper } from '../packet/offload-gen.js';
import { heapBytesPerOp } from '../util/alloc.js';

const native = loadNativeIo();
const skip = skipUnlessRoot(
  native === null || native.coalesceBatch === undefined
    ? `native addon without coalesceBatch (${nativeIoLoadError() ?? 'an older build'}): run node native/build.mjs`
    : null,
);

const IN_AT = 1;
const SEG_AT = 70 * 1024;
const STRIDE = 2048;
const SEGS = 260;
const AREA_AT = SEG_AT + SEGS * STRIDE;
const RESERVATION = 12 + 65_575;
const BUF_LEN = AREA_AT + 6 * RESERVATION;

function hex(buf: Uint8Array, off: number, len: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('hex');
}

/** Refills the IPv4 header checksum and the transport checksum (a changed packet that stays valid). */
function refill(buf: Uint8Array, off: number, len: number): void {
  const v = buf[off]! >>> 4;
  const l4Rel = v === 4 ? (buf[off]! & 0x0f) * 4 : 40;
  const proto = buf[off + (v === 4 ? 9 : 6)]!;
  if (v === 4) {
    buf[off + 10] = 0;
    buf[off + 11] = 0;
    let s = 0;
    for (let i = 0; i < l4Rel; i += 2) s += (buf[off + i]! << 8) | buf[off + i + 1]!;
    const c = finishChecksum(s);
    buf[off + 10] = c >>> 8;
    buf[off + 11] = c & 0xff;
  }
  if (proto !== IP_PROTO_TCP && proto !== IP_PROTO_UDP) return;
  const co = off + l4Rel + (proto === IP_PROTO_TCP ? 16 : 6);
  buf[co] = 0;
  buf[co + 1] = 0;
  const l4 = off + l4Rel;
  const sum =
    v === 4
      ? ipv4TransportSum(buf, off, proto, l4, off + len - l4)
      : ipv6TransportSum(buf, off, proto, l4, off + len - l4);
  let c = finishChecksum(sum);
  if (c === 0 && proto === IP_PROTO_UDP) c = 0xffff;
  buf[co] = c >>> 8;
  buf[co + 1] = c & 0xff;
}

/** A damaged, interleaved batch of segments of 1–4 flows (two may share a 5-tuple). */
function randomBatch(buf: Uint8Array, rng: Prng): { offs: number[]; lens: number[] } {
  const pool: { off: number; len: number }[] = [];
  let at = SEG_AT + 16;
  const flows = rng.int(1, 4);
  for (let fl = 0; fl < flows; fl++) {
    const spec = randomSpec(rng, {
      flags: rng.pick([TCP_FLAG_ACK, TCP_FLAG_ACK, TCP_FLAG_ACK | TCP_FLAG_PSH, TCP_FLAG_ACK | TCP_FLAG_ECE]),
    });
    spec.srcHost = rng.int(1, 3);
    if (rng.chance(0.2)) {
      spec.proto = IP_PROTO_UDP;
      spec.optLen = 0;
      spec.gsoSize = rng.int(1, 40);
      spec.payload = spec.gsoSize * rng.int(60, 70);
    }
    const room = Math.floor((AREA_AT - at) / STRIDE) - 1;
    if (room < 2) break;
    spec.payload = Math.min(spec.payload, spec.gsoSize * Math.min(room, 70), 65_000);
    const sp = writeSuper(buf, IN_AT, spec, rng);
    const segs = new PacketList(80);
    if (gsoSegment(buf, sp.hdrOff, sp.off, sp.len, at, STRIDE, segs) <= 0) continue;
    for (let k = 0; k < segs.count; k++) pool.push({ off: segs.offs[k]!, len: segs.lens[k]! });
    at += segs.count * STRIDE;
  }
  const order = pool
    .map((p, i) => ({ p, key: i + rng.int(0, 4) * 9 }))
    .sort((a, b) => a.key - b.key)
    .map((e) => e.p);
  for (let d = rng.int(0, 6); d > 0 && order.length > 2; d--) {
    const i = rng.int(0, order.length - 2);
    const p = order[i]!;
    const v = buf[p.off]! >>> 4;
    const l4 = p.off + (v === 4 ? 20 : 40);
    const proto = buf[p.off + (v === 4 ? 9 : 6)];
    switch (rng.int(0, 8)) {
      case 0:
        [order[i], order[i + 1]] = [order[i + 1]!, order[i]!];
        break;
      case 1:
        order.splice(i, 1);
        break;
      case 2:
        if (proto === IP_PROTO_TCP)
          buf[l4 + 13] = (buf[l4 + 13]! | rng.pick([TCP_FLAG_PSH, TCP_FLAG_FIN, TCP_FLAG_SYN, TCP_FLAG_CWR])) & 0xff;
        refill(buf, p.off, p.len);
        break;
      case 3:
        buf[p.off + (v === 4 ? 8 : 7)] ^= 1;
        refill(buf, p.off, p.len);
        break; // TTL / hop limit
      case 4:
        buf[p.off + rng.int(0, p.len - 1)] ^= 1 << rng.int(0, 7);
        break; // anywhere: bad checksum, or worse
      case 5:
        buf[p.off + rng.int(0, 9)] = rng.int(0, 255);
        break; // IP header
      case 6:
        p.len = Math.max(1, p.len - rng.int(1, 3));
        break;
      case 7: // TCP ack, window, urgent pointer or an option byte
        if (proto === IP_PROTO_TCP) {
          buf[l4 + rng.pick([8, 11, 14, 15, 18, 19, 22])] ^= 1;
          refill(buf, p.off, p.len);
        }
        break;
      default:
        if (v === 4) {
          buf[p.off + 6] |= 0x20;
          refill(buf, p.off, p.len);
        }
        break; // a fragment
    }
  }
  return { offs: order.map((p) => p.off), lens: order.map((p) => p.len) };
}

describe.skipIf(skip !== null)(`native coalescer${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('gives the same entries, bytes and counters as gro.ts over random damaged batches', () => {
    const rng = new Prng(0x6e0);
    const a = new Uint8Array(BUF_LEN);
    const b = new Uint8Array(BUF_LEN);
    let merged = 0;
    for (let iter = 0; iter < 400; iter++) {
      const vhl = rng.chance(0.7) ? 10 : 12;
      const maxFlows = rng.pick([1, 2, 3, 16, 64]);
      const udp = rng.chance(0.7);
      const areaLen = rng.chance(0.8) ? 6 * RESERVATION : rng.int(RESERVATION, 2 * RESERVATION);
      const { offs, lens } = randomBatch(a, rng);
      const count = offs.length;
      b.set(a);
      const ga = new Coalescer({ maxFlows, vnetHdrLen: vhl, udp });
      const nat = pickCoalesceBatch({ maxFlows, vnetHdrLen: vhl, udp })!;
      const pre = rng.int(0, 3);
      const la = new PacketList(count + pre + 2);
      const lb = new PacketList(count + pre + 2);
      for (let i = 0; i < pre; i++) {
        la.push(7, 7);
        lb.push(7, 7);
      }
      ga.begin(a, AREA_AT, areaLen, la);
      for (let i = 0; i < count; i++) ga.add(offs[i]!, lens[i]!);
      ga.flush();
      const sb: CoalescerStats = { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0, areaFull: 0 };
      nat(b, new Uint32Array(offs), new Uint32Array(lens), count, AREA_AT, areaLen, lb, sb);
      expect(lb.count).toBe(la.count);
      expect(Array.from(lb.offs)).toEqual(Array.from(la.offs));
      expect(Array.from(lb.lens)).toEqual(Array.from(la.lens));
      expect(sb).toEqual(ga.stats);
      if (!Buffer.from(a.buffer).equals(Buffer.from(b.buffer))) {
        let i = 0;
        while (a[i] === b[i]) i++;
        expect({ iter, at: i, bytes: hex(b, i, 16) }).toEqual({ iter, at: i, bytes: hex(a, i, 16) });
      }
      merged += ga.stats.superPackets;
    }
    expect(merged).toBeGreaterThan(400);
  });

  it('covers every counter: bad checksums, a full area, evictions', () => {
    // The same generator, summed over a run: each kind of event happens (the test above compares them).
    const rng = new Prng(0x6e1);
    const buf = new Uint8Array(BUF_LEN);
    const total: CoalescerStats = { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0, areaFull: 0 };
    for (let iter = 0; iter < 150; iter++) {
      const { offs, lens } = randomBatch(buf, rng);
      const nat = pickCoalesceBatch({ maxFlows: 2, vnetHdrLen: 10, udp: true })!;
      nat(
        buf,
        new Uint32Array(offs),
        new Uint32Array(lens),
        offs.length,
        AREA_AT,
        rng.chance(0.5) ? RESERVATION : 6 * RESERVATION,
        new PacketList(offs.length + 1),
        total,
      );
    }
    expect(total.badChecksum).toBeGreaterThan(5);
    expect(total.areaFull).toBeGreaterThan(5);
    expect(total.superPackets).toBeGreaterThan(100);
  });

  it('throws on misuse before writing anything', () => {
    const buf = new Uint8Array(BUF_LEN);
    const nat = pickCoalesceBatch({ maxFlows: 16, vnetHdrLen: 10, udp: false })!;
    const st: CoalescerStats = { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0, areaFull: 0 };
    const out = new PacketList(4);
    expect(() => nat(buf, new Uint32Array([5]), new Uint32Array([40]), 1, AREA_AT, 6 * RESERVATION, out, st)).toThrow(
      RangeError,
    ); // no header room
    expect(() => nat(buf, new Uint32Array([100]), new Uint32Array([40]), 1, AREA_AT, 1000, out, st)).toThrow(
      RangeError,
    ); // area too small
    expect(() =>
      nat(
        buf,
        new Uint32Array([100, 200, 300, 400, 500]),
        new Uint32Array(5).fill(40),
        5,
        AREA_AT,
        6 * RESERVATION,
        out,
        st,
      ),
    ).toThrow(RangeError); // output too short
    expect(out.count).toBe(0);
    expect(st.packets).toBe(0);
    expect(pickCoalesceBatch({ maxFlows: 65, vnetHdrLen: 10, udp: false })).toBeNull();
  });

  it('allocates nothing per call', () => {
    const rng = new Prng(5);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const out = new PacketList(64);
    const st: CoalescerStats = { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0, areaFull: 0 };
    const nat = pickCoalesceBatch({ maxFlows: 16, vnetHdrLen: 10, udp: false })!;
    const sp = writeSuper(buf, IN_AT, { version: 4, proto: 6, payload: 1448 * 40, gsoSize: 1448, optLen: 12 }, rng);
    gsoSegment(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, STRIDE, segs);
    const trip = (): void => {
      out.count = 0;
      nat(buf, segs.offs, segs.lens, segs.count, AREA_AT, 2 * RESERVATION, out, st);
    };
    for (let i = 0; i < 300; i++) trip();
    expect(out.count).toBe(1);
    expect(heapBytesPerOp(trip, 2000)).toBeLessThan(8);
  });
});
