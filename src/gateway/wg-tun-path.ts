/**
 * The TUN side of weft-wg's data path, shared by the single-threaded daemon and each worker
 * thread (one TUN queue each):
 *   TUN batch → (with a vnet header: TunSegmenter cuts super-packets into MTU-sized segments
 *   with WireGuard headroom/tailroom) → encrypt callback (WireGuardPort.encryptBatch)
 *   decrypted batch → (with TSO: TunCoalescingWriter joins segments per flow) → TUN writev
 */
import { PacketBatch } from '../io/batch.js';
import type { PacketDevice } from '../io/device.js';
import { MAX_PACKET } from '../io/sizes.js';
import { TUN_OFFLOAD_MAX_PACKET } from '../io/tun.js';
import { segmenterScratch, TunCoalescingWriter, TunSegmenter } from '../pipelines/tun-offload.js';
import type { InnerSink } from '../pipelines/wireguard-port-types.js';
import { TRANSPORT_HEADER_SIZE } from '../wireguard/messages.js';

/**
 * Segments of super-packets handled per encrypt-and-send round (the TUN batch's scratch): about
 * one 64 KiB super-packet, so a small packet read behind bulk data waits for one round, not four
 * (256 before; ping p90 under TCP load 6.1 -> 4.4 ms, TCP 1.39 -> 1.57 Gbit/s in one noisy run,
 * bench/history/2026.md). 64 is the least TunSegmenter accepts.
 */
const SEGMENTS_PER_FLUSH = 64;
/** TUN reads per wake-up with offload on (each slot holds up to 64 KiB). */
const OFFLOAD_TUN_BATCH = 16;
/** Tailroom after a segment: WireGuard padding (≤ 15) + the 16-byte tag, rounded. */
const WG_TAILROOM = 32;

/**
 * Receive batches of at most this many packets are followed by an immediate TUN read (see
 * tunSink): an empty read costs one syscall, so only where the tunnel is lightly loaded.
 */
const REPLY_POLL_MAX_PACKETS = 4;

/** The coalescing writer for a TUN with TSO (null otherwise). */
export function coalescerFor(tun: PacketDevice): TunCoalescingWriter | null {
  const off = tun.offload;
  return off !== null && off.tso ? new TunCoalescingWriter(tun, 64 * 64) : null;
}

/** Where a WireGuardPort delivers decrypted packets: the TUN (through `co` when set). */
export function tunSink<P>(tun: PacketDevice, co: TunCoalescingWriter | null): InnerSink<P> {
  // Back-off of the reply read: after k empty reads in a row, the next 2^k - 1 light batches
  // skip it (k ≤ 10), so a receiver whose stack never answers at once (a UDP sink, a forwarded
  // flow) pays one empty read per 1024 batches at most.
  let replyMisses = 0;
  let replySkip = 0;
  return {
    writeBatch: (buf, offs, lens, _peers, n, areaOff, areaLen) => {
      const took = co === null ? tun.writeBatch(buf, offs, lens, n) : co.write(buf, offs, lens, n, areaOff, areaLen);
      // A reply the local stack makes within the write (ping, a TCP ACK) is already queued on
      // the TUN: read it now rather than after another epoll round trip. Only for light
      // batches, where that round trip is most of the latency; under load the next readiness
      // callback picks the replies up with the rest.
      if (n <= REPLY_POLL_MAX_PACKETS) {
        if (replySkip > 0) replySkip--;
        else if (tun.pollNow() > 0) replyMisses = 0;
        else {
          if (replyMisses < 10) replyMisses++;
          replySkip = (1 << replyMisses) - 1;
        }
      }
      return took;
    },
  };
}

/** Where the TUN reader hands its packets (a WireGuardPort). */
export interface TunEncryptor {
  encryptBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void;
}

/**
 * Starts reading the TUN into `port.encryptBatch` (packets with 16 bytes of headroom and 32 of
 * tailroom). Returns the segmenter when reads carry a virtio_net_hdr, else null.
 * The callback is made here, for every caller alike: V8 keeps type feedback and optimized code
 * per place a closure is created, so the daemon's reader runs the code its start-up warm-up
 * (wg-io-warmup.ts) compiled instead of compiling its own while the first packets wait.
 */
export function startTunReader(tun: PacketDevice, mtu: number, port: TunEncryptor): TunSegmenter | null {
  const encrypt = (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void =>
    port.encryptBatch(buf, offs, lens, n);
  const tunOff = tun.offload;
  if (tunOff === null) {
    const batch = new PacketBatch({
      capacity: 64,
      headroom: TRANSPORT_HEADER_SIZE,
      maxLen: MAX_PACKET,
      tailroom: WG_TAILROOM,
    });
    tun.start(batch, (b) => encrypt(b.buf, b.offs, b.lens, b.count));
    return null;
  }
  // Reads carry a virtio_net_hdr (in the headroom): segment, then encrypt each segment.
  const batch = new PacketBatch({
    capacity: OFFLOAD_TUN_BATCH,
    headroom: TRANSPORT_HEADER_SIZE,
    maxLen: tunOff.tso || tunOff.uso ? TUN_OFFLOAD_MAX_PACKET : MAX_PACKET,
    tailroom: WG_TAILROOM,
    scratch: segmenterScratch(mtu, TRANSPORT_HEADER_SIZE, WG_TAILROOM, SEGMENTS_PER_FLUSH),
  });
  const seg = new TunSegmenter(batch, tunOff.vnetHdrLen, mtu, TRANSPORT_HEADER_SIZE, WG_TAILROOM, encrypt);
  tun.start(batch, (b) => seg.process(b));
  return seg;
}
