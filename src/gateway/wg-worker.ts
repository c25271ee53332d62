/**
 * One worker thread of a multi-threaded `weft-wg` (wg-workers.ts starts it with runWgWorker):
 * its own TUN queue (IFF_MULTI_QUEUE: the kernel keeps a flow on one queue), its own UDP
 * sockets on the device's port (SO_REUSEPORT: the kernel keeps a sender's 4-tuple on one
 * socket), its own buffers and crypto backend, and a ShardEngine on the owner's snapshot:
 *
 *   TUN queue → encrypt (shared session counter) → sendmmsg from this worker's socket
 *   recvmmsg → decrypt (shared replay window) → this worker's TUN queue
 *
 * Messages from the owner: warm (the start-up warm-up on throwaway objects, see warmUp),
 * a snapshot (applied whole), bind/mark/close, and bytes to send
 * (handshakes, keepalives, staged packets) or to write to the TUN (packets the owner
 * decrypted). To the owner: handoffs (bounded by a shared depth counter: over the limit the
 * worker drops and counts; handshake messages only once screened here, see shard.ts),
 * confirmations, roams, replies. Drops are counted in shared memory the owner folds.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { CryptoBackend } from '../crypto/backend.js';
import { getCryptoBackend, parseCryptoBackendName } from '../crypto/select.js';
import { withNativeAead } from '../io/native-aead.js';
import { MAX_PACKET } from '../io/sizes.js';
import { TunDevice } from '../io/tun.js';
import { UdpError } from '../io/udp.js';
import { warmUpShard } from '../pipelines/shard-warmup.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import type { SharedSessionBuffers } from '../wireguard/shared-sessions.js';
import { ShardEngine } from '../wireguard/shard.js';
import type { ShardPeer } from '../wireguard/shard-peer.js';
import type { ShardSnapshot } from '../wireguard/shard-owner.js';
import { warmUpIo } from './wg-io-warmup.js';
import { WorkerWords } from './wg-shared-words.js';
import { coalescerFor, startTunReader, tunSink } from './wg-tun-path.js';

/** What the owner passes to a worker (workerData). */
export interface WgWorkerData {
  readonly index: number;
  readonly ifname: string;
  readonly mtu: number;
  readonly txQueueLen: number;
  readonly offload: boolean;
  readonly crypto: string;
  readonly nativeAead: boolean;
  readonly shared: SharedSessionBuffers;
  /** wg-shared-words.ts: handoffs in flight, the owner's load word. */
  readonly depth: SharedArrayBuffer;
  /** Handoffs this worker may have in flight. */
  readonly depthLimit: number;
  /** wg-shared-words.ts: every worker's drops, folded by the owner. */
  readonly drops: SharedArrayBuffer;
}

/** Owner → worker. */
export type ToWorker =
  | { t: 'snap'; snap: ShardSnapshot }
  /** steer > 0: worker 0 steers the port's SO_REUSEPORT groups for that many workers (wg-owner-socket.ts). */
  | { t: 'bind'; port: number; steer: number }
  | { t: 'mark'; mark: number }
  | { t: 'send'; b: Uint8Array; a: string; p: number }
  | { t: 'tun'; b: Uint8Array }
  | { t: 'stats' }
  | { t: 'warm'; ms: number }
  | { t: 'close' };

/** Worker → owner. */
export type FromWorker =
  | { t: 'ready' }
  | { t: 'h'; k: number; b: Uint8Array; a: string; p: number }
  | { t: 'c'; i: number }
  | { t: 'r'; s: number; a: string; p: number }
  | { t: 'bound'; port: number; gso: boolean; gro: boolean; steered: boolean }
  | { t: 'bindError'; message: string; errno: number }
  | { t: 'stats'; handoffs: number; refused: number; drops: number[] }
  | { t: 'warmed'; packets: number; ms: number; echoes: number; ioMs: number; error?: string }
  | { t: 'error'; message: string }
  | { t: 'closed' };

/** The worker's main: runs until the owner sends 'close'. */
export async function runWgWorker(): Promise<void> {
  const port0 = parentPort;
  if (port0 === null) throw new Error('runWgWorker runs in a worker thread');
  const post = (m: FromWorker): void => port0.postMessage(m);
  try {
    await serve(workerData as WgWorkerData, port0, post);
  } catch (e) {
    post({ t: 'error', message: e instanceof Error ? e.message : String(e) });
  }
}

async function serve(
  data: WgWorkerData,
  parent: NonNullable<typeof parentPort>,
  post: (m: FromWorker) => void,
): Promise<void> {
  let backend = getCryptoBackend(parseCryptoBackendName(data.crypto));
  if (data.nativeAead) backend = withNativeAead(backend).backend;
  const words = new WorkerWords(data, data.index, data.depthLimit);
  const engine = new ShardEngine(
    backend,
    data.shared,
    data.index,
    {
      handoff: (k, buf, off, len, a, p) => {
        if (!words.claimHandoff()) return false;
        post({ t: 'h', k, b: buf.slice(off, off + len), a, p });
        return true;
      },
      underLoad: () => words.underLoad(),
      confirmed: (i) => post({ t: 'c', i }),
      roamed: (s, a, p) => post({ t: 'r', s, a, p }),
    },
    words.drops,
  );
  const tun = TunDevice.open({
    name: data.ifname,
    mtu: data.mtu,
    up: false,
    multiQueue: true,
    txQueueLen: data.txQueueLen,
    offload: data.offload,
  });
  const co = coalescerFor(tun);
  const sink = tunSink<ShardPeer>(tun, co);
  const port = new WireGuardPort<ShardPeer>({
    device: engine,
    mtu: MAX_PACKET,
    sink,
    udpOffload: data.offload,
    reusePort: true,
    rxCoalesceReservation: co === null ? 0 : co.reservation,
    rxCoalesceFlows: co === null ? undefined : co.maxFlows,
  });
  startTunReader(tun, data.mtu, port);
  const one = { offs: new Uint32Array(1), lens: new Uint32Array(1) };
  parent.on('message', (m: ToWorker) => {
    switch (m.t) {
      case 'snap':
        engine.apply(m.snap);
        break;
      case 'bind':
        port.bind(m.port).then(
          (p) => {
            const o = port.udpOffload();
            const steered = m.steer > 0 && port.steerReusePort(m.steer);
            post({ t: 'bound', port: p, gso: o?.gso ?? false, gro: o?.gro ?? false, steered });
          },
          (e: unknown) =>
            post({
              t: 'bindError',
              message: e instanceof Error ? e.message : String(e),
              errno: e instanceof UdpError ? e.errno : 0,
            }),
        );
        break;
      case 'mark':
        try {
          port.setFwmark(m.mark);
        } catch (e) {
          post({ t: 'error', message: `fwmark: ${e instanceof Error ? e.message : String(e)}` });
        }
        break;
      case 'send':
        engine.queueOutgoing(m.b, m.a, m.p);
        port.afterActivity();
        break;
      case 'tun':
        one.offs[0] = 0;
        one.lens[0] = m.b.length;
        tun.writeBatch(m.b, one.offs, one.lens, 1);
        break;
      case 'warm':
        // After the real port, TUN reader and sink exist (V8 has seen their callbacks), before
        // the owner binds the sockets: the first real packets run optimized code.
        void warmUp(backend, data, tun, m.ms).then(post, (e: unknown) =>
          post({
            t: 'warmed',
            packets: 0,
            ms: 0,
            echoes: 0,
            ioMs: 0,
            error: e instanceof Error ? e.message : String(e),
          }),
        );
        break;
      case 'stats':
        post({ t: 'stats', handoffs: engine.handoffs, refused: engine.handoffsRefused, drops: [...engine.drops] });
        break;
      case 'close':
        void (async () => {
          await port.close();
          await tun.close();
          post({ t: 'closed' });
          parent.close();
        })();
        break;
    }
  });
  post({ t: 'ready' });
}

/**
 * The worker's start-up warm-up, as the one-thread daemon's: its engine on synthetic packets
 * (shard-warmup.ts) for up to half of `budgetMs`, then the I/O classes on a loopback tunnel
 * (wg-io-warmup.ts) for the rest. Throwaway objects only.
 */
async function warmUp(
  backend: CryptoBackend,
  data: WgWorkerData,
  tun: TunDevice,
  budgetMs: number,
): Promise<FromWorker> {
  const half = budgetMs >> 1;
  const w = await warmUpShard({ backend, mtu: data.mtu, budgetMs: half, vnetHdrLen: tun.offload?.vnetHdrLen ?? 0 });
  const io = await warmUpIo({
    backend,
    mtu: data.mtu,
    tunOffload: tun.offload,
    udpOffload: data.offload,
    budgetMs: budgetMs - Math.min(w.ms, half),
  });
  return {
    t: 'warmed',
    packets: w.packets,
    ms: w.ms,
    echoes: io.packets,
    ioMs: io.ms,
    ...(io.skipped !== null ? { error: `I/O warm-up skipped: ${io.skipped}` } : {}),
  };
}
