/**
 * NAT configuration: the gateway's translation intent (translated into rules by
 * src/rules/from-nat.ts; peers and MTU read by src/router/peer-table.ts) and its validation into
 * parsed prefixes.
 *
 * The shapes mirror Liqo's resources so the control layer can pass its model straight through:
 * - `NatPeerConfig.remote` is the peer's REAL CIDRs (Liqo `Configuration.spec.remote.cidr`),
 *   `NatPeerConfig.remapped` how the local cluster addresses them
 *   (`Configuration.status.remote.cidr`); remapped[i] ↔ remote[i] is a 1:1 prefix translation.
 * - `NatConfig.ipMappings` are Liqo `IP` resources (crds/ipam.liqo.io_ips.yaml): `realAddress`
 *   (IP.spec.ip) is reachable from peers as `externalAddress` (IP.status.ip, inside the local
 *   external CIDR).
 * - The SNAT ("unknown source") address is the FIRST address of the local external CIDR, i.e. the
 *   network address itself: Liqo's `GetUnknownSourceIP` (pkg/utils/ipam/ips.go) returns
 *   `NetFirstAndLastIP(cidr).first` = ip & mask, so 10.70.0.0/16 → 10.70.0.0 (not .1); Liqo's
 *   firewall docs show `natType: snat, to: 10.70.0.0`, and the IPAM Network for the external CIDR
 *   pre-allocates exactly that one address (helm-templates/liqo-ipam-networks.yaml, preAllocated: 1).
 *
 * Everything here runs at configuration time and may allocate. Errors are `NatConfigError`
 * naming the field and what to fix.
 */

import {
  AddressParseError,
  addressEquals,
  familyOf,
  formatPrefix,
  parseAddress,
  parsePrefix,
  prefixContains,
  prefixesOverlap,
  type IpFamily,
  type Prefix,
} from '../packet/addr.js';

/** Bad NAT configuration: `field` is a path such as `peers[milan].remapped.podCIDRs[0]`. */
export class NatConfigError extends Error {
  override readonly name = 'NatConfigError';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`NAT configuration ${field}: ${reason}`);
  }
}

/** A peer's CIDRs by kind (same shape as the control model's PeerCidrs). */
export interface NatPeerCidrs {
  readonly podCIDRs: readonly string[];
  readonly externalCIDRs: readonly string[];
}

export interface NatPeerConfig {
  /** The peer's name (Liqo remote cluster id); used in error messages and diagnostics. */
  readonly name: string;
  /** REAL CIDRs of the peer: these travel inside the tunnel. */
  readonly remote: NatPeerCidrs;
  /** How the local cluster addresses the peer; list by list it defaults to `remote` (no remap). */
  readonly remapped?: NatPeerCidrs;
  /** Tunnel MTU towards this peer (default `NatConfig.mtu`, itself 1340 like Liqo). */
  readonly mtu?: number;
}

/** Liqo IP resource: one external-CIDR address ↔ one real address (static 1:1 pair). */
export interface NatIpMapping {
  readonly externalAddress: string;
  readonly realAddress: string;
}

/** Connection-tracking idle timeouts in milliseconds. */
export interface ConntrackTimeouts {
  /** SYN sent / SYN-ACK seen, FIN seen in one direction, and not-yet-answered pickups. */
  readonly tcpTransitory: number;
  /** Established (a reply has been seen). */
  readonly tcpEstablished: number;
  /** FIN seen in both directions (TIME_WAIT). */
  readonly tcpTimeWait: number;
  /** After a RST: the entry lingers briefly for retransmitted RSTs, then is the first to go. */
  readonly tcpClose: number;
  /** UDP flow that has not seen a reply yet. */
  readonly udp: number;
  /** UDP flow with traffic in both directions. */
  readonly udpReplied: number;
  /** ICMP echo (query) mapping. */
  readonly icmp: number;
}

/**
 * Defaults: RFC 5382 §5 REQ-5 (TCP: established idle-timeout ≥ 2 h 4 min, transitory ≥ 4 min),
 * RFC 4787 §4.3 REQ-5 (UDP mapping ≥ 2 min once in use; unanswered flows are kept 30 s like
 * Linux), RFC 5508 §3.2 REQ-1 (ICMP query mapping ≥ 60 s). TIME_WAIT lasts 2×MSL = 4 min
 * (RFC 9293 §3.4.2 with MSL = 2 min).
 */
export const DEFAULT_CONNTRACK_TIMEOUTS: ConntrackTimeouts = {
  tcpTransitory: 240_000,
  tcpEstablished: 7_440_000,
  tcpTimeWait: 240_000,
  tcpClose: 10_000,
  udp: 30_000,
  udpReplied: 120_000,
  icmp: 60_000,
};

export interface ConntrackOptions {
  /** Maximum number of tracked flows; at capacity the oldest/expired entry is evicted. */
  readonly capacity?: number;
  readonly timeouts?: Partial<ConntrackTimeouts>;
  /** Range searched for a free SNAT port / ICMP identifier when the original one is taken. */
  readonly portMin?: number;
  readonly portMax?: number;
  /** Hash seed (tests pass a fixed one; default: random, against hash flooding). */
  readonly seed?: number;
}

export interface NatConfig {
  /** Local pod CIDRs (Liqo Configuration.spec.local.cidr.pod). Sources inside are not SNATed. */
  readonly localPodCIDRs: readonly string[];
  /** Local external CIDR (IPv4, Liqo default 10.70.0.0/16); its first address is the SNAT source. */
  readonly localExternalCIDR: string;
  /** Optional IPv6 external CIDR for SNAT of IPv6 host traffic (Liqo has none). */
  readonly localExternalCIDRv6?: string;
  readonly ipMappings?: readonly NatIpMapping[];
  /** Liqo `networking.fabric.config.fullMasquerade`: SNAT every source, pods included. */
  readonly fullMasquerade?: boolean;
  /** Default tunnel MTU for peers without their own (default 1340, Liqo's). */
  readonly mtu?: number;
  /** Clamp the TCP MSS of SYN / SYN-ACK segments to the tunnel MTU (default true). */
  readonly clampMss?: boolean;
  /**
   * Source address of generated ICMP errors (Fragmentation Needed / Packet Too Big), e.g. the
   * gateway's internal-CIDR address. Default: the destination of the packet that was too big.
   */
  readonly icmpSourceV4?: string;
  readonly icmpSourceV6?: string;
  /** Token bucket for generated ICMP errors (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)). */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
  readonly conntrack?: ConntrackOptions;
}

export const DEFAULT_MTU = 1340;
export const DEFAULT_CONNTRACK_CAPACITY = 65_536;
export const DEFAULT_PORT_MIN = 1024;
export const DEFAULT_PORT_MAX = 65_535;
export const DEFAULT_ICMP_RATE_PER_SECOND = 100;
export const DEFAULT_ICMP_BURST = 20;
/** Smallest MTU we accept: RFC 791 guarantees 68 for IPv4; IPv6 links carry 1280 (RFC 8200 §5). */
export const MIN_MTU_V4 = 68;

/** One parsed remap pair (real ↔ remapped), same family and length. */
export interface ParsedRemap {
  readonly real: Prefix;
  readonly remapped: Prefix;
  readonly field: string;
}

export interface ParsedPeer {
  readonly name: string;
  readonly mtu: number;
  readonly remaps: readonly ParsedRemap[];
}

export interface ParsedMapping {
  readonly external: Uint8Array;
  readonly real: Uint8Array;
  readonly family: IpFamily;
}

export interface ParsedNatConfig {
  readonly localPod: readonly Prefix[];
  readonly external4: Prefix;
  readonly external6: Prefix | undefined;
  readonly mappings: readonly ParsedMapping[];
  readonly fullMasquerade: boolean;
  readonly mtu: number;
  readonly clampMss: boolean;
  readonly icmpSource4: Uint8Array | undefined;
  readonly icmpSource6: Uint8Array | undefined;
  readonly icmpRatePerSecond: number;
  readonly icmpBurst: number;
  readonly capacity: number;
  readonly timeouts: ConntrackTimeouts;
  readonly portMin: number;
  readonly portMax: number;
  readonly seed: number | undefined;
}

function prefixAt(field: string, text: string): Prefix {
  try {
    return parsePrefix(text, true);
  } catch (e) {
    if (e instanceof AddressParseError)
      throw new NatConfigError(field, `${e.reason} (got ${JSON.stringify(text)}; expected a CIDR like 10.0.0.0/16)`);
    throw e;
  }
}

function addressAt(field: string, text: string): Uint8Array {
  try {
    return parseAddress(text);
  } catch (e) {
    if (e instanceof AddressParseError)
      throw new NatConfigError(field, `${e.reason} (got ${JSON.stringify(text)}; expected an IP address)`);
    throw e;
  }
}

function positiveInt(field: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max)
    throw new NatConfigError(field, `expected an integer in ${min}..${max}, got ${String(v)}`);
  return v;
}

function checkMtu(field: string, v: number): number {
  return positiveInt(field, v, MIN_MTU_V4, 65_535);
}

/** Validate and parse the global part of the configuration. */
export function parseNatConfig(cfg: NatConfig): ParsedNatConfig {
  if (cfg === null || typeof cfg !== 'object') throw new NatConfigError('(root)', 'expected an object');
  if (!Array.isArray(cfg.localPodCIDRs)) throw new NatConfigError('localPodCIDRs', 'expected a list of CIDRs');
  const localPod = cfg.localPodCIDRs.map((t, i) => prefixAt(`localPodCIDRs[${i}]`, t));
  if (typeof cfg.localExternalCIDR !== 'string')
    throw new NatConfigError('localExternalCIDR', 'expected an IPv4 CIDR such as 10.70.0.0/16');
  const external4 = prefixAt('localExternalCIDR', cfg.localExternalCIDR);
  if (external4.family !== 4)
    throw new NatConfigError(
      'localExternalCIDR',
      `expected an IPv4 CIDR, got ${cfg.localExternalCIDR} (use localExternalCIDRv6 for IPv6)`,
    );
  const external6 =
    cfg.localExternalCIDRv6 === undefined ? undefined : prefixAt('localExternalCIDRv6', cfg.localExternalCIDRv6);
  if (external6 !== undefined && external6.family !== 6)
    throw new NatConfigError('localExternalCIDRv6', `expected an IPv6 CIDR, got ${cfg.localExternalCIDRv6}`);
  for (const [i, p] of localPod.entries()) {
    for (const ext of [external4, external6]) {
      if (ext !== undefined && prefixesOverlap(p, ext)) {
        throw new NatConfigError(
          `localPodCIDRs[${i}]`,
          `${formatPrefix(p)} overlaps the external CIDR ${formatPrefix(ext)}`,
        );
      }
    }
  }

  const mappings: ParsedMapping[] = [];
  (cfg.ipMappings ?? []).forEach((m, i) => {
    const f = `ipMappings[${i}]`;
    const external = addressAt(`${f}.externalAddress`, m.externalAddress);
    const real = addressAt(`${f}.realAddress`, m.realAddress);
    if (external.length !== real.length)
      throw new NatConfigError(f, 'externalAddress and realAddress must be of the same IP family');
    const family = familyOf(external);
    const ext = family === 4 ? external4 : external6;
    if (ext === undefined || !prefixContains(ext, external, 0)) {
      throw new NatConfigError(
        `${f}.externalAddress`,
        `${m.externalAddress} is not inside the local external CIDR${ext ? ` ${formatPrefix(ext)}` : ' (no IPv6 external CIDR configured)'}`,
      );
    }
    if (addressEquals(external, 0, ext.addr, 0, external.length)) {
      throw new NatConfigError(
        `${f}.externalAddress`,
        `${m.externalAddress} is the first address of the external CIDR, reserved as the SNAT source`,
      );
    }
    for (const [j, o] of mappings.entries()) {
      if (o.family === family && addressEquals(o.external, 0, external, 0, external.length)) {
        throw new NatConfigError(`${f}.externalAddress`, `${m.externalAddress} is already used by ipMappings[${j}]`);
      }
      if (o.family === family && addressEquals(o.real, 0, real, 0, real.length)) {
        throw new NatConfigError(`${f}.realAddress`, `${m.realAddress} is already mapped by ipMappings[${j}]`);
      }
    }
    mappings.push({ external, real, family });
  });

  const ct = cfg.conntrack ?? {};
  const timeouts = { ...DEFAULT_CONNTRACK_TIMEOUTS, ...(ct.timeouts ?? {}) };
  for (const [k, v] of Object.entries(timeouts)) positiveInt(`conntrack.timeouts.${k}`, v, 1, 2 ** 40);
  const portMin = positiveInt('conntrack.portMin', ct.portMin ?? DEFAULT_PORT_MIN, 1, 65_535);
  const portMax = positiveInt('conntrack.portMax', ct.portMax ?? DEFAULT_PORT_MAX, 1, 65_535);
  if (portMax < portMin) throw new NatConfigError('conntrack.portMax', `must be ≥ portMin (${portMin})`);

  const src4 = cfg.icmpSourceV4 === undefined ? undefined : addressAt('icmpSourceV4', cfg.icmpSourceV4);
  if (src4 !== undefined && src4.length !== 4) throw new NatConfigError('icmpSourceV4', 'expected an IPv4 address');
  const src6 = cfg.icmpSourceV6 === undefined ? undefined : addressAt('icmpSourceV6', cfg.icmpSourceV6);
  if (src6 !== undefined && src6.length !== 16) throw new NatConfigError('icmpSourceV6', 'expected an IPv6 address');

  return {
    localPod,
    external4,
    external6,
    mappings,
    fullMasquerade: cfg.fullMasquerade ?? false,
    mtu: checkMtu('mtu', cfg.mtu ?? DEFAULT_MTU),
    clampMss: cfg.clampMss ?? true,
    icmpSource4: src4,
    icmpSource6: src6,
    icmpRatePerSecond: positiveInt(
      'icmpRatePerSecond',
      cfg.icmpRatePerSecond ?? DEFAULT_ICMP_RATE_PER_SECOND,
      0,
      1_000_000,
    ),
    icmpBurst: positiveInt('icmpBurst', cfg.icmpBurst ?? DEFAULT_ICMP_BURST, 1, 1_000_000),
    capacity: positiveInt('conntrack.capacity', ct.capacity ?? DEFAULT_CONNTRACK_CAPACITY, 1, 1 << 24),
    timeouts,
    portMin,
    portMax,
    seed: ct.seed,
  };
}

/**
 * Validate and parse one peer. `others` are the peers already installed (their remapped CIDRs
 * must not overlap this one's: the remapped CIDR is what tells peers apart locally).
 */
export function parseNatPeer(p: NatPeerConfig, global: ParsedNatConfig, others: readonly ParsedPeer[]): ParsedPeer {
  if (p === null || typeof p !== 'object' || typeof p.name !== 'string' || p.name === '')
    throw new NatConfigError('peers[?].name', 'expected a non-empty peer name');
  const base = `peers[${p.name}]`;
  if (others.some((o) => o.name === p.name))
    throw new NatConfigError(base, 'a peer with this name is already installed');
  const remaps: ParsedRemap[] = [];
  for (const kind of ['podCIDRs', 'externalCIDRs'] as const) {
    const real = p.remote?.[kind];
    if (!Array.isArray(real)) throw new NatConfigError(`${base}.remote.${kind}`, 'expected a list of CIDRs');
    const rem = p.remapped?.[kind] ?? real;
    if (!Array.isArray(rem)) throw new NatConfigError(`${base}.remapped.${kind}`, 'expected a list of CIDRs');
    if (rem.length !== real.length) {
      throw new NatConfigError(
        `${base}.remapped.${kind}`,
        `expected ${real.length} entries, one per remote.${kind} entry (1:1 prefix remapping); got ${rem.length}`,
      );
    }
    for (let i = 0; i < real.length; i++) {
      const field = `${base}.remapped.${kind}[${i}]`;
      const r = prefixAt(`${base}.remote.${kind}[${i}]`, real[i]!);
      const m = prefixAt(field, rem[i]!);
      if (r.family !== m.family || r.prefixLen !== m.prefixLen) {
        throw new NatConfigError(
          field,
          `${formatPrefix(m)} must have the same family and prefix length as remote.${kind}[${i}] ${formatPrefix(r)}`,
        );
      }
      remaps.push({ real: r, remapped: m, field });
    }
  }
  // Locally the remapped CIDRs decide where a packet goes: they must not collide with local
  // CIDRs, with each other, or with other peers' remapped CIDRs.
  const locals: Array<[string, Prefix]> = global.localPod.map((x) => ['a local pod CIDR', x]);
  locals.push(['the local external CIDR', global.external4]);
  if (global.external6) locals.push(['the local IPv6 external CIDR', global.external6]);
  for (const [i, a] of remaps.entries()) {
    for (const [what, l] of locals) {
      if (prefixesOverlap(a.remapped, l))
        throw new NatConfigError(
          a.field,
          `${formatPrefix(a.remapped)} overlaps ${what} ${formatPrefix(l)}; remap the peer`,
        );
    }
    for (let j = 0; j < i; j++) {
      const b = remaps[j]!;
      if (prefixesOverlap(a.remapped, b.remapped))
        throw new NatConfigError(
          a.field,
          `${formatPrefix(a.remapped)} overlaps ${b.field} ${formatPrefix(b.remapped)}`,
        );
      if (prefixesOverlap(a.real, b.real))
        throw new NatConfigError(
          a.field.replace('.remapped.', '.remote.'),
          `${formatPrefix(a.real)} overlaps another real CIDR of the same peer`,
        );
    }
    for (const o of others) {
      for (const b of o.remaps) {
        if (prefixesOverlap(a.remapped, b.remapped)) {
          throw new NatConfigError(
            a.field,
            `${formatPrefix(a.remapped)} overlaps peer ${o.name}'s ${formatPrefix(b.remapped)}; every peer needs its own remapped CIDRs`,
          );
        }
      }
    }
  }
  return { name: p.name, mtu: checkMtu(`${base}.mtu`, p.mtu ?? global.mtu), remaps };
}
