/**
 * Start-up warm-up of a worker thread's data path (weft-wg with WEFT_WORKERS > 1): the code a
 * worker runs per packet — ShardEngine encrypt (shared session counter) and receive (shared
 * replay window), driven by a WireGuardPort over ShardPeers, behind a TunSegmenter when the
 * TUN has virtio-net headers — runs on synthetic packets before real traffic reaches it.
 *
 * The rounds are wireguard-warmup.ts's (runWarmUp): the same throwaway device pair, handshakes
 * in memory and answers; here A's ports drive a throwaway ShardEngine on snapshots of a
 * throwaway owner Device whose sessions live in throwaway shared memory, republished after
 * every handshake as the owner thread does, so new sessions reach the engine as real ones do.
 *
 * Contract, as wireguard-warmup.ts: no socket, TUN, timer, counter or shared memory of the real
 * data plane is touched (the engine, its drops, its owner link and its shared buffers are all
 * this call's own, dropped afterwards). Each worker runs it in its own thread, so N workers
 * warm at once.
 */
import { ShardEngine } from '../wireguard/shard.js';
import type { ShardPeer } from '../wireguard/shard-peer.js';
import { ShardSlots } from '../wireguard/shard-slots.js';
import { allocateSharedSessions } from '../wireguard/shared-sessions.js';
import { runWarmUp, warmUpPair, type WarmUpOptions, type WarmUpReport } from './wireguard-warmup.js';

/** Keypair slots of the throwaway shared memory: a peer holds at most 3 sessions, reused once acked. */
const WARM_KEYPAIR_SLOTS = 8;

/**
 * Runs a worker's data path on synthetic packets for about `opts.budgetMs` (0: returns at
 * once). Resolves with what ran; never throws for a packet that did not make it.
 */
export async function warmUpShard(opts: WarmUpOptions): Promise<WarmUpReport> {
  if (opts.budgetMs <= 0) return { packets: 0, ms: 0 };
  const slots = new ShardSlots(allocateSharedSessions(1, 1, WARM_KEYPAIR_SLOTS));
  const pair = warmUpPair(opts, false, slots);
  const owner = pair.a;
  let confirmedAt = 0;
  const engine = new ShardEngine(opts.backend, slots.buffers, 0, {
    // Every session is published confirmed: nothing is left for the owner (a refusal is a
    // counted drop of this throwaway engine).
    handoff: () => false,
    underLoad: () => false,
    confirmed: (i) => owner.confirmShardSession(i, confirmedAt),
    roamed: () => {},
  });
  let version = 0;
  return runWarmUp<ShardPeer>(opts, pair, {
    engine,
    named: null,
    handshook: (now) => {
      confirmedAt = now;
      version++;
      const snap = owner.shardSnapshot(version, (p) => slots.peerSlot(p), now);
      slots.syncEndpoints(owner.peers());
      slots.published = version;
      engine.apply(snap);
    },
  });
}
