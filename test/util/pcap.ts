/**
 * A tiny classic-pcap writer (the libpcap "savefile" format: a 24-byte global header, then one
 * 16-byte record header per packet), for tests that hand packets to tshark/tcpdump.
 * Little-endian, microsecond timestamps, magic 0xa1b2c3d4, version 2.4. Any helper may reuse it.
 */

import { writeFileSync } from 'node:fs';
import { readChecksum } from '../../src/packet/checksum.js';
import { fillTcpChecksumV4, TCP_FLAG_ACK } from '../../src/packet/tcp.js';
import { tcpPacket, type Built } from '../packet/factory.js';

/** Link-layer header types (tcpdump.org/linktypes.html). */
export const LINKTYPE_ETHERNET = 1;
/** Raw IPv4/IPv6, no link header. */
export const LINKTYPE_RAW = 101;

const GLOBAL_HEADER_LEN = 24;
const RECORD_HEADER_LEN = 16;

export class PcapWriter {
  private readonly chunks: Uint8Array[] = [];
  private size = GLOBAL_HEADER_LEN;
  private count = 0;

  constructor(
    readonly linktype = LINKTYPE_ETHERNET,
    readonly snaplen = 262144,
  ) {}

  get packets(): number {
    return this.count;
  }

  /** Append a copy of data[off, off+len) with a timestamp in milliseconds (default: 1 ms per packet). */
  add(data: Uint8Array, off = 0, len = data.length - off, timestampMs = this.count): void {
    const rec = new Uint8Array(RECORD_HEADER_LEN + len);
    const dv = new DataView(rec.buffer);
    const sec = Math.floor(timestampMs / 1000);
    const usec = Math.round((timestampMs - sec * 1000) * 1000);
    dv.setUint32(0, sec, true);
    dv.setUint32(4, usec, true);
    dv.setUint32(8, Math.min(len, this.snaplen), true);
    dv.setUint32(12, len, true);
    rec.set(data.subarray(off, off + Math.min(len, this.snaplen)), RECORD_HEADER_LEN);
    this.chunks.push(rec.subarray(0, RECORD_HEADER_LEN + Math.min(len, this.snaplen)));
    this.size += RECORD_HEADER_LEN + Math.min(len, this.snaplen);
    this.count++;
  }

  toBytes(): Uint8Array {
    const out = new Uint8Array(this.size);
    const dv = new DataView(out.buffer);
    dv.setUint32(0, 0xa1b2c3d4, true);
    dv.setUint16(4, 2, true);
    dv.setUint16(6, 4, true);
    dv.setInt32(8, 0, true); // thiszone
    dv.setUint32(12, 0, true); // sigfigs
    dv.setUint32(16, this.snaplen, true);
    dv.setUint32(20, this.linktype, true);
    let p = GLOBAL_HEADER_LEN;
    for (const c of this.chunks) {
      out.set(c, p);
      p += c.length;
    }
    return out;
  }

  writeFile(path: string): void {
    writeFileSync(path, this.toBytes());
  }
}

/**
 * A tshark display filter for a TCP checksum that does not verify. Wireshark also flags a TCP
 * checksum field of 0xffff where 0x0000 is computed (`tcp.checksum.ffff`, RFC 1624 §3): the two
 * are the same ones'-complement value and every receiver accepts it, and the kernel writes it
 * itself — skb_checksum_help() stores CSUM_MANGLED_0 (0xffff) for any zero result, UDP or TCP,
 * when it completes a checksum for a device without checksum offload (a TUN without
 * TUNSETOFFLOAD), so about 1 segment in 65,536 a local stack sends through one carries it.
 */
export const TSHARK_TCP_BAD = '(tcp.checksum.status==0 && !tcp.checksum.ffff)';
/** As TSHARK_TCP_BAD, and also a TCP checksum tshark could not verify (a truncated segment). */
export const TSHARK_TCP_NOT_GOOD = '(tcp.checksum.status!=1 && !tcp.checksum.ffff)';

/**
 * A TCP/IPv4 ACK whose two payload bytes make its correct checksum 0x0000 (the case where
 * 0xffff, the same value in one's complement, must not count as wrong); `csumOff` locates it.
 */
export function zeroChecksumTcp(): { p: Built; csumOff: number } {
  const p = tcpPacket({
    src: '10.80.0.1',
    dst: '10.0.1.2',
    sport: 7700,
    dport: 40000,
    flags: TCP_FLAG_ACK,
    payload: new Uint8Array(2),
  });
  const csumOff = p.l4 + 16;
  const c = readChecksum(p.buf, csumOff);
  p.buf[p.off + p.len - 2] = c >>> 8;
  p.buf[p.off + p.len - 1] = c & 0xff;
  fillTcpChecksumV4(p.buf, p.off, p.l4, p.off + p.len - p.l4);
  return { p, csumOff };
}
