/**
 * The owner thread's side of a data path shared with worker threads (shard.ts): what the
 * workers report is folded into the Device that owns handshakes, timers and configuration, and
 * the Device's data-path state is cut into the snapshot the workers run on. No I/O.
 *
 * - foldActivity: a worker's per-peer counters and packet times (shared-sessions.ts activity
 *   rows) become the events timers.ts expects, in the order they happened, and the byte
 *   counters `wg show` reports (exact: every worker's row summed into the peer's).
 * - confirmSession: the first transport message under a responder's `next` keypair arrived at
 *   a worker: promote it (receivedWithKeypair), as receive.ts does on this thread.
 * - shardSnapshot: peers, endpoints, allowed IPs and the sessions with a shared slot.
 */
import type { Prefix } from '../packet/addr.js';
import type { DeviceState } from './device-state.js';
import { receivedWithKeypair, roam } from './handshake.js';
import type { Keypair } from './keypair.js';
import { keyHex, type Endpoint, type Peer } from './peer.js';
import { keepKeyFreshReceiving } from './receive.js';
import { keepKeyFreshSending, sendStagedPackets } from './send.js';

/** What one fold reports for a peer: byte/packet deltas and the newest packet times (0: none new). */
export interface PeerActivity {
  rxBytes: number;
  txBytes: number;
  rxPackets: number;
  txPackets: number;
  dataSent: number;
  authSent: number;
  dataReceived: number;
  authReceived: number;
}

export function newPeerActivity(): PeerActivity {
  return {
    rxBytes: 0,
    txBytes: 0,
    rxPackets: 0,
    txPackets: 0,
    dataSent: 0,
    authSent: 0,
    dataReceived: 0,
    authReceived: 0,
  };
}

/** Applies workers' activity to `peer` (its counters, its timers, rekey-on-send/receive). */
export function foldActivity(s: DeviceState, peer: Peer, a: PeerActivity, now: number): void {
  if (peer.removed) return;
  peer.rxBytes += a.rxBytes;
  peer.txBytes += a.txBytes;
  peer.rxPackets += a.rxPackets;
  peer.txPackets += a.txPackets;
  const t = peer.timers;
  // The four events in time order; on a tie, sending before receiving (a request, its answer).
  const ev = [
    [a.authSent, 0],
    [a.dataSent, 1],
    [a.authReceived, 2],
    [a.dataReceived, 3],
  ].filter((e) => e[0] > 0);
  ev.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  for (const [at, kind] of ev) {
    t.anyAuthenticatedPacketTraversal(at, peer.persistentKeepalive);
    if (kind === 0) t.anyAuthenticatedPacketSent();
    else if (kind === 1) t.dataSent(at);
    else if (kind === 2) t.anyAuthenticatedPacketReceived();
    else t.dataReceived(at);
  }
  if (a.dataSent > 0 || a.authSent > 0) keepKeyFreshSending(s, peer, now);
  if (a.authReceived > 0) keepKeyFreshReceiving(s, peer, now);
}

/**
 * A worker decrypted the first message under the session with our index `localIndex`: if it
 * is the peer's `next` (responder) keypair, it becomes current. Returns the peer, or null.
 */
export function confirmSession(s: DeviceState, localIndex: number, now: number): Peer | null {
  const e = s.indexTable.get(localIndex);
  if (e === undefined || e.keypair === null) return null;
  if (receivedWithKeypair(s, e.peer, e.keypair)) {
    e.peer.timers.handshakeComplete();
    e.peer.lastHandshakeMs = now;
    sendStagedPackets(s, e.peer, now);
  }
  return e.peer;
}

/** A worker saw `peer` authenticated from `from` (roaming). */
export function roamPeer(peer: Peer, from: Endpoint): void {
  if (!peer.removed) roam(peer, from);
}

/** One session as a worker uses it. */
export interface ShardSessionSpec {
  readonly slot: number;
  readonly localIndex: number;
  readonly remoteIndex: number;
  readonly created: number;
  readonly sendKey: Uint8Array;
  readonly receiveKey: Uint8Array;
  /** The responder's unconfirmed keypair: its first message is reported (confirmSession). */
  readonly next: boolean;
}

export interface ShardPeerSpec {
  /** The peer's activity-row slot. */
  readonly slot: number;
  readonly endpoint: Endpoint | null;
  readonly allowedIps: readonly Prefix[];
  /** The session to send with (the current keypair, if shared and not expired for sending). */
  readonly send: ShardSessionSpec | null;
  /** Sessions to receive with (current, previous, next: those with a shared slot). */
  readonly receive: readonly ShardSessionSpec[];
}

/** The data-path state the workers run on; a worker switches to a whole new one at once. */
export interface ShardSnapshot {
  readonly version: number;
  readonly mtu: number;
  /** The device's public key (workers key their mac1/cookie checks with it); null without a private key. */
  readonly publicKey: Uint8Array | null;
  readonly peers: readonly ShardPeerSpec[];
}

function sessionSpec(kp: Keypair, next: boolean): ShardSessionSpec {
  return {
    slot: kp.sharedSlot,
    localIndex: kp.localIndex,
    remoteIndex: kp.remoteIndex,
    created: kp.created,
    sendKey: Uint8Array.from(kp.sendKey),
    receiveKey: Uint8Array.from(kp.receiveKey),
    next,
  };
}

/**
 * The snapshot of `s`'s data path for the workers. `peerSlot` names each peer's activity row
 * (the owner assigns them). Sessions without a shared slot are left out: their traffic reaches
 * the owner, which handles it itself.
 */
export function shardSnapshot(
  s: DeviceState,
  version: number,
  peerSlot: (p: Peer) => number,
  allowedIpsOf: (p: Peer) => Prefix[],
  now: number,
): ShardSnapshot {
  const peers: ShardPeerSpec[] = [];
  for (const p of s.peerList) {
    if (p.removed) continue;
    const kps = p.keypairs;
    const cur = kps.current;
    const receive: ShardSessionSpec[] = [];
    for (const kp of [cur, kps.previous, kps.next]) {
      if (kp !== null && kp.sharedSlot >= 0) receive.push(sessionSpec(kp, kp === kps.next));
    }
    const send =
      cur !== null && cur.sharedSlot >= 0 && cur.canSend(now) && p.stagedCount === 0 ? sessionSpec(cur, false) : null;
    peers.push({ slot: peerSlot(p), endpoint: p.endpoint, allowedIps: allowedIpsOf(p), send, receive });
  }
  const publicKey = s.identity.hasKey ? Uint8Array.from(s.identity.publicKey) : null;
  return { version, mtu: s.mtu, publicKey, peers };
}

/** What makes two snapshots differ, as text (the owner publishes only on change). */
export function snapshotKey(snap: ShardSnapshot): string {
  let k = `${snap.mtu}|${snap.publicKey === null ? '-' : keyHex(snap.publicKey)}`;
  for (const p of snap.peers) {
    k += `|${p.slot}@${p.endpoint === null ? '-' : `${p.endpoint.address}:${p.endpoint.port}`}/`;
    k += p.allowedIps.map((a) => `${a.addr.join('.')}/${a.prefixLen}`).join(',');
    k += `/s${p.send === null ? '-' : p.send.slot}`;
    for (const r of p.receive) k += `/r${r.slot}${r.next ? 'n' : ''}`;
  }
  return k;
}
