/**
 * The gateway's devices and sockets, opened on the injected Devices (pipelines/devices.ts: the
 * real host by default, a memory host in the simulation): the local TUN and its link state
 * (opened down, IPv6 quieted before the link comes up, then its addresses and routes), the
 * Geneve port towards the nodes, the WireGuard port towards the peers, the TUN reader; the TUN's
 * routes and in-tunnel addresses kept in sync; and closing everything again (also after a
 * failed start: whatever was opened is closed).
 *
 * Headroom/tailroom: every input leaves ≥ 128 bytes in front of each packet and ≥ 64 after it,
 * enough for the Geneve header (+ options + inner Ethernet), the WireGuard header (16) and tag
 * and padding (≤ 31), and an ICMP error header (28/48) written in front.
 */
import type { GatewayConfig } from '../control/config.js';
import type { TunnelPlan } from '../control/tunnel-address.js';
import type { GeneveTunnelTable } from '../geneve/table.js';
import type { PacketDevice } from '../io/device.js';
import { MAX_PACKET } from '../io/sizes.js';
import type { LinkState } from '../kernel/link-state.js';
import { withNetnsAsync } from '../kernel/netns.js';
import { systemDevices, type Devices } from '../pipelines/devices.js';
import { SocketDevices, type HostLaneUdpTimeouts } from '../pipelines/socket-devices.js';
import { HostLaneDevice } from '../pipelines/host-lane.js';
import { TunPermissionError, TunUnavailableError } from '../io/tun-errors.js';
import { FabricTunWriter, startTunReader } from '../pipelines/fabric-offload.js';
import { GenevePort } from '../pipelines/geneve-port.js';
import type { GeneveSink } from '../pipelines/geneve-port-types.js';
import type { SegmentConsumer, TunSegmenter } from '../pipelines/tun-offload.js';
import { DEFAULT_WARMUP_MS, warmUpWireGuard } from '../pipelines/wireguard-warmup.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import type { InnerSink } from '../pipelines/wireguard-port-types.js';
import type { Device } from '../wireguard/device.js';
import { hostCidr } from './config-values.js';

const HEADROOM = 128;
const TAILROOM = 64;

/** The gateway's options about its devices and sockets (part of GatewayOptions). */
export interface GatewayIoOptions {
  /** Start-up warm-up budget of the WireGuard path, ms (wireguard-warmup.ts); 0 off. Default DEFAULT_WARMUP_MS. */
  readonly warmUpMs?: number;
  /** Create the TUN, sockets and routes inside this network namespace (tests; needs the native addon). */
  readonly netns?: string;
  /** Name of the local TUN device. Default: wireguard.interfaceName (Liqo's "liqo-tunnel"). */
  readonly tunName?: string;
  /** Packets per batch on every input. Default 64. */
  readonly batchSize?: number;
  /** Use TUN TSO/USO and UDP GSO/GRO on the Geneve side where the kernel grants them (default true). */
  readonly offload?: boolean;
  /** UDP socket buffers (bytes). Default 8 MiB. */
  readonly socketBuffer?: number;
  /** Wall-clock milliseconds. Default Date.now. */
  readonly clock?: () => number;
  /** Unexpected I/O errors and non-fatal set-up problems (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
  /** The TUN, sockets and link state to open (default: the real host's; a simulation's memory host). */
  readonly devices?: Devices;
  /**
   * The host lane (packets for the gateway itself and routes out of its own interface): `tun`
   * (default) the local TUN and the host's kernel; `sockets` in process, no TUN, no capability
   * (pipelines/host-lane.ts); `auto` the TUN, and `sockets` when /dev/net/tun cannot be opened
   * or the process may not create a TUN.
   */
  readonly hostLane?: HostLaneChoice;
  /** The in-process host lane's UDP idle timeouts (default: the kernel's UDP conntrack, router/host-flows.ts). */
  readonly hostLaneUdp?: HostLaneUdpTimeouts;
}

export type HostLaneChoice = 'tun' | 'sockets' | 'auto';

/** What the gateway runs its host lane on, and why (start log, `weft show`). */
export interface HostLaneInfo {
  readonly mode: 'tun' | 'sockets';
  /** Why sockets: the choice, or the TUN failure that made `auto` fall back (null with a TUN). */
  readonly reason: string | null;
}

export class GatewayIo {
  tun: PacketDevice | null = null;
  tunWriter: FabricTunWriter | null = null;
  kernel: LinkState | null = null;
  geneve: GenevePort | null = null;
  wg: WireGuardPort | null = null;
  /** One WireGuard port per tunnel (Liqo's spec.endpoint.ports); wgs[0] is `wg`. */
  wgs: WireGuardPort[] = [];
  segmenter: TunSegmenter | null = null;
  /** Tunnel addresses on the TUN and routes via it (kernel), as last synced. */
  private readonly tunnelAddrsOnTun = new Set<string>();
  private devices: Devices;
  hostLane: HostLaneInfo = { mode: 'tun', reason: null };
  private readonly onError: (what: string, err: unknown) => void;

  constructor(private readonly o: GatewayIoOptions) {
    this.devices = o.devices ?? systemDevices;
    this.onError = o.onError ?? (() => {});
  }

  /** Opens the TUN down, its writer (for up to `writeCapacity` packets a call) and link state; IPv6 quieted, then up. */
  async openTun(c: GatewayConfig, writeCapacity: number): Promise<{ tun: PacketDevice; kernel: LinkState }> {
    const opts = {
      name: this.o.tunName ?? c.wireguard.interfaceName,
      mtu: c.wireguard.mtu,
      netns: this.o.netns,
      offload: this.o.offload ?? true,
      up: false,
    };
    const choice = this.o.hostLane ?? 'tun';
    let tun: PacketDevice;
    if (choice === 'sockets') {
      this.devices = new SocketDevices(this.devices, this.o.hostLaneUdp);
      this.hostLane = { mode: 'sockets', reason: 'chosen (--host-lane=sockets)' };
      tun = this.devices.openTun(opts);
    } else {
      try {
        tun = this.devices.openTun(opts);
      } catch (e) {
        if (choice !== 'auto' || !(e instanceof TunUnavailableError || e instanceof TunPermissionError)) throw e;
        this.devices = new SocketDevices(this.devices, this.o.hostLaneUdp);
        this.hostLane = { mode: 'sockets', reason: `no TUN: ${e.message}` };
        tun = this.devices.openTun(opts);
      }
    }
    this.tun = tun;
    this.tunWriter = new FabricTunWriter(tun, writeCapacity);
    const kernel = (this.kernel = this.devices.linkState(tun.name, this.o.netns));
    const quiet = await kernel.quietIpv6();
    if (quiet !== null) this.onError('turning IPv6 off on the TUN', quiet);
    await kernel.linkUp();
    return { tun, kernel };
  }

  /** The in-process host lane, when the gateway runs without a TUN. */
  get lane(): HostLaneDevice | null {
    return this.tun instanceof HostLaneDevice ? this.tun : null;
  }

  /**
   * Binds the Geneve socket(s) (config.geneve) and the WireGuard ones: tunnel i's device
   * `devices[i]` on wireguard.listenPorts[i] (tunnel 0: listenPort; a tunnel without a listen
   * port, a client's further tunnels, on a port the kernel picks).
   */
  async openPorts(
    c: GatewayConfig,
    table: GeneveTunnelTable,
    devices: readonly Device[],
    geneveSink: GeneveSink,
    wgSink: InnerSink,
  ): Promise<{ geneve: GenevePort; wg: WireGuardPort; wgs: WireGuardPort[] }> {
    const device = devices[0]!;
    const o = this.o;
    const batch = o.batchSize ?? 64;
    const openUdp = this.devices.openUdp.bind(this.devices);
    const clock = o.clock ?? Date.now;
    const geneve = (this.geneve = await GenevePort.open({
      table,
      port: c.geneve.port,
      address: c.geneve.listenAddress,
      batchSize: batch,
      rxHeadroom: HEADROOM,
      rxTailroom: TAILROOM,
      clock,
      onError: this.onError,
      offload: o.offload ?? true,
      rxCoalesceReservation: this.tunWriter!.reservation,
      rxCoalesceFlows: this.tunWriter!.maxFlows,
      ...(o.netns === undefined ? {} : { netns: o.netns }),
      ...(o.socketBuffer === undefined ? {} : { socketBuffer: o.socketBuffer }),
      openUdp,
      sink: geneveSink,
    }));
    for (const d of devices) {
      this.wgs.push(
        new WireGuardPort({
          device: d,
          mtu: MAX_PACKET,
          batchSize: batch,
          rxHeadroom: HEADROOM,
          rxTailroom: TAILROOM,
          clock,
          onError: this.onError,
          ...(o.socketBuffer === undefined ? {} : { socketBuffer: o.socketBuffer }),
          openUdp,
          sink: wgSink,
        }),
      );
    }
    const wg = (this.wg = this.wgs[0]!);
    // The WireGuard data path runs optimized from the first packet (WEFT_WARMUP_MS, 0 = off).
    // After the real port exists: V8 has then seen both ports' sinks before it optimizes.
    await warmUpWireGuard({
      backend: device.backend,
      mtu: c.wireguard.mtu,
      budgetMs: o.warmUpMs ?? DEFAULT_WARMUP_MS,
      overlappingAllowedIps: device.overlappingAllowedIps,
    });
    await this.bindWireGuard(c.wireguard.listenPort);
    for (let i = 1; i < this.wgs.length; i++) await this.bindWireGuard(c.wireguard.listenPorts?.[i] ?? 0, i);
    return { geneve, wg, wgs: this.wgs };
  }

  /** (Re)binds tunnel `tunnel`'s WireGuard sockets (inside the namespace, if any). */
  bindWireGuard(port: number, tunnel = 0): Promise<number> {
    return withNetnsAsync(this.o.netns, () => this.wgs[tunnel]!.bind(port));
  }

  /** Starts reading the TUN into `consume` (super-packets cut to `mtu`). */
  startTunReader(mtu: number, consume: SegmentConsumer): void {
    this.segmenter = startTunReader(
      this.tun!,
      { mtu, headroom: HEADROOM, tailroom: TAILROOM, batchSize: this.o.batchSize ?? 64 },
      consume,
    );
  }

  /**
   * Kernel state of the local TUN: routes `want` plus each peer's tunnel address (source: our
   * tunnel address towards it, which is added to the TUN first: the kernel refuses a source it
   * does not own) and the gateway's own addresses; stale tunnel addresses are removed last.
   */
  async syncRoutes(want: Set<string>, plan: TunnelPlan, localAddrs: ReadonlySet<string>): Promise<void> {
    const kernel = this.kernel!;
    const tunnelLocals = new Set(plan.peers.map((t) => t.local));
    for (const a of tunnelLocals) {
      await kernel.addAddress(a);
      this.tunnelAddrsOnTun.add(a);
    }
    for (const t of plan.peers) {
      const cidr = hostCidr(t.remote);
      await kernel.addRoute(cidr, t.local);
      want.add(cidr);
    }
    await kernel.syncRoutes(want);
    for (const a of localAddrs) await kernel.addAddress(a);
    for (const a of [...this.tunnelAddrsOnTun]) {
      if (tunnelLocals.has(a) || localAddrs.has(a)) continue;
      await kernel.removeAddress(a);
      this.tunnelAddrsOnTun.delete(a);
    }
  }

  /** Stops reading, removes the routes/addresses added, closes sockets and the TUN; throws the kernel's failure last. */
  async close(): Promise<void> {
    this.tun?.stop();
    let err: unknown;
    try {
      await this.kernel?.clear();
    } catch (e) {
      err = e;
    }
    for (const w of this.wgs) await w.close();
    await this.geneve?.close();
    await this.tun?.close();
    if (err !== undefined) throw err;
  }
}
