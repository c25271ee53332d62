/**
 * The smallest IPv4 stacks the rootless demo needs (sim.ts): a pod answers ICMP echo requests,
 * echoes UDP port 7, counts UDP port 9 (discard) and answers any other UDP port with ICMP Port
 * Unreachable (RFC 792), as a kernel would; every stack logs what it received, checksums
 * verified. A pod hands what it sends to its node's kernel (`PodUplink`).
 */
import { formatAddress, parseAddress } from '../packet/addr.js';
import { internetChecksum } from '../packet/checksum.js';
import {
  ICMP_ECHO_ID_OFFSET,
  ICMP_ECHO_SEQ_OFFSET,
  ICMP_ERROR_PAYLOAD_OFFSET,
  ICMP_HEADER_LEN,
  ICMPV4_CODE_PORT_UNREACHABLE,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV4_ECHO_REPLY,
  ICMPV4_ECHO_REQUEST,
  fillIcmpv4Checksum,
  icmpv4ChecksumValid,
} from '../packet/icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_ICMP,
  IP_PROTO_UDP,
  ipv4HeaderLen,
  ipv4HeaderValid,
  ipv4TotalLength,
  writeIpv4Header,
} from '../packet/ipv4.js';
import {
  UDP_DST_PORT_OFFSET,
  UDP_HEADER_LEN,
  UDP_SRC_PORT_OFFSET,
  fillUdpChecksumV4,
  udpChecksumValidV4,
  writeUdpHeader,
} from '../packet/udp.js';

/** Where a pod's packets go: its node's kernel. */
export interface PodUplink {
  fromPod(buf: Uint8Array, off: number, len: number): void;
}

/** Room for the packets pods and hosts originate. */
const SLOT_SIZE = 2048;
/** Where pods and hosts build the packets they originate (headroom for the node's Geneve header). */
const TX_OFFSET = 128;
const UDP_ECHO_PORT = 7;
/** Datagrams to this port are counted and dropped (the throughput sink). */
export const UDP_DISCARD_PORT = 9;

/** One received packet as a pod or host stack saw it. */
export interface SeenPacket {
  src: string;
  dst: string;
  protocol: number;
  /** ICMP type (or -1). */
  icmpType: number;
  /** For ICMP errors: the quoted packet's source and destination. */
  quotedSrc?: string;
  quotedDst?: string;
  /** Every checksum (IP header, ICMP / UDP, quoted IP header) verified. */
  checksumsOk: boolean;
}

export function describe(buf: Uint8Array, off: number, len: number): SeenPacket {
  const hl = ipv4HeaderLen(buf, off);
  const total = ipv4TotalLength(buf, off);
  const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
  const p: SeenPacket = {
    src: formatAddress(buf, off + IPV4_SRC_OFFSET, 4),
    dst: formatAddress(buf, off + IPV4_DST_OFFSET, 4),
    protocol: proto,
    icmpType: -1,
    checksumsOk: ipv4HeaderValid(buf, off, len),
  };
  const l4 = off + hl;
  if (proto === IP_PROTO_ICMP) {
    p.icmpType = buf[l4]!;
    p.checksumsOk &&= icmpv4ChecksumValid(buf, l4, total - hl);
    if (p.icmpType === ICMPV4_DEST_UNREACHABLE || p.icmpType === 11) {
      const q = l4 + ICMP_ERROR_PAYLOAD_OFFSET;
      p.quotedSrc = formatAddress(buf, q + IPV4_SRC_OFFSET, 4);
      p.quotedDst = formatAddress(buf, q + IPV4_DST_OFFSET, 4);
      p.checksumsOk &&= internetChecksum(buf, q, ipv4HeaderLen(buf, q)) === 0;
    }
  } else if (proto === IP_PROTO_UDP) {
    p.checksumsOk &&= udpChecksumValidV4(buf, off, l4, total - hl);
  }
  return p;
}

/** The last 64 packets a stack received, and how many it received in all. */
export class SeenLog {
  readonly recent: SeenPacket[] = [];
  total = 0;

  add(p: SeenPacket): void {
    this.total++;
    this.recent.push(p);
    if (this.recent.length > 64) this.recent.shift();
  }

  /** Packets received after the log had `total` entries (at most the last 64). */
  since(total: number): SeenPacket[] {
    const n = Math.min(this.total - total, this.recent.length);
    return n <= 0 ? [] : this.recent.slice(this.recent.length - n);
  }
}

/** Swap the IPv4 source and destination in place (checksums unchanged: the sum is order-independent). */
function swapAddresses(buf: Uint8Array, off: number): void {
  for (let i = 0; i < 4; i++) {
    const t = buf[off + IPV4_SRC_OFFSET + i]!;
    buf[off + IPV4_SRC_OFFSET + i] = buf[off + IPV4_DST_OFFSET + i]!;
    buf[off + IPV4_DST_OFFSET + i] = t;
  }
}

/** A pod: an IPv4 address and the smallest stack the demo needs. */
export class SimPod {
  readonly address: Uint8Array;
  /** What was delivered to this pod (except the discard port's packets). */
  readonly seen = new SeenLog();
  discardPackets = 0;
  discardBytes = 0;
  private readonly scratch = new Uint8Array(SLOT_SIZE);

  constructor(
    readonly name: string,
    readonly ip: string,
    private readonly node: PodUplink,
  ) {
    this.address = parseAddress(ip);
  }

  /** A packet for this pod, at buf[off, off+len) (the pod may reuse the buffer for its answer). */
  receive(buf: Uint8Array, off: number, len: number): void {
    const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
    const hl = ipv4HeaderLen(buf, off);
    const total = ipv4TotalLength(buf, off);
    const l4 = off + hl;
    if (
      proto === IP_PROTO_UDP &&
      ((buf[l4 + UDP_DST_PORT_OFFSET]! << 8) | buf[l4 + UDP_DST_PORT_OFFSET + 1]!) === UDP_DISCARD_PORT
    ) {
      // The throughput sink: count without looking further (like a socket that reads and drops).
      this.discardPackets++;
      this.discardBytes += total;
      return;
    }
    this.seen.add(describe(buf, off, len));
    if (proto === IP_PROTO_ICMP && buf[l4] === ICMPV4_ECHO_REQUEST) {
      swapAddresses(buf, off);
      buf[l4] = ICMPV4_ECHO_REPLY;
      fillIcmpv4Checksum(buf, l4, total - hl);
      this.node.fromPod(buf, off, total);
    } else if (proto === IP_PROTO_UDP) {
      const dport = (buf[l4 + UDP_DST_PORT_OFFSET]! << 8) | buf[l4 + UDP_DST_PORT_OFFSET + 1]!;
      if (dport === UDP_ECHO_PORT) {
        swapAddresses(buf, off);
        for (let i = 0; i < 2; i++) {
          const t = buf[l4 + UDP_SRC_PORT_OFFSET + i]!;
          buf[l4 + UDP_SRC_PORT_OFFSET + i] = buf[l4 + UDP_DST_PORT_OFFSET + i]!;
          buf[l4 + UDP_DST_PORT_OFFSET + i] = t;
        }
        fillUdpChecksumV4(buf, off, l4, total - hl);
        this.node.fromPod(buf, off, total);
      } else {
        this.portUnreachable(buf, off, hl);
      }
    }
  }

  /** ICMP Destination Unreachable / Port Unreachable quoting the IP header + 8 bytes (RFC 792). */
  private portUnreachable(buf: Uint8Array, off: number, hl: number): void {
    const quoted = hl + 8;
    const icmpLen = ICMP_HEADER_LEN + quoted;
    const s = this.scratch;
    const o = TX_OFFSET;
    writeIpv4Header(s, o, this.address, 0, buf, off + IPV4_SRC_OFFSET, IP_PROTO_ICMP, icmpLen, 64, 0, false);
    const l4 = o + IPV4_MIN_HEADER_LEN;
    s.fill(0, l4, l4 + ICMP_HEADER_LEN);
    s[l4] = ICMPV4_DEST_UNREACHABLE;
    s[l4 + 1] = ICMPV4_CODE_PORT_UNREACHABLE;
    s.set(buf.subarray(off, off + quoted), l4 + ICMP_HEADER_LEN);
    fillIcmpv4Checksum(s, l4, icmpLen);
    this.node.fromPod(s, o, IPV4_MIN_HEADER_LEN + icmpLen);
  }

  /** Sends an ICMP echo request to `dst` (id/seq given), built in the pod's own buffer. */
  sendEcho(dst: string, id: number, seq: number, payload = 56): void {
    sendEchoFrom(this.scratch, this.address, parseAddress(dst), id, seq, payload, (b, o, l) =>
      this.node.fromPod(b, o, l),
    );
  }

  /** Sends one UDP datagram of `payload` bytes to dst:port. */
  sendUdp(dst: string, sport: number, dport: number, payload: number): void {
    const s = this.scratch;
    const o = TX_OFFSET;
    const udpLen = UDP_HEADER_LEN + payload;
    writeIpv4Header(s, o, this.address, 0, parseAddress(dst), 0, IP_PROTO_UDP, udpLen, 64, 0, true);
    const l4 = o + IPV4_MIN_HEADER_LEN;
    writeUdpHeader(s, l4, sport, dport, udpLen);
    s.fill(0x5a, l4 + UDP_HEADER_LEN, l4 + udpLen);
    fillUdpChecksumV4(s, o, l4, udpLen);
    this.node.fromPod(s, o, IPV4_MIN_HEADER_LEN + udpLen);
  }
}

export function sendEchoFrom(
  s: Uint8Array,
  src: Uint8Array,
  dst: Uint8Array,
  id: number,
  seq: number,
  payload: number,
  out: (b: Uint8Array, o: number, l: number) => void,
): void {
  const o = TX_OFFSET;
  const icmpLen = ICMP_HEADER_LEN + payload;
  writeIpv4Header(s, o, src, 0, dst, 0, IP_PROTO_ICMP, icmpLen, 64, seq & 0xffff, true);
  const l4 = o + IPV4_MIN_HEADER_LEN;
  s[l4] = ICMPV4_ECHO_REQUEST;
  s[l4 + 1] = 0;
  s[l4 + ICMP_ECHO_ID_OFFSET] = id >>> 8;
  s[l4 + ICMP_ECHO_ID_OFFSET + 1] = id & 0xff;
  s[l4 + ICMP_ECHO_SEQ_OFFSET] = (seq >>> 8) & 0xff;
  s[l4 + ICMP_ECHO_SEQ_OFFSET + 1] = seq & 0xff;
  for (let i = 0; i < payload; i++) s[l4 + ICMP_HEADER_LEN + i] = i & 0xff;
  fillIcmpv4Checksum(s, l4, icmpLen);
  out(s, o, IPV4_MIN_HEADER_LEN + icmpLen);
}
