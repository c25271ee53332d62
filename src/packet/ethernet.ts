/**
 * Ethernet II frame header (IEEE 802.3 clause 3.2.6 "Type" interpretation), as carried by
 * Geneve in L2 mode (protocol type 0x6558, "Transparent Ethernet Bridging").
 *
 * Contract: readers assume the 14 header bytes are present. Nothing here allocates except
 * parseMac/formatMac (configuration helpers).
 */

export const ETH_DST_OFFSET = 0;
export const ETH_SRC_OFFSET = 6;
export const ETH_TYPE_OFFSET = 12;
export const ETH_HEADER_LEN = 14;
export const MAC_LEN = 6;

export const ETHERTYPE_IPV4 = 0x0800;
export const ETHERTYPE_ARP = 0x0806;
export const ETHERTYPE_VLAN = 0x8100;
export const ETHERTYPE_IPV6 = 0x86dd;
/** Transparent Ethernet Bridging: the Geneve protocol type for an inner Ethernet frame. */
export const ETHERTYPE_TEB = 0x6558;

/** Bad MAC address text in configuration. */
export class MacParseError extends Error {
  override readonly name = 'MacParseError';
  constructor(readonly text: string) {
    super(`invalid MAC address ${JSON.stringify(text)}: expected six hex octets like 02:00:5e:10:00:01`);
  }
}

export function ethType(buf: Uint8Array, off: number): number {
  return (buf[off + ETH_TYPE_OFFSET]! << 8) | buf[off + ETH_TYPE_OFFSET + 1]!;
}

export function setEthType(buf: Uint8Array, off: number, type: number): void {
  buf[off + ETH_TYPE_OFFSET] = (type >>> 8) & 0xff;
  buf[off + ETH_TYPE_OFFSET + 1] = type & 0xff;
}

/** Group bit (I/G) of the destination: broadcast or multicast. */
export function ethDstIsMulticast(buf: Uint8Array, off: number): boolean {
  return (buf[off + ETH_DST_OFFSET]! & 0x01) !== 0;
}

export function ethDstIsBroadcast(buf: Uint8Array, off: number): boolean {
  for (let i = 0; i < MAC_LEN; i++) if (buf[off + ETH_DST_OFFSET + i] !== 0xff) return false;
  return true;
}

/**
 * Write a 14-byte Ethernet II header at buf[off]; dst/src are 6-byte MACs read from
 * dstBuf[dstOff], srcBuf[srcOff]. Returns 14.
 */
export function writeEthHeader(
  buf: Uint8Array,
  off: number,
  dstBuf: Uint8Array,
  dstOff: number,
  srcBuf: Uint8Array,
  srcOff: number,
  type: number,
): number {
  if (off < 0 || off + ETH_HEADER_LEN > buf.length) throw new RangeError('Ethernet header does not fit in the buffer');
  for (let i = 0; i < MAC_LEN; i++) {
    buf[off + ETH_DST_OFFSET + i] = dstBuf[dstOff + i]!;
    buf[off + ETH_SRC_OFFSET + i] = srcBuf[srcOff + i]!;
  }
  setEthType(buf, off, type);
  return ETH_HEADER_LEN;
}

export const BROADCAST_MAC: Readonly<Uint8Array> = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

/** Parse "aa:bb:cc:dd:ee:ff" (or with '-') into 6 new bytes. Throws MacParseError. */
export function parseMac(text: string): Uint8Array {
  const m =
    /^([0-9a-fA-F]{2})([:-])([0-9a-fA-F]{2})\2([0-9a-fA-F]{2})\2([0-9a-fA-F]{2})\2([0-9a-fA-F]{2})\2([0-9a-fA-F]{2})$/.exec(
      text,
    );
  if (m === null) throw new MacParseError(text);
  return new Uint8Array([m[1]!, m[3]!, m[4]!, m[5]!, m[6]!, m[7]!].map((h) => parseInt(h, 16)));
}

/** Lowercase colon-separated text of the MAC at buf[off]. */
export function formatMac(buf: Uint8Array, off = 0): string {
  const parts: string[] = [];
  for (let i = 0; i < MAC_LEN; i++) parts.push(buf[off + i]!.toString(16).padStart(2, '0'));
  return parts.join(':');
}
