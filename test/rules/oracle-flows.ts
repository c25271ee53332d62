/**
 * The IPv4 flows of the kernel oracle (oracle-bed.ts's play()): each flow is a script of steps,
 * a step's packet built from what the other side captured at the previous step (a reply to the
 * kernel's translated packet). TCP open/close, UDP request/reply (with a far router's ICMP
 * error), echo, TTL probes, fragments, and one IPv6 UDP exchange; the peers' addresses.
 */
import { fillIpv4Checksum } from '../../src/packet/ipv4.js';
import { TIME_EXCEEDED_V4_PREFIX, writeTimeExceeded } from '../../src/packet/icmp-error.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';

export const A_ADDR = '192.0.2.2',
  R_A_ADDR = '192.0.2.1',
  B_ADDR = '198.51.100.2',
  R_B_ADDR = '198.51.100.1';
export type Side = 'a' | 'b';
/** One step of a flow: which side sends, and the packet built from the last packet the sender's peer saw. */
export interface Step {
  side: Side;
  build: (last: Uint8Array | null) => Built | null;
  what: string;
  /** The answer comes back to the sender (reject, the router's Time Exceeded). */ back?: boolean;
  /** The answer is the router's own ICMP error: its outer TOS, IP id and header checksum are compared masked (docs/rules.md deviation). */ ownError?: boolean;
}
/** joined: compare the outputs of all steps together (the kernel holds fragments until the datagram is complete). */
export interface Flow {
  name: string;
  steps: Step[];
  joined?: boolean;
}

let nextId = 0x100;
/** A fresh IP id (one counter for every packet the flows build). */
export const freshId = (): number => nextId++;
export const other = (s: Side): Side => (s === 'a' ? 'b' : 'a');
export const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
export const ip4 = (b: Uint8Array, o: number): string => [...b.subarray(o, o + 4)].join('.');
export const p16 = (b: Uint8Array, o: number): number => (b[o]! << 8) | b[o + 1]!;

/**
 * TCP open/close: SYN, SYN-ACK, ACK, FIN, FIN, ACK with valid sequence numbers (conntrack checks them).
 * MSS 1460: a pod's own on a 1500-byte interface (not a Liqo value: Liqo's clamp lowers it to the
 * Helm value, by default the tunnel route's MTU 1340 − 40 = 1300).
 */
export function tcpFlow(from: Side, src: string, dst: string, sport: number, dport: number, mss = 1460): Flow {
  const s = from,
    o = other(from);
  const fwd = (flags: number, seq: number, ack: number, m?: number) => (): Built =>
    tcpPacket({ src, dst, sport, dport, flags, seq, ack, id: nextId++, ...(m ? { mss: m } : {}) });
  const rev =
    (flags: number, seq: number, ack: number) =>
    (last: Uint8Array | null): Built | null =>
      last === null
        ? null
        : tcpPacket({
            src: ip4(last, 16),
            dst: ip4(last, 12),
            sport: p16(last, 22),
            dport: p16(last, 20),
            flags,
            seq,
            ack,
            id: nextId++,
            ...(flags & 2 ? { mss: 1460 } : {}),
          });
  return {
    name: `tcp ${from} ${src}:${sport} → ${dst}:${dport}`,
    steps: [
      { side: s, build: fwd(0x02, 1000, 0, mss), what: 'SYN' },
      { side: o, build: rev(0x12, 5000, 1001), what: 'SYN-ACK' },
      { side: s, build: fwd(0x10, 1001, 5001), what: 'ACK' },
      { side: s, build: fwd(0x11, 1001, 5001), what: 'FIN' },
      { side: o, build: rev(0x11, 5001, 1002), what: 'FIN reply' },
      { side: s, build: fwd(0x10, 1002, 5002), what: 'last ACK' },
    ],
  };
}

export function udpFlow(from: Side, src: string, dst: string, sport: number, dport: number, error = false): Flow {
  const s = from,
    o = other(from);
  const steps: Step[] = [
    { side: s, build: () => udpPacket({ src, dst, sport, dport, id: nextId++ }), what: 'request' },
    {
      side: o,
      build: (l) =>
        l === null
          ? null
          : udpPacket({ src: ip4(l, 16), dst: ip4(l, 12), sport: p16(l, 22), dport: p16(l, 20), id: nextId++ }),
      what: 'reply',
    },
    { side: s, build: () => udpPacket({ src, dst, sport, dport, id: nextId++ }), what: 'request again' },
  ];
  if (error) {
    // A router on the far side answers the last request with Time Exceeded quoting it as it arrived.
    steps.push({
      side: o,
      what: 'ICMP error',
      build: (l) => {
        if (l === null) return null;
        const e = timeExceeded(l, o === 'a' ? A_ADDR : B_ADDR);
        e.buf[e.off + 4] = (nextId >> 8) & 255;
        e.buf[e.off + 5] = nextId++ & 255;
        fillIpv4Checksum(e.buf, e.off);
        return e;
      },
    });
  }
  return { name: `udp ${from} ${src}:${sport} → ${dst}:${dport}${error ? ' + ICMP error' : ''}`, steps };
}

/** A router at `src` answers IPv4 packet `l` (as it arrived there) with Time Exceeded quoting it. */
function timeExceeded(l: Uint8Array, src: string): Built {
  const buf = new Uint8Array(128 + l.length);
  buf.set(l, 128);
  const n = writeTimeExceeded(buf, 128, l.length, Uint8Array.from(src.split('.').map(Number)));
  return { buf, off: 128 - TIME_EXCEEDED_V4_PREFIX, len: n, l4: 128 - 8 };
}

/** A traceroute probe that dies at the router (TTL 1): the router's own Time Exceeded comes back to the sender. */
export function ttlProbe(from: Side, src: string, dst: string, sport: number, dport: number): Flow {
  return {
    name: `ttl 1 ${from} ${src}:${sport} → ${dst}:${dport}`,
    steps: [
      {
        side: from,
        back: true,
        ownError: true,
        what: 'probe, TTL 1',
        build: () => udpPacket({ src, dst, sport, dport, ttl: 1, id: nextId++ }),
      },
    ],
  };
}

/** A probe that passes the router and dies one hop behind it: a node there (source `errSrc`) answers Time Exceeded. */
export function hopBehind(from: Side, src: string, dst: string, sport: number, dport: number, errSrc: string): Flow {
  return {
    name: `hop behind ${from} ${src}:${sport} → ${dst}:${dport}, error from ${errSrc}`,
    steps: [
      { side: from, what: 'probe, TTL 2', build: () => udpPacket({ src, dst, sport, dport, ttl: 2, id: nextId++ }) },
      {
        side: other(from),
        what: 'Time Exceeded from the node',
        build: (l) => (l === null ? null : timeExceeded(l, errSrc)),
      },
    ],
  };
}

export function echoFlow(from: Side, src: string, dst: string, ident: number): Flow {
  return {
    name: `echo ${from} ${src} → ${dst}`,
    steps: [
      { side: from, build: () => icmpEcho({ src, dst, ident, id: nextId++ }), what: 'echo request' },
      {
        side: other(from),
        build: (l) =>
          l === null ? null : icmpEcho({ src: ip4(l, 16), dst: ip4(l, 12), ident: p16(l, 24), type: 0, id: nextId++ }),
        what: 'echo reply',
      },
    ],
  };
}

/** Non-first and first fragment of a UDP datagram (the first carrying the UDP header). */
export function fragments(from: Side, src: string, dst: string, sport: number): Flow {
  const whole = udpPacket({ src, dst, sport, dport: 53, id: 0x7777, payload: new Uint8Array(40).fill(0x61) });
  const ip = whole.buf.subarray(whole.off, whole.off + whole.len); // 20 + 8 + 40
  const frag = (first: boolean): Built => {
    const body = first ? ip.subarray(20, 20 + 24) : ip.subarray(20 + 24);
    const b = new Uint8Array(20 + body.length);
    b.set(ip.subarray(0, 20));
    b.set(body, 20);
    b[2] = 0;
    b[3] = b.length;
    b[6] = first ? 0x20 : 0x00;
    b[7] = first ? 0 : 3; // MF / offset 3 × 8 = 24
    fillIpv4Checksum(b, 0);
    return { buf: b, off: 0, len: b.length, l4: first ? 20 : -1 };
  };
  return {
    name: `fragments ${from} ${src} → ${dst}`,
    joined: true,
    steps: [
      { side: from, build: () => frag(true), what: 'first fragment' },
      { side: from, build: () => frag(false), what: 'second fragment' },
    ],
  };
}

export function ipv6Flow(): Flow {
  return {
    name: 'IPv6 UDP through the ip tables',
    steps: [
      {
        side: 'b',
        build: () => udpPacket({ src: 'fd00:b::2', dst: 'fd00:a::2', sport: 4444, dport: 53 }),
        what: 'v6 request',
      },
      {
        side: 'a',
        build: () => udpPacket({ src: 'fd00:a::2', dst: 'fd00:b::2', sport: 53, dport: 4444 }),
        what: 'v6 reply',
      },
    ],
  };
}
