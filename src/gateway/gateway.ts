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
 * gateway-peers.ts; the stats snapshot: gateway-stats.ts. Here: the inputs, lanes, reconfiguration.
 */
import type { ConfigOp, TunnelChanges } from '../control/diff.js';
import type { GatewayConfig, GeneveTunnelConfig, PodRouteConfig } from '../control/config.js';
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
import { PeerTable } from '../router/peer-table.js';
import { RouterLanes } from '../router/lanes.js';
import { Router } from '../router/router.js';
import type { RulesAttachment } from '../rules/attach.js';
import { Device } from '../wireguard/device.js';
import type { Peer } from '../wireguard/peer.js';
import { applyMappingOps, definedOnly, firstHost, keyBytes, tunnelSpec } from './config-values.js';
import { GatewayIo, type GatewayIoOptions } from './gateway-io.js';
import { GatewayPeers } from './gateway-peers.js';
import { collectDrops, gatewayStats, type GatewayStats } from './gateway-stats.js';
import { natConfigOf, YamlRules } from './yaml-rules.js';

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

/** A configuration change the running gateway cannot apply live, or an inconsistent op. */
export class GatewayApplyError extends Error {
  override readonly name = 'GatewayApplyError';
}

export type { GatewayStats } from './gateway-stats.js';

export class Gateway implements StatsSource {
  readonly table = new GeneveTunnelTable();
  readonly forwarded = { toWireguard: 0, toGeneve: 0, toTun: 0 };
  readonly routed = { fromNodes: 0, fromHost: 0, fromPeers: 0 };
  readonly device: Device;
  readonly router: Router<Peer, GeneveTunnel>;

  private config: GatewayConfig;
  private readonly io: GatewayIo;
  private geneve!: GenevePort;
  private tun!: PacketDevice;
  private tunWriter!: FabricTunWriter;
  private wg!: WireGuardPort;
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly peerSet: GatewayPeers;
  /** The gateway's own addresses (on the local TUN; the first of a family sources ICMP errors). */
  private readonly localAddrs = new Set<string>();
  private readonly tunnelsById = new Map<number, GeneveTunnelConfig>();
  private readonly podRoutes = new Map<string, PodRouteConfig>();
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
    this.config = config;
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
    this.device = new Device({ backend, mtu: config.wireguard.mtu, overlappingAllowedIps: true });
    this.device.setPrivateKey(keyBytes(config.wireguard.privateKey));
    this.router = new Router({
      peers: this.makePeerTable(config),
      nodes: this.table,
      ...(opts.icmpRatePerSecond === undefined ? {} : { icmpRatePerSecond: opts.icmpRatePerSecond }),
      ...(opts.icmpBurst === undefined ? {} : { icmpBurst: opts.icmpBurst }),
    });
    this.peerSet = new GatewayPeers(this.device, this.router, {
      clock: this.clock,
      onError: this.onError,
      tunnelAddresses: opts.tunnelAddresses ?? true,
      mtu: () => this.config.wireguard.mtu,
    });
    this.yaml = new YamlRules(this.router, config.wireguard.mtu);
  }

  /** The rules compiled from the configuration (yaml-rules.ts), at the hooks unless Liqo mode detached them. */
  get rules(): RulesAttachment {
    return this.yaml.attachment;
  }

  /** Liqo mode: its FirewallConfigurations replace the configuration's rules at the hooks. */
  detachConfigRules(): void {
    this.yaml.detach();
  }

  private syncRules(): void {
    this.yaml.sync(this.config, this.peerSet.configs(), this.internalAddress(this.config));
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
    const c = this.config;
    for (const t of c.geneve.tunnels) {
      this.table.add(tunnelSpec(t));
      this.tunnelsById.set(t.id, t);
    }
    for (const r of c.geneve.podRoutes) {
      this.table.addPodRoute(r.podCIDR, r.nodeInternalAddress);
      this.podRoutes.set(r.podCIDR, r);
    }
    this.addLocalAddress(this.internalAddress(c));
    for (const t of c.geneve.tunnels) this.addLocalAddress(t.localInternalAddress);
    const now = this.clock();
    for (const p of c.peers) await this.peerSet.add(p, now);
    this.syncRules();
    this.peerSet.planTunnel(c.wireguard);

    // Local TUN: the gateway host's interface into the fabric.
    const { tun, kernel } = await this.io.openTun(c, this.lanesGeneve.capacity);
    this.tun = tun;
    this.tunWriter = this.io.tunWriter!;
    for (const a of this.localAddrs) await kernel.addAddress(a);
    await this.syncKernelRoutes();

    const { geneve, wg } = await this.io.openPorts(
      c,
      this.table,
      this.device,
      {
        deliverBatch: (buf, offs, lens, t, n, areaOff, areaLen) =>
          this.onGenevePackets(buf, offs, lens, t, n, areaOff, areaLen),
      },
      { writeBatch: (buf, offs, lens, peers, n) => this.onWireguardPackets(buf, offs, lens, peers, n) },
    );
    this.geneve = geneve;
    this.wg = wg;
    this.io.startTunReader(c.wireguard.mtu, (buf, offs, lens, n) => this.onTunPackets(buf, offs, lens, n));
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

  /** The Router's peer table (routing by remapped CIDR, tunnel MTU); the rules translate. */
  private makePeerTable(c: GatewayConfig): PeerTable {
    return new PeerTable(natConfigOf(c, this.internalAddress(c)));
  }

  private addLocalAddress(addr: string): void {
    if (this.localAddrs.has(addr)) return;
    this.localAddrs.add(addr);
    this.router.setLocalAddresses([...this.localAddrs]);
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
   * routes and the in-tunnel addresses (gateway-io.ts syncRoutes).
   */
  private async syncKernelRoutes(): Promise<void> {
    const want = new Set<string>();
    for (const s of this.peerSet.byName.values())
      for (const c of [...s.cfg.remapped.podCIDRs, ...s.cfg.remapped.externalCIDRs]) want.add(c);
    want.add(this.config.cluster.internalCIDR);
    if (this.opts.routePodCIDRs ?? true) for (const r of this.podRoutes.values()) want.add(r.podCIDR);
    await this.io.syncRoutes(want, this.peerSet.plan, this.localAddrs);
  }

  /** The in-tunnel addresses in force: one entry per peer that has them, and the peers left out. */
  tunnelAddresses(): TunnelPlan {
    return this.peerSet.plan;
  }

  /** Whether WireGuard knows where to send to peer `name` (configured, or learned from its handshake). */
  hasEndpoint(name: string): boolean {
    return (this.peerSet.byName.get(name)?.wg.endpoint ?? null) !== null;
  }

  /** The configuration in force. */
  get current(): GatewayConfig {
    return this.config;
  }

  /**
   * Applies the control layer's diff ops (ConfigReloader's ConfigApplier). Live: peers
   * (add/remove; update keeps sessions, counters and a roamed endpoint), tunnels, pod routes,
   * IP mappings, WireGuard private key / listen port / MTU (padding; rebuilds the peer table), cluster CIDRs
   * (rebuilds the peer table; the rules are recompiled). Not live (GatewayApplyError before any change): Geneve port /
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
          this.peerSet.remove(op.name);
          routesDirty = true;
          break;
        case 'peer.update':
          {
            const s = this.peerSet.byName.get(op.name);
            if (s === undefined) throw new GatewayApplyError(`peer.update for unknown peer ${op.name}`);
            await this.peerSet.update(s, op.changes);
          }
          routesDirty = true;
          break;
        case 'peer.add':
          await this.peerSet.add(op.peer, now);
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
            await this.io.bindWireGuard(port);
          }
          this.config = { ...this.config, wireguard: { ...this.config.wireguard, ...definedOnly(ch) } };
          // The tunnel MTU is also the peer table's (Fragmentation Needed): rebuild it.
          if (ch.mtu !== undefined && ch.mtu !== null) this.rebuildPeerTable();
          break;
        }
        case 'cluster.update':
          this.config = { ...this.config, cluster: { ...this.config.cluster, ...op.changes } };
          this.rebuildPeerTable();
          routesDirty = true;
          break;
        default:
          break;
      }
    }
    if (ops.some((o) => o.kind.startsWith('ipMapping.'))) {
      this.config = { ...this.config, ipMappings: next?.ipMappings ?? applyMappingOps(this.config.ipMappings, ops) };
    }
    this.config = next ?? {
      ...this.config,
      peers: this.peerSet.configs(),
      geneve: {
        ...this.config.geneve,
        tunnels: [...this.tunnelsById.values()],
        podRoutes: [...this.podRoutes.values()],
      },
    };
    this.syncRules();
    const tunnelBefore = JSON.stringify(this.peerSet.plan.peers);
    this.peerSet.planTunnel(this.config.wireguard);
    if (routesDirty || JSON.stringify(this.peerSet.plan.peers) !== tunnelBefore) await this.syncKernelRoutes();
    this.wg.poll();
  }

  /** A new peer table from the current cluster settings with every peer re-added. */
  private rebuildPeerTable(): void {
    this.peerSet.rebuild(this.makePeerTable(this.config), this.config.wireguard);
  }

  // =========================================================================================
  // Housekeeping and statistics

  private tick(): void {
    if (this.stopped) return;
    this.yaml.expire(this.clock());
    this.peerSet.countHandshakes();
  }

  /** StatsSource: one sample per peer. `connected` = a handshake completed within the last 180 s. */
  peers(): readonly PeerStatsSample[] {
    return this.peerSet.samples(this.clock());
  }

  /** StatsSource: drops by reason from every stage (non-zero only), prefixed by stage. */
  drops(): Readonly<Record<string, number>> {
    return collectDrops(this.router, this.peerTable, this.device, this.geneve, this.wg, this.tun);
  }

  /** StatsSource: conntrack entries (the configuration's rules' connections; 0 when Liqo mode detached them). */
  natEntries(): number {
    return this.yaml.active ? this.yaml.attachment.runtime.flows.size : 0;
  }

  /** StatsSource: bounded queues' current depths. */
  queueDepths(): Readonly<Record<string, number>> {
    return {
      wg_handshakes: this.wg?.handshakeQueueDepth ?? 0,
      wg_outbox: this.device.outgoingCount,
      wg_buffers: this.device.buffersInUse,
      geneve_arp_held: this.geneve?.engine.heldPackets ?? 0,
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
    });
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
