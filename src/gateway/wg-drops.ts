/**
 * weft-wg's drop counters by name, for the daemon's log: UAPI has no field for them (wireguard-go
 * counts none) and `wg` would not show one, so the daemon logs what grew once a minute and the
 * totals when it stops. Names are the gateway's (`weft show`): the device's reasons, the port's
 * refused sends and full handshake queue, TUN write errors.
 *
 * Allocates: called once a minute and at stop, never per packet.
 */
import { DROP_REASON_COUNT, DROP_REASON_NAMES } from '../wireguard/drops.js';
import type { WgDaemon } from './wg-daemon.js';

/** How often the daemon logs the drops that grew. */
export const DROP_LOG_INTERVAL_MS = 60_000;

/** Every non-zero drop counter of `d` by name (the workers' drops folded in first). */
export function wgDaemonDrops(d: WgDaemon): Record<string, number> {
  d.workers?.foldNow();
  const out: Record<string, number> = {};
  const put = (k: string, v: number): void => {
    if (v > 0) out[k] = v;
  };
  for (let i = 0; i < DROP_REASON_COUNT; i++) put(DROP_REASON_NAMES[i]!, d.device.drops[i]!);
  const w = d.port.stats;
  put('handshake_queue_full', w.handshakesDroppedQueueFull);
  put('send_failed', w.sendFailures);
  put('no_socket', w.noSocketForFamily);
  put('tun_write_failed', d.tun.stats.txErrors);
  return out;
}

/** What grew between successive readings (the first reading counts from zero). */
export class DropDelta {
  private last: Record<string, number> = {};

  /** The counters of `now` that grew since the previous call, by how much; null if none did. */
  since(now: Record<string, number>): Record<string, number> | null {
    let grew: Record<string, number> | null = null;
    for (const [k, v] of Object.entries(now)) {
      const inc = v - (this.last[k] ?? 0);
      if (inc > 0) (grew ??= {})[k] = inc;
    }
    this.last = { ...now };
    return grew;
  }
}

/** "invalid_mac1 3, too_short 1" (by count, then name). */
export function formatDrops(d: Record<string, number>): string {
  return Object.entries(d)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}
