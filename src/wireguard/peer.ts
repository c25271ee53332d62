/**
 * One WireGuard peer: configuration (public key, PSK, endpoint, persistent keepalive), the
 * handshake and session state, timers, counters and the bounded queue of packets staged while
 * no session exists. Peers are created and changed only through Device (device.ts), which keeps
 * the index table, allowed IPs and buffer pool consistent; read the public fields freely.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { isZeroKey } from '../crypto/keys.js';
import type { AllowedIps } from './allowedips.js';
import { CookieGenerator } from './cookie.js';
import { Keypairs } from './keypair.js';
import { KEY_LEN } from './messages.js';
import { Handshake } from './noise.js';
import { PeerTimers } from './timers.js';

/** A UDP endpoint. `address` is an IPv4 or IPv6 literal; IPv6 without brackets. */
export interface Endpoint {
  readonly address: string;
  readonly port: number;
}

const HEX = '0123456789abcdef';

/** Lowercase hex of a key (allocates; configuration and handshake paths only). */
export function keyHex(key: Uint8Array): string {
  let s = '';
  for (let i = 0; i < key.length; i++) s += HEX[key[i] >> 4] + HEX[key[i] & 0xf];
  return s;
}

export class Peer {
  readonly publicKey: Uint8Array;
  /** Lowercase hex of the public key: the peer's identity in Device maps. */
  readonly id: string;
  readonly handshake: Handshake;
  readonly keypairs = new Keypairs();
  readonly cookieGenerator: CookieGenerator;
  readonly timers: PeerTimers;

  /** Where to send; follows the source of the latest authenticated packet (roaming). */
  endpoint: Endpoint | null = null;
  /** Persistent keepalive interval in seconds; 0 = off. */
  persistentKeepalive = 0;
  /** Bytes of authenticated messages received from / sent to this peer (UDP payload sizes). */
  rxBytes = 0;
  txBytes = 0;
  /** The same messages counted as datagrams, so that sent = received + drops can be checked per hop. */
  rxPackets = 0;
  txPackets = 0;
  /** Wall-clock ms of the last completed handshake (0 = never). */
  lastHandshakeMs = 0;
  /** Set once the peer is removed from its device; a removed peer is inert. */
  removed = false;
  /**
   * This peer's own allowed IPs (values: this peer), only on a device with
   * overlappingAllowedIps; null otherwise (the device-wide table is authoritative then).
   */
  ownAllowedIps: AllowedIps<Peer> | null = null;

  /** Staged packets: ring of buffer-pool slots (-1: a keepalive placeholder) and lengths. */
  readonly stagedSlots: Int32Array;
  readonly stagedLengths: Int32Array;
  stagedHead = 0;
  stagedCount = 0;

  constructor(backend: CryptoBackend, publicKey: Uint8Array, random: () => number, stagedCapacity: number) {
    if (publicKey.length !== KEY_LEN) throw new RangeError(`a public key is ${KEY_LEN} bytes, got ${publicKey.length}`);
    this.publicKey = Uint8Array.from(publicKey);
    this.id = keyHex(publicKey);
    this.handshake = new Handshake(publicKey);
    this.cookieGenerator = new CookieGenerator(backend, publicKey);
    this.timers = new PeerTimers(random);
    this.stagedSlots = new Int32Array(stagedCapacity);
    this.stagedLengths = new Int32Array(stagedCapacity);
  }

  get stagedCapacity(): number {
    return this.stagedSlots.length;
  }

  /** The preshared key, or null when it is all zero (no PSK). A copy. */
  get presharedKey(): Uint8Array | null {
    const k = this.handshake.presharedKey;
    return isZeroKey(k) ? null : Uint8Array.from(k);
  }
}
