/**
 * Fuzz target: the NAT (src/nat) in both directions, ICMP errors with quoted headers included.
 *
 * Configuration as Liqo's overlapping case: our pods 10.0.0.0/16 and fd00:a::/48, external
 * 10.70.0.0/16 and fd70::/64 (SNAT address 10.70.0.1 / fd70::1); one peer whose real pod CIDR is
 * ours too (remapped 10.71.0.0/16), external 10.70.0.0/16 remapped 10.72.0.0/16, IPv6 fd00:b::/48
 * remapped fd99::/48; an IP mapping 10.70.5.5 ↔ 10.0.9.9; MTU 1340.
 *
 * Input: up to 4 packets (fuzz/lib/records.ts), each with 3 header bytes: flags (bit 0: inbound
 * instead of outbound; bit 1: fix checksums first; bit 2: put palette addresses in — header byte
 * 1 picks the source, byte 2 the destination). Each input starts from a fresh NAT.
 * Invariants: the result is forward, reply or a named drop; a drop counts exactly one; forward
 * keeps the length and, for a packet whose checksums were right, every checksum still verifies
 * (incremental updates checked against full recomputation); a reply is a well-formed ICMP error
 * with correct checksums; outbound TCP/UDP/echo towards the peer followed by the peer's mirrored
 * reply inbound restores the original addresses, ports and echo identifier.
 */
import { parseAddress } from '../../src/packet/addr.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { Nat, type NatPeer } from '../../src/nat/nat.js';
import { NAT_DROP_MIN, NAT_FORWARD, NAT_REPLY, NAT_RESULT_COUNT } from '../../src/nat/results.js';
import { checksumProblem, fixChecksums, hex, must, total } from '../lib/check.js';
import { records } from '../lib/records.js';

const PALETTE4 = [
  '10.0.1.11',
  '10.0.2.23',
  '172.18.0.5',
  '10.71.2.23',
  '10.72.0.8',
  '10.70.0.1',
  '10.70.5.5',
  '10.0.9.9',
  '0.0.0.0',
  '255.255.255.255',
  '224.0.0.1',
  '10.71.255.255',
].map(parseAddress);
const PALETTE6 = ['fd00:a::11', 'fd00:b::5', 'fd99::5', 'fd70::1', 'fd18::5', '::', 'ff02::1', '::1'].map(parseAddress);
const HEAD = 64;
const TAIL = 64;

let nat!: Nat;
let peer!: NatPeer;
let now = 1_000_000;
const v = new IpView();

export function reset(): void {
  nat = new Nat({
    localPodCIDRs: ['10.0.0.0/16', 'fd00:a::/48'],
    localExternalCIDR: '10.70.0.0/16',
    localExternalCIDRv6: 'fd70::/64',
    ipMappings: [{ externalAddress: '10.70.5.5', realAddress: '10.0.9.9' }],
    mtu: 1340,
    icmpSourceV4: '10.80.0.1',
    icmpSourceV6: 'fd80::1',
    icmpRatePerSecond: 1_000_000,
    icmpBurst: 1_000_000,
    conntrack: { seed: 1, capacity: 64 },
  });
  peer = nat.addPeer({
    name: 'b',
    remote: { podCIDRs: ['10.0.0.0/16', 'fd00:b::/48'], externalCIDRs: ['10.70.0.0/16'] },
    remapped: { podCIDRs: ['10.71.0.0/16', 'fd99::/48'], externalCIDRs: ['10.72.0.0/16'] },
  });
  now = 1_000_000;
}
reset();

function steer(buf: Uint8Array, off: number, len: number, s: number, d: number): void {
  const ver = buf[off]! >>> 4;
  if (ver === 4 && len >= 20) {
    buf.set(PALETTE4[s % PALETTE4.length]!, off + 12);
    buf.set(PALETTE4[d % PALETTE4.length]!, off + 16);
  } else if (ver === 6 && len >= 40) {
    buf.set(PALETTE6[s % PALETTE6.length]!, off + 8);
    buf.set(PALETTE6[d % PALETTE6.length]!, off + 24);
  }
}

function translate(buf: Uint8Array, off: number, len: number, inbound: boolean): number {
  const drops = total(nat.drops);
  const r = inbound ? nat.inbound(buf, off, len, peer, now) : nat.outbound(buf, off, len, peer, now);
  const counted = total(nat.drops) - drops;
  must(
    r === NAT_FORWARD || r === NAT_REPLY || (r >= NAT_DROP_MIN && r < NAT_RESULT_COUNT),
    `result ${r} is forward, reply or a named drop`,
  );
  must(counted === (r >= NAT_DROP_MIN ? 1 : 0), `result ${r} counted ${counted} drops`);
  return r;
}

/** What identifies the flow: protocol, addresses, ports or echo id (as hex), from a parsed packet. */
function flowKey(buf: Uint8Array, w: IpView, mirror: boolean): string {
  const s = hex(buf, w.srcOff, w.addrLen);
  const d = hex(buf, w.dstOff, w.addrLen);
  const ports = w.proto === 6 || w.proto === 17;
  const p1 = ports ? hex(buf, w.l4, 2) : hex(buf, w.l4 + 4, 2);
  const p2 = ports ? hex(buf, w.l4 + 2, 2) : p1;
  return mirror ? `${w.proto} ${d} ${s} ${p2} ${p1}` : `${w.proto} ${s} ${d} ${p1} ${p2}`;
}

export function fuzz(data: Uint8Array): void {
  reset();
  for (const r of records(data, 3, 4)) one(r.head, r.body);
}

function one(h: Uint8Array, pkt: Uint8Array): void {
  now += 3;
  const flags = h[0]!;
  const inbound = (flags & 1) !== 0;
  const len = pkt.length;
  const buf = new Uint8Array(HEAD + len + TAIL);
  const off = HEAD;
  buf.set(pkt, off);
  if ((flags & 4) !== 0) steer(buf, off, len, h[1]!, h[2]!);
  const fixed = (flags & 2) !== 0 && fixChecksums(buf, off, len);
  const parsed = parseIp(buf, off, len, v) === IP_OK;
  const csumOk = parsed && checksumProblem(buf, off, len) === null;
  const towardsPeer = !inbound && nat.peerFor(buf, off, len) === peer;
  const original = buf.slice(off, off + len);
  const r = translate(buf, off, len, inbound);
  if (r === NAT_REPLY) {
    const n = nat.replyLength;
    must(n > 0 && off + n <= buf.length, `reply length ${n}`);
    must(parseIp(buf, off, n, v) === IP_OK && (v.proto === 1 || v.proto === 58), 'the reply is an ICMP packet');
    const p = checksumProblem(buf, off, n);
    must(p === null, `reply: ${p}`);
    return;
  }
  if (r !== NAT_FORWARD) return;
  must(parseIp(buf, off, len, v) === IP_OK, 'a forwarded packet still parses');
  if (fixed || csumOk) {
    const p = checksumProblem(buf, off, len);
    must(
      p === null,
      `${inbound ? 'inbound' : 'outbound'} left a wrong ${p}: in ${hex(original)} out ${hex(buf, off, len)}`,
    );
  }
  // Round trip: the peer answers what left, from where it went to where it came from.
  if (!towardsPeer || !csumOk || v.l4 < 0) return;
  const icmpEcho =
    (v.proto === 1 && v.family === 4 && buf[v.l4] === 8) || (v.proto === 58 && v.family === 6 && buf[v.l4] === 128);
  if (!(v.proto === 6 || v.proto === 17 || icmpEcho) || v.l4Len < (v.proto === 6 ? 20 : 8)) return;
  if (v.family === 4 && ((buf[off + 6]! & 0x3f) | buf[off + 7]!) !== 0) return; // fragments carry no ports to restore
  const sent = flowKey(buf, v, true);
  const o = new IpView();
  parseIp(original, 0, len, o);
  const want = flowKey(original, o, true);
  const m = buf.slice();
  // Mirror: swap the addresses and the ports (or turn the echo request into its reply).
  const a = m.slice(v.srcOff, v.srcOff + v.addrLen);
  m.copyWithin(v.srcOff, v.dstOff, v.dstOff + v.addrLen);
  m.set(a, v.dstOff);
  if (icmpEcho) m[v.l4] = v.family === 4 ? 0 : 129;
  else {
    const p = m.slice(v.l4, v.l4 + 2);
    m.copyWithin(v.l4, v.l4 + 2, v.l4 + 4);
    m.set(p, v.l4 + 2);
    if (v.proto === 6) m[v.l4 + 13] = 0x10; // a plain ACK: the reply of an existing connection
  }
  fixChecksums(m, off, len);
  const back = translate(m, off, len, true);
  must(back === NAT_FORWARD, `the mirrored reply of ${sent} is forwarded inbound (got ${back})`);
  const w = new IpView();
  parseIp(m, off, len, w);
  const got = flowKey(m, w, false);
  must(got === want, `round trip restores the flow: want ${want}, got ${got}`);
  const p = checksumProblem(m, off, len);
  must(p === null, `inbound reply: ${p}`);
}
