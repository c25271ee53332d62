/**
 * The owner side of a multi-threaded `weft-wg`: N worker threads (wg-worker.ts) each own a TUN
 * queue and a UDP socket on the device's port and carry transport data end to end; this
 * thread owns the Device — UAPI, handshakes, cookies, timers, configuration — and:
 *
 * - publishes the data-path snapshot (peers, endpoints, allowed IPs, shared sessions) to every
 *   worker when it changes: versioned, applied whole by each worker, acknowledged in shared
 *   memory (slots named only by older versions are reused after every worker moved on);
 * - receives on its own sockets (wg-owner-socket.ts), bound after every worker's on the port:
 *   worker 0 steers the port's SO_REUSEPORT groups so that every datagram but transport
 *   (handshake messages, cookie replies) reaches this thread, which screens and answers them as
 *   the one-thread daemon does and sends from these sockets; where the kernel refuses the program,
 *   workers screen handshake messages (mac1; under load mac2, cookie replies and the rate limit)
 *   and hand over what passes, and what this thread sends leaves through worker 0's socket;
 * - runs what workers hand over through its own WireGuardPort: transport under a session their
 *   snapshot does not know, and inner packets without a usable shared session (staged);
 * - folds the workers' activity rows into peer counters and timers every FOLD_MS and before
 *   every UAPI get (so `wg show` transfer counts are every worker's sum).
 */
import { availableParallelism } from 'node:os';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { PacketBatch as Batch } from '../io/batch.js';
import { MAX_PACKET } from '../io/sizes.js';
import { UdpError, UdpSocket } from '../io/udp.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import type { Device } from '../wireguard/device.js';
import { TRANSPORT_HEADER_SIZE } from '../wireguard/messages.js';
import type { Peer } from '../wireguard/peer.js';
import { snapshotKey } from '../wireguard/shard-owner.js';
import type { ShardSlots } from '../wireguard/shard-slots.js';
import { HANDOFF_DATAGRAM, HANDOFF_SCREENED } from '../wireguard/shard-peer.js';
import { MAX_WORKERS, OwnerWords } from './wg-shared-words.js';
import { OwnerSocket, type OwnerSocketHost } from './wg-owner-socket.js';
import type { FromWorker, ToWorker, WgWorkerData } from './wg-worker.js';

const sleepMs = (ms: number): Promise<undefined> =>
  new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref());

/** How often workers' activity is folded into the owner's counters and timers. */
const FOLD_MS = 50;
/** Handoffs a worker may have in flight to the owner; beyond, it drops and counts. */
const HANDOFF_DEPTH = 1024;

/**
 * Worker threads for weft-wg by default: the CPUs this process may use — os.availableParallelism()
 * (the affinity mask), capped by the cgroup v2 CPU quota (/sys/fs/cgroup/cpu.max "quota period").
 */
export function defaultWorkerCount(cpuMaxPath = '/sys/fs/cgroup/cpu.max'): number {
  let n = availableParallelism();
  try {
    const [quota, period] = readFileSync(cpuMaxPath, 'utf8').trim().split(/\s+/);
    if (quota !== 'max' && Number(period) > 0) n = Math.min(n, Math.max(1, Math.ceil(Number(quota) / Number(period))));
  } catch {
    // No cgroup v2 CPU controller: the affinity mask is the limit.
  }
  return Math.max(1, n);
}

/**
 * WEFT_WORKERS: a positive integer, "auto" for defaultWorkerCount(), unset for 1 (the data path
 * on the main thread). Throws on anything else.
 */
export function parseWorkerCount(v: string | undefined): number {
  if (v === undefined || v === '') return 1;
  if (v === 'auto') return defaultWorkerCount();
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new RangeError(`WEFT_WORKERS=${v}: expected an integer 1..64 or "auto"`);
  return n;
}

export interface WgWorkersOptions {
  readonly ifname: string;
  readonly mtu: number;
  readonly txQueueLen: number;
  readonly offload: boolean;
  readonly crypto: string;
  readonly nativeAead: boolean;
  readonly device: Device;
  readonly slots: ShardSlots;
  /** Budget (ms) of each worker's start-up warm-up (wg-worker.ts warmUp), run by all at once; 0: none. */
  readonly warmUpMs: number;
  readonly log: (level: 'error' | 'info' | 'debug', msg: string) => void;
}

/** What one worker's start-up warm-up ran: synthetic packets, then echoes on a loopback tunnel. */
export interface WorkerWarmUp {
  readonly packets: number;
  readonly ms: number;
  readonly echoes: number;
  readonly ioMs: number;
}

export class WgWorkers implements OwnerSocketHost {
  readonly port: WireGuardPort;
  private readonly workers: Worker[] = [];
  /** Handoffs in flight, the load word, the workers' drops (wg-shared-words.ts). */
  private readonly words = new OwnerWords();
  private own4: OwnerSocket | null = null;
  private own6: OwnerSocket | null = null;
  /** Whether worker 0's sockets took the steering program (wg-owner-socket.ts): then the owner binds real sockets last. */
  private steered = false;
  private boundPort = -1;
  private version = 0;
  private lastKey = '';
  private publishScheduled = false;
  private fold: NodeJS.Timeout | null = null;
  private readonly plain = new Batch({
    capacity: 1,
    headroom: TRANSPORT_HEADER_SIZE,
    maxLen: MAX_PACKET,
    tailroom: 32,
  });
  private pending = new Map<number, (m: FromWorker) => void>();
  private closed = false;
  /** The UDP offloads worker 0's sockets got. */
  udpOffload: { gso: boolean; gro: boolean } | null = null;
  /** Per worker, what its start-up warm-up ran (empty with a budget of 0). */
  warmUp: readonly WorkerWarmUp[] = [];

  private constructor(private readonly o: WgWorkersOptions) {
    this.port = new WireGuardPort({
      device: o.device,
      mtu: MAX_PACKET,
      sink: {
        writeBatch: (buf, offs, lens, _peers, n) => {
          // The packet may have confirmed a session here: worker 0 applies it before the
          // packet reaches the TUN, so the reply it encrypts goes out under it.
          this.publish();
          for (let i = 0; i < n; i++) this.post(0, { t: 'tun', b: buf.slice(offs[i], offs[i] + lens[i]) });
          return n;
        },
      },
      openUdp: async (u) => {
        // Steered: the same options as the workers' sockets (GRO included: the kernel's GRO
        // lookup picks a group member by its own hash, without the program).
        const real = this.steered ? await UdpSocket.open({ ...u, reusePort: true, gso: false, gro: o.offload }) : null;
        const s = new OwnerSocket(u.family, this.boundPort, this, real);
        if (u.family === 4) this.own4 = s;
        else this.own6 = s;
        return s;
      },
      onError: (what, err) => o.log('info', `${what}: ${err instanceof Error ? err.message : String(err)}`),
    });
  }

  /** Starts `count` workers on the TUN `o.ifname` (created by the caller as a multi-queue TUN). */
  static async start(o: WgWorkersOptions, count: number): Promise<WgWorkers> {
    if (count > MAX_WORKERS) throw new RangeError(`at most ${MAX_WORKERS} workers`);
    const w = new WgWorkers(o);
    const entry = new URL('./wg-worker.js', import.meta.url).href;
    try {
      for (let i = 0; i < count; i++) {
        const data: WgWorkerData = {
          index: i,
          ifname: o.ifname,
          mtu: o.mtu,
          txQueueLen: o.txQueueLen,
          offload: o.offload,
          crypto: o.crypto,
          nativeAead: o.nativeAead,
          shared: o.slots.buffers,
          depth: w.words.depth,
          depthLimit: HANDOFF_DEPTH,
          drops: w.words.drops,
        };
        const worker = new Worker(`import(${JSON.stringify(entry)}).then((m) => m.runWgWorker())`, {
          eval: true,
          workerData: data,
        });
        w.workers.push(worker);
        const ready = new Promise<void>((resolve, reject) => {
          const onMsg = (m: FromWorker): void => {
            if (m.t === 'ready') resolve();
            else if (m.t === 'error') reject(new Error(`worker ${i}: ${m.message}`));
          };
          worker.once('error', reject);
          worker.on('message', onMsg);
          worker.once('exit', (c) => reject(new Error(`worker ${i} exited with ${c} before it was ready`)));
        });
        await ready;
        worker.removeAllListeners('message');
        worker.removeAllListeners('exit');
        worker.on('message', (m: FromWorker) => w.onMessage(i, m));
        worker.on('error', (e) => o.log('error', `worker ${i}: ${e.message}`));
      }
      // Every worker at once (each on its own thread), once all queues are attached and before
      // any socket is bound: no real packet reaches a worker before its warm-up ended.
      if (o.warmUpMs > 0) w.warmUp = await w.warm(o.warmUpMs);
      w.publish();
      w.fold = setInterval(() => w.tick(), FOLD_MS);
      w.fold.unref();
      return w;
    } catch (e) {
      await w.close();
      throw e;
    }
  }

  get count(): number {
    return this.workers.length;
  }

  private async warm(ms: number): Promise<WorkerWarmUp[]> {
    const replies = await Promise.all(this.workers.map((_, i) => this.request(i, { t: 'warm', ms })));
    return replies.map((r, i) => {
      if (r.t !== 'warmed') return { packets: 0, ms: 0, echoes: 0, ioMs: 0 };
      if (r.error !== undefined) this.o.log('info', `worker ${i}: warm-up: ${r.error}`);
      this.o.log(
        'info',
        `worker ${i}: warm-up: ${r.packets} packets in ${r.ms} ms, I/O warm-up: ${r.echoes} echoes in ${r.ioMs} ms`,
      );
      return { packets: r.packets, ms: r.ms, echoes: r.echoes, ioMs: r.ioMs };
    });
  }

  /**
   * Binds every worker's sockets to `port` (0: worker 0's choice), then the owner's relays.
   * A port another process holds fails with EADDRINUSE, as for wireguard-go: SO_REUSEPORT alone
   * would let the workers join that process's group (same user, also SO_REUSEPORT) and share
   * its datagrams, so a plain socket is bound there first and closed again.
   */
  async bind(port: number): Promise<number> {
    if (port === this.boundPort && port !== 0) return port;
    if (port !== 0) await (await UdpSocket.open({ family: 4, port })).close();
    const first = await this.request(0, { t: 'bind', port, steer: this.workers.length });
    if (first.t !== 'bound')
      throw new UdpError(
        first.t === 'bindError' ? first.message : 'bind failed',
        first.t === 'bindError' ? first.errno : 0,
      );
    this.udpOffload = { gso: first.gso, gro: first.gro };
    if (first.steered !== this.steered)
      this.o.log(
        'info',
        first.steered
          ? 'handshake messages are steered to this thread (SO_REUSEPORT program)'
          : 'the kernel refused the SO_REUSEPORT program: workers screen handshake messages and hand them over',
      );
    this.steered = first.steered;
    for (let i = 1; i < this.workers.length; i++) {
      const r = await this.request(i, { t: 'bind', port: first.port, steer: 0 });
      if (r.t !== 'bound')
        throw new UdpError(r.t === 'bindError' ? r.message : 'bind failed', r.t === 'bindError' ? r.errno : 0);
    }
    this.boundPort = first.port;
    await this.port.bind(first.port);
    return first.port;
  }

  get boundTo(): number {
    return this.boundPort;
  }

  private request(i: number, m: ToWorker): Promise<FromWorker> {
    return new Promise((resolve) => {
      this.pending.set(i, resolve);
      this.post(i, m);
    });
  }

  /** Unsteered: sends bytes of the owner (handshakes, keepalives, staged packets) from worker 0's socket. */
  sendVia(b: Uint8Array, address: string, port: number): void {
    this.post(0, { t: 'send', b, a: address, p: port });
  }

  markWorkers(mark: number): void {
    this.broadcast({ t: 'mark', mark });
  }

  /** Whether the owner's own sockets receive the handshake messages (steered) or workers relay them. */
  get handshakesSteered(): boolean {
    return this.steered && (this.own4?.steered ?? false);
  }

  broadcast(m: ToWorker): void {
    for (let i = 0; i < this.workers.length; i++) this.post(i, m);
  }

  private post(i: number, m: ToWorker): void {
    if (!this.closed) this.workers[i]?.postMessage(m);
  }

  private onMessage(i: number, m: FromWorker): void {
    const now = Date.now();
    switch (m.t) {
      case 'h':
        this.words.handoffTaken(i);
        if (m.k === HANDOFF_SCREENED) {
          this.port.queueScreened(m.b, 0, m.b.length, m.a, m.p);
          this.shareLoad();
        } else if (m.k === HANDOFF_DATAGRAM) {
          const r = m.a.includes(':') ? this.own6 : this.own4;
          r?.inject(m.b, m.a, m.p);
        } else {
          const b = this.plain;
          b.buf.set(m.b, b.offs[0]);
          b.lens[0] = m.b.length;
          this.port.encryptBatch(b.buf, b.offs, b.lens, 1);
        }
        break;
      case 'c':
        this.o.device.confirmShardSession(m.i, now);
        this.port.afterActivity();
        break;
      case 'r': {
        const peer = this.peerOfSlot(m.s);
        if (peer !== null) {
          this.o.device.roamShardPeer(peer, { address: m.a, port: m.p });
          this.o.slots.endpointLearned(peer);
        }
        break;
      }
      case 'error':
        this.o.log('error', `worker ${i}: ${m.message}`);
        return;
      default: {
        const p = this.pending.get(i);
        if (p !== undefined) {
          this.pending.delete(i);
          p(m);
        }
        return;
      }
    }
    this.schedulePublish();
  }

  private peerOfSlot(slot: number): Peer | null {
    for (const p of this.o.device.peers()) if (this.o.slots.peerSlot(p) === slot) return p;
    return null;
  }

  /** Folds the workers' activity into the Device (counters, timers) and their drops into its drops. */
  foldNow(): void {
    const now = Date.now();
    const d = this.o.device;
    this.o.slots.fold(d.peers(), (p, a) => d.foldShardActivity(p, a, now));
    this.words.foldDrops(this.workers.length, d.drops);
  }

  /**
   * Tells the workers whether this thread's handshake queue is under load (screened messages
   * wait there): they then demand mac2 and rate-limit too. Refreshed as messages arrive and on
   * every tick (a worker keeps the state UNDER_LOAD_AFTER_TIME after it saw it).
   */
  private shareLoad(): void {
    this.words.shareLoad(this.port.handshakeUnderLoad);
  }

  private tick(): void {
    if (this.closed) return;
    this.foldNow();
    this.shareLoad();
    this.port.poll();
    this.publish();
  }

  private schedulePublish(): void {
    if (this.publishScheduled) return;
    this.publishScheduled = true;
    setImmediate(() => {
      this.publishScheduled = false;
      this.publish();
    });
  }

  /** Sends the data-path snapshot to every worker if it changed. */
  publish(): void {
    if (this.closed) return;
    const slots = this.o.slots;
    const snap = this.o.device.shardSnapshot(this.version + 1, (p) => slots.peerSlot(p), Date.now());
    slots.syncEndpoints(this.o.device.peers());
    const key = snapshotKey(snap);
    if (key === this.lastKey) return;
    this.lastKey = key;
    this.version = snap.version;
    slots.published = snap.version;
    this.broadcast({ t: 'snap', snap });
  }

  /**
   * Per worker: messages handed over to this thread (and refused: the limit in flight), and its
   * drops by reason (DROP_REASON_NAMES index → count, non-zero only). A worker that does not
   * answer within a second is left out.
   */
  async stats(): Promise<{ worker: number; handoffs: number; refused: number; drops: Map<number, number> }[]> {
    const out: { worker: number; handoffs: number; refused: number; drops: Map<number, number> }[] = [];
    for (let i = 0; i < this.workers.length; i++) {
      const r = await Promise.race([this.request(i, { t: 'stats' }), sleepMs(1000)]);
      if (r === undefined || r.t !== 'stats') continue;
      const drops = new Map<number, number>();
      r.drops.forEach((n, k) => {
        if (n > 0) drops.set(k, n);
      });
      out.push({ worker: i, handoffs: r.handoffs, refused: r.refused, drops });
    }
    return out;
  }

  /** Datagrams this thread's own sockets received from the network (steered; 0 when relayed). */
  get ownReceived(): number {
    const n = (s: OwnerSocket | null): number => (s === null || !s.steered ? 0 : s.stats.rxPackets - s.injected);
    return n(this.own4) + n(this.own6);
  }

  async close(): Promise<void> {
    if (this.fold !== null) clearInterval(this.fold);
    await this.port.close();
    const waits = this.workers.map(
      (w, i) =>
        new Promise<void>((resolve) => {
          const t = setTimeout(() => void w.terminate().then(() => resolve()), 2000);
          w.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          this.post(i, { t: 'close' });
        }),
    );
    await Promise.all(waits);
    this.closed = true;
  }
}
