/**
 * The per-peer bounded queue of packets waiting for a session (wireguard-go's staged queue):
 * ring of buffer-pool slots in Peer.stagedSlots/stagedLengths; slot -1 is a keepalive
 * placeholder. Full queue: the oldest packet is dropped (counted).
 */
import type { DeviceState } from './device-state.js';
import { DROP_PACKET_TOO_BIG, DROP_POOL_EXHAUSTED, DROP_STAGED_FLUSHED, DROP_STAGED_QUEUE_FULL } from './drops.js';
import { TRANSPORT_HEADER_SIZE } from './messages.js';
import type { Peer } from './peer.js';

/** Copies a packet into the peer's staging queue. False (and a counted drop in s.lastStageDrop) if impossible. */
export function stage(s: DeviceState, peer: Peer, buf: Uint8Array, off: number, len: number): boolean {
  if (len > s.maxPacketSize) {
    s.drops[DROP_PACKET_TOO_BIG]++;
    s.lastStageDrop = DROP_PACKET_TOO_BIG;
    return false;
  }
  if (peer.stagedCount === peer.stagedCapacity) {
    const oldest = unstage(s, peer);
    if (oldest.slot >= 0) s.pool.release(oldest.slot);
    s.drops[DROP_STAGED_QUEUE_FULL]++;
  }
  const slot = s.pool.acquire();
  if (slot < 0) {
    s.drops[DROP_POOL_EXHAUSTED]++;
    s.lastStageDrop = DROP_POOL_EXHAUSTED;
    return false;
  }
  s.pool.buffer(slot).set(buf.subarray(off, off + len), TRANSPORT_HEADER_SIZE);
  enstage(peer, slot, len);
  return true;
}

export function enstage(peer: Peer, slot: number, len: number): void {
  const i = (peer.stagedHead + peer.stagedCount) % peer.stagedCapacity;
  peer.stagedSlots[i] = slot;
  peer.stagedLengths[i] = len;
  peer.stagedCount++;
}

/** Takes the oldest staged entry; the result is s.unstaged, valid until the next call. */
export function unstage(s: DeviceState, peer: Peer): { slot: number; length: number } {
  const i = peer.stagedHead;
  s.unstaged.slot = peer.stagedSlots[i];
  s.unstaged.length = peer.stagedLengths[i];
  peer.stagedHead = (i + 1) % peer.stagedCapacity;
  peer.stagedCount--;
  return s.unstaged;
}

export function flushStaged(s: DeviceState, peer: Peer): void {
  while (peer.stagedCount > 0) {
    const u = unstage(s, peer);
    if (u.slot >= 0) {
      s.pool.release(u.slot);
      s.drops[DROP_STAGED_FLUSHED]++;
    }
  }
}
