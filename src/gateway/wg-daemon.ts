/**
 * The `weft-wg` daemon: a TUN interface, the WireGuard engine on UDP, and the cross-platform
 * UAPI socket, so Debian's `wg` configures it exactly as it configures wireguard-go.
 *
 *   TUN batch → WireGuardPort.encryptBatch (in place) → sendmmsg
 *   recvmmsg → WireGuardPort (decrypt in place, inner-source check) → TUN writeBatch
 *   /var/run/wireguard/IFNAME.sock ↔ UAPI codec ↔ Device (atomic set, snapshot get)
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { PacketBatch } from '../io/batch.js';
import { MAX_PACKET } from '../io/sizes.js';
import { TunDevice, DEFAULT_TUN_MTU } from '../io/tun.js';
import { UdpError } from '../io/udp.js';
import { UapiServer } from '../io/uapi-server.js';
import { Device, WireGuardConfigError } from '../wireguard/device.js';
import { planSet, UapiError, type UapiDeviceSnapshot, type UapiOperation } from '../wireguard/uapi.js';
import { withNativeAead } from '../ports/native-aead.js';
import { WireGuardPort } from '../ports/wireguard-port.js';

/**
 * TUN transmit queue (packets) the daemon asks for: the kernel's 500 overflows under a bulk TCP
 * sender whenever the reader is descheduled for a moment (each overflow is a lost segment and a
 * retransmit); 1000 is the kernel's default for Ethernet devices. Measured in bench/RESULTS.md.
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
  /** TUN transmit queue length (default DEFAULT_TUN_TXQUEUELEN). */
  readonly txQueueLen?: number;
  readonly log?: (level: 'error' | 'info' | 'debug', msg: string) => void;
}

export class WgDaemon {
  private uapi: UapiServer | null = null;
  private stopped = false;

  private constructor(
    readonly tun: TunDevice,
    readonly port: WireGuardPort,
    readonly device: Device,
    private readonly log: NonNullable<WgDaemonOptions['log']>,
  ) {}

  static async start(opts: WgDaemonOptions): Promise<WgDaemon> {
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
    const tun = TunDevice.open({ name: opts.ifname, mtu, netns: opts.netns, up: false, txQueueLen: opts.txQueueLen ?? DEFAULT_TUN_TXQUEUELEN });
    let port: WireGuardPort | null = null;
    try {
      port = new WireGuardPort({
        device, mtu: MAX_PACKET,
        // The TUN takes packets of every peer alike (the kernel routes them).
        sink: { writeBatch: (buf, offs, lens, _peers, n) => tun.writeBatch(buf, offs, lens, n) },
        onError: (what, err) => log('info', `${what}: ${err instanceof Error ? err.message : String(err)}`),
      });
      await port.bind(0);
      const d = new WgDaemon(tun, port, device, log);
      const batch = new PacketBatch({ capacity: 64, headroom: 16, maxLen: MAX_PACKET, tailroom: 32 });
      const p = port;
      tun.start(batch, (b) => p.encryptBatch(b.buf, b.offs, b.lens, b.count));
      d.uapi = await UapiServer.listen(tun.name, {
        get: () => d.snapshot(),
        set: (ops) => d.set(ops),
      }, { socketDir: opts.socketDir, onError: (e) => log('error', `uapi: ${String(e)}`) });
      log('info', `interface ${tun.name} up: mtu ${mtu}, udp port ${port.port}, io ${tun.mechanism}, crypto ${opts.backend.name}${aeadNote}`);
      return d;
    } catch (e) {
      await port?.close();
      await tun.close();
      throw e;
    }
  }

  /** The UAPI socket path. */
  get socketPath(): string | null {
    return this.uapi?.socketPath ?? null;
  }

  private snapshot(): UapiDeviceSnapshot {
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
        await this.port.bind(plan.listenPort);
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
    return 0;
  }

  /** Stops serving: removes the UAPI socket, closes sockets and the TUN device. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.uapi?.close();
    await this.port.close();
    await this.tun.close();
  }
}
