/**
 * What a worker's WireGuard engine (shard.ts) knows of a peer and of a session it sends or
 * receives under, and its channel to the owner thread. Plain records: no I/O, no allocation
 * after construction.
 */
import type { Endpoint } from './peer.js';
import type { SharedReplayFilter } from './shared-sessions.js';
import type { ShardSessionSpec } from './shard-owner.js';

/** What is handed to the owner. */
export const HANDOFF_DATAGRAM = 1;
export const HANDOFF_PLAINTEXT = 2;
/** An initiation or response that passed the worker's screen: the owner processes it without checking again. */
export const HANDOFF_SCREENED = 3;

/** The worker's channel to the owner thread (implemented by the worker shell). */
export interface ShardOwnerLink {
  /**
   * Hands buf[off, +len) to the owner (copied before returning): a UDP payload from
   * address:port (HANDOFF_DATAGRAM; HANDOFF_SCREENED when the worker screened it) or an inner
   * packet (HANDOFF_PLAINTEXT, address '').
   * False when the owner's queue is full: the caller counts the drop.
   */
  handoff(kind: number, buf: Uint8Array, off: number, len: number, address: string, port: number): boolean;
  /**
   * Whether handshakes are under load beyond what the caller sees: this worker's handoffs in
   * flight ≥ 1/8 of the limit, or the owner's handshake queue loaded.
   */
  underLoad(): boolean;
  /** The first message under our session `localIndex` arrived here. */
  confirmed(localIndex: number): void;
  /** The peer of activity slot `peerSlot` was authenticated from a new endpoint. */
  roamed(peerSlot: number, address: string, port: number): void;
}

/** A peer as a worker knows it. */
export class ShardPeer {
  send: ShardSession | null = null;
  /** The sequence of the shared endpoint record `endpoint` was loaded at (0: the snapshot's). */
  epSeq = 0;
  /** The shared confirmed-session word as last seen. */
  confirmedSeen = 0;
  constructor(
    /** Activity-row slot. */
    readonly slot: number,
    public endpoint: Endpoint | null,
    /** Float64 offset of this worker's activity row for the peer. */
    readonly row: number,
  ) {}
}

export class ShardSession {
  /** The shared counter hit SHARED_SEND_LIMIT (or the owner expired the keypair). */
  spent = false;
  /** `next` and its first message was reported. */
  reported = false;
  constructor(
    readonly spec: ShardSessionSpec,
    readonly peer: ShardPeer,
    readonly replay: SharedReplayFilter,
    readonly counterAt: number,
  ) {}
}
