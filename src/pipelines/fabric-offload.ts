/**
 * The TUN side of a fabric end (node agent, gateway), with or without offloads:
 * - startTunReader: plain batches of IP packets, or (TUN with a vnet header) super-packets cut
 *   by a TunSegmenter into inner-MTU segments laid out with the caller's headroom/tailroom;
 *   either way the consumer gets one call per batch (or per 256 segments).
 * - FabricTunWriter: coalesces what a batch delivers (TCP/UDP segments per flow → super-packets,
 *   one writev batch) when the TUN has TSO and the caller passes a scratch area; else writeBatch.
 * Plus the offloads in effect and the counters of both, for stats and `weft show`.
 * Ownership as in tun-offload.ts: buffers are the caller's and only used during a call.
 */
import { PacketBatch } from '../io/batch.js';
import type { PacketDevice } from '../io/device.js';
import { TUN_OFFLOAD_MAX_PACKET } from '../io/tun.js';
import type { GenevePort } from './geneve-port.js';
import { segmenterScratch, TunCoalescingWriter, TunSegmenter, type SegmentConsumer } from './tun-offload.js';

/** Segments of super-packets handed on per round (the TUN batch's scratch). */
export const SEGMENTS_PER_FLUSH = 256;
/** TUN reads per wake-up with offload on (each slot holds up to 64 KiB: 4 MiB; as many as without offload, for small packets). */
const OFFLOAD_TUN_BATCH = 64;

export interface TunReaderOptions {
  /** The TUN MTU: the largest segment. */
  readonly mtu: number;
  /** Bytes free before / after every packet handed on (for headers written in place). */
  readonly headroom: number;
  readonly tailroom: number;
  /** Packets per read without offload. */
  readonly batchSize: number;
}

/** The most packets one consumer call gets from startTunReader. */
export function tunReaderMaxCount(batchSize: number): number {
  return Math.max(batchSize, SEGMENTS_PER_FLUSH + OFFLOAD_TUN_BATCH);
}

/** Starts reading `tun` into `consume` (see the file comment); returns the segmenter (null without a vnet header). */
export function startTunReader(tun: PacketDevice, o: TunReaderOptions, consume: SegmentConsumer): TunSegmenter | null {
  const off = tun.offload;
  if (off === null) {
    const batch = new PacketBatch({
      capacity: o.batchSize,
      headroom: o.headroom,
      maxLen: Math.max(o.mtu, 1500),
      tailroom: o.tailroom,
    });
    tun.start(batch, (b) => consume(b.buf, b.offs, b.lens, b.count));
    return null;
  }
  // Reads carry a virtio_net_hdr (in the headroom): segment, then hand the segments on.
  const batch = new PacketBatch({
    capacity: OFFLOAD_TUN_BATCH,
    headroom: o.headroom,
    maxLen: off.tso || off.uso ? TUN_OFFLOAD_MAX_PACKET : Math.max(o.mtu, 1500),
    tailroom: o.tailroom,
    scratch: segmenterScratch(o.mtu, o.headroom, o.tailroom, SEGMENTS_PER_FLUSH),
  });
  const seg = new TunSegmenter(batch, off.vnetHdrLen, o.mtu, o.headroom, o.tailroom, consume);
  tun.start(batch, (b) => seg.process(b));
  return seg;
}

/** Writes inner packets to the TUN, coalesced when it can (see the file comment). */
export class FabricTunWriter {
  readonly coalescer: TunCoalescingWriter | null;

  /** `capacity`: the most packets one write passes. */
  constructor(
    private readonly tun: PacketDevice,
    capacity: number,
  ) {
    const off = tun.offload;
    this.coalescer = off !== null && off.tso ? new TunCoalescingWriter(tun, capacity) : null;
  }

  /** Bytes per super-packet the receive batches' areas must reserve (0: no coalescing). */
  get reservation(): number {
    return this.coalescer?.reservation ?? 0;
  }

  get maxFlows(): number {
    return this.coalescer?.maxFlows ?? 16;
  }

  /** Writes packets i < count; buf[areaOff, +areaLen) is scratch for super-packets (0: none). */
  write(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    count: number,
    areaOff: number,
    areaLen: number,
  ): number {
    const c = this.coalescer;
    return c === null || areaLen === 0
      ? this.tun.writeBatch(buf, offs, lens, count)
      : c.write(buf, offs, lens, count, areaOff, areaLen);
  }
}

/** Which offloads are in effect (false: not asked for, or refused by the kernel). */
export interface FabricOffloads {
  /** TUN: virtio_net_hdr with checksum offload, TSO (TCP super-packets), USO (UDP). */
  readonly tun: { readonly csum: boolean; readonly tso: boolean; readonly uso: boolean };
  /** The Geneve UDP socket: segmentation on send, coalescing on receive. */
  readonly geneve: { readonly gso: boolean; readonly gro: boolean };
}

/** TUN → tunnel: super-packets cut, segments made, drops (all reasons). */
export interface SegmenterCounts {
  superPackets: number;
  segments: number;
  drops: number;
}
/** Tunnel → TUN: packets offered, super-packets written, segments merged into them, not merged for a bad checksum. */
export interface CoalescerCounts {
  packets: number;
  superPackets: number;
  mergedSegments: number;
  badChecksum: number;
}

/** What a TUN and a Geneve port have in effect. */
export function fabricOffloads(tun: PacketDevice, geneve: GenevePort): FabricOffloads {
  const t = tun.offload;
  const u = geneve.udpOffload();
  return {
    tun: { csum: t?.csum ?? false, tso: t?.tso ?? false, uso: t?.uso ?? false },
    geneve: { gso: u?.gso ?? false, gro: u?.gro ?? false },
  };
}

export function segmenterStats(s: TunSegmenter | null): SegmenterCounts {
  if (s === null) return { superPackets: 0, segments: 0, drops: 0 };
  const x = s.stats;
  return {
    superPackets: x.superPackets,
    segments: x.segments,
    drops: x.malformed + x.unsupported + x.oversize + x.noRoom,
  };
}

export function coalescerStats(c: TunCoalescingWriter | null): CoalescerCounts {
  if (c === null) return { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0 };
  const x = c.coalescer.stats;
  return {
    packets: x.packets,
    superPackets: x.superPackets,
    mergedSegments: x.mergedSegments,
    badChecksum: x.badChecksum,
  };
}
