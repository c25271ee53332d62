/**
 * One Geneve tunnel: its identity (VNI, remote underlay), its configuration applied in place
 * and its counters. Apart from the table because the record is what the engine, the ports and
 * the shells hold per packet and per tunnel; the table only indexes it.
 */
import { familyOf, formatAddress, type IpFamily } from '../packet/addr.js';
import { MAC_LEN } from '../packet/ethernet.js';
import { type GeneveMode } from './mtu.js';
import { STAT_DROPS, STAT_RX_BYTES, STAT_RX_PACKETS, STAT_TX_BYTES, STAT_TX_PACKETS } from './reasons.js';
import type { ValidatedSpec } from './tunnel-spec.js';

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

/** The table key of a tunnel: VNI and remote underlay address as text. */
export function tunnelKey(vni: number, remoteText: string): string {
  return `${vni}|${remoteText}`;
}
