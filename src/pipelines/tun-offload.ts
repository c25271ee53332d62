/**
 * The TUN side of a tunnel with offloads (TUN opened with `offload: true`, io/tun.ts):
 *
 * - TunSegmenter (TUN → tunnel): each read slot holds an IP packet, possibly a TSO/USO
 *   super-packet of up to 64 KiB, with its virtio_net_hdr in the 10 bytes before it. Each is
 *   cut with gsoSegment (the native one when the addon has it: io/native-offload.ts) into segments of at most `mtu` bytes, laid out in the read batch's
 *   scratch area with a stride that leaves `headroom` bytes before and room for padding + tag
 *   after every segment, so the next stage (WireGuard: header + AEAD in place) can grow each
 *   one in place. A packet without GSO stays in its slot (checksum completed if the kernel left
 *   it partial). The segments of one super-packet are consecutive and equal-sized (the last may
 *   be shorter): what UDP GSO sends as one message.
 * - TunCoalescingWriter (tunnel → TUN): an InnerSink-shaped writer that coalesces the
 *   decrypted TCP (and, with USO, UDP) segments of one batch per flow into super-packets
 *   (gro.ts) and writes them with their virtio_net_hdr in one writev batch. Flushes at the end
 *   of every call: no packet waits for a later batch. With the addon, the whole batch is
 *   coalesced in one native call (the same rules and bytes as gro.ts); with an older addon the
 *   segments' checksums are at least checked in one native call for the batch.
 *
 * Ownership: buffers are the caller's, used only during a call. Drops are counted by reason in
 * `stats`, never thrown. No allocation per packet (lists and state are preallocated).
 */
import type { PacketBatch } from '../io/batch.js';
import {
  pickChecksumVerdicts,
  pickCoalesceBatch,
  pickGsoSegment,
  type ChecksumVerdictsFn,
  type CoalesceBatchFn,
  type GsoSegmentFn,
} from '../io/native-offload.js';
import type { PacketDevice } from '../io/device.js';
import { Coalescer } from '../packet/gro.js';
import { GSO_ERR_MALFORMED, GSO_ERR_NO_ROOM } from '../packet/gso.js';
import { PacketList } from '../packet/packet-list.js';
import { VIRTIO_NET_HDR_GSO_NONE, vnetGsoSize, vnetGsoType } from '../packet/virtio-net-hdr.js';

/** Receives the packets of one flush: buf[offs[i], +lens[i]) for i < count (valid during the call). */
export type SegmentConsumer = (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number) => void;

export interface TunSegmenterStats {
  /** Packets read that carried GSO (cut into segments). */
  superPackets: number;
  /** Segments produced from them. */
  segments: number;
  /** Drops by reason. */
  malformed: number;
  unsupported: number;
  /** A segment longer than the MTU (a gso_size the tunnel cannot carry). */
  oversize: number;
  /** A super-packet with more segments than the scratch area holds. */
  noRoom: number;
}

/** Bytes between segments: headroom + MTU + tailroom, rounded to a cache line. */
export function segmentStride(mtu: number, headroom: number, tailroom: number): number {
  return Math.ceil((headroom + mtu + tailroom) / 64) * 64;
}

/** The PacketBatch `scratch` a TunSegmenter needs for `segments` segments at a time. */
export function segmenterScratch(mtu: number, headroom: number, tailroom: number, segments: number): number {
  return segments * segmentStride(mtu, headroom, tailroom);
}

export class TunSegmenter {
  readonly stats: TunSegmenterStats = {
    superPackets: 0,
    segments: 0,
    malformed: 0,
    unsupported: 0,
    oversize: 0,
    noRoom: 0,
  };
  private readonly list: PacketList;
  private readonly stride: number;
  private readonly maxSegment: number;
  private readonly headroom: number;
  private readonly segment: GsoSegmentFn = pickGsoSegment();
  private used = 0;

  /**
   * `batch` is the TUN read batch (its scratch holds the segments: see segmenterScratch);
   * segments are ≤ mtu bytes with `headroom` bytes before and `tailroom` after each.
   */
  constructor(
    private readonly batch: PacketBatch,
    private readonly vnetHdrLen: number,
    mtu: number,
    headroom: number,
    tailroom: number,
    private readonly consume: SegmentConsumer,
  ) {
    this.stride = segmentStride(mtu, headroom, tailroom);
    this.maxSegment = mtu;
    this.headroom = headroom;
    if (batch.headroom < vnetHdrLen || batch.headroom < headroom)
      throw new RangeError(`TUN batch headroom ${batch.headroom} < ${Math.max(vnetHdrLen, headroom)}`);
    const segs = Math.floor(batch.scratchLen / this.stride);
    // gsoSegment bounds its output by the end of the buffer: the scratch must end there, in whole strides.
    if (batch.scratchLen % this.stride !== 0 || batch.scratchOff + batch.scratchLen !== batch.buf.length)
      throw new RangeError('TUN batch scratch must be a whole number of segment strides (segmenterScratch)');
    if (segs < 64)
      throw new RangeError(`TUN batch scratch ${batch.scratchLen} holds ${segs} segments; at least 64 are needed`);
    this.list = new PacketList(segs + batch.capacity);
  }

  /** Segments every packet of the (filled) batch and hands them to the consumer in order. */
  process(b: PacketBatch): void {
    if (b !== this.batch) throw new Error('TunSegmenter.process: not the batch it was built for');
    const buf = b.buf;
    const list = this.list;
    const st = this.stats;
    list.count = 0;
    this.used = 0;
    for (let i = 0; i < b.count; i++) {
      const off = b.offs[i];
      const len = b.lens[i];
      const hdr = off - this.vnetHdrLen;
      const gso = vnetGsoType(buf, hdr) !== VIRTIO_NET_HDR_GSO_NONE;
      let n = this.segment(buf, hdr, off, len, this.outOff(), this.stride, list);
      if (n === GSO_ERR_NO_ROOM && list.count > 0) {
        this.flush(buf);
        n = this.segment(buf, hdr, off, len, this.outOff(), this.stride, list);
      }
      if (n < 0) {
        // With an empty list, no room means one segment cannot fit a stride: a gso_size above the MTU.
        if (n === GSO_ERR_NO_ROOM) {
          if (vnetGsoSize(buf, hdr) >= this.maxSegment) st.oversize++;
          else st.noRoom++;
        } else if (n === GSO_ERR_MALFORMED) st.malformed++;
        else st.unsupported++;
        continue;
      }
      if (!gso) continue;
      // The first segment is the largest: one longer than the MTU would overrun its neighbour
      // once padded and tagged, and could not cross the tunnel anyway.
      if (list.lens[list.count - n] > this.maxSegment) {
        list.count -= n;
        st.oversize++;
        continue;
      }
      this.used += n;
      st.superPackets++;
      st.segments += n;
    }
    this.flush(buf);
  }

  private outOff(): number {
    return this.batch.scratchOff + this.used * this.stride + this.headroom;
  }

  private flush(buf: Uint8Array): void {
    const list = this.list;
    if (list.count > 0) this.consume(buf, list.offs, list.lens, list.count);
    list.count = 0;
    this.used = 0;
  }
}

/** How many coalescing reservations a receive batch needs: one per 64 KiB of input + one per open flow. */
export function coalesceAreaFor(batchBytes: number, reservation: number, maxFlows: number): number {
  return (Math.ceil(batchBytes / 65535) + maxFlows) * reservation;
}

export class TunCoalescingWriter {
  readonly coalescer: Coalescer;
  private readonly list: PacketList;
  private readonly native: CoalesceBatchFn | null;
  private readonly verdicts: ChecksumVerdictsFn | null = pickChecksumVerdicts();
  /** CSUM_* per input packet of a write (filled by `verdicts`). */
  private readonly csum: Uint8Array;

  /** `capacity`: the most packets one writeBatch call passes (the output never has more entries). */
  constructor(
    private readonly tun: PacketDevice,
    capacity: number,
    readonly maxFlows = 16,
  ) {
    const off = tun.offload;
    if (off === null || !off.tso) throw new Error(`TUN ${tun.name}: coalescing needs a TUN with TSO (offload.tso)`);
    this.coalescer = new Coalescer({ maxFlows, vnetHdrLen: off.vnetHdrLen, udp: off.uso });
    this.native = pickCoalesceBatch({ maxFlows, vnetHdrLen: off.vnetHdrLen, udp: off.uso });
    this.list = new PacketList(capacity);
    this.csum = new Uint8Array(capacity);
  }

  /** Bytes one super-packet reserves in the area (Coalescer.reservation). */
  get reservation(): number {
    return this.coalescer.reservation;
  }

  /**
   * Writes packets i < count (each with ≥ 10 writable bytes before it), coalesced, using
   * buf[areaOff, +areaLen) for the super-packets; without a usable area, written one by one.
   * Returns `count` when the kernel took every write, else how many writes it took.
   */
  write(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    count: number,
    areaOff: number,
    areaLen: number,
  ): number {
    const c = this.coalescer;
    // One packet has nothing to merge with: written as is (what the coalescer would pass through),
    // without touching its flow tables — the common case of a lightly loaded tunnel.
    if (count === 1) {
      c.stats.packets++;
      return this.tun.writeBatch(buf, offs, lens, 1);
    }
    if (areaLen < c.reservation || count > this.list.capacity) return this.tun.writeBatch(buf, offs, lens, count);
    const list = this.list;
    list.count = 0;
    const v = this.verdicts;
    if (this.native !== null) {
      this.native(buf, offs, lens, count, areaOff, areaLen, list, c.stats);
    } else {
      c.begin(buf, areaOff, areaLen, list);
      if (v === null) {
        for (let i = 0; i < count; i++) c.add(offs[i], lens[i]);
      } else {
        const csum = this.csum;
        v(buf, offs, lens, count, csum);
        for (let i = 0; i < count; i++) c.add(offs[i], lens[i], csum[i]);
      }
      c.flush();
    }
    const ok = this.tun.writeVnetBatch(buf, list.offs, list.lens, list.count);
    return ok === list.count ? count : ok;
  }
}
