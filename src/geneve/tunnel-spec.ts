/**
 * A Geneve tunnel's configuration as the control layer hands it in, and its validation: each
 * field parsed and checked, a GeneveConfigError naming the field and the fix otherwise. Apart
 * from the tunnel table because it is the configuration boundary (parsing, defaults, error
 * text), run before any change to the table and on no packet.
 */
import { AddressParseError, addressEquals, parseAddress } from '../packet/addr.js';
import { MAC_LEN, MacParseError, parseMac } from '../packet/ethernet.js';
import { checkGeneveOptionsBlock, GENEVE_LIQO_UDP_PORT, GENEVE_MAX_VNI } from './header.js';
import { type GeneveMode } from './mtu.js';

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

export function addressField(field: string, v: string | Uint8Array): Uint8Array {
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
