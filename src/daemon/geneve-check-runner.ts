/**
 * Runs Liqo's Geneve health check (src/control/geneve-check.ts) on real sockets: one
 * ConnCheckRunner per inner address of ours (bound to it, UDP 54321 by default), pinging the far
 * end of each Geneve tunnel from it and answering the far end's PINGs. Both roles: the node
 * agent checks its gateways, the gateway its nodes.
 *
 * Never throws from sync(): a runner that cannot bind (the address is not on a device yet, the
 * port is taken) is logged once per attempt and retried at the next sync. Owns its sockets and
 * timers; stop() releases them.
 */
import type { Logger } from 'pino';
import type { WeftConfig } from '../control/config.js';
import type { PeerCheckStatus } from '../control/conncheck.js';
import {
  GENEVE_CHECK_INTERVAL_MS,
  GENEVE_CHECK_LOSS_THRESHOLD,
  GENEVE_CHECK_PORT,
  geneveCheckTargets,
  type GeneveCheckTarget,
} from '../control/geneve-check.js';
import { CheckRunners } from './check-runners.js';
import { ConnCheckRunner } from './conncheck-runner.js';

export interface GeneveCheckSettings {
  /** Default true. */
  readonly enabled?: boolean;
  readonly port?: number;
  readonly intervalMs?: number;
  readonly lossThreshold?: number;
}

export interface GeneveCheckOptions extends GeneveCheckSettings {
  readonly logger: Logger;
  /** Open the sockets in this network namespace (tests). */
  readonly netns?: string;
  /** Every update of a tunnel's view (a measured reply, or Error). */
  readonly onUpdate?: (name: string, status: PeerCheckStatus) => void;
}

export class GeneveCheck {
  private readonly runners = new CheckRunners();
  private readonly values = new Map<string, string>();

  constructor(private readonly o: GeneveCheckOptions) {}

  get intervalMs(): number {
    return this.o.intervalMs ?? GENEVE_CHECK_INTERVAL_MS;
  }

  get lossThreshold(): number {
    return this.o.lossThreshold ?? GENEVE_CHECK_LOSS_THRESHOLD;
  }

  /** Makes the runners match `config`'s tunnels (none when disabled). */
  async sync(config: WeftConfig | null): Promise<void> {
    const want =
      config === null || this.o.enabled === false ? new Map<string, GeneveCheckTarget[]>() : geneveCheckTargets(config);
    await this.runners.sync(
      want,
      async (local, targets) => {
        const r = await ConnCheckRunner.start({
          bindAddress: local,
          port: this.o.port ?? GENEVE_CHECK_PORT,
          targets,
          intervalMs: this.intervalMs,
          lossThreshold: this.lossThreshold,
          ...(this.o.netns !== undefined ? { netns: this.o.netns } : {}),
          onUpdate: (id, st) => {
            this.o.onUpdate?.(id, st);
            if (this.values.get(id) === st.value) return;
            this.values.set(id, st.value);
            const log = st.value === 'Error' ? this.o.logger.warn : this.o.logger.info;
            log.call(this.o.logger, { tunnel: id, value: st.value, latencyMs: st.latencyMs }, 'Geneve check');
          },
        });
        this.o.logger.info({ bind: local, tunnels: targets.map((t) => t.clusterId) }, 'Geneve check running');
        return r;
      },
      (local, e) =>
        this.o.logger.warn(
          { err: e instanceof Error ? e.message : String(e), bind: local },
          'Geneve check not started (retried at the next configuration change)',
        ),
    );
  }

  /** Each checked tunnel's view, by tunnel name. */
  statuses(): Map<string, PeerCheckStatus> {
    const out = new Map<string, PeerCheckStatus>();
    for (const r of this.runners.values())
      for (const [id] of r.targetEntries()) {
        const s = r.status(id);
        if (s !== undefined) out.set(id, s);
      }
    return out;
  }

  async stop(): Promise<void> {
    this.values.clear();
    await this.runners.stop();
  }
}
