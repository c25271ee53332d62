/**
 * The `weft-wg` daemon: a TUN interface, the WireGuard engine on UDP, and the cross-platform
 * UAPI socket, so Debian's `wg` configures it exactly as it configures wireguard-go.
 *
 *   TUN batch → WireGuardPort.encryptBatch (in place) → sendmmsg
 *   recvmmsg → WireGuardPort (decrypt in place, inner-source check) → TUN writeBatch
 * With offloads (default; `offload: false` or WEFT_OFFLOAD=0 turns them off), each one the
 * kernel grants is used and each one it refuses falls back to the plain path above:
 *   TUN read of TSO/USO super-packets → TunSegmenter (MTU-sized segments with WireGuard
 *   headroom/tailroom) → encrypt each in place → sendmmsg with UDP GSO (a super-packet's
 *   segments to one endpoint as one message)
 *   recvmmsg with UDP GRO (runs of datagrams per slot) → decrypt each in place →
 *   TunCoalescingWriter (TCP/UDP segments per flow → super-packets) → one writev batch
 *   /var/run/wireguard/IFNAME.sock ↔ UAPI codec ↔ Device (atomic set, snapshot get)
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { MAX_PACKET } from '../io/sizes.js';
import type { PacketDevice } from '../io/device.js';
import { DEFAULT_TUN_MTU } from '../io/tun.js';
import { systemDevices, type Devices } from '../pipelines/devices.js';
import { UdpError } from '../io/udp.js';
import { UapiServer } from '../io/uapi-server.js';
import { Device, WireGuardConfigError } from '../wireguard/device.js';
import { planSet, UapiError, type UapiDeviceSnapshot, type UapiOperation } from '../wireguard/uapi.js';
import { withNativeAead } from '../io/native-aead.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import { DEFAULT_WARMUP_MS, warmUpWireGuard } from '../pipelines/wireguard-warmup.js';
import type { TunCoalescingWriter, TunSegmenter } from '../pipelines/tun-offload.js';
import { coalescerFor, startTunReader, tunSink } from './wg-tun-path.js';
import { warmUpIo } from './wg-io-warmup.js';
import { WgWorkers } from './wg-workers.js';
import { TunDevice } from '../io/tun.js';
import { allocateSharedSessions } from '../wireguard/shared-sessions.js';
import { ShardSlots } from '../wireguard/shard-slots.js';

/**
 * TUN transmit queue (packets) the daemon asks for: the kernel's 500 overflows under a bulk TCP
 * sender whenever the reader is descheduled for a moment (each overflow is a lost segment and a
 * retransmit); 1000 is the kernel's default for Ethernet devices. Measured in bench/history/2026.md.
 */
export const DEFAULT_TUN_TXQUEUELEN = 1000;

/** wireguard-go's UAPI error codes (negative errno). */
const ERRNO_EINVAL = -22;
const ERRNO_EADDRINUSE = -98;
const ERRNO_EIO = -5;

export interface WgDaemonOptions {
  readonly ifname: string;
  readonly backend: CryptoBackend;
  readonly mtu?: number;
  /** Directory of the UAPI socket (default /var/run/wireguard). */
  readonly socketDir?: string;
  /** Open the TUN inside this network namespace (tests; the daemon normally runs inside it). */
  readonly netns?: string;
  /**
   * Transport ChaCha20-Poly1305 in the native addon (native-aead.ts). Default: on for the
   * 'openssl' backend (same OpenSSL, fewer calls per packet); off keeps `backend` as given.
   */
  readonly nativeAead?: boolean;
  /**
   * Use the kernel's offloads where it grants them: vnet-header TUN with TSO/USO, UDP GSO and
   * GRO (default true). False: the plain path (one packet per read/write/datagram).
   */
  readonly offload?: boolean;
  /**
   * After each UAPI set, start a handshake with every peer that has an endpoint and no session
   * (default true), instead of waiting for data as wireguard-go does: a restarted daemon is
   * back in one round trip even while the peer still sends on its old session.
   */
  readonly eagerHandshake?: boolean;
  /**
   * Upper bound (ms) of the start-up warm-up before the UAPI socket opens: synthetic packets
   * (wireguard-warmup.ts) for up to half, then the I/O classes on a loopback tunnel
   * (wg-io-warmup.ts, real TUN only) for the rest; each part ends at its work target first.
   * With workers, each worker does the same on its own engine (shard-warmup.ts, then
   * wg-io-warmup.ts), all at once. Default DEFAULT_WARMUP_MS, 0 = none.
   */
  readonly warmUpMs?: number;
  /** TUN transmit queue length (default DEFAULT_TUN_TXQUEUELEN). */
  readonly txQueueLen?: number;
  readonly log?: (level: 'error' | 'info' | 'debug', msg: string) => void;
  /** The TUN and sockets to open (default: the real host's). */
  readonly devices?: Devices;
  /**
   * Worker threads carrying the data path (wg-workers.ts; default 1: everything on this
   * thread). With more, the TUN is multi-queue and the UDP port is shared (SO_REUSEPORT), one
   * queue and one socket per worker; this thread keeps UAPI, handshakes and timers. The real
   * host's devices only (`devices` and `netns` are ignored).
   */
  readonly workers?: number;
}

/** Activity rows (peers) and keypair slots of a multi-threaded device. */
const SHARED_PEER_SLOTS = 1024;
const SHARED_KEYPAIR_SLOTS = 2048;

/** Which offloads are in effect (reported at start and by WgDaemon.offloads). */
export interface WgOffloads {
  /** TUN: virtio_net_hdr with checksum offload, TSO (TCP super-packets), USO (UDP). */
  readonly tunCsum: boolean;
  readonly tunTso: boolean;
  readonly tunUso: boolean;
  /** UDP: segmentation on send, coalescing on receive. */
  readonly udpGso: boolean;
  readonly udpGro: boolean;
}

export class WgDaemon {
  private uapi: UapiServer | null = null;
  /** Set when TUN reads carry a virtio_net_hdr (drop counters of the segmenter). */
  segmenter: TunSegmenter | null = null;
  coalescer: TunCoalescingWriter | null = null;
  private stopped = false;

  private constructor(
    readonly tun: PacketDevice,
    readonly port: WireGuardPort,
    readonly device: Device,
    private readonly log: NonNullable<WgDaemonOptions['log']>,
    private readonly eagerHandshake: boolean,
    /** The worker threads (null: the data path runs on this thread). */
    readonly workers: WgWorkers | null = null,
  ) {}

  static async start(opts: WgDaemonOptions): Promise<WgDaemon> {
    if ((opts.workers ?? 1) > 1) return WgDaemon.startWorkers(opts, opts.workers!);
    const log = opts.log ?? (() => {});
    const mtu = opts.mtu ?? DEFAULT_TUN_MTU;
    let backend = opts.backend;
    let aeadNote = '';
    if (opts.nativeAead ?? backend.name === 'openssl') {
      const r = withNativeAead(backend);
      backend = r.backend;
      aeadNote = r.reason === null ? ', transport AEAD native' : '';
      if (r.reason !== null) log('info', `transport AEAD stays on ${backend.name}: ${r.reason}`);
    }
    const device = new Device({ backend, mtu });
    const wantOffload = opts.offload ?? true;
    const devices = opts.devices ?? systemDevices;
    const tun = devices.openTun({
      name: opts.ifname,
      mtu,
      netns: opts.netns,
      up: false,
      txQueueLen: opts.txQueueLen ?? DEFAULT_TUN_TXQUEUELEN,
      offload: wantOffload,
    });
    let port: WireGuardPort | null = null;
    try {
      const tunOff = tun.offload;
      // Coalescing writes need TSO on the TUN; the port's receive batches then carry its area.
      const co = coalescerFor(tun);
      port = new WireGuardPort({
        device,
        mtu: MAX_PACKET,
        // The TUN takes packets of every peer alike (the kernel routes them).
        sink: tunSink(tun, co),
        udpOffload: wantOffload,
        openUdp: (o) => devices.openUdp(o),
        rxCoalesceReservation: co === null ? 0 : co.reservation,
        rxCoalesceFlows: co === null ? undefined : co.maxFlows,
        onError: (what, err) => log('info', `${what}: ${err instanceof Error ? err.message : String(err)}`),
      });
      await port.bind(0);
      const d = new WgDaemon(tun, port, device, log, opts.eagerHandshake ?? true);
      d.coalescer = co;
      d.segmenter = startTunReader(tun, mtu, port);
      const o = d.offloads;
      log(
        'info',
        `offloads: tun ${tunOff === null ? (wantOffload ? 'none (refused)' : 'off') : `csum ${o.tunCsum} tso ${o.tunTso} uso ${o.tunUso}`}, ` +
          `udp gso ${o.udpGso} gro ${o.udpGro}${wantOffload ? '' : ' (disabled by configuration)'}`,
      );
      // Before anyone can configure a peer: the first packets then run optimized code. After the
      // real port, TUN reader and segmenter exist, so V8 has seen their callbacks before it
      // optimizes (no deoptimization when the real ones show up).
      // Then the I/O classes themselves on a loopback tunnel (wg-io-warmup.ts), in what is left
      // of the budget (at least half); only for a real TUN (the path the first packets take).
      const budget = opts.warmUpMs ?? DEFAULT_WARMUP_MS;
      const withIo = tun instanceof TunDevice && tun.mechanism === 'native';
      const warm = await warmUpWireGuard({
        backend,
        mtu,
        budgetMs: withIo ? budget >> 1 : budget,
        vnetHdrLen: tunOff?.vnetHdrLen ?? 0,
      });
      if (warm.ms > 0) log('info', `warm-up: ${warm.packets} packets in ${warm.ms} ms`);
      const ioBudget = withIo ? budget - Math.min(warm.ms, budget >> 1) : 0;
      if (ioBudget > 0) {
        const io = await warmUpIo({
          backend,
          mtu,
          tunOffload: (tun as TunDevice).offload,
          udpOffload: wantOffload,
          budgetMs: ioBudget,
        });
        log(
          'info',
          io.skipped === null
            ? `I/O warm-up: ${io.packets} echoes in ${io.ms} ms`
            : `I/O warm-up skipped: ${io.skipped}`,
        );
      }
      d.uapi = await UapiServer.listen(
        tun.name,
        {
          get: () => d.snapshot(),
          set: (ops) => d.set(ops),
        },
        { socketDir: opts.socketDir, onError: (e) => log('error', `uapi: ${String(e)}`) },
      );
      log(
        'info',
        `interface ${tun.name} up: mtu ${mtu}, udp port ${port.port}, io ${tun.mechanism}, crypto ${opts.backend.name}${opts.backend.x25519Impl !== undefined ? ` (X25519: ${opts.backend.x25519Impl})` : ''}${aeadNote}`,
      );
      return d;
    } catch (e) {
      await port?.close();
      await tun.close();
      throw e;
    }
  }

  /**
   * The multi-threaded daemon: this thread creates the multi-queue TUN (and configures the
   * link), the workers attach one queue each, then this thread lets its own queue go (an
   * attached queue nobody reads would hold the flows the kernel steers to it).
   */
  private static async startWorkers(opts: WgDaemonOptions, n: number): Promise<WgDaemon> {
    const log = opts.log ?? (() => {});
    const mtu = opts.mtu ?? DEFAULT_TUN_MTU;
    const nativeAead = opts.nativeAead ?? opts.backend.name === 'openssl';
    const slots = new ShardSlots(allocateSharedSessions(n, SHARED_PEER_SLOTS, SHARED_KEYPAIR_SLOTS));
    const device = new Device({ backend: opts.backend, mtu, sessionSlots: slots });
    const offload = opts.offload ?? true;
    const txQueueLen = opts.txQueueLen ?? DEFAULT_TUN_TXQUEUELEN;
    const tun = TunDevice.open({ name: opts.ifname, mtu, up: false, multiQueue: true, txQueueLen, offload });
    let workers: WgWorkers | null = null;
    try {
      workers = await WgWorkers.start(
        {
          ifname: tun.name,
          mtu,
          txQueueLen,
          offload,
          crypto: opts.backend.name,
          nativeAead,
          device,
          slots,
          warmUpMs: opts.warmUpMs ?? DEFAULT_WARMUP_MS,
          log,
        },
        n,
      );
      await tun.close();
      await workers.bind(0);
      const d = new WgDaemon(tun, workers.port, device, log, opts.eagerHandshake ?? true, workers);
      d.uapi = await UapiServer.listen(
        tun.name,
        { get: () => d.snapshot(), set: (ops) => d.set(ops) },
        { socketDir: opts.socketDir, onError: (e) => log('error', `uapi: ${String(e)}`) },
      );
      const o = d.offloads;
      log(
        'info',
        `offloads: tun ${tun.offload === null ? (offload ? 'none (refused)' : 'off') : `csum ${o.tunCsum} tso ${o.tunTso} uso ${o.tunUso}`}, ` +
          `udp gso ${o.udpGso} gro ${o.udpGro}${offload ? '' : ' (disabled by configuration)'}`,
      );
      log(
        'info',
        `interface ${tun.name} up: mtu ${mtu}, udp port ${workers.boundTo}, ${n} worker threads ` +
          `(handshake messages ${workers.handshakesSteered ? 'steered to this thread' : 'screened by the workers'}), crypto ${opts.backend.name}`,
      );
      return d;
    } catch (e) {
      await workers?.close();
      await tun.close();
      throw e;
    }
  }

  /** The offloads in effect now (UDP GSO turns off for good if the kernel fails a GSO send). */
  get offloads(): WgOffloads {
    const t = this.tun.offload;
    const u = this.workers !== null ? this.workers.udpOffload : this.port.udpOffload();
    return {
      tunCsum: t?.csum ?? false,
      tunTso: t?.tso ?? false,
      tunUso: t?.uso ?? false,
      udpGso: u?.gso ?? false,
      udpGro: u?.gro ?? false,
    };
  }

  /** The UAPI socket path. */
  get socketPath(): string | null {
    return this.uapi?.socketPath ?? null;
  }

  private snapshot(): UapiDeviceSnapshot {
    this.workers?.foldNow();
    return this.device.uapiSnapshot();
  }

  /** UAPI set=1: bind a new port first (so a taken port changes nothing), then apply atomically. */
  private async set(ops: UapiOperation[]): Promise<number> {
    let plan;
    try {
      plan = planSet(ops);
    } catch (e) {
      this.log('debug', `uapi set rejected: ${String(e)}`);
      return e instanceof UapiError ? e.errno : ERRNO_EINVAL;
    }
    if (plan.listenPort !== undefined && plan.listenPort !== this.port.port) {
      try {
        if (this.workers !== null) await this.workers.bind(plan.listenPort);
        else await this.port.bind(plan.listenPort);
      } catch (e) {
        this.log('error', `listen_port ${plan.listenPort}: ${e instanceof Error ? e.message : String(e)}`);
        return e instanceof UdpError && e.errno === 98 ? ERRNO_EADDRINUSE : ERRNO_EIO;
      }
    }
    try {
      this.device.applyUapiPlan(plan, Date.now());
    } catch (e) {
      if (e instanceof WireGuardConfigError || e instanceof TypeError) {
        this.log('debug', `uapi set rejected: ${e.message}`);
        return ERRNO_EINVAL;
      }
      throw e;
    }
    // The engine records the port we bound, not a stale request (port 0 = kernel's choice).
    this.device.listenPort = this.port.port;
    if (plan.fwmark !== undefined) {
      try {
        this.port.setFwmark(plan.fwmark);
      } catch (e) {
        this.log('error', `fwmark: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    this.port.poll();
    if (this.eagerHandshake) this.port.initiateIdlePeers();
    this.workers?.publish();
    return 0;
  }

  /** Stops serving: removes the UAPI socket, closes sockets and the TUN device. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.uapi?.close();
    if (this.workers !== null) await this.workers.close();
    else await this.port.close();
    await this.tun.close();
  }
}
