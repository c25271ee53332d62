/**
 * The state of one Device, shared by the per-concern modules (send.ts, receive.ts,
 * handshake.ts, staging.ts, device-timers.ts, peer-config.ts, uapi-apply.ts), whose free
 * functions take it as their first parameter; device.ts is the public facade over it. One
 * class with every field set in the constructor keeps the hot paths monomorphic.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { AllowedIps } from './allowedips.js';
import { DEFAULT_MTU, QUEUE_STAGED_SIZE } from './constants.js';
import type { CookieChecker } from './cookie.js';
import { RECEIVE_DROP, WireGuardConfigError, type ReceiveResult } from './device-types.js';
import { DROP_REASON_COUNT } from './drops.js';
import { IndexTable } from './index-table.js';
import { AEAD_TAG_LEN, COOKIE_NONCE_LEN, KEY_LEN, TRANSPORT_HEADER_SIZE } from './messages.js';
import { NoiseContext, StaticIdentity } from './noise.js';
import { paddedLength } from './padding.js';
import type { SessionSlots } from './keypair.js';
import type { Peer } from './peer.js';
import { BufferPool, Outbox } from './pool.js';
import { HandshakeScreen } from './screen.js';
import { WakeState } from './wake-state.js';

export interface DeviceOptions {
  backend: CryptoBackend;
  /** Uniform [0, 1) source for timer jitter (inject a seeded one in tests). Default Math.random. */
  random?: () => number;
  /** TUN MTU: plaintext padding is capped at it. Default 1420. */
  mtu?: number;
  /** Largest IP packet that can be staged before a session exists. Default 2016 (2 KiB slots). */
  maxPacketSize?: number;
  /** Engine buffers (staged packets + queued messages), allocated lazily. Default 2048. */
  bufferPoolSize?: number;
  /** Outbox capacity. Default 1024. */
  outboxCapacity?: number;
  /** Staged packets per peer. Default 128 (wireguard-go). */
  stagedQueueSize?: number;
  /**
   * Opt-in: peers may hold overlapping allowed IPs (default false: WireGuard semantics, adding
   * a prefix to one peer takes it from any other). When true, each peer keeps its own set; the
   * inner-source check on receive tests the decrypting peer's own set, and encrypt() by
   * destination picks one of the matching peers (unspecified which) — callers in this mode
   * name the peer with encryptFor().
   */
  overlappingAllowedIps?: boolean;
  /** Shared slots for keypairs, when worker threads share the data path (keypair.ts SessionSlots). */
  sessionSlots?: SessionSlots;
}

const DEFAULT_MAX_PACKET_SIZE = 2016;
const DEFAULT_BUFFER_POOL_SIZE = 2048;
const DEFAULT_OUTBOX_CAPACITY = 1024;
/**
 * CSPRNG bytes are drawn this many at a time: a handshake message takes 36 (index + ephemeral
 * key), and one randomFillSync per message was 5% of a handshake (profile in bench/history/2026.md).
 */
const RANDOM_RESERVE = 1024;

export class DeviceState {
  readonly backend: CryptoBackend;
  /** Drops by DROP_* reason. */
  readonly drops = new Float64Array(DROP_REASON_COUNT);
  listenPort = 0;
  fwmark = 0;
  mtu = DEFAULT_MTU;
  readonly random: () => number;
  readonly noise: NoiseContext;
  readonly identity = new StaticIdentity();
  /** mac1/mac2, cookie replies, the per-source limits and the under-load state (screen.ts). */
  readonly screen: HandshakeScreen;
  /** screen.cookieChecker (re-keyed when the private key changes). */
  readonly cookieChecker: CookieChecker;
  /**
   * Destination → peer for encrypt(), and (default mode) source → owner for the receive check.
   * In overlapping mode it is derived from the peers' own sets (peer.ownAllowedIps).
   */
  readonly allowedIps = new AllowedIps<Peer>();
  readonly overlapping: boolean;
  readonly sessionSlots: SessionSlots | null;
  readonly peerMap = new Map<string, Peer>();
  /** Replaced, never mutated, on change: iterating a snapshot is safe while peers change. */
  peerList: Peer[] = [];
  readonly indexTable = new IndexTable();
  readonly pool: BufferPool;
  readonly outbox: Outbox<Peer>;
  readonly maxPacketSize: number;
  readonly stagedQueueSize: number;
  /** Written by device-timers.ts updateNextDeadline(). */
  nextDeadline = Number.POSITIVE_INFINITY;
  /** The DROP_* reason of the last failed stage() (read right after it returns false). */
  lastStageDrop = -1;
  /** Handshakes started on unknown-session transport (wake.ts). */
  readonly wake = new WakeState();
  /**
   * Set by Device.holdHandshakes(): this device starts no handshake of its own any more (it
   * forwards on the sessions it has; answering the peer's initiations is unchanged).
   */
  handshakesHeld = false;

  // Scratch (all calls are synchronous).
  readonly nonce = new Uint8Array(12);
  readonly ephemeral = new Uint8Array(KEY_LEN);
  readonly timestamp = new Uint8Array(12);
  readonly index4 = new Uint8Array(4);
  readonly staticKey = new Uint8Array(KEY_LEN);
  readonly cookieNonce = new Uint8Array(COOKIE_NONCE_LEN);
  /** unstage()'s reused result. */
  readonly unstaged = { slot: -1, length: 0 };
  private readonly randomReserve = new Uint8Array(RANDOM_RESERVE);
  private randomUsed = RANDOM_RESERVE;

  constructor(options: DeviceOptions) {
    if (options === null || typeof options !== 'object' || options.backend === undefined) {
      throw new TypeError('Device needs { backend: CryptoBackend }');
    }
    this.backend = options.backend;
    this.random = options.random ?? Math.random;
    if (options.mtu !== undefined) this.setMtu(options.mtu);
    this.maxPacketSize = options.maxPacketSize ?? DEFAULT_MAX_PACKET_SIZE;
    if (!Number.isInteger(this.maxPacketSize) || this.maxPacketSize < 64 || this.maxPacketSize > 65535) {
      throw new RangeError(`maxPacketSize must be an integer in 64..65535, got ${this.maxPacketSize}`);
    }
    const slotSize = TRANSPORT_HEADER_SIZE + paddedLength(this.maxPacketSize, 0) + AEAD_TAG_LEN;
    this.pool = new BufferPool(slotSize, options.bufferPoolSize ?? DEFAULT_BUFFER_POOL_SIZE);
    this.outbox = new Outbox<Peer>(options.outboxCapacity ?? DEFAULT_OUTBOX_CAPACITY);
    this.stagedQueueSize = options.stagedQueueSize ?? QUEUE_STAGED_SIZE;
    if (!Number.isInteger(this.stagedQueueSize) || this.stagedQueueSize < 1) {
      throw new RangeError(`stagedQueueSize must be a positive integer, got ${this.stagedQueueSize}`);
    }
    const ov = options.overlappingAllowedIps ?? false;
    if (typeof ov !== 'boolean') throw new TypeError(`overlappingAllowedIps must be a boolean, got ${String(ov)}`);
    this.overlapping = ov;
    this.sessionSlots = options.sessionSlots ?? null;
    this.noise = new NoiseContext(this.backend);
    this.screen = new HandshakeScreen(this.backend);
    this.cookieChecker = this.screen.cookieChecker;
  }

  /**
   * Fills dst[0, dst.length) (at most RANDOM_RESERVE bytes) with fresh bytes from the backend's
   * CSPRNG, drawn in blocks. Each byte is handed out once and zeroed in the reserve as it goes.
   */
  randomFill(dst: Uint8Array): void {
    const n = dst.length;
    if (n > RANDOM_RESERVE) throw new RangeError(`randomFill takes at most ${RANDOM_RESERVE} bytes, asked for ${n}`);
    const r = this.randomReserve;
    if (this.randomUsed + n > RANDOM_RESERVE) {
      this.backend.randomFill(r);
      this.randomUsed = 0;
    }
    const at = this.randomUsed;
    for (let i = 0; i < n; i++) {
      dst[i] = r[at + i];
      r[at + i] = 0;
    }
    this.randomUsed = at + n;
  }

  setMtu(v: number): void {
    if (!Number.isInteger(v) || v < 0 || v > 65535)
      throw new WireGuardConfigError(`MTU must be an integer in 0..65535, got ${v}`);
    this.mtu = v;
  }
}

/** Counts a receive drop and reports it in `out` (shared by receive.ts and handshake.ts). */
export function receiveDrop(s: DeviceState, out: ReceiveResult, reason: number): number {
  s.drops[reason]++;
  out.action = RECEIVE_DROP;
  out.reason = reason;
  return RECEIVE_DROP;
}
