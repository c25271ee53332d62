/**
 * The per-device state of wake.ts (handshakes started on unknown-session transport): apart so
 * DeviceState can hold it without importing the handshake code.
 */
import { TokenBucket } from '../ratelimit/token-bucket.js';

/** Device-wide initiations started by unknown-session transport: 4 per second, burst 8. */
export const WAKE_RATE_PER_SECOND = 4;
export const WAKE_BURST = 8;

/** What the wake logic keeps per device (a field of DeviceState). */
export class WakeState {
  readonly bucket = new TokenBucket(WAKE_RATE_PER_SECOND, WAKE_BURST);
  /** Initiations started because transport data arrived for an unknown session. */
  initiations = 0;
  /** Unknown-session transport from a peer's address not answered: pacing or the device-wide limit. */
  suppressed = 0;
}
