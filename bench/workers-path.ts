/**
 * The worker side of bench/workers.ts's "path" mode: the pipeline a weft-wg worker runs
 * between its TUN queue and its UDP socket (wg-worker.ts), without the kernel. Per worker,
 * a WireGuardPort over a ShardEngine of the measured device A encrypts batches of 64 inner
 * packets (allowed-IPs lookup, shared send counter, seal, destination records, sendBatch);
 * a loopback socket hands the datagrams, copied as recvmmsg would, to a second WireGuardPort
 * over a ShardEngine of this worker's peer B (receive batch, shared replay window, open,
 * inner source check), whose sink counts what it is given. The copies the kernel makes on a
 * real path (TUN read, socket send and receive, TUN write) are one inner fill and one datagram
 * copy here.
 */
import type { PacketBatch } from '../src/io/batch.js';
import { zeroDatagramStats, type DatagramSocket } from '../src/io/datagram.js';
import { MAX_PACKET } from '../src/io/sizes.js';
import { encodeAddress } from '../src/io/udp.js';
import { ADDR_RECORD_LEN } from '../src/io/native.js';
import { WireGuardPort } from '../src/pipelines/wireguard-port.js';
import type { Endpoint } from '../src/wireguard/peer.js';
import type { ShardEngine } from '../src/wireguard/shard.js';
import type { ShardPeer } from '../src/wireguard/shard-peer.js';

/**
 * A DatagramSocket whose sendBatch delivers into its twin's receive batch at once (one
 * callback per batch, as one recvmmsg), every datagram from `from`.
 */
class LoopSocket implements DatagramSocket {
  readonly family = 4 as const;
  readonly offload = { gso: false, gro: false };
  readonly canScatter = false;
  readonly gsoMessages = 0;
  readonly stats = zeroDatagramStats();
  twin: LoopSocket | null = null;
  private batch: PacketBatch | null = null;
  private batchBuf: Buffer | null = null;
  private cb: ((b: PacketBatch) => void) | null = null;

  constructor(
    readonly port: number,
    private readonly from: Endpoint,
  ) {}

  onBatch(batch: PacketBatch, cb: (b: PacketBatch) => void): void {
    this.batch = batch;
    this.batchBuf = Buffer.from(batch.buf.buffer, batch.buf.byteOffset, batch.buf.byteLength);
    this.cb = cb;
    const rec = new Uint8Array(ADDR_RECORD_LEN);
    encodeAddress(this.from.address, this.from.port, rec, 0);
    for (let i = 0; i < batch.capacity; i++) batch.addrs.set(rec, i * ADDR_RECORD_LEN);
  }

  addressOf(): string {
    return this.from.address;
  }

  portOf(): number {
    return this.from.port;
  }

  send(): boolean {
    throw new Error('the bench sends only transport batches');
  }

  sendTo(): boolean {
    throw new Error('the bench sends only transport batches');
  }

  private src: Buffer | null = null;
  private srcOf: Uint8Array | null = null;

  sendBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    _addrs: Uint8Array,
    _idx: Uint32Array | null,
    count: number,
  ): number {
    const t = this.twin!;
    const b = t.batch!;
    if (this.srcOf !== buf) {
      this.srcOf = buf;
      this.src = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    }
    const src = this.src!;
    const dst = t.batchBuf!;
    let n = 0;
    for (let i = 0; i < count; i++) {
      if (n === b.capacity) {
        b.filled(n);
        t.cb!(b);
        n = 0;
      }
      src.copy(dst, b.offs[n], offs[i], offs[i] + lens[i]);
      b.lens[n] = lens[i];
      n++;
    }
    if (n > 0) {
      b.filled(n);
      t.cb!(b);
    }
    this.stats.txPackets += count;
    return count;
  }

  bufferSizes() {
    return { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }

  setMark(): void {}

  async close(): Promise<void> {}
}

export interface PathLoop {
  /** Encrypts, sends, receives and delivers one batch; returns the packets delivered. */
  batch(): number;
  /** Why packets went missing (engine drops by reason, port counters), for the error report. */
  losses(): string;
}

/**
 * Wires A's and B's engines of this worker into two ports over a loopback pair; inner packets
 * of `size` bytes from 10.1.0.1 to `dst` (B's allowed IPs on A).
 */
export async function pathLoop(
  ea: ShardEngine,
  eb: ShardEngine,
  epA: Endpoint,
  epB: Endpoint,
  size: number,
  dst: readonly number[],
  batch: number,
): Promise<PathLoop> {
  const sa = new LoopSocket(epA.port, epB);
  const sb = new LoopSocket(epB.port, epA);
  sa.twin = sb;
  sb.twin = sa;
  let delivered = 0;
  const sink = {
    writeBatch: (_b: Uint8Array, _o: Uint32Array, _l: Uint32Array, _p: readonly ShardPeer[], n: number): number => {
      delivered += n;
      return n;
    },
  };
  const noSink = { writeBatch: () => 0 };
  const pa = new WireGuardPort<ShardPeer>({ device: ea, mtu: MAX_PACKET, sink: noSink, openUdp: async () => sa });
  const pb = new WireGuardPort<ShardPeer>({ device: eb, mtu: MAX_PACKET, sink, openUdp: async () => sb });
  await pa.bind(epA.port);
  await pb.bind(epB.port);
  // Inner batch as a TUN read leaves it: 16 bytes of headroom, tailroom for padding and tag.
  const slot = 16 + size + 48;
  const buf = new Uint8Array(slot * batch);
  const offs = new Uint32Array(batch);
  const lens = new Uint32Array(batch).fill(size);
  const hdr = udpHeader(size, [10, 1, 0, 1], dst);
  for (let i = 0; i < batch; i++) offs[i] = i * slot + 16;
  return {
    batch(): number {
      for (let i = 0; i < batch; i++) {
        const off = i * slot + 16;
        buf.fill(0, off + 20, off + size);
        buf.set(hdr, off);
      }
      delivered = 0;
      pa.encryptBatch(buf, offs, lens, batch);
      return delivered;
    },
    losses(): string {
      const d = (e: ShardEngine): string =>
        [...e.drops]
          .map((v, i) => (v > 0 ? `${i}:${v}` : ''))
          .filter((x) => x !== '')
          .join(',');
      return `A drops [${d(ea)}] handoffs ${ea.handoffs}, B drops [${d(eb)}] handoffs ${eb.handoffs}, A port ${JSON.stringify(pa.stats)}, B port ${JSON.stringify(pb.stats)}`;
    },
  };
}

/** The 20-byte IPv4 header of a UDP packet of `size` bytes from `src` to `dst` (checksum left 0). */
export function udpHeader(size: number, src: readonly number[], dst: readonly number[]): Uint8Array {
  const hdr = new Uint8Array(20);
  hdr[0] = 0x45;
  hdr[2] = size >> 8;
  hdr[3] = size & 0xff;
  hdr[8] = 64;
  hdr[9] = 17;
  hdr.set(src, 12);
  hdr.set(dst, 16);
  return hdr;
}
