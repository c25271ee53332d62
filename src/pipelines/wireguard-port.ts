/**
 * The WireGuard side of a pipeline: the protocol engine (src/wireguard/device.ts) put on real
 * UDP sockets, with its timers driven by a real clock and handshakes on their own bounded queue.
 *
 * Used by the `weft-wg` daemon (inner side: a TUN device) and by the gateway (inner side: the
 * router/NAT stages). The inner side hands plaintext packets to `encryptBatch()` and receives
 * decrypted packets through an `InnerSink`.
 *
 * Data path, zero allocation per packet in steady state:
 *   inner batch (packets at offs[i] with ≥16 bytes headroom, ≥32 tailroom) → Device.encrypt in
 *   place (or Device.encryptFor when the caller names each packet's peer) → destination
 *   records grouped by address family → one sendmmsg per family.
 *   With udpOffload, equal-sized datagrams to one endpoint (a super-packet's segments) leave
 *   as one UDP GSO message, and a GRO receive slot holds a run of datagrams, each handled
 *   alone below.
 *   UDP batch → transport data: Device.receive decrypts in place → InnerSink.writeBatch once
 *   per batch (with the batch's scratch area for coalescing), with the peer each packet came from; handshake messages: screened at once
 *   (Device.screenHandshake: mac1; under load mac2, cookie replies, rate limit; no DH), then
 *   copied into the handshake ring (bounded; full → counted drop) and processed a few per
 *   event-loop turn (Device.receiveScreened), so a handshake flood cannot starve data.
 *
 * Ownership: batches belong to their readers and are valid only during the callback; nothing
 * here keeps a reference to them. Outgoing engine messages are released right after sending.
 *
 * The port's contract with its owner is wireguard-port-types.ts; the handshake ring, the
 * engine timer and the same-destination check each have their own file.
 */
import { ADDR_FAMILY_OFFSET, ADDR_RECORD_LEN } from '../io/native.js';
import { PacketBatch } from '../io/batch.js';
import { encodeAddress, UDP_GRO_MAX_LEN } from '../io/udp.js';
import type { DatagramBufferSizes, DatagramSocket, DatagramStats } from '../io/datagram.js';
import { Device, EncryptResult, ENCRYPT_SEND, ReceiveResult, RECEIVE_DELIVER } from '../wireguard/device.js';
import { isHandshakeMessage } from '../wireguard/messages.js';
import type { Endpoint } from '../wireguard/peer.js';
import { OutgoingMessage } from '../wireguard/pool.js';
import type { Peer } from '../wireguard/peer.js';
import { SendList } from './send-list.js';
import { openDualStack } from './dual-stack.js';
import { EngineTimer } from './engine-timer.js';
import { DestinationRun } from './destination-run.js';
import { HandshakeRing, HANDSHAKE_SLOT } from './handshake-ring.js';
import type { InnerSink, PortEngine, WireGuardPortOptions, WireGuardPortStats } from './wireguard-port-types.js';

/** GRO receive batches: fewer slots (each holds up to 64 KiB). */
const GRO_BATCH = 32;
/** Datagrams the kernel puts in one GRO slot at most (UDP_GRO_CNT_MAX). */
const GRO_MAX_SEGMENTS = 64;

/**
 * Decrypted bytes handed to the sink at once. A GRO batch holds up to 2 MiB; delivering only at
 * its end made every packet in it (a lone ping among bulk TCP) wait for the whole batch's
 * decryption. Per 256 KiB a packet waits for what precedes it, and coalescing loses nothing
 * (a GRO slot is one flow's run of at most 64 KiB).
 */
const DELIVER_BYTES = 256 * 1024;
const ADDR_RECORD_WORDS = ADDR_RECORD_LEN / 4;

export class WireGuardPort<P = Peer> {
  readonly device: PortEngine<P>;
  readonly stats: WireGuardPortStats = {
    handshakesQueued: 0,
    handshakesDroppedQueueFull: 0,
    handshakesProcessed: 0,
    sendFailures: 0,
    innerSinkRefused: 0,
    noSocketForFamily: 0,
  };
  private readonly sink: InnerSink<P>;
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly opts: WireGuardPortOptions<P>;

  private udp4: DatagramSocket | null = null;
  private udp6: DatagramSocket | null = null;
  private boundPort = -1;
  private fwmark = 0;
  private closed = false;

  // Receive side.
  private rx4: PacketBatch;
  private rx6: PacketBatch;
  private readonly rxPlain4: PacketBatch;
  private readonly rxPlain6: PacketBatch;
  private rxGro4: PacketBatch | null = null;
  private rxGro6: PacketBatch | null = null;
  private readonly rxResult = new ReceiveResult<P>();
  private readonly from: { address: string; port: number } = { address: '', port: 0 };
  private deliverOffs: Uint32Array;
  /** The address records of rx4/rx6 as 32-bit words, and the last datagram's source. */
  private rx4Words: Uint32Array;
  private rx6Words: Uint32Array;
  private readonly lastSource = new Uint32Array(ADDR_RECORD_WORDS);
  private lastSourceSock: DatagramSocket | null = null;
  private lastAddress = '';
  private lastPort = 0;
  private deliverLens: Uint32Array;
  private deliverPeers: P[];

  // Send side: per-family destination records and offsets of one encrypt batch.
  private readonly encResult = new EncryptResult<P>();
  private readonly send4: SendList;
  private readonly send6: SendList;
  /** The peer of each datagram in send4/send6 (for datagrams the socket refuses). */
  private readonly sendPeers4: P[] = [];
  private readonly sendPeers6: P[] = [];
  private readonly recordCache = new WeakMap<Endpoint, Uint8Array>();
  private lastEndpoint: Endpoint | null = null;
  private lastRecord: Uint8Array = new Uint8Array(ADDR_RECORD_LEN);
  private readonly run = new DestinationRun();

  // Handshake ring.
  private readonly hs: HandshakeRing;
  private hsScheduled = false;
  private readonly hsPerTurn: number;
  private readonly hsResult = new ReceiveResult<P>();

  // Outbox and timers.
  private readonly outMsg = new OutgoingMessage<P>();
  private readonly timer: EngineTimer;

  constructor(opts: WireGuardPortOptions<P>) {
    this.opts = opts;
    this.device = opts.device;
    this.sink = opts.sink;
    this.clock = opts.clock ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    this.timer = new EngineTimer(this.clock, () => {
      this.device.poll(this.clock());
      this.afterActivity();
      return this.device.nextDeadline();
    });
    const batch = opts.batchSize ?? 64;
    // A transport datagram is 32 bytes + padded plaintext; leave room for a full MTU.
    const maxDatagram = opts.mtu + 32 + 16;
    const rxOptions = {
      capacity: batch,
      headroom: opts.rxHeadroom ?? 0,
      maxLen: maxDatagram,
      tailroom: opts.rxTailroom ?? 0,
      withAddresses: true,
      scratch: this.areaFor(batch * maxDatagram),
    };
    this.rxPlain4 = new PacketBatch(rxOptions);
    this.rxPlain6 = new PacketBatch(rxOptions);
    this.rx4 = this.rxPlain4;
    this.rx6 = this.rxPlain6;
    this.rx4Words = wordsOf(this.rx4);
    this.rx6Words = wordsOf(this.rx6);
    this.deliverOffs = new Uint32Array(batch);
    this.deliverLens = new Uint32Array(batch);
    this.deliverPeers = new Array<P>(batch);
    this.send4 = new SendList(Math.max(batch, 256));
    this.send6 = new SendList(Math.max(batch, 256));
    this.hs = new HandshakeRing(opts.handshakeQueueSize ?? 1024);
    this.hsPerTurn = opts.handshakesPerTurn ?? 16;
  }

  /** Coalescing area for a batch of `bytes` input bytes (0 without rxCoalesceReservation). */
  private areaFor(bytes: number): number {
    const r = this.opts.rxCoalesceReservation ?? 0;
    return r > 0 ? (Math.ceil(bytes / 65535) + (this.opts.rxCoalesceFlows ?? 16)) * r : 0;
  }

  /** A receive batch for a socket: GRO slots (64 KiB, segment sizes) when the socket has GRO. */
  private rxBatchFor(sock: DatagramSocket): PacketBatch {
    const v6 = sock.family === 6;
    if (!sock.offload.gro) return v6 ? this.rxPlain6 : this.rxPlain4;
    let b = v6 ? this.rxGro6 : this.rxGro4;
    if (b === null) {
      b = new PacketBatch({
        capacity: GRO_BATCH,
        headroom: this.opts.rxHeadroom ?? 0,
        maxLen: UDP_GRO_MAX_LEN,
        tailroom: this.opts.rxTailroom ?? 0,
        withAddresses: true,
        withSegments: true,
        scratch: this.areaFor(GRO_BATCH * UDP_GRO_MAX_LEN),
      });
      if (v6) this.rxGro6 = b;
      else this.rxGro4 = b;
      const need = GRO_BATCH * GRO_MAX_SEGMENTS;
      if (this.deliverOffs.length < need) {
        this.deliverOffs = new Uint32Array(need);
        this.deliverLens = new Uint32Array(need);
        this.deliverPeers = new Array<P>(need);
      }
    }
    return b;
  }

  /** Which UDP offloads the kernel granted (v4 socket; null before bind). */
  udpOffload(): { gso: boolean; gro: boolean } | null {
    const s = this.udp4 ?? this.udp6;
    return s === null ? null : { gso: s.offload.gso, gro: s.offload.gro };
  }

  /** GSO sendmmsg entries so far (both sockets). */
  get gsoMessages(): number {
    return (this.udp4?.gsoMessages ?? 0) + (this.udp6?.gsoMessages ?? 0);
  }

  /** The UDP port the sockets are bound to (-1 before the first bind). */
  get port(): number {
    return this.boundPort;
  }

  /** Socket buffer sizes granted (v4 socket), for diagnostics. */
  bufferSizes(): DatagramBufferSizes | null {
    return (this.udp4 ?? this.udp6)?.bufferSizes() ?? null;
  }

  udpStats(): { v4: DatagramStats | null; v6: DatagramStats | null } {
    return { v4: this.udp4?.stats ?? null, v6: this.udp6?.stats ?? null };
  }

  /**
   * (Re)binds the IPv4 and IPv6 sockets to `port` (0: the kernel picks one, and IPv6 takes the
   * same). Returns the bound port. Throws UdpError when the port is taken.
   */
  async bind(port: number): Promise<number> {
    if (this.closed) throw new Error('WireGuardPort is closed');
    if (port === this.boundPort && port !== 0) return port;
    await this.closeSockets();
    // No IPv6 on this host (or the port taken only for v6): IPv4-only, as wireguard-go runs.
    const socks = await openDualStack({
      port,
      socketBuffer: this.opts.socketBuffer,
      label: 'wireguard',
      onError: this.onError,
      offload: this.opts.udpOffload === true,
      reusePort: this.opts.reusePort === true,
      ...(this.opts.udpMechanism === undefined ? {} : { mechanism: this.opts.udpMechanism }),
      ...(this.opts.openUdp === undefined ? {} : { openUdp: this.opts.openUdp }),
    });
    const v4 = socks.v4!;
    const v6 = socks.v6;
    this.udp4 = v4;
    this.udp6 = v6;
    this.boundPort = socks.port;
    this.rx4 = this.rxBatchFor(v4);
    this.rx4Words = wordsOf(this.rx4);
    v4.onBatch(this.rx4, (b) => this.onUdpBatch(v4, b));
    if (v6 !== null) {
      this.rx6 = this.rxBatchFor(v6);
      this.rx6Words = wordsOf(this.rx6);
      v6.onBatch(this.rx6, (b) => this.onUdpBatch(v6!, b));
    }
    if (this.fwmark !== 0) this.applyMark();
    this.device.listenPort = this.boundPort;
    return this.boundPort;
  }

  /**
   * Steers the SO_REUSEPORT groups of both sockets (UdpSocket.steerReusePort): transport to
   * `workers` sockets by source, other messages to the socket bound after them. Call on the
   * first port bound. False when a socket cannot (nothing is steered for that family).
   */
  steerReusePort(workers: number): boolean {
    const s = (x: DatagramSocket | null): boolean => x === null || (x.steerReusePort?.(workers) ?? false);
    return s(this.udp4) && s(this.udp6);
  }

  /** SO_MARK on both sockets (WireGuard's fwmark); 0 clears. */
  setFwmark(mark: number): void {
    this.fwmark = mark;
    this.applyMark();
  }

  private applyMark(): void {
    this.udp4?.setMark(this.fwmark);
    this.udp6?.setMark(this.fwmark);
  }

  // =========================================================================================
  // Inner → tunnel

  /**
   * Encrypts and sends packets i < count of an inner batch: buf[offs[i], +lens[i]) with at least
   * 16 bytes before and 32 after each packet that this call may overwrite. Without `peers` each
   * packet's peer is chosen by its destination (allowed IPs); with it, packet i goes to peers[i]
   * (Device.encryptFor: no lookup).
   */
  encryptBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number, peers?: readonly P[]): void {
    const now = this.clock();
    const dev = this.device;
    const out = this.encResult;
    const s4 = this.send4;
    const s6 = this.send6;
    s4.clear();
    s6.clear();
    // Segments of one super-packet (and most of a bulk batch) share a destination: the peer
    // looked up for the previous one is reused while the destination address is unchanged
    // (allowed IPs cannot change during this synchronous call).
    let runPeer: P | null = null;
    for (let i = 0; i < count; i++) {
      let r: number;
      if (peers !== undefined) r = dev.encryptFor(peers[i], buf, offs[i], lens[i], now, out);
      else if (runPeer !== null && this.run.same(buf, offs[i], lens[i]))
        r = dev.encryptFor(runPeer, buf, offs[i], lens[i], now, out);
      else {
        this.run.remember(buf, offs[i], lens[i]);
        r = dev.encrypt(buf, offs[i], lens[i], now, out);
        runPeer = out.peer;
      }
      if (r !== ENCRYPT_SEND) continue;
      // Endpoints are replaced, never mutated (Device.roam/setEndpoint): identity caches the record.
      const ep = out.endpoint!;
      if (ep !== this.lastEndpoint) {
        this.lastRecord = this.recordOf(ep);
        this.lastEndpoint = ep;
      }
      const rec = this.lastRecord;
      const list = rec[ADDR_FAMILY_OFFSET] === 6 ? s6 : s4;
      if (list.count === list.offs.length) this.flushSendList(list, buf);
      (list === s6 ? this.sendPeers6 : this.sendPeers4)[list.count] = out.peer!;
      list.add(out.start, out.length, rec);
    }
    this.flushSendList(s4, buf);
    this.flushSendList(s6, buf);
    this.afterActivity();
  }

  private recordOf(ep: Endpoint): Uint8Array {
    let rec = this.recordCache.get(ep);
    if (rec === undefined) {
      rec = new Uint8Array(ADDR_RECORD_LEN);
      encodeAddress(ep.address, ep.port, rec, 0);
      this.recordCache.set(ep, rec);
    }
    return rec;
  }

  private flushSendList(list: SendList, buf: Uint8Array): void {
    if (list.count === 0) return;
    const sock = list === this.send6 ? this.udp6 : this.udp4;
    if (sock === null) {
      this.stats.noSocketForFamily += list.count;
    } else {
      const sent = sock.sendBatch(buf, list.offs, list.lens, list.addrs, list.idx, list.count);
      if (sent < list.count) {
        this.stats.sendFailures += list.count - sent;
        // Not sent, so not transferred: the engine takes them off its tx counters (as
        // wireguard-go counts only what its socket took). A full buffer stops the batch, so
        // those are its last; one skipped for another error is counted as one of them.
        const peers = list === this.send6 ? this.sendPeers6 : this.sendPeers4;
        for (let i = Math.max(0, sent); i < list.count; i++) this.device.sendFailed(peers[i]!, list.lens[i]);
      }
    }
    list.clear();
  }

  // =========================================================================================
  // Tunnel → inner

  private onUdpBatch(sock: DatagramSocket, b: PacketBatch): void {
    const now = this.clock();
    const underLoad = this.hs.underLoad;
    const words = b === this.rx4 ? this.rx4Words : this.rx6Words;
    const last = this.lastSource;
    const segs = b.segs;
    const gro = segs.length > 0;
    this.delivered = 0;
    this.deliveredBytes = 0;
    for (let i = 0; i < b.count; i++) {
      // A batch usually comes from one peer: compare the 24-byte source record with the previous
      // datagram's (6 words) instead of interning its address again.
      const w = i * ADDR_RECORD_WORDS;
      if (
        words[w] !== last[0] ||
        words[w + 1] !== last[1] ||
        words[w + 2] !== last[2] ||
        words[w + 3] !== last[3] ||
        words[w + 4] !== last[4] ||
        words[w + 5] !== last[5] ||
        this.lastSourceSock !== sock
      ) {
        for (let k = 0; k < ADDR_RECORD_WORDS; k++) last[k] = words[w + k];
        this.lastSourceSock = sock;
        this.lastAddress = sock.addressOf(b, i);
        this.lastPort = sock.portOf(b, i);
      }
      const off = b.offs[i];
      const len = b.lens[i];
      const seg = gro ? segs[i] : 0;
      if (seg === 0 || len <= seg) {
        this.receiveOne(b, off, len, now, underLoad);
      } else {
        // A GRO run: datagram k at off + k*seg, the last one possibly shorter.
        for (let p = 0; p < len; p += seg) this.receiveOne(b, off + p, Math.min(seg, len - p), now, underLoad);
      }
    }
    this.deliver(b);
    this.afterActivity();
  }

  private delivered = 0;
  private deliveredBytes = 0;

  /**
   * Runs the datagrams of `b` (slots 0..count-1, no GRO runs) through the receive path as if
   * read from address:port, without a socket: the start-up warm-up feeds a throwaway port this
   * way (wireguard-warmup.ts). Handshake messages go to the ring as usual.
   */
  receiveBatchFrom(b: PacketBatch, address: string, port: number): void {
    const now = this.clock();
    this.lastSource.fill(0);
    this.lastSourceSock = null;
    this.lastAddress = address;
    this.lastPort = port;
    this.delivered = 0;
    this.deliveredBytes = 0;
    for (let i = 0; i < b.count; i++) this.receiveOne(b, b.offs[i], b.lens[i], now, false);
    this.deliver(b);
    this.afterActivity();
  }

  private receiveOne(b: PacketBatch, off: number, len: number, now: number, underLoad: boolean): void {
    const from = this.from;
    const out = this.rxResult;
    from.address = this.lastAddress;
    from.port = this.lastPort;
    if (isHandshakeMessage(b.buf, off, len)) {
      // mac1, and under load mac2/cookie and the rate limit, now: a flood of valid-mac1
      // initiations is answered or dropped here and never takes ring slots or event-loop turns.
      if (this.device.screenHandshake(b.buf, off, len, from, now, underLoad || this.hs.underLoad, out)) {
        this.queueHandshake(b.buf, off, len, this.lastAddress, this.lastPort);
      }
      return;
    }
    if (this.device.receive(b.buf, off, len, from, now, underLoad, out) === RECEIVE_DELIVER) {
      const d = this.delivered++;
      this.deliverOffs[d] = out.start;
      this.deliverLens[d] = out.length;
      this.deliverPeers[d] = out.peer!;
      this.deliveredBytes += out.length;
      if (this.delivered === this.deliverOffs.length || this.deliveredBytes >= DELIVER_BYTES) this.deliver(b);
    }
  }

  /** Hands the decrypted packets collected so far to the sink (with the batch's scratch area). */
  private deliver(b: PacketBatch): void {
    const n = this.delivered;
    if (n === 0) return;
    this.delivered = 0;
    this.deliveredBytes = 0;
    const took = this.sink.writeBatch(
      b.buf,
      this.deliverOffs,
      this.deliverLens,
      this.deliverPeers,
      n,
      b.scratchOff,
      b.scratchLen,
    );
    if (took < n) this.stats.innerSinkRefused += n - took;
  }

  private queueHandshake(buf: Uint8Array, off: number, len: number, address: string, port: number): void {
    if (!this.hs.push(buf, off, len, address, port)) {
      this.stats.handshakesDroppedQueueFull++;
      return;
    }
    this.stats.handshakesQueued++;
    if (!this.hsScheduled) {
      this.hsScheduled = true;
      setImmediate(this.processHandshakes);
    }
  }

  /** Runs a few queued handshakes per event-loop turn so data batches interleave with them. */
  private readonly processHandshakes = (): void => {
    this.hsScheduled = false;
    if (this.closed) return;
    const now = this.clock();
    const from = this.from;
    const hs = this.hs;
    for (let n = 0; n < this.hsPerTurn && hs.depth > 0; n++) {
      const slot = hs.shift(from);
      this.device.receiveScreened(hs.buf, slot * HANDSHAKE_SLOT, hs.lengthOf(slot), from, now, this.hsResult);
      this.stats.handshakesProcessed++;
    }
    if (hs.depth > 0) {
      this.hsScheduled = true;
      setImmediate(this.processHandshakes);
    }
    this.afterActivity();
  };

  /** Handshake ring depth (for metrics). */
  get handshakeQueueDepth(): number {
    return this.hs.depth;
  }

  /** The handshake ring is at least 1/8 full: screens demand mac2 cookies. */
  get handshakeUnderLoad(): boolean {
    return this.hs.underLoad;
  }

  /**
   * Queues an initiation or response another thread already screened (mac1; under load mac2
   * and the rate limit) for the full processing, as if received from address:port. False
   * (counted) when the handshake queue is full.
   */
  queueScreened(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    if (this.closed) return false;
    const n = this.stats.handshakesDroppedQueueFull;
    this.queueHandshake(buf, off, len, address, port);
    return this.stats.handshakesDroppedQueueFull === n;
  }

  // =========================================================================================
  // Outbox and timers

  /** Sends what the engine queued (handshakes, keepalives, staged packets) and re-arms the timer. */
  afterActivity(): void {
    if (this.device.outgoingCount > 0) this.flushOutbox();
    const deadline = this.device.nextDeadline();
    this.timer.armBefore(deadline);
  }

  /**
   * Starts a handshake with every peer that has an endpoint and no session, and sends it now:
   * a data plane that has just started (a new process, a new active replica) does not wait for
   * data or for the peer's Rekey-Timeout (Device.initiateIdlePeers). Returns the initiations.
   */
  initiateIdlePeers(): number {
    const n = this.device.initiateIdlePeers(this.clock());
    this.afterActivity();
    return n;
  }

  /** Runs the engine's timers now (also used after configuration changes). */
  poll(): void {
    this.device.poll(this.clock());
    this.afterActivity();
  }

  private flushOutbox(): void {
    const m = this.outMsg;
    while (this.device.popOutgoing(m)) {
      const sock = m.address.includes(':') ? this.udp6 : this.udp4;
      if (sock === null) this.stats.noSocketForFamily++;
      else if (!sock.send(m.buf, m.start, m.length, m.address, m.port)) this.stats.sendFailures++;
      this.device.releaseOutgoing(m.slot);
    }
  }

  private async closeSockets(): Promise<void> {
    const socks = [this.udp4, this.udp6];
    this.udp4 = null;
    this.udp6 = null;
    this.boundPort = -1;
    for (const s of socks) if (s !== null) await s.close();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timer.close();
    await this.closeSockets();
  }
}

/** A batch's address records as 32-bit words (24-byte records: 6 words each). */
function wordsOf(b: PacketBatch): Uint32Array {
  return new Uint32Array(b.addrs.buffer, b.addrs.byteOffset, b.capacity * ADDR_RECORD_WORDS);
}
