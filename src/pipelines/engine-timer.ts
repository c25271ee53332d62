/**
 * The real-clock timer that drives a protocol engine's deadlines (handshake retries,
 * keepalives, key expiry): one Node timeout, armed for the earliest deadline but never further
 * than a horizon ahead. Apart from wireguard-port.ts because the policy of when to re-arm (and
 * when not to) is its own decision, explained below, and independent of sockets.
 */

/** Longest the timer sleeps before re-checking deadlines (see arm). */
const TIMER_HORIZON_MS = 1000;

export class EngineTimer {
  private timer: NodeJS.Timeout | null = null;
  private at = Number.POSITIVE_INFINITY;
  private closed = false;

  /**
   * `fire` runs the engine's due work when the timer goes off and returns the engine's next
   * deadline (ms on `clock`; +Infinity: none).
   */
  constructor(
    private readonly clock: () => number,
    private readonly fire: () => number,
  ) {}

  /** Arms for `deadline` when it is earlier than what the timer is armed for. */
  armBefore(deadline: number): void {
    if (deadline < this.at) this.arm(deadline);
  }

  /** Stops for good. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * Arms the timer for `deadline`, but never further than TIMER_HORIZON_MS ahead. Why: the
   * engine's earliest deadline moves back and forth by seconds with every packet (data sent:
   * new-handshake in 15 s; data received: keepalive in 10 s), and re-arming on each move costs
   * a clearTimeout/setTimeout pair and a Timeout object per packet. A timer at most 1 s ahead is
   * only re-armed for deadlines inside that second (handshake retries, persistent keepalives of
   * 1 s); at idle it costs one wake-up per second while a session exists.
   */
  private arm(deadline: number): void {
    if (this.closed || !Number.isFinite(deadline)) return; // nothing pending: a running timer finds nothing to do
    const now = this.clock();
    const delay = Math.max(0, Math.min(deadline - now, TIMER_HORIZON_MS));
    if (this.timer !== null) clearTimeout(this.timer);
    this.at = now + delay;
    this.timer = setTimeout(this.onTimer, delay);
  }

  private readonly onTimer = (): void => {
    this.timer = null;
    this.at = Number.POSITIVE_INFINITY;
    if (this.closed) return;
    const next = this.fire();
    if (this.timer === null) this.arm(next);
  };
}
