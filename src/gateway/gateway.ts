/**
 * The Liqo gateway shell: owns the sockets and the local TUN, applies configuration, reports
 * statistics. Every routing decision is the Router's (src/router/router.ts, I/O-free); every
 * translation the compiled rules' (yaml-rules.ts in YAML mode, Liqo's objects in Kubernetes mode):
 *
 *   nodes ══Geneve 6091══ GenevePort ─┐                         ┌─ WireGuardPort ══UDP 51840══ peers
 *                                     ├─ Router (hooks, rules,──┤
 *   gateway host ─ local TUN ─────────┘   TTL, lanes)           └─ (and back, mirrored)
 *
 * Each input (Geneve receive, TUN read, WireGuard receive) hands its whole batch to the router,
 * which sorts the packets into lanes; the shell then flushes each lane once: one sendmmsg for
 * Geneve, one encryptBatch (→ sendmmsg) for WireGuard with the peer the router chose for each
 * packet, one writeBatch for the TUN. With offloads (default; `offload: false` turns them off,
 * per feature where the kernel refuses): Geneve with UDP GRO in and GSO runs out, TUN reads of
 * super-packets cut to the MTU, TUN writes coalesced per flow (fabric-offload.ts). The WireGuard
 * side hands the router the peer that decrypted each packet, so two peers whose real CIDRs
 * overlap can share this gateway (their allowed IPs may overlap: the Device runs with
 * overlappingAllowedIps).
 *
 * In-tunnel addresses (Liqo's 169.254.18.1/.2, src/control/tunnel-address.ts), for the
 * connection check: the local TUN carries ours (/32) and the kernel routes each peer's via the
 * TUN; each peer's is in its allowed IPs; the router forwards them without NAT or TTL handling.
 *
 * Devices, sockets and the TUN's kernel state: gateway-io.ts; peers and in-tunnel addresses:
 * gateway-peers.ts; the configuration in force and its live changes: gateway-apply.ts; the stats
 * snapshot: gateway-stats.ts. Here: the inputs, lanes, housekeeping.
 */
import type { ConfigOp } from '../control/diff.js';
import type { GatewayConfig } from '../control/config.js';
import type { PeerStatsSample, StatsSource } from '../control/metrics.js';
import type { TunnelPlan } from '../control/tunnel-address.js';
import type { CryptoBackend } from '../crypto/backend.js';
import { getCryptoBackend } from '../crypto/select.js';
import { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import type { PacketDevice } from '../io/device.js';
import type { KernelOwner } from '../kernel/reconcile.js';
import { FabricTunWriter, tunReaderMaxCount } from '../pipelines/fabric-offload.js';
import type { GenevePort } from '../pipelines/geneve-port.js';
import { GENEVE_OFFLOAD_DELIVER_MAX } from '../pipelines/geneve-port-types.js';
import type { WireGuardPort } from '../pipelines/wireguard-port.js';
import type { PeerTable } from '../router/peer-table.js';
import { RouterLanes } from '../router/lanes.js';
import { Router } from '../router/router.js';
import type { RulesAttachment } from '../rules/attach.js';
import { Device } from '../wireguard/device.js';
import type { Peer } from '../wireguard/peer.js';
import { keyBytes } from './config-values.js';
import { GatewayLiveConfig, peerTableOf } from './gateway-apply.js';
import { GatewayIo, type GatewayIoOptions, type HostLaneInfo } from './gateway-io.js';
import type { HostLaneDevice } from '../pipelines/host-lane.js';
import { GatewayPeers } from './gateway-peers.js';
import { collectDrops, gatewayStats, type GatewayStats } from './gateway-stats.js';
import { YamlRules } from './yaml-rules.js';
import { PacketList } from '../packet/packet-list.js';
import { tunnelCount } from '../control/tunnel-address.js';

/** Tunnels (WireGuard devices and ports) a configuration needs: the most any peer has, and the listen ports. */
export function gatewayTunnels(c: GatewayConfig): number {
  let n = c.wireguard.listenPorts?.length ?? 1;
  for (const p of c.peers) n = Math.max(n, tunnelCount(c.wireguard, p));
  return n;
}

/** The gateway's options; those about its devices and sockets are GatewayIoOptions (gateway-io.ts). */
export interface GatewayOptions extends GatewayIoOptions {
  /** The gateway's own internal address. Default: the first tunnel's localInternalAddress, else the internal CIDR's first host. */
  readonly internalAddress?: string;
  /** Kernel routes via the local TUN for pod routes' CIDRs (the gateway host reaches local pods through Geneve). Default true. */
  readonly routePodCIDRs?: boolean;
  /** Crypto backend (default: config.wireguard.cryptoBackend through getCryptoBackend). */
  readonly backend?: CryptoBackend;
  /**
   * Carry the in-tunnel addresses (tunnel-address.ts: TUN addresses, kernel routes, allowed IPs)
   * so that Liqo's connection check runs through the tunnel. Default true.
   */
  readonly tunnelAddresses?: boolean;
  /** Rate of generated ICMP Time Exceeded errors (per second, burst). Default 100/20 (the router's). */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
}

export class Gateway implements StatsSource {
  readonly table = new GeneveTunnelTable();
  readonly forwarded = { toWireguard: 0, toGeneve: 0, toTun: 0 };
  readonly routed = { fromNodes: 0, fromHost: 0, fromPeers: 0 };
  /**
   * False until open() has every port: Geneve receives (and the WireGuard warm-up runs) before the
   * WireGuard ports exist, and a restarted gateway's nodes are already sending. Packets meanwhile
   * are counted drops (gateway_starting).
   */
  private portsReady = false;
  private startingDrops = 0;
  readonly device: Device;
  /** One WireGuard device per tunnel (Liqo's spec.endpoint.ports, same keys); [0] is `device`. */
  readonly devices: readonly Device[];
  readonly router: Router<Peer, GeneveTunnel>;

  private readonly live: GatewayLiveConfig;
  private readonly io: GatewayIo;
  private geneve!: GenevePort;
  private tun!: PacketDevice;
  private tunWriter!: FabricTunWriter;
  private wg!: WireGuardPort;
  private wgs: WireGuardPort[] = [];
  /** Each tunnel peer's port (several tunnels: the flush sends each packet through its tunnel's). */
  private readonly portOf = new Map<Peer, number>();
  /** Several tunnels: the peer lane split per port (preallocated). */
  private split: PacketList<Peer>[] = [];
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly peerSet: GatewayPeers;
  private readonly lanesGeneve: RouterLanes<Peer, GeneveTunnel>;
  private readonly lanesTun: RouterLanes<Peer, GeneveTunnel>;
  private readonly lanesWg: RouterLanes<Peer, GeneveTunnel>;
  private housekeeping: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly yaml: YamlRules;

  private constructor(
    config: GatewayConfig,
    private readonly opts: GatewayOptions,
    backend: CryptoBackend,
  ) {
    this.clock = opts.clock ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    this.io = new GatewayIo(opts);
    const cap = opts.batchSize ?? 64;
    const off = opts.offload ?? true;
    this.lanesGeneve = new RouterLanes(off ? Math.max(cap, GENEVE_OFFLOAD_DELIVER_MAX) : cap);
    this.lanesTun = new RouterLanes(off ? tunReaderMaxCount(cap) : cap);
    this.lanesWg = new RouterLanes(cap);
    // Peers may share real CIDRs (each remapped differently): the router names the peer of
    // every packet, so allowed IPs only check what a peer may send.
    const n = gatewayTunnels(config);
    const devices: Device[] = [];
    for (let i = 0; i < n; i++) {
      const d = new Device({ backend, mtu: config.wireguard.mtu, overlappingAllowedIps: true });
      d.setPrivateKey(keyBytes(config.wireguard.privateKey));
      devices.push(d);
    }
    this.devices = devices;
    this.device = devices[0]!;
    // Sized to the largest lane: one input batch's peer lane is split at most whole into one port.
    const laneMax = Math.max(this.lanesGeneve.capacity, this.lanesTun.capacity, this.lanesWg.capacity);
    if (n > 1) for (let i = 0; i < n; i++) this.split.push(new PacketList<Peer>(laneMax));

    this.router = new Router({
      peers: peerTableOf(config, opts.internalAddress),
      nodes: this.table,
      ...(opts.icmpRatePerSecond === undefined ? {} : { icmpRatePerSecond: opts.icmpRatePerSecond }),
      ...(opts.icmpBurst === undefined ? {} : { icmpBurst: opts.icmpBurst }),
    });
    this.peerSet = new GatewayPeers(this.devices, this.router, {
      clock: this.clock,
      onError: this.onError,
      tunnelAddresses: opts.tunnelAddresses ?? true,
      mtu: () => this.live.config.wireguard.mtu,
      wireguard: () => this.live.config.wireguard,
    });
    this.yaml = new YamlRules(this.router, config.wireguard.mtu);
    this.live = new GatewayLiveConfig(config, {
      table: this.table,
      router: this.router,
      devices: this.devices,
      peers: this.peerSet,
      io: this.io,
      yaml: this.yaml,
      clock: this.clock,
      internalAddress: opts.internalAddress,
      routePodCIDRs: opts.routePodCIDRs ?? true,
      setTunMtu: (mtu) => this.tun?.setMtu(mtu),
    });
  }

  /** The rules compiled from the configuration (yaml-rules.ts), at the hooks unless Liqo mode detached them. */
  get rules(): RulesAttachment {
    return this.yaml.attachment;
  }

  /** Liqo mode: its FirewallConfigurations replace the configuration's rules at the hooks. */
  detachConfigRules(): void {
    this.yaml.detach();
  }

  /** The peer table in force (replaced when cluster CIDRs or the MTU change). */
  get peerTable(): PeerTable {
    return this.router.peerTable;
  }

  /** Drops of the routing stage by RouterDrop. */
  get dropCounts(): Float64Array {
    return this.router.drops;
  }

  /**
   * Starts the gateway: Geneve socket (config.geneve.port), local TUN with the gateway's
   * internal address and routes (peers' remapped CIDRs, the internal CIDR, pod routes), NAT,
   * WireGuard on config.wireguard.listenPort with every peer. Throws typed errors naming what
   * to fix (TunError…, UdpError, GenevePortError, GeneveConfigError, NatConfigError,
   * RouteCommandError, WireGuardConfigError); whatever was opened is closed again on failure.
   */
  static async start(config: GatewayConfig, opts: GatewayOptions = {}): Promise<Gateway> {
    const backend = opts.backend ?? getCryptoBackend(config.wireguard.cryptoBackend);
    const gw = new Gateway(config, opts, backend);
    try {
      await gw.open();
    } catch (e) {
      await gw.stop().catch(() => {});
      throw e;
    }
    return gw;
  }

  private async open(): Promise<void> {
    const c = this.live.config;
    await this.live.load();

    // Local TUN: the gateway host's interface into the fabric.
    const { tun, kernel } = await this.io.openTun(c, this.lanesGeneve.capacity);
    this.tun = tun;
    this.tunWriter = this.io.tunWriter!;
    for (const a of this.live.localAddrs) await kernel.addAddress(a);
    await this.live.syncKernelRoutes();

    const { geneve, wg, wgs } = await this.io.openPorts(
      c,
      this.table,
      this.devices,
      {
        deliverBatch: (buf, offs, lens, t, n, areaOff, areaLen) =>
          this.onGenevePackets(buf, offs, lens, t, n, areaOff, areaLen),
      },
      { writeBatch: (buf, offs, lens, peers, n) => this.onWireguardPackets(buf, offs, lens, peers, n) },
    );
    this.geneve = geneve;
    this.wg = wg;
    this.wgs = wgs;
    this.portsReady = true;
    this.io.startTunReader(c.wireguard.mtu, (buf, offs, lens, n) => this.onTunPackets(buf, offs, lens, n));
    this.housekeeping = setInterval(() => this.tick(), 1000);
    this.housekeeping.unref();
    for (const w of this.wgs) w.poll();
    // A gateway starts forwarding as the (new) active: handshake at once with every peer whose
    // endpoint is known, rather than after the peer's Rekey-Timeout.
    for (const w of this.wgs) w.initiateIdlePeers();
  }

  // =========================================================================================
  // Inputs: the router sorts each batch into lanes, flushed once per batch.

  private onGenevePackets(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    tunnels: readonly GeneveTunnel[],
    n: number,
    areaOff: number,
    areaLen: number,
  ): void {
    if (!this.portsReady) {
      this.startingDrops += n;
      return;
    }
    this.routed.fromNodes += n;
    if (this.peerSet.waiting > 0) this.peerSet.refreshSpread();
    this.router.fromNodes(buf, offs, lens, n, this.clock(), this.lanesGeneve, tunnels);
    this.flush(buf, this.lanesGeneve, areaOff, areaLen);
  }

  private onTunPackets(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void {
    this.routed.fromHost += n;
    if (this.peerSet.waiting > 0) this.peerSet.refreshSpread();
    this.router.fromHost(buf, offs, lens, n, this.clock(), this.lanesTun);
    this.flush(buf, this.lanesTun, 0, 0);
  }

  private onWireguardPackets(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    peers: readonly Peer[],
    n: number,
  ): number {
    if (!this.portsReady) {
      this.startingDrops += n;
      return n;
    }
    this.routed.fromPeers += n;
    if (this.peerSet.waiting > 0) this.peerSet.refreshSpread();
    this.router.fromPeers(buf, offs, lens, peers, n, this.clock(), this.lanesWg);
    this.flush(buf, this.lanesWg, 0, 0);
    return n;
  }

  /** buf[areaOff, +areaLen): scratch for coalescing the packets to the TUN (0: none). */
  private flush(buf: Uint8Array, L: RouterLanes<Peer, GeneveTunnel>, areaOff: number, areaLen: number): void {
    const g = L.toNodes;
    if (g.count > 0) {
      this.forwarded.toGeneve += g.count;
      this.geneve.sendBatchVia(buf, g.offs, g.lens, g.tags, g.count);
    }
    const w = L.toPeers;
    if (w.count > 0) {
      this.forwarded.toWireguard += w.count;
      if (this.wgs.length <= 1) this.wg.encryptBatch(buf, w.offs, w.lens, w.count, w.tags as Peer[]);
      else this.sendSplit(buf, w);
    }
    const t = L.toHost;
    if (t.count > 0) {
      this.forwarded.toTun += t.count;
      this.tunWriter.write(buf, t.offs, t.lens, t.count, areaOff, areaLen);
    }
    L.clear();
  }

  /** Several tunnels: each packet through the port of the tunnel peer the router chose. */
  private sendSplit(buf: Uint8Array, w: PacketList<Peer>): void {
    const split = this.split;
    const portOf = this.portOf;
    let lastPeer: Peer | undefined;
    let lastPort = 0;
    for (let i = 0; i < w.count; i++) {
      const p = w.tags[i]!;
      if (p !== lastPeer) {
        lastPeer = p;
        let k = portOf.get(p);
        if (k === undefined) {
          k = this.tunnelOfPeer(p);
          portOf.set(p, k);
        }
        lastPort = k;
      }
      split[lastPort]!.push(w.offs[i]!, w.lens[i]!, p);
    }
    for (let k = 0; k < split.length; k++) {
      const l = split[k]!;
      if (l.count === 0) continue;
      this.wgs[k]!.encryptBatch(buf, l.offs, l.lens, l.count, l.tags as Peer[]);
      l.clear();
    }
  }

  /** The tunnel whose device holds WireGuard peer `p` (configuration changes clear the cache). */
  private tunnelOfPeer(p: Peer): number {
    for (const s of this.peerSet.byName.values()) {
      const i = s.tunnels.indexOf(p);
      if (i >= 0) return i;
    }
    return 0;
  }

  // =========================================================================================
  // Configuration

  /** The Geneve tunnel to each node in force (Liqo mode names their interfaces). */
  nodeTunnels(): { nodeName: string; tunnel: GeneveTunnel }[] {
    return this.live.nodeTunnels();
  }

  /** The in-tunnel addresses in force: one entry per peer that has them, and the peers left out. */
  tunnelAddresses(): TunnelPlan {
    return this.peerSet.plan;
  }

  /**
   * The connection check of tunnel `tunnel` to peer `name` says `value` (conncheck.ts): 'Error'
   * takes the tunnel out of the peer's flow spread, any other value puts it back.
   */
  setTunnelCheck(name: string, tunnel: number, value: string, latencyMs: number, peerSpreads = false): void {
    this.peerSet.setTunnelCheck(name, tunnel, value, latencyMs, peerSpreads);
  }

  /** Whether WireGuard knows where to send to peer `name` (configured, or learned from its handshake). */
  hasEndpoint(name: string, tunnel = 0): boolean {
    return (this.peerSet.byName.get(name)?.tunnels[tunnel]?.endpoint ?? null) !== null;
  }

  /** The configuration in force. */
  get current(): GatewayConfig {
    return this.live.config;
  }

  /**
   * Applies the control layer's diff ops (ConfigReloader's ConfigApplier; what is live and what
   * throws GatewayApplyError before any change: gateway-apply.ts), then polls WireGuard.
   */
  async apply(ops: readonly ConfigOp[], next?: GatewayConfig): Promise<void> {
    this.portOf.clear();
    try {
      await this.live.apply(ops, next);
    } finally {
      this.portOf.clear();
    }
    for (const w of this.wgs) w.poll();
  }

  // =========================================================================================
  // Housekeeping and statistics

  private tick(): void {
    if (this.stopped) return;
    this.yaml.expire(this.clock());
    this.peerSet.countHandshakes();
    this.peerSet.refreshSpread();
  }

  /** StatsSource: one sample per peer. `connected` = a handshake completed within the last 180 s. */
  peers(): readonly PeerStatsSample[] {
    return this.peerSet.samples(this.clock());
  }

  /** StatsSource: drops by reason from every stage (non-zero only), prefixed by stage. */
  drops(): Readonly<Record<string, number>> {
    const d = collectDrops(this.router, this.peerTable, this.devices, this.geneve, this.wgs, this.tun, this.io.lane);
    if (this.startingDrops > 0) d['gateway_starting'] = this.startingDrops;
    return d;
  }

  /** StatsSource: conntrack entries (the configuration's rules' connections; 0 when Liqo mode detached them). */
  natEntries(): number {
    return this.yaml.active ? this.yaml.attachment.runtime.flows.size : 0;
  }

  /** StatsSource: bounded queues' current depths. */
  queueDepths(): Readonly<Record<string, number>> {
    return {
      wg_handshakes: this.wgs.reduce((n, w) => n + w.handshakeQueueDepth, 0),
      wg_outbox: this.devices.reduce((n, d) => n + d.outgoingCount, 0),
      wg_buffers: this.devices.reduce((n, d) => n + d.buffersInUse, 0),
      geneve_arp_held: this.geneve?.engine.heldPackets ?? 0,
      ...(this.io.lane === null ? {} : { host_lane_queued: this.io.lane.queued }),
    };
  }

  /** A full snapshot for `weft show` / logs (allocates). */
  stats(): GatewayStats {
    return gatewayStats({
      peers: this.peerSet,
      now: this.clock(),
      table: this.table,
      io: this.io,
      router: this.router,
      rules: this.yaml.active ? this.yaml.attachment.runtime : null,
      drops: { ...this.drops() },
      queues: { ...this.queueDepths() },
      forwarded: this.forwarded,
      routed: this.routed,
      interfaceName: this.live.config.wireguard.interfaceName,
    });
  }

  /** What the host lane runs on (the local TUN, or sockets in process) and why. */
  get hostLaneInfo(): HostLaneInfo {
    return this.io.hostLane;
  }

  /** The in-process host lane (null with a TUN): local UDP endpoints (bindUdp), handlers (register). */
  get hostLane(): HostLaneDevice | null {
    return this.io.lane;
  }

  /** Ports actually bound (useful with port 0 in tests). */
  get ports(): { geneve: number; wireguard: number } {
    return { geneve: this.geneve?.port ?? -1, wireguard: this.wg?.port ?? -1 };
  }

  /** The TUN's kernel state (link, addresses, routes) for ports/reconcile.ts. */
  kernelOwner(): KernelOwner {
    return this.io.kernel!;
  }

  /** Stops forwarding, removes the routes/addresses it added, closes sockets and the TUN. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.housekeeping !== null) clearInterval(this.housekeeping);
    await this.io.close();
  }
}
