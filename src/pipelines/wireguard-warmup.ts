/**
 * Start-up warm-up of the WireGuard data path: a freshly started process forwards its first
 * packets at steady-state latency instead of in V8's baseline tiers.
 *
 * Why: V8 optimizes a function only after it has run for a while (src/cli/v8-tiering.ts); a
 * new tunnel carrying a ping every few milliseconds ran its first hundreds of packets through
 * unoptimized code (ping right after the handshake 2.1–3.6 ms vs 0.6–1.6 ms for wireguard-go).
 * Here the same code runs on synthetic packets first: two throwaway Devices with the real
 * crypto backend, a handshake between them in memory, then rounds of IPv4 and IPv6 packets
 * through a throwaway WireGuardPort (encryptBatch by allowed IPs and with named peers, as the
 * gateway calls it; receiveBatchFrom → decrypt → sink) and, when the TUN carries virtio-net
 * headers, a throwaway TunSegmenter in front of it, until a packet target is met or the time
 * budget is spent (runWarmUp takes the engine A's ports drive: a worker thread's ShardEngine
 * runs the same rounds, shard-warmup.ts). The gateway's router and Geneve stages are not part
 * of it. Between slices the event loop turns, so V8's concurrent compiles finish and are
 * installed before real traffic arrives.
 *
 * Contract: no socket, TUN or timer of the real data plane is touched and no counter of it
 * moves — everything here is a separate object, dropped afterwards (the throwaway port never
 * binds; its engine timer is closed). What is shared with the real path is only code, and the
 * type feedback V8 keeps per function: the objects used are the real classes (Device,
 * WireGuardPort, PacketBatch, Uint8Array buffers, {address, port} endpoints), so the feedback
 * matches what traffic will bring.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { PacketBatch } from '../io/batch.js';
import { MAX_PACKET } from '../io/sizes.js';
import { parsePrefix } from '../packet/addr.js';
import { Device, ENCRYPT_SEND, EncryptResult, RECEIVE_DELIVER, ReceiveResult } from '../wireguard/device.js';
import { REKEY_TIMEOUT } from '../wireguard/constants.js';
import { TRANSPORT_HEADER_SIZE } from '../wireguard/messages.js';
import type { SessionSlots } from '../wireguard/keypair.js';
import type { Endpoint, Peer } from '../wireguard/peer.js';
import { handshakeInMemory } from '../wireguard/memory-handshake.js';
import { segmenterScratch, TunSegmenter } from './tun-offload.js';
import { WireGuardPort } from './wireguard-port.js';
import type { PortEngine, WireGuardPortOptions } from './wireguard-port-types.js';

/**
 * Default wall-clock bound (ms) of the whole start-up warm-up (weft-wg: this synthetic part, then
 * the I/O part of gateway/wg-io-warmup.ts); WEFT_WARMUP_MS overrides it, 0 turns it off. Each part
 * ends sooner once its work target is met (about 0.3 s in all on an idle core); the bound only
 * matters on a busy machine, where V8's compiler thread gets less time as well.
 */
export const DEFAULT_WARMUP_MS = 1000;
/** Packets after which the synthetic warm-up ends before its budget (default of targetPackets). */
export const WARMUP_TARGET_PACKETS = 2048;
/** Upper bound accepted for WEFT_WARMUP_MS. */
export const MAX_WARMUP_MS = 2000;
/** Packets per round (each is encrypted, decrypted, answered and decrypted again). */
const ROUND_PACKETS = 8;
/** Rounds between new sessions (a power of two). */
const REKEY_ROUNDS = 64;
/** Work between event-loop turns (ms). */
const SLICE_MS = 10;

export interface WarmUpOptions {
  /** The backend the real Device uses (with the native AEAD wrapper when the daemon uses it). */
  readonly backend: CryptoBackend;
  readonly mtu: number;
  /** Wall-clock budget in ms (0: return at once). */
  readonly budgetMs: number;
  /** Ends once this many packets made the round trip (default WARMUP_TARGET_PACKETS). */
  readonly targetPackets?: number;
  /** Length of the virtio-net header of TUN reads, or 0 when the TUN has none (no offload). */
  readonly vnetHdrLen?: number;
  /** As the real Device (the gateway's peers may overlap): the receive check takes that branch. */
  readonly overlappingAllowedIps?: boolean;
  readonly clock?: () => number;
}

export interface WarmUpReport {
  /** Packets that went through the whole round trip. */
  readonly packets: number;
  readonly ms: number;
}

/** A WEFT_WARMUP_MS value that is not an integer 0..MAX_WARMUP_MS. */
export class WarmUpConfigError extends Error {
  constructor(value: string) {
    super(
      `WEFT_WARMUP_MS=${value}: expected an integer 0..${MAX_WARMUP_MS} (milliseconds of start-up warm-up; ` +
        `0 = off; unset = ${DEFAULT_WARMUP_MS})`,
    );
    this.name = 'WarmUpConfigError';
  }
}

/** The budget for a WEFT_WARMUP_MS value (unset/empty: the default). Throws WarmUpConfigError. */
export function warmUpBudget(raw: string | undefined): number {
  const v = (raw ?? '').trim();
  if (v === '') return DEFAULT_WARMUP_MS;
  if (!/^\d+$/.test(v) || Number(v) > MAX_WARMUP_MS) throw new WarmUpConfigError(v);
  return Number(v);
}

const EP_A: Endpoint = { address: '192.0.2.1', port: 51820 };
const EP_B: Endpoint = { address: '192.0.2.2', port: 51820 };

/** A ping-sized IPv4 (v = 4) or IPv6 (v = 6) packet from `src` to `dst` (last byte of each). */
export function writePacket(buf: Uint8Array, off: number, v: number, src: number, dst: number, len: number): void {
  buf.fill(0, off, off + len);
  if (v === 4) {
    buf[off] = 0x45;
    buf[off + 2] = len >> 8;
    buf[off + 3] = len & 0xff;
    buf[off + 8] = 64;
    buf[off + 9] = 1; // ICMP
    buf.set([10, 255, 0, src], off + 12);
    buf.set([10, 255, 0, dst], off + 16);
  } else {
    buf[off] = 0x60;
    const pl = len - 40;
    buf[off + 4] = pl >> 8;
    buf[off + 5] = pl & 0xff;
    buf[off + 6] = 58; // ICMPv6
    buf[off + 7] = 64;
    buf[off + 8] = 0xfd;
    buf[off + 23] = src;
    buf[off + 24] = 0xfd;
    buf[off + 39] = dst;
  }
}

/**
 * Runs the data path on synthetic packets for about `budgetMs` (see the module comment).
 * Resolves with what ran; never throws for a packet that did not make it (it just counts less).
 */
export async function warmUpWireGuard(opts: WarmUpOptions): Promise<WarmUpReport> {
  if (opts.budgetMs <= 0) return { packets: 0, ms: 0 };
  const pair = warmUpPair(opts, opts.overlappingAllowedIps ?? false);
  const named: Peer[] = new Array<Peer>(ROUND_PACKETS).fill(pair.pab);
  return runWarmUp(opts, pair, { engine: pair.a, named, handshook: () => {} });
}

/** The two throwaway devices of a warm-up, with a session-less peer each and the tunnel's addresses. */
export interface WarmUpPair {
  /** This side: its port's engine, or the owner of the engine it is drawn from (sessionSlots). */
  readonly a: Device;
  /** The far side, which answers every packet. */
  readonly b: Device;
  readonly pab: Peer;
  readonly pba: Peer;
}

/** Two Devices with fresh keys as each other's peer (10.255.0.1/fd00::1 ↔ 10.255.0.2/fd00::2). */
export function warmUpPair(
  opts: WarmUpOptions,
  overlappingAllowedIps: boolean,
  sessionSlots?: SessionSlots,
): WarmUpPair {
  const a = new Device({ backend: opts.backend, mtu: opts.mtu, overlappingAllowedIps, sessionSlots });
  const b = new Device({ backend: opts.backend, mtu: opts.mtu });
  const keyA = new Uint8Array(32);
  const keyB = new Uint8Array(32);
  opts.backend.randomFill(keyA);
  opts.backend.randomFill(keyB);
  a.setPrivateKey(keyA);
  b.setPrivateKey(keyB);
  const pab = a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  a.addAllowedIp(pab, parsePrefix('10.255.0.2/32'));
  a.addAllowedIp(pab, parsePrefix('fd00::2/128'));
  b.addAllowedIp(pba, parsePrefix('10.255.0.1/32'));
  b.addAllowedIp(pba, parsePrefix('fd00::1/128'));
  a.setEndpoint(pab, EP_B);
  b.setEndpoint(pba, EP_A);
  return { a, b, pab, pba };
}

/** The engine A's throwaway ports drive: the device `a` itself, or an engine drawn from it. */
export interface WarmUpSide<P> {
  readonly engine: PortEngine<P>;
  /** The peer of each packet, for the rounds that name it as the gateway's router does (null: never). */
  readonly named: readonly P[] | null;
  /** Called after every handshake between a and b, at the engines' time (e.g. a new snapshot). */
  readonly handshook: (now: number) => void;
}

/**
 * The warm-up loop on `pair` (see the module comment): rounds through throwaway ports on
 * `side.engine` until `opts.targetPackets` answers came back or `opts.budgetMs` is spent.
 */
export async function runWarmUp<P>(opts: WarmUpOptions, pair: WarmUpPair, side: WarmUpSide<P>): Promise<WarmUpReport> {
  const clock = opts.clock ?? Date.now;
  const t0 = clock();
  if (opts.budgetMs <= 0) return { packets: 0, ms: 0 };
  const target = opts.targetPackets ?? WARMUP_TARGET_PACKETS;
  const { a, b, pab, pba } = pair;

  // The engines' time: the real clock, moved on by a Rekey-Timeout before each new session (the
  // devices pace initiations per peer); the budget runs on the real clock.
  let skew = 0;
  const engineClock = (): number => clock() + skew;
  let delivered = 0;
  // Two of each callee the real path calls through a function value (the port's sink, the
  // segmenter's consumer), made by different code: the call sites then see more than one target
  // before V8 optimizes them and stay generic, so the real sink and consumer do not deoptimize
  // them on the first real packet.
  const portOf = (sink: WireGuardPortOptions<P>['sink']): WireGuardPort<P> =>
    new WireGuardPort<P>({ device: side.engine, mtu: MAX_PACKET, batchSize: ROUND_PACKETS, clock: engineClock, sink });
  const ports = [
    portOf({
      writeBatch: (_buf, _offs, _lens, _peers, n) => {
        delivered += n;
        return n;
      },
    }),
    portOf({
      writeBatch(_buf, _offs, _lens, _peers, n) {
        delivered += n;
        return n;
      },
    }),
  ];
  const shake = (x: Device, px: Peer, y: Device, fromX: Endpoint, fromY: Endpoint): void => {
    const now = engineClock();
    handshakeInMemory(x, px, y, fromX, fromY, now);
    side.handshook(now);
  };
  try {
    shake(a, pab, b, EP_A, EP_B);
    // A's side: packets A → B go in at the TUN end (through a segmenter when the real TUN has
    // virtio-net headers), leave encrypted in place; B decrypts, answers; the answers enter
    // A's port as received datagrams.
    const hdr = opts.vnetHdrLen ?? 0;
    const tunBatchOf = (): PacketBatch =>
      new PacketBatch({
        capacity: ROUND_PACKETS,
        headroom: Math.max(TRANSPORT_HEADER_SIZE, hdr),
        maxLen: MAX_PACKET,
        tailroom: 32,
        scratch: hdr > 0 ? segmenterScratch(opts.mtu, TRANSPORT_HEADER_SIZE, 32, 64) : 0,
      });
    const tunBatches = [tunBatchOf(), tunBatchOf()];
    const rx = new PacketBatch({
      capacity: ROUND_PACKETS,
      headroom: 0,
      maxLen: opts.mtu + 48,
      tailroom: 0,
      withAddresses: true,
    });
    const enc = new Round(b, rx);
    const segs =
      hdr > 0
        ? [
            new TunSegmenter(tunBatches[0], hdr, opts.mtu, TRANSPORT_HEADER_SIZE, 32, (buf, offs, lens, n) => {
              ports[0].encryptBatch(buf, offs, lens, n);
              enc.answer(buf, offs, lens, n, engineClock());
            }),
            new TunSegmenter(tunBatches[1], hdr, opts.mtu, TRANSPORT_HEADER_SIZE, 32, function (buf, offs, lens, n) {
              ports[1].encryptBatch(buf, offs, lens, n);
              enc.answer(buf, offs, lens, n, engineClock());
            }),
          ]
        : null;
    const named = side.named;
    let round = 0;
    let sliceEnd = clock() + SLICE_MS;
    const end = t0 + opts.budgetMs;
    for (;;) {
      const k = (round >> 2) & 1;
      const port = ports[k];
      const tunBatch = tunBatches[k];
      const v = (round & 1) === 0 ? 4 : 6;
      const len = 84 + (round & 7) * 16;
      tunBatch.filled(ROUND_PACKETS);
      for (let i = 0; i < ROUND_PACKETS; i++) {
        const off = tunBatch.offs[i];
        // A virtio-net header of zeros (no GSO, no checksum offload), as the kernel writes it for
        // a ping: the previous round left a WireGuard header in this headroom.
        tunBatch.buf.fill(0, off - hdr, off);
        writePacket(tunBatch.buf, off, v, 1, 2, len);
      }
      for (let i = 0; i < ROUND_PACKETS; i++) tunBatch.lens[i] = len;
      if (segs !== null) segs[k].process(tunBatch);
      else {
        // Every other pair of rounds names the peer of each packet, as the gateway's router does.
        if ((round & 2) === 0 || named === null)
          port.encryptBatch(tunBatch.buf, tunBatch.offs, tunBatch.lens, ROUND_PACKETS);
        else port.encryptBatch(tunBatch.buf, tunBatch.offs, tunBatch.lens, ROUND_PACKETS, named);
        enc.answer(tunBatch.buf, tunBatch.offs, tunBatch.lens, ROUND_PACKETS, engineClock());
      }
      port.receiveBatchFrom(rx, EP_B.address, EP_B.port);
      round++;
      // New sessions now and then, initiated by either side: fresh receiver indices (any 32-bit
      // value) and the responder's confirm-on-first-data path, as real rekeys bring them.
      if ((round & (REKEY_ROUNDS - 1)) === 0) {
        skew += REKEY_TIMEOUT + 1;
        if ((round & REKEY_ROUNDS) === 0) shake(a, pab, b, EP_A, EP_B);
        else shake(b, pba, a, EP_B, EP_A);
      }
      const now = clock();
      if (now >= end || delivered >= target) break;
      if (now >= sliceEnd) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceEnd = clock() + SLICE_MS;
      }
    }
  } finally {
    for (const p of ports) await p.close();
  }
  return { packets: delivered, ms: clock() - t0 };
}

/** B's half of a round: decrypt what A's port encrypted in place, answer into `rx`. */
class Round {
  private readonly rr = new ReceiveResult();
  private readonly er = new EncryptResult();

  constructor(
    private readonly b: Device,
    private readonly rx: PacketBatch,
  ) {}

  /** Packets i < n at offs[i] (plaintext before encryptBatch): their datagrams start 16 bytes earlier. */
  answer(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number, now: number): void {
    const rx = this.rx;
    rx.filled(rx.capacity); // restores the slot offsets moved by the last round
    let k = 0;
    for (let i = 0; i < n; i++) {
      const start = offs[i] - TRANSPORT_HEADER_SIZE;
      // Padded to 16 and tagged: the datagram's length follows from the plaintext's.
      const dlen = TRANSPORT_HEADER_SIZE + ((lens[i] + 15) & ~15) + 16;
      if (this.b.receive(buf, start, dlen, EP_A, now, false, this.rr) !== RECEIVE_DELIVER) continue;
      // B answers with the packet it got, source and destination swapped.
      const o = rx.offs[k] + TRANSPORT_HEADER_SIZE;
      const plain = this.rr.start;
      const plen = this.rr.length;
      rx.buf.set(buf.subarray(plain, plain + plen), o);
      swapAddresses(rx.buf, o);
      if (this.b.encrypt(rx.buf, o, plen, now, this.er) !== ENCRYPT_SEND) continue;
      rx.offs[k] = this.er.start;
      rx.lens[k] = this.er.length;
      k++;
    }
    rx.count = k;
  }
}

/** Swaps the source and destination addresses of the IPv4 or IPv6 packet at off (an echo's reply). */
export function swapAddresses(buf: Uint8Array, off: number): void {
  const v4 = buf[off] >> 4 === 4;
  const src = off + (v4 ? 12 : 8);
  const n = v4 ? 4 : 16;
  for (let i = 0; i < n; i++) {
    const x = buf[src + i];
    buf[src + i] = buf[src + n + i];
    buf[src + n + i] = x;
  }
}
