/**
 * The timers of a resource watcher: one debounce, re-armed by every change, and the one-shot
 * restarts of failed informers; clear() cancels them all, so nothing fires after a stop.
 */
export class WatchTimers {
  private debounce: NodeJS.Timeout | undefined;
  private readonly once = new Set<NodeJS.Timeout>();

  /** Runs `fn` `ms` after the latest call (a run still pending is dropped). */
  debounced(ms: number, fn: () => void): void {
    if (this.debounce !== undefined) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      fn();
    }, ms);
  }

  /** Runs `fn` once after `ms`. */
  after(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.once.delete(t);
      fn();
    }, ms);
    this.once.add(t);
  }

  clear(): void {
    if (this.debounce !== undefined) clearTimeout(this.debounce);
    for (const t of this.once) clearTimeout(t);
    this.once.clear();
  }
}
