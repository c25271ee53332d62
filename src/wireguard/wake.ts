/**
 * Handshakes a fresh device starts without waiting for the peer's timers (failover: a new
 * process, or a new active replica, has no session while the peer still sends on the old one).
 *
 * - initiateIdlePeers: at start, an initiation to every peer with a known endpoint and no
 *   usable session. wireguard-go initiates only when it has data to send (or for a persistent
 *   keepalive); a standard peer accepts an initiation at any time and switches to the new
 *   session once our first transport message (the confirming keepalive) arrives.
 * - wakeOnUnknownSession: transport data under a receiver index we do not know, from the
 *   endpoint of exactly one peer (or from anywhere, for a device whose only peer has no
 *   endpoint yet — the server side of a fresh replica), starts a handshake with that peer.
 *   The index itself names no peer, so the source address is the only hint; a source that
 *   matches no peer starts nothing. Bounded twice: the per-peer pacing of initiations (one per
 *   Rekey-Timeout, handshake.ts) and a device-wide token bucket, so garbage transport packets
 *   (spoofed or not) cannot make the device initiate without limit.
 *
 * A device whose handshakes are held (Device.holdHandshakes: a gateway replica handing its peers
 * over to its successor) starts neither: the unknown-session transport it then receives is the
 * peer already on the successor's session, and a handshake from here would take the peer back.
 *
 * Both are speculative: the peer may not be ready (not configured yet, still starting) and drop
 * the initiation. Data that then waits for a session must not wait out the Rekey-Timeout of a
 * handshake nobody asked for, so once per speculative initiation, and no sooner than
 * SPECULATIVE_RETRY_AFTER after it (past wireguard-go's 20 ms initiation-flood window, so a
 * peer that did take the first one takes this one too), data may initiate again at once.
 */
import { REKEY_TIMEOUT } from './constants.js';
import type { DeviceState } from './device-state.js';
import { sendHandshakeInitiation } from './handshake.js';
import type { Endpoint, Peer } from './peer.js';

/** A data-driven initiation may follow a speculative one this soon (ms), once. */
export const SPECULATIVE_RETRY_AFTER = 100;

/** True when `peer` can send on a session now (no handshake needed). */
function hasUsableSession(peer: Peer, now: number): boolean {
  const kp = peer.keypairs.current;
  return kp !== null && kp.canSend(now);
}

/**
 * Starts a handshake with every peer that has an endpoint and no usable session (subject to the
 * usual per-peer pacing). Returns how many initiations were queued.
 */
export function initiateIdlePeers(s: DeviceState, now: number): number {
  let n = 0;
  const list = s.peerList;
  for (let i = 0; i < list.length; i++) {
    const peer = list[i];
    if (peer.removed || peer.endpoint === null || hasUsableSession(peer, now)) continue;
    const before = peer.handshake.lastSentHandshake;
    sendHandshakeInitiation(s, peer, false, now);
    if (peer.handshake.lastSentHandshake !== before) {
      peer.timers.speculativeInitiation = true;
      n++;
    }
  }
  return n;
}

/** The one peer the source `from` can stand for, or null (see the module comment). */
function peerForSource(s: DeviceState, from: Endpoint): Peer | null {
  const list = s.peerList;
  let found: Peer | null = null;
  for (let i = 0; i < list.length; i++) {
    const ep = list[i].endpoint;
    if (ep === null || ep.port !== from.port || ep.address !== from.address) continue;
    if (found !== null) return null; // two peers at one endpoint: no way to tell
    found = list[i];
  }
  if (found !== null) return found;
  if (list.length === 1 && list[0].endpoint === null) return list[0];
  return null;
}

/**
 * Called for transport data whose receiver index is unknown (already counted as that drop).
 * Allocates only when it adopts the source as the endpoint of an endpoint-less single peer.
 */
export function wakeOnUnknownSession(s: DeviceState, from: Endpoint, now: number): void {
  const peer = peerForSource(s, from);
  if (peer === null || peer.removed) return;
  if (s.handshakesHeld || now - peer.handshake.lastSentHandshake < REKEY_TIMEOUT || !s.wake.bucket.take(now)) {
    s.wake.suppressed++;
    return;
  }
  // Unauthenticated, so only where the peer had no endpoint at all: nothing known is replaced,
  // and the peer's first authenticated packet roams it as usual.
  if (peer.endpoint === null) peer.endpoint = { address: from.address, port: from.port };
  sendHandshakeInitiation(s, peer, false, now);
  peer.timers.speculativeInitiation = true;
  s.wake.initiations++;
}

/**
 * Before a data-driven initiation: lifts the pacing of an unanswered speculative initiation
 * (once, and only SPECULATIVE_RETRY_AFTER after it; see the module comment).
 */
export function releaseSpeculativePacing(peer: Peer, now: number): void {
  const t = peer.timers;
  if (!t.speculativeInitiation || now - peer.handshake.lastSentHandshake < SPECULATIVE_RETRY_AFTER) return;
  t.speculativeInitiation = false;
  peer.handshake.lastSentHandshake = Number.NEGATIVE_INFINITY;
}
