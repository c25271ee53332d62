/**
 * Coalescing (GRO in software) of TCP and UDP segments into the super-packets a TUN device
 * with IFF_VNET_HDR accepts in one write: the inverse of gso.ts. Within one batch, segments of
 * one flow are merged when they are:
 * - the same flow (IP version, addresses, protocol, ports) and in order (TCP: seq = the next
 *   expected; IPv4: identification = the previous + 1);
 * - the same in everything the super-packet keeps once: IPv4 TOS, TTL, flags, no options, not
 *   a fragment; IPv6 class, flow label, hop limit, no extension headers; TCP header length,
 *   options, ack, window, urgent pointer, flags (only ACK, ECE and PSH allowed; PSH ends it);
 * - equal-sized (gso_size = the first payload), except a shorter last one, which ends it;
 * - no larger together than 65535 bytes of IPv4 total length / IPv6 payload length, and (UDP)
 *   no more than GRO_MAX_UDP_SEGMENTS segments.
 * A super-packet ends on PSH, on a shorter segment, on a gap or any mismatch, when it would
 * pass 64 KiB, and at the end of the batch (flush()). With verifyChecksums (the default) a
 * segment is merged only if its own checksum verifies, because the merged packet goes out with
 * NEEDS_CSUM and the kernel would trust it: end-to-end integrity must not be laundered here.
 *
 * Output (pushed to the caller's PacketList, each entry starting at its virtio_net_hdr, ready
 * for a TUN write): a merged super-packet is built in the caller's area (a copy, by copyWithin
 * in the same buffer) with the header NEEDS_CSUM, gso_type TCPV4/TCPV6/UDP_L4, gso_size,
 * hdr_len, csum_start/offset, and the pseudo-header sum in its transport checksum field, as
 * Linux expects from a device (CHECKSUM_PARTIAL); IPv4 header checksum complete. Anything not
 * merged is passed on in place with an all-zero header written into the hdrLen bytes before
 * it (the caller guarantees that headroom: slots and decrypted packets have it).
 *
 * Ownership and cost: all state is preallocated (maxFlows open flows per batch); the buffer,
 * area and list are the caller's and are only used between begin() and flush(). No
 * allocation per packet. A full output list is API misuse and throws (size it ≥ the packets added).
 */

import { finishChecksum, foldSum, pseudoHeaderSumV4, pseudoHeaderSumV6, writeChecksum } from './checksum.js';
import { sumWordsWide } from './checksum-wide.js';
import {
  IPV4_DST_OFFSET,
  IPV4_FLAGS_FRAGMENT_OFFSET,
  IPV4_ID_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_SRC_OFFSET,
  IPV4_TOS_OFFSET,
  IPV4_TTL_OFFSET,
  IP_PROTO_TCP,
  IP_PROTO_UDP,
  IPV4_FLAG_MF,
  IPV4_FRAGMENT_OFFSET_MASK,
  fillIpv4Checksum,
  ipv4HeaderValid,
  ipv4TotalLength,
  setIpv4TotalLength,
} from './ipv4.js';
import {
  IPV6_DST_OFFSET,
  IPV6_HEADER_LEN,
  IPV6_HOP_LIMIT_OFFSET,
  IPV6_NEXT_HEADER_OFFSET,
  IPV6_SRC_OFFSET,
  ipv6PayloadLength,
  setIpv6PayloadLength,
} from './ipv6.js';
import type { PacketList } from './packet-list.js';
import {
  TCP_CHECKSUM_OFFSET,
  TCP_FLAGS_OFFSET,
  TCP_FLAG_ACK,
  TCP_FLAG_ECE,
  TCP_FLAG_PSH,
  TCP_MIN_HEADER_LEN,
  tcpHeaderLen,
  tcpSeq,
} from './tcp.js';
import { UDP_CHECKSUM_OFFSET, UDP_HEADER_LEN, UDP_LENGTH_OFFSET } from './udp.js';
import {
  VIRTIO_NET_HDR_F_NEEDS_CSUM,
  VIRTIO_NET_HDR_GSO_TCPV4,
  VIRTIO_NET_HDR_GSO_TCPV6,
  VIRTIO_NET_HDR_GSO_UDP_L4,
  VIRTIO_NET_HDR_LEN,
  VIRTIO_NET_HDR_MRG_LEN,
  writeVnetHdr,
  writeVnetHdrNone,
} from './virtio-net-hdr.js';

/** The largest IPv4 super-packet (total length is 16 bits). */
export const GRO_MAX_PACKET_V4 = 65535;
/** The largest IPv6 super-packet (the 16-bit payload length excludes the 40-byte header). */
export const GRO_MAX_PACKET_V6 = 65535 + IPV6_HEADER_LEN;
/** Most UDP segments in one super-packet (Linux UDP_MAX_SEGMENTS: 64, 128 since 6.x; the lower). */
export const GRO_MAX_UDP_SEGMENTS = 64;

export interface CoalescerOptions {
  /** Flows open at once per batch (default 16); a new flow beyond it flushes the oldest. */
  readonly maxFlows?: number;
  /** 10 (default) or 12, as set on the TUN with TUNSETVNETHDRSZ. */
  readonly vnetHdrLen?: number;
  /** Coalesce UDP too (the TUN must have TUN_F_USO4/6). Default false: UDP passes through. */
  readonly udp?: boolean;
  /** Merge only segments whose checksum verifies (default true; see the file comment). */
  readonly verifyChecksums?: boolean;
}

export interface CoalescerStats {
  /** Packets added. */
  packets: number;
  /** Super-packets emitted (2 or more segments each). */
  superPackets: number;
  /** Segments that went into super-packets. */
  mergedSegments: number;
  /** Segments not merged because their checksum did not verify (passed on as they are). */
  badChecksum: number;
  /** A merge refused because the area had no room for another 64 KiB super-packet. */
  areaFull: number;
}

/**
 * What the caller already knows about a packet's TCP/UDP checksum (Coalescer.add): nothing (the
 * Coalescer sums it itself when it needs to), or that it verifies / does not, checked over the
 * same bytes with the transport header right behind a 20-byte IPv4 / 40-byte IPv6 header (what
 * the Coalescer merges), e.g. by a native batch check (io/native-offload.ts).
 */
export const CSUM_UNKNOWN = 0;
export const CSUM_OK = 1;
export const CSUM_BAD = 2;

const TCP_ALLOWED_FLAGS = TCP_FLAG_ACK | TCP_FLAG_ECE | TCP_FLAG_PSH;
const NO_BUFFER = new Uint8Array(0);

export class Coalescer {
  readonly stats: CoalescerStats = { packets: 0, superPackets: 0, mergedSegments: 0, badChecksum: 0, areaFull: 0 };
  private readonly maxFlows: number;
  private readonly vhl: number;
  private readonly udp: boolean;
  private readonly verify: boolean;
  // Per open flow (index < nFlows, in creation order).
  private readonly head: Int32Array; // offset of the first packet (in place)
  private readonly headLen: Int32Array;
  private readonly superOff: Int32Array; // -1 while the flow is a single packet in place
  private readonly reserveEnd: Int32Array;
  private readonly total: Int32Array; // IP length so far
  private readonly l4Rel: Int32Array;
  private readonly hdrLen: Int32Array; // IP + transport headers
  private readonly gsoSize: Int32Array;
  private readonly segs: Int32Array;
  private readonly nextSeq: Uint32Array;
  private readonly lastId: Int32Array;
  private readonly proto: Uint8Array;
  private readonly version: Uint8Array;
  private readonly headCsum: Uint8Array; // the head's CSUM_* verdict from add()
  private nFlows = 0;
  private buf: Uint8Array = NO_BUFFER;
  private out: PacketList<unknown> | null = null;
  private areaNext = 0;
  private areaEnd = 0;

  constructor(opts: CoalescerOptions = {}) {
    const maxFlows = opts.maxFlows ?? 16;
    if (!Number.isInteger(maxFlows) || maxFlows < 1 || maxFlows > 1024)
      throw new RangeError(`maxFlows ${maxFlows} not in 1..1024`);
    const vhl = opts.vnetHdrLen ?? VIRTIO_NET_HDR_LEN;
    if (vhl !== VIRTIO_NET_HDR_LEN && vhl !== VIRTIO_NET_HDR_MRG_LEN)
      throw new RangeError(`vnetHdrLen ${vhl} must be 10 or 12`);
    this.maxFlows = maxFlows;
    this.vhl = vhl;
    this.udp = opts.udp ?? false;
    this.verify = opts.verifyChecksums ?? true;
    this.head = new Int32Array(maxFlows);
    this.headLen = new Int32Array(maxFlows);
    this.superOff = new Int32Array(maxFlows);
    this.reserveEnd = new Int32Array(maxFlows);
    this.total = new Int32Array(maxFlows);
    this.l4Rel = new Int32Array(maxFlows);
    this.hdrLen = new Int32Array(maxFlows);
    this.gsoSize = new Int32Array(maxFlows);
    this.segs = new Int32Array(maxFlows);
    this.nextSeq = new Uint32Array(maxFlows);
    this.lastId = new Int32Array(maxFlows);
    this.proto = new Uint8Array(maxFlows);
    this.version = new Uint8Array(maxFlows);
    this.headCsum = new Uint8Array(maxFlows);
  }

  /** Bytes of area one super-packet reserves while it grows (header + 64 KiB). */
  get reservation(): number {
    return this.vhl + GRO_MAX_PACKET_V6;
  }

  /**
   * Starts a batch over `buf`: super-packets are built in buf[areaOff, areaOff+areaLen) (which
   * must not overlap any input packet; at least one reservation long), results go to `out`.
   */
  begin(buf: Uint8Array, areaOff: number, areaLen: number, out: PacketList<unknown>): void {
    if (this.out !== null) throw new Error('Coalescer.begin: the previous batch was not flushed');
    if (areaOff < 0 || areaLen < this.reservation || areaOff + areaLen > buf.length) {
      throw new RangeError(
        `Coalescer.begin: the area [${areaOff}, +${areaLen}) must lie in the buffer and hold ${this.reservation} bytes`,
      );
    }
    this.buf = buf;
    this.out = out;
    this.areaNext = areaOff;
    this.areaEnd = areaOff + areaLen;
    this.nFlows = 0;
  }

  /**
   * Adds the IP packet buf[off, off+len) (with ≥ vnetHdrLen writable bytes before it). `csum`:
   * what the caller already knows of its checksum (CSUM_*; see there), saving the sum here.
   */
  add(off: number, len: number, csum: number = CSUM_UNKNOWN): void {
    const buf = this.buf;
    if (this.out === null) throw new Error('Coalescer.add before begin');
    if (off < this.vhl || off + len > buf.length)
      throw new RangeError('Coalescer.add: packet outside the buffer or without header room');
    this.stats.packets++;
    // Parse just enough: version, transport offset, protocol, payload.
    let version = 0;
    let l4Rel = 0;
    let proto = 0;
    if (len >= IPV4_MIN_HEADER_LEN && buf[off]! >>> 4 === 4) {
      if (buf[off] !== 0x45 || !ipv4HeaderValid(buf, off, len) || ipv4TotalLength(buf, off) !== len) {
        this.passThrough(off, len);
        return;
      }
      const ff = (buf[off + IPV4_FLAGS_FRAGMENT_OFFSET]! << 8) | buf[off + IPV4_FLAGS_FRAGMENT_OFFSET + 1]!;
      if ((ff & (IPV4_FLAG_MF | IPV4_FRAGMENT_OFFSET_MASK)) !== 0) {
        this.passThrough(off, len);
        return;
      }
      version = 4;
      l4Rel = IPV4_MIN_HEADER_LEN;
      proto = buf[off + 9]!;
    } else if (len >= IPV6_HEADER_LEN && buf[off]! >>> 4 === 6) {
      if (IPV6_HEADER_LEN + ipv6PayloadLength(buf, off) !== len) {
        this.passThrough(off, len);
        return;
      }
      version = 6;
      l4Rel = IPV6_HEADER_LEN;
      proto = buf[off + IPV6_NEXT_HEADER_OFFSET]!;
    } else {
      this.passThrough(off, len);
      return;
    }
    let hdrLen: number;
    const l4 = off + l4Rel;
    if (proto === IP_PROTO_TCP) {
      if (len < l4Rel + TCP_MIN_HEADER_LEN) {
        this.passThrough(off, len);
        return;
      }
      hdrLen = l4Rel + tcpHeaderLen(buf, l4);
      if (hdrLen < l4Rel + TCP_MIN_HEADER_LEN || hdrLen > len) {
        this.passThrough(off, len);
        return;
      }
    } else if (proto === IP_PROTO_UDP && this.udp) {
      if (
        len < l4Rel + UDP_HEADER_LEN ||
        ((buf[l4 + UDP_LENGTH_OFFSET]! << 8) | buf[l4 + UDP_LENGTH_OFFSET + 1]!) !== len - l4Rel
      ) {
        this.passThrough(off, len);
        return;
      }
      hdrLen = l4Rel + UDP_HEADER_LEN;
    } else {
      this.passThrough(off, len);
      return;
    }
    const f = this.findFlow(off, version, proto, l4Rel);
    const payload = len - hdrLen;
    const mergeable = payload > 0 && this.headCandidate(l4, proto);
    if (f >= 0) {
      if (mergeable && this.canMerge(f, off, len, hdrLen)) {
        if (
          !this.verify ||
          (csum !== CSUM_UNKNOWN ? csum === CSUM_OK : this.checksumOk(off, len, l4Rel, proto, version))
        ) {
          if (this.merge(f, off, len, payload)) return;
        } else {
          this.stats.badChecksum++;
          this.flushFlow(f);
          this.passThrough(off, len);
          return;
        }
      }
      this.flushFlow(f);
    }
    if (!mergeable || (proto === IP_PROTO_TCP && (buf[l4 + TCP_FLAGS_OFFSET]! & TCP_FLAG_PSH) !== 0)) {
      this.passThrough(off, len);
      return;
    }
    this.openFlow(off, len, version, proto, l4Rel, hdrLen, payload, csum);
  }

  /** Ends the batch: every open flow is emitted. The buffer and list are released. */
  flush(): void {
    while (this.nFlows > 0) this.flushFlow(0);
    this.out = null;
    this.buf = NO_BUFFER;
  }

  // --- internals -----------------------------------------------------------------------------

  private passThrough(off: number, len: number): void {
    writeVnetHdrNone(this.buf, off - this.vhl, this.vhl);
    this.out!.push(off - this.vhl, len + this.vhl);
  }

  /** A packet may start or extend a super-packet: TCP with only ACK/ECE/PSH (ACK set); UDP with a checksum. */
  private headCandidate(l4: number, proto: number): boolean {
    const buf = this.buf;
    if (proto === IP_PROTO_TCP) {
      const fl = buf[l4 + TCP_FLAGS_OFFSET]!;
      return (fl & ~TCP_ALLOWED_FLAGS) === 0 && (fl & TCP_FLAG_ACK) !== 0;
    }
    // UDP: a zero checksum ("none", IPv4 only) would come out computed; keep such packets exact.
    return (buf[l4 + UDP_CHECKSUM_OFFSET]! | buf[l4 + UDP_CHECKSUM_OFFSET + 1]!) !== 0;
  }

  /** The reference copy of flow f's headers: the super-packet once built, else the head in place. */
  private ref(f: number): number {
    return this.superOff[f]! >= 0 ? this.superOff[f]! : this.head[f]!;
  }

  private findFlow(off: number, version: number, proto: number, l4Rel: number): number {
    const buf = this.buf;
    const addrOff = version === 4 ? IPV4_SRC_OFFSET : IPV6_SRC_OFFSET;
    const addrLen = version === 4 ? 8 : 32;
    for (let f = 0; f < this.nFlows; f++) {
      if (this.version[f] !== version || this.proto[f] !== proto) continue;
      const r = this.ref(f);
      let same = true;
      for (let i = 0; i < addrLen && same; i++) same = buf[r + addrOff + i] === buf[off + addrOff + i];
      // Ports: the first 4 transport bytes (TCP and UDP alike).
      for (let i = 0; i < 4 && same; i++) same = buf[r + l4Rel + i] === buf[off + l4Rel + i];
      if (same) return f;
    }
    return -1;
  }

  private canMerge(f: number, off: number, len: number, hdrLen: number): boolean {
    const buf = this.buf;
    const r = this.ref(f);
    if (hdrLen !== this.hdrLen[f]) return false;
    const payload = len - hdrLen;
    // A UDP super-packet of more segments than the kernel's UDP_MAX_SEGMENTS is refused by the
    // TUN write (EINVAL, the whole super-packet lost): 64, the limit of every kernel with USO.
    if (this.proto[f] === IP_PROTO_UDP && this.segs[f]! >= GRO_MAX_UDP_SEGMENTS) return false;
    if (
      payload > this.gsoSize[f]! ||
      this.total[f]! + payload > (this.version[f] === 4 ? GRO_MAX_PACKET_V4 : GRO_MAX_PACKET_V6)
    )
      return false;
    if (this.version[f] === 4) {
      if (
        buf[off + IPV4_TOS_OFFSET] !== buf[r + IPV4_TOS_OFFSET] ||
        buf[off + IPV4_TTL_OFFSET] !== buf[r + IPV4_TTL_OFFSET]
      )
        return false;
      if (buf[off + IPV4_FLAGS_FRAGMENT_OFFSET] !== buf[r + IPV4_FLAGS_FRAGMENT_OFFSET]) return false;
      const id = (buf[off + IPV4_ID_OFFSET]! << 8) | buf[off + IPV4_ID_OFFSET + 1]!;
      if (id !== ((this.lastId[f]! + 1) & 0xffff)) return false;
    } else {
      for (let i = 0; i < 4; i++) if (buf[off + i] !== buf[r + i]) return false;
      if (buf[off + IPV6_HOP_LIMIT_OFFSET] !== buf[r + IPV6_HOP_LIMIT_OFFSET]) return false;
    }
    const l4Rel = this.l4Rel[f]!;
    if (this.proto[f] === IP_PROTO_TCP) {
      const c = off + l4Rel;
      const h = r + l4Rel;
      if (tcpSeq(buf, c) !== this.nextSeq[f]) return false;
      if ((buf[c + TCP_FLAGS_OFFSET]! & ~TCP_FLAG_PSH) !== buf[h + TCP_FLAGS_OFFSET]) return false;
      // ack (8..11), data offset (12), window (14..15), urgent (18..19), options (20..).
      for (let i = 8; i < 13; i++) if (buf[c + i] !== buf[h + i]) return false;
      if (
        buf[c + 14] !== buf[h + 14] ||
        buf[c + 15] !== buf[h + 15] ||
        buf[c + 18] !== buf[h + 18] ||
        buf[c + 19] !== buf[h + 19]
      )
        return false;
      for (let i = l4Rel + TCP_MIN_HEADER_LEN; i < hdrLen; i++) if (buf[off + i] !== buf[r + i]) return false;
    }
    return true;
  }

  private checksumOk(off: number, len: number, l4Rel: number, proto: number, version: number): boolean {
    const buf = this.buf;
    const l4Len = len - l4Rel;
    const pseudo =
      version === 4
        ? pseudoHeaderSumV4(buf, off + IPV4_SRC_OFFSET, off + IPV4_DST_OFFSET, proto, l4Len)
        : pseudoHeaderSumV6(buf, off + IPV6_SRC_OFFSET, off + IPV6_DST_OFFSET, proto, l4Len);
    return finishChecksum(sumWordsWide(buf, off + l4Rel, l4Len, pseudo)) === 0;
  }

  private openFlow(
    off: number,
    len: number,
    version: number,
    proto: number,
    l4Rel: number,
    hdrLen: number,
    payload: number,
    csum: number,
  ): void {
    if (this.nFlows === this.maxFlows) this.flushFlow(0);
    const f = this.nFlows++;
    const buf = this.buf;
    this.head[f] = off;
    this.headLen[f] = len;
    this.superOff[f] = -1;
    this.total[f] = len;
    this.l4Rel[f] = l4Rel;
    this.hdrLen[f] = hdrLen;
    this.gsoSize[f] = payload;
    this.segs[f] = 1;
    this.proto[f] = proto;
    this.version[f] = version;
    this.headCsum[f] = csum;
    this.nextSeq[f] = proto === IP_PROTO_TCP ? (tcpSeq(buf, off + l4Rel) + payload) >>> 0 : 0;
    this.lastId[f] = version === 4 ? (buf[off + IPV4_ID_OFFSET]! << 8) | buf[off + IPV4_ID_OFFSET + 1]! : 0;
  }

  /** Appends the candidate's payload to flow f; false when there is no area to build in (nothing changed). */
  private merge(f: number, off: number, len: number, payload: number): boolean {
    const buf = this.buf;
    const hdrLen = this.hdrLen[f]!;
    if (this.superOff[f]! < 0) {
      const head = this.head[f]!;
      const hc = this.headCsum[f]!;
      if (
        this.verify &&
        (hc !== CSUM_UNKNOWN
          ? hc !== CSUM_OK
          : !this.checksumOk(head, this.headLen[f]!, this.l4Rel[f]!, this.proto[f]!, this.version[f]!))
      ) {
        this.stats.badChecksum++;
        return false;
      }
      // Reserve the worst case; the unused tail is returned when it is flushed, if still last.
      const start = this.areaNext + this.vhl;
      const end = start + GRO_MAX_PACKET_V6;
      if (end > this.areaEnd) {
        this.stats.areaFull++;
        return false;
      }
      this.areaNext = end;
      this.reserveEnd[f] = end;
      this.superOff[f] = start;
      buf.copyWithin(start, head, head + this.headLen[f]!);
    }
    const s = this.superOff[f]!;
    buf.copyWithin(s + this.total[f]!, off + hdrLen, off + len);
    this.total[f] += payload;
    this.segs[f]++;
    this.nextSeq[f] = (this.nextSeq[f]! + payload) >>> 0;
    if (this.version[f] === 4) this.lastId[f] = (buf[off + IPV4_ID_OFFSET]! << 8) | buf[off + IPV4_ID_OFFSET + 1]!;
    const l4 = off + this.l4Rel[f]!;
    const psh = this.proto[f] === IP_PROTO_TCP && (buf[l4 + TCP_FLAGS_OFFSET]! & TCP_FLAG_PSH) !== 0;
    if (psh) buf[s + this.l4Rel[f]! + TCP_FLAGS_OFFSET] |= TCP_FLAG_PSH;
    if (psh || payload < this.gsoSize[f]!) this.flushFlow(f);
    return true;
  }

  /** Emits flow f and removes it (later flows move down one place, keeping creation order). */
  private flushFlow(f: number): void {
    const buf = this.buf;
    const s = this.superOff[f]!;
    if (s < 0) {
      this.passThrough(this.head[f]!, this.headLen[f]!);
    } else {
      const total = this.total[f]!;
      const l4Rel = this.l4Rel[f]!;
      const l4Len = total - l4Rel;
      const version = this.version[f]!;
      const proto = this.proto[f]!;
      let pseudo: number;
      if (version === 4) {
        setIpv4TotalLength(buf, s, total);
        fillIpv4Checksum(buf, s);
        pseudo = pseudoHeaderSumV4(buf, s + IPV4_SRC_OFFSET, s + IPV4_DST_OFFSET, proto, l4Len);
      } else {
        setIpv6PayloadLength(buf, s, total - IPV6_HEADER_LEN);
        pseudo = pseudoHeaderSumV6(buf, s + IPV6_SRC_OFFSET, s + IPV6_DST_OFFSET, proto, l4Len);
      }
      const csumOffset = proto === IP_PROTO_TCP ? TCP_CHECKSUM_OFFSET : UDP_CHECKSUM_OFFSET;
      if (proto === IP_PROTO_UDP) {
        buf[s + l4Rel + UDP_LENGTH_OFFSET] = l4Len >>> 8;
        buf[s + l4Rel + UDP_LENGTH_OFFSET + 1] = l4Len & 0xff;
      }
      // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum, not complemented.
      writeChecksum(buf, s + l4Rel + csumOffset, foldSum(pseudo));
      const gsoType =
        proto === IP_PROTO_UDP
          ? VIRTIO_NET_HDR_GSO_UDP_L4
          : version === 4
            ? VIRTIO_NET_HDR_GSO_TCPV4
            : VIRTIO_NET_HDR_GSO_TCPV6;
      writeVnetHdr(
        buf,
        s - this.vhl,
        this.vhl,
        VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gsoType,
        this.hdrLen[f]!,
        this.gsoSize[f]!,
        l4Rel,
        csumOffset,
      );
      this.out!.push(s - this.vhl, total + this.vhl);
      this.stats.superPackets++;
      this.stats.mergedSegments += this.segs[f]!;
      // Give back the unused reservation when it is the last one taken.
      if (this.reserveEnd[f] === this.areaNext) this.areaNext = s + total;
    }
    const n = this.nFlows - 1;
    for (let i = f; i < n; i++) {
      this.head[i] = this.head[i + 1]!;
      this.headLen[i] = this.headLen[i + 1]!;
      this.superOff[i] = this.superOff[i + 1]!;
      this.reserveEnd[i] = this.reserveEnd[i + 1]!;
      this.total[i] = this.total[i + 1]!;
      this.l4Rel[i] = this.l4Rel[i + 1]!;
      this.hdrLen[i] = this.hdrLen[i + 1]!;
      this.gsoSize[i] = this.gsoSize[i + 1]!;
      this.segs[i] = this.segs[i + 1]!;
      this.nextSeq[i] = this.nextSeq[i + 1]!;
      this.lastId[i] = this.lastId[i + 1]!;
      this.proto[i] = this.proto[i + 1]!;
      this.version[i] = this.version[i + 1]!;
      this.headCsum[i] = this.headCsum[i + 1]!;
    }
    this.nFlows = n;
  }
}
