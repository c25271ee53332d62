/**
 * Property (fast-check), for any remap configuration (random real/remapped prefix pairs of any
 * length; IPv4, Liqo's family ip tables) and any batch of TCP/UDP flows from local pods and
 * masqueraded hosts, through the gateway's data path (gateway-nat.ts: the router with the
 * configuration's compiled rules):
 * - outbound rewrites the destination to the peer's real CIDR keeping the host bits, and leaves a
 *   pod source alone;
 * - every checksum the translator patched incrementally equals a full recomputation (outbound
 *   and inbound, UDP with a zero checksum included);
 * - the peer's reply (the mirror of what left) translated inbound is the mirror of the original
 *   packet byte for byte: addresses and ports restored, even when many host flows share the
 *   SNAT address and ports collide.
 * PrefixRemap alone: translating into `to` and back with the reversed remap is the identity.
 * test/nat/property.test.ts covers ICMP, errors and MSS clamping with a seeded PRNG.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import { formatAddress, formatPrefix, type Prefix } from '../../src/packet/addr.js';
import { TCP_FLAG_ACK, TCP_FLAG_PSH } from '../../src/packet/tcp.js';
import { NAT_FORWARD } from '../../src/nat/results.js';
import { PrefixRemap } from '../../src/nat/remap.js';
import { tcpPacket, udpPacket } from '../packet/factory.js';
import { GatewayNat } from './gateway-nat.js';
import { bytesOf, mirror, recomputeAll, withHeadroom, type Pkt } from './helpers.js';

const LOCAL_POD4: Prefix = pfx(4, [10, 0, 0, 0], 16);
const LOCAL_POD6: Prefix = pfx(6, [0xfd, 0, 0, 0x0a], 48);

function pfx(family: 4 | 6, lead: number[], prefixLen: number): Prefix {
  const addr = new Uint8Array(family === 4 ? 4 : 16);
  addr.set(lead);
  return { family, addr, prefixLen };
}

/** `bits` leading bits from `base`, the rest from `fill`. */
function blend(base: Uint8Array, bits: number, fill: Uint8Array): Uint8Array {
  const out = new Uint8Array(base.length);
  for (let i = 0; i < base.length; i++) {
    const k = Math.max(0, Math.min(8, bits - i * 8));
    const m = (0xff00 >>> k) & 0xff;
    out[i] = (base[i]! & m) | (fill[i]! & ~m & 0xff);
  }
  return out;
}

function masked(a: Uint8Array, len: number): Uint8Array {
  return blend(a, len, new Uint8Array(a.length));
}

function inside(p: Prefix, a: Uint8Array): boolean {
  const m = masked(a, p.prefixLen);
  return m.every((b, i) => b === p.addr[i]);
}

const bytes = (n: number): fc.Arbitrary<Uint8Array> => fc.uint8Array({ minLength: n, maxLength: n });

/** A prefix of length `len` inside `within` (random network bits below it). */
function prefixIn(within: Prefix, len: number): fc.Arbitrary<Prefix> {
  return bytes(within.addr.length).map((r) => ({
    family: within.family,
    addr: masked(blend(within.addr, within.prefixLen, r), len),
    prefixLen: len,
  }));
}

interface Remaps {
  real4: Prefix;
  remapped4: Prefix;
  same4: Prefix;
  real6: Prefix;
  remapped6: Prefix;
}

const remaps: fc.Arbitrary<Remaps> = fc
  .record({ l4: fc.integer({ min: 16, max: 30 }), l6: fc.integer({ min: 32, max: 126 }) })
  .chain(({ l4, l6 }) =>
    fc.record({
      real4: prefixIn(pfx(4, [192, 168], 16), l4),
      remapped4: prefixIn(pfx(4, [100, 64], 10), l4),
      // The Liqo case: the peer uses our own pod CIDR, remapped somewhere free.
      same4: prefixIn(pfx(4, [10, 128], 9), LOCAL_POD4.prefixLen),
      real6: prefixIn(pfx(6, [0xfd, 0, 0, 0x0b], 32), l6),
      remapped6: prefixIn(pfx(6, [0xfd, 0x99], 16), l6),
    }),
  );

interface Flow {
  v6: boolean;
  fromPod: boolean;
  target: 0 | 1;
  src: Uint8Array;
  dst: Uint8Array;
  proto: 'tcp' | 'udp' | 'udp0';
  sport: number;
  dport: number;
  payload: Uint8Array;
  headroom: number;
}

// Few distinct host addresses, destinations and ports, so that masqueraded flows often collide on
// the SNAT address and port.
const flow: fc.Arbitrary<Flow> = fc
  .record({
    v6: fc.constant(false),
    fromPod: fc.boolean(),
    target: fc.constantFrom(0 as const, 1 as const),
    src: bytes(16),
    hostPick: fc.integer({ min: 0, max: 3 }),
    dst: fc.oneof(
      { weight: 3, arbitrary: fc.constant(new Uint8Array(16).fill(0x01)) },
      { weight: 1, arbitrary: bytes(16) },
    ),
    proto: fc.constantFrom('tcp' as const, 'udp' as const, 'udp0' as const),
    sport: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 1, max: 2 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 65535 }) },
    ),
    dport: fc.oneof(
      { weight: 3, arbitrary: fc.constant(80) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 65535 }) },
    ),
    payload: fc.uint8Array({ maxLength: 41 }),
    headroom: fc.integer({ min: 0, max: 40 }),
  })
  .map(({ hostPick, ...f }) =>
    f.fromPod ? f : { ...f, src: Uint8Array.from({ length: 16 }, (_, i) => (i === 15 ? hostPick : 0)) },
  );

function addressesOf(f: Flow, r: Remaps): { src: string; dst: string; real: Prefix; remapped: Prefix } {
  const [real, remapped] = f.v6
    ? [r.real6, r.remapped6]
    : f.target === 0
      ? [r.real4, r.remapped4]
      : [LOCAL_POD4, r.same4];
  const src = f.fromPod
    ? blend(
        (f.v6 ? LOCAL_POD6 : LOCAL_POD4).addr,
        (f.v6 ? LOCAL_POD6 : LOCAL_POD4).prefixLen,
        f.v6 ? f.src : f.src.subarray(0, 4),
      )
    : blend(
        f.v6 ? pfx(6, [0xfd, 0x18], 16).addr : pfx(4, [172, 18], 16).addr,
        f.v6 ? 120 : 24,
        f.v6 ? f.src : f.src.subarray(12, 16),
      );
  const dst = blend(remapped.addr, remapped.prefixLen, f.v6 ? f.dst : f.dst.subarray(0, 4));
  return { src: formatAddress(src), dst: formatAddress(dst), real, remapped };
}

function build(f: Flow, src: string, dst: string): Pkt {
  const { sport, dport, payload } = f;
  const p =
    f.proto === 'tcp'
      ? tcpPacket({ src, dst, sport, dport, flags: TCP_FLAG_ACK | TCP_FLAG_PSH, payload })
      : udpPacket({ src, dst, sport, dport, payload, noChecksum: f.proto === 'udp0' && !f.v6 });
  return withHeadroom(p, f.headroom, 3);
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

test.prop([remaps, fc.array(flow, { minLength: 1, maxLength: 24 })], { numRuns: 150 })(
  'outbound then the mirrored reply inbound restores every flow; patched checksums equal recomputation',
  (r, flows) => {
    const nat = new GatewayNat({
      localPodCIDRs: [formatPrefix(LOCAL_POD4)],
      localExternalCIDR: '10.70.0.0/16',
      conntrack: { seed: 1, capacity: 1024 },
    });
    const peer = nat.addPeer({
      name: 'b',
      remote: { podCIDRs: [formatPrefix(r.real4), formatPrefix(LOCAL_POD4)], externalCIDRs: [] },
      remapped: { podCIDRs: [formatPrefix(r.remapped4), formatPrefix(r.same4)], externalCIDRs: [] },
    });
    const sent: Array<{ original: Uint8Array; out: Pkt }> = [];
    for (const [i, f] of flows.entries()) {
      const a = addressesOf(f, r);
      const p = build(f, a.src, a.dst);
      const original = bytesOf(p);
      expect(nat.outbound(p.buf, p.off, p.len, peer, i)).toBe(NAT_FORWARD);
      expect(hex(bytesOf(p))).toBe(hex(recomputeAll(p)));
      const hl = f.v6 ? 40 : 20;
      const alen = f.v6 ? 16 : 4;
      const srcAt = p.off + (f.v6 ? 8 : 12);
      const outDst = p.buf.slice(srcAt + alen, srcAt + 2 * alen);
      const origDst = original.subarray(srcAt - p.off + alen, srcAt - p.off + 2 * alen);
      // DNAT: the real network bits, the original host bits (dst XOR changes exactly as real XOR remapped).
      expect(inside(a.real, outDst), `${formatAddress(outDst)} in ${formatPrefix(a.real)}`).toBe(true);
      expect(hex(outDst.map((b, k) => b ^ origDst[k]!))).toBe(hex(a.real.addr.map((b, k) => b ^ a.remapped.addr[k]!)));
      if (f.fromPod)
        expect(hex(p.buf.subarray(srcAt, srcAt + alen))).toBe(
          hex(original.subarray(srcAt - p.off, srcAt - p.off + alen)),
        );
      // The destination port is never rewritten.
      expect((p.buf[p.off + hl + 2]! << 8) | p.buf[p.off + hl + 3]!).toBe(f.dport);
      sent.push({ original, out: { buf: p.buf, off: p.off, len: p.len } });
    }
    // Replies after all flows are set up, newest first.
    for (const [i, s] of [...sent.entries()].reverse()) {
      const reply = mirror(s.out);
      expect(nat.inbound(reply.buf, reply.off, reply.len, peer, flows.length + i)).toBe(NAT_FORWARD);
      expect(hex(bytesOf(reply))).toBe(hex(recomputeAll(reply)));
      expect(hex(bytesOf(mirror(reply)))).toBe(hex(s.original));
    }
  },
);

test.prop([
  fc.constantFrom(4 as const, 6 as const).chain((family) => {
    const n = family === 4 ? 4 : 16;
    return fc.record({ len: fc.integer({ min: 0, max: n * 8 }), from: bytes(n), to: bytes(n), host: bytes(n) });
  }),
])('PrefixRemap: into `to` keeping the host bits, and back with the reversed remap', ({ len, from, to, host }) => {
  const family = from.length === 4 ? 4 : 6;
  const f: Prefix = { family, addr: masked(from, len), prefixLen: len };
  const t: Prefix = { family, addr: masked(to, len), prefixLen: len };
  const a = blend(f.addr, len, host);
  const out = new Uint8Array(a.length);
  new PrefixRemap(f, t).translate(a, 0, out, 0);
  expect(hex(out)).toBe(hex(blend(t.addr, len, host)));
  const back = new Uint8Array(a.length);
  new PrefixRemap(t, f).translate(out, 0, back, 0);
  expect(hex(back)).toBe(hex(a));
});
