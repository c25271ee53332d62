/**
 * The Liqo gateway data path in one process:
 *
 *   nodes ══Geneve 6091══ GenevePort ─┐                      ┌─ WireGuardPort ══UDP 51840══ peers
 *                                     ├─ route ─ NAT ─ TTL ──┤
 *   gateway host ─ local TUN ─────────┘                      └─ (and back, mirrored)
 *
 * Routing, per packet, on the buffer it arrived in (no copy between stages):
 * - From a node (Geneve decapsulation) or from the local TUN (the gateway host's own traffic):
 *   1. destination = one of the gateway's own addresses → local TUN (the kernel answers ping/iperf3);
 *   2. destination inside a peer's REMAPPED CIDRs (Nat.peerFor) → TTL − 1 → Nat.outbound (remapped →
 *      real destination, masquerade of non-pod sources, MSS clamp) → WireGuard encryptBatch;
 *      NAT_REPLY (Fragmentation Needed / Packet Too Big) goes back the way the packet came;
 *   3. destination = a node's internal address or a local pod (GeneveTunnelTable: internal /32,
 *      pod routes) → TTL − 1 → Geneve to that node (pod-to-pod across nodes: hairpin);
 *   4. otherwise a counted drop (no_route).
 * - From WireGuard (decrypted, source checked against the peer's allowed IPs = its REAL CIDRs):
 *   Nat.inbound (real → remapped source; conntrack reversal of the SNAT) → own address → TUN;
 *   local pod or node → TTL − 1 → Geneve; anything else is dropped (no transit between peers).
 * - In-tunnel addresses (Liqo's 169.254.18.1/.2, tunnel-address.ts), for the connection check:
 *   the local TUN carries our tunnel address(es) (/32) and the kernel routes each peer's tunnel
 *   address via the TUN with our address as source; each peer's tunnel address is in its allowed
 *   IPs. Such packets bypass the NAT and the TTL handling, as on Liqo's WireGuard interface:
 *   from the TUN, destination = a peer's tunnel address (source must be our tunnel address) →
 *   WireGuard; from WireGuard, source = a peer's tunnel address and destination = ours → TUN.
 * - TTL (IPv4, incremental checksum) / hop limit (IPv6) is decremented on every forward (not on
 *   delivery to the local TUN). A packet that would leave with TTL 0 is replaced by an ICMP Time
 *   Exceeded written in its headroom (icmp-error.ts), sourced from the gateway's internal address
 *   and routed like the gateway's own traffic — so towards a peer it is masqueraded and its quoted
 *   header translated by the NAT, exactly like any other ICMP error (traceroute works end to end).
 *
 * Batching: each input (Geneve receive, TUN read, WireGuard receive) processes its whole batch,
 * collecting per-output offset/length lists ("lanes"), then flushes each output once: one
 * sendmmsg for Geneve, one encryptBatch (→ sendmmsg) for WireGuard, one writeBatch for the TUN.
 * Headroom/tailroom: every input leaves ≥ 128 bytes in front of each packet and ≥ 48 after it,
 * enough for the Geneve header (+ options + inner Ethernet), the WireGuard header (16) and tag
 * and padding (≤ 31), and an ICMP error header (28/48) written in front.
 *
 * Known limit: WireGuard picks the peer by the REAL destination after the NAT (AllowedIPs), and
 * packets from WireGuard are mapped to their NAT peer by real source, so two peers whose real
 * CIDRs overlap cannot share one gateway (Liqo runs one gateway per peer).
 *
 * Configuration types come from src/control as types only; kernel routes/addresses through
 * iproute.ts (typed RouteCommandError).
 */
import { lookup } from 'node:dns/promises';
import type { ConfigOp, PeerChanges, TunnelChanges } from '../control/diff.js';
import type { GatewayConfig, GeneveTunnelConfig, PeerConfig, PodRouteConfig } from '../control/config.js';
import type { PeerStatsSample, StatsSource } from '../control/metrics.js';
import type { CryptoBackend } from '../crypto/backend.js';
import { getCryptoBackend } from '../crypto/select.js';
import { GENEVE_DROP_NAMES } from '../geneve/reasons.js';
import { GeneveTunnelTable, type GeneveTunnel, type GeneveTunnelSpec } from '../geneve/table.js';
import { PacketBatch } from '../io/batch.js';
import { TunDevice } from '../io/tun.js';
import { NAT_DROP_MIN, NAT_FORWARD, NAT_REPLY, Nat, natResultName, type NatPeer } from '../nat/nat.js';
import { TokenBucket } from '../ratelimit/token-bucket.js';
import { PrefixMatcher } from '../route/prefix-matcher.js';
import { formatAddress, parseAddress, parsePrefix, prefixNthAddress, type IpFamily } from '../packet/addr.js';
import { IPV4_DST_OFFSET, IPV4_MIN_HEADER_LEN, IPV4_SRC_OFFSET, IPV4_TTL_OFFSET, decrementIpv4Ttl } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN, IPV6_HOP_LIMIT_OFFSET, IPV6_SRC_OFFSET } from '../packet/ipv6.js';
import { Device } from '../wireguard/device.js';
import { DROP_REASON_COUNT, DROP_REASON_NAMES } from '../wireguard/drops.js';
import type { Endpoint, Peer } from '../wireguard/peer.js';
import { GenevePort } from '../ports/geneve-port.js';
import { TIME_EXCEEDED_V4_PREFIX, TIME_EXCEEDED_V6_PREFIX, writeTimeExceeded } from '../packet/icmp-error.js';
import { KernelState } from '../ports/iproute.js';
import { planTunnelAddresses, type TunnelPlan } from '../control/tunnel-address.js';
import { withNetnsAsync } from '../ports/netns.js';
import { WireGuardPort } from '../ports/wireguard-port.js';

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
  /** UDP socket buffers (bytes). Default 8 MiB. */
  readonly socketBuffer?: number;
  /** Rate of generated ICMP Time Exceeded errors (per second, burst). Default 100/20. */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
  /** Wall-clock milliseconds. Default Date.now. */
  readonly clock?: () => number;
  /** Unexpected I/O errors and non-fatal set-up problems (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
}

/** A configuration change the running gateway cannot apply live, or an inconsistent op. */
export class GatewayApplyError extends Error {
  override readonly name = 'GatewayApplyError';
}

/** Why the routing stage dropped a packet (the NAT, Geneve and WireGuard stages count their own). */
export const GatewayDrop = {
  /** Not an IPv4/IPv6 packet, or shorter than its header. */
  BadPacket: 0,
  /** No peer, own address, node or pod route for the destination. */
  NoRoute: 1,
  /** TTL / hop limit expired (an ICMP Time Exceeded was sent unless not allowed or rate-limited). */
  TtlExpired: 2,
  /** Time Exceeded suppressed by the rate limit. */
  IcmpRateLimited: 3,
  /** Too little headroom in front of the packet for a generated error. */
  NoHeadroom: 4,
  /** Decrypted packet whose real source matches no configured peer's CIDRs. */
  UnknownPeerSource: 5,
  /** From one peer to another: Liqo gateways do not transit between peers. */
  PeerTransit: 6,
  /** From the local TUN back to the gateway's own address. */
  Loop: 7,
  /** From the local TUN to a peer's tunnel address with a source other than our tunnel address (the peer would drop it). */
  TunnelSource: 8,
} as const;
export type GatewayDrop = (typeof GatewayDrop)[keyof typeof GatewayDrop];
const GATEWAY_DROP_NAMES = ['bad_packet', 'no_route', 'ttl_expired', 'icmp_rate_limited', 'no_headroom', 'unknown_peer_source', 'peer_transit', 'loop', 'tunnel_source'];

/** Everything `weft show` prints (a snapshot; allocates). */
export interface GatewayStats {
  peers: (PeerStatsSample & {
    name: string; endpoint: string | null; allowedIps: string[];
    /** In-tunnel addresses (ours, the peer's), null when the peer has none (tunnel-address.ts). */
    tunnel: { local: string; remote: string } | null;
  })[];
  tunnels: { name: string; vni: number; remoteUnderlay: string; remoteInternal: string; txPackets: number; rxPackets: number; drops: number }[];
  podRoutes: { podCIDR: string; nodeInternalAddress: string; resolved: boolean }[];
  nat: ReturnType<Nat['stats']>;
  drops: Record<string, number>;
  queues: Record<string, number>;
  tun: { name: string; mtu: number; rxPackets: number; txPackets: number; txErrors: number };
  ports: { geneve: number; wireguard: number };
  forwarded: { toWireguard: number; toGeneve: number; toTun: number };
}

const HEADROOM = 128;
const TAILROOM = 64;
const MAX_PACKET = 9216;
/** Where a packet handed to routeInside came from (packets from WireGuard take routeFromPeer). */
const SRC_GENEVE = 0;
const SRC_TUN = 1;
/** A packet the gateway generated (ICMP error): no TTL handling, never answered with an error. */
const SRC_SELF = 3;

/** Per-input output lists, flushed once per input batch. */
class Lanes {
  readonly wOffs: Uint32Array;
  readonly wLens: Uint32Array;
  wN = 0;
  readonly gOffs: Uint32Array;
  readonly gLens: Uint32Array;
  readonly gTun: (GeneveTunnel | undefined)[];
  gN = 0;
  readonly tOffs: Uint32Array;
  readonly tLens: Uint32Array;
  tN = 0;
  constructor(cap: number) {
    this.wOffs = new Uint32Array(cap);
    this.wLens = new Uint32Array(cap);
    this.gOffs = new Uint32Array(cap);
    this.gLens = new Uint32Array(cap);
    this.gTun = new Array<GeneveTunnel | undefined>(cap).fill(undefined);
    this.tOffs = new Uint32Array(cap);
    this.tLens = new Uint32Array(cap);
  }
}

interface PeerState {
  cfg: PeerConfig;
  wg: Peer;
  nat: NatPeer;
  handshakes: number;
  lastSeenHandshake: number;
  /** The peer's tunnel address in its allowed IPs (undefined: none). */
  tunnelRemote: string | undefined;
}

export class Gateway implements StatsSource {
  readonly table = new GeneveTunnelTable();
  /** Drops of the routing stage by GatewayDrop. */
  readonly dropCounts = new Float64Array(GATEWAY_DROP_NAMES.length);
  readonly forwarded = { toWireguard: 0, toGeneve: 0, toTun: 0 };
  readonly device: Device;
  nat: Nat;

  private config: GatewayConfig;
  private geneve!: GenevePort;
  private tun!: TunDevice;
  private wg!: WireGuardPort;
  private kernel!: KernelState;
  private readonly clock: () => number;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly peersByName = new Map<string, PeerState>();
  /** Real peer CIDRs → NAT peer (packets from WireGuard). */
  private realToPeer = new PrefixMatcher<NatPeer>();
  /** The gateway's own addresses (local TUN). */
  private readonly local = new PrefixMatcher<true>();
  private readonly localAddrs = new Set<string>();
  /** In-tunnel addresses: ours (on the TUN) and the peers' (→ their WireGuard peer); see the header. */
  private tunnelLocal = new PrefixMatcher<true>();
  private tunnelRemote = new PrefixMatcher<true>();
  private tunnelPlan: TunnelPlan = { peers: [], skipped: [] };
  /** Tunnel addresses on the TUN and routes via it (kernel), as last synced. */
  private readonly tunnelAddrsOnTun = new Set<string>();
  private internal4: Uint8Array | null = null;
  private internal6: Uint8Array | null = null;
  private readonly icmpBucket: TokenBucket;
  private readonly tunnelsById = new Map<number, GeneveTunnelConfig>();
  private readonly podRoutes = new Map<string, PodRouteConfig>();
  private readonly lanesGeneve: Lanes;
  private readonly lanesTun: Lanes;
  private readonly lanesWg: Lanes;
  private housekeeping: NodeJS.Timeout | null = null;
  private stopped = false;

  private constructor(config: GatewayConfig, private readonly opts: GatewayOptions, backend: CryptoBackend) {
    this.config = config;
    this.clock = opts.clock ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    this.icmpBucket = new TokenBucket(opts.icmpRatePerSecond ?? 100, opts.icmpBurst ?? 20);
    const cap = opts.batchSize ?? 64;
    this.lanesGeneve = new Lanes(cap);
    this.lanesTun = new Lanes(cap);
    this.lanesWg = new Lanes(cap);
    this.device = new Device({ backend, mtu: config.wireguard.mtu });
    this.device.setPrivateKey(keyBytes(config.wireguard.privateKey));
    this.nat = this.makeNat(config);
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
    const internal = opts.internalAddress ?? c.geneve.tunnels[0]?.localInternalAddress ?? firstHost(c.cluster.internalCIDR);
    this.addLocalAddress(internal);
    for (const t of c.geneve.tunnels) this.addLocalAddress(t.localInternalAddress);
    const now = this.clock();
    for (const p of c.peers) await this.addPeer(p, now);
    this.planTunnel();

    // Local TUN: the gateway host's interface into the fabric.
    const mtu = c.wireguard.mtu;
    this.tun = TunDevice.open({ name: opts.tunName ?? c.wireguard.interfaceName, mtu, netns: opts.netns });
    this.kernel = new KernelState(this.tun.name, opts.netns);
    for (const a of this.localAddrs) await this.kernel.addAddress(a);
    await this.syncKernelRoutes();

    this.geneve = await GenevePort.open({
      table: this.table, port: c.geneve.port, address: c.geneve.listenAddress, batchSize: batch,
      rxHeadroom: HEADROOM, rxTailroom: TAILROOM, clock: this.clock, onError: this.onError,
      ...(opts.netns === undefined ? {} : { netns: opts.netns }),
      ...(opts.socketBuffer === undefined ? {} : { socketBuffer: opts.socketBuffer }),
      sink: { deliverBatch: (buf, offs, lens, _t, n) => this.onGenevePackets(buf, offs, lens, n) },
    });
    this.wg = new WireGuardPort({
      device: this.device, mtu: MAX_PACKET, batchSize: batch, rxHeadroom: HEADROOM, rxTailroom: TAILROOM,
      clock: this.clock, onError: this.onError,
      ...(opts.socketBuffer === undefined ? {} : { socketBuffer: opts.socketBuffer }),
      sink: { writeBatch: (buf, offs, lens, n) => this.onWireguardPackets(buf, offs, lens, n) },
    });
    await withNetnsAsync(opts.netns, () => this.wg.bind(c.wireguard.listenPort));
    const tunBatch = new PacketBatch({ capacity: batch, headroom: HEADROOM, maxLen: Math.max(mtu, 1500), tailroom: TAILROOM });
    this.tun.start(tunBatch, (b) => this.onTunPackets(b.buf, b.offs, b.lens, b.count));
    this.housekeeping = setInterval(() => this.tick(), 1000);
    this.housekeeping.unref();
    this.wg.poll();
  }

  // =========================================================================================
  // Inputs

  private onGenevePackets(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void {
    const L = this.lanesGeneve;
    const now = this.clock();
    for (let i = 0; i < n; i++) this.routeInside(buf, offs[i]!, lens[i]!, L, now, SRC_GENEVE);
    this.flush(buf, L);
  }

  private onTunPackets(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): void {
    const L = this.lanesTun;
    const now = this.clock();
    for (let i = 0; i < n; i++) this.routeInside(buf, offs[i]!, lens[i]!, L, now, SRC_TUN);
    this.flush(buf, L);
  }

  private onWireguardPackets(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number): number {
    const L = this.lanesWg;
    const now = this.clock();
    for (let i = 0; i < n; i++) this.routeFromPeer(buf, offs[i]!, lens[i]!, L, now);
    this.flush(buf, L);
    return n;
  }

  private flush(buf: Uint8Array, L: Lanes): void {
    if (L.gN > 0) {
      this.forwarded.toGeneve += L.gN;
      this.geneve.sendBatchVia(buf, L.gOffs, L.gLens, L.gTun, L.gN);
      L.gN = 0;
    }
    if (L.wN > 0) {
      this.forwarded.toWireguard += L.wN;
      this.wg.encryptBatch(buf, L.wOffs, L.wLens, L.wN);
      L.wN = 0;
    }
    if (L.tN > 0) {
      this.forwarded.toTun += L.tN;
      this.tun.writeBatch(buf, L.tOffs, L.tLens, L.tN);
      L.tN = 0;
    }
  }

  // =========================================================================================
  // Routing (per packet; no allocation)

  /** A packet from a node, from the gateway host, or generated here. */
  private routeInside(buf: Uint8Array, off: number, len: number, L: Lanes, now: number, src: number): void {
    const v = len > 0 ? buf[off]! >>> 4 : 0;
    let fam: IpFamily;
    let dstOff: number;
    if (v === 4 && len >= IPV4_MIN_HEADER_LEN) { fam = 4; dstOff = off + IPV4_DST_OFFSET; }
    else if (v === 6 && len >= IPV6_HEADER_LEN) { fam = 6; dstOff = off + IPV6_DST_OFFSET; }
    else { this.dropCounts[GatewayDrop.BadPacket]!++; return; }

    if (this.local.lookup(buf, dstOff, fam) !== undefined) {
      if (src === SRC_TUN) { this.dropCounts[GatewayDrop.Loop]!++; return; }
      const i = L.tN++;
      L.tOffs[i] = off;
      L.tLens[i] = len;
      return;
    }
    if (src === SRC_TUN && this.tunnelRemote.lookup(buf, dstOff, fam) !== undefined) {
      // The gateway host's own tunnel traffic (connection check): no NAT, no router hop.
      if (this.tunnelLocal.lookup(buf, fam === 4 ? off + IPV4_SRC_OFFSET : off + IPV6_SRC_OFFSET, fam) === undefined) {
        this.dropCounts[GatewayDrop.TunnelSource]!++;
        return;
      }
      const i = L.wN++;
      L.wOffs[i] = off;
      L.wLens[i] = len;
      return;
    }
    const peer = this.nat.peerFor(buf, off, len);
    if (peer !== undefined) {
      if (src !== SRC_SELF && !this.hop(buf, off, len, fam, L, now)) return;
      const r = this.nat.outbound(buf, off, len, peer, now);
      if (r === NAT_FORWARD) {
        const i = L.wN++;
        L.wOffs[i] = off;
        L.wLens[i] = len;
      } else if (r === NAT_REPLY) {
        // Fragmentation Needed / Packet Too Big for the sender, built in place by the NAT.
        this.routeInside(buf, off, this.nat.replyLength, L, now, SRC_SELF);
      }
      return; // NAT drops are counted by the NAT
    }
    const t = this.table.lookupDestination(buf, dstOff, fam);
    if (t !== undefined) {
      if (src !== SRC_SELF && !this.hop(buf, off, len, fam, L, now)) return;
      const i = L.gN++;
      L.gOffs[i] = off;
      L.gLens[i] = len;
      L.gTun[i] = t;
      return;
    }
    this.dropCounts[GatewayDrop.NoRoute]!++;
  }

  /** A decrypted packet from a peer (its source already checked against the peer's allowed IPs). */
  private routeFromPeer(buf: Uint8Array, off: number, len: number, L: Lanes, now: number): void {
    const v = len > 0 ? buf[off]! >>> 4 : 0;
    let fam: IpFamily;
    let srcOff: number;
    let dstOff: number;
    if (v === 4 && len >= IPV4_MIN_HEADER_LEN) { fam = 4; srcOff = off + IPV4_SRC_OFFSET; dstOff = off + IPV4_DST_OFFSET; }
    else if (v === 6 && len >= IPV6_HEADER_LEN) { fam = 6; srcOff = off + IPV6_SRC_OFFSET; dstOff = off + IPV6_DST_OFFSET; }
    else { this.dropCounts[GatewayDrop.BadPacket]!++; return; }
    if (this.tunnelLocal.lookup(buf, dstOff, fam) !== undefined && this.tunnelRemote.lookup(buf, srcOff, fam) !== undefined) {
      // A peer's tunnel address to ours (its source passed the allowed-IPs check of the peer
      // that decrypted it): to the gateway host as is.
      const i = L.tN++;
      L.tOffs[i] = off;
      L.tLens[i] = len;
      return;
    }
    const peer = this.realToPeer.lookup(buf, srcOff, fam);
    if (peer === undefined) { this.dropCounts[GatewayDrop.UnknownPeerSource]!++; return; }
    if (this.nat.inbound(buf, off, len, peer, now) !== NAT_FORWARD) return; // counted by the NAT
    if (this.local.lookup(buf, dstOff, fam) !== undefined) {
      const i = L.tN++;
      L.tOffs[i] = off;
      L.tLens[i] = len;
      return;
    }
    const t = this.table.lookupDestination(buf, dstOff, fam);
    if (t !== undefined) {
      if (!this.hop(buf, off, len, fam, L, now)) return;
      const i = L.gN++;
      L.gOffs[i] = off;
      L.gLens[i] = len;
      L.gTun[i] = t;
      return;
    }
    if (this.nat.peerFor(buf, off, len) !== undefined) this.dropCounts[GatewayDrop.PeerTransit]!++;
    else this.dropCounts[GatewayDrop.NoRoute]!++;
  }

  /**
   * One router hop: decrement the TTL / hop limit and return true, or — when it would reach 0 —
   * replace the packet by an ICMP Time Exceeded written in its headroom, route that, and
   * return false.
   */
  private hop(buf: Uint8Array, off: number, len: number, fam: IpFamily, L: Lanes, now: number): boolean {
    if (fam === 4) {
      if (buf[off + IPV4_TTL_OFFSET]! > 1) { decrementIpv4Ttl(buf, off); return true; }
    } else {
      const hl = buf[off + IPV6_HOP_LIMIT_OFFSET]!;
      if (hl > 1) { buf[off + IPV6_HOP_LIMIT_OFFSET] = hl - 1; return true; }
    }
    this.dropCounts[GatewayDrop.TtlExpired]!++;
    const from = fam === 4 ? this.internal4 : this.internal6;
    if (from === null) return false;
    const prefix = fam === 4 ? TIME_EXCEEDED_V4_PREFIX : TIME_EXCEEDED_V6_PREFIX;
    // Room for the error's headers and, in front of them, the largest header a later stage writes.
    if (off < prefix + 64) { this.dropCounts[GatewayDrop.NoHeadroom]!++; return false; }
    if (!this.icmpBucket.take(now)) { this.dropCounts[GatewayDrop.IcmpRateLimited]!++; return false; }
    const n = writeTimeExceeded(buf, off, len, from);
    if (n > 0) this.routeInside(buf, off - prefix, n, L, now, SRC_SELF);
    return false;
  }

  // =========================================================================================
  // Configuration

  private makeNat(c: GatewayConfig): Nat {
    const internal = this.opts.internalAddress ?? c.geneve.tunnels[0]?.localInternalAddress ?? firstHost(c.cluster.internalCIDR);
    return new Nat({
      localPodCIDRs: c.cluster.podCIDRs,
      localExternalCIDR: c.cluster.externalCIDR,
      ipMappings: c.ipMappings,
      mtu: c.wireguard.mtu,
      ...(internal.includes(':') ? {} : { icmpSourceV4: internal }),
    });
  }

  private addLocalAddress(addr: string): void {
    if (this.localAddrs.has(addr)) return;
    const bytes = parseAddress(addr);
    this.localAddrs.add(addr);
    this.local.insert({ family: bytes.length === 4 ? 4 : 6, addr: bytes, prefixLen: bytes.length * 8 }, true);
    if (bytes.length === 4) this.internal4 ??= bytes;
    else this.internal6 ??= bytes;
  }

  private async addPeer(p: PeerConfig, now: number): Promise<void> {
    const natPeer = this.nat.addPeer({ name: p.name, remote: p.remote, remapped: p.remapped, mtu: this.config.wireguard.mtu });
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
    for (const c of [...p.remote.podCIDRs, ...p.remote.externalCIDRs]) this.realToPeer.insert(parsePrefix(c), natPeer);
    this.peersByName.set(p.name, { cfg: p, wg: wp, nat: natPeer, handshakes: 0, lastSeenHandshake: 0, tunnelRemote: undefined });
  }

  private removePeer(name: string): void {
    const s = this.peersByName.get(name);
    if (s === undefined) return;
    this.device.removePeer(s.wg);
    this.nat.removePeer(s.nat);
    this.realToPeer.removeValue(s.nat);
    this.peersByName.delete(name);
  }

  /** Peer changes other than the key: the WireGuard peer (sessions, counters, roamed endpoint) is kept. */
  private async updatePeer(name: string, ch: PeerChanges): Promise<void> {
    const s = this.peersByName.get(name);
    if (s === undefined) throw new GatewayApplyError(`peer.update for unknown peer ${name}`);
    const cfg: PeerConfig = { ...s.cfg };
    if (ch.clusterId !== undefined) cfg.clusterId = ch.clusterId;
    if (ch.presharedKey !== undefined) {
      if (ch.presharedKey === null) delete cfg.presharedKey; else cfg.presharedKey = ch.presharedKey;
      this.device.setPresharedKey(s.wg, ch.presharedKey === null ? null : keyBytes(ch.presharedKey));
    }
    if (ch.endpoint !== undefined) {
      if (ch.endpoint === null) delete cfg.endpoint; else cfg.endpoint = ch.endpoint;
      if (ch.endpoint !== null) this.device.setEndpoint(s.wg, await resolveEndpoint(ch.endpoint));
    }
    if (ch.tunnelAddress !== undefined) {
      if (ch.tunnelAddress === null) delete cfg.tunnelAddress; else cfg.tunnelAddress = ch.tunnelAddress;
    }
    if (ch.persistentKeepalive !== undefined) {
      if (ch.persistentKeepalive === null) delete cfg.persistentKeepalive; else cfg.persistentKeepalive = ch.persistentKeepalive;
      this.device.setPersistentKeepalive(s.wg, ch.persistentKeepalive ?? 0, this.clock());
    }
    if (ch.remote !== undefined || ch.remapped !== undefined) {
      if (ch.remote !== undefined) cfg.remote = ch.remote;
      if (ch.remapped !== undefined) cfg.remapped = ch.remapped;
      // New prefix translation: a new NAT peer (its conntrack entries go with the old one).
      this.nat.removePeer(s.nat);
      let natPeer: NatPeer;
      try {
        natPeer = this.nat.addPeer({ name: cfg.name, remote: cfg.remote, remapped: cfg.remapped, mtu: this.config.wireguard.mtu });
      } catch (e) {
        const c0 = s.cfg;
        const old = s.nat;
        s.nat = this.nat.addPeer({ name: c0.name, remote: c0.remote, remapped: c0.remapped, mtu: this.config.wireguard.mtu });
        this.realToPeer.removeValue(old);
        for (const c of [...c0.remote.podCIDRs, ...c0.remote.externalCIDRs]) this.realToPeer.insert(parsePrefix(c), s.nat);
        throw e;
      }
      this.realToPeer.clear();
      for (const o of this.peersByName.values()) {
        if (o === s) continue;
        for (const c of [...o.cfg.remote.podCIDRs, ...o.cfg.remote.externalCIDRs]) this.realToPeer.insert(parsePrefix(c), o.nat);
      }
      s.nat = natPeer;
      this.device.clearAllowedIps(s.wg);
      s.tunnelRemote = undefined; // re-added by planTunnel after the ops
      for (const c of [...cfg.remote.podCIDRs, ...cfg.remote.externalCIDRs]) {
        this.device.addAllowedIp(s.wg, parsePrefix(c));
        this.realToPeer.insert(parsePrefix(c), natPeer);
      }
    }
    s.cfg = cfg;
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
    for (const s of this.peersByName.values()) for (const c of [...s.cfg.remapped.podCIDRs, ...s.cfg.remapped.externalCIDRs]) want.add(c);
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
    const plan: TunnelPlan = (this.opts.tunnelAddresses ?? true)
      ? planTunnelAddresses({ wireguard: this.config.wireguard, peers: [...this.peersByName.values()].map((s) => s.cfg) })
      : { peers: [], skipped: [] };
    const byName = new Map(plan.peers.map((t) => [t.name, t] as const));
    const local = new PrefixMatcher<true>();
    const remote = new PrefixMatcher<true>();
    for (const s of this.peersByName.values()) {
      const t = byName.get(s.cfg.name);
      if (s.tunnelRemote !== undefined && s.tunnelRemote !== t?.remote) this.device.removeAllowedIp(s.wg, parsePrefix(hostCidr(s.tunnelRemote)));
      s.tunnelRemote = t?.remote;
      if (t === undefined) continue;
      // Re-added every time: a peer update that rewrote its allowed IPs dropped it.
      this.device.addAllowedIp(s.wg, parsePrefix(hostCidr(t.remote)));
      local.insert(parsePrefix(hostCidr(t.local)), true);
      remote.insert(parsePrefix(hostCidr(t.remote)), true);
    }
    const before = new Set(this.tunnelPlan.skipped.map((x) => `${x.name}\n${x.reason}`));
    for (const x of plan.skipped) {
      if (!before.has(`${x.name}\n${x.reason}`)) this.onError('tunnel address', new Error(`peer ${x.name}: no in-tunnel connection check: ${x.reason}`));
    }
    this.tunnelLocal = local;
    this.tunnelRemote = remote;
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
      if (op.kind === 'geneve.update') throw new GatewayApplyError('geneve.port/listenAddress changed: restart the gateway to rebind the Geneve socket');
      if (op.kind === 'wireguard.update') {
        const ch = op.changes;
        if (ch.interfaceName !== undefined || ch.cryptoBackend !== undefined || ch.listenAddress !== undefined) {
          throw new GatewayApplyError('wireguard.interfaceName/cryptoBackend/listenAddress changed: restart the gateway');
        }
      }
    }
    const now = this.clock();
    let routesDirty = false;
    for (const op of ops) {
      switch (op.kind) {
        case 'peer.remove': this.removePeer(op.name); routesDirty = true; break;
        case 'peer.update': await this.updatePeer(op.name, op.changes); routesDirty = true; break;
        case 'peer.add': await this.addPeer(op.peer, now); routesDirty = true; break;
        case 'tunnel.remove': this.tunnelRemove(op.id); break;
        case 'tunnel.update': this.tunnelUpdate(op.id, op.changes); routesDirty = true; break;
        case 'tunnel.add': this.tunnelAdd(op.tunnel); routesDirty = true; break;
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
        case 'ipMapping.remove': case 'ipMapping.update': case 'ipMapping.add':
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
      this.nat.setIpMappings(this.config.ipMappings);
    }
    this.config = next ?? {
      ...this.config,
      peers: [...this.peersByName.values()].map((s) => s.cfg),
      geneve: { ...this.config.geneve, tunnels: [...this.tunnelsById.values()], podRoutes: [...this.podRoutes.values()] },
    };
    const tunnelBefore = JSON.stringify(this.tunnelPlan.peers);
    this.planTunnel();
    if (routesDirty || JSON.stringify(this.tunnelPlan.peers) !== tunnelBefore) await this.syncKernelRoutes();
    this.wg.poll();
  }

  /** A new NAT from the current cluster settings with every peer re-added (conntrack starts empty). */
  private rebuildNat(): void {
    const nat = this.makeNat(this.config);
    this.realToPeer = new PrefixMatcher<NatPeer>();
    for (const s of this.peersByName.values()) {
      s.nat = nat.addPeer({ name: s.cfg.name, remote: s.cfg.remote, remapped: s.cfg.remapped, mtu: this.config.wireguard.mtu });
      for (const c of [...s.cfg.remote.podCIDRs, ...s.cfg.remote.externalCIDRs]) this.realToPeer.insert(parsePrefix(c), s.nat);
    }
    this.nat = nat;
  }

  // =========================================================================================
  // Housekeeping and statistics

  private tick(): void {
    if (this.stopped) return;
    const now = this.clock();
    this.nat.expire(now);
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
        handshakes: s.handshakes,
        ...(last === 0 ? {} : { lastHandshakeAtMs: last }),
      });
    }
    return out;
  }

  /** StatsSource: drops by reason from every stage (non-zero only), prefixed by stage. */
  drops(): Readonly<Record<string, number>> {
    const d: Record<string, number> = {};
    const put = (k: string, v: number): void => { if (v > 0) d[k] = (d[k] ?? 0) + v; };
    for (let i = 0; i < GATEWAY_DROP_NAMES.length; i++) put(`route_${GATEWAY_DROP_NAMES[i]!}`, this.dropCounts[i]!);
    const g = this.geneve?.engine.counters.drops;
    if (g !== undefined) for (let i = 1; i < g.length; i++) put(`geneve_${GENEVE_DROP_NAMES[i]!}`, g[i]!);
    for (let i = NAT_DROP_MIN; i < this.nat.drops.length; i++) put(`nat_${natResultName(i)}`, this.nat.drops[i]!);
    for (let i = 0; i < DROP_REASON_COUNT; i++) put(`wg_${DROP_REASON_NAMES[i]!}`, this.device.drops[i]!);
    if (this.geneve !== undefined) {
      const s = this.geneve.stats;
      put('geneve_tx_no_tunnel', s.txNoTunnel);
      put('geneve_tx_no_headroom', s.txNoHeadroom);
      put('geneve_tx_send_failed', s.txSendFailures);
      put('geneve_tx_no_socket', s.txNoSocket);
    }
    if (this.wg !== undefined) {
      const w = this.wg.stats;
      put('wg_handshake_queue_full', w.handshakesDroppedQueueFull);
      put('wg_send_failed', w.sendFailures);
      put('wg_no_socket', w.noSocketForFamily);
    }
    if (this.tun !== undefined) put('tun_write_failed', this.tun.stats.txErrors);
    return d;
  }

  /** StatsSource: conntrack entries. */
  natEntries(): number {
    return this.nat.stats().conntrack.entries;
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
        ...peers[i++]!, name: s.cfg.name,
        endpoint: ep === null ? null : ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`,
        allowedIps: [...s.cfg.remote.podCIDRs, ...s.cfg.remote.externalCIDRs],
        tunnel: tunnelOf(this.tunnelPlan, s.cfg.name),
      });
    }
    const t = this.tun?.stats;
    return {
      peers: out,
      tunnels: [...this.table.tunnels()].map((x) => ({
        name: x.name, vni: x.vni, remoteUnderlay: x.remoteUnderlayText, remoteInternal: formatBytes(x.remoteInternal),
        txPackets: x.txPackets, rxPackets: x.rxPackets, drops: x.drops,
      })),
      podRoutes: this.table.podRoutes().map((r) => ({ podCIDR: `${formatBytes(r.prefix.addr)}/${r.prefix.prefixLen}`, nodeInternalAddress: r.nodeInternalAddress, resolved: r.tunnel !== null })),
      nat: this.nat.stats(),
      drops: { ...this.drops() },
      queues: { ...this.queueDepths() },
      tun: { name: this.tun?.name ?? '', mtu: this.tun?.mtu ?? 0, rxPackets: t?.rxPackets ?? 0, txPackets: t?.txPackets ?? 0, txErrors: t?.txErrors ?? 0 },
      ports: { geneve: this.geneve?.port ?? -1, wireguard: this.wg?.port ?? -1 },
      forwarded: { ...this.forwarded },
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
    try { await this.kernel?.clear(); } catch (e) { err = e; }
    await this.wg?.close();
    await this.geneve?.close();
    await this.tun?.close();
    if (err !== undefined) throw err;
  }
}

// ---------------------------------------------------------------------------------------------

function tunnelSpec(t: GeneveTunnelConfig): GeneveTunnelSpec {
  return {
    vni: t.id, remoteUnderlay: t.remoteUnderlay, localInternalAddress: t.localInternalAddress,
    remoteInternalAddress: t.remoteInternalAddress, mode: t.mode, name: t.nodeName,
  };
}

/** 32 key bytes from the model's validated base64. */
function keyBytes(b64: string): Uint8Array {
  const b = Buffer.from(b64, 'base64');
  if (b.length !== 32) throw new TypeError('a WireGuard key is 32 bytes of base64');
  return new Uint8Array(b.buffer, b.byteOffset, 32).slice();
}

/** "host:port" / "[v6]:port" → Endpoint; DNS names are resolved once (at start or reload). */
async function resolveEndpoint(text: string): Promise<Endpoint> {
  let host: string;
  let port: number;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    host = text.slice(1, close);
    port = Number(text.slice(close + 2));
  } else {
    const colon = text.lastIndexOf(':');
    host = text.slice(0, colon);
    port = Number(text.slice(colon + 1));
  }
  if (!/^[0-9.]+$/.test(host) && !host.includes(':')) host = (await lookup(host)).address;
  return { address: host, port };
}

/** "a.b.c.d/32" or "x::y/128". */
function hostCidr(addr: string): string {
  return `${addr}/${addr.includes(':') ? 128 : 32}`;
}

function tunnelOf(plan: TunnelPlan, name: string): { local: string; remote: string } | null {
  const t = plan.peers.find((x) => x.name === name);
  return t === undefined ? null : { local: t.local, remote: t.remote };
}

function firstHost(cidr: string): string {
  return formatBytes(prefixNthAddress(parsePrefix(cidr), 1));
}

function formatBytes(a: Uint8Array): string {
  return formatAddress(a);
}

function definedOnly<T extends object>(o: T): Partial<{ [K in keyof T]: Exclude<T[K], null> }> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) out[k] = v;
  return out as Partial<{ [K in keyof T]: Exclude<T[K], null> }>;
}

function applyMappingOps(list: GatewayConfig['ipMappings'], ops: readonly ConfigOp[]): GatewayConfig['ipMappings'] {
  const m = new Map(list.map((x) => [x.externalAddress, x.realAddress] as const));
  for (const op of ops) {
    if (op.kind === 'ipMapping.remove') m.delete(op.mapping.externalAddress);
    else if (op.kind === 'ipMapping.update') m.set(op.externalAddress, op.realAddress);
    else if (op.kind === 'ipMapping.add') m.set(op.mapping.externalAddress, op.mapping.realAddress);
  }
  return [...m].map(([externalAddress, realAddress]) => ({ externalAddress, realAddress }));
}
