/**
 * The native software GSO and checksum checks (native/weft_gso.c through io/native-offload.ts)
 * against their TypeScript references, on seeded random input:
 * - gsoSegment: the same return code, list entries and the same whole buffer, byte for byte,
 *   as packet/gso.ts, over IPv4/IPv6 (options, extension headers), TCP/UDP, NEEDS_CSUM set or
 *   not, any TCP flags, short last segments, odd gso_size, packets without GSO, random damage
 *   (malformed and unsupported input) and lack of room;
 * - onesSum equals sumWords at odd offsets, odd lengths and in views at odd byte offsets;
 * - checksumVerdicts agrees with a JS recomputation; a Coalescer fed the verdicts gives the
 *   same output, buffer and counters as one summing in JS, damaged segments included;
 * - the choice (WEFT_NATIVE_GSO=0 forces the TypeScript) and no allocation per call.
 */
import { describe, expect, it } from 'vitest';
import { finishChecksum, foldSum, sumWords } from '../../src/packet/checksum.js';
import { CSUM_BAD, CSUM_OK, CSUM_UNKNOWN, Coalescer } from '../../src/packet/gro.js';
import { GSO_ERR_MALFORMED, GSO_ERR_NO_ROOM, GSO_ERR_UNSUPPORTED, gsoSegment } from '../../src/packet/gso.js';
import { IP_PROTO_TCP, IP_PROTO_UDP, ipv4TransportSum } from '../../src/packet/ipv4.js';
import { ipv6TransportSum } from '../../src/packet/ipv6.js';
import { PacketList } from '../../src/packet/packet-list.js';
import { TCP_FLAG_ACK } from '../../src/packet/tcp.js';
import {
  VIRTIO_NET_HDR_F_NEEDS_CSUM,
  VIRTIO_NET_HDR_GSO_ECN,
  VIRTIO_NET_HDR_GSO_NONE,
  writeVnetHdr,
} from '../../src/packet/virtio-net-hdr.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { pickChecksumVerdicts, pickGsoSegment } from '../../src/io/native-offload.js';
import { Prng } from '../util/prng.js';
import { skipUnlessRoot } from '../util/requirements.js';
import { randomSpec, writeSuper } from '../packet/offload-gen.js';
import { heapBytesPerOp } from '../util/alloc.js';

const native = loadNativeIo();
const skip = skipUnlessRoot(
  native === null || native.gsoSegment === undefined
    ? `native addon without gsoSegment (${nativeIoLoadError() ?? 'an older build'}): run node native/build.mjs`
    : null,
);

const VHL = 10;
const IN_AT = 3; // odd: the super-packet and its spans start at odd addresses too
const SEG_AT = 72 * 1024;
const BUF_LEN = SEG_AT + 144 * 1024;

function hex(buf: Uint8Array, off: number, len: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('hex');
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

/**
 * A random super-packet at buf[at] (vnet header, then the packet), sometimes with IPv4 options
 * or IPv6 extension headers (inserted between the IP and transport headers, lengths and
 * csum_start fixed), sometimes without NEEDS_CSUM, with ECN, or without GSO at all.
 */
function randomInput(buf: Uint8Array, at: number, rng: Prng): { hdrOff: number; off: number; len: number } {
  const tmp = new Uint8Array(70_000);
  const spec = randomSpec(rng, { flags: rng.chance(0.5) ? TCP_FLAG_ACK : rng.int(0, 255) });
  const ipLen = spec.version === 4 ? 20 : 40;
  let extra = new Uint8Array(0);
  let firstExt = 0;
  if (spec.version === 4 && rng.chance(0.3)) {
    extra = new Uint8Array(4 * rng.int(1, 10)).fill(1); // NOPs
    if (rng.chance(0.5)) rng.fill(extra);
  } else if (spec.version === 6 && rng.chance(0.4)) {
    // Destination options / hop-by-hop (PadN) or a first fragment header (offset 0), or a
    // non-first fragment (no transport header: refused).
    firstExt = rng.pick([0, 60, 44, 44, 43]);
    extra = new Uint8Array(firstExt === 44 ? 8 : 8 * rng.int(1, 3));
    extra[0] = spec.proto;
    if (firstExt !== 44) {
      extra[1] = extra.length / 8 - 1;
      extra[2] = 1;
      extra[3] = extra.length - 4;
    } else if (rng.chance(0.3)) {
      extra[2] = 0x01;
      extra[3] = 0x08;
    } // offset 33: a later fragment
  }
  spec.payload = Math.min(spec.payload, 65535 - 60 - extra.length - 80);
  const sp = writeSuper(tmp, 0, spec, rng);
  const len = sp.len + extra.length;
  buf.set(tmp.subarray(0, VHL + ipLen), at);
  buf.set(extra, at + VHL + ipLen);
  buf.set(tmp.subarray(VHL + ipLen, VHL + sp.len), at + VHL + ipLen + extra.length);
  const off = at + VHL;
  if (extra.length > 0) {
    if (spec.version === 4) {
      buf[off] = 0x40 | ((ipLen + extra.length) >> 2);
      buf[off + 2] = len >> 8;
      buf[off + 3] = len & 0xff;
    } else {
      buf[off + 6] = firstExt;
      buf[off + 4] = (len - 40) >> 8;
      buf[off + 5] = (len - 40) & 0xff;
    }
  }
  const l4Rel = ipLen + extra.length;
  const csumOff = spec.proto === IP_PROTO_TCP ? 16 : 6;
  const flags = rng.chance(0.8) ? VIRTIO_NET_HDR_F_NEEDS_CSUM : 0;
  let gsoType = tmp[1]! | (rng.chance(0.1) ? VIRTIO_NET_HDR_GSO_ECN : 0);
  if (rng.chance(0.15)) gsoType = VIRTIO_NET_HDR_GSO_NONE;
  // csum_start/offset: right, or (rarely) pointing anywhere, even outside the packet.
  const start = rng.chance(0.9) ? l4Rel : rng.int(0, len + 4);
  const cso = rng.chance(0.9) ? csumOff : rng.int(0, 40);
  writeVnetHdr(buf, at, VHL, flags, gsoType, sp.hdrLen + extra.length, spec.gsoSize, start, cso);
  return { hdrOff: at, off, len };
}

/** Damage in the headers (vnet header included) or the length. */
function damage(buf: Uint8Array, inp: { hdrOff: number; off: number; len: number }, rng: Prng): number {
  let len = inp.len;
  for (let d = rng.int(1, 3); d > 0; d--) {
    const k = rng.int(0, 4);
    if (k === 0) buf[inp.hdrOff + rng.int(0, 9)] = rng.int(0, 255);
    else if (k === 1) len = Math.max(0, len + rng.int(-3, 3));
    else buf[inp.off + rng.int(0, 99)] = rng.int(0, 255);
  }
  return len;
}

describe.skipIf(skip !== null)(`native software GSO and checksums${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const nativeSeg = pickGsoSegment();

  it('is chosen when the addon has it; WEFT_NATIVE_GSO=0 picks the TypeScript', () => {
    expect(nativeSeg).not.toBe(gsoSegment);
    expect(pickChecksumVerdicts()).not.toBeNull();
    const was = process.env.WEFT_NATIVE_GSO;
    process.env.WEFT_NATIVE_GSO = '0';
    try {
      expect(pickGsoSegment()).toBe(gsoSegment);
      expect(pickChecksumVerdicts()).toBeNull();
    } finally {
      if (was === undefined) delete process.env.WEFT_NATIVE_GSO;
      else process.env.WEFT_NATIVE_GSO = was;
    }
  });

  it('segments exactly as gso.ts: same code, entries and buffer, over random and damaged input', () => {
    const rng = new Prng(0x650);
    const a = new Uint8Array(BUF_LEN);
    const b = new Uint8Array(BUF_LEN);
    const codes = new Map<number, number>();
    for (let iter = 0; iter < 1500; iter++) {
      rng.fill(a.subarray(0, 2048)); // stale bytes before and in the headers
      const inp = randomInput(a, IN_AT + rng.int(0, 1), rng);
      const len = rng.chance(0.25) ? damage(a, inp, rng) : inp.len;
      // Output: usually a fitting area at an odd or even offset; sometimes a tight stride, an
      // overlap with the input, the end of the buffer, or a list nearly full.
      const stride = rng.chance(0.9) ? 2048 + rng.int(0, 63) : rng.int(0, 1600);
      const outOff = rng.chance(0.9)
        ? SEG_AT + rng.int(0, 200)
        : rng.pick([inp.off + rng.int(-200, 200), BUF_LEN - rng.int(0, 4000)]);
      const cap = rng.chance(0.85) ? 80 : rng.int(1, 70);
      const pre = rng.int(0, Math.min(cap - 1, 5));
      b.set(a);
      const la = new PacketList(cap);
      const lb = new PacketList(cap);
      for (let i = 0; i < pre; i++) {
        la.push(i, i);
        lb.push(i, i);
      }
      const ra = gsoSegment(a, inp.hdrOff, inp.off, len, outOff, stride, la);
      const rb = nativeSeg(b, inp.hdrOff, inp.off, len, outOff, stride, lb);
      expect(rb).toBe(ra);
      expect(lb.count).toBe(la.count);
      expect(Array.from(lb.offs)).toEqual(Array.from(la.offs));
      expect(Array.from(lb.lens)).toEqual(Array.from(la.lens));
      if (!same(a, b)) {
        let i = 0;
        while (a[i] === b[i]) i++;
        expect({ iter, at: i, native: hex(b, i, 16) }).toEqual({ iter, at: i, native: hex(a, i, 16) });
      }
      const key = ra > 1 ? 2 : ra;
      codes.set(key, (codes.get(key) ?? 0) + 1);
    }
    // Every outcome was exercised, most runs cut several segments.
    for (const c of [1, 2, GSO_ERR_MALFORMED, GSO_ERR_UNSUPPORTED, GSO_ERR_NO_ROOM])
      expect(codes.get(c) ?? 0).toBeGreaterThan(10);
    expect(codes.get(2)!).toBeGreaterThan(700);
  });

  it('a computed zero checksum: UDP sends 0xffff, TCP 0 (segments and NEEDS_CSUM packets alike)', () => {
    const rng = new Prng(0);
    for (const proto of [IP_PROTO_UDP, IP_PROTO_TCP] as const) {
      for (const gso of [true, false]) {
        const a = new Uint8Array(BUF_LEN);
        const spec = { version: 4 as const, proto, payload: gso ? 3000 + 200 : 200, gsoSize: 1000, seq: 7 };
        const sp = writeSuper(a, IN_AT, spec, rng);
        if (!gso)
          writeVnetHdr(
            a,
            sp.hdrOff,
            VHL,
            VIRTIO_NET_HDR_F_NEEDS_CSUM,
            VIRTIO_NET_HDR_GSO_NONE,
            0,
            0,
            sp.l4 - sp.off,
            proto === IP_PROTO_TCP ? 16 : 6,
          );
        // Zero two bytes at the start of the last segment's payload, see the checksum the
        // reference gives, then put that checksum there: the sum becomes all ones.
        const at = sp.off + sp.hdrLen + (gso ? 3000 : 0);
        a[at] = 0;
        a[at + 1] = 0;
        const first = a.slice();
        const l = new PacketList(8);
        gsoSegment(first, sp.hdrOff, sp.off, sp.len, SEG_AT, 2048, l);
        const co = l.offs[l.count - 1]! + sp.hdrLen - (proto === IP_PROTO_TCP ? 4 : 2);
        a[at] = first[co]!;
        a[at + 1] = first[co + 1]!;
        const b = a.slice();
        const la = new PacketList(8);
        const lb = new PacketList(8);
        expect(nativeSeg(b, sp.hdrOff, sp.off, sp.len, SEG_AT, 2048, lb)).toBe(
          gsoSegment(a, sp.hdrOff, sp.off, sp.len, SEG_AT, 2048, la),
        );
        const c = la.offs[la.count - 1]! + sp.hdrLen - (proto === IP_PROTO_TCP ? 4 : 2);
        expect(hex(a, c, 2)).toBe(proto === IP_PROTO_UDP ? 'ffff' : '0000');
        expect(same(a, b)).toBe(true);
      }
    }
  });

  it('throws on misuse (header outside the buffer, count past the list)', () => {
    const buf = new Uint8Array(100);
    const l = new PacketList(4);
    const seg = native!.gsoSegment!.bind(native);
    expect(() => seg(buf, 95, 0, 50, 0, 64, l.offs, l.lens, 0)).toThrow(RangeError);
    expect(() => seg(buf, 0, 10, 50, 0, 64, l.offs, l.lens, 5)).toThrow(RangeError);
    expect(() => seg(buf, 0, 10, 50, 0, 64, new Uint8Array(4) as unknown as Uint32Array, l.lens, 0)).toThrow(TypeError);
  });

  it('onesSum equals sumWords at odd offsets and lengths, in views at odd byte offsets', () => {
    const rng = new Prng(0x1071);
    const backing = new Uint8Array(70_000);
    rng.fill(backing);
    const sum = native!.onesSum!.bind(native);
    for (let iter = 0; iter < 3000; iter++) {
      const buf = backing.subarray(rng.int(0, 7));
      const off = rng.int(0, 1001);
      const len = rng.chance(0.2) ? rng.int(0, 130) : rng.int(0, rng.chance(0.5) ? 3001 : 66_001);
      const init = rng.chance(0.5) ? rng.int(0, 0x3fffff) : 0;
      expect(sum(buf, off, len, init)).toBe(foldSum(sumWords(buf, off, len, init)));
    }
    const ones = new Uint8Array(5000).fill(0xff);
    for (const len of [0, 1, 2, 63, 64, 65, 1449, 4999]) {
      expect(sum(ones, 1, len, 0)).toBe(foldSum(sumWords(ones, 1, len)));
      expect(sum(new Uint8Array(5003), 3, len, 0)).toBe(0);
    }
  });

  /** Segments of random flows, some with a bit flipped: in the payload (bad checksum) or the IP header. */
  function segmentsWithDamage(buf: Uint8Array, rng: Prng): PacketList {
    const list = new PacketList(400);
    let at = SEG_AT + 16;
    for (let fl = 0; fl < 3; fl++) {
      const spec = randomSpec(rng, { flags: TCP_FLAG_ACK });
      spec.srcHost = fl + 1;
      spec.payload = Math.min(spec.payload, spec.gsoSize * 20);
      const sp = writeSuper(buf, IN_AT, spec, rng);
      const before = list.count;
      expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, at, 2048, list)).toBeGreaterThan(0);
      at += (list.count - before) * 2048;
    }
    for (let d = rng.int(0, 4); d > 0; d--) {
      const i = rng.int(0, list.count - 1);
      buf[list.offs[i]! + rng.int(0, rng.chance(0.3) ? 9 : list.lens[i]! - 1)] ^= 1 << rng.int(0, 7);
    }
    return list;
  }

  it('checksumVerdicts agrees with a JS recomputation; other packets get CSUM_UNKNOWN', () => {
    const rng = new Prng(0xc5);
    const buf = new Uint8Array(BUF_LEN);
    const verdicts = pickChecksumVerdicts()!;
    const seen = new Set<number>();
    for (let iter = 0; iter < 60; iter++) {
      const list = segmentsWithDamage(buf, rng);
      const out = new Uint8Array(list.count);
      verdicts(buf, list.offs, list.lens, list.count, out);
      for (let i = 0; i < list.count; i++) {
        const off = list.offs[i]!;
        const len = list.lens[i]!;
        const v = buf[off]! >>> 4;
        const proto = buf[off + (v === 4 ? 9 : 6)]!;
        const l4Rel = v === 4 ? 20 : 40;
        let want = CSUM_UNKNOWN;
        const lenOk =
          v === 4
            ? ((buf[off + 2]! << 8) | buf[off + 3]!) === len
            : 40 + ((buf[off + 4]! << 8) | buf[off + 5]!) === len;
        if ((v === 4 ? buf[off] === 0x45 : v === 6) && lenOk && (proto === IP_PROTO_TCP || proto === IP_PROTO_UDP)) {
          const s =
            v === 4
              ? ipv4TransportSum(buf, off, proto, off + l4Rel, len - l4Rel)
              : ipv6TransportSum(buf, off, proto, off + l4Rel, len - l4Rel);
          want = finishChecksum(s) === 0 ? CSUM_OK : CSUM_BAD;
        }
        expect(out[i]).toBe(want);
        seen.add(want);
      }
    }
    expect([...seen].sort()).toEqual([CSUM_UNKNOWN, CSUM_OK, CSUM_BAD].sort());
  });

  it('a Coalescer fed the verdicts gives the same output, buffer and counters as one summing itself', () => {
    const rng = new Prng(0x9e1);
    const a = new Uint8Array(BUF_LEN + 5 * 65_600);
    const b = new Uint8Array(a.length);
    const areaAt = BUF_LEN;
    const areaLen = 5 * 65_600;
    const verdicts = pickChecksumVerdicts()!;
    const ga = new Coalescer({ udp: true, maxFlows: 3 });
    const gb = new Coalescer({ udp: true, maxFlows: 3 });
    for (let iter = 0; iter < 120; iter++) {
      const list = segmentsWithDamage(a, rng);
      // Interleave the flows, keeping each one's order mostly.
      const order = Array.from({ length: list.count }, (_, i) => i)
        .map((i) => ({ i, key: i + rng.int(0, 4) * 7 }))
        .sort((x, y) => x.key - y.key)
        .map((e) => e.i);
      const offs = new Uint32Array(order.map((i) => list.offs[i]!));
      const lens = new Uint32Array(order.map((i) => list.lens[i]!));
      b.set(a);
      const csum = new Uint8Array(order.length);
      verdicts(b, offs, lens, order.length, csum);
      const oa = new PacketList(order.length);
      const ob = new PacketList(order.length);
      ga.begin(a, areaAt, areaLen, oa);
      gb.begin(b, areaAt, areaLen, ob);
      for (let k = 0; k < order.length; k++) {
        ga.add(offs[k]!, lens[k]!);
        gb.add(offs[k]!, lens[k]!, csum[k]);
      }
      ga.flush();
      gb.flush();
      expect(Array.from(ob.offs.subarray(0, ob.count))).toEqual(Array.from(oa.offs.subarray(0, oa.count)));
      expect(Array.from(ob.lens.subarray(0, ob.count))).toEqual(Array.from(oa.lens.subarray(0, oa.count)));
      expect(same(a, b)).toBe(true);
    }
    expect(gb.stats).toEqual(ga.stats);
    expect(ga.stats.badChecksum).toBeGreaterThan(20);
    expect(ga.stats.superPackets).toBeGreaterThan(100);
  });

  it('allocates nothing per call (segment + verdicts)', () => {
    const rng = new Prng(5);
    const buf = new Uint8Array(BUF_LEN);
    const segs = new PacketList(64);
    const csum = new Uint8Array(64);
    const verdicts = pickChecksumVerdicts()!;
    const sp = writeSuper(buf, IN_AT, { version: 4, proto: 6, payload: 1448 * 40, gsoSize: 1448, optLen: 12 }, rng);
    const trip = (): void => {
      segs.count = 0;
      nativeSeg(buf, sp.hdrOff, sp.off, sp.len, SEG_AT + 16, 2048, segs);
      verdicts(buf, segs.offs, segs.lens, segs.count, csum);
    };
    for (let i = 0; i < 300; i++) trip();
    expect(segs.count).toBe(40);
    expect(Array.from(csum.subarray(0, 40)).every((v) => v === CSUM_OK)).toBe(true);
    expect(heapBytesPerOp(trip, 2000)).toBeLessThan(8);
  });
});
