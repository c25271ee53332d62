/**
 * The heartbeat link between the replicas of one gateway (`weft k8s --leader-election=true`):
 * the I/O around TakeoverDecision (src/control/k8s/takeover-decision.ts) and the message codec
 * (heartbeat.ts).
 * - One UDP socket on --heartbeat-port (all addresses of the pod). Every `intervalMs` a
 *   heartbeat goes to each other replica: the pods the API server lists with the gateway's
 *   replica label (their status.podIP, refreshed every `peersRefreshMs`), plus every address a
 *   valid heartbeat came from (so an API outage keeps the link up).
 * - Datagrams that fail to verify are counted by reason, never logged one by one.
 * - The decision is ticked every intervalMs/2 and after each heartbeat; its actions go to
 *   `onTakeover` / `onCheckLease` (K8sMode turns them into Lease requests). A tick that comes
 *   late (this process stalled) decides only after the heartbeats queued meanwhile are read.
 * - A socket that cannot bind is logged once: the replicas then fail over by the Lease alone.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import { withNetnsAsync } from '../kernel/netns.js';
import { decodeHeartbeat, encodeHeartbeat, heartbeatKey, type HeartbeatDrop } from '../control/k8s/heartbeat.js';
import type { LeaderElector } from '../control/k8s/lease.js';
import { listReplicaAddresses, type LiqoGatewayIdentity } from '../control/k8s/liqo-gateway.js';
import type { K8sSettings } from './k8s-settings.js';
import type { ApiErrorLog } from './k8s-api-errors.js';
import type { HeartbeatStats } from './status.js';
import { TakeoverDecision, type ReplicaState, type TakeoverAction } from '../control/k8s/takeover-decision.js';

export interface HeartbeatLinkOptions {
  identity: string;
  port: number;
  /** Bind address (default all IPv4 addresses). */
  bindAddress?: string;
  /** Network namespace to open the socket in (tests; default this process's). */
  netns?: string;
  key: Uint8Array;
  intervalMs: number;
  windowMs: number;
  /** Largest accepted sender clock skew (default 5000 ms). */
  maxSkewMs?: number;
  /** Pod IPs of the replicas (ours may be among them: heartbeats to ourselves are ignored). */
  listPeers: () => Promise<string[]>;
  peersRefreshMs?: number;
  onTakeover: (holder: string, reason: 'silent' | 'leaving') => void;
  onCheckLease: (a: Extract<TakeoverAction, { kind: 'check-lease' }>) => void;
  onBindError: (e: unknown) => void;
  onPeersError?: (e: unknown) => void;
  /** Local monotonic clock (ms) and wall clock (ms since the epoch); injectable for tests. */
  now?: () => number;
  wallNow?: () => number;
}

export class HeartbeatLink {
  private readonly decision: TakeoverDecision;
  private sock: Socket | null = null;
  private state: ReplicaState = 'standby';
  private lastSentAt = 0;
  private readonly listed = new Set<string>();
  /** Addresses valid heartbeats came from, with the local time of the last one. */
  private readonly heardFrom = new Map<string, number>();
  private sendTimer: NodeJS.Timeout | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  private peersTimer: NodeJS.Timeout | undefined;
  private readonly now: () => number;
  private readonly wallNow: () => number;
  private lastTickAt = 0;
  private readonly counts = { sent: 0, received: 0, refused: 0 };
  private readonly dropped: Partial<Record<HeartbeatDrop, number>> = {};
  private waiters: (() => void)[] = [];
  private stopped = false;

  constructor(private readonly o: HeartbeatLinkOptions) {
    this.now = o.now ?? (() => performance.now());
    this.wallNow = o.wallNow ?? Date.now;
    this.decision = new TakeoverDecision(o.identity, { windowMs: o.windowMs, maxSkewMs: o.maxSkewMs ?? 5000 });
  }

  /** Binds the socket and starts sending; a bind failure goes to onBindError (no heartbeats). */
  async start(): Promise<void> {
    const sock = createSocket('udp4');
    sock.on('message', (msg, rinfo) => this.onMessage(msg, rinfo.address));
    sock.on('error', () => {}); // send errors to a vanished peer: the next refresh drops it
    try {
      await withNetnsAsync(
        this.o.netns,
        () =>
          new Promise<void>((resolve, reject) => {
            sock.once('error', reject);
            sock.bind(this.o.port, this.o.bindAddress ?? '0.0.0.0', () => {
              sock.off('error', reject);
              resolve();
            });
          }),
      );
    } catch (e) {
      sock.close();
      this.o.onBindError(e);
      return;
    }
    if (this.stopped) {
      sock.close();
      return;
    }
    this.sock = sock;
    await this.refreshPeers();
    this.sendTimer = setInterval(() => this.send(), this.o.intervalMs);
    const tickMs = Math.max(10, Math.floor(this.o.intervalMs / 2));
    this.lastTickAt = this.now();
    this.tickTimer = setInterval(() => this.tick(tickMs), tickMs);
    this.peersTimer = setInterval(() => void this.refreshPeers(), this.o.peersRefreshMs ?? 2000);
    this.send();
  }

  get running(): boolean {
    return this.sock !== null;
  }

  /** Whether we hold the Lease (a leader never takes over; it reads the Lease when another says it is active). */
  setLeading(v: boolean): void {
    this.decision.setLeading(v, this.now());
  }

  /**
   * Our state as the heartbeats say it; a change is sent at once. 'active' means forwarding
   * (the data plane up and the pod labelled): a leaving leader stops when it hears it.
   */
  setState(s: ReplicaState): void {
    if (s !== 'active') this.decision.setLeading(false, this.now());
    if (s === this.state) return;
    this.state = s;
    this.send();
  }

  /** Standby replicas heard within the takeover window. */
  standbys(): string[] {
    return this.decision.standbysHeard(this.now());
  }

  /**
   * Resolves with the identity of another replica heard as active after this call, or
   * undefined after `timeoutMs`.
   */
  async waitForOtherActive(timeoutMs: number): Promise<string | undefined> {
    const since = this.now();
    const deadline = since + timeoutMs;
    for (;;) {
      const who = this.decision.otherActiveSince(since);
      if (who !== undefined || this.now() >= deadline || this.sock === null) return who;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - this.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  stats(): HeartbeatStats {
    return {
      port: this.o.port,
      state: this.state,
      ...this.counts,
      dropped: { ...this.dropped },
      peers: this.peers(),
      lastActive: this.decision.lastActive,
    };
  }

  stop(): void {
    this.stopped = true;
    for (const t of [this.sendTimer, this.tickTimer, this.peersTimer]) if (t !== undefined) clearInterval(t);
    this.sock?.close();
    this.sock = null;
    for (const w of this.waiters.splice(0)) w();
  }

  private peers(): string[] {
    const horizon = this.now() - 10 * this.o.windowMs;
    for (const [a, at] of this.heardFrom) if (at < horizon) this.heardFrom.delete(a);
    return [...new Set([...this.listed, ...this.heardFrom.keys()])];
  }

  private async refreshPeers(): Promise<void> {
    try {
      const ips = await this.o.listPeers();
      this.listed.clear();
      for (const ip of ips) this.listed.add(ip);
    } catch (e) {
      this.o.onPeersError?.(e); // keep the last list
    }
  }

  private send(): void {
    const sock = this.sock;
    if (sock === null) return;
    const sentAt = Math.max(this.wallNow(), this.lastSentAt + 0.001);
    this.lastSentAt = sentAt;
    const msg = encodeHeartbeat(this.o.key, { from: this.o.identity, state: this.state, sentAt });
    for (const ip of this.peers()) {
      sock.send(msg, this.o.port, ip);
      this.counts.sent++;
    }
  }

  private onMessage(msg: Buffer, from: string): void {
    const h = decodeHeartbeat(this.o.key, msg);
    if (typeof h === 'string') {
      this.dropped[h] = (this.dropped[h] ?? 0) + 1;
      return;
    }
    if (!this.decision.accept(h, this.now(), this.wallNow())) {
      this.counts.refused++;
      return;
    }
    this.counts.received++;
    this.heardFrom.set(from, this.now());
    this.act();
    for (const w of this.waiters.splice(0)) w();
  }

  /**
   * The periodic decision. After this process stalled (the tick comes late), Node runs the
   * overdue timers before it reads the sockets: the heartbeats that arrived during the stall
   * are still queued, and deciding now would take the stall for the active replica's silence.
   * So a late tick decides in setImmediate, which runs after the pending datagrams are read.
   */
  private tick(tickMs: number): void {
    const now = this.now();
    const late = now - this.lastTickAt > 2 * tickMs;
    this.lastTickAt = now;
    if (late) setImmediate(() => this.act());
    else this.act();
  }

  private act(): void {
    if (this.sock === null || this.state === 'leaving') return;
    const a: TakeoverAction = this.decision.tick(this.now());
    if (a.kind === 'takeover') this.o.onTakeover(a.holder, a.reason);
    else if (a.kind === 'check-lease') this.o.onCheckLease(a);
  }
}

/** What replicaHeartbeat needs from K8sMode. */
export interface ReplicaHeartbeatOptions {
  settings: K8sSettings;
  liqo: LiqoGatewayIdentity;
  namespace: string;
  kubeConfig: KubeConfig;
  /** The gateway's WireGuard private key (base64): the heartbeat key is derived from it. */
  keyBase64: string;
  elector: LeaderElector;
  log: Logger;
  errors: ApiErrorLog;
  stopped: () => boolean;
  netns?: string;
}

/**
 * The heartbeat link of one replica of Liqo's gateway Deployment: peers are the gateway's pods
 * (listReplicaAddresses), a takeover is LeaderElector.takeOver, another active replica makes
 * the leader read the Lease at once. Not started.
 */
export function replicaHeartbeat(o: ReplicaHeartbeatOptions): HeartbeatLink {
  const s = o.settings;
  const log = o.log;
  // One read at a time: with an API server that answers slowly, reads asked every window/5
  // would queue behind each other (each may wait --lease-renew-deadline).
  let checking = false;
  return new HeartbeatLink({
    identity: s.identity,
    port: s.heartbeatPort,
    key: heartbeatKey(Buffer.from(o.keyBase64, 'base64'), s.leaseName!),
    intervalMs: s.heartbeatIntervalMs,
    windowMs: s.takeoverWindowMs,
    ...(o.netns !== undefined ? { netns: o.netns } : {}),
    listPeers: async () =>
      (await listReplicaAddresses(o.kubeConfig, o.namespace, o.liqo.name))
        .filter((p) => p.name !== s.podName)
        .map((p) => p.ip),
    onTakeover: (holder, reason) => {
      if (o.stopped()) return;
      log.warn(
        reason === 'leaving'
          ? `replica ${holder} is leaving: taking the Lease over`
          : `no heartbeat from the active replica ${holder} for ${s.takeoverWindowMs} ms: taking the Lease over`,
      );
      void o.elector.takeOver(holder).then((won) => {
        if (!won) log.info(`takeover from ${holder}: the Lease names another replica or was not writable`);
      });
    },
    onCheckLease: (a) => {
      if (a.reason === 'heard-active') log.info(`replica ${a.other} says it is active: reading the Lease now`);
      else if (a.first)
        log.info(
          `no heartbeat from the standby ${a.other}: reading the Lease until it is heard (it may have taken over)`,
        );
      if (checking) return;
      checking = true;
      const done = (): void => {
        checking = false;
      };
      void o.elector.checkNow().then(done, done);
    },
    onBindError: (e) =>
      log.warn(
        { err: e instanceof Error ? e.message : String(e) },
        `heartbeat port ${s.heartbeatPort} not available: failover by the Lease alone (--lease-duration)`,
      ),
    onPeersError: (e) => o.errors.warn(e, 'heartbeat peers'),
  });
}

/** SIGTERM handover: forwarding goes on this long after the standby said it is active. */
const HANDOVER_LINGER_MS = 200;

/**
 * A leaving leader that hears a standby: say "leaving" (the standby takes the Lease at once),
 * release the Lease, and keep forwarding until a standby says it is active or `timeoutMs`
 * passes. Returns the replica that took over, if one did.
 */
export async function handOver(
  hb: HeartbeatLink,
  elector: LeaderElector,
  timeoutMs: number,
  log: Logger,
): Promise<string | undefined> {
  const t0 = performance.now();
  hb.setState('leaving');
  const [who] = await Promise.all([hb.waitForOtherActive(timeoutMs), elector.stop({ release: true })]);
  // The Service and the node agents follow the label through their own watches: forward what
  // still arrives a little longer (within the handover bound).
  if (who !== undefined) await new Promise((r) => setTimeout(r, Math.min(HANDOVER_LINGER_MS, timeoutMs)));
  const ms = Math.round(performance.now() - t0);
  if (who !== undefined) log.info(`handed over to ${who} in ${ms} ms`);
  else log.warn(`no standby said it is active within ${ms} ms: stopping anyway`);
  return who;
}
