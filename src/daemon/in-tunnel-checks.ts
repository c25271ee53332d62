/**
 * The in-tunnel connection check of a gateway process (Liqo's conncheck): one ConnCheckRunner per
 * tunnel address of ours that the gateway carries (Gateway.tunnelAddresses()), pinging the peers
 * reached from it. Each report updates the tunnel's place in its peer's spread, logs changes of
 * value, and keeps tunnel 0's round trips for the latency histogram (bounded: the oldest go when
 * nobody scrapes). A runner that cannot bind is logged and left out (those peers fall back to
 * the handshake) and tried again at the next sync.
 */
import type { Logger } from 'pino';
import type { PeerCheckStatus } from '../control/conncheck.js';
import type { Gateway } from '../gateway/gateway.js';
import { CheckRunners } from './check-runners.js';
import { ConnCheckRunner, wallClockMs, type ConnCheckTarget } from './conncheck-runner.js';
import { errText } from './err-text.js';

/** Round trips kept for the histogram between two scrapes. */
const LATENCY_SAMPLES_MAX = 4096;

export interface InTunnelChecksOptions {
  readonly logger: Logger;
  /** The running gateway, or null (no data plane, or a node agent). */
  readonly gateway: () => Gateway | null;
  readonly netns?: string;
  readonly intervalMs?: number;
  readonly lossThreshold?: number;
}

export class InTunnelChecks {
  /** Runners by our tunnel address (bind address). */
  private readonly runners = new CheckRunners();
  /** Last value logged per peer (the check reports every latency; the log shows changes). */
  private readonly checkValues = new Map<string, string>();
  /** Measured round trips (µs) not yet observed by the latency histogram. */
  private latencySamples: { clusterId: string; latencyUs: number }[] = [];
  /** Samples dropped because nobody scraped them in time (the oldest go). */
  latencySamplesDropped = 0;

  constructor(private readonly o: InTunnelChecksOptions) {}

  /** Hands the samples measured since the last call to the histogram. */
  takeLatencySamples(): { clusterId: string; latencyUs: number }[] {
    const out = this.latencySamples;
    this.latencySamples = [];
    return out;
  }

  /**
   * Makes the runners match the gateway's tunnel addresses: one per address of ours, checking the
   * peers reached from it. Never throws: a runner that cannot bind (port 12345 taken, address
   * missing) is logged and retried at the next configuration change.
   */
  async sync(): Promise<void> {
    const gateway = this.o.gateway();
    if (gateway === null) {
      await this.stop();
      return;
    }
    const byLocal = new Map<string, ConnCheckTarget[]>();
    for (const t of gateway.tunnelAddresses().peers) {
      const list = byLocal.get(t.local) ?? [];
      list.push({ clusterId: t.clusterId, address: t.remote });
      byLocal.set(t.local, list);
    }
    await this.runners.sync(
      byLocal,
      async (local, targets) => {
        const r = await ConnCheckRunner.start({
          bindAddress: local,
          targets,
          canSend: (address) => {
            const gw = this.o.gateway();
            const t = gw?.tunnelAddresses().peers.find((p) => p.local === local && p.remote === address);
            return gw === null || t === undefined || gw.hasEndpoint(t.name, t.tunnel);
          },
          ...(this.o.netns !== undefined ? { netns: this.o.netns } : {}),
          ...(this.o.intervalMs !== undefined ? { intervalMs: this.o.intervalMs } : {}),
          ...(this.o.lossThreshold !== undefined ? { lossThreshold: this.o.lossThreshold } : {}),
          onUpdate: (id, st) => {
            // Several tunnels: each has its own check; one that fails leaves the peer's spread.
            const gw = this.o.gateway();
            const t = gw?.tunnelAddresses().peers.find((p) => p.local === local && p.clusterId === id);
            if (gw != null && t !== undefined)
              gw.setTunnelCheck(t.name, t.tunnel, st.value, st.latencyMs, st.peerSpreads);
            const tunnel0 = t === undefined || t.tunnel === 0;
            // The peer's latency (Liqo's histogram) is tunnel 0's, as its Connection's.
            if (tunnel0 && st.value === 'Connected' && st.latencyMs > 0) this.recordLatency(id, st.latencyMs);
            const key = tunnel0 ? id : `${id}/${t.tunnel}`;
            if (this.checkValues.get(key) === st.value) return;
            this.checkValues.set(key, st.value);
            const log =
              st.value === 'Error' ? this.o.logger.warn.bind(this.o.logger) : this.o.logger.info.bind(this.o.logger);
            log(
              {
                peer: id,
                ...(t !== undefined && t.tunnel > 0 ? { tunnel: t.tunnel } : {}),
                value: st.value,
                latencyMs: st.latencyMs,
              },
              'connection check',
            );
          },
          sessionStartedAt: (id) => this.sessionStartedAt(id),
          // Without a host device our tunnel address lives on the in-process host lane.
          ...(gateway.hostLane !== null ? { endpoint: gateway.hostLane.bindUdp.bind(gateway.hostLane) } : {}),
        });
        this.o.logger.info({ bind: local, peers: targets.map((t) => t.clusterId) }, 'connection check running');
        return r;
      },
      (local, e) =>
        this.o.logger.warn(
          { err: errText(e), bind: local },
          'connection check not started; those peers report the handshake instead',
        ),
    );
  }

  private recordLatency(clusterId: string, latencyMs: number): void {
    if (this.latencySamples.length >= LATENCY_SAMPLES_MAX) {
      this.latencySamples.shift();
      this.latencySamplesDropped++;
    }
    this.latencySamples.push({ clusterId, latencyUs: Math.round(latencyMs * 1000) });
  }

  /** When the peer's current WireGuard session began, on the check's clock (by its age: the gateway's clock is Date.now). */
  private sessionStartedAt(clusterId: string): number | undefined {
    const last = this.o
      .gateway()
      ?.peers()
      .find((p) => p.clusterId === clusterId)?.lastHandshakeAtMs;
    return last === undefined ? undefined : wallClockMs() - (Date.now() - last);
  }

  /** Stops every runner. */
  async stop(): Promise<void> {
    this.checkValues.clear();
    await this.runners.stop();
  }

  /**
   * The in-tunnel check's view of a peer, when a runner checks it: tunnel 0's, as Liqo's gateway
   * checks (and its Connection reports) its first tunnel only.
   */
  status(clusterId: string): PeerCheckStatus | undefined {
    const first = this.o
      .gateway()
      ?.tunnelAddresses()
      .peers.find((p) => p.clusterId === clusterId && p.tunnel === 0);
    if (first !== undefined) {
      const st = this.runners.get(first.local)?.status(clusterId);
      if (st !== undefined) return st;
    }
    for (const r of this.runners.values()) {
      const st = r.status(clusterId);
      if (st !== undefined) return st;
    }
    return undefined;
  }
}
