/**
 * A TCP endpoint: the connection table and the segment I/O of every connection in it.
 *
 * - `input(buf, off, len, now)`: one received IP packet; returns TCP_ACCEPTED or the drop
 *   reason (also counted in `stats`). Never throws on network input.
 * - `output(buf, off, now)`: writes the next IP packet to send at buf[off..] (room for the
 *   MTU) and returns its length, 0 when nothing is due. Call until 0 after input, poll and API
 *   calls. Connections take turns, one segment each.
 * - `poll(now)`: runs the timers that are due; returns the next deadline (-1: none).
 * - `nextReady()`: the next connection with events for the consumer (TcpConnection.takeEvents).
 *
 * The endpoint plays LISTEN for every address and port `accept` approves (a relay answers as the
 * original destination): a SYN it approves opens a connection in SYN_RECEIVED, which the
 * consumer sees (TCP_EV_ESTABLISHED) once the handshake completes. Refused SYNs, SYNs beyond
 * `maxConnections` and segments without a connection get a RST (RFC 9293 §3.10.7.1), from a
 * bounded queue.
 *
 * Allocation: a connection allocates its two rings and a few small objects when created; the
 * segment path (input, output, timers) allocates nothing.
 */
import { addressEquals, type IpFamily } from '../packet/addr.js';
import { IP_OK, IpView, parseIp } from '../packet/ip-view.js';
import { IP_PROTO_TCP } from '../packet/ipv4.js';
import {
  TCP_FLAG_ACK,
  TCP_FLAG_FIN,
  TCP_FLAG_RST,
  TCP_FLAG_SYN,
  tcpChecksumValidV4,
  tcpChecksumValidV6,
  tcpHeaderValid,
} from '../packet/tcp.js';
import { TcpConnection } from './connection.js';
import { TCP_TIME_WAIT, type ConnectionOwner } from './state.js';
import { tcpOptions, type TcpOptions } from './options.js';
import {
  TCP_ACCEPTED,
  TCP_DROP_BAD_ADDRESS,
  TCP_DROP_BAD_CHECKSUM,
  TCP_DROP_BAD_FLAGS,
  TCP_DROP_BAD_HEADER,
  TCP_DROP_FRAGMENT,
  TCP_DROP_NOT_TCP,
  TCP_DROP_NO_CONNECTION,
  TCP_DROP_REFUSED,
  TCP_DROP_TABLE_FULL,
  TcpStats,
} from './reasons.js';
import { TcpSegment, readSegment, readSynOptions, writeSegment, type SegmentAddresses } from './segment.js';
import { seqAdd } from './seq.js';

export interface TcpEndpointHooks {
  /**
   * Whether a SYN to this local address (family, buf[off..]) and port opens a connection;
   * default: none does (an endpoint only for active opens).
   */
  accept?(family: IpFamily, addr: Uint8Array, off: number, port: number): boolean;
  /** 32 random bits for initial sequence numbers; default crypto.getRandomValues. */
  random?(): number;
}

/** A reusable SegmentAddresses for RSTs from the queue. */
class RstAddresses implements SegmentAddresses {
  family: IpFamily = 4;
  readonly localAddr = new Uint8Array(16);
  readonly remoteAddr = new Uint8Array(16);
  localPort = 0;
  remotePort = 0;
}

export class TcpEndpoint implements ConnectionOwner<TcpConnection> {
  readonly options: TcpOptions;
  readonly stats = new TcpStats();
  private readonly view = new IpView();
  private readonly seg = new TcpSegment();
  private readonly buckets = new Map<number, TcpConnection>();
  private readonly all: TcpConnection[] = [];
  private readyHead: TcpConnection | null = null;
  private readyTail: TcpConnection | null = null;
  private outHead: TcpConnection | null = null;
  private outTail: TcpConnection | null = null;
  private readonly acceptHook: TcpEndpointHooks['accept'];
  private readonly random: () => number;
  private readonly randomWord = new Uint32Array(1);
  // The RST queue: a ring of records.
  private readonly rstFamily: Uint8Array;
  private readonly rstLocal: Uint8Array;
  private readonly rstRemote: Uint8Array;
  private readonly rstPorts: Uint16Array;
  private readonly rstSeq: Uint32Array;
  private readonly rstAck: Uint32Array;
  private readonly rstWithAck: Uint8Array;
  private rstHead = 0;
  private rstCount = 0;
  private readonly rstAddr = new RstAddresses();

  constructor(options: Partial<TcpOptions> = {}, hooks: TcpEndpointHooks = {}) {
    this.options = tcpOptions(options);
    this.acceptHook = hooks.accept;
    this.random =
      hooks.random ??
      (() => {
        crypto.getRandomValues(this.randomWord);
        return this.randomWord[0]!;
      });
    const q = this.options.rstQueueLength;
    this.rstFamily = new Uint8Array(q);
    this.rstLocal = new Uint8Array(q * 16);
    this.rstRemote = new Uint8Array(q * 16);
    this.rstPorts = new Uint16Array(q * 2);
    this.rstSeq = new Uint32Array(q);
    this.rstAck = new Uint32Array(q);
    this.rstWithAck = new Uint8Array(q);
  }

  /** Connections in the table (TIME_WAIT included). */
  get connectionCount(): number {
    return this.all.length;
  }

  /** Looks a connection up by its addresses (local = ours). */
  find(
    family: IpFamily,
    local: Uint8Array,
    localOff: number,
    localPort: number,
    remote: Uint8Array,
    remoteOff: number,
    remotePort: number,
  ): TcpConnection | null {
    const h = tupleHash(family, local, localOff, localPort, remote, remoteOff, remotePort);
    const n = family === 4 ? 4 : 16;
    for (let c = this.buckets.get(h) ?? null; c !== null; c = c.hashNext) {
      if (
        c.hash === h &&
        c.family === family &&
        c.localPort === localPort &&
        c.remotePort === remotePort &&
        addressEquals(c.localAddr, 0, local, localOff, n) &&
        addressEquals(c.remoteAddr, 0, remote, remoteOff, n)
      )
        return c;
    }
    return null;
  }

  /**
   * Active open from local:localPort to remote:remotePort. Returns null when the table is full
   * or the addresses are in use. The consumer polls it like any other (TCP_EV_ESTABLISHED).
   */
  connect(
    family: IpFamily,
    local: Uint8Array,
    localPort: number,
    remote: Uint8Array,
    remotePort: number,
  ): TcpConnection | null {
    const n = family === 4 ? 4 : 16;
    if (local.length < n || remote.length < n) throw new RangeError(`connect: IPv${family} addresses need ${n} bytes`);
    if (this.all.length >= this.options.maxConnections) return null;
    if (this.find(family, local, 0, localPort, remote, 0, remotePort) !== null) return null;
    const c = new TcpConnection(this, family, local, 0, localPort, remote, 0, remotePort, true);
    this.insert(c);
    c.openActive(this.random());
    return c;
  }

  input(buf: Uint8Array, off: number, len: number, now: number): number {
    this.stats.segmentsIn++;
    const v = this.view;
    if (parseIp(buf, off, len, v) !== IP_OK || v.proto !== IP_PROTO_TCP) return this.drop(TCP_DROP_NOT_TCP);
    if (v.l4 < 0) return this.drop(TCP_DROP_FRAGMENT);
    if (!tcpHeaderValid(buf, v.l4, v.l4Len)) return this.drop(TCP_DROP_BAD_HEADER);
    const csumOk =
      v.family === 4 ? tcpChecksumValidV4(buf, v.off, v.l4, v.l4Len) : tcpChecksumValidV6(buf, v.off, v.l4, v.l4Len);
    if (!csumOk) return this.drop(TCP_DROP_BAD_CHECKSUM);
    if (!unicast(v.family, buf, v.srcOff) || !unicast(v.family, buf, v.dstOff)) return this.drop(TCP_DROP_BAD_ADDRESS);
    const s = this.seg;
    readSegment(buf, v.l4, v.l4Len, s);
    const f = s.flags;
    if ((f & TCP_FLAG_SYN && f & (TCP_FLAG_RST | TCP_FLAG_FIN)) || (f & 0x17) === 0)
      return this.drop(TCP_DROP_BAD_FLAGS);
    if (f & TCP_FLAG_SYN) readSynOptions(buf, v.l4, s);
    const fam = v.family;
    let c = this.find(fam, buf, v.dstOff, s.dstPort, buf, v.srcOff, s.srcPort);
    if (c !== null && f & TCP_FLAG_SYN && !(f & TCP_FLAG_ACK) && c.state === TCP_TIME_WAIT && c.yieldsToSyn(s))
      c = null;
    if (c !== null) {
      const r = c.input(s, buf, now);
      return r === TCP_ACCEPTED ? r : this.drop(r);
    }
    return this.listen(buf, s, now);
  }

  /** LISTEN (RFC 9293 §3.10.7.2) for every address `accept` approves; else CLOSED (§3.10.7.1). */
  private listen(buf: Uint8Array, s: TcpSegment, now: number): number {
    const v = this.view;
    const f = s.flags;
    if (f & TCP_FLAG_RST) return this.drop(TCP_DROP_NO_CONNECTION);
    if (f & TCP_FLAG_ACK || !(f & TCP_FLAG_SYN)) {
      this.rstFor(buf, s);
      return this.drop(TCP_DROP_NO_CONNECTION);
    }
    if (this.acceptHook === undefined || !this.acceptHook(v.family, buf, v.dstOff, s.dstPort)) {
      this.rstFor(buf, s);
      return this.drop(TCP_DROP_REFUSED);
    }
    if (this.all.length >= this.options.maxConnections) {
      this.rstFor(buf, s);
      return this.drop(TCP_DROP_TABLE_FULL);
    }
    const c = new TcpConnection(this, v.family, buf, v.dstOff, s.dstPort, buf, v.srcOff, s.srcPort, false);
    this.insert(c);
    c.lastInputAt = now;
    c.openPassive(s, this.random());
    return TCP_ACCEPTED;
  }

  /** The RST answering a segment without a connection (RFC 9293 §3.10.7.1). */
  private rstFor(buf: Uint8Array, s: TcpSegment): void {
    const v = this.view;
    const a = this.rstAddr;
    a.family = v.family;
    a.localAddr.set(buf.subarray(v.dstOff, v.dstOff + v.addrLen));
    a.remoteAddr.set(buf.subarray(v.srcOff, v.srcOff + v.addrLen));
    a.localPort = s.dstPort;
    a.remotePort = s.srcPort;
    if (s.flags & TCP_FLAG_ACK) this.queueRst(a, s.ack, 0, false);
    else {
      const segLen = s.dataLen + (s.flags & TCP_FLAG_SYN ? 1 : 0) + (s.flags & TCP_FLAG_FIN ? 1 : 0);
      this.queueRst(a, 0, seqAdd(s.seq, segLen), true);
    }
    this.stats.resetsOut++;
  }

  queueRst(a: SegmentAddresses, seq: number, ack: number, withAck: boolean): void {
    const q = this.options.rstQueueLength;
    if (this.rstCount >= q) {
      this.stats.rstQueueFull++;
      return;
    }
    let i = this.rstHead + this.rstCount;
    if (i >= q) i -= q;
    this.rstCount++;
    const n = a.family === 4 ? 4 : 16;
    this.rstFamily[i] = a.family;
    this.rstLocal.set(a.localAddr.subarray(0, n), i * 16);
    this.rstRemote.set(a.remoteAddr.subarray(0, n), i * 16);
    this.rstPorts[2 * i] = a.localPort;
    this.rstPorts[2 * i + 1] = a.remotePort;
    this.rstSeq[i] = seq;
    this.rstAck[i] = ack;
    this.rstWithAck[i] = withAck ? 1 : 0;
  }

  output(buf: Uint8Array, off: number, now: number): number {
    if (this.rstCount > 0) return this.emitRst(buf, off);
    while (this.outHead !== null) {
      const c = this.outHead;
      this.outHead = c.outputNext;
      if (this.outHead === null) this.outTail = null;
      c.outputNext = null;
      c.outputQueued = false;
      const n = c.emit(buf, off, now);
      if (n > 0) {
        this.wantOutput(c); // it may have more: to the back of the line
        this.stats.segmentsOut++;
        return n;
      }
    }
    return 0;
  }

  private emitRst(buf: Uint8Array, off: number): number {
    const i = this.rstHead;
    this.rstHead = i + 1 === this.options.rstQueueLength ? 0 : i + 1;
    this.rstCount--;
    const a = this.rstAddr;
    a.family = this.rstFamily[i] as IpFamily;
    const n = a.family === 4 ? 4 : 16;
    a.localAddr.set(this.rstLocal.subarray(i * 16, i * 16 + n));
    a.remoteAddr.set(this.rstRemote.subarray(i * 16, i * 16 + n));
    a.localPort = this.rstPorts[2 * i]!;
    a.remotePort = this.rstPorts[2 * i + 1]!;
    const withAck = this.rstWithAck[i] === 1;
    this.stats.segmentsOut++;
    return writeSegment(
      buf,
      off,
      a,
      this.rstSeq[i]!,
      withAck ? this.rstAck[i]! : 0,
      TCP_FLAG_RST | (withAck ? TCP_FLAG_ACK : 0),
      0,
      0,
    );
  }

  poll(now: number): number {
    let next = -1;
    for (let i = this.all.length - 1; i >= 0; i--) {
      const c = this.all[i]!;
      let d = c.nextDeadline();
      if (d >= 0 && d <= now) {
        c.onTimer(now);
        if (c.index < 0) continue;
        d = c.nextDeadline();
      }
      if (d >= 0 && (next < 0 || d < next)) next = d;
    }
    return next;
  }

  /** Whether nextReady() has a connection to return. */
  get hasReady(): boolean {
    return this.readyHead !== null;
  }

  nextReady(): TcpConnection | null {
    const c = this.readyHead;
    if (c === null) return null;
    this.readyHead = c.readyNext;
    if (this.readyHead === null) this.readyTail = null;
    c.readyNext = null;
    c.readyQueued = false;
    return c;
  }

  // ——— ConnectionOwner ———

  wantOutput(c: TcpConnection): void {
    if (c.outputQueued) return;
    c.outputQueued = true;
    if (this.outTail === null) this.outHead = c;
    else this.outTail.outputNext = c;
    this.outTail = c;
  }

  notify(c: TcpConnection): void {
    if (c.readyQueued) return;
    c.readyQueued = true;
    if (this.readyTail === null) this.readyHead = c;
    else this.readyTail.readyNext = c;
    this.readyTail = c;
  }

  release(c: TcpConnection): void {
    if (c.index < 0) return;
    const head = this.buckets.get(c.hash) ?? null;
    if (head === c) {
      if (c.hashNext === null) this.buckets.delete(c.hash);
      else this.buckets.set(c.hash, c.hashNext);
    } else {
      for (let p = head; p !== null; p = p.hashNext) {
        if (p.hashNext === c) {
          p.hashNext = c.hashNext;
          break;
        }
      }
    }
    c.hashNext = null;
    const last = this.all.pop()!;
    if (last !== c) {
      this.all[c.index] = last;
      last.index = c.index;
    }
    c.index = -1;
  }

  private insert(c: TcpConnection): void {
    c.hash = tupleHash(c.family, c.localAddr, 0, c.localPort, c.remoteAddr, 0, c.remotePort);
    c.hashNext = this.buckets.get(c.hash) ?? null;
    this.buckets.set(c.hash, c);
    c.index = this.all.length;
    this.all.push(c);
  }

  private drop(code: number): number {
    this.stats.drops[code]!++;
    return code;
  }
}

/** FNV-1a over the addresses and ports. */
function tupleHash(
  family: IpFamily,
  local: Uint8Array,
  lo: number,
  lport: number,
  remote: Uint8Array,
  ro: number,
  rport: number,
): number {
  const n = family === 4 ? 4 : 16;
  let h = 0x811c9dc5 ^ family;
  for (let i = 0; i < n; i++) h = Math.imul(h ^ local[lo + i]!, 0x01000193);
  for (let i = 0; i < n; i++) h = Math.imul(h ^ remote[ro + i]!, 0x01000193);
  h = Math.imul(h ^ lport, 0x01000193);
  h = Math.imul(h ^ rport, 0x01000193);
  return h >>> 0;
}

/** Not unspecified, multicast or (IPv4) limited broadcast: an address a RST may go to. */
function unicast(family: IpFamily, buf: Uint8Array, off: number): boolean {
  if (family === 4) {
    const a = buf[off]!;
    if (a >= 224) return false; // multicast, reserved, 255.255.255.255
    return !(a === 0 && buf[off + 1] === 0 && buf[off + 2] === 0 && buf[off + 3] === 0);
  }
  if (buf[off] === 0xff) return false;
  for (let i = 0; i < 16; i++) if (buf[off + i] !== 0) return true;
  return false;
}
