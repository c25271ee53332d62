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
 *
 * The tunnel record is tunnel.ts; the spec and its validation, tunnel-spec.ts.
 */
import {
  AddressParseError,
  addressEquals,
  formatAddress,
  parsePrefix,
  type IpFamily,
  type Prefix,
} from '../packet/addr.js';
import { IPV4_DST_OFFSET, IPV4_MIN_HEADER_LEN } from '../packet/ipv4.js';
import { IPV6_DST_OFFSET, IPV6_HEADER_LEN } from '../packet/ipv6.js';
import { PrefixTable } from '../route/table.js';
import { GeneveTunnel, tunnelKey } from './tunnel.js';
import {
  GeneveConfigError,
  addressField,
  validateTunnelSpec,
  type GeneveTunnelSpec,
  type ValidatedSpec,
} from './tunnel-spec.js';

/** The table key of a tunnel to the underlay address `remoteUnderlay` (bytes, canonical text). */
function specKey(vni: number, remoteUnderlay: Uint8Array): string {
  return tunnelKey(vni, formatAddress(remoteUnderlay));
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
