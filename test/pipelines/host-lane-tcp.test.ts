// The host lane's TCP relay (src/pipelines/host-lane-tcp.ts) on loopback, no root: a second TCP
// engine plays the remote pod (active opens from 10.0.1.5), its packets written into the lane as
// the router would; the relay terminates them and connects a node:net socket to a server on
// 127.0.0.1. Shown: data both ways with sha256 equality, graceful close both ways, a refused
// connect turned into a RST to the pod, the connection limit, the idle timeout (the relay's clock
// moved on, its housekeeping called), TCP to the gateway's own address, a batch of segments
// acknowledged once.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { HostLaneDevice } from '../../src/pipelines/host-lane.js';
import { HostLaneTcpRelay, type HostLaneTcpOptions } from '../../src/pipelines/host-lane-tcp.js';
import { TcpEndpoint } from '../../src/tcp/endpoint.js';
import type { TcpConnection } from '../../src/tcp/connection.js';
import { TCP_ESTABLISHED, TCP_EV_CLOSED } from '../../src/tcp/state.js';
import { sleep, waitFor } from '../util/wait.js';

const OWN = '10.80.0.1';
const POD = new Uint8Array([10, 0, 1, 5]);
const LO = new Uint8Array([127, 0, 0, 1]);
const MB = 1024 * 1024;

/** The lane with the relay, and the pod's engine wired to it (both on the wall clock). */
class Wire {
  /** Added to the wall clock for the relay's side (its lane's clock): moves its time on. */
  skew = 0;
  readonly lane = new HostLaneDevice({ name: 'hlt0', mtu: 1400, queue: 1024, clock: () => Date.now() + this.skew });
  readonly relay: HostLaneTcpRelay;
  readonly pod = new TcpEndpoint({ mtu: 1400, timeWaitMs: 50 });
  /** Per pod connection: bytes received, whether it saw CLOSED. */
  readonly got = new Map<TcpConnection, Buffer[]>();
  private readonly buf = new Uint8Array(2048);
  private readonly offs = new Uint32Array([64]);
  private readonly lens = new Uint32Array(1);
  private readonly rbuf = new Uint8Array(65536);
  private readonly tick: NodeJS.Timeout;
  readonly sends = new Map<TcpConnection, { data: Buffer; off: number; close: boolean }>();

  constructor(o: HostLaneTcpOptions = {}) {
    this.relay = new HostLaneTcpRelay(this.lane, { tcp: { timeWaitMs: 50 }, ...o });
    this.lane.register(6, this.relay);
    void this.lane.link.addAddress(OWN);
    const b = new PacketBatch({ capacity: 64, maxLen: 1500, headroom: 16 });
    this.lane.start(b, (x) => {
      const now = Date.now();
      for (let i = 0; i < x.count; i++) this.pod.input(x.buf, x.offs[i]!, x.lens[i]!, now);
      this.service();
    });
    this.tick = setInterval(() => this.service(), 5);
  }

  /** Pod connection to dst:port; sends `data` then (if `close`) its FIN. */
  connect(dst: Uint8Array, port: number, data: Buffer, close: boolean, sport: number): TcpConnection {
    const c = this.pod.connect(4, POD, sport, dst, port)!;
    this.got.set(c, []);
    this.sends.set(c, { data, off: 0, close });
    this.service();
    return c;
  }

  received(c: TcpConnection): Buffer {
    return Buffer.concat(this.got.get(c)!);
  }

  service(): void {
    const now = Date.now();
    this.pod.poll(now);
    for (let c = this.pod.nextReady(); c !== null; c = this.pod.nextReady()) {
      const ev = c.takeEvents();
      for (let n = c.recv(this.rbuf, 0, this.rbuf.length); n > 0; n = c.recv(this.rbuf, 0, this.rbuf.length))
        this.got.get(c)?.push(Buffer.from(this.rbuf.subarray(0, n)));
      if (ev & TCP_EV_CLOSED) this.sends.delete(c);
    }
    for (const [c, s] of this.sends) {
      if (s.off < s.data.length) s.off += c.send(s.data, s.off, s.data.length - s.off);
      if (s.off === s.data.length && s.close) {
        c.close();
        s.close = false;
      }
    }
    for (let n = this.pod.output(this.buf, 64, now); n > 0; n = this.pod.output(this.buf, 64, now)) {
      this.lens[0] = n;
      this.lane.writeBatch(this.buf, this.offs, this.lens, 1);
    }
  }

  /** Sends `data` on `c` and writes every segment the pod's engine has now into the lane as ONE batch; returns how many. */
  sendAsOneBatch(c: TcpConnection, data: Buffer): number {
    const now = Date.now();
    expect(c.send(data, 0, data.length)).toBe(data.length);
    const stride = 2048;
    const buf = new Uint8Array(stride * 64);
    const offs = new Uint32Array(64);
    const lens = new Uint32Array(64);
    let n = 0;
    for (let len = this.pod.output(buf, 64, now); len > 0 && n < 64; len = this.pod.output(buf, n * stride + 64, now)) {
      offs[n] = n * stride + 64;
      lens[n++] = len;
    }
    this.lane.writeBatch(buf, offs, lens, n);
    return n;
  }

  async close(): Promise<void> {
    clearInterval(this.tick);
    await this.lane.close();
  }
}

let wire: Wire | null = null;
const servers: Server[] = [];
afterEach(async () => {
  await wire?.close();
  wire = null;
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function listen(onConn: (s: Socket) => void): Promise<number> {
  const srv = createServer({ allowHalfOpen: true }, onConn);
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return (srv.address() as { port: number }).port;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('host lane TCP relay', () => {
  test.each([
    ['256 KiB', {}],
    ['8 KiB (the socket is paused, the engine window closes)', { bufferSize: 8192 }],
  ] as const)('1 MB each way, rings of %s: sha256 equal, graceful close both ways', async (_, opts) => {
    const up = randomBytes(MB);
    const down = randomBytes(MB);
    const atServer: Buffer[] = [];
    let serverEnded = false;
    let serverClosedClean = false;
    let peer = '';
    const port = await listen((s) => {
      peer = s.remoteAddress ?? '';
      s.on('data', (d: Buffer) => atServer.push(d));
      s.on('end', () => {
        serverEnded = true;
        s.end(); // half-close: the pod's FIN arrived, then ours after our data
      });
      s.on('close', (hadError) => (serverClosedClean = !hadError));
      s.write(down);
    });
    const w = (wire = new Wire(opts));
    const c = w.connect(LO, port, up, true, 40000);
    await waitFor(
      'both directions delivered and closed',
      () => c.closeReason !== null && serverClosedClean,
      20_000,
      10,
    );
    expect(c.closeReason).toBe('closed');
    expect(serverEnded).toBe(true);
    expect(peer).toBe('127.0.0.1');
    expect(sha(Buffer.concat(atServer))).toBe(sha(up));
    expect(sha(w.received(c))).toBe(sha(down));
    await waitFor('relay forgets the connection', () => w.relay.flows === 0, 5000, 10);
    expect(w.relay.engine.connectionCount).toBeLessThanOrEqual(1); // at most its TIME_WAIT
    expect(w.lane.drops.host_lane_tcp_connect_failed).toBe(0);
    expect(w.lane.drops.host_lane_socket_error).toBe(0);
  });

  test('a batch of segments from the pod is acknowledged once, its bytes relayed intact', async () => {
    const atServer: Buffer[] = [];
    const port = await listen((s) => {
      s.on('data', (d: Buffer) => atServer.push(d));
      s.on('error', () => {}); // reset when the lane closes after the test
    });
    const w = (wire = new Wire());
    const c = w.connect(LO, port, Buffer.alloc(0), false, 40004);
    await waitFor('relayed', () => w.relay.flows === 1 && c.state === TCP_ESTABLISHED, 5000, 10);
    await sleep(20); // the relay's socket connected, the handshake's last ACK taken
    const data = randomBytes(4000); // within the pod's initial window: 3 segments at MSS 1360
    const out0 = w.relay.engine.stats.segmentsOut;
    const in0 = w.relay.engine.stats.segmentsIn;
    const n = w.sendAsOneBatch(c, data);
    expect(n).toBe(3);
    expect(w.relay.engine.stats.segmentsIn - in0).toBe(3);
    expect(w.relay.engine.stats.segmentsOut - out0).toBe(1); // one ACK for the batch
    await waitFor('the bytes at the server', () => Buffer.concat(atServer).length === data.length, 5000, 10);
    expect(sha(Buffer.concat(atServer))).toBe(sha(data));
  });

  test('the destination closes first: its FIN reaches the pod, then the pod closes', async () => {
    const port = await listen((s) => s.end('bye'));
    const w = (wire = new Wire());
    const c = w.connect(LO, port, Buffer.alloc(0), false, 40001);
    await waitFor('FIN from the destination', () => c.peerFinished, 5000, 10);
    expect(w.received(c).toString()).toBe('bye');
    c.close();
    w.service();
    await waitFor('closed', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('closed');
    await waitFor('relay forgets the connection', () => w.relay.flows === 0, 5000, 10);
  });

  test('a refused connect becomes a RST to the pod (the handshake completes first)', async () => {
    const port = await listen(() => undefined);
    await new Promise((r) => servers.pop()!.close(r)); // nothing listens there now
    const w = (wire = new Wire());
    const c = w.connect(LO, port, Buffer.from('hello'), false, 40002);
    await waitFor('reset', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('reset');
    expect(w.lane.drops.host_lane_tcp_connect_failed).toBe(1);
    expect(w.relay.flows).toBe(0);
  });

  test('the destination resets after data: the pod gets a RST', async () => {
    const port = await listen((s) => s.once('data', () => s.resetAndDestroy()));
    const w = (wire = new Wire());
    const c = w.connect(LO, port, Buffer.from('x'), false, 40003);
    await waitFor('reset', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('reset');
    expect(w.lane.drops.host_lane_socket_error).toBe(1);
  });

  test('connection limit: a SYN beyond it is refused with a RST and counted', async () => {
    const held: Socket[] = [];
    const port = await listen((s) => held.push(s));
    const w = (wire = new Wire({ maxConnections: 2 }));
    const a = w.connect(LO, port, Buffer.alloc(0), false, 40010);
    const b = w.connect(LO, port, Buffer.alloc(0), false, 40011);
    await waitFor('two relayed', () => held.length === 2 && w.relay.flows === 2, 5000, 10);
    const c = w.connect(LO, port, Buffer.alloc(0), false, 40012);
    await waitFor('third refused', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('refused');
    expect(w.lane.drops.host_lane_tcp_flows_full).toBe(1);
    expect(a.closeReason).toBeNull();
    expect(b.closeReason).toBeNull();
    expect(held.length).toBe(2);
    for (const s of held) s.destroy();
  });

  test('an idle connection is reset both ways after idleTimeoutMs; traffic either way restarts the time', async () => {
    let server: Socket | null = null;
    let serverError = '';
    const atServer: Buffer[] = [];
    const port = await listen((s) => {
      server = s;
      s.on('data', (d: Buffer) => atServer.push(d));
      s.on('error', (e: NodeJS.ErrnoException) => (serverError = e.code ?? String(e)));
    });
    const w = (wire = new Wire({ idleTimeoutMs: 60_000 }));
    const c = w.connect(LO, port, Buffer.from('hi'), false, 40030);
    await waitFor('relayed', () => atServer.length > 0 && w.relay.flows === 1, 5000, 10);
    // The relay's clock moves on 59 s: not idle long enough.
    w.skew += 59_000;
    w.relay.expire(w.lane.clock());
    expect(w.relay.flows).toBe(1);
    // Data from the destination restarts the time.
    server!.write('from the destination');
    await waitFor('pod got it', () => w.received(c).length > 0, 5000, 10);
    w.skew += 40_000;
    w.relay.expire(w.lane.clock());
    expect(w.relay.flows).toBe(1);
    // A segment from the pod (data here) restarts it too.
    w.sends.set(c, { data: Buffer.from('again'), off: 0, close: false });
    w.service();
    await waitFor('server got it', () => Buffer.concat(atServer).toString() === 'hiagain', 5000, 10);
    w.skew += 59_000;
    w.relay.expire(w.lane.clock());
    expect(w.relay.flows).toBe(1);
    expect(w.lane.drops.host_lane_tcp_idle_timeout).toBe(0);
    // Then 61 s of nothing: RST to the pod, the destination's socket reset, counted.
    w.skew += 61_000;
    w.relay.expire(w.lane.clock());
    expect(w.relay.flows).toBe(0);
    expect(w.lane.drops.host_lane_tcp_idle_timeout).toBe(1);
    await waitFor('pod reset', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('reset');
    await waitFor('destination reset', () => serverError !== '', 5000, 10);
    expect(serverError).toBe('ECONNRESET');
  });

  test('idleTimeoutMs is validated: the error names the option and the range', () => {
    const lane = new HostLaneDevice({ name: 'hlt1', mtu: 1400 });
    try {
      for (const bad of [0, 999, 1.5, Number.NaN, 31 * 24 * 3600 * 1000])
        expect(() => new HostLaneTcpRelay(lane, { idleTimeoutMs: bad })).toThrow(
          /HostLaneTcpOptions\.idleTimeoutMs = .*: must be an integer of ms in 1000\.\./,
        );
      expect(() => new HostLaneTcpRelay(lane, { idleTimeoutMs: 1000 })).not.toThrow();
    } finally {
      void lane.close();
    }
  });

  test("TCP to the gateway's own address has no listener: RST, counted", async () => {
    const w = (wire = new Wire());
    const c = w.connect(new Uint8Array([10, 80, 0, 1]), 22, Buffer.alloc(0), false, 40020);
    await waitFor('refused', () => c.closeReason !== null, 5000, 10);
    expect(c.closeReason).toBe('refused');
    expect(w.lane.drops.host_lane_tcp_unsupported).toBe(1);
    expect(w.relay.flows).toBe(0);
  });
});
