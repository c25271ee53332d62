/**
 * UDP sockets for the WireGuard (51840/51820) and Geneve (6091) data paths, one per family.
 *
 * Mechanisms (chosen by measurement, see bench/RESULTS-io.md):
 * - 'native' (addon): the socket is created by the addon (non-blocking, IPv6 sockets V6ONLY);
 *   readiness comes through Node's event loop (uv_poll_t) and one addon call drains up to the
 *   batch capacity with recvmmsg into the caller's PacketBatch; sends use sendmmsg. No
 *   allocation per datagram in either direction.
 * - 'dgram' (fallback, node:dgram): one 'message' event and one Buffer per datagram, copied
 *   into the PacketBatch and delivered as a batch of one; sends copy the bytes (node:dgram
 *   keeps the buffer until the asynchronous send completes and the caller reuses its arena).
 *
 * Addresses: a 24-byte record per datagram (native.ts ADDR_*); IPv6 addresses are plain text
 * without brackets when converted to strings. `addressOf(batch, i)` interns strings, so a
 * steady peer costs no allocation per packet.
 *
 * Offloads (opt-in, native path only): `gso: true` makes sendBatch send each run of
 * equal-sized datagrams to one destination as one UDP_SEGMENT message (≤ 64 datagrams, one
 * syscall entry; an EIO from a device that cannot segment turns it off for good, counted in
 * stats.gsoFallbacks). `gro: true` sets UDP_GRO: one slot may then hold a run of datagrams of
 * batch.segs[i] bytes each, so the batch needs withSegments and slots of UDP_GRO_MAX_LEN.
 * `offload` says what the kernel accepted.
 *
 * Bounded queues: the kernel socket buffers (requested with SO_RCVBUF/SO_SNDBUF, or the FORCE
 * variants when CAP_NET_ADMIN allows exceeding net.core.rmem_max/wmem_max) and, on the dgram
 * path, at most `maxInFlightSends` pending sends. A datagram that cannot be queued is dropped
 * and counted (stats.txDropped); a truncated datagram is dropped and counted (stats.rxTruncated). *
 * The native receive drain is udp-native-recv.ts's; reading address records back (port, family,
 * interned text) is udp-address.ts's.
 */
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import { PacketBatch } from './batch.js';
import {
  loadNativeIo,
  ADDR_RECORD_LEN,
  ADDR_FAMILY_OFFSET,
  ADDR_PORT_OFFSET,
  ADDR_IP_OFFSET,
  ADDR_SCOPE_OFFSET,
  type NativeIo,
} from './native.js';
import { parseAddress } from '../packet/addr.js';
import { AddressInterner, recordPort } from './udp-address.js';
import { NativeUdpReceiver } from './udp-native-recv.js';
import {
  zeroDatagramStats,
  type DatagramBufferSizes,
  type DatagramOffloads,
  type DatagramSocket,
  type DatagramStats,
} from './datagram.js';

export type UdpMechanism = 'native' | 'dgram';

/** A slot that can hold whatever UDP GRO coalesces (one IP packet's worth of UDP payload). */
export const UDP_GRO_MAX_LEN = 65535;
/** Linux's limit of datagrams per UDP_SEGMENT send (UDP_MAX_SEGMENTS in older kernels). */
export const UDP_GSO_MAX_SEGMENTS = 64;

/** Default socket buffer request: 8 MiB (drops at the receive buffer dominate under load). */
export const DEFAULT_UDP_BUFFER_BYTES = 8 << 20;

export interface UdpOptions {
  readonly family: 4 | 6;
  /** Local address (no brackets); default any. */
  readonly address?: string;
  /** Local port; 0 = ephemeral. */
  readonly port: number;
  readonly rcvbuf?: number;
  readonly sndbuf?: number;
  /** Default 'native' when the addon loads, else 'dgram'. */
  readonly mechanism?: UdpMechanism;
  /** dgram path: most sends awaiting completion before new ones are dropped. Default 4096. */
  readonly maxInFlightSends?: number;
  /** Try UDP GSO for sendBatch (native path; see `offload`). Default false. */
  readonly gso?: boolean;
  /** Try UDP GRO on receive (native path; see `offload`). Default false. */
  readonly gro?: boolean;
  /**
   * SO_REUSEPORT (native path): sockets of this process bound to the same port share it, the
   * kernel choosing one per datagram by a hash of its 4-tuple (one sender stays on one socket).
   */
  readonly reusePort?: boolean;
}

/** Which UDP offloads are in effect on a socket. */
export type UdpOffloadState = DatagramOffloads;

export class UdpError extends Error {
  override readonly name = 'UdpError';
  constructor(
    message: string,
    readonly errno = 0,
  ) {
    super(message);
  }
}

export type UdpBufferSizes = DatagramBufferSizes;

export type UdpStats = DatagramStats;

const ERRNO_NAMES: Record<number, string> = {
  1: 'EPERM',
  13: 'EACCES',
  97: 'EAFNOSUPPORT',
  98: 'EADDRINUSE',
  99: 'EADDRNOTAVAIL',
};

/**
 * Writes the address record for `address`/`port` at rec[off..off+24). `address` is an IPv4 or
 * IPv6 literal without brackets, optionally with a numeric `%scope`. Allocates (parsing): cache
 * the record per peer on hot paths.
 */
export function encodeAddress(address: string, port: number, rec: Uint8Array, off = 0): void {
  if (!Number.isInteger(port) || port < 0 || port > 0xffff) throw new RangeError(`port ${port} not in 0..65535`);
  let scope = 0;
  let text = address;
  const pct = address.indexOf('%');
  if (pct >= 0) {
    scope = Number(address.slice(pct + 1));
    if (!Number.isInteger(scope) || scope < 0)
      throw new TypeError(`only numeric IPv6 scopes are supported: ${address}`);
    text = address.slice(0, pct);
  }
  const bytes = parseAddress(text);
  rec.fill(0, off, off + ADDR_RECORD_LEN);
  rec[off + ADDR_FAMILY_OFFSET] = bytes.length === 4 ? 4 : 6;
  rec[off + ADDR_PORT_OFFSET] = port >> 8;
  rec[off + ADDR_PORT_OFFSET + 1] = port & 0xff;
  rec.set(bytes, off + ADDR_IP_OFFSET);
  new DataView(rec.buffer, rec.byteOffset).setUint32(off + ADDR_SCOPE_OFFSET, scope, true);
}

export class UdpSocket implements DatagramSocket {
  readonly stats: UdpStats = zeroDatagramStats();
  /** Offloads in effect (all false unless asked for and accepted). */
  readonly offload: UdpOffloadState;
  private readonly gsoInfo = new Uint32Array(2);
  /** Interns source addresses of received datagrams (see addressOf). */
  readonly addresses = new AddressInterner();
  private receiver: NativeUdpReceiver | null = null;
  private batch: PacketBatch | null = null;
  private cb: ((b: PacketBatch) => void) | null = null;
  private closed = false;
  private inFlight = 0;
  private readonly scratchRec = new Uint8Array(ADDR_RECORD_LEN);
  private readonly one = { offs: new Uint32Array(1), lens: new Uint32Array(1), idx: new Uint32Array(1) };
  private lastDest = '';
  private lastDestPort = -1;

  private constructor(
    readonly family: 4 | 6,
    readonly mechanism: UdpMechanism,
    readonly port: number,
    private readonly sizes: UdpBufferSizes,
    private readonly native: NativeIo | null,
    /** The fd (native path) or -1. */
    readonly fd: number,
    private readonly sock: dgram.Socket | null,
    private readonly maxInFlight: number,
    offloadBits = 0,
  ) {
    this.offload = { gso: (offloadBits & 1) !== 0, gro: (offloadBits & 2) !== 0 };
    // node:dgram throws an unhandled 'error' event otherwise; socket errors are counted.
    sock?.on('error', () => {
      this.stats.rxErrors++;
    });
  }

  /** Binds the socket. Throws UdpError naming the address/port on failure (e.g. EADDRINUSE). */
  static async open(opts: UdpOptions): Promise<UdpSocket> {
    const rcv = opts.rcvbuf ?? DEFAULT_UDP_BUFFER_BYTES;
    const snd = opts.sndbuf ?? DEFAULT_UDP_BUFFER_BYTES;
    const native = opts.mechanism === 'dgram' ? null : loadNativeIo();
    if (opts.mechanism === 'native' && native === null)
      throw new UdpError('the native I/O addon is not available (build it with `node native/build.mjs`)');
    const where = `${opts.family === 6 ? `[${opts.address ?? '::'}]` : (opts.address ?? '0.0.0.0')}:${opts.port}`;
    if (native) {
      let addr: Uint8Array | null = null;
      let scope = 0;
      if (opts.address) {
        const rec = new Uint8Array(ADDR_RECORD_LEN);
        encodeAddress(opts.address, 0, rec);
        if (rec[0] !== opts.family) throw new UdpError(`address ${opts.address} is not IPv${opts.family}`);
        addr = rec.slice(ADDR_IP_OFFSET, ADDR_IP_OFFSET + (opts.family === 4 ? 4 : 16));
        scope = new DataView(rec.buffer).getUint32(ADDR_SCOPE_OFFSET, true);
      }
      const r = native.udpOpen(opts.family, addr, opts.port, rcv, snd, scope, opts.reusePort === true);
      if (typeof r === 'number') {
        throw new UdpError(
          `cannot bind UDP ${where}: ${ERRNO_NAMES[-r] ?? `errno ${-r}`}` +
            (r === -98 ? ' (the port is in use; choose another listen port)' : ''),
          -r,
        );
      }
      const [fd, port, gotR, gotS, forced] = r;
      const wantOffload = (opts.gso === true || opts.gro === true) && typeof native.udpSetOffload === 'function';
      const bits = wantOffload
        ? native.udpSetOffload!(fd, opts.gso === true && typeof native.sendBatchGso === 'function', opts.gro === true)
        : 0;
      return new UdpSocket(
        opts.family,
        'native',
        port,
        { requestedRcvbuf: rcv, requestedSndbuf: snd, rcvbuf: gotR, sndbuf: gotS, forced: forced === 3 },
        native,
        fd,
        null,
        0,
        bits,
      );
    }
    const sock = dgram.createSocket({
      type: opts.family === 4 ? 'udp4' : 'udp6',
      ipv6Only: opts.family === 6,
      recvBufferSize: rcv,
      sendBufferSize: snd,
    });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', (e) =>
        reject(new UdpError(`cannot bind UDP ${where}: ${(e as NodeJS.ErrnoException).code ?? e.message}`)),
      );
      sock.bind(opts.port, opts.address, () => resolve());
    });
    const sizes = {
      requestedRcvbuf: rcv,
      requestedSndbuf: snd,
      rcvbuf: sock.getRecvBufferSize(),
      sndbuf: sock.getSendBufferSize(),
      forced: false,
    };
    return new UdpSocket(
      opts.family,
      'dgram',
      sock.address().port,
      sizes,
      null,
      -1,
      sock,
      opts.maxInFlightSends ?? 4096,
    );
  }

  /**
   * SO_MARK (WireGuard's fwmark) on the socket; 0 clears it. Needs CAP_NET_ADMIN and the
   * native path (node:dgram cannot set it): throws UdpError naming what is missing.
   */
  setMark(mark: number): void {
    if (!Number.isInteger(mark) || mark < 0 || mark > 0xffffffff)
      throw new RangeError(`fwmark ${mark} is not a uint32`);
    if (!this.native)
      throw new UdpError(
        'fwmark needs the native I/O addon (node:dgram cannot set SO_MARK); build it with `node native/build.mjs`',
      );
    const r = this.native.setMark(this.fd, mark);
    if (r < 0)
      throw new UdpError(
        `setting fwmark ${mark} failed: ${r === -1 ? 'EPERM (needs CAP_NET_ADMIN)' : `errno ${-r}`}`,
        -r,
      );
  }

  /**
   * Steers this socket's SO_REUSEPORT group (call on the group's first socket, before the others
   * bind): WireGuard transport datagrams go to socket hash(source address, port) % `workers` in
   * bind order, every other datagram (handshake messages, cookie replies) to socket `workers`,
   * the one bound after them; while that socket is missing the kernel's own hash picks. Returns
   * false without the native addon or when the kernel refuses the program (then nothing is
   * steered).
   */
  steerReusePort(workers: number): boolean {
    if (!Number.isInteger(workers) || workers < 1 || workers > 1024)
      throw new RangeError(`workers ${workers}: 1..1024`);
    if (this.native === null || typeof this.native.udpSteerReuseport !== 'function') return false;
    return this.native.udpSteerReuseport(this.fd, this.family, workers) === 0;
  }

  /** sendmmsg entries used by GSO sends so far (one per run; for tests and statistics). */
  get gsoMessages(): number {
    return this.gsoInfo[0];
  }

  /** The socket buffer sizes requested and granted. */
  bufferSizes(): UdpBufferSizes {
    return this.sizes;
  }

  /**
   * Starts receiving: each wake-up fills `batch` (created with withAddresses: true) and calls
   * `cb` once. In the callback, datagram i is batch.buf[batch.offs[i], +batch.lens[i]) from the
   * address record batch.addrs[i*24..] (see addressOf/portOf). Truncated datagrams never appear.
   */
  onBatch(batch: PacketBatch, cb: (batch: PacketBatch) => void): void {
    if (this.closed) throw new UdpError('socket is closed');
    if (this.cb) throw new Error('onBatch already set');
    if (batch.addrs.length < batch.capacity * ADDR_RECORD_LEN)
      throw new TypeError('the batch needs withAddresses: true');
    if (this.offload.gro) {
      if (batch.segs.length < batch.capacity) throw new TypeError('with gro the batch needs withSegments: true');
      if (batch.maxLen < UDP_GRO_MAX_LEN)
        throw new RangeError(
          `with gro the batch needs maxLen ${UDP_GRO_MAX_LEN} (a slot holds a coalesced run), not ${batch.maxLen}`,
        );
    }
    this.batch = batch;
    this.cb = cb;
    if (this.native) {
      this.receiver = new NativeUdpReceiver(this.native, this.fd, this.offload.gro, this.stats, batch, cb);
      this.receiver.start();
    } else {
      const sock = this.sock!;
      sock.on('message', (msg, rinfo) => this.onMessage(msg, rinfo));
    }
  }

  /**
   * GRO receives can be scattered (PacketBatch.scatterSeg): native path, GRO on, an addon that
   * scatters (recvBatch, and recvPollStart's drain reading PacketBatch.scatter).
   */
  get canScatter(): boolean {
    return this.native !== null && this.offload.gro && this.native.recvScatter === 1;
  }

  /** Source address text of datagram i (interned: no allocation for a known sender). */
  addressOf(batch: PacketBatch, i: number): string {
    return this.addresses.text(batch.addrs, i * ADDR_RECORD_LEN);
  }

  portOf(batch: PacketBatch, i: number): number {
    return recordPort(batch.addrs, i * ADDR_RECORD_LEN);
  }

  private onMessage(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    const batch = this.batch!;
    if (msg.length > batch.maxLen) {
      this.stats.rxTruncated++;
      return;
    }
    batch.buf.set(msg, batch.headroom);
    batch.lens[0] = msg.length;
    encodeAddress(rinfo.address, rinfo.port, batch.addrs, 0);
    batch.filled(1);
    this.stats.rxBatches++;
    this.stats.rxPackets++;
    this.stats.rxBytes += msg.length;
    this.cb!(batch);
  }

  /**
   * Sends buf[off, off+len) to `address` (no brackets) / `port`. Returns false if the datagram
   * was dropped (socket buffer full, in-flight bound reached, or unreachable); counted.
   * The last destination's record is cached, so a steady peer costs no parsing.
   */
  send(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    if (address !== this.lastDest || port !== this.lastDestPort) {
      encodeAddress(address, port, this.scratchRec, 0);
      this.lastDest = address;
      this.lastDestPort = port;
    }
    return this.sendTo(buf, off, len, this.scratchRec, 0);
  }

  /** Sends to the destination in address record rec[recOff..recOff+24) (see encodeAddress). */
  sendTo(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean {
    if (this.closed) throw new UdpError('socket is closed');
    if (off < 0 || len < 0 || off + len > buf.length) throw new RangeError('send: outside the buffer');
    if (this.native) {
      const one = this.one;
      one.offs[0] = off;
      one.lens[0] = len;
      let ok: boolean;
      if (recOff % ADDR_RECORD_LEN === 0) {
        one.idx[0] = recOff / ADDR_RECORD_LEN; // record index: no view allocated
        ok = this.native.sendBatch(this.fd, this.family, buf, one.offs, one.lens, rec, one.idx, 1) === 1;
      } else {
        ok =
          this.native.sendBatch(
            this.fd,
            this.family,
            buf,
            one.offs,
            one.lens,
            rec.subarray(recOff, recOff + ADDR_RECORD_LEN),
            null,
            1,
          ) === 1;
      }
      if (ok) {
        this.stats.txPackets++;
        this.stats.txBytes += len;
      } else this.stats.txDropped++;
      return ok;
    }
    return this.dgramSend(buf, off, len, rec, recOff);
  }

  /**
   * Sends datagrams i < count: bytes buf[offs[i], +lens[i]) to the address record
   * addrs[(addrIdx ? addrIdx[i] : i) * 24 ..]. Returns how many were queued; the rest are
   * dropped and counted.
   */
  sendBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
  ): number {
    if (this.closed) throw new UdpError('socket is closed');
    let sent: number;
    if (this.native) {
      if (this.offload.gso) {
        const info = this.gsoInfo;
        info[1] = 0;
        sent = this.native.sendBatchGso!(
          this.fd,
          this.family,
          buf,
          offs,
          lens,
          addrs,
          addrIdx,
          count,
          UDP_GSO_MAX_SEGMENTS,
          info,
        );
        if (info[1] !== 0) {
          this.stats.gsoFallbacks += info[1];
          this.offload.gso = false; // the route's device cannot segment: as wireguard-go, stop trying
        }
      } else {
        sent = this.native.sendBatch(this.fd, this.family, buf, offs, lens, addrs, addrIdx, count);
      }
      if (sent > 0) {
        let bytes = 0;
        for (let i = 0; i < sent; i++) bytes += lens[i]; // approximate when a middle datagram failed
        this.stats.txBytes += bytes;
        this.stats.txPackets += sent;
      }
      this.stats.txDropped += count - sent;
      return sent;
    }
    sent = 0;
    for (let i = 0; i < count; i++) {
      if (this.dgramSend(buf, offs[i], lens[i], addrs, (addrIdx ? addrIdx[i] : i) * ADDR_RECORD_LEN)) sent++;
    }
    return sent;
  }

  private dgramSend(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean {
    if (this.inFlight >= this.maxInFlight) {
      this.stats.txDropped++;
      return false;
    }
    const fam = rec[recOff + ADDR_FAMILY_OFFSET];
    let address = this.addresses.text(rec, recOff);
    if (fam === 4 && this.family === 6) address = `::ffff:${address}`;
    const port = recordPort(rec, recOff);
    // Copy: node:dgram holds the buffer until the asynchronous send completes.
    const copy = Buffer.from(buf.subarray(off, off + len));
    this.inFlight++;
    this.sock!.send(copy, port, address, (err) => {
      this.inFlight--;
      if (err) {
        this.stats.txDropped++;
        return;
      }
      this.stats.txPackets++;
      this.stats.txBytes += len;
    });
    return true;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.native) {
      this.receiver?.stop();
      this.receiver = null;
      // After pollStop: the fd is already out of the event loop's epoll set. The addon opened
      // it and closes it: a worker thread's fs warns on closing an fd it did not open itself.
      if (typeof this.native.udpClose === 'function') this.native.udpClose(this.fd);
      else fs.closeSync(this.fd);
      return;
    }
    await new Promise<void>((r) => this.sock!.close(() => r()));
  }
}
