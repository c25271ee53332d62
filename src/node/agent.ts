/**
 * The node agent: Liqo's per-node fabric end for nodes without a kernel geneve module.
 *
 *   pod ─veth─ node kernel ── route remoteCIDRs dev weft0 ──▶ TUN batch ─▶ GenevePort (encap in
 *   place, one sendmmsg) ─▶ gateway underlay:6091
 *   gateway:6091 ─▶ recvmmsg ─▶ Geneve decap (view) ─▶ TUN writeBatch ─▶ node kernel ─▶ pod
 *
 * With offloads (default; `offload: false`, or WEFT_OFFLOAD=0 through the launcher, turns them
 * off), each one the kernel grants is used and each one it refuses falls back to the path above:
 *   TUN read of TSO/USO super-packets ─▶ TunSegmenter (inner-MTU segments with Geneve headroom)
 *   ─▶ encapsulate each in place ─▶ sendmmsg with UDP GSO (a super-packet's segments: one entry)
 *   recvmmsg with UDP GRO (runs of datagrams per slot) ─▶ decap each ─▶ TunCoalescingWriter
 *   (TCP/UDP segments per flow → super-packets) ─▶ one writev batch, flushed at the batch end.
 *
 * One Geneve tunnel per gateway (Liqo InternalFabric + GeneveTunnel: VNI, gateway underlay and
 * internal addresses, this node's internal address). The TUN device carries this node's
 * internal address(es) (a /32 each) so that host-network traffic to remote pods leaves with the
 * node's internal address as source (the gateway masquerades it); the kernel routes each
 * gateway's remote CIDRs, its internal address and the cluster's internal CIDR to the TUN.
 *
 * Kernel state is set with `ip` (src/kernel/iproute.ts: replace semantics, typed
 * RouteCommandError) and removed again by stop(). The TUN MTU is the smaller of the configured
 * fabric MTU (node.mtu, Liqo's 1340 by default) and what the underlay towards each gateway can
 * carry after Geneve's overhead (geneveInnerMtu of the underlay device's MTU).
 *
 * Configuration types come from src/control/config.ts as types only (no runtime import of the
 * control layer); `apply()` takes the control layer's diff ops (src/control/diff.ts).
 */
import type { ConfigOp } from '../control/diff.js';
import type { NodeConfig, NodeGatewayConfig } from '../control/config.js';
import { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import { geneveInnerMtu } from '../geneve/mtu.js';
import type { PacketDevice } from '../io/device.js';
import { GenevePort } from '../pipelines/geneve-port.js';
import { GENEVE_OFFLOAD_DELIVER_MAX, type GeneveSink, type GenevePortStats } from '../pipelines/geneve-port-types.js';
import type { TunCoalescingWriter, TunSegmenter } from '../pipelines/tun-offload.js';
import {
  coalescerStats,
  fabricOffloads,
  FabricTunWriter,
  startTunReader,
  segmenterStats,
  type CoalescerCounts,
  type FabricOffloads,
  type SegmenterCounts,
} from '../pipelines/fabric-offload.js';
import type { LinkState } from '../kernel/link-state.js';
import { systemDevices, type Devices } from '../pipelines/devices.js';
import { isIpv6LinkLocalControl } from '../packet/ipv6.js';
import type { KernelOwner } from '../kernel/reconcile.js';
import {
  HOOK_COUNT,
  HOOK_INPUT,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  PacketMeta,
  SOURCE_HOST,
  SOURCE_NODE,
  type PacketHook,
} from '../router/hooks.js';
import { BatchStages } from '../router/stage-batch.js';

export interface NodeAgentOptions {
  /** Create the TUN, sockets and routes inside this network namespace (tests; needs the native addon). */
  readonly netns?: string;
  /** Override node.tunName. */
  readonly tunName?: string;
  /** Override the TUN MTU (else min(node.mtu, geneveInnerMtu(underlay MTU))). */
  readonly mtu?: number;
  /** Underlay MTU when it cannot be read from the kernel. Default 1500. */
  readonly underlayMtu?: number;
  /** Packets per TUN / UDP batch. Default 64. */
  readonly batchSize?: number;
  /**
   * Use the kernel's offloads where it grants them: vnet-header TUN with TSO/USO, UDP GSO and GRO
   * on the Geneve socket (default true). False: one packet per read/write/datagram.
   */
  readonly offload?: boolean;
  readonly clock?: () => number;
  /** Unexpected I/O errors (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
  /** The TUN, socket and link state to open (default: the real host's; a simulation's memory host). */
  readonly devices?: Devices;
}

/** A configuration change the running agent cannot apply live (restart it). */
export class NodeAgentApplyError extends Error {
  override readonly name = 'NodeAgentApplyError';
}

export interface NodeAgentStats {
  tun: { name: string; mtu: number; rxPackets: number; txPackets: number; txErrors: number };
  offloads: FabricOffloads;
  /** Super-packets cut and segments made (TUN → Geneve), packets coalesced (Geneve → TUN); drops by reason. */
  gso: SegmenterCounts;
  gro: CoalescerCounts;
  /** arpHeld/arpHeldSent: packets held for an unresolved L2 peer and sent once it resolved; arpHeldNow: held at the moment. */
  geneve: GenevePortStats & { drops: Record<string, number>; arpHeld: number; arpHeldSent: number; arpHeldNow: number };
  tunnels: { name: string; vni: number; remoteUnderlay: string; txPackets: number; rxPackets: number; drops: number }[];
  /** The kernel's IPv6 link-local control read from the TUN (RS, MLD, ND): not sent, not a drop. */
  ipv6LinkLocal: number;
}

/** Headroom of TUN reads: the Geneve header (8) + options + inner Ethernet (14) fit with room to spare. */
const TUN_HEADROOM = 128;
const TUN_TAILROOM = 64;
/** Geneve receive: the node writes every inner packet to its TUN, so 64 bytes of headroom (≥ the vnet header) suffice. */
const GENEVE_RX_HEADROOM = 64;
const GENEVE_RX_TAILROOM = 48;

export class NodeAgent {
  private config: NodeConfig;
  private stopped = false;
  private readonly gateways = new Map<string, NodeGatewayConfig>();
  /** Cuts TUN super-packets (null without a vnet header). */
  segmenter: TunSegmenter | null = null;
  readonly coalescer: TunCoalescingWriter | null;
  /**
   * Stages (Liqo mode: the fabric FirewallConfigurations) for the packets that cross the agent,
   * as the node's kernel would pass them to its Geneve interface: node → gateway through OUTPUT
   * then POSTROUTING (the entry point looks the connection up, POSTROUTING confirms it and
   * binds source NAT), gateway → node through PREROUTING then INPUT. FORWARD stages are not run:
   * what the node kernel forwards between its own interfaces is the kernel's.
   */
  private readonly outStages = new BatchStages();
  private readonly inStages = new BatchStages();
  private readonly outMeta = new PacketMeta();
  private readonly inMeta = new PacketMeta();

  private constructor(
    config: NodeConfig,
    readonly tun: PacketDevice,
    readonly geneve: GenevePort,
    readonly table: GeneveTunnelTable,
    private readonly kernel: LinkState,
    private readonly opts: NodeAgentOptions,
    private readonly writer: FabricTunWriter,
  ) {
    this.config = config;
    this.coalescer = writer.coalescer;
    for (const g of config.node.gateways) this.gateways.set(g.name, g);
    this.outMeta.source = SOURCE_HOST;
    this.outMeta.output = OUTPUT_NODE;
    this.inMeta.source = SOURCE_NODE;
    this.inMeta.output = OUTPUT_NONE;
  }

  /** Attaches a stage (HookTarget; see outStages for where each hook runs), after those there. */
  attach(hook: number, stage: PacketHook): void {
    if (!(hook >= 0 && hook < HOOK_COUNT)) throw new RangeError(`no hook point ${hook}`);
    this.stageList(hook).push(stage);
    // Hook order within a path (OUTPUT before POSTROUTING, PREROUTING before INPUT).
    const order = (st: PacketHook): number => this.hookOf.get(st) ?? 0;
    this.hookOf.set(stage, hook);
    this.outStages.stages.sort((a, b) => order(a) - order(b));
    this.inStages.stages.sort((a, b) => order(a) - order(b));
  }

  detach(hook: number, stage: PacketHook): boolean {
    const list = this.stageList(hook);
    const i = list.indexOf(stage);
    if (i >= 0) list.splice(i, 1);
    return i >= 0;
  }

  private readonly hookOf = new Map<PacketHook, number>();

  private stageList(hook: number): PacketHook[] {
    return hook === HOOK_OUTPUT || hook === HOOK_POSTROUTING
      ? this.outStages.stages
      : hook === HOOK_PREROUTING || hook === HOOK_INPUT
        ? this.inStages.stages
        : [];
  }

  /** Packets dropped by attached stages: node → gateway, gateway → node. */
  get filtered(): { out: number; in: number } {
    return { out: this.outStages.dropped, in: this.inStages.dropped };
  }

  private ipv6LinkLocal = 0;

  private toGateway(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void {
    // The kernel's IPv6 link-local control has no tunnel to go to: set apart (in place) and counted.
    let m = 0;
    for (let i = 0; i < n; i++) {
      if (isIpv6LinkLocalControl(buf, offs[i]!, lens[i]!)) {
        this.ipv6LinkLocal++;
        continue;
      }
      offs[m] = offs[i]!;
      lens[m++] = lens[i]!;
    }
    if (m === 0) return;
    const k = this.outStages.run(buf, offs, lens, m, this.outMeta, this.now());
    if (k > 0) this.geneve.sendBatch(buf, offs, lens, k);
  }

  /** buf[areaOff, +areaLen): the receive batch's scratch for coalesced super-packets (0: none). */
  private fromGateway(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    n: number,
    areaOff: number,
    areaLen: number,
  ): void {
    const k = this.inStages.run(buf, offs, lens, n, this.inMeta, this.now());
    if (k > 0) this.writer.write(buf, offs, lens, k, areaOff, areaLen);
  }

  private now(): number {
    return this.opts.clock?.() ?? Date.now();
  }

  /**
   * Opens the TUN device and the Geneve socket, installs addresses and routes, starts forwarding.
   * Throws TunError subclasses, UdpError/GenevePortError, GeneveConfigError or RouteCommandError
   * (each naming what to fix); everything opened so far is closed again on failure.
   */
  static async start(config: NodeConfig, opts: NodeAgentOptions = {}): Promise<NodeAgent> {
    const table = new GeneveTunnelTable();
    for (const g of config.node.gateways) addGatewayToTable(table, g, config.node.underlayAddress);
    const netns = opts.netns;
    const devices = opts.devices ?? systemDevices;
    const mtu = opts.mtu ?? Math.min(config.node.mtu, await tunnelMtu(config, opts, devices));
    const tunName = opts.tunName ?? config.node.tunName;
    const wantOffload = opts.offload ?? true;
    // Opened down: IPv6 is turned off (when unused) before the kernel could send RS/MLD into it.
    const tun = devices.openTun({ name: tunName, mtu, netns, offload: wantOffload, up: false });
    let geneve: GenevePort | null = null;
    const kernel = devices.linkState(tun.name, netns);
    try {
      const batchSize = opts.batchSize ?? 64;
      // Coalescing writes need TSO on the TUN; the Geneve receive batches then carry its area.
      const writer = new FabricTunWriter(tun, Math.max(batchSize, GENEVE_OFFLOAD_DELIVER_MAX));
      let agentRef: NodeAgent | null = null;
      const sink: GeneveSink = {
        deliverBatch: (buf, offs, lens, _t, n, areaOff, areaLen) => {
          if (agentRef !== null) agentRef.fromGateway(buf, offs, lens, n, areaOff, areaLen);
          else writer.write(buf, offs, lens, n, areaOff, areaLen);
        },
      };
      geneve = await GenevePort.open({
        table,
        sink,
        netns,
        batchSize,
        offload: wantOffload,
        rxHeadroom: GENEVE_RX_HEADROOM,
        rxTailroom: GENEVE_RX_TAILROOM,
        rxCoalesceReservation: writer.reservation,
        rxCoalesceFlows: writer.maxFlows,
        port: config.geneve.port,
        address: config.geneve.listenAddress ?? config.node.underlayAddress,
        openUdp: (o) => devices.openUdp(o),
        ...(opts.clock === undefined ? {} : { clock: opts.clock }),
        ...(opts.onError === undefined ? {} : { onError: opts.onError }),
      });
      const agent = new NodeAgent(config, tun, geneve, table, kernel, opts, writer);
      agentRef = agent;
      const quiet = await kernel.quietIpv6();
      if (quiet !== null) opts.onError?.('turning IPv6 off on the TUN', quiet);
      await agent.installKernelState();
      // With a vnet header, super-packets are cut to the inner MTU and each segment is
      // encapsulated in place (after the stages): a super-packet's segments leave as one GSO run.
      agent.segmenter = startTunReader(
        tun,
        { mtu, headroom: TUN_HEADROOM, tailroom: TUN_TAILROOM, batchSize },
        (buf, offs, lens, n) => {
          agent.toGateway(buf, offs, lens, n);
        },
      );
      return agent;
    } catch (e) {
      await kernel.clear().catch(() => {});
      await geneve?.close();
      await tun.close();
      throw e;
    }
  }

  /** The link up, every gateway's address and routes (one `ip` process: KernelState.install). */
  private async installKernelState(): Promise<void> {
    const k = this.kernel;
    const addrs = new Set<string>();
    const routes = new Set<string>();
    for (const g of this.gateways.values()) {
      addrs.add(g.localInternalAddress);
      routes.add(hostCidr(g.gatewayInternalAddress));
      for (const c of g.remoteCIDRs) routes.add(c);
    }
    // The internal CIDR is the fabric: other nodes' and gateways' internal addresses (sources of
    // their ICMP errors and host traffic) are reached through a gateway, which routes them by
    // their tunnels' internal /32s. Without it a loose rp_filter drops those packets.
    if (this.gateways.size > 0) routes.add(this.config.cluster.internalCIDR);
    await k.install([...addrs], [...routes]);
    // Loose reverse-path filtering on the TUN: replies from remote clusters arrive here with
    // sources that the main table may route elsewhere (RFC 3704 loose mode, as Liqo sets).
    await k
      .setSysctl(`net/ipv4/conf/${k.dev}/rp_filter`, '2')
      .catch((e: unknown) => this.opts.onError?.('rp_filter', e));
  }

  private async installGateway(g: NodeGatewayConfig): Promise<void> {
    const k = this.kernel;
    await k.addAddress(g.localInternalAddress);
    await k.addRoute(hostCidr(g.gatewayInternalAddress));
    for (const c of g.remoteCIDRs) await k.addRoute(c);
  }

  private async uninstallGateway(g: NodeGatewayConfig): Promise<void> {
    const k = this.kernel;
    const others = [...this.gateways.values()].filter((o) => o.name !== g.name);
    // A route the fabric RouteConfigurations still want (Liqo mode) stays too.
    for (const c of g.remoteCIDRs)
      if (!others.some((o) => o.remoteCIDRs.includes(c)) && !this.fabricRoutes.has(c)) await k.removeRoute(c);
    const gw = hostCidr(g.gatewayInternalAddress);
    if (!others.some((o) => hostCidr(o.gatewayInternalAddress) === gw) && !this.fabricRoutes.has(gw))
      await k.removeRoute(gw);
    if (!others.some((o) => o.localInternalAddress === g.localInternalAddress))
      await k.removeAddress(g.localInternalAddress);
  }

  /** Routes from the fabric RouteConfigurations (Liqo mode); see setFabricRoutes. */
  private fabricRoutes = new Set<string>();

  /**
   * Liqo mode: the destinations the fabric RouteConfigurations send towards the gateway, routed
   * into the TUN (which stands for Liqo's node-side Geneve interfaces; the tunnel is then chosen
   * per packet as for configured routes). Replaces the previous set; a route that a configured
   * gateway also needs stays. Throws RouteCommandError.
   */
  async setFabricRoutes(cidrs: readonly string[]): Promise<void> {
    const want = new Set(cidrs);
    const configured = new Set(
      [...this.gateways.values()].flatMap((g) => [...g.remoteCIDRs, hostCidr(g.gatewayInternalAddress)]),
    );
    for (const c of want) if (!this.kernel.hasRoute(c)) await this.kernel.addRoute(c);
    for (const c of this.fabricRoutes) if (!want.has(c) && !configured.has(c)) await this.kernel.removeRoute(c);
    this.fabricRoutes = want;
  }

  /** The configuration in force. */
  get current(): NodeConfig {
    return this.config;
  }

  /**
   * Applies the control layer's diff ops (ConfigReloader's ConfigApplier). Live: gateways
   * added/removed/changed (tunnel, routes, addresses; counters of a kept tunnel survive).
   * Not live (throws NodeAgentApplyError before changing anything): TUN name/MTU, Geneve port
   * or listen address, role. cluster/metrics/logging ops are ignored here (the CLI handles them).
   */
  async apply(ops: readonly ConfigOp[], next?: NodeConfig): Promise<void> {
    for (const op of ops) {
      if (op.kind === 'restart') throw new NodeAgentApplyError(`cannot apply live: ${op.reason}; restart the agent`);
      if (op.kind === 'geneve.update')
        throw new NodeAgentApplyError(
          'geneve.port/listenAddress changed: restart the node agent to rebind the Geneve socket',
        );
      if (
        op.kind === 'node.update' &&
        (op.changes.tunName !== undefined || op.changes.mtu !== undefined || op.changes.underlayAddress !== undefined)
      ) {
        throw new NodeAgentApplyError(
          'node.tunName/mtu/underlayAddress changed: restart the node agent to recreate the TUN device',
        );
      }
    }
    for (const op of ops) {
      switch (op.kind) {
        case 'nodeGateway.remove': {
          const g = this.gateways.get(op.name);
          if (g === undefined) break;
          this.removeFromTable(g);
          await this.uninstallGateway(g);
          this.gateways.delete(op.name);
          break;
        }
        case 'nodeGateway.update': {
          const old = this.gateways.get(op.name);
          if (old === undefined) break;
          const neu: NodeGatewayConfig = { ...old, ...op.changes };
          if (old.vni !== neu.vni || old.gatewayUnderlay !== neu.gatewayUnderlay) {
            this.removeFromTable(old);
            // A new gateway (a takeover): resolve it now, so that it learns our MAC at once.
            this.geneve.resolve(addGatewayToTable(this.table, neu, this.config.node.underlayAddress));
          } else {
            for (const c of old.remoteCIDRs) this.table.removePodRoute(c);
            addGatewayToTable(this.table, neu, this.config.node.underlayAddress); // set(): in place
          }
          await this.uninstallGateway(old);
          this.gateways.set(neu.name, neu);
          await this.installGateway(neu);
          break;
        }
        case 'nodeGateway.add':
          this.geneve.resolve(addGatewayToTable(this.table, op.gateway, this.config.node.underlayAddress));
          this.gateways.set(op.gateway.name, op.gateway);
          await this.installGateway(op.gateway);
          break;
        default:
          break;
      }
    }
    this.config = next ?? { ...this.config, node: { ...this.config.node, gateways: [...this.gateways.values()] } };
  }

  private removeFromTable(g: NodeGatewayConfig): void {
    for (const c of g.remoteCIDRs) this.table.removePodRoute(c);
    this.table.remove(g.vni, g.gatewayUnderlay);
  }

  /** The offloads in effect now (UDP GSO turns off for good if the kernel fails a GSO send). */
  get offloads(): FabricOffloads {
    return fabricOffloads(this.tun, this.geneve);
  }

  stats(): NodeAgentStats {
    const t = this.tun.stats;
    const tunnels = [...this.table.tunnels()].map((x) => ({
      name: x.name,
      vni: x.vni,
      remoteUnderlay: x.remoteUnderlayText,
      txPackets: x.txPackets,
      rxPackets: x.rxPackets,
      drops: x.drops,
    }));
    const snap = this.geneve.engine.counters.snapshot();
    const drops: Record<string, number> = {};
    for (const [k, v] of Object.entries(snap)) if (k.startsWith('drop_') && v > 0) drops[k.slice(5)] = v;
    return {
      ipv6LinkLocal: this.ipv6LinkLocal,
      tun: {
        name: this.tun.name,
        mtu: this.tun.mtu,
        rxPackets: t.rxPackets,
        txPackets: t.txPackets,
        txErrors: t.txErrors,
      },
      offloads: this.offloads,
      gso: segmenterStats(this.segmenter),
      gro: coalescerStats(this.coalescer),
      geneve: {
        ...this.geneve.stats,
        drops,
        arpHeld: this.geneve.engine.counters.arpHeld,
        arpHeldSent: this.geneve.engine.counters.arpHeldSent,
        arpHeldNow: this.geneve.engine.heldPackets,
      },
      tunnels,
    };
  }

  /** The TUN's kernel state (link, addresses, routes) for ports/reconcile.ts. */
  kernelOwner(): KernelOwner {
    return this.kernel;
  }

  /**
   * Removes the routes and addresses it added, then stops forwarding and closes the socket and the
   * TUN. Idempotent. It forwards until its routes are gone: the `ip` process that removes them
   * starts meanwhile, so a restarted node agent's gap (SIGTERM) does not include it.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    let err: unknown;
    try {
      await this.kernel.clear();
    } catch (e) {
      err = e;
    }
    this.tun.stop();
    await this.geneve.close();
    await this.tun.close();
    if (err !== undefined) throw err;
  }
}

function hostCidr(addr: string): string {
  return `${addr}/${addr.includes(':') ? 128 : 32}`;
}

function addGatewayToTable(
  table: GeneveTunnelTable,
  g: NodeGatewayConfig,
  localUnderlay: string | undefined,
): GeneveTunnel {
  const t = table.set({
    vni: g.vni,
    remoteUnderlay: g.gatewayUnderlay,
    ...(localUnderlay === undefined ? {} : { localUnderlay }),
    localInternalAddress: g.localInternalAddress,
    remoteInternalAddress: g.gatewayInternalAddress,
    mode: g.mode,
    name: g.name,
  });
  for (const c of g.remoteCIDRs) table.addPodRoute(c, g.gatewayInternalAddress);
  return t;
}

/** The largest inner packet every gateway's underlay path carries (reads the route's device MTU). */
async function tunnelMtu(config: NodeConfig, opts: NodeAgentOptions, devices: Devices): Promise<number> {
  let mtu = Number.POSITIVE_INFINITY;
  for (const g of config.node.gateways) {
    const fam = g.gatewayUnderlay.includes(':') ? 6 : 4;
    const under =
      (await devices.underlayMtu(g.gatewayUnderlay, opts.netns).catch(() => undefined)) ?? opts.underlayMtu ?? 1500;
    mtu = Math.min(mtu, geneveInnerMtu(under, fam, g.mode));
  }
  return Number.isFinite(mtu) ? mtu : geneveInnerMtu(opts.underlayMtu ?? 1500, 4, 'l3');
}
