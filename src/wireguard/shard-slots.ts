/**
 * The owner's bookkeeping of the shared memory (shared-sessions.ts): which keypair slot each
 * session and which activity row each peer has, reused only once every worker has applied a
 * snapshot that no longer names them; and the fold of the workers' activity rows into per-peer
 * deltas. Owner thread only; no I/O.
 */
import type { Keypair, SessionSlots } from './keypair.js';
import type { Endpoint, Peer } from './peer.js';
import {
  ACT_AUTH_RECEIVED,
  ACT_AUTH_SENT,
  ACT_DATA_RECEIVED,
  ACT_DATA_SENT,
  ACT_FIELDS,
  ACT_RX_BYTES,
  ACT_RX_PACKETS,
  ACT_TX_BYTES,
  ACT_TX_PACKETS,
  KEYPAIR_SLOT_WORDS,
  SlotPool,
  activityRow,
  storeEndpoint,
  type SharedSessionBuffers,
} from './shared-sessions.js';
import { newPeerActivity, type PeerActivity } from './shard-owner.js';

const COUNTS = [ACT_RX_BYTES, ACT_TX_BYTES, ACT_RX_PACKETS, ACT_TX_PACKETS] as const;
const TIMES = [ACT_DATA_SENT, ACT_AUTH_SENT, ACT_DATA_RECEIVED, ACT_AUTH_RECEIVED] as const;

export class ShardSlots implements SessionSlots {
  /** The newest snapshot version handed to the workers. */
  published = 0;
  /** Sessions left to this thread because no slot was free (their traffic reaches the owner). */
  unshared = 0;
  private readonly keypairs: SlotPool;
  private readonly peerPool: SlotPool;
  private readonly words: Int32Array;
  private readonly act: Float64Array;
  private readonly acks: Int32Array;
  private readonly peerSlots = new Map<Peer, number>();
  private readonly eps: Int32Array;
  /** Per peer, the endpoint the shared record last got from this thread or a worker's roam. */
  private readonly knownEndpoint = new Map<Peer, Endpoint | null>();
  /** The activity values already folded, per (worker, peer slot) row. */
  private readonly folded: Float64Array;
  private readonly scratch = newPeerActivity();

  constructor(readonly buffers: SharedSessionBuffers) {
    this.keypairs = new SlotPool(buffers.keypairSlots);
    this.peerPool = new SlotPool(buffers.peerSlots);
    this.words = new Int32Array(buffers.keypairs);
    this.act = new Float64Array(buffers.activity);
    this.acks = new Int32Array(buffers.acks);
    this.eps = new Int32Array(buffers.endpoints);
    this.folded = new Float64Array(this.act.length);
  }

  /** The lowest snapshot version every worker has applied. */
  minAcked(): number {
    let m = Number.POSITIVE_INFINITY;
    for (let w = 0; w < this.buffers.workers; w++) m = Math.min(m, Atomics.load(this.acks, w));
    return m;
  }

  attach(kp: Keypair): void {
    const slot = this.keypairs.acquire(this.minAcked());
    if (slot < 0) {
      this.unshared++;
      return;
    }
    kp.attachShared(slot, this.words, slot * KEYPAIR_SLOT_WORDS);
  }

  release(kp: Keypair): void {
    if (kp.sharedSlot < 0) return;
    this.keypairs.release(kp.sharedSlot, this.published);
  }

  /** The activity row of `peer` (assigned on first use; -1 when none is free). */
  peerSlot(peer: Peer): number {
    let s = this.peerSlots.get(peer);
    if (s === undefined) {
      s = this.peerPool.acquire(this.minAcked());
      if (s < 0) return -1;
      for (let w = 0; w < this.buffers.workers; w++) {
        const row = activityRow(this.buffers, w, s);
        this.act.fill(0, row, row + ACT_FIELDS);
        this.folded.fill(0, row, row + ACT_FIELDS);
      }
      this.peerSlots.set(peer, s);
    }
    return s;
  }

  /**
   * Writes the endpoint of every peer whose endpoint changed on this thread (configuration, a
   * handshake from a new address) into its shared record; before a snapshot naming the peer
   * is published, so a worker never reads a record older than its snapshot.
   */
  syncEndpoints(peers: readonly Peer[]): void {
    for (const p of peers) {
      const s = this.peerSlots.get(p);
      if (s === undefined || p.removed) continue;
      if (this.knownEndpoint.get(p) === p.endpoint && this.knownEndpoint.has(p)) continue;
      this.knownEndpoint.set(p, p.endpoint);
      storeEndpoint(this.eps, s, p.endpoint);
    }
  }

  /** A worker's roam, now also the peer's endpoint here: already in the shared record. */
  endpointLearned(peer: Peer): void {
    if (this.peerSlots.has(peer)) this.knownEndpoint.set(peer, peer.endpoint);
  }

  /**
   * Folds every worker's rows into deltas per peer and calls `apply` for peers with news.
   * Peers gone from the device give their rows back.
   */
  fold(peers: readonly Peer[], apply: (peer: Peer, a: PeerActivity) => void): void {
    const live = new Set(peers);
    for (const [p, s] of this.peerSlots) {
      if (!live.has(p) || p.removed) {
        this.peerSlots.delete(p);
        this.knownEndpoint.delete(p);
        this.peerPool.release(s, this.published);
      }
    }
    const a = this.scratch;
    const act = this.act;
    const f = this.folded;
    for (const [p, s] of this.peerSlots) {
      a.rxBytes = a.txBytes = a.rxPackets = a.txPackets = 0;
      a.dataSent = a.authSent = a.dataReceived = a.authReceived = 0;
      let news = false;
      for (let w = 0; w < this.buffers.workers; w++) {
        const r = activityRow(this.buffers, w, s);
        for (const k of COUNTS) {
          const v = act[r + k];
          const d = v - f[r + k];
          if (d === 0) continue;
          f[r + k] = v;
          news = true;
          if (k === ACT_RX_BYTES) a.rxBytes += d;
          else if (k === ACT_TX_BYTES) a.txBytes += d;
          else if (k === ACT_RX_PACKETS) a.rxPackets += d;
          else a.txPackets += d;
        }
        for (const k of TIMES) {
          const v = act[r + k];
          if (v === f[r + k]) continue;
          f[r + k] = v;
          news = true;
          if (k === ACT_DATA_SENT) a.dataSent = Math.max(a.dataSent, v);
          else if (k === ACT_AUTH_SENT) a.authSent = Math.max(a.authSent, v);
          else if (k === ACT_DATA_RECEIVED) a.dataReceived = Math.max(a.dataReceived, v);
          else a.authReceived = Math.max(a.authReceived, v);
        }
      }
      if (news) apply(p, a);
    }
  }
}
