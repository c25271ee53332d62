/**
 * IPv6 flows for the kernel oracle (oracle-bed.ts's play()): TCP open/close, UDP request/reply
 * with an ICMPv6 Time Exceeded quoting the last request as it arrived, ICMPv6 echo. Each reply
 * is built from the packet the other side captured. Not a test file; root only.
 */
import { formatAddress, parseAddress } from '../../src/packet/addr.js';
import { ICMPV6_ECHO_REPLY, ICMPV6_TIME_EXCEEDED, fillIcmpv6Checksum } from '../../src/packet/icmp.js';
import { IP_PROTO_ICMPV6 } from '../../src/packet/ipv4.js';
import { IPV6_HEADER_LEN, writeIpv6Header } from '../../src/packet/ipv6.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { other, p16, type Flow, type Side, type Step } from './oracle-flows.js';

const src6 = (b: Uint8Array): string => formatAddress(b, 8, 6);
const dst6 = (b: Uint8Array): string => formatAddress(b, 24, 6);
/** Transport header of the test's IPv6 packets (no extension headers). */
const T = IPV6_HEADER_LEN;

export function tcp6Flow(from: Side, src: string, dst: string, sport: number, dport: number, mss = 1460): Flow {
  const o = other(from);
  const fwd = (flags: number, seq: number, ack: number, m?: number) => (): Built =>
    tcpPacket({ src, dst, sport, dport, flags, seq, ack, ...(m ? { mss: m } : {}) });
  const rev =
    (flags: number, seq: number, ack: number) =>
    (l: Uint8Array | null): Built | null =>
      l === null
        ? null
        : tcpPacket({
            src: dst6(l),
            dst: src6(l),
            sport: p16(l, T + 2),
            dport: p16(l, T),
            flags,
            seq,
            ack,
            ...(flags & 2 ? { mss: 1460 } : {}),
          });
  return {
    name: `tcp6 ${from} [${src}]:${sport} → [${dst}]:${dport}`,
    steps: [
      { side: from, build: fwd(0x02, 1000, 0, mss), what: 'SYN' },
      { side: o, build: rev(0x12, 5000, 1001), what: 'SYN-ACK' },
      { side: from, build: fwd(0x10, 1001, 5001), what: 'ACK' },
      { side: from, build: fwd(0x11, 1001, 5001), what: 'FIN' },
      { side: o, build: rev(0x11, 5001, 1002), what: 'FIN reply' },
      { side: from, build: fwd(0x10, 1002, 5002), what: 'last ACK' },
    ],
  };
}

/** ICMPv6 Time Exceeded from `src` quoting IPv6 packet `l` as it arrived there (RFC 4443 §3.3). */
function timeExceeded6(l: Uint8Array, src: string): Built {
  const icmpLen = 8 + l.length;
  const buf = new Uint8Array(IPV6_HEADER_LEN + icmpLen);
  writeIpv6Header(buf, 0, parseAddress(src), 0, l, 8, IP_PROTO_ICMPV6, icmpLen, 64);
  buf[T] = ICMPV6_TIME_EXCEEDED;
  buf.set(l, T + 8);
  fillIcmpv6Checksum(buf, 0, T, icmpLen);
  return { buf, off: 0, len: buf.length, l4: T };
}

export function udp6Flow(from: Side, src: string, dst: string, sport: number, dport: number, error = false): Flow {
  const o = other(from);
  const steps: Step[] = [
    { side: from, build: () => udpPacket({ src, dst, sport, dport }), what: 'request' },
    {
      side: o,
      build: (l) =>
        l === null ? null : udpPacket({ src: dst6(l), dst: src6(l), sport: p16(l, T + 2), dport: p16(l, T) }),
      what: 'reply',
    },
    { side: from, build: () => udpPacket({ src, dst, sport, dport }), what: 'request again' },
  ];
  if (error)
    steps.push({
      side: o,
      what: 'ICMPv6 Time Exceeded',
      build: (l) => (l === null ? null : timeExceeded6(l, o === 'a' ? 'fd00:a::2' : 'fd00:b::2')),
    });
  return { name: `udp6 ${from} [${src}]:${sport} → [${dst}]:${dport}${error ? ' + ICMPv6 error' : ''}`, steps };
}

export function echo6Flow(from: Side, src: string, dst: string, ident: number): Flow {
  return {
    name: `echo6 ${from} ${src} → ${dst}`,
    steps: [
      { side: from, build: () => icmpEcho({ src, dst, ident }), what: 'echo request' },
      {
        side: other(from),
        build: (l) =>
          l === null ? null : icmpEcho({ src: dst6(l), dst: src6(l), ident: p16(l, T + 4), type: ICMPV6_ECHO_REPLY }),
        what: 'echo reply',
      },
    ],
  };
}
