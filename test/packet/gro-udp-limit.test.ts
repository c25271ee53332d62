/**
 * The Coalescer never builds a UDP super-packet of more than GRO_MAX_UDP_SEGMENTS segments: a
 * TUN refuses a UDP_L4 write beyond the kernel's UDP_MAX_SEGMENTS with EINVAL (the whole
 * super-packet lost; seen as 91 % loss of 64-byte datagrams in bench:fabric). Small datagrams of
 * one flow (200 × 64 B, well under 64 KiB together) come out as runs of at most 64, in order,
 * every byte kept.
 */
import { describe, expect, it } from 'vitest';
import { Coalescer, GRO_MAX_UDP_SEGMENTS } from '../../src/packet/gro.js';
import { gsoSegment } from '../../src/packet/gso.js';
import { PacketList } from '../../src/packet/packet-list.js';
import { Prng } from '../util/prng.js';
import { writeSuper } from './offload-gen.js';

describe('Coalescer: UDP segment limit', () => {
  it('splits 200 small datagrams of one flow into super-packets of at most 64 segments, payload intact', () => {
    const rng = new Prng(64);
    const buf = new Uint8Array(1 << 20);
    const payload = 200 * 64;
    // 200 datagrams of 64 B: a USO super-packet cut by gsoSegment (valid checksums, one flow).
    const sp = writeSuper(buf, 0, { version: 4, proto: 17, payload, gsoSize: 64, id: 7 }, rng);
    const want = buf.slice(sp.off + sp.hdrLen, sp.off + sp.len);
    const segs = new PacketList(256);
    expect(gsoSegment(buf, sp.hdrOff, sp.off, sp.len, 65536 + 16, 128, segs)).toBe(200);
    const out = new PacketList(256);
    const gro = new Coalescer({ udp: true });
    const areaAt = 65536 + 256 * 128;
    gro.begin(buf, areaAt, 4 * gro.reservation, out);
    for (let i = 0; i < segs.count; i++) gro.add(segs.offs[i]!, segs.lens[i]!);
    gro.flush();
    expect(out.count).toBe(Math.ceil(200 / GRO_MAX_UDP_SEGMENTS));
    const got: number[] = [];
    for (let i = 0; i < out.count; i++) {
      const p = out.offs[i]! + 10;
      const ipLen = (buf[p + 2]! << 8) | buf[p + 3]!;
      const n = (ipLen - 28) / 64;
      expect(n).toBeLessThanOrEqual(GRO_MAX_UDP_SEGMENTS);
      got.push(...buf.subarray(p + 28, p + ipLen));
    }
    expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true);
  });
});
