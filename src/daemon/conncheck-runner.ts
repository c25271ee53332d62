/**
 * Runs the in-tunnel connection check (src/control/conncheck.ts, Liqo's wire format) on a real
 * UDP socket: one socket on CONNCHECK_PORT, a timer at the checker's next deadline, every
 * received datagram handed to the checker (PINGs are answered, PONGs measured).
 *
 * Addresses (Liqo's, src/control/tunnel-address.ts): a gateway SERVER's tunnel address is
 * 169.254.18.1, the CLIENT's 169.254.18.2; each pings the other. The gateway puts ours on its
 * local TUN and carries both through the tunnel without NAT; the runtime binds one runner to
 * each of our tunnel addresses (`bindAddress`), so PINGs leave with that source and PONGs
 * return to it.
 *
 * A gateway without a host device (the in-process host lane, src/pipelines/host-lane.ts) has no
 * kernel address to bind: the runner then takes the lane's endpoint on our tunnel address
 * (`endpoint`), and PINGs and PONGs go through the router in process.
 *
 * Owns one socket (or endpoint) and at most one timer; `stop()` releases both. Send errors (no
 * route, socket buffer full) are counted, never thrown.
 */
import { createSocket, type Socket } from 'node:dgram';
import {
  CONNCHECK_MAX_MESSAGE,
  CONNCHECK_PORT,
  ConnChecker,
  type ConnCheckerOptions,
  type PeerCheckStatus,
} from '../control/conncheck.js';
import { withNetnsAsync } from '../kernel/netns.js';
import type { LocalUdpEndpoint } from '../pipelines/host-lane.js';

/**
 * Epoch milliseconds with sub-millisecond resolution: the process's time origin plus the
 * monotonic performance clock. Both ends of a round trip are read here, so a wall-clock step
 * (NTP) after start cannot distort a measured latency.
 */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface ConnCheckTarget {
  readonly clusterId: string;
  /** The peer's in-tunnel address the PINGs go to. */
  readonly address: string;
}

export interface ConnCheckRunnerOptions {
  /** Bind address (default 0.0.0.0: the kernel picks the source by route). */
  readonly bindAddress?: string;
  /** Open the socket inside this network namespace (in-process tests; needs the native addon). */
  readonly netns?: string;
  /** Default CONNCHECK_PORT (12345). */
  readonly port?: number;
  /** Port the peers listen on (default: the same as `port`). */
  readonly peerPort?: number;
  readonly targets?: readonly ConnCheckTarget[];
  readonly intervalMs?: number;
  readonly lossThreshold?: number;
  readonly onUpdate?: ConnCheckerOptions['onUpdate'];
  /** When the peer's current WireGuard session began, on `clock` (see ConnChecker). */
  readonly sessionStartedAt?: ConnCheckerOptions['sessionStartedAt'];
  /**
   * Whether a datagram to `address` can leave now (default: always). A gateway answers false for
   * a peer it has no WireGuard endpoint for yet (a server before its client's first handshake):
   * the PING is not sent rather than dropped and counted by the tunnel; it still counts as
   * unanswered, so the status is what it would be.
   */
  readonly canSend?: (address: string) => boolean;
  /**
   * Wall-clock ms with a fraction (the timestamp travels in the message). Default
   * `wallClockMs`: Date.now has whole milliseconds, too coarse for Liqo's "850μs".
   */
  readonly clock?: () => number;
  /**
   * Bind this in-process endpoint instead of a kernel socket (a gateway without a host device:
   * `bindAddress` and `port` on its host lane, Gateway.hostLane.bindUdp).
   */
  readonly endpoint?: (address: string, port: number) => LocalUdpEndpoint;
}

export class ConnCheckRunner {
  readonly checker: ConnChecker;
  /** Datagrams the socket refused to send. */
  sendErrors = 0;
  /** Datagrams not sent because `canSend` said they could not leave. */
  heldBack = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly clock: () => number;
  private readonly targets = new Map<string, string>();

  private constructor(
    private readonly sock: Socket | null,
    opts: ConnCheckRunnerOptions,
    private readonly ep: LocalUdpEndpoint | null = null,
  ) {
    this.clock = opts.clock ?? wallClockMs;
    this.checker = new ConnChecker({
      // PINGs go to the peers' check port, PONGs back to the sender's port.
      send: (bytes, address, port) => {
        if (opts.canSend !== undefined && !opts.canSend(address)) {
          this.heldBack++;
          return;
        }
        if (this.ep !== null) {
          if (!this.ep.send(bytes, port, address)) this.sendErrors++;
          return;
        }
        this.sock!.send(bytes, port, address, (err) => {
          if (err) this.sendErrors++;
        });
      },
      port: opts.peerPort ?? opts.port ?? CONNCHECK_PORT,
      ...(opts.intervalMs !== undefined ? { intervalMs: opts.intervalMs } : {}),
      ...(opts.lossThreshold !== undefined ? { lossThreshold: opts.lossThreshold } : {}),
      ...(opts.onUpdate !== undefined ? { onUpdate: opts.onUpdate } : {}),
      ...(opts.sessionStartedAt !== undefined ? { sessionStartedAt: opts.sessionStartedAt } : {}),
    });
    if (ep !== null) {
      ep.onMessage = (msg, address, port) => {
        if (this.stopped) return;
        if (msg.length > CONNCHECK_MAX_MESSAGE) {
          this.checker.drops['too-large']++;
          return;
        }
        this.checker.receive(msg, address, port, this.clock());
        this.schedule();
      };
      return;
    }
    sock!.on('message', (msg, rinfo) => {
      if (this.stopped) return;
      if (msg.length > CONNCHECK_MAX_MESSAGE) {
        this.checker.drops['too-large']++;
        return;
      }
      this.checker.receive(msg, rinfo.address, rinfo.port, this.clock());
      this.schedule();
    });
    sock!.on('error', () => {
      /* reported through sendErrors; the socket stays open */
    });
  }

  /** Binds the socket and starts checking `targets`. Rejects when the port cannot be bound. */
  static async start(opts: ConnCheckRunnerOptions = {}): Promise<ConnCheckRunner> {
    const bind = opts.bindAddress ?? '0.0.0.0';
    if (opts.endpoint !== undefined) {
      const r = new ConnCheckRunner(null, opts, opts.endpoint(bind, opts.port ?? CONNCHECK_PORT));
      r.setTargets(opts.targets ?? []);
      return r;
    }
    // Created and bound inside the namespace: an IP literal binds without waiting for I/O
    // (withNetnsAsync's contract).
    const sock = await withNetnsAsync(opts.netns, async () => {
      const s = createSocket({ type: bind.includes(':') ? 'udp6' : 'udp4', reuseAddr: false });
      await new Promise<void>((resolve, reject) => {
        const fail = (e: Error): void => {
          try {
            s.close();
          } catch {
            /* never bound */
          }
          reject(e);
        };
        s.once('error', fail);
        s.bind(opts.port ?? CONNCHECK_PORT, bind, () => {
          s.removeListener('error', fail);
          resolve();
        });
      });
      return s;
    });
    const r = new ConnCheckRunner(sock, opts);
    r.setTargets(opts.targets ?? []);
    return r;
  }

  /** The bound UDP port. */
  get port(): number {
    return this.ep !== null ? this.ep.port : this.sock!.address().port;
  }

  /** Replaces the checked peers: new ones start at once, removed ones are forgotten. */
  setTargets(targets: readonly ConnCheckTarget[]): void {
    const now = this.clock();
    const want = new Map(targets.map((t) => [t.clusterId, t.address] as const));
    for (const [id, addr] of this.targets) {
      if (want.get(id) !== addr) {
        this.checker.removePeer(id);
        this.targets.delete(id);
      }
    }
    for (const [id, addr] of want) {
      if (!this.targets.has(id)) {
        this.checker.addPeer(id, addr, now);
        this.targets.set(id, addr);
      }
    }
    this.schedule();
  }

  status(clusterId: string): PeerCheckStatus | undefined {
    return this.checker.status(clusterId);
  }

  /** The checked peers: id → address. */
  targetEntries(): IterableIterator<[string, string]> {
    return this.targets.entries();
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const next = this.checker.nextDeadline();
    if (!Number.isFinite(next)) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        if (this.stopped) return;
        this.checker.poll(this.clock());
        this.schedule();
      },
      Math.max(0, next - this.clock()),
    );
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.ep !== null) this.ep.close();
    else await new Promise<void>((resolve) => this.sock!.close(() => resolve()));
  }
}
