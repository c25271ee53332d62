/**
 * Device-level timer polling (wireguard-go's timers.go expiry handlers): run each peer's
 * expired timers in deadline order, and report the next deadline. Per-peer timer state and
 * its arming rules live in timers.ts.
 */
import { KEEPALIVE_TIMEOUT, MAX_TIMER_HANDSHAKES, ZERO_KEY_MATERIAL_AFTER } from './constants.js';
import type { DeviceState } from './device-state.js';
import { sendHandshakeInitiation, zeroAndFlushAll } from './handshake.js';
import type { Peer } from './peer.js';
import { sendKeepalive } from './send.js';
import { flushStaged } from './staging.js';

const NEVER = Number.POSITIVE_INFINITY;

/** Runs every timer that expired at `now` (in deadline order per peer). */
export function poll(s: DeviceState, now: number): void {
  const list = s.peerList;
  for (let i = 0; i < list.length; i++) {
    const peer = list[i];
    if (!peer.removed) pollPeer(s, peer, now);
  }
}

/**
 * Sets s.nextDeadline to the earliest timer deadline over all peers (Infinity when nothing is
 * pending). Stored rather than returned: a double returned from a call that is not inlined is
 * boxed, and this runs after every batch (16 B per call, measured under vitest's module
 * transform, where imported functions are called through a namespace object).
 */
export function updateNextDeadline(s: DeviceState): void {
  let t = NEVER;
  const list = s.peerList;
  for (let i = 0; i < list.length; i++) {
    const d = list[i].timers.earliest();
    if (d < t) t = d;
  }
  s.nextDeadline = t;
}

function pollPeer(s: DeviceState, peer: Peer, now: number): void {
  const t = peer.timers;
  // Each expiry re-arms timers only into the future, so this terminates; the bound is a guard.
  for (let guard = 0; guard < 32; guard++) {
    let which = -1;
    let best = now;
    if (t.retransmitHandshake <= best) {
      which = 0;
      best = t.retransmitHandshake;
    }
    if (t.sendKeepalive < best || (which < 0 && t.sendKeepalive <= best)) {
      which = 1;
      best = t.sendKeepalive;
    }
    if (t.newHandshake < best || (which < 0 && t.newHandshake <= best)) {
      which = 2;
      best = t.newHandshake;
    }
    if (t.zeroKeyMaterial < best || (which < 0 && t.zeroKeyMaterial <= best)) {
      which = 3;
      best = t.zeroKeyMaterial;
    }
    if (t.persistentKeepalive < best || (which < 0 && t.persistentKeepalive <= best)) {
      which = 4;
      best = t.persistentKeepalive;
    }
    switch (which) {
      case 0:
        t.retransmitHandshake = NEVER;
        expiredRetransmitHandshake(s, peer, now);
        break;
      case 1:
        t.sendKeepalive = NEVER;
        sendKeepalive(s, peer, now);
        if (t.needAnotherKeepalive) {
          t.needAnotherKeepalive = false;
          t.sendKeepalive = now + KEEPALIVE_TIMEOUT;
        }
        break;
      case 2:
        t.newHandshake = NEVER;
        sendHandshakeInitiation(s, peer, false, now);
        break;
      case 3:
        t.zeroKeyMaterial = NEVER;
        zeroAndFlushAll(s, peer);
        break;
      case 4:
        t.persistentKeepalive = NEVER;
        if (peer.persistentKeepalive > 0) sendKeepalive(s, peer, now);
        break;
      default:
        return;
    }
  }
}

function expiredRetransmitHandshake(s: DeviceState, peer: Peer, now: number): void {
  const t = peer.timers;
  if (t.handshakeAttempts > MAX_TIMER_HANDSHAKES) {
    // Give up: drop what waited for a session, and erase any residue of the attempt later.
    t.sendKeepalive = NEVER;
    flushStaged(s, peer);
    if (t.zeroKeyMaterial === NEVER) t.zeroKeyMaterial = now + ZERO_KEY_MATERIAL_AFTER;
    return;
  }
  t.handshakeAttempts++;
  sendHandshakeInitiation(s, peer, true, now);
}
