/**
 * Fuzz target: the packet views (src/packet) on arbitrary bytes — IPv4/IPv6 with extension
 * chains, TCP (options, MSS), UDP, ICMP, ARP — and the ICMP errors built about a packet
 * (Time Exceeded, Fragmentation Needed, Packet Too Big) with its header quoted.
 *
 * Input: byte 0 = flags (bit 0: fix the checksums first; bit 1: leave only 8 bytes of tailroom),
 * the rest = the packet. Invariants: the view's offsets lie inside the packet and agree with
 * each other; header validators never accept a header that runs past the data; every error
 * built parses, carries correct checksums, is addressed to the packet's source and quotes the
 * packet's first bytes unchanged; an ARP request turned into a reply is a valid reply.
 */
import {
  ARP_OP_REPLY,
  ARP_OP_REQUEST,
  ARP_SPA_OFFSET,
  ARP_TPA_OFFSET,
  arpOperation,
  arpRequestToReply,
  arpValid,
} from '../../src/packet/arp.js';
import {
  TIME_EXCEEDED_V4_PREFIX,
  TIME_EXCEEDED_V6_PREFIX,
  errorAllowed,
  writeFragNeededV4,
  writePacketTooBigV6,
  writeTimeExceeded,
} from '../../src/packet/icmp-error.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { ipv6HeaderValid } from '../../src/packet/ipv6.js';
import { tcpFindMssOption, tcpHeaderLen, tcpHeaderValid } from '../../src/packet/tcp.js';
import { checksumProblem, fixChecksums, hex, must } from '../lib/check.js';

const HEAD = 64;
const MAC = new Uint8Array([2, 0, 0, 0, 0, 1]);
const SRC4 = new Uint8Array([10, 80, 0, 1]);
const SRC6 = new Uint8Array(16).fill(0xfd, 0, 1).fill(1, 15);
const v = new IpView();

function sameBytes(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (a[aOff + i] !== b[bOff + i]) return false;
  return true;
}

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  const flags = data[0]!;
  const pkt = data.subarray(1);
  const len = pkt.length;
  const tail = (flags & 2) !== 0 ? 8 : 600;
  const buf = new Uint8Array(HEAD + len + tail);
  buf.set(pkt, HEAD);
  const off = HEAD;

  // ARP: the same bytes read as an ARP packet.
  if (arpValid(buf, off, len) && arpOperation(buf, off) === ARP_OP_REQUEST) {
    const a = buf.slice(off, off + 28);
    arpRequestToReply(a, 0, MAC);
    must(arpValid(a, 0, 28) && arpOperation(a, 0) === ARP_OP_REPLY, 'ARP reply is valid');
    must(sameBytes(a, ARP_SPA_OFFSET, buf, off + ARP_TPA_OFFSET, 4), 'ARP reply sender = request target');
  }

  if ((flags & 1) !== 0) fixChecksums(buf, off, len);
  const r = parseIp(buf, off, len, v);
  const ver = len > 0 ? buf[off]! >>> 4 : 0;
  if (r !== IP_OK) return;
  must(v.family === ver, `family ${v.family} = version nibble ${ver}`);
  must(v.off === off && v.end > off && v.end <= off + len, `end ${v.end - off} within [1, ${len}]`);
  must(
    v.srcOff >= off && v.dstOff >= v.srcOff + v.addrLen && v.dstOff + v.addrLen <= v.end,
    'addresses inside the header',
  );
  must(
    v.l4 === -1 ? v.l4Len === 0 : v.l4 > v.dstOff && v.l4 <= v.end && v.l4Len === v.end - v.l4,
    `transport offset ${v.l4 - off}/${v.l4Len}`,
  );
  // ipv4HeaderValid also verifies the header checksum, which parseIp leaves to the receiver.
  if (ver === 6) must(ipv6HeaderValid(buf, off, len), 'parseIp accepted an IPv6 header ipv6HeaderValid refuses');
  if ((flags & 1) !== 0) {
    if (ver === 4) must(ipv4HeaderValid(buf, off, len), 'parseIp accepted an IPv4 header ipv4HeaderValid refuses');
    const p = checksumProblem(buf, off, len);
    must(p === null, `after fixing, ${p}`);
  }
  if (v.l4 >= 0 && v.proto === 6 && tcpHeaderValid(buf, v.l4, v.l4Len)) {
    const hl = tcpHeaderLen(buf, v.l4);
    must(hl >= 20 && hl <= v.l4Len, `TCP header length ${hl} within ${v.l4Len}`);
    const mss = tcpFindMssOption(buf, v.l4, v.l4Len);
    must(
      mss === -1 || (mss >= v.l4 + 22 && mss + 2 <= v.l4 + hl),
      `MSS value at ${mss - v.l4} inside the ${hl}-byte header`,
    );
  }

  // Errors about the packet, built from a copy so the original stays for comparison.
  const orig = buf.slice(off, off + len);
  const allowed = errorAllowed(buf, off, len);
  {
    const b = buf.slice();
    const n = writeTimeExceeded(b, off, len, ver === 4 ? SRC4 : SRC6);
    must(allowed ? n > 0 : n <= 0, `writeTimeExceeded ${n} agrees with errorAllowed ${allowed}`);
    if (n > 0)
      checkError(
        b,
        off - (ver === 4 ? TIME_EXCEEDED_V4_PREFIX : TIME_EXCEEDED_V6_PREFIX),
        n,
        orig,
        ver,
        'Time Exceeded',
      );
  }
  {
    const b = buf.slice(off);
    const total = v.end - off;
    const n = ver === 4 ? writeFragNeededV4(b, 0, total, 1280, SRC4) : writePacketTooBigV6(b, 0, total, 1280, SRC6);
    if (n > 0) checkError(b, 0, n, orig, ver, ver === 4 ? 'Fragmentation Needed' : 'Packet Too Big');
  }
}

function checkError(b: Uint8Array, start: number, n: number, orig: Uint8Array, ver: number, what: string): void {
  const e = new IpView();
  must(parseIp(b, start, n, e) === IP_OK && e.end === start + n, `${what}: parses with length ${n}`);
  const p = checksumProblem(b, start, n);
  must(p === null, `${what}: ${p} (${hex(b, start, n)})`);
  must(sameBytes(b, e.dstOff, orig, ver === 4 ? 12 : 8, e.addrLen), `${what}: addressed to the packet's source`);
  const hdr = (ver === 4 ? 20 : 40) + 8;
  const quoted = n - hdr;
  must(
    quoted > 0 && quoted <= orig.length && sameBytes(b, start + hdr, orig, 0, quoted),
    `${what}: quotes the packet's first ${quoted} bytes`,
  );
  must(n <= (ver === 4 ? 576 : 1280), `${what}: ${n} bytes within the RFC limit`);
}
