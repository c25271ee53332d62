/**
 * The Geneve side of a pipeline: GeneveEngine + GeneveTunnelTable put on a UDP socket (Liqo's
 * port 6091 by default), with batched receive (recvmmsg) and batched send (sendmmsg).
 *
 * Used by the gateway (tunnels to every node) and by the node agent (one tunnel per gateway).
 *
 * Receive: one wake-up fills a PacketBatch; every datagram is decapsulated in place
 * (GeneveEngine.decapsulate, tunnel found by VNI + underlay source); the inner IP packets of the
 * batch are handed to the GeneveSink ONCE, with the tunnel each came from. L2 ARP replies the
 * engine builds (verdict SendControl) go straight back to the asking tunnel. Packets to an L2
 * peer whose MAC is being resolved are held by the engine (verdict Held): after a receive batch
 * and on a timer at the engine's next deadline the port polls it and sends what it releases.
 *
 * Send: `sendBatch` picks the tunnel per packet (GeneveTunnelTable.lookupSend: a tunnel's remote
 * internal /32, else the longest pod route), `sendBatchVia` takes tunnels the caller already
 * chose; either way the engine writes the Geneve header (+ inner Ethernet in L2 mode) into the
 * headroom in front of each packet, and all datagrams leave with one sendmmsg per address family.
 * A packet of the previous one's flow and tunnel (the segments of a super-packet) reuses its
 * tunnel lookup, header bytes, source port and address record (engine.encapsulateNext).
 *
 * Offloads (`offload: true`; per feature, whatever the kernel refuses stays off, udpOffload()
 * says what is on): with UDP GRO a receive slot holds a run of datagrams of batch.segs[i] bytes,
 * spread apart within the slot
 * (one copyWithin each: the sink needs headroom and tailroom around every packet; with an addon
 * that scatters, the kernel receives the next slots in pieces at the last run's size, so a
 * steady sender's runs arrive spread already and other sizes are joined first) and
 * decapsulated (a datagram with the previous one's Geneve header skips validation and lookup:
 * engine.decapsulateNext), so one wake-up can deliver up to GRO_BATCH × 64 inner packets; with
 * UDP GSO the sockets send every run of equal-sized datagrams to one tunnel (the encapsulated
 * segments of one super-packet) as one sendmmsg entry. With `rxCoalesceReservation` every
 * receive batch carries a scratch area after its slots, handed to the sink for coalescing.
 *
 * Buffer contract: receive batches are owned by this port and valid only during the sink call;
 * the sink may rewrite packets in place, move them within their slot (headroom
 * `rxHeadroom` ≥ 64 bytes before the Geneve header, `rxTailroom` ≥ 48 bytes after the datagram)
 * and hand them to sendBatch/sendBatchVia or to WireGuard encryption before returning. Buffers
 * passed to sendBatch belong to the caller; nothing is kept after the call. Per packet nothing
 * allocates: offsets, lengths, tunnels and 24-byte destination records live in preallocated arrays.
 *
 * Drops are counted (stats): no tunnel for the destination, too little headroom for the
 * tunnel's header, send failures; the engine counts its own drops by reason (engine.counters).
 * The port's contract with its owner (sink, options, counters) is geneve-port-types.ts.
 */
import { PacketBatch } from '../io/batch.js';
import { ADDR_PORT_OFFSET, ADDR_RECORD_LEN, loadNativeIo } from '../io/native.js';
import { encodeAddress, UDP_GRO_MAX_LEN } from '../io/udp.js';
import type { DatagramSocket, DatagramStats } from '../io/datagram.js';
import { GeneveEngine } from '../geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../geneve/result.js';
import { GENEVE_HEADER_LEN, GENEVE_LIQO_UDP_PORT } from '../geneve/header.js';
import { GENEVE_INNER_ETHERNET_LEN, GENEVE_MAX_HEADROOM } from '../geneve/mtu.js';
import type { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import { SendList } from './send-list.js';
import {
  GENEVE_OFFLOAD_DELIVER_MAX,
  GenevePortError,
  GRO_BATCH,
  GRO_MAX_SEGMENTS,
  type GenevePortOptions,
  type GenevePortStats,
  type GeneveSink,
} from './geneve-port-types.js';
import { openDualStack } from './dual-stack.js';

const DEFAULT_BATCH = 64;
const MIN_RX_HEADROOM = 64;
const MIN_RX_TAILROOM = 48;

export class GenevePort {
  readonly engine: GeneveEngine;
  readonly table: GeneveTunnelTable;
  readonly stats: GenevePortStats = {
    rxDatagrams: 0,
    rxDelivered: 0,
    txPackets: 0,
    txNoTunnel: 0,
    txNoHeadroom: 0,
    txSendFailures: 0,
    txNoSocket: 0,
    controlSent: 0,
    rxGroOverrun: 0,
    rxRunsInPlace: 0,
    rxJoined: 0,
  };
  /** Headroom and tailroom every delivered packet has (see GeneveSink). */
  readonly rxHeadroom: number;
  readonly rxTailroom: number;

  private readonly sink: GeneveSink;
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private udp4: DatagramSocket | null = null;
  private udp6: DatagramSocket | null = null;
  private boundPort = -1;
  private closed = false;

  /** Receive batches, made per socket at bind (GRO slots or plain ones). */
  private rx4: PacketBatch | null = null;
  private rx6: PacketBatch | null = null;
  private readonly maxLen: number;
  private readonly batch: number;
  private readonly opts: GenevePortOptions;
  private readonly rxResult = new GeneveResult();
  private readonly txResult = new GeneveResult();
  private readonly outOffs: Uint32Array;
  private readonly outLens: Uint32Array;
  private readonly outTunnels: GeneveTunnel[];
  private readonly send4: SendList;
  private readonly send6: SendList;
  /** L2 hold queue: scratch for held packets on their way out, its result, and the deadline timer. */
  private holdBuf: Uint8Array | null = null;
  private readonly holdResult = new GeneveResult();
  private holdTimer: ReturnType<typeof setTimeout> | null = null;
  private holdTimerAt = Infinity;
  /** Destination record per tunnel, rebuilt when the tunnel's port changes. */
  private readonly records = new WeakMap<GeneveTunnel, Uint8Array>();

  private constructor(opts: GenevePortOptions) {
    this.table = opts.table;
    this.sink = opts.sink;
    // The engine's port only checks whole outer packets (decapsulateIp); port 0 (ephemeral bind) keeps the default.
    this.engine = new GeneveEngine(opts.table, { port: opts.port || GENEVE_LIQO_UDP_PORT, ...opts.engine });
    this.clock = opts.clock ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    const batch = opts.batchSize ?? DEFAULT_BATCH;
    this.rxHeadroom = opts.rxHeadroom ?? 128;
    this.rxTailroom = opts.rxTailroom ?? 64;
    if (this.rxHeadroom < MIN_RX_HEADROOM)
      throw new RangeError(`rxHeadroom must be ≥ ${MIN_RX_HEADROOM}, got ${this.rxHeadroom}`);
    if (this.rxTailroom < MIN_RX_TAILROOM)
      throw new RangeError(`rxTailroom must be ≥ ${MIN_RX_TAILROOM}, got ${this.rxTailroom}`);
    const maxLen = opts.maxDatagram ?? 9216;
    this.opts = opts;
    this.maxLen = maxLen;
    this.batch = batch;
    // With offload, a GRO batch may hold GRO_BATCH × 64 datagrams: size the delivery for it.
    const deliver = opts.offload === true ? Math.max(batch, GENEVE_OFFLOAD_DELIVER_MAX) : batch;
    this.outOffs = new Uint32Array(deliver);
    this.outLens = new Uint32Array(deliver);
    this.outTunnels = new Array<GeneveTunnel>(deliver);
    const sendCap = Math.max(batch, 256);
    this.send4 = new SendList(sendCap);
    this.send6 = new SendList(sendCap);
  }

  /** Coalescing area for a batch of `bytes` input bytes (0 without rxCoalesceReservation). */
  private areaFor(bytes: number): number {
    const r = this.opts.rxCoalesceReservation ?? 0;
    return r > 0 ? (Math.ceil(bytes / 65535) + (this.opts.rxCoalesceFlows ?? 16)) * r : 0;
  }

  /** The most packets one deliverBatch call passes. */
  get deliverCapacity(): number {
    return this.outOffs.length;
  }

  /** A receive batch for a socket: GRO slots (64 KiB, segment sizes) when the socket has GRO. */
  private rxBatchFor(sock: DatagramSocket): PacketBatch {
    if (!sock.offload.gro) {
      return new PacketBatch({
        capacity: this.batch,
        headroom: this.rxHeadroom,
        tailroom: this.rxTailroom,
        maxLen: this.maxLen,
        withAddresses: true,
        scratch: this.areaFor(this.batch * this.maxLen),
      });
    }
    // Tailroom for spreading a run of up to 64 datagrams apart (see onUdpBatch).
    const spread = (GRO_MAX_SEGMENTS - 1) * (this.rxHeadroom + this.rxTailroom);
    return new PacketBatch({
      capacity: GRO_BATCH,
      headroom: this.rxHeadroom,
      maxLen: UDP_GRO_MAX_LEN,
      tailroom: this.rxTailroom + spread,
      withAddresses: true,
      withSegments: true,
      scratch: this.areaFor(GRO_BATCH * UDP_GRO_MAX_LEN),
    });
  }

  /** Binds the socket(s) and starts receiving. Throws GenevePortError / UdpError naming the port. */
  static async open(opts: GenevePortOptions): Promise<GenevePort> {
    const p = new GenevePort(opts);
    await p.bind(opts);
    return p;
  }

  private async bind(opts: GenevePortOptions): Promise<void> {
    const port = opts.port ?? GENEVE_LIQO_UDP_PORT;
    const mech = opts.udpMechanism;
    if (opts.netns !== undefined && (mech === 'dgram' || loadNativeIo() === null)) {
      throw new GenevePortError(
        `opening the Geneve socket inside network namespace ${opts.netns} needs the native I/O addon (build it with \`node native/build.mjs\`), or run the process inside the namespace`,
      );
    }
    const socks = await openDualStack({
      port,
      socketBuffer: opts.socketBuffer,
      label: 'geneve',
      onError: this.onError,
      offload: opts.offload === true,
      ...(opts.address === undefined ? {} : { address: opts.address }),
      ...(mech === undefined ? {} : { mechanism: mech }),
      ...(opts.netns === undefined ? {} : { netns: opts.netns }),
      ...(opts.openUdp === undefined ? {} : { openUdp: opts.openUdp }),
    });
    this.udp4 = socks.v4;
    this.udp6 = socks.v6;
    this.boundPort = socks.port;
    const u4 = this.udp4;
    const u6 = this.udp6;
    if (u4 !== null) {
      this.rx4 = this.rxBatchFor(u4);
      u4.onBatch(this.rx4, (b) => this.onUdpBatch(u4, b));
    }
    if (u6 !== null) {
      this.rx6 = this.rxBatchFor(u6);
      u6.onBatch(this.rx6, (b) => this.onUdpBatch(u6, b));
    }
  }

  /** The bound UDP port. */
  get port(): number {
    return this.boundPort;
  }

  /** Which UDP offloads the kernel granted (the v4 socket, else v6; null when closed). */
  udpOffload(): { gso: boolean; gro: boolean } | null {
    const s = this.udp4 ?? this.udp6;
    return s === null ? null : { gso: s.offload.gso, gro: s.offload.gro };
  }

  /** GSO sendmmsg entries so far (both sockets). */
  get gsoMessages(): number {
    return (this.udp4?.gsoMessages ?? 0) + (this.udp6?.gsoMessages ?? 0);
  }

  udpStats(): { v4: DatagramStats | null; v6: DatagramStats | null } {
    return { v4: this.udp4?.stats ?? null, v6: this.udp6?.stats ?? null };
  }

  // =========================================================================================
  // Receive

  private onUdpBatch(sock: DatagramSocket, b: PacketBatch): void {
    if (this.closed) return;
    const now = this.clock();
    const segs = b.segs;
    const gro = segs.length > 0;
    const gap = this.rxHeadroom + this.rxTailroom;
    // The layout the slots were received in: pieces of `lay` bytes at `lay + gap` apart, or 0.
    const lay = b.scatterSeg;
    let nextLay = lay;
    this.pending = 0;
    for (let i = 0; i < b.count; i++) {
      const from = sock.addressOf(b, i);
      const off = b.offs[i]!;
      const len = b.lens[i]!;
      const seg = gro ? segs[i]! : 0;
      if (seg !== 0) nextLay = seg;
      if (lay > 0 && len > lay && seg !== lay) {
        this.joinPieces(b.buf, off, len, lay, b.maxLen);
        this.stats.rxJoined++;
      }
      if (seg === 0 || len <= seg) {
        this.receiveOne(b, off, len, from, now);
      } else {
        // A GRO run: datagram k at off + k*seg, back to back, unless the kernel already
        // scattered it at the stride (seg === lay). The sink's contract (headroom and tailroom
        // around every packet) needs gaps: spread the run within its slot first.
        const stride = seg + gap;
        const last = Math.ceil(len / seg) - 1;
        if (last >= GRO_MAX_SEGMENTS) {
          this.stats.rxGroOverrun++;
          continue;
        } // more than the kernel's limit: no room to spread
        if (seg === lay) this.stats.rxRunsInPlace++;
        else {
          for (let k = last; k > 0; k--) {
            const src = off + k * seg;
            b.buf.copyWithin(off + k * stride, src, src + Math.min(seg, len - k * seg));
          }
        }
        // One sender, one run: after the first, a datagram with the previous one's Geneve header
        // skips validation and the tunnel lookup (engine.decapsulateNext).
        this.receiveOne(b, off, Math.min(seg, len), from, now);
        for (let k = 1; k <= last; k++) {
          const o = off + k * stride;
          const n = Math.min(seg, len - k * seg);
          if (this.engine.decapsulateNext(b.buf, o, n, o - stride, now, this.rxResult)) this.received(b);
          else this.receiveOne(b, o, n, from, now);
        }
      }
    }
    // An ARP reply in this batch releases held packets (hold.ts); new sends to that tunnel
    // queue behind them in the engine until then, so order holds whenever this runs.
    if (this.engine.holdPending > 0) this.pollHold(now);
    this.deliver(b);
    // The next receives scatter at the size of the last run seen: a steady sender's runs then
    // arrive spread apart and need no copy.
    if (sock.canScatter && nextLay !== lay) {
      b.scatterSeg = nextLay;
      b.scatterStride = nextLay + gap;
    }
  }

  /**
   * A slot received scattered in pieces of `lay` bytes (recvBatch: at most 64, the last holding
   * the rest of maxLen) holding something other than a run of `lay`-byte datagrams: moves the
   * pieces back to back (forward: each one moves down).
   */
  private joinPieces(buf: Uint8Array, off: number, len: number, lay: number, maxLen: number): void {
    const stride = lay + this.rxHeadroom + this.rxTailroom;
    const pieces = Math.min(GRO_MAX_SEGMENTS, Math.ceil(maxLen / lay));
    for (let k = 1; k * lay < len; k++) {
      const n = k === pieces - 1 ? len - k * lay : Math.min(lay, len - k * lay);
      buf.copyWithin(off + k * lay, off + k * stride, off + k * stride + n);
      if (k === pieces - 1) break;
    }
  }

  /** Inner packets collected for the sink (index < pending). */
  private pending = 0;

  private receiveOne(b: PacketBatch, off: number, len: number, from: string, now: number): void {
    this.engine.decapsulate(b.buf, off, len, from, now, this.rxResult);
    this.received(b);
  }

  /** Hands on what the engine made of a datagram (rxResult). */
  private received(b: PacketBatch): void {
    const res = this.rxResult;
    this.stats.rxDatagrams++;
    const v = res.verdict;
    if (v === GeneveVerdict.Deliver) {
      const n = this.pending++;
      this.outOffs[n] = res.off;
      this.outLens[n] = res.len;
      this.outTunnels[n] = res.tunnel!;
      if (this.pending === this.outOffs.length) this.deliver(b);
    } else if (v === GeneveVerdict.SendControl) {
      this.sendControl(b.buf, res);
    }
  }

  private deliver(b: PacketBatch): void {
    const n = this.pending;
    if (n === 0) return;
    this.pending = 0;
    // The sink may rewrite the buffer (headers in place): no decapsulateNext against it after.
    this.rxResult.verdict = GeneveVerdict.Drop;
    this.stats.rxDelivered += n;
    this.sink.deliverBatch(b.buf, this.outOffs, this.outLens, this.outTunnels, n, b.scratchOff, b.scratchLen);
  }

  /** Sends an ARP request for `tunnel`'s peer now when its MAC is unknown (engine.resolve). */
  resolve(tunnel: GeneveTunnel): void {
    if (this.closed) return;
    const now = this.clock();
    if (this.engine.resolve(tunnel, now)) this.pollHold(now);
  }

  /**
   * Sends what the engine's hold queue has due (held packets of resolved neighbours, ARP
   * retransmissions; timeouts are counted by the engine) and re-arms the timer for the next
   * deadline. The scratch buffer is made on first use (once per port).
   */
  private pollHold(now: number): void {
    const buf = (this.holdBuf ??= new Uint8Array(GENEVE_MAX_HEADROOM + 65536));
    const res = this.holdResult;
    for (;;) {
      const v = this.engine.poll(buf, GENEVE_MAX_HEADROOM, now, res);
      if (v === GeneveVerdict.Drop) break;
      if (v === GeneveVerdict.SendControl) {
        this.sendControl(buf, res);
        continue;
      }
      const t = res.tunnel!;
      const sock = t.underlayFamily === 4 ? this.udp4 : this.udp6;
      if (sock === null || this.closed) this.stats.txNoSocket++;
      else if (sock.sendTo(buf, res.off, res.len, this.recordOf(t), 0)) this.stats.txPackets++;
      else this.stats.txSendFailures++;
    }
    this.armHold(now);
  }

  /** A timer for the hold queue's next deadline (none when nothing is held). */
  private armHold(now: number): void {
    const at = this.engine.holdDeadline(now);
    if (at === Infinity || this.closed) return;
    if (this.holdTimer !== null) {
      if (this.holdTimerAt <= at) return;
      clearTimeout(this.holdTimer);
    }
    this.holdTimerAt = at;
    this.holdTimer = setTimeout(
      () => {
        this.holdTimer = null;
        if (!this.closed) this.pollHold(this.clock());
      },
      Math.max(0, at - now),
    );
    this.holdTimer.unref();
  }

  private sendControl(buf: Uint8Array, res: GeneveResult): void {
    const t = res.tunnel!;
    const sock = t.underlayFamily === 4 ? this.udp4 : this.udp6;
    if (sock === null) {
      this.stats.txNoSocket++;
      return;
    }
    if (sock.sendTo(buf, res.off, res.len, this.recordOf(t), 0)) this.stats.controlSent++;
    else this.stats.txSendFailures++;
  }

  // =========================================================================================
  // Send

  /**
   * Encapsulates and sends packets i < count of buf (offs/lens), each to the tunnel its inner
   * destination routes to. Every packet needs geneveEncapHeaderLen(...) bytes of headroom
   * (8 + options [+ 14 in L2]); a packet without a tunnel or without headroom is dropped and
   * counted. Returns the number of datagrams handed to the kernel.
   */
  sendBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number {
    return this.encapAndSend(buf, offs, lens, null, count);
  }

  /** As sendBatch, with the tunnel of packet i given as tunnels[i] (undefined: counted drop). */
  sendBatchVia(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    tunnels: readonly (GeneveTunnel | undefined)[],
    count: number,
  ): number {
    return this.encapAndSend(buf, offs, lens, tunnels, count);
  }

  /** `tunnels` null: each packet's tunnel by lookupSend (sendBatch). */
  private encapAndSend(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    tunnels: readonly (GeneveTunnel | undefined)[] | null,
    count: number,
  ): number {
    const now = this.clock();
    const res = this.txResult;
    const engine = this.engine;
    const table = this.table;
    const s4 = this.send4;
    const s6 = this.send6;
    let sent = 0;
    // The segments of one super-packet share tunnel, header and source port: each after the
    // first copies the previous header (engine.encapsulateNext: same flow key, hence the same
    // destination and lookupSend answer) and reuses its address record; only the first of a
    // run is looked up and encapsulated in full.
    res.verdict = GeneveVerdict.Drop;
    let rec: Uint8Array | null = null;
    for (let i = 0; i < count; i++) {
      const off = offs[i]!;
      const len = lens[i]!;
      const prev = res.tunnel;
      let t: GeneveTunnel | undefined;
      if (
        prev !== null &&
        (tunnels === null || tunnels[i] === prev) &&
        engine.encapsulateNext(buf, off, len, prev, res)
      ) {
        t = prev;
      } else {
        t = tunnels === null ? table.lookupSend(buf, off, len) : tunnels[i];
        if (t === undefined) {
          this.stats.txNoTunnel++;
          continue;
        }
        const need = GENEVE_HEADER_LEN + t.options.length + (t.l2 ? GENEVE_INNER_ETHERNET_LEN : 0);
        if (off < need) {
          this.stats.txNoHeadroom++;
          continue;
        }
        const v = engine.encapsulate(buf, off, len, t, now, res);
        if (v === GeneveVerdict.Drop) continue;
        if (v === GeneveVerdict.Held) {
          this.armHold(now);
          continue;
        }
        if (v === GeneveVerdict.SendControl) this.stats.controlSent++;
        rec = this.recordOf(t);
      }
      const list = t.underlayFamily === 4 ? s4 : s6;
      if (list.count === list.offs.length) sent += this.flush(list, buf);
      list.add(res.off, res.len, rec!);
    }
    sent += this.flush(s4, buf);
    sent += this.flush(s6, buf);
    this.stats.txPackets += sent;
    return sent;
  }

  private flush(list: SendList, buf: Uint8Array): number {
    const n = list.count;
    if (n === 0) return 0;
    const sock = list === this.send4 ? this.udp4 : this.udp6;
    if (sock === null || this.closed) {
      this.stats.txNoSocket += n;
      list.clear();
      return 0;
    }
    const sent = sock.sendBatch(buf, list.offs, list.lens, list.addrs, list.idx, n);
    list.clear();
    if (sent < n) this.stats.txSendFailures += n - sent;
    return sent;
  }

  /** The tunnel's destination record (remote underlay + port), cached per tunnel. */
  private recordOf(t: GeneveTunnel): Uint8Array {
    let rec = this.records.get(t);
    if (rec === undefined || ((rec[ADDR_PORT_OFFSET]! << 8) | rec[ADDR_PORT_OFFSET + 1]!) !== t.remotePort) {
      rec = new Uint8Array(ADDR_RECORD_LEN);
      encodeAddress(t.remoteUnderlayText, t.remotePort, rec, 0);
      this.records.set(t, rec);
    }
    return rec;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.holdTimer !== null) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    const socks = [this.udp4, this.udp6];
    this.udp4 = null;
    this.udp6 = null;
    for (const s of socks) if (s !== null) await s.close();
  }
}
