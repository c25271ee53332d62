/**
 * Busy polling of the packet daemons (WEFT_BUSY_POLL_US: weft-wg, `weft up`, `weft k8s`), the kernel's `busy_poll` idea in
 * userspace: after a wake-up that found packets, a thread keeps draining its TUN queues and UDP
 * sockets for up to that many microseconds, yielding the CPU between rounds (sched_yield, so a
 * process it would otherwise keep from running — the pod that answers, the peer — gets it), and
 * only then goes back to sleep in the event loop (native/weft_poll.c).
 *
 * Why: on an idle tunnel most of a packet's latency is waking threads from idle, not work. A
 * reply that comes back within the budget is taken without that wake-up. The cost is CPU: each
 * burst of packets is followed by up to the budget of polling, so traffic whose packets are
 * closer together than the budget keeps a core busy (yielding, but counted against a cgroup CPU
 * limit). Hence off by default; bench/RESULTS.md has the measured gain and cost.
 */
import { loadNativeIo } from './native.js';

/** The largest budget accepted (µs): beyond it timers and the control plane would wait too long. */
export const MAX_BUSY_POLL_US = 1000;

/** A WEFT_BUSY_POLL_US value that is not an integer 0..MAX_BUSY_POLL_US. */
export class BusyPollConfigError extends Error {
  override readonly name = 'BusyPollConfigError';
  constructor(value: string) {
    super(`WEFT_BUSY_POLL_US=${value}: expected an integer 0..${MAX_BUSY_POLL_US} (microseconds; 0 or unset: off)`);
  }
}

/** The budget for the WEFT_BUSY_POLL_US value `raw` (unset or empty: 0). Throws BusyPollConfigError. */
export function parseBusyPollUs(raw: string | undefined): number {
  const v = (raw ?? '').trim();
  if (v === '') return 0;
  if (!/^\d+$/.test(v) || Number(v) > MAX_BUSY_POLL_US) throw new BusyPollConfigError(v);
  return Number(v);
}

/** What applyBusyPoll set in this process (µs; 0: off or not applied). */
let inForce = 0;

/**
 * Sets the process's budget from env.WEFT_BUSY_POLL_US. Returns what is in force: the budget, or
 * 0 when off or when the native addon (which does the polling) is missing or predates it.
 */
export function applyBusyPoll(env: NodeJS.ProcessEnv = process.env): number {
  const us = parseBusyPollUs(env.WEFT_BUSY_POLL_US);
  const native = loadNativeIo();
  if (native === null || typeof native.setBusyPoll !== 'function') return (inForce = 0);
  native.setBusyPoll(us);
  return (inForce = us);
}

/** The budget in force for a daemon's start log (µs; 0: off). */
export function busyPollInForce(): number {
  return inForce;
}
