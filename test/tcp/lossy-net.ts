/**
 * Two TCP endpoints joined by a seeded, impaired virtual network on a virtual clock, for property
 * tests: each direction is a MemoryLink (src/io/memory-link.ts: loss, duplication, reordering,
 * jitter, decided per segment by a seeded stream) plus an optional corruption that flips one bit
 * of the TCP segment (the checksum then fails). The clock jumps to the next delivery or timer deadline.
 *
 * The network checks, on every segment, what no engine may do whatever the network does:
 * - a sender never sends data beyond the right edge of the largest window it has been offered
 *   (RFC 9293 §3.8.6: the window the receiver advertised, scaled, as received by the sender);
 * - the out-of-order ranges and the rings stay within their bounds;
 * and keeps the input result of every delivered segment (the drops must match the counters).
 */
import { parseAddress } from '../../src/packet/addr.js';
import { MemoryLink, SeededRandom, type LinkImpairments } from '../../src/io/memory-link.js';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { fillTcpChecksumV4, fillTcpChecksumV6 } from '../../src/packet/tcp.js';
import {
  TCP_FLAG_SYN,
  tcpAck,
  tcpDstPort,
  tcpSrcPort,
  tcpFlags,
  tcpHeaderLen,
  tcpSeq,
  tcpWindow,
} from '../../src/packet/tcp.js';
import type { TcpConnection } from '../../src/tcp/connection.js';
import { TcpEndpoint } from '../../src/tcp/endpoint.js';
import type { TcpOptions } from '../../src/tcp/options.js';
import { TCP_ACCEPTED, TCP_DROP_OOO_FULL } from '../../src/tcp/reasons.js';
import { seqDiff, seqGt } from '../../src/tcp/seq.js';

export type Side = 'a' | 'b';

const A4 = parseAddress('10.0.0.1');
const B4 = parseAddress('192.0.2.7');
const A6 = parseAddress('fd00::1');
const B6 = parseAddress('fd00::2');

export interface Setup {
  seed: number;
  family: 4 | 6;
  mtu: number;
  ringA: number;
  ringB: number;
  windowScaling: boolean;
  sack: boolean;
  maxOooRanges: number;
  loss: number;
  duplicate: number;
  reorder: number;
  corrupt: number;
  bytesAB: number;
  bytesBA: number;
  /** Bytes a reader takes per turn (0: it stalls this turn), from a seeded cycle. */
  readChunks: number[];
}

interface InFlight {
  at: number;
  order: number;
  to: Side;
  pkt: Uint8Array;
}

export interface LossyNetOptions {
  /** Per-direction impairments; the seed of b→a is derived from a→b's. */
  readonly link: LinkImpairments;
  /** One-way latency, ms. */
  readonly latencyMs: number;
  /** Probability that a copy has one byte flipped (its checksum then fails), 0..1. */
  readonly corrupt?: number;
}

export class LossyNet {
  now = 1000;
  readonly a: TcpEndpoint;
  readonly b: TcpEndpoint;
  readonly links: Record<Side, MemoryLink>;
  /** Results of input() for every delivered segment, by side: index = code. */
  readonly results: Record<Side, number[]> = { a: [], b: [] };
  corrupted = 0;
  delivered = 0;
  /** The largest right edge (SEG.ACK + scaled window) each side has received from the other. */
  private readonly edge: Record<Side, number> = { a: 0, b: 0 };
  private readonly edgeKnown: Record<Side, boolean> = { a: false, b: false };
  private queue: InFlight[] = [];
  private order = 0;
  private readonly rng: SeededRandom;
  private readonly buf = new Uint8Array(70000);
  private readonly v = new IpView();
  private readonly corrupt: number;
  private readonly latencyMs: number;
  /** The connection of each side (its window scale tells how to read the other's window). */
  conn: Record<Side, TcpConnection | null> = { a: null, b: null };
  /** Sees every segment an endpoint sends (before the link decides its fate). */
  tap: ((from: Side, pkt: Uint8Array, len: number) => void) | null = null;

  constructor(
    opts: LossyNetOptions,
    aOpts: Partial<TcpOptions> = {},
    bOpts: Partial<TcpOptions> = {},
    bAccepts: () => boolean = () => true,
  ) {
    const seed = opts.link.seed ?? 1;
    this.links = {
      a: new MemoryLink({ ...opts.link, seed }),
      b: new MemoryLink({ ...opts.link, seed: (seed ^ 0x9e3779b9) >>> 0 }),
    };
    this.rng = new SeededRandom((seed * 31 + 7) >>> 0);
    const isn = new SeededRandom(seed + 1);
    this.a = new TcpEndpoint(aOpts, { random: () => isn.nextU32() });
    this.b = new TcpEndpoint(bOpts, { accept: () => bAccepts(), random: () => isn.nextU32() });
    this.corrupt = opts.corrupt ?? 0;
    this.latencyMs = opts.latencyMs;
  }

  endpoint(s: Side): TcpEndpoint {
    return s === 'a' ? this.a : this.b;
  }

  /** Segments on the wire now. */
  get inFlight(): number {
    return this.queue.length;
  }

  /** Takes every segment both endpoints have to send and puts it on the links. */
  drain(): void {
    for (const from of ['a', 'b'] as const) {
      const ep = this.endpoint(from);
      for (let n = ep.output(this.buf, 0, this.now); n > 0; n = ep.output(this.buf, 0, this.now)) {
        this.check(from, this.buf, n);
        this.tap?.(from, this.buf, n);
        const link = this.links[from];
        const copies = link.copies();
        for (let i = 0; i < copies; i++) {
          const d = link.delay();
          if (d < 0) continue;
          const pkt = this.buf.slice(0, n);
          if (this.corrupt > 0 && this.rng.next() < this.corrupt) {
            // One bit of the TCP segment (header or payload): its checksum always catches it.
            const at = this.v.l4 + Math.floor(this.rng.next() * this.v.l4Len);
            pkt[at]! ^= 1 << Math.floor(this.rng.next() * 8);
            this.corrupted++;
          }
          this.queue.push({
            at: this.now + this.latencyMs + d,
            order: this.order++,
            to: from === 'a' ? 'b' : 'a',
            pkt,
          });
        }
      }
    }
  }

  /** Delivers every segment due now (in arrival order), draining replies as it goes. */
  deliverDue(): number {
    let n = 0;
    for (;;) {
      let best = -1;
      for (let i = 0; i < this.queue.length; i++) {
        const q = this.queue[i]!;
        if (q.at > this.now) continue;
        if (
          best < 0 ||
          q.at < this.queue[best]!.at ||
          (q.at === this.queue[best]!.at && q.order < this.queue[best]!.order)
        )
          best = i;
      }
      if (best < 0) return n;
      const q = this.queue[best]!;
      this.queue.splice(best, 1);
      const r = this.endpoint(q.to).input(q.pkt, 0, q.pkt.length, this.now);
      // Only a segment whose ACK the engine took can have told it a window (a corrupted one is
      // dropped; one whose out-of-order data found no range had its ACK processed first).
      if (r === TCP_ACCEPTED || r === TCP_DROP_OOO_FULL) this.learnEdge(q.to, q.pkt);
      const res = this.results[q.to];
      res[r] = (res[r] ?? 0) + 1;
      this.delivered++;
      n++;
      this.drain();
    }
  }

  /** Feeds a hand-made segment to `to` now, as if from the wire; drains the replies. */
  inject(to: Side, pkt: Uint8Array): number {
    const r = this.endpoint(to).input(pkt, 0, pkt.length, this.now);
    if (r === TCP_ACCEPTED || r === TCP_DROP_OOO_FULL) this.learnEdge(to, pkt);
    const res = this.results[to];
    res[r] = (res[r] ?? 0) + 1;
    this.drain();
    return r;
  }

  /** Timers due now on both sides, then their segments. */
  runTimers(): void {
    this.a.poll(this.now);
    this.b.poll(this.now);
    this.drain();
  }

  /** The next moment something happens (a delivery or a timer), -1 when nothing will. */
  nextEvent(): number {
    let t = -1;
    for (const q of this.queue) if (t < 0 || q.at < t) t = q.at;
    for (const d of [this.a.poll(this.now), this.b.poll(this.now)]) if (d >= 0 && (t < 0 || d < t)) t = d;
    return t;
  }

  /** Moves the clock to the next event (never back); false when nothing will happen. */
  advance(): boolean {
    const t = this.nextEvent();
    if (t < 0) return false;
    this.now = Math.max(this.now, t);
    this.runTimers();
    this.deliverDue();
    return true;
  }

  /** Drops counted by the endpoint equal the non-accepted results the network saw. */
  dropsMatch(s: Side): boolean {
    const ep = this.endpoint(s);
    const res = this.results[s];
    for (let code = 1; code < ep.stats.drops.length; code++)
      if ((res[code] ?? 0) !== ep.stats.drops[code]) return false;
    return (res[TCP_ACCEPTED] ?? 0) + ep.stats.drops.reduce((x, y) => x + y, 0) === ep.stats.segmentsIn;
  }

  /** The receiver `to` got a segment from the other side: the window edge it now knows. */
  private learnEdge(to: Side, pkt: Uint8Array): void {
    const v = this.v;
    if (parseIp(pkt, 0, pkt.length, v) !== 0 || v.l4 < 0 || v.l4Len < 20) return;
    const flags = tcpFlags(pkt, v.l4);
    if (!(flags & 0x10)) return;
    // A SYN's window is never scaled; later ones by the shift the receiver `to` recorded.
    const c = this.endpoint(to).find(
      v.family,
      pkt,
      v.dstOff,
      tcpDstPort(pkt, v.l4),
      pkt,
      v.srcOff,
      tcpSrcPort(pkt, v.l4),
    );
    if (c === null) return;
    const shift = flags & TCP_FLAG_SYN ? 0 : c.snd.wscale;
    const edge = (tcpAck(pkt, v.l4) + tcpWindow(pkt, v.l4) * 2 ** shift) >>> 0;
    if (!this.edgeKnown[to] || seqGt(edge, this.edge[to])) this.edge[to] = edge;
    this.edgeKnown[to] = true;
  }

  private check(from: Side, pkt: Uint8Array, n: number): void {
    const v = this.v;
    if (parseIp(pkt, 0, n, v) !== 0) throw new Error(`${from} sent an unparseable packet`);
    const dataLen = v.l4Len - tcpHeaderLen(pkt, v.l4);
    if (dataLen > 0 && this.edgeKnown[from]) {
      const end = (tcpSeq(pkt, v.l4) + dataLen) >>> 0;
      const over = seqDiff(end, this.edge[from]);
      if (over > 0) {
        const c = this.conn[from];
        const st = c === null ? '' : ` (SND.UNA ${c.snd.una} SND.WND ${c.snd.wnd} SND.MAX ${c.snd.max})`;
        throw new Error(
          `${from} sent [${tcpSeq(pkt, v.l4)}, ${end}) beyond the edge ${this.edge[from]} it was offered${st}`,
        );
      }
    }
    for (const s of ['a', 'b'] as const) {
      const c = this.conn[s];
      if (c === null) continue;
      const maxOoo = this.endpoint(s).options.maxOooRanges;
      if (c.rcv.oooRanges > maxOoo) throw new Error(`${s}: ${c.rcv.oooRanges} out-of-order ranges > ${maxOoo}`);
      if (c.rcv.ring.size > c.rcv.ring.capacity || c.snd.ring.size > c.snd.ring.capacity)
        throw new Error(`${s}: a ring beyond its capacity`);
    }
  }
}

/** The application on one side: sends its data, reads at its pace, closes after sending. */
export class App {
  sent = 0;
  got = 0;
  events = 0;
  closeCalled = false;
  private turn = 0;
  readonly tmp = new Uint8Array(65536);
  constructor(
    readonly out: Uint8Array,
    readonly expected: Uint8Array,
    readonly chunks: number[],
    readonly closeAfterSend: boolean,
  ) {}

  serve(c: TcpConnection): void {
    this.events |= c.takeEvents();
    while (this.sent < this.out.length) {
      const n = c.send(this.out, this.sent, this.out.length - this.sent);
      if (n === 0) break;
      this.sent += n;
    }
    const want = this.chunks[this.turn++ % this.chunks.length]!;
    let budget = want;
    while (budget > 0) {
      const n = c.recv(this.tmp, 0, Math.min(budget, this.tmp.length));
      if (n === 0) break;
      // Exactly once and in order: each byte read is the next expected one.
      for (let i = 0; i < n; i++)
        if (this.tmp[i] !== this.expected[this.got + i])
          throw new Error(`byte ${this.got + i} wrong (read ${this.tmp[i]}, sent ${this.expected[this.got + i]})`);
      this.got += n;
      budget -= n;
    }
    if (this.closeAfterSend && this.sent === this.out.length && !this.closeCalled) {
      this.closeCalled = true;
      c.close();
    }
  }
}

export function endpoints(s: Setup, aOpts = {}, bOpts = {}): LossyNet {
  // TIME_WAIT of 4 min (RFC 9293's 2·MSL): the engine's 2 s default is shorter than an RTO
  // backed off under heavy loss, and the peer's retransmitted FIN would meet a RST.
  const common = {
    mtu: s.mtu,
    windowScaling: s.windowScaling,
    sack: s.sack,
    maxOooRanges: s.maxOooRanges,
    timeWaitMs: 240_000,
  };
  return new LossyNet(
    {
      link: { seed: s.seed, loss: s.loss, duplicate: s.duplicate, reorder: s.reorder, reorderMs: 7, jitterMs: 2 },
      latencyMs: 5,
      corrupt: s.corrupt,
    },
    { ...common, sendBufferSize: s.ringA, recvBufferSize: s.ringA, ...aOpts },
    { ...common, sendBufferSize: s.ringB, recvBufferSize: s.ringB, ...bOpts },
  );
}

export function open(net: LossyNet, s: Setup): TcpConnection {
  const ca = net.a.connect(s.family, s.family === 4 ? A4 : A6, 40000, s.family === 4 ? B4 : B6, 80);
  if (ca === null) throw new Error('connect refused');
  net.conn.a = ca;
  net.drain();
  return ca;
}

/**
 * Runs the network and both applications until `done` holds or nothing will happen again; the
 * steps are bounded (a livelock fails the property).
 */
export function run(net: LossyNet, apps: Record<Side, App>, done: () => boolean, maxSteps = 1_000_000): void {
  for (let step = 0; step < maxSteps; step++) {
    for (const side of ['a', 'b'] as const) {
      const ep = net.endpoint(side);
      for (let c = ep.nextReady(); c !== null; c = ep.nextReady()) {
        if (side === 'b' && net.conn.b === null) net.conn.b = c;
        apps[side].serve(c);
      }
      // A reader that stalled reads again on its next turn, not only on events (what arrived
      // stays readable after the connection closed).
      const own = net.conn[side];
      if (own !== null && own.readable > 0) apps[side].serve(own);
    }
    net.drain();
    if (done()) return;
    const unread = (net.conn.a?.readable ?? 0) + (net.conn.b?.readable ?? 0) > 0;
    if (!net.advance() && !unread) return;
  }
  throw new Error(`no progress after ${maxSteps} steps`);
}

/** A change to a real segment: which field, the new value's material, a position. */
export interface Mutation {
  at: number;
  kind: 'byte' | 'seq' | 'ack' | 'flags' | 'window' | 'offset' | 'truncate' | 'random';
  value: number;
  pos: number;
}

/** The segment changed by `m`, its checksum made valid again (random bytes for 'random'). */
export function mutate(pkt: Uint8Array, m: Mutation, v: IpView): Uint8Array {
  if (m.kind === 'random') {
    const out = new Uint8Array(m.value % 120);
    let x = m.pos | 1;
    for (let i = 0; i < out.length; i++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      out[i] = x >>> 24;
    }
    if (out.length > 0) out[0] = (out[0]! & 0x0f) | (m.value & 1 ? 0x40 : 0x60);
    return out;
  }
  const p = pkt.slice();
  if (parseIp(p, 0, p.length, v) !== 0 || v.l4 < 0) return p;
  const t = v.l4;
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  switch (m.kind) {
    case 'byte':
      p[t + (m.pos % v.l4Len)] = m.value & 0xff;
      break;
    case 'seq':
      dv.setUint32(t + 4, (dv.getUint32(t + 4) + (m.value % 2 ? 1 : -1) * (m.value % 200_000)) >>> 0);
      break;
    case 'ack':
      dv.setUint32(t + 8, (dv.getUint32(t + 8) + (m.value % 2 ? 1 : -1) * (m.value % 200_000)) >>> 0);
      break;
    case 'flags':
      p[t + 13] = m.value & 0x3f;
      break;
    case 'window':
      dv.setUint16(t + 14, m.value & 0xffff);
      break;
    case 'offset':
      p[t + 12] = ((m.value % 16) << 4) | (p[t + 12]! & 0x0f);
      break;
    case 'truncate':
      return p.subarray(0, m.pos % p.length);
  }
  // A valid checksum, so the mutation reaches the state machine (not only the checksum check).
  if (v.family === 4) fillTcpChecksumV4(p, 0, t, v.l4Len);
  else fillTcpChecksumV6(p, 0, t, v.l4Len);
  return p;
}
