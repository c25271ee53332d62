/**
 * The host lane's TCP relay: a TCP connection the router sends out of the gateway's own interface
 * (a remote pod connecting to an out-of-cluster address) is terminated in process by the TCP
 * engine (src/tcp), which answers as the original destination, and carried on by an ordinary
 * `node:net` socket to that destination. The kernel gives the socket the gateway's address and an
 * ephemeral port — the masquerade Liqo's rules ask for on that interface.
 *
 * - The engine completes the pod's handshake before the outbound socket connects (its accept hook
 *   is synchronous): the socket is opened when the connection is established, and a connect
 *   failure (refused, unreachable, timeout) aborts the pod's connection with a RST
 *   (`host_lane_tcp_connect_failed`). Data the pod sends meanwhile waits in the engine's receive
 *   ring, whose window closes when it is full.
 * - Bytes both ways with backpressure: engine receive ring → socket.write until the socket's
 *   buffer is full (resumed on 'drain'); socket data → engine send ring, the socket paused while a
 *   chunk does not fit (resumed when the engine reports it writable).
 * - FIN ↔ socket end (sockets allow half-open), RST ↔ socket reset/destroy; a socket error after
 *   connect aborts the pod's connection (`host_lane_socket_error`).
 * - Bounded: `maxConnections` connections (TIME_WAIT included); a SYN beyond it gets a RST
 *   (`host_lane_tcp_flows_full`); per connection, the engine's two rings and one socket write
 *   buffer (its highWaterMark) plus at most one pending socket chunk.
 * - Idle: a relayed connection with no segment from the pod and no data from the destination for
 *   `idleTimeoutMs` (default 5 days, Linux's nf_conntrack_tcp_timeout_established: what the
 *   kernel's masquerade gives the same connection through a TUN gateway) is reset both ways (RST
 *   to the pod, the socket reset) and counted (`host_lane_tcp_idle_timeout`); checked at the
 *   lane's housekeeping (every second).
 * - TCP to the gateway's own addresses has no listener: the engine refuses it with a RST
 *   (`host_lane_tcp_unsupported`).
 * - Per written batch, not per segment (endBatch): the engine's events, its output and the socket
 *   writes, so a batch of segments from the pod is acknowledged once and reaches the socket in
 *   as few writes as its bytes need (≤ 64 KiB each).
 * - One timer, armed at the engine's next deadline (`poll`).
 * - Sockets open in the process's network namespace (the lane's `netns` is not applied: a TCP
 *   socket is created on the event loop's next turn, after withNetnsAsync would have left).
 */
import { Socket } from 'node:net';
import type { IpView } from '../packet/ip-view.js';
import { addr4Text, readAddr4 } from '../router/host-packets.js';
import { TcpEndpoint } from '../tcp/endpoint.js';
import type { TcpConnection } from '../tcp/connection.js';
import type { TcpOptions } from '../tcp/options.js';
import { TCP_DROP_REFUSED, TCP_DROP_TABLE_FULL } from '../tcp/reasons.js';
import { TCP_EV_CLOSED, TCP_EV_ESTABLISHED, TCP_EV_PEER_FIN, TCP_EV_READABLE, TCP_EV_WRITABLE } from '../tcp/state.js';
import type { HostLaneContext, HostLaneProtocol } from './host-lane.js';

/** Linux's nf_conntrack_tcp_timeout_established default (5 days), ms. */
export const HOST_LANE_TCP_IDLE_TIMEOUT_MS = 432_000 * 1000;
const IDLE_TIMEOUT_MAX_MS = 30 * 24 * 3600 * 1000;

export interface HostLaneTcpOptions {
  /** Connections relayed at once, TIME_WAIT included (default 1024). */
  readonly maxConnections?: number;
  /** Each engine ring per connection, bytes (default 256 KiB). */
  readonly bufferSize?: number;
  /** Outbound connect timeout, ms (default 10 s). */
  readonly connectTimeoutMs?: number;
  /**
   * A connection with no segment from the pod and no data from the destination for this long is
   * reset both ways, ms (default 432 000 000: 5 days, nf_conntrack_tcp_timeout_established).
   */
  readonly idleTimeoutMs?: number;
  /** Engine options beyond these (tests: shorter TIME_WAIT). */
  readonly tcp?: Partial<TcpOptions>;
}

/** One relayed connection: the pod's side in the engine, the destination's in a socket. */
interface Relay {
  readonly c: TcpConnection;
  sock: Socket | null;
  connected: boolean;
  /** A socket chunk the engine's send ring could not take yet (the socket is paused). */
  pending: Buffer | null;
  pendingOff: number;
  /** socket.write returned false: wait for 'drain'. */
  waitingDrain: boolean;
  /** The pod's FIN passed on (socket.end). */
  endSent: boolean;
  /** The destination's FIN arrived (passed on once `pending` is sent). */
  sockEnded: boolean;
  /** When the destination last sent data (the pod's side: the engine's lastInputAt). */
  sockDataAt: number;
  done: boolean;
}

export class HostLaneTcpRelay implements HostLaneProtocol {
  readonly name = 'tcp';
  readonly engine: TcpEndpoint;
  private readonly relays = new Set<Relay>();
  private readonly out: Uint8Array;
  private readonly rbuf = new Uint8Array(64 * 1024);
  private readonly connectTimeoutMs: number;
  private readonly idleTimeoutMs: number;
  /** Whether the segment being input is addressed to one of the gateway's own addresses. */
  private inputLocal = false;
  /** Segments were input since the last service: endBatch runs it. */
  private inputPending = false;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = -1;
  private closed = false;

  constructor(
    private readonly ctx: HostLaneContext,
    opts: HostLaneTcpOptions = {},
  ) {
    const size = opts.bufferSize ?? 256 * 1024;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    const idle = opts.idleTimeoutMs ?? HOST_LANE_TCP_IDLE_TIMEOUT_MS;
    if (!Number.isInteger(idle) || idle < 1000 || idle > IDLE_TIMEOUT_MAX_MS)
      throw new RangeError(
        `HostLaneTcpOptions.idleTimeoutMs = ${idle}: must be an integer of ms in 1000..${IDLE_TIMEOUT_MAX_MS} (30 days)`,
      );
    this.idleTimeoutMs = idle;
    this.engine = new TcpEndpoint(
      {
        mtu: ctx.mtu,
        maxConnections: opts.maxConnections ?? 1024,
        sendBufferSize: size,
        recvBufferSize: size,
        ...opts.tcp,
      },
      { accept: (family) => family === 4 && !this.inputLocal && !this.closed },
    );
    this.out = new Uint8Array(Math.max(ctx.mtu, 1500) + 64);
  }

  /** Connections relayed now (a socket and an engine connection each). */
  get flows(): number {
    return this.relays.size;
  }

  handle(buf: Uint8Array, v: IpView, local: boolean, now: number): void {
    if (this.closed) return;
    this.inputLocal = local;
    const r = this.engine.input(buf, v.off, v.end - v.off, now);
    this.inputLocal = false;
    if (r === TCP_DROP_TABLE_FULL) this.ctx.drop('host_lane_tcp_flows_full');
    else if (r === TCP_DROP_REFUSED) this.ctx.drop('host_lane_tcp_unsupported');
    this.inputPending = true;
  }

  endBatch(now: number): void {
    if (!this.inputPending || this.closed) return;
    this.inputPending = false;
    this.service(now);
  }

  expire(now: number): void {
    if (this.closed) return;
    for (const r of this.relays) {
      if (r.done) continue;
      const last = Math.max(r.c.lastInputAt, r.sockDataAt);
      if (now - last < this.idleTimeoutMs) continue;
      this.ctx.drop('host_lane_tcp_idle_timeout');
      r.c.abort();
      this.finish(r, false);
    }
    this.service(now);
  }

  /** Runs due timers, hands events to the relays, sends what the engine has, re-arms the timer. */
  private service(now: number): void {
    const e = this.engine;
    e.poll(now);
    for (let round = 0; round < 64; round++) {
      let c = e.nextReady();
      if (c === null) break;
      for (; c !== null; c = e.nextReady()) this.onEvents(c, c.takeEvents());
      this.flush(now);
    }
    this.flush(now);
    this.arm(e.poll(now), now);
  }

  private flush(now: number): void {
    const out = this.out;
    for (let n = this.engine.output(out, 0, now); n > 0; n = this.engine.output(out, 0, now)) this.ctx.emit(out, 0, n);
  }

  private arm(deadline: number, now: number): void {
    if (deadline < 0 || this.closed) return;
    if (this.timer !== null && this.timerAt <= deadline) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = deadline;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.timerAt = -1;
        if (!this.closed) this.service(this.ctx.clock());
      },
      Math.max(0, deadline - now),
    );
    this.timer.unref();
  }

  private onEvents(c: TcpConnection, ev: number): void {
    if (ev & TCP_EV_ESTABLISHED && c.context === undefined) this.open(c);
    const r = c.context as Relay | undefined;
    if (r === undefined || r.done) return;
    if (ev & TCP_EV_CLOSED) {
      this.finish(r, c.closeReason === 'closed');
      return;
    }
    if (ev & TCP_EV_WRITABLE) this.sendPending(r);
    if (ev & (TCP_EV_READABLE | TCP_EV_PEER_FIN)) this.pump(r);
  }

  /** The pod's connection is established: connect to its destination. */
  private open(c: TcpConnection): void {
    const r: Relay = {
      c,
      sock: null,
      connected: false,
      pending: null,
      pendingOff: 0,
      waitingDrain: false,
      endSent: false,
      sockEnded: false,
      sockDataAt: this.ctx.clock(),
      done: false,
    };
    c.context = r;
    this.relays.add(r);
    const host = addr4Text(readAddr4(c.localAddr, 0));
    const port = c.localPort;
    {
      const s = new Socket({ allowHalfOpen: true });
      r.sock = s;
      s.setNoDelay(true);
      s.setTimeout(this.connectTimeoutMs, () => s.destroy(new Error('connect timeout')));
      s.on('connect', () => {
        s.setTimeout(0);
        r.connected = true;
        this.pump(r);
        this.service(this.ctx.clock());
      });
      s.on('data', (d: Buffer) => this.fromSocket(r, d));
      s.on('drain', () => {
        r.waitingDrain = false;
        this.pump(r);
        this.service(this.ctx.clock());
      });
      s.on('end', () => {
        r.sockEnded = true;
        if (r.pending === null) c.close();
        this.service(this.ctx.clock());
      });
      s.on('error', () => {
        if (r.done) return;
        this.ctx.drop(r.connected ? 'host_lane_socket_error' : 'host_lane_tcp_connect_failed');
        this.abort(r);
      });
      s.on('close', () => {
        // Closed without both FINs (e.g. destroyed): the pod's connection goes too.
        if (!r.done && !(r.sockEnded && r.endSent)) this.abort(r);
      });
      s.connect({ host, port });
    }
  }

  /** Engine receive ring → socket, until the socket's buffer is full; the pod's FIN → end. */
  private pump(r: Relay): void {
    const s = r.sock;
    if (s === null || !r.connected || r.done) return;
    const c = r.c;
    while (!r.waitingDrain && c.readable > 0) {
      const n = c.recv(this.rbuf, 0, this.rbuf.length);
      // The socket keeps the buffer until written: a copy.
      if (!s.write(Buffer.from(this.rbuf.subarray(0, n)))) r.waitingDrain = true;
    }
    if (c.peerFinished && c.readable === 0 && !r.endSent) {
      r.endSent = true;
      s.end();
    }
  }

  /** Socket data → engine send ring; what does not fit waits, the socket paused. */
  private fromSocket(r: Relay, d: Buffer): void {
    if (r.done) return;
    r.sockDataAt = this.ctx.clock();
    const n = r.c.send(d, 0, d.length);
    if (n < d.length) {
      r.pending = d;
      r.pendingOff = n;
      r.sock!.pause();
    }
    this.service(this.ctx.clock());
  }

  private sendPending(r: Relay): void {
    const d = r.pending;
    if (d === null) return;
    r.pendingOff += r.c.send(d, r.pendingOff, d.length - r.pendingOff);
    if (r.pendingOff < d.length) return;
    r.pending = null;
    r.pendingOff = 0;
    if (r.sockEnded) r.c.close();
    else r.sock?.resume();
  }

  /** RST to the pod, the socket reset. */
  private abort(r: Relay): void {
    if (r.done) return;
    r.c.abort();
    this.finish(r, false);
    this.service(this.ctx.clock());
  }

  /** Forgets a relay; `graceful`: both FINs passed, else the socket is reset. */
  private finish(r: Relay, graceful: boolean): void {
    r.done = true;
    this.relays.delete(r);
    const s = r.sock;
    if (s === null || s.destroyed) return;
    if (graceful) {
      if (!r.endSent) s.end();
    } else if (r.connected) s.resetAndDestroy();
    else s.destroy();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    for (const r of [...this.relays]) {
      r.c.abort();
      this.finish(r, false);
    }
    this.flush(this.ctx.clock());
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    return Promise.resolve();
  }
}
