/**
 * Linux TUN device (IFF_TUN | IFF_NO_PI: raw IP packets, no packet-information prefix).
 *
 * Set-up (control path, koffi ioctls, no shelling out): open /dev/net/tun non-blocking,
 * TUNSETIFF, SIOCSIFMTU and SIOCSIFFLAGS(IFF_UP) on an AF_INET socket. With `netns`, the
 * calling thread enters that network namespace (setns) for the set-up and returns to its own,
 * so the device lives in the namespace while the fd keeps working from here.
 *
 * Data path (chosen by measurement, see bench/RESULTS-io.md):
 * - 'native' (default when the addon is built): uv_poll_t readiness through Node's event loop,
 *   then ONE addon call reads every ready packet (read() until EAGAIN, up to the batch
 *   capacity) into the caller's PacketBatch; one callback per batch.
 * - 'koffi' (fallback): poll() runs on libuv's threadpool through a koffi async call (at most one
 *   in flight, 100 ms timeout so close() is prompt), then the main thread drains with
 *   non-blocking koffi read() calls into the same PacketBatch. Ordering is preserved because
 *   only the main thread reads.
 * Writes are synchronous non-blocking write() calls (a TUN write hands the packet to the
 * kernel stack and never waits), single or batched.
 *
 * Contracts: buffers are caller-owned (PacketBatch or any Uint8Array); packets are read at
 * `headroom` (the daemon uses 16 for the WireGuard header). Bad packets the kernel refuses on
 * write are counted in `stats.txErrors`, never thrown.
 *
 * Offloads (opt-in, `offload: true`, native mechanism only): IFF_VNET_HDR at TUNSETIFF,
 * TUNSETVNETHDRSZ 10, then TUNSETOFFLOAD with the most the kernel accepts of CSUM + TSO4/6 +
 * USO4/6, else CSUM + TSO4/6, else nothing (`offload` says what is on). Then every packet read
 * comes with a virtio_net_hdr, placed in the headroom just before the packet (offs[i] - 10), and
 * may be a TCP/UDP super-packet of up to 64 KiB to cut with src/packet/gso.ts; `write` and
 * `writeBatch` still take plain IP packets (an all-zero header is prepended by writev), and
 * `writeVnetBatch` writes packets that start with their own header (src/packet/gro.ts output).
 *
 * The set-up ioctls are tun-link.ts's, the typed errors tun-errors.ts's, the namespace switch
 * thread-netns.ts's; this file is the device and its data path.
 */
import * as fs from 'node:fs';
import { PacketBatch } from './batch.js';
import { loadNativeIo, type NativeIo, type PollHandle } from './native.js';
import {
  getLibc,
  POLLIN,
  EAGAIN,
  EINTR,
  AF_UNIX,
  SOCK_SEQPACKET,
  SOCK_NONBLOCK,
  SOCK_CLOEXEC,
  type Libc,
} from './libc.js';
import { TunError, TunPermissionError, TunUnavailableError } from './tun-errors.js';
import { withNetns } from './thread-netns.js';
import { zeroDeviceStats, type PacketDevice, type PacketDeviceStats } from './device.js';
import {
  IFREQ_SIZE,
  attachTun,
  configureLink,
  negotiateOffload,
  writeIfName,
  type TunOffloadState,
} from './tun-link.js';

export const TUN_DEVICE_PATH = '/dev/net/tun';
export const DEFAULT_TUN_MTU = 1420;
/** With TSO/USO on, a read may return a packet this long (IPv6: 40 + 65535); size batches for it. */
export const TUN_OFFLOAD_MAX_PACKET = 65535 + 40;
const KOFFI_POLL_TIMEOUT_MS = 100;

export type TunMechanism = 'native' | 'koffi';

export interface TunOptions {
  /** Interface name (≤ 15 bytes; `%d` lets the kernel pick a number). */
  readonly name: string;
  /** Default 1420 (WireGuard's default; Liqo uses 1340). */
  readonly mtu?: number;
  /** Bring the link up (default true). */
  readonly up?: boolean;
  /** IFF_MULTI_QUEUE: several fds may attach to the same name (one per reader). */
  readonly multiQueue?: boolean;
  /** Network namespace: a name under /run/netns or a path to a netns file. */
  readonly netns?: string;
  /** Default: 'native' when the addon loads, else 'koffi'. */
  readonly mechanism?: TunMechanism;
  /** For tests: another path than /dev/net/tun. */
  readonly devicePath?: string;
  /**
   * Transmit queue length (packets), i.e. the size of the kernel's ring between the stack and
   * our reader; the kernel drops (counted as TX drops) when it is full. Default: the kernel's
   * (500 for TUN). A bulk TCP sender bursts past 500 whenever the reader is briefly descheduled.
   */
  readonly txQueueLen?: number;
  /**
   * Ask for a vnet-header TUN with checksum and segmentation offloads (see the file comment).
   * Only with the native mechanism; otherwise, or when the kernel refuses, `offload` is null.
   */
  readonly offload?: boolean;
}

export type TunStats = PacketDeviceStats;

export class TunDevice implements PacketDevice {
  readonly stats: TunStats = zeroDeviceStats();
  private readonly native: NativeIo | null;
  private readonly libc: Libc;
  private poll: PollHandle | null = null;
  private batch: PacketBatch | null = null;
  /** Koffi path: one preallocated view per slot so draining allocates nothing per packet. */
  private slotViews: Uint8Array[] = [];
  private onBatch: ((b: PacketBatch) => void) | null = null;
  private reading = false;
  private koffiPollInFlight = false;
  private readonly pollfd = new Uint8Array(8);
  private closed = false;
  private fdClosed = false;
  private closeWaiters: (() => void)[] = [];
  private readonly vhl: number;
  private readonly one = { offs: new Uint32Array(1), lens: new Uint32Array(1) };

  private constructor(
    readonly name: string,
    readonly fd: number,
    private linkMtu: number,
    readonly mechanism: TunMechanism,
    /** The namespace the link lives in (for later link changes such as the MTU). */
    private readonly netns: string | undefined,
    /** Offloads in effect (null: a plain TUN, packets without a header). */
    readonly offload: TunOffloadState | null = null,
    /** One end of TunDevice.pair: no link behind the fd. */
    private readonly unlinked = false,
  ) {
    this.vhl = offload ? offload.vnetHdrLen : 0;
    this.native = mechanism === 'native' ? loadNativeIo() : null;
    this.libc = getLibc();
    const dv = new DataView(this.pollfd.buffer);
    dv.setInt32(0, fd, true);
    dv.setInt16(4, POLLIN, true);
  }

  /** Creates (or attaches to) the TUN interface. Throws the typed errors of tun-errors.ts. */
  static open(opts: TunOptions): TunDevice {
    const mtu = opts.mtu ?? DEFAULT_TUN_MTU;
    if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) throw new RangeError(`MTU ${mtu} not in 68..65535`);
    const txQueueLen = opts.txQueueLen;
    if (txQueueLen !== undefined && (!Number.isInteger(txQueueLen) || txQueueLen < 1 || txQueueLen > 1 << 20)) {
      throw new RangeError(`txQueueLen ${txQueueLen} not in 1..${1 << 20}`);
    }
    let mechanism: TunMechanism = opts.mechanism ?? (loadNativeIo() ? 'native' : 'koffi');
    if (mechanism === 'native' && !loadNativeIo()) mechanism = 'koffi';
    const devicePath = opts.devicePath ?? TUN_DEVICE_PATH;
    const libc = getLibc();
    const ifr = new Uint8Array(IFREQ_SIZE);
    writeIfName(ifr, opts.name);

    return withNetns(opts.netns, () => {
      let fd: number;
      try {
        fd = fs.openSync(devicePath, fs.constants.O_RDWR | fs.constants.O_NONBLOCK /* libuv adds O_CLOEXEC */);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? 'error';
        if (code === 'EACCES' || code === 'EPERM')
          throw new TunPermissionError(opts.name, `open ${devicePath}: ${code}`);
        throw new TunUnavailableError(devicePath, code);
      }
      try {
        const wantOffload =
          opts.offload === true && mechanism === 'native' && typeof loadNativeIo()?.writeBatchHdr === 'function';
        const name = attachTun(libc, fd, ifr, opts.name, devicePath, opts.multiQueue === true, wantOffload);
        const offload = wantOffload ? negotiateOffload(libc, fd, name) : null;
        configureLink(libc, name, mtu, opts.up ?? true, txQueueLen);
        return new TunDevice(name, fd, mtu, mechanism, opts.netns, offload);
      } catch (e) {
        fs.closeSync(fd);
        throw e;
      }
    });
  }

  /**
   * Two TunDevices joined back to back by a SOCK_SEQPACKET socket pair instead of a kernel
   * interface: a packet written to one is read from the other, one packet per message, through
   * the same read()/write() data path as a TUN (native mechanism). For the start-up warm-up
   * (gateway/wg-io-warmup.ts), which runs the real device class on packets no kernel stack sees.
   * With `offload`, both ends read and write a virtio_net_hdr of offload.vnetHdrLen bytes as
   * that TUN does (no link exists: setMtu only records the MTU). Throws TunError when the addon or
   * socketpair() is unavailable.
   */
  static pair(mtu: number, offload: TunOffloadState | null): [TunDevice, TunDevice] {
    if (loadNativeIo() === null) throw new TunError('a TUN pair needs the native I/O addon');
    const libc = getLibc();
    const sv = new Int32Array(2);
    if (libc.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) !== 0)
      throw new TunError(`socketpair(AF_UNIX, SOCK_SEQPACKET): errno ${libc.errno()}`);
    return [
      new TunDevice('pair0', sv[0], mtu, 'native', undefined, offload, true),
      new TunDevice('pair1', sv[1], mtu, 'native', undefined, offload, true),
    ];
  }

  /** The link MTU (as last set by open() or setMtu()). */
  get mtu(): number {
    return this.linkMtu;
  }

  /**
   * Changes the link MTU live (SIOCSIFMTU, in the device's namespace). Throws RangeError when
   * `mtu` is outside 68..65535 or above the running read batch's maxLen (longer packets would be
   * truncated: reopen the device instead), TunError when the kernel refuses.
   */
  setMtu(mtu: number): void {
    if (this.closed) throw new TunError(`TUN ${this.name} is closed`);
    if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) throw new RangeError(`MTU ${mtu} not in 68..65535`);
    if (this.batch !== null && mtu > this.batch.maxLen)
      throw new RangeError(`MTU ${mtu} is above the read batch's maxLen ${this.batch.maxLen}`);
    if (mtu === this.linkMtu) return;
    if (!this.unlinked) withNetns(this.netns, () => configureLink(this.libc, this.name, mtu, false, undefined));
    this.linkMtu = mtu;
  }

  /**
   * Starts reading: every wake-up fills `batch` (up to its capacity) and calls `onBatch` once.
   * `batch.maxLen` must be at least the MTU (longer packets would be truncated by the kernel).
   */
  start(batch: PacketBatch, onBatch: (batch: PacketBatch) => void): void {
    if (this.closed) throw new TunError(`TUN ${this.name} is closed`);
    if (this.reading) throw new Error('TunDevice.start called twice');
    if (batch.maxLen < this.mtu) throw new RangeError(`batch.maxLen ${batch.maxLen} is below the MTU ${this.mtu}`);
    const off = this.offload;
    if (off) {
      if (batch.headroom < off.vnetHdrLen)
        throw new RangeError(`batch.headroom ${batch.headroom} cannot hold the ${off.vnetHdrLen}-byte virtio_net_hdr`);
      if ((off.tso || off.uso) && batch.maxLen < TUN_OFFLOAD_MAX_PACKET) {
        throw new RangeError(
          `batch.maxLen ${batch.maxLen} is below ${TUN_OFFLOAD_MAX_PACKET}: with TSO/USO a read may return a 64 KiB super-packet`,
        );
      }
    }
    this.batch = batch;
    this.onBatch = onBatch;
    this.reading = true;
    const native = this.native;
    if (native && typeof native.readPollStart === 'function') {
      // The drain runs natively on readiness: one crossing per wake-up (see native.ts).
      this.poll = native.readPollStart(
        this.fd,
        batch.buf,
        batch.slotSize,
        batch.headroom - this.vhl,
        batch.maxLen + this.vhl,
        batch.capacity,
        batch.lens,
        (n) => this.onRead(n),
      );
    } else if (native) {
      this.poll = native.pollStart(this.fd, false, (status) => this.onNativeReadable(status));
    } else {
      this.slotViews = [];
      for (let i = 0; i < batch.capacity; i++) {
        const off = i * batch.slotSize + batch.headroom;
        this.slotViews.push(batch.buf.subarray(off, off + batch.maxLen));
      }
      this.armKoffiPoll();
    }
  }

  /** Stops delivering batches (the fd stays open; start() may be called again). */
  stop(): void {
    this.reading = false;
    if (this.poll && this.native) {
      this.native.pollStop(this.poll);
      this.poll = null;
    }
  }

  /**
   * Reads what is queued now and delivers it as a readiness callback would (native mechanism,
   * while started; otherwise does nothing). Returns the packets delivered. For a writer whose
   * packets the local stack answers within the write (an ICMP echo reply, a TCP ACK of a local
   * socket): the reply leaves one event-loop turn and one epoll wake-up sooner. Not reentrant:
   * a call from inside this device's own batch callback returns 0.
   */
  pollNow(): number {
    if (this.inBatch || this.poll === null) return 0;
    const before = this.stats.rxPackets;
    this.onNativeReadable(0);
    return this.stats.rxPackets - before;
  }

  private inBatch = false;

  private onNativeReadable(status: number): void {
    const batch = this.batch;
    if (!this.reading || batch === null || this.native === null) return;
    if (status < 0) {
      this.stats.rxErrors++;
      return;
    }
    const vhl = this.vhl;
    this.onRead(
      this.native.readBatch(
        this.fd,
        batch.buf,
        batch.slotSize,
        batch.headroom - vhl,
        batch.maxLen + vhl,
        batch.capacity,
        batch.lens,
      ),
    );
  }

  /** After a drain into the batch: n packets, or a negative errno. */
  private onRead(n: number): void {
    const batch = this.batch;
    if (!this.reading || batch === null) return;
    const vhl = this.vhl;
    if (vhl !== 0) {
      // The header went into the headroom; lens count the IP packet only.
      const lens = batch.lens;
      for (let i = 0; i < n; i++) lens[i] = lens[i] > vhl ? lens[i] - vhl : 0;
    }
    this.deliver(batch, n);
  }

  private armKoffiPoll(): void {
    if (this.koffiPollInFlight || this.fdClosed) return;
    this.koffiPollInFlight = true;
    this.libc.pollAsync(this.pollfd, 1, KOFFI_POLL_TIMEOUT_MS, (err, res) => {
      this.koffiPollInFlight = false;
      if (this.closed) {
        this.finishClose();
        return;
      }
      if (!this.reading) return;
      if (err || res < 0) this.stats.rxErrors++;
      else if (res > 0) this.drainKoffi();
      this.armKoffiPoll();
    });
  }

  private drainKoffi(): void {
    const batch = this.batch!;
    const { maxLen, capacity, lens } = batch;
    const views = this.slotViews;
    let n = 0;
    while (n < capacity) {
      const r = this.libc.read(this.fd, views[n], maxLen);
      if (r < 0) {
        const e = this.libc.errno();
        if (e === EINTR) continue;
        if (e !== EAGAIN) this.stats.rxErrors++;
        break;
      }
      lens[n++] = r;
    }
    this.deliver(batch, n);
  }

  private deliver(batch: PacketBatch, n: number): void {
    if (n < 0) {
      this.stats.rxErrors++;
      return;
    }
    if (n === 0) return;
    batch.filled(n);
    this.stats.rxBatches++;
    this.stats.rxPackets += n;
    let bytes = 0;
    for (let i = 0; i < n; i++) bytes += batch.lens[i];
    this.stats.rxBytes += bytes;
    // (An exception from the callback is fatal: it propagates out of the poll callback.)
    this.inBatch = true;
    this.onBatch!(batch);
    this.inBatch = false;
  }

  /** Writes one IP packet buf[off, off+len). Returns false (and counts) if the kernel refused it. */
  write(buf: Uint8Array, off: number, len: number): boolean {
    if (this.fdClosed) throw new TunError(`TUN ${this.name} is closed`);
    let r: number;
    if (this.vhl !== 0) {
      const one = this.one;
      one.offs[0] = off;
      one.lens[0] = len;
      r = this.native!.writeBatchHdr!(this.fd, buf, one.offs, one.lens, 1, this.vhl) === 1 ? len : -1;
    } else if (this.native) {
      r = this.native.write1(this.fd, buf, off, len);
    } else {
      if (off < 0 || len < 0 || off + len > buf.length) throw new RangeError('write: outside the buffer');
      r = this.libc.write(this.fd, buf.subarray(off, off + len), len);
    }
    if (r < 0) {
      this.stats.txErrors++;
      return false;
    }
    this.stats.txPackets++;
    this.stats.txBytes += len;
    return true;
  }

  /** Writes packets i < count at buf[offs[i], offs[i]+lens[i]). Returns how many the kernel took. */
  writeBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number {
    if (this.fdClosed) throw new TunError(`TUN ${this.name} is closed`);
    let ok: number;
    if (this.native) {
      ok =
        this.vhl !== 0
          ? this.native.writeBatchHdr!(this.fd, buf, offs, lens, count, this.vhl)
          : this.native.writeBatch(this.fd, buf, offs, lens, count);
      // Which packet failed is not reported: bytes are exact when all went, approximate otherwise.
      let bytes = 0;
      for (let i = 0; i < ok; i++) bytes += lens[i];
      this.stats.txBytes += bytes;
    } else {
      ok = 0;
      for (let i = 0; i < count; i++) {
        const o = offs[i];
        if (this.libc.write(this.fd, buf.subarray(o, o + lens[i]), lens[i]) >= 0) {
          ok++;
          this.stats.txBytes += lens[i];
        }
      }
    }
    this.stats.txPackets += ok;
    this.stats.txErrors += count - ok;
    return ok;
  }

  /**
   * Offload only: writes packets i < count that START with their virtio_net_hdr
   * (buf[offs[i], +lens[i]) = header + IP packet, e.g. a Coalescer's output). Returns how many
   * the kernel took; the rest are counted in txErrors. Throws when offload is off (misuse).
   */
  writeVnetBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number {
    if (this.fdClosed) throw new TunError(`TUN ${this.name} is closed`);
    if (this.vhl === 0)
      throw new TunError(`TUN ${this.name} was not opened with offload: writeVnetBatch needs a vnet header`);
    const ok = this.native!.writeBatch(this.fd, buf, offs, lens, count);
    let bytes = 0;
    for (let i = 0; i < ok; i++) bytes += lens[i] - this.vhl;
    this.stats.txBytes += bytes;
    this.stats.txPackets += ok;
    this.stats.txErrors += count - ok;
    return ok;
  }

  /**
   * Stops reading and closes the fd (the interface disappears unless persistent). Resolves once
   * the fd is closed: with the koffi fallback, after the in-flight poll() returns (≤ 100 ms), so
   * the fd number is never reused under a pending poll.
   */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.stop();
      if (!this.koffiPollInFlight) this.finishClose();
    }
    if (this.fdClosed) return Promise.resolve();
    return new Promise((r) => this.closeWaiters.push(r));
  }

  private finishClose(): void {
    if (this.fdClosed) return;
    this.fdClosed = true;
    // A pair's fds come from socketpair(), not fs.open: closed by libc, so that Node does not
    // warn in a worker thread (it tracks the fds fs opened there).
    if (this.unlinked) this.libc.close(this.fd);
    else
      try {
        fs.closeSync(this.fd);
      } catch {
        /* already closed */
      }
    for (const w of this.closeWaiters.splice(0)) w();
  }
}
