/**
 * The Geneve tunnel table: who is at the other end of each VNI, and which tunnel an inner packet
 * leaves by.
 *
 * Liqo's fabric (shared/liqo/README.md, GeneveTunnel/InternalNode/InternalFabric CRDs): one
 * tunnel per (gateway, node) pair on UDP 6091; the VNI is GeneveTunnel.spec.id; each end holds
 * one /32 of the internal CIDR 10.80.0.0/16 (gateway: InternalFabric.spec.interface.gateway.ip,
 * node: InternalNode.spec.interface.node.ip). The gateway routes each local pod (or a node's
 * pod CIDR) to the internal address of the node that hosts it ("pod routes"); a node routes the
 * remote clusters' CIDRs (InternalFabric.spec.remoteCIDRs) to the gateway's internal address.
 *
 * Indexes:
 * - receive: (VNI, underlay source address) → tunnel. Source addresses are matched as the text
 *   a UDP socket reports (see lookupReceive) or as bytes (lookupReceiveBytes).
 * - send: the inner destination address → the tunnel whose remote internal address it is (a
 *   /32 or /128 host route), else the longest matching pod route → its next hop's tunnel.
 *
 * Updates (add/set/remove, pod routes) happen at run time between packets; lookups never
 * allocate. Tunnel objects are long-lived: `set` on an existing (VNI, remote) updates it in
 * place so that references held elsewhere stay valid and counters survive.
 */

import {
  AddressParseError,
  addressEquals,
  familyOf,
  formatAddress,
  parseAddress,
  parsePrefix,
  type IpFamily,
  type Prefix,
} from '../packet/addr.js';
import { MAC_LEN, MacParseError, parseMac } from '../packet/ethernet.js';
import { IPV4_DST_OFFSET, IPV4_MIN_HEADER_LEN } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN } from '../packet/ipv6.js';
import { PrefixTable } from '../route/table.js';
import { checkGeneveOptionsBlock, GENEVE_LIQO_UDP_PORT, GENEVE_MAX_VNI } from './header.js';
import { type GeneveMode } from './mtu.js';
import { STAT_DROPS, STAT_RX_BYTES, STAT_RX_PACKETS, STAT_TX_BYTES, STAT_TX_PACKETS } from './reasons.js';

/** A configuration problem in a tunnel or pod route. The message names the field and what to fix. */
export class GeneveConfigError extends Error {
  override readonly name = 'GeneveConfigError';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`geneve ${field}: ${reason}`);
  }
}

/** What the control layer hands in for one tunnel. Addresses may be text or 4/16-byte arrays. */
export interface GeneveTunnelSpec {
  /** VNI (GeneveTunnel.spec.id), 0..2^24-1. */
  vni: number;
  /** Underlay address of the other end (the node, or the gateway). */
  remoteUnderlay: string | Uint8Array;
  /** UDP destination port at the other end. Default 6091 (Liqo). */
  remotePort?: number;
  /** Our underlay address; needed only to build whole outer IP packets (encapsulateIp). */
  localUnderlay?: string | Uint8Array;
  /** This end's internal address (one /32 of the internal CIDR). */
  localInternalAddress: string | Uint8Array;
  /** The other end's internal address. */
  remoteInternalAddress: string | Uint8Array;
  /** 'l3' (inner IP) or 'l2' (inner Ethernet, as Liqo's kernel geneve devices). Default 'l3'. */
  mode?: GeneveMode;
  /** L2: our MAC. Default: a locally administered MAC derived from the local internal address. */
  localMac?: string | Uint8Array;
  /** L2: the peer's MAC if known in advance; otherwise learned from ARP and received frames. */
  remoteMac?: string | Uint8Array;
  /** Options (whole TLVs, ≤ 252 bytes) to put in every header we send. Default none. */
  options?: Uint8Array;
  /** A label for logs and metrics (e.g. the node name). */
  name?: string;
}

const NO_BYTES = new Uint8Array(0);

/**
 * One tunnel. Fields are public for the engine's hot path; treat them as read-only outside
 * src/geneve (change a tunnel through GeneveTunnelTable.set).
 */
export class GeneveTunnel {
  // Identity (the table's key): fixed for the tunnel's life.
  readonly vni: number;
  readonly remoteUnderlay: Uint8Array;
  readonly underlayFamily: IpFamily;
  /** The remote underlay address as a UDP socket reports it (RFC 5952 text for IPv6). */
  readonly remoteUnderlayText: string;
  /** Second accepted spelling: "::ffff:a.b.c.d" for an IPv4 remote seen on a dual-stack socket. */
  readonly remoteUnderlayAlias: string;
  // Configuration: written by configure() (the initial values never survive the constructor).
  remotePort = 0;
  localUnderlay: Uint8Array | null = null;
  localInternal: Uint8Array = NO_BYTES;
  remoteInternal: Uint8Array = NO_BYTES;
  internalFamily: IpFamily = 4;
  mode: GeneveMode = 'l3';
  /** mode === 'l2', as a field so that the hot path compares a boolean. */
  l2 = false;
  readonly localMac = new Uint8Array(MAC_LEN);
  /** The peer's MAC, valid when remoteMacKnown. */
  readonly remoteMac = new Uint8Array(MAC_LEN);
  remoteMacKnown = false;
  /** The peer MAC came from configuration: never overwritten by learning. */
  remoteMacStatic = false;
  /** Pre-built TX options and whether any of them is critical (the C bit we send). */
  options: Uint8Array = NO_BYTES;
  optionsCritical = false;
  name = '';
  // Run-time state (configure() only resets the L2 neighbour state above when it must).
  /** `now` of the last ARP request we emitted (rate limit); -Infinity before the first. */
  lastArpRequestAt = -Infinity;
  /**
   * Per-tunnel counters (inner packets/bytes; drops attributable to this tunnel), indexed by
   * STAT_TX_PACKETS..STAT_DROPS (a typed array for the reason given in reasons.ts).
   */
  readonly stats = new Float64Array(STAT_DROPS + 1);

  /** Use GeneveTunnelTable.add/set; the constructor trusts a validated spec. */
  constructor(v: ValidatedSpec) {
    this.vni = v.vni;
    this.remoteUnderlay = v.remoteUnderlay;
    this.underlayFamily = familyOf(v.remoteUnderlay);
    this.remoteUnderlayText = formatAddress(v.remoteUnderlay);
    this.remoteUnderlayAlias =
      this.underlayFamily === 4 ? `::ffff:${this.remoteUnderlayText}` : this.remoteUnderlayText;
    this.configure(v, false);
  }

  /**
   * Apply a validated spec with this tunnel's (VNI, remote underlay), in place: counters stay.
   * A configured peer MAC is taken as static; without one, a previously static MAC is forgotten,
   * and so is a learned one when `neighbourChanged` (mode or internal address changed, so the
   * peer is a different L2 neighbour). Internal: GeneveTunnelTable re-indexes around the call.
   */
  configure(v: ValidatedSpec, neighbourChanged: boolean): void {
    this.remotePort = v.remotePort;
    this.localUnderlay = v.localUnderlay;
    this.localInternal = v.localInternal;
    this.remoteInternal = v.remoteInternal;
    this.internalFamily = familyOf(v.localInternal);
    this.mode = v.mode;
    this.l2 = v.mode === 'l2';
    this.localMac.set(v.localMac);
    if (v.remoteMac !== null) {
      this.remoteMac.set(v.remoteMac);
      this.remoteMacKnown = true;
      this.remoteMacStatic = true;
    } else if (this.remoteMacStatic || neighbourChanged) {
      this.remoteMac.fill(0);
      this.remoteMacKnown = false;
      this.remoteMacStatic = false;
      this.lastArpRequestAt = -Infinity;
    }
    this.options = v.options;
    this.optionsCritical = v.optionsCritical;
    this.name = v.name;
  }

  get txPackets(): number {
    return this.stats[STAT_TX_PACKETS]!;
  }
  get txBytes(): number {
    return this.stats[STAT_TX_BYTES]!;
  }
  get rxPackets(): number {
    return this.stats[STAT_RX_PACKETS]!;
  }
  get rxBytes(): number {
    return this.stats[STAT_RX_BYTES]!;
  }
  get drops(): number {
    return this.stats[STAT_DROPS]!;
  }

  /** Key of the tunnel in the table: VNI and remote underlay address. */
  get key(): string {
    return tunnelKey(this.vni, this.remoteUnderlayText);
  }
}

/** A spec after parsing and checking (internal). */
export interface ValidatedSpec {
  vni: number;
  remoteUnderlay: Uint8Array;
  remotePort: number;
  localUnderlay: Uint8Array | null;
  localInternal: Uint8Array;
  remoteInternal: Uint8Array;
  mode: GeneveMode;
  localMac: Uint8Array;
  remoteMac: Uint8Array | null;
  options: Uint8Array;
  optionsCritical: boolean;
  name: string;
}

function tunnelKey(vni: number, remoteText: string): string {
  return `${vni}|${remoteText}`;
}

/** The table key of a tunnel to the underlay address `remoteUnderlay` (bytes, canonical text). */
function specKey(vni: number, remoteUnderlay: Uint8Array): string {
  return tunnelKey(vni, formatAddress(remoteUnderlay));
}

function addressField(field: string, v: string | Uint8Array): Uint8Array {
  if (v instanceof Uint8Array) {
    if (v.length !== 4 && v.length !== 16)
      throw new GeneveConfigError(field, `an address is 4 or 16 bytes, got ${v.length}`);
    return new Uint8Array(v);
  }
  try {
    return parseAddress(v);
  } catch (e) {
    if (e instanceof AddressParseError) throw new GeneveConfigError(field, `expected an IP address: ${e.message}`);
    throw e;
  }
}

function macField(field: string, v: string | Uint8Array): Uint8Array {
  let mac: Uint8Array | null = null;
  if (v instanceof Uint8Array) {
    if (v.length === MAC_LEN) mac = new Uint8Array(v);
  } else {
    try {
      mac = parseMac(v);
    } catch (e) {
      if (!(e instanceof MacParseError)) throw e;
    }
  }
  if (mac === null) throw new GeneveConfigError(field, 'expected a MAC address like "02:00:5e:00:00:01"');
  if ((mac[0]! & 1) !== 0) throw new GeneveConfigError(field, 'a multicast MAC cannot be a tunnel end');
  if (mac.every((b) => b === 0)) throw new GeneveConfigError(field, 'the all-zero MAC cannot be a tunnel end');
  return mac;
}

/**
 * Default local MAC: locally administered, unicast (02:…), followed by 'W' (0x57) and the last
 * four bytes of the local internal address, so each end of a fabric gets a distinct, stable MAC.
 */
export function defaultLocalMac(localInternal: Uint8Array): Uint8Array {
  const mac = new Uint8Array(MAC_LEN);
  mac[0] = 0x02;
  mac[1] = 0x57;
  mac.set(localInternal.subarray(localInternal.length - 4), 2);
  return mac;
}

/** Check and normalise a spec. Throws GeneveConfigError naming the field. */
export function validateTunnelSpec(spec: GeneveTunnelSpec): ValidatedSpec {
  const vni = spec.vni;
  if (!Number.isInteger(vni) || vni < 0 || vni > GENEVE_MAX_VNI) {
    throw new GeneveConfigError(
      'vni',
      `a VNI is an integer 0..${GENEVE_MAX_VNI} (GeneveTunnel.spec.id), got ${String(vni)}`,
    );
  }
  const remoteUnderlay = addressField('remoteUnderlay', spec.remoteUnderlay);
  const remotePort = spec.remotePort ?? GENEVE_LIQO_UDP_PORT;
  if (!Number.isInteger(remotePort) || remotePort < 1 || remotePort > 65535) {
    throw new GeneveConfigError('remotePort', `a UDP port is 1..65535, got ${String(remotePort)}`);
  }
  const localUnderlay = spec.localUnderlay === undefined ? null : addressField('localUnderlay', spec.localUnderlay);
  if (localUnderlay !== null && localUnderlay.length !== remoteUnderlay.length) {
    throw new GeneveConfigError('localUnderlay', 'must be the same IP family as remoteUnderlay');
  }
  const localInternal = addressField('localInternalAddress', spec.localInternalAddress);
  const remoteInternal = addressField('remoteInternalAddress', spec.remoteInternalAddress);
  if (localInternal.length !== remoteInternal.length) {
    throw new GeneveConfigError('remoteInternalAddress', 'must be the same IP family as localInternalAddress');
  }
  if (addressEquals(localInternal, 0, remoteInternal, 0, localInternal.length)) {
    throw new GeneveConfigError('remoteInternalAddress', 'must differ from localInternalAddress');
  }
  const mode = spec.mode ?? 'l3';
  if (mode !== 'l3' && mode !== 'l2') throw new GeneveConfigError('mode', `expected 'l3' or 'l2', got ${String(mode)}`);
  const localMac = spec.localMac === undefined ? defaultLocalMac(localInternal) : macField('localMac', spec.localMac);
  const remoteMac = spec.remoteMac === undefined ? null : macField('remoteMac', spec.remoteMac);
  const options = spec.options === undefined ? new Uint8Array(0) : new Uint8Array(spec.options);
  const chk = checkGeneveOptionsBlock(options);
  if (chk.error !== null) throw new GeneveConfigError('options', chk.error);
  return {
    vni,
    remoteUnderlay,
    remotePort,
    localUnderlay,
    localInternal,
    remoteInternal,
    mode,
    localMac,
    remoteMac,
    options,
    optionsCritical: chk.critical,
    name: spec.name ?? `vni-${vni}`,
  };
}

/** Shared next hop of pod routes: an internal address, resolved to the tunnel that owns it. */
class NextHop {
  tunnel: GeneveTunnel | null = null;
  refs = 0;
  constructor(
    readonly address: Uint8Array,
    readonly text: string,
  ) {}
}

/** A pod route as listed by podRoutes(). */
export interface PodRoute {
  prefix: Prefix;
  nodeInternalAddress: string;
  /** The tunnel it resolves to now, or null when no tunnel has that remote internal address. */
  tunnel: GeneveTunnel | null;
}

export class GeneveTunnelTable {
  private readonly byKey = new Map<string, GeneveTunnel>();
  /** Receive index; almost always one tunnel per VNI, but (VNI, source) is the key. */
  private readonly byVni = new Map<number, GeneveTunnel[]>();
  private readonly internal4 = new PrefixTable<GeneveTunnel>(4);
  private readonly internal6 = new PrefixTable<GeneveTunnel>(6);
  private readonly routes4 = new PrefixTable<NextHop>(4);
  private readonly routes6 = new PrefixTable<NextHop>(6);
  private readonly nextHops = new Map<string, NextHop>();
  private readonly podRouteList = new Map<string, { prefix: Prefix; nh: NextHop }>();

  get size(): number {
    return this.byKey.size;
  }

  tunnels(): IterableIterator<GeneveTunnel> {
    return this.byKey.values();
  }

  get(vni: number, remoteUnderlay: string | Uint8Array): GeneveTunnel | undefined {
    return this.byKey.get(specKey(vni, addressField('remoteUnderlay', remoteUnderlay)));
  }

  /** Add a new tunnel. Throws GeneveConfigError if (VNI, remote) exists or the remote internal address is taken. */
  add(spec: GeneveTunnelSpec): GeneveTunnel {
    const v = validateTunnelSpec(spec);
    const key = specKey(v.vni, v.remoteUnderlay);
    if (this.byKey.has(key)) {
      throw new GeneveConfigError(
        'vni',
        `a tunnel with VNI ${v.vni} to ${formatAddress(v.remoteUnderlay)} already exists`,
      );
    }
    this.checkInternalFree(v.remoteInternal, null);
    const t = new GeneveTunnel(v);
    this.byKey.set(key, t);
    let list = this.byVni.get(t.vni);
    if (list === undefined) {
      list = [];
      this.byVni.set(t.vni, list);
    }
    list.push(t);
    this.indexInternal(t);
    return t;
  }

  /**
   * Add or update. An existing tunnel with the same (VNI, remote underlay) is updated in place:
   * counters are kept; a learned peer MAC is kept unless the mode or an internal address
   * changed (then the peer is a different L2 neighbour). Returns the tunnel.
   */
  set(spec: GeneveTunnelSpec): GeneveTunnel {
    const v = validateTunnelSpec(spec);
    const t = this.byKey.get(specKey(v.vni, v.remoteUnderlay));
    if (t === undefined) return this.add(spec);
    this.checkInternalFree(v.remoteInternal, t);
    const neighbourChanged =
      t.mode !== v.mode ||
      !sameAddress(t.localInternal, v.localInternal) ||
      !sameAddress(t.remoteInternal, v.remoteInternal);
    this.unindexInternal(t);
    t.configure(v, neighbourChanged);
    this.indexInternal(t);
    return t;
  }

  /** Remove a tunnel; pod routes via its internal address stay but resolve to nothing. */
  remove(vni: number, remoteUnderlay: string | Uint8Array): boolean {
    const t = this.get(vni, remoteUnderlay);
    if (t === undefined) return false;
    this.byKey.delete(t.key);
    const list = this.byVni.get(t.vni)!;
    list.splice(list.indexOf(t), 1);
    if (list.length === 0) this.byVni.delete(t.vni);
    this.unindexInternal(t);
    return true;
  }

  /**
   * Make the table hold exactly `specs` (the data plane's view of a new configuration):
   * existing tunnels are updated in place, missing ones added, others removed. Validates every
   * spec before changing anything.
   */
  replaceAll(specs: readonly GeneveTunnelSpec[]): { added: number; updated: number; removed: number } {
    const keep = new Set<string>();
    for (let i = 0; i < specs.length; i++) {
      let v: ValidatedSpec;
      try {
        v = validateTunnelSpec(specs[i]!);
      } catch (e) {
        if (e instanceof GeneveConfigError) throw new GeneveConfigError(`tunnels[${i}].${e.field}`, e.reason);
        throw e;
      }
      const key = specKey(v.vni, v.remoteUnderlay);
      if (keep.has(key))
        throw new GeneveConfigError(
          `tunnels[${i}].vni`,
          `duplicate tunnel (VNI ${v.vni}, ${formatAddress(v.remoteUnderlay)})`,
        );
      keep.add(key);
    }
    const seenInternal = new Set<string>();
    for (let i = 0; i < specs.length; i++) {
      const ri = formatAddress(addressField('remoteInternalAddress', specs[i]!.remoteInternalAddress));
      if (seenInternal.has(ri))
        throw new GeneveConfigError(
          `tunnels[${i}].remoteInternalAddress`,
          `${ri} is the remote internal address of another tunnel`,
        );
      seenInternal.add(ri);
    }
    let removed = 0;
    for (const t of [...this.byKey.values()]) {
      if (!keep.has(t.key)) {
        this.remove(t.vni, t.remoteUnderlay);
        removed++;
      }
    }
    // Detach the internal addresses of kept tunnels that change them first, so that two tunnels
    // may swap addresses (each set() below re-indexes its tunnel).
    for (const s of specs) {
      const t = this.byKey.get(specKey(s.vni, addressField('remoteUnderlay', s.remoteUnderlay)));
      if (
        t !== undefined &&
        !sameAddress(t.remoteInternal, addressField('remoteInternalAddress', s.remoteInternalAddress))
      ) {
        this.unindexInternal(t);
      }
    }
    let added = 0;
    let updated = 0;
    for (const s of specs) {
      const exists = this.byKey.has(specKey(s.vni, addressField('remoteUnderlay', s.remoteUnderlay)));
      this.set(s);
      if (exists) updated++;
      else added++;
    }
    return { added, updated, removed };
  }

  // -------------------------------------------------------------------------------------------
  // Receive lookups (per packet; no allocation)

  /**
   * The tunnel for a datagram with `vni` from underlay address `from`, given as the text a UDP
   * socket reports (node:dgram's rinfo.address: dotted quad, or RFC 5952 IPv6; an IPv4 peer on
   * a dual-stack socket as "::ffff:a.b.c.d" is accepted too).
   */
  lookupReceive(vni: number, from: string): GeneveTunnel | undefined {
    const list = this.byVni.get(vni);
    if (list === undefined) return undefined;
    for (let i = 0; i < list.length; i++) {
      const t = list[i]!;
      if (t.remoteUnderlayText === from || t.remoteUnderlayAlias === from) return t;
    }
    return undefined;
  }

  /** As lookupReceive, with the source address as 4 or 16 bytes at buf[off] (`family`). */
  lookupReceiveBytes(vni: number, buf: Uint8Array, off: number, family: IpFamily): GeneveTunnel | undefined {
    const list = this.byVni.get(vni);
    if (list === undefined) return undefined;
    for (let i = 0; i < list.length; i++) {
      const t = list[i]!;
      if (t.underlayFamily === family && addressEquals(t.remoteUnderlay, 0, buf, off, family === 4 ? 4 : 16)) return t;
      if (
        t.underlayFamily === 4 &&
        family === 6 &&
        isV4Mapped(buf, off) &&
        addressEquals(t.remoteUnderlay, 0, buf, off + 12, 4)
      )
        return t;
    }
    return undefined;
  }

  // -------------------------------------------------------------------------------------------
  // Send lookups (per packet; no allocation)

  /**
   * The tunnel for the inner IP packet at buf[ipOff] (`len` valid bytes), by destination
   * address: a tunnel's own remote internal address first, else the longest matching pod route
   * whose next hop resolves to a tunnel. Undefined when nothing matches or the packet is too
   * short to hold a destination.
   */
  lookupSend(buf: Uint8Array, ipOff: number, len: number): GeneveTunnel | undefined {
    const v = len > 0 ? buf[ipOff]! >>> 4 : 0;
    if (v === 4 && len >= IPV4_MIN_HEADER_LEN) return this.lookupDestination(buf, ipOff + IPV4_DST_OFFSET, 4);
    if (v === 6 && len >= IPV6_HEADER_LEN) return this.lookupDestination(buf, ipOff + IPV6_DST_OFFSET, 6);
    return undefined;
  }

  /** As lookupSend for an address at buf[addrOff] of `family`. */
  lookupDestination(buf: Uint8Array, addrOff: number, family: IpFamily): GeneveTunnel | undefined {
    const direct = family === 4 ? this.internal4.lookup(buf, addrOff) : this.internal6.lookup(buf, addrOff);
    if (direct !== undefined) return direct;
    const nh = family === 4 ? this.routes4.lookup(buf, addrOff) : this.routes6.lookup(buf, addrOff);
    return nh === undefined || nh.tunnel === null ? undefined : nh.tunnel;
  }

  /** The tunnel whose remote internal address is exactly `address`. */
  byRemoteInternal(address: string | Uint8Array): GeneveTunnel | undefined {
    return this.tunnelWithInternal(addressField('address', address));
  }

  // -------------------------------------------------------------------------------------------
  // Pod routes

  /**
   * Route `prefix` (a node's pod CIDR, a single pod /32, or remote CIDRs on a node agent) to the
   * tunnel whose remote internal address is `nodeInternalAddress`. Replaces an existing route
   * for the same prefix. The tunnel may be added later: until then the route resolves to nothing.
   */
  addPodRoute(prefix: string | Prefix, nodeInternalAddress: string | Uint8Array): void {
    const { p, nhAddr } = this.podRouteFields(prefix, nodeInternalAddress);
    const key = prefixKey(p);
    this.removePodRouteKey(key);
    const nh = this.nextHop(nhAddr);
    nh.refs++;
    (p.family === 4 ? this.routes4 : this.routes6).insert(p.addr, p.prefixLen, nh);
    this.podRouteList.set(key, { prefix: p, nh });
  }

  removePodRoute(prefix: string | Prefix): boolean {
    return this.removePodRouteKey(prefixKey(this.prefixField(prefix)));
  }

  /** Make the pod routes exactly `routes` (validated before any change). */
  replacePodRoutes(routes: readonly { podCIDR: string | Prefix; nodeInternalAddress: string | Uint8Array }[]): void {
    for (let i = 0; i < routes.length; i++) {
      try {
        this.podRouteFields(routes[i]!.podCIDR, routes[i]!.nodeInternalAddress);
      } catch (e) {
        if (e instanceof GeneveConfigError) throw new GeneveConfigError(`podRoutes[${i}].${e.field}`, e.reason);
        throw e;
      }
    }
    for (const key of [...this.podRouteList.keys()]) this.removePodRouteKey(key);
    for (const r of routes) this.addPodRoute(r.podCIDR, r.nodeInternalAddress);
  }

  podRoutes(): PodRoute[] {
    const out: PodRoute[] = [];
    for (const { prefix, nh } of this.podRouteList.values()) {
      out.push({ prefix, nodeInternalAddress: nh.text, tunnel: nh.tunnel });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------

  private prefixField(prefix: string | Prefix): Prefix {
    if (typeof prefix !== 'string') return prefix;
    try {
      return parsePrefix(prefix);
    } catch (e) {
      if (e instanceof AddressParseError)
        throw new GeneveConfigError('podCIDR', `expected a CIDR like "10.0.1.0/24": ${e.message}`);
      throw e;
    }
  }

  /** Parse and check one pod route's prefix and next hop (same family). Throws GeneveConfigError. */
  private podRouteFields(
    prefix: string | Prefix,
    nodeInternalAddress: string | Uint8Array,
  ): { p: Prefix; nhAddr: Uint8Array } {
    const p = this.prefixField(prefix);
    const nhAddr = addressField('nodeInternalAddress', nodeInternalAddress);
    if (nhAddr.length !== p.addr.length)
      throw new GeneveConfigError('nodeInternalAddress', 'must be the same IP family as the pod prefix');
    return { p, nhAddr };
  }

  private removePodRouteKey(key: string): boolean {
    const r = this.podRouteList.get(key);
    if (r === undefined) return false;
    (r.prefix.family === 4 ? this.routes4 : this.routes6).remove(r.prefix.addr, r.prefix.prefixLen);
    this.podRouteList.delete(key);
    if (--r.nh.refs === 0) this.nextHops.delete(r.nh.text);
    return true;
  }

  private nextHop(addr: Uint8Array): NextHop {
    const text = formatAddress(addr);
    let nh = this.nextHops.get(text);
    if (nh === undefined) {
      nh = new NextHop(addr, text);
      nh.tunnel = this.tunnelWithInternal(addr) ?? null;
      this.nextHops.set(text, nh);
    }
    return nh;
  }

  private checkInternalFree(remoteInternal: Uint8Array, self: GeneveTunnel | null): void {
    const other = this.tunnelWithInternal(remoteInternal);
    if (other !== undefined && other !== self) {
      throw new GeneveConfigError(
        'remoteInternalAddress',
        `${formatAddress(remoteInternal)} is already the remote internal address of tunnel ${other.name} (VNI ${other.vni})`,
      );
    }
  }

  /** The host-route table (/32 or /128 per tunnel) of the family of `addr`. */
  private internalTable(addr: Uint8Array): PrefixTable<GeneveTunnel> {
    return addr.length === 4 ? this.internal4 : this.internal6;
  }

  /** The tunnel whose remote internal address is exactly `addr`. */
  private tunnelWithInternal(addr: Uint8Array): GeneveTunnel | undefined {
    return this.internalTable(addr).get(addr, addr.length * 8);
  }

  private indexInternal(t: GeneveTunnel): void {
    const a = t.remoteInternal;
    this.internalTable(a).insert(a, a.length * 8, t);
    const nh = this.nextHops.get(formatAddress(t.remoteInternal));
    if (nh !== undefined) nh.tunnel = t;
  }

  private unindexInternal(t: GeneveTunnel): void {
    // Only if the entry is still ours (replaceAll may have given the address to another tunnel).
    const a = t.remoteInternal;
    if (this.tunnelWithInternal(a) === t) this.internalTable(a).remove(a, a.length * 8);
    const text = formatAddress(t.remoteInternal);
    const nh = this.nextHops.get(text);
    if (nh !== undefined && nh.tunnel === t) nh.tunnel = null;
  }
}

function prefixKey(p: Prefix): string {
  return `${formatAddress(p.addr, 0, p.family)}/${p.prefixLen}`;
}

function isV4Mapped(buf: Uint8Array, off: number): boolean {
  for (let i = 0; i < 10; i++) if (buf[off + i] !== 0) return false;
  return buf[off + 10] === 0xff && buf[off + 11] === 0xff;
}

function sameAddress(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && addressEquals(a, 0, b, 0, a.length);
}
