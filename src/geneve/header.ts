/**
 * Geneve header and option TLV views (RFC 8926 §3.4, §3.5): named offsets and plain functions
 * over (buf, off). Nothing here allocates or keeps a reference to the buffer.
 *
 * Base header (RFC 8926 §3.4), 8 bytes, followed by `Opt Len` × 4 bytes of options:
 *
 *   byte 0: Ver (2 bits) | Opt Len (6 bits, in 4-byte words)
 *   byte 1: O (control) | C (critical options present) | Rsvd (6 bits)
 *   bytes 2-3: Protocol Type (an EtherType)
 *   bytes 4-6: Virtual Network Identifier (VNI, 24 bits)
 *   byte 7: Reserved
 *
 * Option TLV (RFC 8926 §3.5), 4-byte header followed by Length × 4 bytes of data:
 *
 *   bytes 0-1: Option Class
 *   byte 2:    Type (the high bit is the critical bit)
 *   byte 3:    R R R (reserved) | Length (5 bits, in 4-byte words, excluding this header)
 *
 * Readers assume the caller has checked that the bytes exist (`validateGeneve` does it for a
 * received packet); writers assume the caller reserved the room. Reserved bits are written as
 * zero and never interpreted (RFC 8926 §3.4: "MUST be zero on transmission and ignored on
 * receipt").
 */

import { GeneveDrop } from './reasons.js';

/** The Geneve version this code speaks (RFC 8926 §3.4: "The current version number is 0"). */
export const GENEVE_VERSION = 0;
/** IANA-assigned Geneve UDP port (RFC 8926 §3.3). */
export const GENEVE_IANA_UDP_PORT = 6081;
/** The port Liqo's fabric uses for its Geneve tunnels (shared/liqo/README.md). */
export const GENEVE_LIQO_UDP_PORT = 6091;

export const GENEVE_HEADER_LEN = 8;
export const GENEVE_VER_OPTLEN_OFFSET = 0;
export const GENEVE_FLAGS_OFFSET = 1;
export const GENEVE_PROTOCOL_OFFSET = 2;
export const GENEVE_VNI_OFFSET = 4;
export const GENEVE_RESERVED2_OFFSET = 7;
export const GENEVE_OPTIONS_OFFSET = 8;

/** Opt Len is 6 bits of 4-byte words: at most 63 × 4 = 252 bytes of options. */
export const GENEVE_MAX_OPTIONS_LEN = 252;
/** Largest base header + options. */
export const GENEVE_MAX_HEADER_LEN = GENEVE_HEADER_LEN + GENEVE_MAX_OPTIONS_LEN;

export const GENEVE_VERSION_SHIFT = 6;
export const GENEVE_OPTLEN_MASK = 0x3f;
/** O bit: control (OAM) packet, not to be forwarded as data (RFC 8926 §3.4). */
export const GENEVE_FLAG_OAM = 0x80;
/** C bit: one or more options have the critical bit set (RFC 8926 §3.4). */
export const GENEVE_FLAG_CRITICAL = 0x40;
export const GENEVE_FLAGS_RESERVED_MASK = 0x3f;

/** Maximum VNI (24 bits). */
export const GENEVE_MAX_VNI = 0xffffff;

/** Protocol types (EtherTypes, RFC 8926 §3.4). */
export const GENEVE_PROTO_IPV4 = 0x0800;
export const GENEVE_PROTO_IPV6 = 0x86dd;
/** Transparent Ethernet Bridging: the payload is an Ethernet frame (Liqo's kernel devices). */
export const GENEVE_PROTO_TEB = 0x6558;

export const GENEVE_OPTION_HEADER_LEN = 4;
export const GENEVE_OPTION_CLASS_OFFSET = 0;
export const GENEVE_OPTION_TYPE_OFFSET = 2;
export const GENEVE_OPTION_LENGTH_OFFSET = 3;
/** Type's high bit: the option is critical (RFC 8926 §3.5). */
export const GENEVE_OPTION_TYPE_CRITICAL = 0x80;
export const GENEVE_OPTION_LENGTH_MASK = 0x1f;
/** Length is 5 bits of 4-byte words: at most 31 × 4 = 124 bytes of option data. */
export const GENEVE_OPTION_MAX_DATA_LEN = 124;

// ---------------------------------------------------------------------------------------------
// Base header readers

export function geneveVersion(buf: Uint8Array, off: number): number {
  return buf[off + GENEVE_VER_OPTLEN_OFFSET]! >>> GENEVE_VERSION_SHIFT;
}

/** Length of the options in bytes (Opt Len × 4). */
export function geneveOptionsLen(buf: Uint8Array, off: number): number {
  return (buf[off + GENEVE_VER_OPTLEN_OFFSET]! & GENEVE_OPTLEN_MASK) << 2;
}

/** Base header + options, i.e. the offset of the payload from `off`. */
export function geneveHeaderLen(buf: Uint8Array, off: number): number {
  return GENEVE_HEADER_LEN + geneveOptionsLen(buf, off);
}

export function geneveOam(buf: Uint8Array, off: number): boolean {
  return (buf[off + GENEVE_FLAGS_OFFSET]! & GENEVE_FLAG_OAM) !== 0;
}

export function geneveCritical(buf: Uint8Array, off: number): boolean {
  return (buf[off + GENEVE_FLAGS_OFFSET]! & GENEVE_FLAG_CRITICAL) !== 0;
}

export function geneveProtocolType(buf: Uint8Array, off: number): number {
  return (buf[off + GENEVE_PROTOCOL_OFFSET]! << 8) | buf[off + GENEVE_PROTOCOL_OFFSET + 1]!;
}

export function geneveVni(buf: Uint8Array, off: number): number {
  const o = off + GENEVE_VNI_OFFSET;
  return (buf[o]! << 16) | (buf[o + 1]! << 8) | buf[o + 2]!;
}

// ---------------------------------------------------------------------------------------------
// Base header writers

/**
 * Write a Geneve base header at buf[off, off+8). `optionsLen` (bytes, multiple of 4, ≤ 252) is
 * only recorded in Opt Len: the caller writes the options at off+8 (see writeGeneveOption or
 * copy a pre-built block). Reserved fields are zeroed. Throws RangeError on API misuse (bad
 * VNI, protocol type or options length) — never on packet contents.
 */
export function writeGeneveHeader(
  buf: Uint8Array,
  off: number,
  vni: number,
  protocolType: number,
  optionsLen: number,
  oam: boolean,
  critical: boolean,
): void {
  if (!(vni >= 0 && vni <= GENEVE_MAX_VNI && Number.isInteger(vni))) {
    throw new RangeError(`Geneve VNI must be an integer 0..${GENEVE_MAX_VNI}, got ${vni}`);
  }
  if (!(protocolType >= 0 && protocolType <= 0xffff && Number.isInteger(protocolType))) {
    throw new RangeError(`Geneve protocol type must be a 16-bit integer, got ${protocolType}`);
  }
  if (!(optionsLen >= 0 && optionsLen <= GENEVE_MAX_OPTIONS_LEN && (optionsLen & 3) === 0)) {
    throw new RangeError(
      `Geneve options length must be a multiple of 4 in 0..${GENEVE_MAX_OPTIONS_LEN}, got ${optionsLen}`,
    );
  }
  if (off < 0 || off + GENEVE_HEADER_LEN > buf.length) {
    throw new RangeError(`no room for a Geneve header at offset ${off} in a ${buf.length}-byte buffer`);
  }
  writeGeneveHeaderUnchecked(buf, off, vni, protocolType, optionsLen, oam, critical);
}

/**
 * writeGeneveHeader without the argument checks, for the per-packet path where the VNI and
 * options length come from a validated tunnel and the offset from a checked headroom.
 */
export function writeGeneveHeaderUnchecked(
  buf: Uint8Array,
  off: number,
  vni: number,
  protocolType: number,
  optionsLen: number,
  oam: boolean,
  critical: boolean,
): void {
  buf[off + GENEVE_VER_OPTLEN_OFFSET] = (GENEVE_VERSION << GENEVE_VERSION_SHIFT) | (optionsLen >>> 2);
  buf[off + GENEVE_FLAGS_OFFSET] = (oam ? GENEVE_FLAG_OAM : 0) | (critical ? GENEVE_FLAG_CRITICAL : 0);
  buf[off + GENEVE_PROTOCOL_OFFSET] = protocolType >>> 8;
  buf[off + GENEVE_PROTOCOL_OFFSET + 1] = protocolType & 0xff;
  buf[off + GENEVE_VNI_OFFSET] = vni >>> 16;
  buf[off + GENEVE_VNI_OFFSET + 1] = (vni >>> 8) & 0xff;
  buf[off + GENEVE_VNI_OFFSET + 2] = vni & 0xff;
  buf[off + GENEVE_RESERVED2_OFFSET] = 0;
}

// ---------------------------------------------------------------------------------------------
// Option TLVs. `optOff` is the absolute offset of an option's 4-byte header.

export function geneveOptionClass(buf: Uint8Array, optOff: number): number {
  return (buf[optOff + GENEVE_OPTION_CLASS_OFFSET]! << 8) | buf[optOff + GENEVE_OPTION_CLASS_OFFSET + 1]!;
}

/** The full 8-bit type, critical bit included (the critical bit is part of the type's identity). */
export function geneveOptionType(buf: Uint8Array, optOff: number): number {
  return buf[optOff + GENEVE_OPTION_TYPE_OFFSET]!;
}

export function geneveOptionCritical(buf: Uint8Array, optOff: number): boolean {
  return (buf[optOff + GENEVE_OPTION_TYPE_OFFSET]! & GENEVE_OPTION_TYPE_CRITICAL) !== 0;
}

/** Option data length in bytes (Length × 4), excluding the 4-byte option header. */
export function geneveOptionDataLen(buf: Uint8Array, optOff: number): number {
  return (buf[optOff + GENEVE_OPTION_LENGTH_OFFSET]! & GENEVE_OPTION_LENGTH_MASK) << 2;
}

/** Offset of the option's data. */
export function geneveOptionDataOffset(optOff: number): number {
  return optOff + GENEVE_OPTION_HEADER_LEN;
}

/** Offset just past this option (= the next option's header, or the end of the options). */
export function geneveNextOption(buf: Uint8Array, optOff: number): number {
  return optOff + GENEVE_OPTION_HEADER_LEN + geneveOptionDataLen(buf, optOff);
}

/**
 * A 24-bit key identifying an option kind: class << 8 | type (type with its critical bit).
 * Used by option registries (sets of numbers, no allocation per lookup).
 */
export function geneveOptionKey(optionClass: number, type: number): number {
  return optionClass * 256 + type;
}

/**
 * Write one option TLV at buf[off, ...): header + `dataLen` bytes copied from
 * data[dataOff, dataOff+dataLen). `dataLen` is a multiple of 4 in 0..124. Returns the offset
 * just past the option. The reserved bits are zeroed. Throws RangeError on API misuse.
 */
export function writeGeneveOption(
  buf: Uint8Array,
  off: number,
  optionClass: number,
  type: number,
  data: Uint8Array | null,
  dataOff: number,
  dataLen: number,
): number {
  if (!(optionClass >= 0 && optionClass <= 0xffff && Number.isInteger(optionClass))) {
    throw new RangeError(`Geneve option class must be a 16-bit integer, got ${optionClass}`);
  }
  if (!(type >= 0 && type <= 0xff && Number.isInteger(type))) {
    throw new RangeError(`Geneve option type must be an 8-bit integer, got ${type}`);
  }
  if (!(dataLen >= 0 && dataLen <= GENEVE_OPTION_MAX_DATA_LEN && (dataLen & 3) === 0)) {
    throw new RangeError(
      `Geneve option data length must be a multiple of 4 in 0..${GENEVE_OPTION_MAX_DATA_LEN}, got ${dataLen}`,
    );
  }
  const end = off + GENEVE_OPTION_HEADER_LEN + dataLen;
  if (off < 0 || end > buf.length) {
    throw new RangeError(`no room for a ${dataLen}-byte Geneve option at offset ${off}`);
  }
  if (dataLen > 0 && (data === null || dataOff < 0 || dataOff + dataLen > data.length)) {
    throw new RangeError('Geneve option data source is shorter than dataLen');
  }
  buf[off + GENEVE_OPTION_CLASS_OFFSET] = optionClass >>> 8;
  buf[off + GENEVE_OPTION_CLASS_OFFSET + 1] = optionClass & 0xff;
  buf[off + GENEVE_OPTION_TYPE_OFFSET] = type;
  buf[off + GENEVE_OPTION_LENGTH_OFFSET] = dataLen >>> 2;
  if (dataLen > 0) buf.set(data!.subarray(dataOff, dataOff + dataLen), off + GENEVE_OPTION_HEADER_LEN);
  return end;
}

// ---------------------------------------------------------------------------------------------
// Receive validation

/**
 * The options a receiver understands, keyed by geneveOptionKey(class, type). A `Set<number>`
 * fits; `has` must not allocate.
 */
export interface GeneveOptionRegistry {
  has(key: number): boolean;
}

/**
 * Apply the RFC 8926 receive rules to the Geneve datagram at buf[off, off+len) (the UDP payload)
 * and return GeneveDrop.None or the reason to drop it. Checks, cheapest first:
 * - at least the 8-byte base header (Truncated);
 * - version 0 (§3.4: other versions MUST be dropped) (BadVersion);
 * - Opt Len fits in the datagram (OptionsTruncated);
 * - O bit clear: control packets are not data (§3.4) (Oam);
 * - every option TLV lies inside the options area (§3.5) (OptionMalformed);
 * - no option with the critical bit that `understood` lacks (§3.5.1) (CriticalOption). The
 *   options are walked whether or not the C bit is set: the C bit lets a receiver that cannot
 *   parse options drop without parsing; we can parse, so an unknown critical option is dropped
 *   even if a sender forgot the C bit. Reserved bits (flags, option R bits, reserved bytes) are
 *   ignored (§3.4).
 * The protocol type is not checked here (the engine checks it against the tunnel's mode).
 * Never throws for any byte content; reads only inside buf[off, off+len).
 */
export function validateGeneve(
  buf: Uint8Array,
  off: number,
  len: number,
  understood: GeneveOptionRegistry | null,
): GeneveDrop {
  if (len < GENEVE_HEADER_LEN) return GeneveDrop.Truncated;
  const b0 = buf[off + GENEVE_VER_OPTLEN_OFFSET]!;
  if (b0 >>> GENEVE_VERSION_SHIFT !== GENEVE_VERSION) return GeneveDrop.BadVersion;
  const optionsLen = (b0 & GENEVE_OPTLEN_MASK) << 2;
  if (GENEVE_HEADER_LEN + optionsLen > len) return GeneveDrop.OptionsTruncated;
  if ((buf[off + GENEVE_FLAGS_OFFSET]! & GENEVE_FLAG_OAM) !== 0) return GeneveDrop.Oam;
  if (optionsLen === 0) return GeneveDrop.None;
  const end = off + GENEVE_HEADER_LEN + optionsLen;
  let p = off + GENEVE_HEADER_LEN;
  // Each option takes at least 4 bytes and the area is a multiple of 4, so the walk either
  // lands exactly on `end` or a TLV claims bytes beyond it.
  while (p < end) {
    const next =
      p + GENEVE_OPTION_HEADER_LEN + ((buf[p + GENEVE_OPTION_LENGTH_OFFSET]! & GENEVE_OPTION_LENGTH_MASK) << 2);
    if (next > end) return GeneveDrop.OptionMalformed;
    const type = buf[p + GENEVE_OPTION_TYPE_OFFSET]!;
    if ((type & GENEVE_OPTION_TYPE_CRITICAL) !== 0) {
      const key = ((buf[p]! << 8) | buf[p + 1]!) * 256 + type;
      if (understood === null || !understood.has(key)) return GeneveDrop.CriticalOption;
    }
    p = next;
  }
  return GeneveDrop.None;
}

/**
 * Check a pre-built options block (configuration input, e.g. options a tunnel adds on send):
 * a multiple of 4, at most 252 bytes, and a sequence of whole TLVs. Returns null when valid,
 * else a sentence saying what is wrong. Also reports whether any option is critical (the C bit
 * to send).
 */
export function checkGeneveOptionsBlock(block: Uint8Array): { error: string | null; critical: boolean } {
  if (block.length > GENEVE_MAX_OPTIONS_LEN) {
    return {
      error: `Geneve options are at most ${GENEVE_MAX_OPTIONS_LEN} bytes, got ${block.length}`,
      critical: false,
    };
  }
  if ((block.length & 3) !== 0) {
    return { error: `Geneve options must be a multiple of 4 bytes, got ${block.length}`, critical: false };
  }
  let critical = false;
  let p = 0;
  while (p < block.length) {
    const next = geneveNextOption(block, p);
    if (next > block.length) return { error: `Geneve option at byte ${p} runs past the end of the options`, critical };
    if (geneveOptionCritical(block, p)) critical = true;
    p = next;
  }
  return { error: null, critical };
}

/**
 * A tunnel's Geneve header at buf[off]: base header with its VNI, C bit and `protocolType`,
 * then its pre-built options. The caller has checked the room (per-packet path).
 */
export function writeTunnelHeader(
  buf: Uint8Array,
  off: number,
  tunnel: { readonly vni: number; readonly options: Uint8Array; readonly optionsCritical: boolean },
  protocolType: number,
): void {
  const opts = tunnel.options;
  writeGeneveHeaderUnchecked(buf, off, tunnel.vni, protocolType, opts.length, false, tunnel.optionsCritical);
  const o = off + GENEVE_HEADER_LEN;
  for (let i = 0; i < opts.length; i++) buf[o + i] = opts[i]!;
}
