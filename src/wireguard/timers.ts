/**
 * Per-peer timers (whitepaper §6 "Timers & Stateless UX"), as deadlines polled with `now`.
 *
 * The five timers and the events that arm/disarm them follow wireguard-go's timers.go (itself
 * modelled on Linux's timers.c); here each timer is a deadline in ms, `Infinity` when not
 * pending. Nothing here reads a clock or sends anything: the event methods only move deadlines,
 * and device.ts fires expired timers from `poll(now)` and runs the expiry actions:
 *
 *   retransmitHandshake — Rekey-Timeout (+ jitter) after an initiation was sent: resend, or give
 *                         up after MAX_TIMER_HANDSHAKES retries (drop staged packets, schedule
 *                         zeroing of key material).
 *   sendKeepalive       — Keepalive-Timeout after data was received with nothing sent back:
 *                         send a keepalive ("passive keepalive").
 *   newHandshake        — Keepalive-Timeout + Rekey-Timeout (+ jitter) after data was sent
 *                         without any authenticated packet coming back: start a handshake.
 *   zeroKeyMaterial     — 3 × Reject-After-Time after the last session was derived: erase all
 *                         keys and the handshake.
 *   persistentKeepalive — the configured interval after any authenticated packet traversal.
 *
 * The jitter (0..333 ms, uniform) comes from an injected source so tests are deterministic.
 */
import { KEEPALIVE_TIMEOUT, REKEY_TIMEOUT, REKEY_TIMEOUT_JITTER_MAX, ZERO_KEY_MATERIAL_AFTER } from './constants.js';

const NEVER = Number.POSITIVE_INFINITY;

export class PeerTimers {
  retransmitHandshake = NEVER;
  sendKeepalive = NEVER;
  newHandshake = NEVER;
  zeroKeyMaterial = NEVER;
  persistentKeepalive = NEVER;
  /** Initiations re-sent by the retransmit timer since the last handshake started or completed. */
  handshakeAttempts = 0;
  needAnotherKeepalive = false;
  /** An initiator rekey-on-receive was started for the current keypair (send it only once). */
  sentLastMinuteHandshake = false;
  /**
   * The latest initiation was sent without data waiting (wake.ts: a fresh device's eager or
   * unknown-session handshake), and no handshake completed since.
   */
  speculativeInitiation = false;

  constructor(private readonly random: () => number) {}

  private jitter(): number {
    return Math.floor(this.random() * REKEY_TIMEOUT_JITTER_MAX);
  }

  /** The earliest pending deadline. */
  earliest(): number {
    return Math.min(
      this.retransmitHandshake,
      this.sendKeepalive,
      this.newHandshake,
      this.zeroKeyMaterial,
      this.persistentKeepalive,
    );
  }

  /** After an authenticated data packet (not a keepalive) was sent. */
  dataSent(now: number): void {
    if (this.newHandshake === NEVER) this.newHandshake = now + KEEPALIVE_TIMEOUT + REKEY_TIMEOUT + this.jitter();
  }

  /** After an authenticated data packet was received. */
  dataReceived(now: number): void {
    if (this.sendKeepalive === NEVER) this.sendKeepalive = now + KEEPALIVE_TIMEOUT;
    else this.needAnotherKeepalive = true;
  }

  /** After any authenticated packet (keepalive, data, handshake) was sent. */
  anyAuthenticatedPacketSent(): void {
    this.sendKeepalive = NEVER;
  }

  /** After any authenticated packet was received. */
  anyAuthenticatedPacketReceived(): void {
    this.newHandshake = NEVER;
  }

  /** After a handshake initiation was sent. */
  handshakeInitiated(now: number): void {
    this.retransmitHandshake = now + REKEY_TIMEOUT + this.jitter();
  }

  /** After a response was consumed, or the first data under a new responder keypair arrived. */
  handshakeComplete(): void {
    this.retransmitHandshake = NEVER;
    this.handshakeAttempts = 0;
    this.sentLastMinuteHandshake = false;
    this.speculativeInitiation = false;
  }

  /** After an ephemeral key pair led to a session (response sent or response consumed). */
  sessionDerived(now: number): void {
    this.zeroKeyMaterial = now + ZERO_KEY_MATERIAL_AFTER;
  }

  /** Before an authenticated packet is sent or after one is received. */
  anyAuthenticatedPacketTraversal(now: number, persistentKeepaliveSeconds: number): void {
    if (persistentKeepaliveSeconds > 0) this.persistentKeepalive = now + persistentKeepaliveSeconds * 1000;
  }

  /** Disarm everything (peer removed). */
  stop(): void {
    this.retransmitHandshake = NEVER;
    this.sendKeepalive = NEVER;
    this.newHandshake = NEVER;
    this.zeroKeyMaterial = NEVER;
    this.persistentKeepalive = NEVER;
    this.handshakeAttempts = 0;
    this.needAnotherKeepalive = false;
    this.sentLastMinuteHandshake = false;
    this.speculativeInitiation = false;
  }
}
