/**
 * The Liqo gateway shell: owns the sockets and the local TUN, applies configuration, reports
 * statistics. Every routing decision is the Router's (src/router/router.ts, I/O-free); the
 * translation the compiled rules' (yaml-rules.ts; with `compiledRules: false` the derived NAT's):
 *
 *   nodes ══Geneve 6091══ GenevePort ─┐                         ┌─ WireGuardPort ══UDP 51840══ peers
 *                                     ├─ Router (hooks, NAT, ───┤
 *   gateway host ─ local TUN ─────────┘   TTL, lanes)           └─ (and back, mirrored)
 *
 * Each input (Geneve receive, TUN read, WireGuard receive) hands its whole batch to the router,
 * which sorts the packets into lanes; the shell then flushes each lane once: one sendmmsg for
 * Geneve, one encryptBatch (→ sendmmsg) for WireGuard with the peer the router chose for each
 * packet, one writeBatch for the TUN. With offloads (default; `offload: false` turns them off,
 * per feature where the kernel refuses): Geneve with UDP GRO in and GSO runs out, TUN reads of
 * super-packets cut to the MTU, TUN writes coalesced per flow (fabric-offload.ts). The WireGuard side hands the router the peer that
 * decrypted each packet, so two peers whose real CIDRs overlap can share this gateway (their
 * allowed IPs may overlap: the Device runs with overlappingAllowedIps).
 * Headroom/tailroom: every input leaves ≥ 128 bytes in front of each packet and ≥ 48 after it,
 * enough for the Geneve header (+ options + inner Ethernet), the WireGuard header (16) and tag
 * and padding (≤ 31), and an ICMP error header (28/48) written in front.
 *
 * In-tunnel addresses (Liqo's 169.254.18.1/.2, src/control/tunnel-address.ts), for the
 * connection check: the local TUN carries ours (/32) and the kernel routes each peer's via the
 * TUN; each peer's is in its allowed IPs; the router forwards them without NAT or TTL handling.
 *
 * Configuration types come from src/control as types only; kernel routes/addresses through
 * kernel/iproute.ts (typed RouteCommandError).
 */
import type { ConfigOp, PeerChanges, TunnelChanges } from '../control/diff.js';
import type { GatewayConfig, GeneveTunnelConfig, PeerConfig, PodRouteConfig } from '../control/config.js';
import type { PeerStatsSample, StatsSource } from '../control/metrics.js';
import { planTunnelAddresses, type TunnelPlan } from '../control/tunnel-address.js';
import type { CryptoBackend } from '../crypto/backend.js';
import { getCryptoBackend } from '../crypto/select.js';
import { GeneveTunnelTable, type GeneveTunnel } from '../geneve/table.js';
import { MAX_PACKET } from '../io/sizes.js';
import { TunDevice } from '../io/tun.js';
import { Nat, type NatPeer } from '../nat/nat.js';
import { formatAddress, parsePrefix } from '../packet/addr.js';
import {
  coalescerStats,
  fabricOffloads,
  FabricTunWriter,
  segmenterStats,
  startTunReader,
  tunReaderMaxCount,
} from '../pipelines/fabric-offload.js';
import { GENEVE_OFFLOAD_DELIVER_MAX, GenevePort } from '../pipelines/geneve-port.js';
import type { TunSegmenter } from '../pipelines/tun-offload.js';
import { KernelState } from '../kernel/iproute.js';
import { withNetnsAsync } from '../kernel/netns.js';
import { WireGuardPort } from '../pipelines/wireguard-port.js';
import { warmUpBudget, warmUpWireGuard } from '../pipelines/wireguard-warmup.js';
import { Router, RouterLanes, type RouterPeer } from '../router/router.js';
import { Device } from '../wireguard/device.js';
import type { Peer } from '../wireguard/peer.js';
import { collectDrops, natStatsWithRules, type GatewayStats } from './gateway-stats.js';
import { natConfigOf, natPeerOf, passthroughOf, peerTunnel, YamlRules } from './yaml-rules.js';
import type { RulesAttachment } from '../rules/attach.js';
import {
  applyMappingOps,
  definedOnly,
  firstHost,
  hostCidr,
  keyBytes,
  resolveEndpoint,
  tunnelOf,
  tunnelSpec,
} from './config-values.js';

export interface GatewayOptions {
  /** Create the TUN, sockets and routes inside this network namespace (tests; needs the native addon). */
  readonly netns?: string;
  /** Name of the local TUN device. Default: wireguard.interfaceName (Liqo's "liqo-tunnel"). */
  readonly tunName?: string;
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
  /** Packets per batch on every input. Default 64. */
  readonly batchSize?: number;
  /** Use TUN TSO/USO and UDP GSO/GRO on the Geneve side where the kernel grants them (default true). */
  readonly offload?: boolean;
  /** UDP socket buffers (bytes). Default 8 MiB. */
  readonly socketBuffer?: number;
  /** Rate of generated ICMP Time Exceeded errors (per second, burst). Default 100/20 (the router's). */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
  /** Translate with the configuration's rules (yaml-rules.ts; default); false: the derived NAT (src/nat). */
  readonly compiledRules?: boolean;
  /** Wall-clock milliseconds. Default Date.now. */
  readonly clock?: () => number;
  /** Unexpected I/O errors and non-fatal set-up problems (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
}

/** A configuration change the running gateway cannot apply live, or an inconsistent op. */
export class GatewayApplyError extends Error {
  override readonly name = 'GatewayApplyError';
}

export type { GatewayStats } from './gateway-stats.js';

const HEADROOM = 128;
const TAILROOM = 64;

interface PeerState {
  cfg: PeerConfig;
  wg: Peer;
  /** The router's view of the peer (its NAT handle); remade when the NAT peer is. */
  rp: RouterPeer<Peer>;
  handshakes: number;
  lastSeenHandshake: number;
  /** The peer's tunnel address in its allowed IPs (undefined: none). */
  tunnelRemote: string | undefined;
}

export class Gateway implements StatsSource {
  readonly table = new GeneveTunnelTable();
  readonly forwarded = { toWireguard: 0, toGeneve: 0, toTun: 0 };
  readonly routed = { fromNodes: 0, fromHost: 0, fromPeers: 0 };
  readonly device: Device;
  readonly router: Router<Peer, GeneveTunnel>;

  private config: GatewayConfig;
  private geneve!: GenevePort;
  private tun!: TunDevice;
  private tunWriter!: FabricTunWriter;
  private segmenter: TunSegmenter | null = null;
  private wg!: WireGuardPort;
  private kernel!: KernelState;
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly peersByName = new Map<string, PeerState>();
  /** The gateway's own addresses (on the local TUN; the first of a family sources ICMP errors). */
  private readonly localAddrs = new Set<string>();
  private tunnelPlan: TunnelPlan = { peers: [], skipped: [] };
  /** Tunnel addresses on the TUN and routes via it (kernel), as last synced. */
  private readonly tunnelAddrsOnTun = new Set<string>();
  private readonly tunnelsById = new Map<number, GeneveTunnelConfig>();
  private readonly podRoutes = new Map<string, PodRouteConfig>();
  private readonly lanesGeneve: RouterLanes<Peer, GeneveTunnel>;
  private readonly lanesTun: RouterLanes<Peer, GeneveTunnel>;
  private readonly lanesWg: RouterLanes<Peer, GeneveTunnel>;
  private housekeeping: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly yaml: YamlRules | null;

  private constructor(
    config: GatewayConfig,
    private readonly opts: GatewayOptions,
    backend: CryptoBackend,
  ) {
    this.config = config;
    this.clock = opts.clock ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    const cap = opts.batchSize ?? 64;
    const off = opts.offload ?? true;
    this.lanesGeneve = new RouterLanes(off ? Math.max(cap, GENEVE_OFFLOAD_DELIVER_MAX) : cap);
    this.lanesTun = new RouterLanes(off ? tunReaderMaxCount(cap) : cap);
    this.lanesWg = new RouterLanes(cap);
    // Peers may share real CIDRs (each remapped differently): the router names the peer of
    // every packet, so allowed IPs only check what a peer may send.
    this.device = new Device({ backend, mtu: config.wireguard.mtu, overlappingAllowedIps: true });
    this.device.setPrivateKey(keyBytes(config.wireguard.privateKey));
    this.router = new Router({
      nat: this.makeNat(config),
      nodes: this.table,
      ...(opts.icmpRatePerSecond === undefined ? {} : { icmpRatePerSecond: opts.icmpRatePerSecond }),
      ...(opts.icmpBurst === undefined ? {} : { icmpBurst: opts.icmpBurst }),
    });
    this.yaml = opts.compiledRules !== false ? new YamlRules(this.router, config.wireguard.mtu) : null;
  }

  /** Unless `compiledRules: false`: the rules compiled from the configuration (yaml-rules.ts), at the hooks unless Liqo mode detached them. */
  get rules(): RulesAttachment | null {
    return this.yaml?.attachment ?? null;
  }

  /** Liqo mode: its FirewallConfigurations replace the configuration's rules at the hooks. */
  detachConfigRules(): void {
    this.yaml?.detach();
  }

  private syncRules(): void {
    this.yaml?.sync(
      this.config,
      [...this.peersByName.values()].map((s) => s.cfg),
      this.internalAddress(this.config),
    );
  }

  /** The NAT in force (replaced when cluster CIDRs or the MTU change). */
  get nat(): Nat {
    return this.router.nat;
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
    const c = this.config;
    const opts = this.opts;
    const batch = opts.batchSize ?? 64;
    for (const t of c.geneve.tunnels) {
      this.table.add(tunnelSpec(t));
      this.tunnelsById.set(t.id, t);
    }
    for (const r of c.geneve.podRoutes) {
      this.table.addPodRoute(r.podCIDR, r.nodeInternalAddress);
      this.podRoutes.set(r.podCIDR, r);
    }
    const internal =
      opts.internalAddress ?? c.geneve.tunnels[0]?.localInternalAddress ?? firstHost(c.cluster.internalCIDR);
    this.addLocalAddress(internal);
    for (const t of c.geneve.tunnels) this.addLocalAddress(t.localInternalAddress);
    const now = this.clock();
    for (const p of c.peers) await this.addPeer(p, now);
    this.syncRules();
    this.planTunnel();

    // Local TUN: the gateway host's interface into the fabric.
    const mtu = c.wireguard.mtu;
    const offload = opts.offload ?? true;
    this.tun = TunDevice.open({ name: opts.tunName ?? c.wireguard.interfaceName, mtu, netns: opts.netns, offload });
    this.tunWriter = new FabricTunWriter(this.tun, this.lanesGeneve.capacity);
    this.kernel = new KernelState(this.tun.name, opts.netns);
    for (const a of this.localAddrs) await this.kernel.addAddress(a);
    await this.syncKernelRoutes();

    this.geneve = await GenevePort.open({
      table: this.table,
      port: c.geneve.port,
      address: c.geneve.listenAddress,
      batchSize: batch,
      rxHeadroom: HEADROOM,
      rxTailroom: TAILROOM,
      clock: this.clock,
      onError: this.onError,
      offload,
      rxCoalesceReservation: this.tunWriter.reservation,
      rxCoalesceFlows: this.tunWriter.maxFlows,
      ...(opts.netns === undefined ? {} : { netns: opts.netns }),
      ...(opts.socketBuffer === undefined ? {} : { socketBuffer: opts.socketBuffer }),
      sink: {
        deliverBatch: (buf, offs, lens, t, n, areaOff, areaLen) =>
          this.onGenevePackets(buf, offs, lens, t, n, areaOff, areaLen),
      },
    });
    this.wg = new WireGuardPort({
      device: this.device,
      mtu: MAX_PACKET,
      batchSize: batch,
      rxHeadroom: HEADROOM,
      rxTailroom: TAILROOM,
      clock: this.clock,
      onError: this.onError,
      ...(opts.socketBuffer === undefined ? {} : { socketBuffer: opts.socketBuffer }),
      sink: { writeBatch: (buf, offs, lens, peers, n) => this.onWireguardPackets(buf, offs, lens, peers, n) },
    });
    // The WireGuard data path runs optimized from the first packet (WEFT_WARMUP_MS, 0 = off).
    // After the real port exists: V8 has then seen both ports' sinks before it optimizes.
    await warmUpWireGuard({
      backend: this.device.backend,
      mtu: c.wireguard.mtu,
      budgetMs: warmUpBudget(process.env.WEFT_WARMUP_MS),
      overlappingAllowedIps: this.device.overlappingAllowedIps,
    });
    await withNetnsAsync(opts.netns, () => this.wg.bind(c.wireguard.listenPort));
    this.segmenter = startTunReader(
      this.tun,
      { mtu, headroom: HEADROOM, tailroom: TAILROOM, batchSize: batch },
      (buf, offs, lens, n) => this.onTunPackets(buf, offs, lens, n),
    );
    this.housekeeping = setInterval(() => this.tick(), 1000);
    this.housekeeping.unref();
    this.wg.poll();
    // A gateway starts forwarding as the (new) active: handshake at once with every peer whose
    // endpoint is known, rather than after the peer's Rekey-Timeout.
    this.wg.initiateIdlePeers();
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
    this.routed.fromNodes += n;
    this.router.fromNodes(buf, offs, lens, n, this.clock(), this.lanesGeneve, tunnels);
    this.flush(buf, this.lanesGeneve, areaOff, areaLen);
  }

  private onTunPackets(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void {
    this.routed.fromHost += n;
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
    this.routed.fromPeers += n;
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
      this.wg.encryptBatch(buf, w.offs, w.lens, w.count, w.tags as Peer[]);
    }
    const t = L.toHost;
    if (t.count > 0) {
      this.forwarded.toTun += t.count;
      this.tunWriter.write(buf, t.offs, t.lens, t.count, areaOff, areaLen);
    }
    L.clear();
  }

  // =========================================================================================
  // Configuration

  private internalAddress(c: GatewayConfig): string {
    return this.opts.internalAddress ?? c.geneve.tunnels[0]?.localInternalAddress ?? firstHost(c.cluster.internalCIDR);
  }

  /** The Router's Nat: passthrough (routing by remapped CIDR, PMTU); the rules translate. */
  private makeNat(c: GatewayConfig): Nat {
    return new Nat(
      this.opts.compiledRules !== false
        ? passthroughOf(c, this.internalAddress(c))
        : natConfigOf(c, this.internalAddress(c)),
    );
  }

  private addLocalAddress(addr: string): void {
    if (this.localAddrs.has(addr)) return;
    this.localAddrs.add(addr);
    this.router.setLocalAddresses([...this.localAddrs]);
  }

  private natPeerConfig(p: PeerConfig): Parameters<Nat['addPeer']>[0] {
    return natPeerOf(p, this.config.wireguard.mtu);
  }

  private async addPeer(p: PeerConfig, now: number): Promise<void> {
    const natPeer = this.nat.addPeer(this.natPeerConfig(p));
    let wp: Peer | undefined;
    try {
      wp = this.device.addPeer(keyBytes(p.publicKey));
      this.device.setPresharedKey(wp, p.presharedKey === undefined ? null : keyBytes(p.presharedKey));
      if (p.endpoint !== undefined) this.device.setEndpoint(wp, await resolveEndpoint(p.endpoint));
      for (const c of [...p.remote.podCIDRs, ...p.remote.externalCIDRs]) this.device.addAllowedIp(wp, parsePrefix(c));
      if (p.persistentKeepalive !== undefined) this.device.setPersistentKeepalive(wp, p.persistentKeepalive, now);
    } catch (e) {
      this.nat.removePeer(natPeer);
      if (wp !== undefined) this.device.removePeer(wp);
      throw e;
    }
    const rp = this.router.addPeer(p.name, natPeer, wp, this.yaml === null ? '' : peerTunnel(p.name));
    this.peersByName.set(p.name, { cfg: p, wg: wp, rp, handshakes: 0, lastSeenHandshake: 0, tunnelRemote: undefined });
  }

  private removePeer(name: string): void {
    const s = this.peersByName.get(name);
    if (s === undefined) return;
    this.router.removePeer(s.rp);
    this.device.removePeer(s.wg);
    this.nat.removePeer(s.rp.nat);
    this.peersByName.delete(name);
  }

  /** Peer changes other than the key: the WireGuard peer (sessions, counters, roamed endpoint) is kept. */
  private async updatePeer(name: string, ch: PeerChanges): Promise<void> {
    const s = this.peersByName.get(name);
    if (s === undefined) throw new GatewayApplyError(`peer.update for unknown peer ${name}`);
    const cfg: PeerConfig = { ...s.cfg };
    if (ch.clusterId !== undefined) cfg.clusterId = ch.clusterId;
    if (ch.presharedKey !== undefined) {
      if (ch.presharedKey === null) delete cfg.presharedKey;
      else cfg.presharedKey = ch.presharedKey;
      this.device.setPresharedKey(s.wg, ch.presharedKey === null ? null : keyBytes(ch.presharedKey));
    }
    if (ch.endpoint !== undefined) {
      if (ch.endpoint === null) delete cfg.endpoint;
      else cfg.endpoint = ch.endpoint;
      if (ch.endpoint !== null) this.device.setEndpoint(s.wg, await resolveEndpoint(ch.endpoint));
    }
    if (ch.tunnelAddress !== undefined) {
      if (ch.tunnelAddress === null) delete cfg.tunnelAddress;
      else cfg.tunnelAddress = ch.tunnelAddress;
    }
    if (ch.persistentKeepalive !== undefined) {
      if (ch.persistentKeepalive === null) delete cfg.persistentKeepalive;
      else cfg.persistentKeepalive = ch.persistentKeepalive;
      this.device.setPersistentKeepalive(s.wg, ch.persistentKeepalive ?? 0, this.clock());
    }
    if (ch.remote !== undefined || ch.remapped !== undefined) {
      if (ch.remote !== undefined) cfg.remote = ch.remote;
      if (ch.remapped !== undefined) cfg.remapped = ch.remapped;
      // New prefix translation: a new NAT peer (its conntrack entries go with the old one).
      this.router.removePeer(s.rp);
      this.nat.removePeer(s.rp.nat);
      let natPeer: NatPeer;
      try {
        natPeer = this.nat.addPeer(this.natPeerConfig(cfg));
      } catch (e) {
        s.rp = this.router.addPeer(
          s.cfg.name,
          this.nat.addPeer(this.natPeerConfig(s.cfg)),
          s.wg,
          this.yaml === null ? '' : peerTunnel(s.cfg.name),
        );
        throw e;
      }
      s.rp = this.router.addPeer(cfg.name, natPeer, s.wg, this.yaml === null ? '' : peerTunnel(cfg.name));
      this.device.clearAllowedIps(s.wg);
      s.tunnelRemote = undefined; // re-added by planTunnel after the ops
      for (const c of [...cfg.remote.podCIDRs, ...cfg.remote.externalCIDRs])
        this.device.addAllowedIp(s.wg, parsePrefix(c));
    }
    s.cfg = cfg;
  }

  /** The Geneve tunnel to each node in force (Liqo mode names their interfaces). */
  nodeTunnels(): { nodeName: string; tunnel: GeneveTunnel }[] {
    const out: { nodeName: string; tunnel: GeneveTunnel }[] = [];
    for (const t of this.tunnelsById.values()) {
      const g = this.table.get(t.id, t.remoteUnderlay);
      if (g !== undefined) out.push({ nodeName: t.nodeName, tunnel: g });
    }
    return out;
  }

  private tunnelAdd(t: GeneveTunnelConfig): void {
    this.table.add(tunnelSpec(t));
    this.tunnelsById.set(t.id, t);
    this.addLocalAddress(t.localInternalAddress);
  }

  private tunnelRemove(id: number): void {
    const t = this.tunnelsById.get(id);
    if (t === undefined) return;
    this.table.remove(t.id, t.remoteUnderlay);
    this.tunnelsById.delete(id);
  }

  private tunnelUpdate(id: number, ch: TunnelChanges): void {
    const old = this.tunnelsById.get(id);
    if (old === undefined) throw new GatewayApplyError(`tunnel.update for unknown tunnel id ${id}`);
    const neu: GeneveTunnelConfig = { ...old, ...ch };
    if (neu.remoteUnderlay !== old.remoteUnderlay) {
      this.table.remove(old.id, old.remoteUnderlay);
      this.table.add(tunnelSpec(neu));
    } else {
      this.table.set(tunnelSpec(neu)); // in place: counters and a learned MAC survive
    }
    this.tunnelsById.set(id, neu);
    this.addLocalAddress(neu.localInternalAddress);
  }

  /**
   * Kernel state of the local TUN: routes for the peers' remapped CIDRs, the internal CIDR, pod
   * routes, and each peer's tunnel address (source: our tunnel address towards it, which is
   * added to the TUN first: the kernel refuses a source it does not own); stale tunnel
   * addresses are removed last.
   */
  private async syncKernelRoutes(): Promise<void> {
    const want = new Set<string>();
    for (const s of this.peersByName.values())
      for (const c of [...s.cfg.remapped.podCIDRs, ...s.cfg.remapped.externalCIDRs]) want.add(c);
    want.add(this.config.cluster.internalCIDR);
    if (this.opts.routePodCIDRs ?? true) for (const r of this.podRoutes.values()) want.add(r.podCIDR);
    const tunnelLocals = new Set(this.tunnelPlan.peers.map((t) => t.local));
    for (const a of tunnelLocals) {
      await this.kernel.addAddress(a);
      this.tunnelAddrsOnTun.add(a);
    }
    for (const t of this.tunnelPlan.peers) {
      const cidr = hostCidr(t.remote);
      await this.kernel.addRoute(cidr, t.local);
      want.add(cidr);
    }
    await this.kernel.syncRoutes(want);
    for (const a of this.localAddrs) await this.kernel.addAddress(a);
    for (const a of [...this.tunnelAddrsOnTun]) {
      if (tunnelLocals.has(a) || this.localAddrs.has(a)) continue;
      await this.kernel.removeAddress(a);
      this.tunnelAddrsOnTun.delete(a);
    }
  }

  /**
   * Recomputes the in-tunnel addresses from the configuration in force (tunnel-address.ts) and
   * applies them to the routing stage and the peers' allowed IPs; the kernel side follows in
   * syncKernelRoutes. Peers left out are reported through onError, once per change.
   */
  private planTunnel(): void {
    const plan: TunnelPlan =
      (this.opts.tunnelAddresses ?? true)
        ? planTunnelAddresses({
            wireguard: this.config.wireguard,
            peers: [...this.peersByName.values()].map((s) => s.cfg),
          })
        : { peers: [], skipped: [] };
    const byName = new Map(plan.peers.map((t) => [t.name, t] as const));
    const locals: string[] = [];
    const remotes: { address: string; peer: RouterPeer<Peer> }[] = [];
    for (const s of this.peersByName.values()) {
      const t = byName.get(s.cfg.name);
      if (s.tunnelRemote !== undefined && s.tunnelRemote !== t?.remote)
        this.device.removeAllowedIp(s.wg, parsePrefix(hostCidr(s.tunnelRemote)));
      s.tunnelRemote = t?.remote;
      if (t === undefined) continue;
      // Re-added every time: a peer update that rewrote its allowed IPs dropped it.
      this.device.addAllowedIp(s.wg, parsePrefix(hostCidr(t.remote)));
      locals.push(t.local);
      remotes.push({ address: t.remote, peer: s.rp });
    }
    const before = new Set(this.tunnelPlan.skipped.map((x) => `${x.name}\n${x.reason}`));
    for (const x of plan.skipped) {
      if (!before.has(`${x.name}\n${x.reason}`))
        this.onError('tunnel address', new Error(`peer ${x.name}: no in-tunnel connection check: ${x.reason}`));
    }
    this.router.setTunnelAddresses(locals, remotes);
    this.tunnelPlan = plan;
  }

  /** The in-tunnel addresses in force: one entry per peer that has them, and the peers left out. */
  tunnelAddresses(): TunnelPlan {
    return this.tunnelPlan;
  }

  /** The configuration in force. */
  get current(): GatewayConfig {
    return this.config;
  }

  /**
   * Applies the control layer's diff ops (ConfigReloader's ConfigApplier). Live: peers
   * (add/remove; update keeps sessions, counters and a roamed endpoint), tunnels, pod routes,
   * IP mappings, WireGuard private key / listen port / MTU (padding; rebuilds the NAT), cluster CIDRs (rebuilds the
   * NAT: conntrack entries are lost). Not live (GatewayApplyError before any change): Geneve port /
   * listen address, WireGuard interface name, listen address, crypto backend, role.
   * metrics/logging ops are the CLI's and ignored here.
   */
  async apply(ops: readonly ConfigOp[], next?: GatewayConfig): Promise<void> {
    for (const op of ops) {
      if (op.kind === 'restart') throw new GatewayApplyError(`cannot apply live: ${op.reason}; restart the gateway`);
      if (op.kind === 'geneve.update')
        throw new GatewayApplyError(
          'geneve.port/listenAddress changed: restart the gateway to rebind the Geneve socket',
        );
      if (op.kind === 'wireguard.update') {
        const ch = op.changes;
        if (ch.interfaceName !== undefined || ch.cryptoBackend !== undefined || ch.listenAddress !== undefined) {
          throw new GatewayApplyError(
            'wireguard.interfaceName/cryptoBackend/listenAddress changed: restart the gateway',
          );
        }
      }
    }
    const now = this.clock();
    let routesDirty = false;
    for (const op of ops) {
      switch (op.kind) {
        case 'peer.remove':
          this.removePeer(op.name);
          routesDirty = true;
          break;
        case 'peer.update':
          await this.updatePeer(op.name, op.changes);
          routesDirty = true;
          break;
        case 'peer.add':
          await this.addPeer(op.peer, now);
          routesDirty = true;
          break;
        case 'tunnel.remove':
          this.tunnelRemove(op.id);
          break;
        case 'tunnel.update':
          this.tunnelUpdate(op.id, op.changes);
          routesDirty = true;
          break;
        case 'tunnel.add':
          this.tunnelAdd(op.tunnel);
          routesDirty = true;
          break;
        case 'podRoute.remove':
          this.table.removePodRoute(op.route.podCIDR);
          this.podRoutes.delete(op.route.podCIDR);
          routesDirty = true;
          break;
        case 'podRoute.update':
          this.table.addPodRoute(op.podCIDR, op.nodeInternalAddress);
          this.podRoutes.set(op.podCIDR, { podCIDR: op.podCIDR, nodeInternalAddress: op.nodeInternalAddress });
          break;
        case 'podRoute.add':
          this.table.addPodRoute(op.route.podCIDR, op.route.nodeInternalAddress);
          this.podRoutes.set(op.route.podCIDR, op.route);
          routesDirty = true;
          break;
        case 'ipMapping.remove':
        case 'ipMapping.update':
        case 'ipMapping.add':
          break; // applied below from the full list
        case 'wireguard.update': {
          const ch = op.changes;
          if (ch.privateKey !== undefined && ch.privateKey !== null) this.device.setPrivateKey(keyBytes(ch.privateKey));
          if (ch.mtu !== undefined && ch.mtu !== null) {
            // The TUN link first: if the kernel refuses, nothing has changed yet.
            this.tun?.setMtu(ch.mtu);
            this.device.mtu = ch.mtu;
          }
          if (ch.listenPort !== undefined && ch.listenPort !== null) {
            const port = ch.listenPort;
            await withNetnsAsync(this.opts.netns, () => this.wg.bind(port));
          }
          this.config = { ...this.config, wireguard: { ...this.config.wireguard, ...definedOnly(ch) } };
          // The tunnel MTU is also the NAT's (Fragmentation Needed, MSS clamp): rebuild it.
          if (ch.mtu !== undefined && ch.mtu !== null) this.rebuildNat();
          break;
        }
        case 'cluster.update':
          this.config = { ...this.config, cluster: { ...this.config.cluster, ...op.changes } };
          this.rebuildNat();
          routesDirty = true;
          break;
        default:
          break;
      }
    }
    if (ops.some((o) => o.kind.startsWith('ipMapping.'))) {
      this.config = { ...this.config, ipMappings: next?.ipMappings ?? applyMappingOps(this.config.ipMappings, ops) };
      if (this.yaml === null) this.nat.setIpMappings(this.config.ipMappings);
    }
    this.config = next ?? {
      ...this.config,
      peers: [...this.peersByName.values()].map((s) => s.cfg),
      geneve: {
        ...this.config.geneve,
        tunnels: [...this.tunnelsById.values()],
        podRoutes: [...this.podRoutes.values()],
      },
    };
    this.syncRules();
    const tunnelBefore = JSON.stringify(this.tunnelPlan.peers);
    this.planTunnel();
    if (routesDirty || JSON.stringify(this.tunnelPlan.peers) !== tunnelBefore) await this.syncKernelRoutes();
    this.wg.poll();
  }

  /** A new NAT from the current cluster settings with every peer re-added (conntrack starts empty). */
  private rebuildNat(): void {
    const nat = this.makeNat(this.config);
    const cfgOf = new Map([...this.peersByName.values()].map((s) => [s.rp, s.cfg] as const));
    const made = this.router.replaceNat(nat, (rp) => nat.addPeer(this.natPeerConfig(cfgOf.get(rp)!)));
    for (const s of this.peersByName.values()) s.rp = made.get(s.cfg.name)!;
    this.planTunnel(); // tunnel addresses point at the remade router peers
  }

  // =========================================================================================
  // Housekeeping and statistics

  private tick(): void {
    if (this.stopped) return;
    const now = this.clock();
    this.nat.expire(now);
    this.yaml?.expire(now);
    this.countHandshakes();
  }

  private countHandshakes(): void {
    for (const s of this.peersByName.values()) {
      const t = s.wg.lastHandshakeMs;
      if (t !== 0 && t !== s.lastSeenHandshake) {
        s.lastSeenHandshake = t;
        s.handshakes++;
      }
    }
  }

  /** StatsSource: one sample per peer. `connected` = a handshake completed within the last 180 s. */
  peers(): readonly PeerStatsSample[] {
    this.countHandshakes();
    const now = this.clock();
    const out: PeerStatsSample[] = [];
    for (const s of this.peersByName.values()) {
      const last = s.wg.lastHandshakeMs;
      out.push({
        clusterId: s.cfg.clusterId,
        connected: last !== 0 && now - last < 180_000,
        latencyUs: 0,
        rxBytes: s.wg.rxBytes,
        txBytes: s.wg.txBytes,
        rxPackets: s.wg.rxPackets,
        txPackets: s.wg.txPackets,
        handshakes: s.handshakes,
        ...(last === 0 ? {} : { lastHandshakeAtMs: last }),
      });
    }
    return out;
  }

  /** StatsSource: drops by reason from every stage (non-zero only), prefixed by stage. */
  drops(): Readonly<Record<string, number>> {
    return collectDrops(this.router, this.nat, this.device, this.geneve, this.wg, this.tun);
  }

  /** StatsSource: conntrack entries (the rules' connections in YAML mode). */
  natEntries(): number {
    return (
      this.nat.stats().conntrack.entries + (this.yaml?.active === true ? this.yaml.attachment.runtime.flows.size : 0)
    );
  }

  /** StatsSource: bounded queues' current depths. */
  queueDepths(): Readonly<Record<string, number>> {
    return {
      wg_handshakes: this.wg?.handshakeQueueDepth ?? 0,
      wg_outbox: this.device.outgoingCount,
      wg_buffers: this.device.buffersInUse,
    };
  }

  /** A full snapshot for `weft show` / logs (allocates). */
  stats(): GatewayStats {
    const peers = this.peers();
    let i = 0;
    const out: GatewayStats['peers'] = [];
    for (const s of this.peersByName.values()) {
      const ep = s.wg.endpoint;
      out.push({
        ...peers[i++]!,
        name: s.cfg.name,
        endpoint:
          ep === null ? null : ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`,
        allowedIps: [...s.cfg.remote.podCIDRs, ...s.cfg.remote.externalCIDRs],
        tunnel: tunnelOf(this.tunnelPlan, s.cfg.name),
      });
    }
    const t = this.tun?.stats;
    return {
      peers: out,
      tunnels: [...this.table.tunnels()].map((x) => ({
        name: x.name,
        vni: x.vni,
        remoteUnderlay: x.remoteUnderlayText,
        remoteInternal: formatAddress(x.remoteInternal),
        txPackets: x.txPackets,
        rxPackets: x.rxPackets,
        drops: x.drops,
      })),
      podRoutes: this.table.podRoutes().map((r) => ({
        podCIDR: `${formatAddress(r.prefix.addr)}/${r.prefix.prefixLen}`,
        nodeInternalAddress: r.nodeInternalAddress,
        resolved: r.tunnel !== null,
      })),
      nat: natStatsWithRules(this.nat.stats(), this.yaml?.active === true ? this.yaml.attachment.runtime : null),
      drops: { ...this.drops() },
      queues: { ...this.queueDepths() },
      tun: {
        name: this.tun?.name ?? '',
        mtu: this.tun?.mtu ?? 0,
        rxPackets: t?.rxPackets ?? 0,
        txPackets: t?.txPackets ?? 0,
        txErrors: t?.txErrors ?? 0,
      },
      offloads: this.tun === undefined || this.geneve === undefined ? null : fabricOffloads(this.tun, this.geneve),
      gso: segmenterStats(this.segmenter),
      gro: coalescerStats(this.tunWriter?.coalescer ?? null),
      ports: { geneve: this.geneve?.port ?? -1, wireguard: this.wg?.port ?? -1 },
      forwarded: { ...this.forwarded },
      routed: { ...this.routed },
    };
  }

  /** Ports actually bound (useful with port 0 in tests). */
  get ports(): { geneve: number; wireguard: number } {
    return { geneve: this.geneve?.port ?? -1, wireguard: this.wg?.port ?? -1 };
  }

  /** Stops forwarding, removes the routes/addresses it added, closes sockets and the TUN. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.housekeeping !== null) clearInterval(this.housekeeping);
    this.tun?.stop();
    let err: unknown;
    try {
      await this.kernel?.clear();
    } catch (e) {
      err = e;
    }
    await this.wg?.close();
    await this.geneve?.close();
    await this.tun?.close();
    if (err !== undefined) throw err;
  }
}
