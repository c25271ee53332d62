/**
 * The library's WireGuard device: the engine (src/wireguard/device.ts) behind a small,
 * copy-based API for embedding and simulations — give it IP packets and UDP payloads, get back
 * datagrams to send and packets to deliver.
 *
 * Ownership: every Uint8Array this facade returns is a fresh copy the caller owns; inputs are
 * copied before the engine works on them, so the caller may reuse its buffers at once. That
 * costs one allocation and copy per packet: for a zero-copy data path use `device.engine`
 * (Device.encrypt/receive in place, with headroom and tailroom) or `startWgDaemon`.
 *
 * Time: methods take an optional `now` (wall-clock Unix ms; default `clock()`, Date.now unless
 * the options give another). Nothing here owns a timer: call `poll()` at `nextDeadline()`
 * (or every second or so) to run WireGuard's timers (retransmits, keepalives, rekeys).
 */
import type { GatewayConfig } from '../control/config.js';
import { parseEndpoint } from '../control/cidr.js';
import type { CryptoBackend } from '../crypto/backend.js';
import { keyFromBase64, keyToBase64 } from '../crypto/keys.js';
import { getCryptoBackend, type CryptoBackendName } from '../crypto/select.js';
import { formatPrefix, isAddress, parsePrefix } from '../packet/addr.js';
import {
  Device,
  EncryptResult,
  ENCRYPT_SEND,
  ReceiveResult,
  RECEIVE_DELIVER,
  WireGuardConfigError,
} from '../wireguard/device.js';
import { DROP_REASON_NAMES } from '../wireguard/drops.js';
import type { Endpoint, Peer } from '../wireguard/peer.js';
import { OutgoingMessage } from '../wireguard/pool.js';

/** A UDP datagram to send: `data` (owned by the caller) to `address`:`port`. */
export interface Datagram {
  readonly data: Uint8Array;
  /** IPv4 or IPv6 literal (IPv6 without brackets). */
  readonly address: string;
  readonly port: number;
}

/** What `receive()` produced. */
export interface ReceiveOutcome {
  /** Decrypted IP packets to deliver (to a TUN device, a stack, a test). */
  readonly packets: Uint8Array[];
  /** Datagrams to send in reply (handshake responses, packets that waited for the session). */
  readonly datagrams: Datagram[];
}

/** A peer of a WireGuardDevice. Keys are base64 text (as `wg` prints them) or 32 raw bytes. */
export interface WireGuardPeerOptions {
  readonly publicKey: string | Uint8Array;
  readonly presharedKey?: string | Uint8Array;
  /** "address:port", IPv6 as "[address]:port"; an IP literal (resolve names before). */
  readonly endpoint?: string;
  /** Inner source/destination prefixes routed to this peer ("10.0.0.0/16", "fd00::/64"). */
  readonly allowedIPs?: readonly string[];
  /** Seconds; 0 or absent = off. */
  readonly persistentKeepalive?: number;
}

export interface CreateWireGuardDeviceOptions {
  /** Base64 (`wg genkey`) or 32 raw bytes. */
  readonly privateKey: string | Uint8Array;
  readonly peers?: readonly WireGuardPeerOptions[];
  /** Recorded for status/UAPI; this facade opens no socket. */
  readonly listenPort?: number;
  /** Inner MTU: padding is capped at it (default 1420). */
  readonly mtu?: number;
  /** A backend name ('auto' default, 'openssl', 'node', 'pure') or an instance. */
  readonly backend?: CryptoBackendName | CryptoBackend;
  /** Wall clock in Unix ms used when a call gives no `now` (default Date.now). */
  readonly clock?: () => number;
  /** Uniform [0,1) source for timer jitter (default Math.random). */
  readonly random?: () => number;
}

/** One peer in `status()`. */
export interface WireGuardPeerStatus {
  readonly publicKey: string;
  readonly endpoint: string | null;
  readonly allowedIPs: string[];
  /** Unix ms of the last completed handshake, or null. */
  readonly latestHandshakeMs: number | null;
  readonly rxBytes: number;
  readonly txBytes: number;
  readonly persistentKeepalive: number;
  readonly hasPresharedKey: boolean;
}

export interface WireGuardStatus {
  readonly publicKey: string;
  readonly listenPort: number;
  readonly backend: string;
  readonly peers: WireGuardPeerStatus[];
  /** Drops since creation by reason name (only reasons that occurred). */
  readonly drops: Record<string, number>;
}

const HEADROOM = 16; // WireGuard transport header, written in front of the packet
const TAILROOM = 32; // padding to 16 + the 16-byte Poly1305 tag

function keyBytes(k: string | Uint8Array, what: string): Uint8Array {
  if (typeof k === 'string') return keyFromBase64(k, what);
  if (!(k instanceof Uint8Array) || k.length !== 32) throw new TypeError(`${what} must be base64 text or 32 bytes`);
  return Uint8Array.from(k);
}

function endpointOf(text: string): Endpoint {
  const e = parseEndpoint(text);
  if (!isAddress(e.host))
    throw new WireGuardConfigError(`endpoint ${text}: the host must be an IP address (resolve DNS names first)`);
  return { address: e.host, port: e.port };
}

function endpointText(e: Endpoint | null): string | null {
  if (e === null) return null;
  return e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`;
}

/** A WireGuard device you feed by hand. Create one with `createWireGuardDevice`. */
export class WireGuardDevice {
  /** The engine itself: the zero-copy API (encrypt/receive in place), counters, UAPI. */
  readonly engine: Device;
  private readonly clock: () => number;
  private readonly enc = new EncryptResult();
  private readonly rcv = new ReceiveResult();
  private readonly msg = new OutgoingMessage<Peer>();

  /**
   * Use createWireGuardDevice() or WireGuardDevice.wrap(); `engine` becomes driven by this
   * facade (and may still be used directly).
   */
  private constructor(engine: Device, clock: () => number) {
    this.engine = engine;
    this.clock = clock;
  }

  /** A facade over an existing engine (for example a daemon's `device`). */
  static wrap(engine: Device, clock: () => number = Date.now): WireGuardDevice {
    return new WireGuardDevice(engine, clock);
  }

  /** Builds a device from options (what createWireGuardDevice does for non-config input). */
  static create(options: CreateWireGuardDeviceOptions): WireGuardDevice {
    const backend = typeof options.backend === 'object' ? options.backend : getCryptoBackend(options.backend ?? 'auto');
    const engine = new Device({
      backend,
      ...(options.mtu !== undefined ? { mtu: options.mtu } : {}),
      ...(options.random !== undefined ? { random: options.random } : {}),
    });
    const dev = new WireGuardDevice(engine, options.clock ?? Date.now);
    dev.setPrivateKey(options.privateKey);
    if (options.listenPort !== undefined) engine.listenPort = options.listenPort;
    for (const p of options.peers ?? []) dev.addPeer(p);
    return dev;
  }

  /** Sets the private key (base64 or 32 bytes); sessions with the old identity end. */
  setPrivateKey(key: string | Uint8Array): void {
    this.engine.setPrivateKey(keyBytes(key, 'private key'));
  }

  /** This device's public key, base64 ('' before a private key is set). */
  get publicKey(): string {
    const k = this.engine.publicKey;
    return k === null ? '' : keyToBase64(k);
  }

  /** Adds a peer. Throws WireGuardConfigError/KeyFormatError/TypeError for bad options. */
  addPeer(p: WireGuardPeerOptions, now: number = this.clock()): void {
    const pub = keyBytes(p.publicKey, 'peer public key');
    const prefixes = (p.allowedIPs ?? []).map((t) => parsePrefix(t));
    const endpoint = p.endpoint === undefined ? null : endpointOf(p.endpoint);
    const psk = p.presharedKey === undefined ? null : keyBytes(p.presharedKey, 'preshared key');
    const peer = this.engine.addPeer(pub);
    if (psk !== null) this.engine.setPresharedKey(peer, psk);
    if (endpoint !== null) this.engine.setEndpoint(peer, endpoint);
    for (const pre of prefixes) this.engine.addAllowedIp(peer, pre);
    if (p.persistentKeepalive !== undefined && p.persistentKeepalive > 0)
      this.engine.setPersistentKeepalive(peer, p.persistentKeepalive, now);
  }

  /** Removes a peer by public key; false if there was none. */
  removePeer(publicKey: string | Uint8Array): boolean {
    const peer = this.engine.getPeer(keyBytes(publicKey, 'peer public key'));
    return peer === undefined ? false : this.engine.removePeer(peer);
  }

  /**
   * Encrypts an IP packet for the peer whose allowed IPs contain its destination. Returns the
   * datagrams to send now: the encrypted packet, or — without a session — a handshake
   * initiation (the packet waits, bounded, and comes out of a later receive()/poll()).
   * A packet with no route is dropped and counted (status().drops).
   */
  send(packet: Uint8Array, now: number = this.clock()): Datagram[] {
    const buf = new Uint8Array(HEADROOM + packet.length + TAILROOM);
    buf.set(packet, HEADROOM);
    const out: Datagram[] = [];
    if (this.engine.encrypt(buf, HEADROOM, packet.length, now, this.enc) === ENCRYPT_SEND) {
      const ep = this.enc.endpoint!;
      out.push({
        data: buf.slice(this.enc.start, this.enc.start + this.enc.length),
        address: ep.address,
        port: ep.port,
      });
    }
    this.drain(out);
    return out;
  }

  /**
   * Handles one UDP payload received from `from` ("address:port" or an Endpoint). Bad input
   * is dropped and counted, never thrown.
   */
  receive(data: Uint8Array, from: string | Endpoint, now: number = this.clock()): ReceiveOutcome {
    const ep = typeof from === 'string' ? endpointOf(from) : from;
    const buf = Uint8Array.from(data);
    const packets: Uint8Array[] = [];
    const datagrams: Datagram[] = [];
    if (this.engine.receive(buf, 0, buf.length, ep, now, false, this.rcv) === RECEIVE_DELIVER) {
      packets.push(buf.slice(this.rcv.start, this.rcv.start + this.rcv.length));
    }
    this.drain(datagrams);
    return { packets, datagrams };
  }

  /** Runs expired timers; returns what they want sent (retransmits, keepalives). */
  poll(now: number = this.clock()): Datagram[] {
    this.engine.poll(now);
    const out: Datagram[] = [];
    this.drain(out);
    return out;
  }

  /** When poll() next has work (Unix ms; Infinity when idle). */
  nextDeadline(): number {
    return this.engine.nextDeadline();
  }

  /** Public key, listen port, peers (handshake, transfer, endpoint, allowed IPs), drops by reason. */
  status(): WireGuardStatus {
    return wireGuardStatus(this.engine);
  }

  private drain(out: Datagram[]): void {
    const m = this.msg;
    while (this.engine.popOutgoing(m)) {
      out.push({ data: m.buf.slice(m.start, m.start + m.length), address: m.address, port: m.port });
      this.engine.releaseOutgoing(m.slot);
    }
  }
}

function isGatewayConfig(x: CreateWireGuardDeviceOptions | GatewayConfig): x is GatewayConfig {
  return (x as { role?: unknown }).role === 'gateway';
}

/**
 * Creates a WireGuard device from keys and peers, or from a validated gateway configuration
 * (`loadConfig`): then the private key, listen port, MTU, crypto backend and peers (endpoint,
 * preshared key, keepalive, allowed IPs = the peer's REAL pod and external CIDRs, which is
 * what travels inside the tunnel) come from the configuration.
 */
export function createWireGuardDevice(options: CreateWireGuardDeviceOptions | GatewayConfig): WireGuardDevice {
  if (!isGatewayConfig(options)) return WireGuardDevice.create(options);
  const wg = options.wireguard;
  return WireGuardDevice.create({
    privateKey: wg.privateKey,
    listenPort: wg.listenPort,
    mtu: wg.mtu,
    backend: wg.cryptoBackend,
    peers: options.peers.map((p) => ({
      publicKey: p.publicKey,
      ...(p.presharedKey !== undefined ? { presharedKey: p.presharedKey } : {}),
      ...(p.endpoint !== undefined ? { endpoint: p.endpoint } : {}),
      ...(p.persistentKeepalive !== undefined ? { persistentKeepalive: p.persistentKeepalive } : {}),
      allowedIPs: [...p.remote.podCIDRs, ...p.remote.externalCIDRs],
    })),
  });
}

/**
 * A status snapshot of any WireGuard engine (a WireGuardDevice's `engine`, a daemon's
 * `device`): public key, listen port, peers with endpoint, allowed IPs, latest handshake and
 * transfer, and drops by reason. No private or preshared key is included.
 */
export function wireGuardStatus(engine: Device): WireGuardStatus {
  const drops: Record<string, number> = {};
  engine.drops.forEach((n, i) => {
    if (n > 0) drops[DROP_REASON_NAMES[i] ?? `reason_${i}`] = n;
  });
  const pub = engine.publicKey;
  return {
    publicKey: pub === null ? '' : keyToBase64(pub),
    listenPort: engine.listenPort,
    backend: engine.backend.name,
    peers: engine.peers().map((p) => ({
      publicKey: keyToBase64(p.publicKey),
      endpoint: endpointText(p.endpoint),
      allowedIPs: engine.allowedIpsOf(p).map(formatPrefix),
      latestHandshakeMs: p.lastHandshakeMs === 0 ? null : p.lastHandshakeMs,
      rxBytes: p.rxBytes,
      txBytes: p.txBytes,
      persistentKeepalive: p.persistentKeepalive,
      hasPresharedKey: p.presharedKey !== null,
    })),
    drops,
  };
}
