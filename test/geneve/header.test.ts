import { describe, expect, it } from 'vitest';
import {
  checkGeneveOptionsBlock,
  GENEVE_FLAG_CRITICAL,
  GENEVE_FLAG_OAM,
  GENEVE_HEADER_LEN,
  GENEVE_MAX_OPTIONS_LEN,
  GENEVE_MAX_VNI,
  GENEVE_OPTION_MAX_DATA_LEN,
  GENEVE_PROTO_IPV4,
  GENEVE_PROTO_IPV6,
  GENEVE_PROTO_TEB,
  geneveCritical,
  geneveHeaderLen,
  geneveNextOption,
  geneveOam,
  geneveOptionClass,
  geneveOptionCritical,
  geneveOptionDataLen,
  geneveOptionDataOffset,
  geneveOptionKey,
  geneveOptionsLen,
  geneveOptionType,
  geneveProtocolType,
  geneveVersion,
  geneveVni,
  validateGeneve,
  writeGeneveHeader,
  writeGeneveOption,
} from '../../src/geneve/header.js';
import { GeneveDrop } from '../../src/geneve/reasons.js';
import { Prng } from '../util/prng.js';

/** Options block of exactly `total` bytes made of TLVs of at most 128 bytes each, random data. */
function optionsBlock(rng: Prng, total: number, critical = false): Uint8Array {
  const b = new Uint8Array(total);
  let p = 0;
  while (p < total) {
    const dataLen = Math.min(total - p - 4, GENEVE_OPTION_MAX_DATA_LEN);
    const data = rng.bytes(dataLen);
    p = writeGeneveOption(b, p, rng.int(0, 0xffff), rng.int(0, 0x7f) | (critical ? 0x80 : 0), data, 0, dataLen);
  }
  return b;
}

describe('Geneve base header', () => {
  it('round-trips every field, with reserved bits zero on send', () => {
    const rng = new Prng(8926);
    const vnis = [
      0,
      1,
      0xff,
      0x100,
      0xffff,
      0x10000,
      GENEVE_MAX_VNI,
      ...Array.from({ length: 16 }, () => rng.int(0, GENEVE_MAX_VNI)),
    ];
    const protos = [GENEVE_PROTO_IPV4, GENEVE_PROTO_IPV6, GENEVE_PROTO_TEB, 0, 0xffff, 0x1234];
    for (const vni of vnis) {
      for (const proto of protos) {
        for (const optionsLen of [0, 4, 124, 128, GENEVE_MAX_OPTIONS_LEN]) {
          for (const [oam, critical] of [
            [false, false],
            [true, false],
            [false, true],
            [true, true],
          ] as const) {
            const buf = new Uint8Array(3 + GENEVE_HEADER_LEN).fill(0xaa);
            writeGeneveHeader(buf, 3, vni, proto, optionsLen, oam, critical);
            expect(geneveVersion(buf, 3)).toBe(0);
            expect(geneveVni(buf, 3)).toBe(vni);
            expect(geneveProtocolType(buf, 3)).toBe(proto);
            expect(geneveOptionsLen(buf, 3)).toBe(optionsLen);
            expect(geneveHeaderLen(buf, 3)).toBe(8 + optionsLen);
            expect(geneveOam(buf, 3)).toBe(oam);
            expect(geneveCritical(buf, 3)).toBe(critical);
            expect(buf[3 + 1]! & 0x3f).toBe(0); // Rsvd. flags
            expect(buf[3 + 7]).toBe(0); // Reserved after the VNI
            expect(buf.subarray(0, 3)).toEqual(new Uint8Array([0xaa, 0xaa, 0xaa])); // nothing written before off
          }
        }
      }
    }
  });

  it('matches the RFC 8926 §3.4 bit layout byte by byte', () => {
    const buf = new Uint8Array(8);
    writeGeneveHeader(buf, 0, 0x123456, GENEVE_PROTO_TEB, 8, true, true);
    // Ver=0, Opt Len=2 words; O and C set; 0x6558; VNI 0x123456; reserved 0.
    expect(Array.from(buf)).toEqual([0x02, 0xc0, 0x65, 0x58, 0x12, 0x34, 0x56, 0x00]);
  });

  it('throws RangeError on API misuse when writing', () => {
    const buf = new Uint8Array(16);
    expect(() => writeGeneveHeader(buf, 0, GENEVE_MAX_VNI + 1, GENEVE_PROTO_IPV4, 0, false, false)).toThrow(RangeError);
    expect(() => writeGeneveHeader(buf, 0, -1, GENEVE_PROTO_IPV4, 0, false, false)).toThrow(RangeError);
    expect(() => writeGeneveHeader(buf, 0, 1, 0x10000, 0, false, false)).toThrow(RangeError);
    expect(() => writeGeneveHeader(buf, 0, 1, GENEVE_PROTO_IPV4, 6, false, false)).toThrow(RangeError);
    expect(() => writeGeneveHeader(buf, 0, 1, GENEVE_PROTO_IPV4, 256, false, false)).toThrow(RangeError);
    expect(() => writeGeneveHeader(buf, 10, 1, GENEVE_PROTO_IPV4, 0, false, false)).toThrow(RangeError);
    expect(() => writeGeneveOption(buf, 0, 1, 1, new Uint8Array(8), 0, 6)).toThrow(RangeError);
    expect(() => writeGeneveOption(buf, 0, 1, 1, new Uint8Array(128), 0, 128)).toThrow(RangeError);
    expect(() => writeGeneveOption(buf, 0, 0x10000, 1, null, 0, 0)).toThrow(RangeError);
    expect(() => writeGeneveOption(buf, 0, 1, 0x100, null, 0, 0)).toThrow(RangeError);
    expect(() => writeGeneveOption(buf, 0, 1, 1, null, 0, 4)).toThrow(RangeError);
  });
});

describe('Geneve option TLVs', () => {
  it('round-trip every legal option data length (0..124 bytes, 4-byte granular)', () => {
    const rng = new Prng(1);
    for (let dataLen = 0; dataLen <= GENEVE_OPTION_MAX_DATA_LEN; dataLen += 4) {
      const cls = rng.int(0, 0xffff);
      const type = rng.int(0, 0x7f);
      const data = rng.bytes(dataLen);
      const pkt = new Uint8Array(GENEVE_HEADER_LEN + 4 + dataLen + 20);
      writeGeneveHeader(pkt, 0, 77, GENEVE_PROTO_IPV4, 4 + dataLen, false, false);
      const end = writeGeneveOption(pkt, GENEVE_HEADER_LEN, cls, type, data, 0, dataLen);
      expect(end).toBe(GENEVE_HEADER_LEN + 4 + dataLen);
      const o = GENEVE_HEADER_LEN;
      expect(geneveOptionClass(pkt, o)).toBe(cls);
      expect(geneveOptionType(pkt, o)).toBe(type);
      expect(geneveOptionCritical(pkt, o)).toBe(false);
      expect(geneveOptionDataLen(pkt, o)).toBe(dataLen);
      expect(pkt.subarray(geneveOptionDataOffset(o), geneveOptionDataOffset(o) + dataLen)).toEqual(data);
      expect(geneveNextOption(pkt, o)).toBe(end);
      expect(pkt[o + 3]! & 0xe0).toBe(0); // R bits zero on send
      expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
      // The same option marked critical: dropped unless understood.
      pkt[o + 2] = type | 0x80;
      expect(geneveOptionCritical(pkt, o)).toBe(true);
      expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.CriticalOption);
      expect(validateGeneve(pkt, 0, pkt.length, new Set([geneveOptionKey(cls, type | 0x80)]))).toBe(GeneveDrop.None);
      expect(validateGeneve(pkt, 0, pkt.length, new Set([geneveOptionKey(cls, type)]))).toBe(GeneveDrop.CriticalOption);
    }
  });

  it('accepts every legal total options length (0..252 bytes) and walks it exactly', () => {
    const rng = new Prng(2);
    for (let total = 0; total <= GENEVE_MAX_OPTIONS_LEN; total += 4) {
      const block = optionsBlock(rng, total);
      expect(checkGeneveOptionsBlock(block)).toEqual({ error: null, critical: false });
      const pkt = new Uint8Array(GENEVE_HEADER_LEN + total + 20);
      writeGeneveHeader(pkt, 0, 5, GENEVE_PROTO_IPV6, total, false, false);
      pkt.set(block, GENEVE_HEADER_LEN);
      expect(geneveOptionsLen(pkt, 0)).toBe(total);
      expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
      // Exactly the header + options, no payload: still valid.
      expect(validateGeneve(pkt, 0, GENEVE_HEADER_LEN + total, null)).toBe(GeneveDrop.None);
      let p = GENEVE_HEADER_LEN;
      let n = 0;
      while (p < GENEVE_HEADER_LEN + total) {
        p = geneveNextOption(pkt, p);
        n++;
      }
      expect(p).toBe(GENEVE_HEADER_LEN + total);
      expect(n).toBe(Math.ceil(total / 128));
      if (total > 0) expect(checkGeneveOptionsBlock(optionsBlock(rng, total, true)).critical).toBe(true);
    }
  });

  it('rejects malformed option blocks given as configuration', () => {
    expect(checkGeneveOptionsBlock(new Uint8Array(6)).error).toMatch(/multiple of 4/);
    expect(checkGeneveOptionsBlock(new Uint8Array(256)).error).toMatch(/at most 252/);
    const b = new Uint8Array(8);
    b[3] = 2; // claims 8 data bytes, only 4 follow
    expect(checkGeneveOptionsBlock(b).error).toMatch(/runs past/);
  });
});

describe('RFC 8926 receive rules (validateGeneve)', () => {
  function base(optionsLen = 0, extra = 20): Uint8Array {
    const pkt = new Uint8Array(GENEVE_HEADER_LEN + optionsLen + extra);
    writeGeneveHeader(pkt, 0, 42, GENEVE_PROTO_IPV4, optionsLen, false, false);
    return pkt;
  }

  it('drops anything shorter than the base header', () => {
    const pkt = base();
    for (let len = 0; len < GENEVE_HEADER_LEN; len++)
      expect(validateGeneve(pkt, 0, len, null)).toBe(GeneveDrop.Truncated);
    expect(validateGeneve(pkt, 0, GENEVE_HEADER_LEN, null)).toBe(GeneveDrop.None);
  });

  it('drops versions other than 0 (§3.4)', () => {
    for (const ver of [1, 2, 3]) {
      const pkt = base();
      pkt[0] = (ver << 6) | (pkt[0]! & 0x3f);
      expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.BadVersion);
    }
  });

  it('drops when Opt Len exceeds the datagram', () => {
    const pkt = base(8, 0);
    writeGeneveOption(pkt, 8, 1, 1, new Uint8Array(4), 0, 4);
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
    expect(validateGeneve(pkt, 0, pkt.length - 1, null)).toBe(GeneveDrop.OptionsTruncated);
    expect(validateGeneve(pkt, 0, pkt.length - 4, null)).toBe(GeneveDrop.OptionsTruncated);
    pkt[0] = 0x3f; // 252 bytes of options claimed
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.OptionsTruncated);
  });

  it('drops an option whose length runs past the options area (over-long option length)', () => {
    const pkt = base(8);
    writeGeneveOption(pkt, 8, 0x0102, 3, new Uint8Array(4), 0, 4);
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
    for (let words = 2; words <= 31; words++) {
      pkt[8 + 3] = words; // the 20 bytes of payload behind must not make it legal
      expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.OptionMalformed);
    }
    // The second of two options overruns.
    const two = base(12);
    writeGeneveOption(two, 8, 1, 1, null, 0, 0);
    writeGeneveOption(two, 12, 1, 2, new Uint8Array(4), 0, 4);
    expect(validateGeneve(two, 0, two.length, null)).toBe(GeneveDrop.None);
    two[12 + 3] = 2;
    expect(validateGeneve(two, 0, two.length, null)).toBe(GeneveDrop.OptionMalformed);
  });

  it('drops an unknown critical option with or without the C bit; keeps non-critical unknown ones', () => {
    const pkt = base(8);
    writeGeneveOption(pkt, 8, 0xffff, 0x80 | 5, new Uint8Array(4), 0, 4);
    pkt[1] = GENEVE_FLAG_CRITICAL;
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.CriticalOption);
    pkt[1] = 0;
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.CriticalOption);
    pkt[8 + 2] = 5; // not critical
    pkt[1] = GENEVE_FLAG_CRITICAL; // C bit without any critical option: harmless
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
  });

  it('drops control (O bit) packets', () => {
    const pkt = base();
    pkt[1] = GENEVE_FLAG_OAM;
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.Oam);
  });

  it('ignores reserved bits on receive (§3.4)', () => {
    const pkt = base(4);
    writeGeneveOption(pkt, 8, 0x0101, 1, null, 0, 0);
    pkt[1] = 0x3f; // all Rsvd. flag bits
    pkt[7] = 0xff; // reserved byte after the VNI
    pkt[8 + 3] = 0xe0; // option R bits (length 0)
    expect(validateGeneve(pkt, 0, pkt.length, null)).toBe(GeneveDrop.None);
    expect(geneveVni(pkt, 0)).toBe(42);
    expect(geneveOam(pkt, 0)).toBe(false);
    expect(geneveCritical(pkt, 0)).toBe(false);
    expect(geneveOptionDataLen(pkt, 8)).toBe(0);
  });

  it('never throws and never reads outside [off, off+len) on seeded random input', () => {
    const rng = new Prng(0x6e6576);
    const counts = new Map<number, number>();
    for (let i = 0; i < 20000; i++) {
      const len = rng.int(0, 300);
      // Surround the region with bytes that would make a different verdict if read.
      const buf = new Uint8Array(len + 64);
      rng.fill(buf);
      const off = rng.int(0, 64);
      const region = buf.slice(off, off + len);
      if (i % 2 === 0 && len > 0) buf[off] = buf[off]! & 0x3f; // version 0 half of the time, to reach option parsing
      if (i % 2 === 0 && len > 0) region[0] = buf[off]!;
      const r = validateGeneve(buf, off, len, null);
      // Same verdict on a copy with nothing around it: no read outside the region.
      expect(validateGeneve(region, 0, len, null)).toBe(r);
      expect(r).toBeGreaterThanOrEqual(GeneveDrop.None);
      expect(r).toBeLessThanOrEqual(GeneveDrop.Oam);
      counts.set(r, (counts.get(r) ?? 0) + 1);
    }
    // The fuzz reached every header-level verdict.
    for (const r of [
      GeneveDrop.None,
      GeneveDrop.Truncated,
      GeneveDrop.BadVersion,
      GeneveDrop.OptionsTruncated,
      GeneveDrop.OptionMalformed,
      GeneveDrop.CriticalOption,
      GeneveDrop.Oam,
    ]) {
      expect(counts.get(r) ?? 0).toBeGreaterThan(0);
    }
  });
});
