/**
 * One ConnCheckRunner per bind address of ours, kept in step with what the configuration wants:
 * the shared bookkeeping of the in-tunnel check (one runner per tunnel address) and Liqo's
 * Geneve check (one per inner Geneve address). A runner no longer wanted is stopped; one still
 * wanted gets its new targets; a missing one is started, and a start that fails is reported to
 * the caller and tried again at the next sync. Owns the runners; stop() releases them.
 */
import type { ConnCheckRunner, ConnCheckTarget } from './conncheck-runner.js';

export type StartRunner = (bindAddress: string, targets: readonly ConnCheckTarget[]) => Promise<ConnCheckRunner>;

export class CheckRunners {
  private readonly runners = new Map<string, ConnCheckRunner>();

  /** Never throws: `onStartFailed` hears each runner that could not start. */
  async sync(
    want: ReadonlyMap<string, readonly ConnCheckTarget[]>,
    start: StartRunner,
    onStartFailed: (bindAddress: string, e: unknown) => void,
  ): Promise<void> {
    for (const [local, r] of [...this.runners]) {
      if (want.has(local)) continue;
      this.runners.delete(local);
      await r.stop();
    }
    for (const [local, targets] of want) {
      const r = this.runners.get(local);
      if (r !== undefined) {
        r.setTargets(targets);
        continue;
      }
      try {
        this.runners.set(local, await start(local, targets));
      } catch (e) {
        onStartFailed(local, e);
      }
    }
  }

  get(bindAddress: string): ConnCheckRunner | undefined {
    return this.runners.get(bindAddress);
  }

  values(): IterableIterator<ConnCheckRunner> {
    return this.runners.values();
  }

  async stop(): Promise<void> {
    const rs = [...this.runners.values()];
    this.runners.clear();
    for (const r of rs) await r.stop();
  }
}
