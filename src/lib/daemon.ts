/**
 * Library entry points that attach engines to the operating system: a WireGuard device on a
 * TUN interface and a UDP socket (`startWgDaemon`).
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { getCryptoBackend, type CryptoBackendName } from '../crypto/select.js';
import type { WgDaemon } from '../gateway/wg-daemon.js';
import { WireGuardDevice, type WireGuardPeerOptions } from './wireguard.js';

export interface StartWgDaemonOptions {
  /** TUN interface name (≤ 15 bytes). */
  readonly ifname: string;
  /** Base64 or 32 bytes; absent = configure later (UAPI: `wg set IFNAME private-key …`). */
  readonly privateKey?: string | Uint8Array;
  /** UDP port (0 or absent = any free port). */
  readonly listenPort?: number;
  readonly peers?: readonly WireGuardPeerOptions[];
  /** TUN MTU (default 1420). */
  readonly mtu?: number;
  readonly backend?: CryptoBackendName | CryptoBackend;
  /** Directory of the UAPI socket (default /var/run/wireguard), so `wg show IFNAME` works. */
  readonly socketDir?: string;
  /** Create the TUN device inside this network namespace (name under /run/netns, or a path). */
  readonly netns?: string;
  readonly log?: (level: 'error' | 'info' | 'debug', msg: string) => void;
}

/**
 * Starts a WireGuard interface in this process: a TUN device, the engine on a UDP socket and the
 * UAPI socket for wg(8) — what `weft-wg` runs. Needs CAP_NET_ADMIN (TunPermissionError
 * otherwise). Stop it with `daemon.stop()`. Read its state with `wireGuardStatus(daemon.device)`.
 */
export async function startWgDaemon(options: StartWgDaemonOptions): Promise<WgDaemon> {
  const backend = typeof options.backend === 'object' ? options.backend : getCryptoBackend(options.backend ?? 'auto');
  // Loaded on first use: the TUN and socket layers bring native code (koffi, the I/O addon).
  const { WgDaemon: Daemon } = await import('../gateway/wg-daemon.js');
  const daemon = await Daemon.start({
    ifname: options.ifname,
    backend,
    ...(options.mtu !== undefined ? { mtu: options.mtu } : {}),
    ...(options.socketDir !== undefined ? { socketDir: options.socketDir } : {}),
    ...(options.netns !== undefined ? { netns: options.netns } : {}),
    ...(options.log !== undefined ? { log: options.log } : {}),
  });
  try {
    if (options.listenPort !== undefined && options.listenPort !== 0) {
      await daemon.port.bind(options.listenPort);
    }
    daemon.device.listenPort = daemon.port.port;
    if (options.privateKey !== undefined || (options.peers?.length ?? 0) > 0) {
      // Configure through a facade over the daemon's own engine (same validation, same code).
      const cfg = WireGuardDevice.wrap(daemon.device);
      if (options.privateKey !== undefined) cfg.setPrivateKey(options.privateKey);
      for (const p of options.peers ?? []) cfg.addPeer(p);
    }
    daemon.port.poll();
    return daemon;
  } catch (e) {
    await daemon.stop();
    throw e;
  }
}
