/**
 * A virtual clock and Device instances on the in-memory network (src/io/memory-net.ts): each node
 * is a UDP socket on a memory host, so the WireGuard protocol tests run over the same network as
 * the simulations.
 *
 * Event-driven: `advance(t)` jumps from event to event (the wire's next due datagram and the
 * devices' nextDeadline()), so simulated minutes cost milliseconds and the result is
 * deterministic for a given seed. `delay` and `impair` (loss, duplication, reordering by random
 * extra delay) are the network's impairments for every host pair, seeded with the net's seed.
 * Everything a device sends — encrypt() results and outbox messages — goes through `transmit`,
 * which records it in `wire` for assertions.
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { PacketBatch } from '../../src/io/batch.js';
import { MemoryNet } from '../../src/io/memory-net.js';
import type { MemoryDatagramSocket } from '../../src/io/memory-socket.js';
import { parsePrefix } from '../../src/packet/addr.js';
import {
  Device,
  ENCRYPT_SEND,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  ReceiveResult,
} from '../../src/wireguard/device.js';
import type { DeviceOptions } from '../../src/wireguard/device-state.js';
import type { Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { readU32LE } from '../../src/wireguard/messages.js';
import { Prng } from '../util/prng.js';

export const T0 = 1_700_000_000_000;
const HEADROOM = 16;
const TAILROOM = 64;

export interface WireRecord {
  time: number;
  from: SimNode;
  toAddress: string;
  toPort: number;
  bytes: Uint8Array;
  /** Message type (first little-endian word). */
  type: number;
}

export interface Impairments {
  loss: number;
  duplicate: number;
  /** Extra random delay 0..reorderMs added to each datagram (reorders them). */
  reorderMs: number;
}

export class SimNode {
  readonly device: Device;
  /** Inner packets delivered to this node's TUN, in order. */
  readonly delivered: Uint8Array[] = [];
  /** receive() results other than DELIVER, for assertions: [action, reason]. */
  readonly results: [number, number][] = [];
  underLoad = false;
  /** When set, everything this node receives is dropped by the network before reaching it. */
  offline = false;
  private socket: MemoryDatagramSocket | null = null;
  /** Odd headroom on purpose: the device honours offsets. */
  private readonly batch = new PacketBatch({ capacity: 16, headroom: 4, maxLen: 65535, withAddresses: true });
  private at = '';
  private atPort = 0;

  constructor(
    readonly net: VirtualNet,
    readonly name: string,
    address: string,
    port: number,
    readonly privateKey: Uint8Array,
    options: DeviceOptions,
  ) {
    this.device = new Device(options);
    this.device.setPrivateKey(privateKey);
    this.device.listenPort = port;
    this.bind(address, port);
  }

  /** The node's address and port: setting one moves its socket there (roaming). */
  get address(): string {
    return this.at;
  }
  set address(a: string) {
    this.bind(a, this.atPort);
  }
  get port(): number {
    return this.atPort;
  }
  set port(p: number) {
    this.bind(this.at, p);
  }

  get publicKey(): Uint8Array {
    return this.device.publicKey!;
  }

  /** Adds `other` as a peer with allowed IPs and (optionally) its current endpoint. */
  connect(other: SimNode, allowed: string[], withEndpoint = true, psk: Uint8Array | null = null): Peer {
    const peer = this.device.addPeer(other.publicKey);
    for (const a of allowed) this.device.addAllowedIp(peer, parsePrefix(a));
    if (withEndpoint) this.device.setEndpoint(peer, { address: other.address, port: other.port });
    if (psk !== null) this.device.setPresharedKey(peer, psk);
    return peer;
  }

  peerOf(other: SimNode): Peer {
    const p = this.device.getPeer(other.publicKey);
    if (p === undefined) throw new Error(`${this.name} has no peer ${other.name}`);
    return p;
  }

  /** Reads an IP packet "from TUN": encrypt and transmit (or stage). Returns the ENCRYPT_* code. */
  send(packet: Uint8Array): number {
    const buf = new Uint8Array(HEADROOM + packet.length + TAILROOM);
    buf.set(packet, HEADROOM);
    const r = this.net.encryptResult;
    const code = this.device.encrypt(buf, HEADROOM, packet.length, this.net.now, r);
    if (code === ENCRYPT_SEND)
      this.net.transmit(this, r.endpoint!.address, r.endpoint!.port, buf.subarray(r.start, r.start + r.length));
    this.net.drainAll();
    return code;
  }

  /** @internal Puts a datagram on the network from this node's socket. */
  sendRaw(bytes: Uint8Array, toAddress: string, toPort: number): void {
    this.socket!.send(bytes, 0, bytes.length, toAddress, toPort);
  }

  private bind(address: string, port: number): void {
    void this.socket?.close();
    const host = this.net.mem.hostAt(address) ?? this.net.mem.host(address);
    const s = host.openUdp({ family: address.includes(':') ? 6 : 4, address, port });
    s.onBatch(this.batch, (b) => {
      for (let i = 0; i < b.count; i++) {
        if (!this.offline) this.net.receiveAt(this, b.buf, b.offs[i]!, b.lens[i]!, s.addressOf(b, i), s.portOf(b, i));
      }
    });
    this.socket = s;
    this.at = address;
    this.atPort = port;
  }
}

export class VirtualNet {
  now = T0;
  readonly nodes: SimNode[] = [];
  readonly wire: WireRecord[] = [];
  /** The network the nodes' sockets are on; its clock is `now`. */
  readonly mem = new MemoryNet({ clock: () => this.now, maxDatagram: 65535 });
  readonly encryptResult = new EncryptResult();
  private readonly receiveResult = new ReceiveResult();
  private readonly outgoing = new OutgoingMessage<Peer>();
  private impairments: Impairments = { loss: 0, duplicate: 0, reorderMs: 0 };
  private delayMs = 1;

  constructor(
    readonly backend: CryptoBackend,
    readonly seed = 1,
  ) {
    this.applyImpairments();
  }

  /** Loss, duplication and reordering of every datagram (the network's seeded stream starts over). */
  get impair(): Impairments {
    return this.impairments;
  }
  set impair(i: Impairments) {
    this.impairments = i;
    this.applyImpairments();
  }

  /** One-way base delay in ms. */
  get delay(): number {
    return this.delayMs;
  }
  set delay(ms: number) {
    this.delayMs = ms;
    this.applyImpairments();
  }

  private applyImpairments(): void {
    const i = this.impairments;
    this.mem.impairAll({
      seed: this.seed,
      loss: i.loss,
      duplicate: i.duplicate,
      delayMs: this.delayMs,
      jitterMs: i.reorderMs,
    });
  }

  /** A node with a deterministic private key and jitter source. */
  addNode(name: string, address: string, port = 51820, extra: Partial<DeviceOptions> = {}): SimNode {
    const key = new Uint8Array(32);
    for (let i = 0; i < 32; i++) key[i] = (this.nodes.length * 37 + i * 11 + 1) & 0xff;
    const jitter = new Prng(1000 + this.nodes.length);
    const node = new SimNode(this, name, address, port, key, {
      backend: this.backend,
      random: () => jitter.next(),
      ...extra,
    });
    this.nodes.push(node);
    return node;
  }

  transmit(from: SimNode, toAddress: string, toPort: number, bytes: Uint8Array): void {
    const copy = Uint8Array.from(bytes);
    this.wire.push({
      time: this.now,
      from,
      toAddress,
      toPort,
      bytes: copy,
      type: copy.length >= 4 ? readU32LE(copy, 0) : -1,
    });
    from.sendRaw(copy, toAddress, toPort);
  }

  /** Sends everything in every outbox. */
  drainAll(): void {
    for (let round = 0; round < 100; round++) {
      let any = false;
      for (const n of this.nodes) {
        while (n.device.popOutgoing(this.outgoing)) {
          any = true;
          const o = this.outgoing;
          this.transmit(n, o.address, o.port, o.buf.subarray(o.start, o.start + o.length));
          n.device.releaseOutgoing(o.slot);
        }
      }
      if (!any) return;
    }
    throw new Error('outboxes did not drain');
  }

  /** Delivers one datagram to its node now, past the network. */
  deliverRaw(to: SimNode, bytes: Uint8Array, fromAddress: string, fromPort: number): number {
    const buf = new Uint8Array(bytes.length + 8);
    buf.set(bytes, 4); // odd placement on purpose: offsets are honoured
    return this.receiveAt(to, buf, 4, bytes.length, fromAddress, fromPort);
  }

  /** @internal `to` receives buf[off, +len) (decrypted in place), then every outbox drains. */
  receiveAt(to: SimNode, buf: Uint8Array, off: number, len: number, fromAddress: string, fromPort: number): number {
    const r = this.receiveResult;
    const code = to.device.receive(buf, off, len, { address: fromAddress, port: fromPort }, this.now, to.underLoad, r);
    if (code === RECEIVE_DELIVER) to.delivered.push(buf.slice(r.start, r.start + r.length));
    else to.results.push([code, r.reason]);
    this.drainAll();
    return code;
  }

  /** Runs the world until `t` (absolute), processing events in time order. */
  advanceTo(t: number): void {
    for (let guard = 0; guard < 1_000_000; guard++) {
      let next = this.mem.nextDue;
      for (const n of this.nodes) {
        const d = n.device.nextDeadline();
        if (d < next) next = d;
      }
      if (next > t) break;
      if (next > this.now) this.now = next;
      this.mem.pump(); // datagrams due now, in arrival order
      for (const n of this.nodes) n.device.poll(this.now);
      this.drainAll();
    }
    if (t > this.now) this.now = t;
  }

  advance(ms: number): void {
    this.advanceTo(this.now + ms);
  }

  /** Wire records of a message type sent by `from` (optionally since a time). */
  sent(from: SimNode, type: number, since = -Infinity): WireRecord[] {
    return this.wire.filter((w) => w.from === from && w.type === type && w.time >= since);
  }

  dropsOf(node: SimNode, reason: number): number {
    return node.device.drops[reason];
  }
}

export { RECEIVE_DROP };

/** A minimal valid IPv4 packet (version, IHL, total length, protocol 17, addresses, payload). */
export function ipv4Packet(src: string, dst: string, payload: Uint8Array | number): Uint8Array {
  const body = typeof payload === 'number' ? filled(payload) : payload;
  const p = new Uint8Array(20 + body.length);
  p[0] = 0x45;
  p[2] = p.length >> 8;
  p[3] = p.length & 0xff;
  p[8] = 64;
  p[9] = 17;
  p.set(parsePrefix(`${src}/32`).addr, 12);
  p.set(parsePrefix(`${dst}/32`).addr, 16);
  p.set(body, 20);
  return p;
}

/** A minimal valid IPv6 packet (version 6, payload length, next header 17, addresses). */
export function ipv6Packet(src: string, dst: string, payload: Uint8Array | number): Uint8Array {
  const body = typeof payload === 'number' ? filled(payload) : payload;
  const p = new Uint8Array(40 + body.length);
  p[0] = 0x60;
  p[4] = body.length >> 8;
  p[5] = body.length & 0xff;
  p[6] = 17;
  p[7] = 64;
  p.set(parsePrefix(`${src}/128`).addr, 8);
  p.set(parsePrefix(`${dst}/128`).addr, 24);
  p.set(body, 40);
  return p;
}

let fillCounter = 0;
function filled(n: number): Uint8Array {
  const b = new Uint8Array(n);
  fillCounter++;
  for (let i = 0; i < n; i++) b[i] = (i * 7 + fillCounter) & 0xff;
  return b;
}
