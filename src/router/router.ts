/**
 * The gateway's router, I/O-free: bytes, `now` and tables in; packets sorted into output lanes
 * (to peers, to nodes, to the gateway host) and counted drops out. The gateway shell
 * (src/gateway) and the in-process simulation (src/demo/sim.ts) both run this class, joined to
 * real sockets or to the in-memory network (src/io/memory-net.ts).
 *
 * Per packet, on the buffer it arrived in (no copy, no allocation):
 * - parsed once into an IpView, handed to the hooks (address translation is theirs alone: the
 *   compiled rules, src/rules, attached at the hook points);
 * - from a node or the gateway host (or generated here):
 *   1. destination = one of the gateway's own addresses → host lane (the kernel answers);
 *      from the host itself that is a loop;
 *   2. from the host, destination = a peer's in-tunnel address → that peer, untranslated
 *      (Liqo's connection check; the source must be our tunnel address);
 *   3. destination inside a peer's REMAPPED CIDRs (PeerTable, as the packet arrived: before the
 *      hooks translate it to the real one, which several peers may share) → the tunnel MTU
 *      check (a Fragmentation Needed / Packet Too Big written in its place is routed back like
 *      the router's own traffic; for the router's own packets after POSTROUTING) → TTL − 1 →
 *      FORWARD, POSTROUTING → that peer's lane;
 *   4. destination = a node's internal address or a pod route → TTL − 1 → that node's lane;
 *   5. otherwise no_route.
 * - from a peer (decrypted; the peer is passed with the packet, so peers whose real CIDRs
 *   overlap can share the router): the peer's tunnel address to ours → host lane; else
 *   PREROUTING → own address → host lane; node or pod → TTL − 1 → node lane; another peer's
 *   CIDR → peer_transit (Liqo gateways do not transit).
 * - TTL / hop limit: one hop on every forward (hop.ts). A packet that would leave with TTL 0 is
 *   replaced by an ICMP Time Exceeded sourced from the gateway's internal address and routed as
 *   the router's own traffic (so towards a peer the rules give it a source the peer accepts and
 *   translate its quote).
 *
 * Liqo mode (setSteering, see steer.ts): after the local and tunnel-address checks, policy
 * routes (RouteConfigurations) choose the lane instead of the peer table and node routes.
 *
 * Lanes (lanes.ts): one RouterLanes per input, sized to its batch. Headroom: an ICMP error needs
 * 48 bytes (IPv6) in front of the packet plus what a later stage writes (Geneve, WireGuard):
 * inputs leave ≥ 112.
 */
import type { IpFamily } from '../packet/addr.js';
import { IP_OK, IpView, parseIp } from '../packet/ip-view.js';
import { isIpv6LinkLocalControl } from '../packet/ipv6.js';
import { NAT_FORWARD, NAT_REPLY } from '../nat/results.js';
import { PrefixMatcher } from '../route/prefix-matcher.js';
import {
  HOOK_COUNT,
  HOOK_FORWARD,
  HOOK_INPUT,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_HOST,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_HOST,
  SOURCE_NODE,
  SOURCE_PEER,
  SOURCE_SELF,
  VERDICT_ACCEPT,
  VERDICT_REPLY,
  type PacketHook,
} from './hooks.js';
import { firstOfEachFamily, hostMatcher } from './addresses.js';
import { ROUTER_DROP_NAMES, RouterDrop } from './drops.js';
import { TimeExceededWriter, decrementHop, timeExceededPrefix, ttlLeft } from './hop.js';
import { RouterLanes } from './lanes.js';
import { symmetricFlowHash, type TunnelSpread } from './spread.js';
import { TunnelAddresses } from './tunnel-addresses.js';
import type { PeerEntry, PeerTable } from './peer-table.js';
import { RouterPeers, type RouterPeer } from './peers.js';
import { LANE_HOST, LANE_NODE, LANE_PEER, type Steering } from './steer.js';

/** Next hops towards nodes (the Geneve tunnel table): a tunnel for a destination address. */
export interface NodeRoutes<G> {
  lookupDestination(buf: Uint8Array, addrOff: number, family: IpFamily): G | undefined;
}

export interface RouterOptions<G> {
  /** Peers by remapped CIDR and their tunnel MTU. */
  readonly peers: PeerTable;
  readonly nodes: NodeRoutes<G>;
  /** Rate of generated ICMP Time Exceeded errors (per second, burst). Default 100/20. */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
}

export class Router<P, G> {
  /** Drops by RouterDrop. */
  readonly drops = new Float64Array(ROUTER_DROP_NAMES.length);
  /**
   * Packets from the host that are the kernel's own IPv6 link-local control (router
   * solicitations, MLD, neighbour discovery: packet/ipv6.ts isIpv6LinkLocalControl): not routed,
   * and not a drop — the fabric carries no link-local traffic.
   */
  ipv6LinkLocal = 0;
  private table: PeerTable;
  private readonly nodes: NodeRoutes<G>;
  private readonly peers = new RouterPeers<P>();
  private local = new PrefixMatcher<true>();
  private internal4: Uint8Array | null = null;
  private internal6: Uint8Array | null = null;
  private readonly tunnels = new TunnelAddresses<P>();
  private readonly hooks: PacketHook[][] = [];
  private readonly timeExceeded: TimeExceededWriter;
  private readonly v = new IpView();
  private readonly meta = new PacketMeta();
  /** Liqo mode (see steer.ts): routing by policy rules, the peer table not consulted. */
  private steering: Steering<G> | null = null;

  constructor(opts: RouterOptions<G>) {
    this.table = opts.peers;
    this.nodes = opts.nodes;
    this.timeExceeded = new TimeExceededWriter(this.drops, opts.icmpRatePerSecond ?? 100, opts.icmpBurst ?? 20);
    for (let i = 0; i < HOOK_COUNT; i++) this.hooks.push([]);
  }

  // ------------------------------------------------------------------ tables (allocate)

  /** The peer table in force. */
  get peerTable(): PeerTable {
    return this.table;
  }

  /**
   * Adds a peer: `entry` from this router's PeerTable, `link` what the shell encrypts with (a
   * WireGuard Peer), `dev` its tunnel's name for rules; `more`: the links of its tunnels 1..
   * (Liqo's further ports), over which its flows spread (spread.ts). Throws on a link or entry
   * already added (API misuse).
   */
  addPeer(name: string, entry: PeerEntry, link: P, dev = '', more: readonly P[] | TunnelSpread<P> = []): RouterPeer<P> {
    return this.peers.add(name, entry, link, dev, more);
  }

  removePeer(rp: RouterPeer<P>): void {
    if (!this.peers.remove(rp)) return;
    this.tunnels.removePeer(rp);
  }

  /** The peer of a link (undefined when not added). */
  peerOf(link: P): RouterPeer<P> | undefined {
    return this.peers.get(link);
  }

  /**
   * Replaces the peer table (cluster CIDRs or the MTU changed). `entryOf` gives each peer's
   * entry in the new table; router peers are re-made with it and returned by name.
   */
  replacePeerTable(table: PeerTable, entryOf: (rp: RouterPeer<P>) => PeerEntry): Map<string, RouterPeer<P>> {
    const old = this.peers.clear();
    this.table = table;
    const out = new Map<string, RouterPeer<P>>();
    for (const rp of old) out.set(rp.name, this.addPeer(rp.name, entryOf(rp), rp.link, rp.dev, rp.spread ?? []));
    // Tunnel addresses point at router peers: the shell re-applies them (setTunnelAddresses).
    this.tunnels.clearPeers();
    return out;
  }

  /**
   * The gateway's own addresses (delivered to the host lane). The first of each family is the
   * source of generated ICMP errors.
   */
  setLocalAddresses(addrs: readonly string[]): void {
    const local = hostMatcher(addrs.map((a) => [a, true] as const));
    const first = firstOfEachFamily(addrs);
    this.local = local;
    this.internal4 = first.v4;
    this.internal6 = first.v6;
  }

  /**
   * In-tunnel addresses: ours (on the host) and each peer's (see src/control/tunnel-address.ts).
   * `link`: the tunnel the address lies in (default the peer's first); the host's traffic to it
   * takes that tunnel, not the spread, so each tunnel's connection check tests that tunnel.
   */
  setTunnelAddresses(
    locals: readonly string[],
    remotes: readonly { address: string; peer: RouterPeer<P>; link?: P }[],
  ): void {
    this.tunnels.set(locals, remotes);
  }

  /** The link the parsed packet (this.v) leaves by towards `rp`: its tunnel by flow hash (spread.ts). */
  private linkOf(rp: RouterPeer<P>, buf: Uint8Array): P {
    const sp = rp.spread;
    return sp === null ? rp.link : sp.linkFor(symmetricFlowHash(buf, this.v));
  }

  /**
   * Liqo mode on (a Steering: policy routes choose the lane, interface names and marks reach
   * the hooks) or off (null: the peer table's remapped CIDRs and the node routes route).
   */
  setSteering(s: Steering<G> | null): void {
    this.steering = s;
  }

  get steered(): Steering<G> | null {
    return this.steering;
  }

  /** Attaches a stage at a hook point (HOOK_*), after those already there. */
  attach(hook: number, stage: PacketHook): void {
    if (!(hook >= 0 && hook < HOOK_COUNT)) throw new RangeError(`no hook point ${hook}`);
    this.hooks[hook]!.push(stage);
  }

  detach(hook: number, stage: PacketHook): boolean {
    const list = this.hooks[hook];
    const i = list === undefined ? -1 : list.indexOf(stage);
    if (i < 0) return false;
    list!.splice(i, 1);
    return true;
  }

  // ------------------------------------------------------------------ per packet (no allocation)

  /**
   * Routes packets i < n from nodes (decapsulated Geneve) into `L`; `tunnels[i]`, when given, is
   * the tunnel packet i came through (its interface is the packet's iif in Liqo mode).
   */
  fromNodes(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    n: number,
    now: number,
    L: RouterLanes<P, G>,
    tunnels?: readonly G[],
  ): void {
    if (n > L.capacity) throw new RangeError(`router: ${n} packets for lanes of ${L.capacity}`);
    for (let i = 0; i < n; i++) this.routeInside(buf, offs[i]!, lens[i]!, L, now, SOURCE_NODE, tunnels?.[i]);
  }

  /** Routes packets i < n from the gateway host (the local TUN) into `L`. */
  fromHost(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number, now: number, L: RouterLanes<P, G>): void {
    if (n > L.capacity) throw new RangeError(`router: ${n} packets for lanes of ${L.capacity}`);
    for (let i = 0; i < n; i++) {
      if (isIpv6LinkLocalControl(buf, offs[i]!, lens[i]!)) this.ipv6LinkLocal++;
      else this.routeInside(buf, offs[i]!, lens[i]!, L, now, SOURCE_HOST);
    }
  }

  /** Routes decrypted packets i < n; links[i] is the peer whose session decrypted packet i. */
  fromPeers(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    links: readonly P[],
    n: number,
    now: number,
    L: RouterLanes<P, G>,
  ): void {
    if (n > L.capacity) throw new RangeError(`router: ${n} packets for lanes of ${L.capacity}`);
    for (let i = 0; i < n; i++) this.routeFromPeer(buf, offs[i]!, lens[i]!, links[i]!, L, now);
  }

  /** Parses the packet at buf[off, +len) into this.v; false (a counted drop) when it is no IP packet. */
  private parse(buf: Uint8Array, off: number, len: number): boolean {
    if (parseIp(buf, off, len, this.v) === IP_OK) return true;
    this.drops[RouterDrop.BadPacket]!++;
    return false;
  }

  private routeInside(
    buf: Uint8Array,
    off: number,
    len: number,
    L: RouterLanes<P, G>,
    now: number,
    source: number,
    from?: G,
  ): void {
    const v = this.v;
    if (!this.parse(buf, off, len)) return;
    const meta = this.meta;
    const st = this.steering;
    // The peer by the destination as the packet arrived (a remapped address), before rules at
    // PREROUTING/OUTPUT translate it to the real one, which several peers may share
    // (src/rules/from-nat.ts); it is also the connection's zone.
    const entry = source === SOURCE_NODE ? HOOK_PREROUTING : HOOK_OUTPUT;
    let np = st === null ? this.table.peerForParsed(buf, v) : undefined;
    const inDev = st !== null && source === SOURCE_NODE ? st.nodeDevice(from) : '';
    meta.begin(source, OUTPUT_NONE, '', inDev, '', np === undefined ? 0 : np.zone);
    if (!this.runHooks(entry, buf, now, L)) return;
    const fam = v.family;

    if (this.local.lookup(buf, v.dstOff, fam) !== undefined) {
      if (source === SOURCE_HOST) {
        this.drops[RouterDrop.Loop]!++;
        return;
      }
      meta.output = OUTPUT_HOST;
      if (!this.runHooks(HOOK_INPUT, buf, now, L)) return;
      L.toHost.push(off, len);
      return;
    }
    if (source === SOURCE_HOST) {
      const tp = this.tunnels.remote.lookup(buf, v.dstOff, fam);
      if (tp !== undefined) {
        // The gateway host's own tunnel traffic (connection check): no NAT, no router hop.
        if (this.tunnels.local.lookup(buf, v.srcOff, fam) === undefined) {
          this.drops[RouterDrop.TunnelSource]!++;
          return;
        }
        meta.output = OUTPUT_PEER;
        meta.peer = tp.name;
        if (!this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
        L.toPeers.push(off, len, this.tunnels.link.lookup(buf, v.dstOff, fam) ?? tp.link);
        return;
      }
    }
    if (st !== null) {
      // Locally generated traffic (host, router) has no input interface: rules with iif skip it.
      this.steer(st, buf, off, len, L, now, source, source === SOURCE_NODE ? st.nodeIif(from) : 0);
      return;
    }
    if (np === undefined && this.hooks[entry]!.length > 0) np = this.table.peerForParsed(buf, v);
    if (np !== undefined) {
      const rp = this.peers.byIndex[np.index]!;
      meta.output = OUTPUT_PEER;
      meta.peer = rp.name;
      meta.outDev = rp.dev;
      if (source !== SOURCE_SELF) {
        // As the kernel's ip_forward: an expiring TTL first, then the tunnel MTU (its error quotes
        // the packet with the TTL it arrived with), then the hop.
        if (ttlLeft(buf, off, fam) && !this.fitsTunnel(buf, np, L, now)) return;
        if (!this.hop(buf, off, len, fam, L, now)) return;
      }
      if (source === SOURCE_NODE && !this.runHooks(HOOK_FORWARD, buf, now, L)) return;
      if (!this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
      if (source === SOURCE_SELF && !this.fitsTunnel(buf, np, L, now)) return;
      L.toPeers.push(off, len, this.linkOf(rp, buf));
      return;
    }
    const t = this.nodes.lookupDestination(buf, v.dstOff, fam);
    if (t !== undefined) {
      meta.output = OUTPUT_NODE;
      if (source !== SOURCE_SELF && !this.hop(buf, off, len, fam, L, now)) return;
      if (source === SOURCE_NODE && !this.runHooks(HOOK_FORWARD, buf, now, L)) return;
      if (!this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
      L.toNodes.push(off, len, t);
      return;
    }
    this.drops[RouterDrop.NoRoute]!++;
  }

  private routeFromPeer(buf: Uint8Array, off: number, len: number, link: P, L: RouterLanes<P, G>, now: number): void {
    const v = this.v;
    if (!this.parse(buf, off, len)) return;
    const rp = this.peers.ofLink(link);
    if (rp === undefined) {
      this.drops[RouterDrop.UnknownPeer]!++;
      return;
    }
    const meta = this.meta;
    const st = this.steering;
    meta.begin(
      SOURCE_PEER,
      OUTPUT_NONE,
      rp.name,
      st !== null ? st.devices.tunnel : rp.dev,
      '',
      st !== null ? 0 : rp.entry.zone,
    );
    if (!this.runHooks(HOOK_PREROUTING, buf, now, L)) return;
    const fam = v.family;
    if (
      this.tunnels.local.lookup(buf, v.dstOff, fam) !== undefined &&
      this.tunnels.remote.lookup(buf, v.srcOff, fam) === rp
    ) {
      // This peer's tunnel address to ours: to the gateway host as is.
      meta.output = OUTPUT_HOST;
      if (!this.runHooks(HOOK_INPUT, buf, now, L)) return;
      L.toHost.push(off, len);
      return;
    }
    if (st !== null) {
      if (this.local.lookup(buf, v.dstOff, fam) !== undefined) {
        meta.output = OUTPUT_HOST;
        if (!this.runHooks(HOOK_INPUT, buf, now, L)) return;
        L.toHost.push(off, len);
        return;
      }
      this.steer(st, buf, off, len, L, now, SOURCE_PEER, st.tunnelIif);
      return;
    }
    if (this.local.lookup(buf, v.dstOff, fam) !== undefined) {
      meta.output = OUTPUT_HOST;
      if (!this.runHooks(HOOK_INPUT, buf, now, L)) return;
      L.toHost.push(off, len);
      return;
    }
    const t = this.nodes.lookupDestination(buf, v.dstOff, fam);
    if (t !== undefined) {
      meta.output = OUTPUT_NODE;
      if (!this.hop(buf, off, len, fam, L, now, rp)) return;
      if (!this.runHooks(HOOK_FORWARD, buf, now, L)) return;
      if (!this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
      L.toNodes.push(off, len, t);
      return;
    }
    if (this.table.peerForParsed(buf, v) !== undefined) this.drops[RouterDrop.PeerTransit]!++;
    else this.drops[RouterDrop.NoRoute]!++;
  }

  /**
   * The tunnel MTU check towards peer entry `np` (PeerTable.checkMtu): true to go on; a
   * Fragmentation Needed / Packet Too Big written in the packet's place is routed as our own.
   */
  private fitsTunnel(buf: Uint8Array, np: PeerEntry, L: RouterLanes<P, G>, now: number): boolean {
    const v = this.v;
    const r = this.table.checkMtu(buf, v, np, now);
    if (r === NAT_FORWARD) return true;
    if (r === NAT_REPLY) this.routeInside(buf, v.off, this.table.replyLength, L, now, SOURCE_SELF);
    return false; // other results are drops the peer table counted
  }

  /**
   * Liqo mode, after PREROUTING / OUTPUT and the local-address check: the policy route's next
   * hop chooses the lane (steer.ts); without one the node table decides, as the kernel's main
   * table would. Forwarded packets lose one TTL, pass FORWARD (not the host's own: OUTPUT →
   * POSTROUTING), then POSTROUTING.
   */
  private steer(
    st: Steering<G>,
    buf: Uint8Array,
    off: number,
    len: number,
    L: RouterLanes<P, G>,
    now: number,
    source: number,
    iif: number,
  ): void {
    const v = this.v;
    const meta = this.meta;
    const fam = v.family;
    const hop = st.policy.route(buf, off, iif, meta.mark);
    const lane = hop === undefined ? LANE_NODE : hop.lane;
    const gw = hop?.gwBytes ?? null;
    let rp: RouterPeer<P> | undefined;
    let t: G | undefined;
    if (lane === LANE_PEER) {
      rp = gw === null ? this.peers.sole : this.tunnels.remote.lookup(gw, 0, gw.length === 4 ? 4 : 6);
      if (rp === undefined) {
        this.drops[RouterDrop.NoRoute]!++;
        return;
      }
      if (source === SOURCE_PEER) {
        this.drops[RouterDrop.PeerTransit]!++;
        return;
      }
      meta.output = OUTPUT_PEER;
      meta.peer = rp.name;
      meta.outDev = hop!.dev !== '' ? hop!.dev : st.devices.tunnel;
    } else if (lane === LANE_NODE) {
      t =
        gw === null
          ? this.nodes.lookupDestination(buf, v.dstOff, fam)
          : this.nodes.lookupDestination(gw, 0, gw.length === 4 ? 4 : 6);
      if (t === undefined) {
        this.drops[RouterDrop.NoRoute]!++;
        return;
      }
      meta.output = OUTPUT_NODE;
      const named = st.nodeDevice(t);
      meta.outDev = named !== '' ? named : (hop?.dev ?? '');
    } else {
      meta.output = OUTPUT_HOST;
      meta.outDev = hop!.dev !== '' ? hop!.dev : st.devices.host;
    }
    if (source !== SOURCE_SELF && !this.hop(buf, off, len, fam, L, now)) return;
    if ((source === SOURCE_NODE || source === SOURCE_PEER) && !this.runHooks(HOOK_FORWARD, buf, now, L)) return;
    if (!this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
    if (rp !== undefined) L.toPeers.push(off, len, this.linkOf(rp, buf));
    else if (t !== undefined) L.toNodes.push(off, len, t);
    else L.toHost.push(off, len);
  }

  /**
   * Runs the stages at `hook`; false (counted as filtered) when one drops the packet. A
   * VERDICT_REPLY's reply (never one about the router's own packet) is routed as our own.
   */
  private runHooks(hook: number, buf: Uint8Array, now: number, L: RouterLanes<P, G>): boolean {
    const list = this.hooks[hook]!;
    const m = this.meta;
    if (m.skip !== 0 && ((m.skip >>> hook) & 1) !== 0 && list.length === 1 && list[0]!.owner === m.skipOwner)
      return true;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!.process(buf, this.v, this.meta, now);
      if (r !== VERDICT_ACCEPT) {
        this.drops[RouterDrop.Filtered]!++;
        if (r === VERDICT_REPLY && this.meta.source !== SOURCE_SELF)
          this.routeInside(buf, this.meta.replyOff, this.meta.replyLen, L, now, SOURCE_SELF);
        return false;
      }
    }
    return true;
  }

  /**
   * One router hop: decrement the TTL / hop limit and return true, or — when it would reach 0 —
   * replace the packet by an ICMP Time Exceeded written in its headroom, route that, and
   * return false. `back`: the peer the packet came from (see errorToPeer).
   */
  private hop(
    buf: Uint8Array,
    off: number,
    len: number,
    fam: IpFamily,
    L: RouterLanes<P, G>,
    now: number,
    back?: RouterPeer<P>,
  ): boolean {
    if (decrementHop(buf, off, fam)) return true;
    this.drops[RouterDrop.TtlExpired]!++;
    const n = this.timeExceeded.write(buf, off, len, fam, fam === 4 ? this.internal4 : this.internal6, now);
    if (n === 0) return false;
    const start = off - timeExceededPrefix(fam);
    if (back !== undefined) this.errorToPeer(buf, start, n, back, L, now);
    else this.routeInside(buf, start, n, L, now, SOURCE_SELF);
    return false;
  }

  /**
   * YAML mode: the router's own error about a packet from peer `rp` goes back to `rp` (a
   * gateway does not transit: the packet's source is behind that peer), routed before OUTPUT as
   * the kernel routes its own packets. Routing by its destination, as the kernel does, fails
   * when the translation of the source was still to come (rules: snat at postrouting) and the
   * peer's real CIDR overlaps a local one: the error would go to a local pod (README deviations).
   */
  private errorToPeer(
    buf: Uint8Array,
    off: number,
    len: number,
    rp: RouterPeer<P>,
    L: RouterLanes<P, G>,
    now: number,
  ): void {
    const v = this.v;
    if (!this.parse(buf, off, len)) return;
    this.meta.begin(SOURCE_SELF, OUTPUT_PEER, rp.name, '', rp.dev, rp.entry.zone);
    if (!this.runHooks(HOOK_OUTPUT, buf, now, L) || !this.runHooks(HOOK_POSTROUTING, buf, now, L)) return;
    if (this.table.checkMtu(buf, v, rp.entry, now) === NAT_FORWARD) L.toPeers.push(off, len, this.linkOf(rp, buf));
  }
}
