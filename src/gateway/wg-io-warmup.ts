/**
 * Start-up warm-up of weft-wg's I/O path: the same classes and functions that will carry the
 * first real packets, run on a private loopback tunnel before the UAPI socket opens.
 *
 * Why: wireguard-warmup.ts runs the engine on synthetic packets in memory, but the functions
 * between the kernel and the engine (the TUN read callback, the UDP receive drain, sendmmsg,
 * the TUN write and its reply read) first ran on real traffic: a fresh daemon pinged right
 * after its handshake answered while V8 was still compiling them, and the first real packets
 * also deoptimized engine functions whose feedback the synthetic packets had not given
 * (a source address interned from a received datagram, a handshake through the port's ring).
 *
 * What runs, until `targetEchoes` echoes came back or `budgetMs` passed: two throwaway engines (the real crypto backend) with real
 * WireGuardPorts on UDP sockets bound to 127.0.0.1 (and ::1 when present), configured through
 * the UAPI parser and handshaking through the port as a `wg set` does. Engine A's TUN is one end
 * of TunDevice.pair (a socket pair: TunDevice's read/write path with the real TUN's virtio-net
 * header and offloads) read by the daemon's own startTunReader and written through tunSink (and
 * the coalescing writer when the TUN has TSO); the other end plays the host: it writes ICMP
 * echo requests (IPv4 and IPv6, 1–4 per write, two writes in flight so the reply read after a
 * TUN write finds a packet as it does with a local stack), now and then a packet to a multicast
 * group no peer routes (what a kernel writes to a new TUN; dropped), and reads what comes back. Engine B
 * answers every packet it decrypts (addresses swapped, encrypted back).
 *
 * Contract: nothing of the real data plane is touched — its TUN, sockets, engine and counters
 * are separate objects; no kernel interface or route is created (the loopback sockets are the
 * only kernel state, closed at the end). Returns within budgetMs plus one event-loop turn; a
 * missing piece (no native addon, no loopback address) skips the warm-up with the reason.
 */
import type { CryptoBackend } from '../crypto/backend.js';
import { PacketBatch } from '../io/batch.js';
import { MAX_PACKET } from '../io/sizes.js';
import { TUN_OFFLOAD_MAX_PACKET, TunDevice } from '../io/tun.js';
import type { TunOffloadState } from '../io/tun-link.js';
import { UdpSocket, type UdpOptions } from '../io/udp.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import { swapAddresses, writePacket } from '../pipelines/wireguard-warmup.js';
import type { InnerSink } from '../pipelines/wireguard-port-types.js';
import { Device } from '../wireguard/device.js';
import { DROP_NO_ROUTE } from '../wireguard/drops.js';
import type { Peer } from '../wireguard/peer.js';
import { formatHexKey, planSet } from '../wireguard/uapi.js';
import { parseSet } from '../wireguard/uapi-set.js';
import { coalescerFor, startTunReader, tunSink } from './wg-tun-path.js';

/** Requests per write cycle: mostly single pings (the latency case), some small batches. */
const WRITE_SIZES = [1, 1, 2, 1, 4, 1];
/** Writes in flight: a reply then often finds the next request queued on the TUN. */
const IN_FLIGHT = 2;
/** With no reply for this long (a lost packet, the handshake), write again (ms). */
const STALL_MS = 5;
/** Echoes after which the warm-up ends before its budget (default of targetEchoes). */
export const IO_WARMUP_TARGET_ECHOES = 1024;
/** Largest request written (bytes). */
const MAX_REQUEST = 196;

export interface IoWarmUpOptions {
  /** The backend the real Device uses (with the native AEAD wrapper when the daemon uses it). */
  readonly backend: CryptoBackend;
  readonly mtu: number;
  /** The real TUN's offloads (its virtio-net header, TSO/USO), or null for a plain TUN. */
  readonly tunOffload: TunOffloadState | null;
  /** As the real port: ask for UDP GSO/GRO. */
  readonly udpOffload: boolean;
  /** Wall-clock budget in ms (0: return at once). */
  readonly budgetMs: number;
  /** Ends once this many echoes came back (default IO_WARMUP_TARGET_ECHOES). */
  readonly targetEchoes?: number;
}

export interface IoWarmUpReport {
  /** Echo replies read back at the host end of the pair. */
  readonly packets: number;
  readonly ms: number;
  /** Why the warm-up did not run (null when it ran). */
  readonly skipped: string | null;
  /** Calls that reached the real I/O classes, for tests: TUN read batches, UDP datagrams sent and received. */
  readonly tunRxBatches: number;
  readonly udpTxPackets: number;
  readonly udpRxPackets: number;
  /** Packets to no peer that engine A dropped (DROP_NO_ROUTE). */
  readonly noRouteDrops: number;
}

const loopback = (o: UdpOptions): Promise<UdpSocket> =>
  UdpSocket.open({ ...o, address: o.family === 4 ? '127.0.0.1' : '::1' });

/** Runs the loopback tunnel for about `budgetMs` (see the module comment). Never throws for traffic. */
export async function warmUpIo(o: IoWarmUpOptions): Promise<IoWarmUpReport> {
  const t0 = Date.now();
  const none = (skipped: string | null): IoWarmUpReport => ({
    packets: 0,
    ms: Date.now() - t0,
    skipped,
    tunRxBatches: 0,
    udpTxPackets: 0,
    udpRxPackets: 0,
    noRouteDrops: 0,
  });
  if (o.budgetMs <= 0) return none(null);
  let tun: TunDevice;
  let host: TunDevice;
  try {
    [tun, host] = TunDevice.pair(o.mtu, o.tunOffload);
  } catch (e) {
    return none(e instanceof Error ? e.message : String(e));
  }
  const a = new Device({ backend: o.backend, mtu: o.mtu });
  const b = new Device({ backend: o.backend, mtu: o.mtu });
  // Closing a started device or a bound port writes fields that code optimized on them depends
  // on (V8 then deoptimizes it): close one of each now, before anything here gets hot, so that
  // closing the warm-up's own objects at the end does not undo the warm-up.
  try {
    await rehearseClose(o, a);
  } catch (e) {
    await host.close();
    await tun.close();
    return none(`no loopback UDP: ${e instanceof Error ? e.message : String(e)}`);
  }
  const co = coalescerFor(tun);
  const portA = new WireGuardPort({
    device: a,
    mtu: MAX_PACKET,
    sink: tunSink(tun, co),
    udpOffload: o.udpOffload,
    openUdp: loopback,
    rxCoalesceReservation: co === null ? 0 : co.reservation,
    rxCoalesceFlows: co === null ? undefined : co.maxFlows,
  });
  let portB: WireGuardPort | null = null;
  const echo: InnerSink<Peer> = {
    writeBatch(buf, offs, lens, _peers, n) {
      for (let i = 0; i < n; i++) swapAddresses(buf, offs[i]);
      portB!.encryptBatch(buf, offs, lens, n);
      return n;
    },
  };
  portB = new WireGuardPort({ device: b, mtu: MAX_PACKET, sink: echo, udpOffload: o.udpOffload, openUdp: loopback });
  let stallTimer: NodeJS.Timeout | null = null;
  let replies = 0;
  let udpTx = 0;
  let udpRx = 0;
  try {
    try {
      await portA.bind(0);
      await portB.bind(0);
    } catch (e) {
      return none(`no loopback UDP: ${e instanceof Error ? e.message : String(e)}`);
    }
    configure(a, b, portB.port, 2);
    configure(b, a, portA.port, 1);
    startTunReader(tun, o.mtu, portA);

    const end = t0 + o.budgetMs;
    const target = o.targetEchoes ?? IO_WARMUP_TARGET_ECHOES;
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => (done = resolve));
    const budgetTimer = setTimeout(() => done(), o.budgetMs);
    const req = new Uint8Array(5 * MAX_REQUEST);
    const offs = new Uint32Array(5);
    const lens = new Uint32Array(5);
    let cycle = 0;
    const write = (): void => {
      const k = WRITE_SIZES[cycle % WRITE_SIZES.length];
      // One size and family per write, so UDP GRO may join the datagrams of a write into a run.
      const v = (cycle & 1) === 0 ? 4 : 6;
      const len = 84 + (cycle & 7) * 16;
      for (let i = 0; i < k; i++) {
        offs[i] = i * MAX_REQUEST;
        lens[i] = len;
        writeEcho(req, offs[i], v, len);
      }
      // Now and then a packet no peer's allowed IPs hold, as the kernel writes to a new TUN
      // (IPv6 router solicitations and MLD reports to ff02::): the engine drops it (no route).
      let n = k;
      if ((cycle & 3) === 3) {
        offs[n] = n * MAX_REQUEST;
        lens[n] = NO_ROUTE_LEN;
        writeNoRoute(req, offs[n], v);
        n++;
      }
      cycle++;
      host.writeBatch(req, offs, lens, n);
    };
    let lastReplies = -1;
    const off = o.tunOffload;
    const hostBatch = new PacketBatch({
      capacity: 16,
      headroom: off?.vnetHdrLen ?? 0,
      maxLen: off !== null && (off.tso || off.uso) ? TUN_OFFLOAD_MAX_PACKET : MAX_PACKET,
    });
    host.start(hostBatch, (rb) => {
      replies += rb.count;
      if (replies >= target || Date.now() >= end) done();
      else write();
    });
    // As WgDaemon's UAPI set: timers, then a handshake towards the configured endpoint.
    portA.poll();
    portA.initiateIdlePeers();
    for (let i = 0; i < IN_FLIGHT; i++) write();
    stallTimer = setInterval(() => {
      if (replies === lastReplies && Date.now() < end) write();
      lastReplies = replies;
    }, STALL_MS);
    await finished;
    clearTimeout(budgetTimer);
    const ua = portA.udpStats().v4;
    const ub = portB.udpStats().v4;
    udpTx = (ua?.txPackets ?? 0) + (ub?.txPackets ?? 0);
    udpRx = (ua?.rxPackets ?? 0) + (ub?.rxPackets ?? 0);
  } finally {
    if (stallTimer !== null) clearInterval(stallTimer);
    await host.close();
    await tun.close();
    await portA.close();
    await portB.close();
  }
  return {
    packets: replies,
    ms: Date.now() - t0,
    skipped: null,
    tunRxBatches: tun.stats.rxBatches,
    udpTxPackets: udpTx,
    udpRxPackets: udpRx,
    noRouteDrops: a.drops[DROP_NO_ROUTE],
  };
}

/** Starts and closes a throwaway TUN pair and a bound WireGuardPort (see warmUpIo). */
async function rehearseClose(o: IoWarmUpOptions, device: Device): Promise<void> {
  const [x, y] = TunDevice.pair(o.mtu, o.tunOffload);
  startTunReader(x, o.mtu, { encryptBatch: () => {} });
  await x.close();
  await y.close();
  const port = new WireGuardPort({ device, mtu: MAX_PACKET, sink: { writeBatch: () => 0 }, openUdp: loopback });
  try {
    await port.bind(0);
  } finally {
    await port.close();
  }
}

/** x gets a key, its peer y (at 127.0.0.1:port) and y's tunnel addresses (last byte `yHost`), as `wg set` would. */
function configure(x: Device, y: Device, port: number, yHost: number): void {
  if (x.publicKey === null) x.setPrivateKey(randomKey(x));
  if (y.publicKey === null) y.setPrivateKey(randomKey(y));
  const text =
    `private_key=${formatHexKey(x.privateKey)}\n` +
    `public_key=${formatHexKey(y.publicKey)}\n` +
    `endpoint=127.0.0.1:${port}\n` +
    `allowed_ip=10.255.0.${yHost}/32\n` +
    `allowed_ip=fd00::${yHost}/128\n`;
  x.applyUapiPlan(planSet(parseSet(text)), Date.now());
}

function randomKey(d: Device): Uint8Array {
  const k = new Uint8Array(32);
  d.backend.randomFill(k);
  return k;
}

/** Length of the packets to no peer (writeNoRoute). */
const NO_ROUTE_LEN = 56;

/** A packet of NO_ROUTE_LEN bytes from host 1 to a multicast group (v = 4: 224.0.0.22, 6: ff02::2) no peer routes. */
function writeNoRoute(buf: Uint8Array, off: number, v: number): void {
  writePacket(buf, off, v, 1, 2, NO_ROUTE_LEN);
  if (v === 4) buf.set([224, 0, 0, 22], off + 16);
  else {
    buf.fill(0, off + 24, off + 40);
    buf[off + 24] = 0xff;
    buf[off + 25] = 0x02;
    buf[off + 39] = 2;
  }
}

/** An ICMP (v = 4) or ICMPv6 (v = 6) echo request of `len` bytes from host 1 to host 2 of the warm-up net. */
function writeEcho(buf: Uint8Array, off: number, v: number, len: number): void {
  writePacket(buf, off, v, 1, 2, len);
  buf[off + (v === 4 ? 20 : 40)] = v === 4 ? 8 : 128;
}
