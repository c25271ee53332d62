import { describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import {
  GENEVE_SRC_PORT_MAX,
  GENEVE_SRC_PORT_MIN,
  flowSourcePort,
  innerFlowHash,
  sourcePortFromHash,
} from '../../src/geneve/flowhash.js';
import {
  GENEVE_FLAG_OAM,
  GENEVE_PROTO_IPV4,
  GENEVE_PROTO_IPV6,
  GENEVE_PROTO_TEB,
  geneveCritical,
  geneveOam,
  geneveOptionsLen,
  geneveProtocolType,
  geneveVni,
  writeGeneveHeader,
  writeGeneveOption,
} from '../../src/geneve/header.js';
import {
  GENEVE_MAX_HEADROOM,
  geneveEncapHeaderLen,
  geneveInnerMtu,
  geneveOverhead,
  geneveUnderlayMtu,
} from '../../src/geneve/mtu.js';
import { GENEVE_DROP_COUNT, GENEVE_DROP_NAMES, GeneveDrop } from '../../src/geneve/reasons.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { IPV4_FLAG_MF, ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { udpChecksum } from '../../src/packet/udp.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { Prng } from '../util/prng.js';
import { toHex } from '../util/hex.js';

const H = GENEVE_MAX_HEADROOM;

function setup(extra: Partial<GeneveTunnelSpec> = {}, opts: ConstructorParameters<typeof GeneveEngine>[1] = {}) {
  const table = new GeneveTunnelTable();
  const t = table.add({
    vni: 0x0a0b0c,
    remoteUnderlay: '192.0.2.2',
    localUnderlay: '192.0.2.1',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    ...extra,
  });
  const t6 = table.add({
    vni: 77,
    remoteUnderlay: '2001:db8::2',
    localUnderlay: '2001:db8::1',
    localInternalAddress: '10.80.0.9',
    remoteInternalAddress: '10.80.0.3',
  });
  // The other end of both tunnels, for packets that travel towards `engine` as whole IP packets.
  const peerTable = new GeneveTunnelTable();
  const pt = peerTable.add({
    vni: t.vni,
    remoteUnderlay: '192.0.2.1',
    localUnderlay: '192.0.2.2',
    localInternalAddress: '10.80.0.2',
    remoteInternalAddress: '10.80.0.1',
  });
  const pt6 = peerTable.add({
    vni: 77,
    remoteUnderlay: '2001:db8::1',
    localUnderlay: '2001:db8::2',
    localInternalAddress: '10.80.0.3',
    remoteInternalAddress: '10.80.0.9',
  });
  return {
    table,
    t,
    t6,
    engine: new GeneveEngine(table, opts),
    res: new GeneveResult(),
    peer: new GeneveEngine(peerTable, opts),
    pt,
    pt6,
  };
}

function packets(rng: Prng, n: number): Built[] {
  const out: Built[] = [];
  for (let i = 0; i < n; i++) {
    const v6 = rng.int(0, 1) === 1;
    const src = v6 ? `fd00::${rng.int(1, 0xffff).toString(16)}` : `10.0.${rng.int(0, 255)}.${rng.int(1, 254)}`;
    const dst = v6 ? `fd00:1::${rng.int(1, 0xffff).toString(16)}` : `10.1.${rng.int(0, 255)}.${rng.int(1, 254)}`;
    const payload = rng.bytes(rng.int(0, 1300));
    const kind = rng.int(0, 2);
    const common = { src, dst, payload, headroom: H, tailroom: rng.int(0, 16) };
    out.push(
      kind === 0
        ? icmpEcho(common)
        : kind === 1
          ? udpPacket({ ...common, sport: rng.int(1, 65535), dport: rng.int(1, 65535) })
          : tcpPacket({ ...common, sport: rng.int(1, 65535), dport: rng.int(1, 65535), mss: 1400 }),
    );
  }
  return out;
}

describe('GeneveEngine L3 encapsulation', () => {
  it('writes the Geneve header into the headroom and leaves the inner packet and everything before untouched', () => {
    const { t, engine, res } = setup();
    for (const b of [
      icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H }),
      udpPacket({ src: 'fd00::1', dst: 'fd00:1::1', sport: 1, dport: 2, headroom: H }),
    ]) {
      const before = b.buf.slice();
      expect(engine.encapsulate(b.buf, b.off, b.len, t, 0, res)).toBe(GeneveVerdict.Send);
      expect(res.verdict).toBe(GeneveVerdict.Send);
      expect(res.tunnel).toBe(t);
      expect(res.off).toBe(b.off - 8);
      expect(res.len).toBe(b.len + 8);
      expect(geneveVni(b.buf, res.off)).toBe(0x0a0b0c);
      expect(geneveProtocolType(b.buf, res.off)).toBe(
        b.buf[b.off]! >>> 4 === 4 ? GENEVE_PROTO_IPV4 : GENEVE_PROTO_IPV6,
      );
      expect(geneveOptionsLen(b.buf, res.off)).toBe(0);
      expect(geneveOam(b.buf, res.off)).toBe(false);
      expect(geneveCritical(b.buf, res.off)).toBe(false);
      expect(b.buf.subarray(b.off)).toEqual(before.subarray(b.off));
      expect(b.buf.subarray(0, res.off)).toEqual(before.subarray(0, res.off));
    }
    expect(engine.counters.txPackets).toBe(2);
    expect(t.txPackets).toBe(2);
  });

  it('copies the tunnel options and sets the C bit when one is critical', () => {
    const opts = new Uint8Array(4 + 8 + 4);
    writeGeneveOption(
      opts,
      writeGeneveOption(opts, 0, 0x0102, 0x03, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), 0, 8),
      0xffff,
      0x80,
      null,
      0,
      0,
    );
    const { t, engine, res } = setup({ options: opts });
    const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H });
    engine.encapsulate(b.buf, b.off, b.len, t, 0, res);
    expect(res.off).toBe(b.off - 8 - opts.length);
    expect(geneveOptionsLen(b.buf, res.off)).toBe(opts.length);
    expect(geneveCritical(b.buf, res.off)).toBe(true);
    expect(b.buf.subarray(res.off + 8, res.off + 8 + opts.length)).toEqual(opts);
  });

  it('round-trips random IPv4/IPv6 packets through decapsulate unchanged (seeded)', () => {
    const { t, t6, engine, res } = setup();
    const rng = new Prng(42);
    for (const b of packets(rng, 300)) {
      const tunnel = rng.int(0, 1) === 0 ? t : t6;
      const inner = toHex(b.buf, b.off, b.len);
      expect(engine.encapsulate(b.buf, b.off, b.len, tunnel, 0, res)).toBe(GeneveVerdict.Send);
      const { off, len } = res;
      const rx = new GeneveResult();
      expect(engine.decapsulate(b.buf, off, len, tunnel.remoteUnderlayText, 0, rx)).toBe(GeneveVerdict.Deliver);
      expect(rx.tunnel).toBe(tunnel);
      expect(rx.vni).toBe(tunnel.vni);
      expect(rx.off).toBe(b.off);
      expect(toHex(b.buf, rx.off, rx.len)).toBe(inner);
      expect(rx.innerProtocol).toBe(b.buf[b.off]! >>> 4 === 4 ? GENEVE_PROTO_IPV4 : GENEVE_PROTO_IPV6);
    }
    expect(engine.counters.rxPackets).toBe(300);
    expect(engine.counters.totalDrops()).toBe(0);
    expect(t.rxPackets + t6.rxPackets).toBe(300);
  });

  it('counts non-IP input as a drop and throws on API misuse (no headroom, region outside the buffer)', () => {
    const { t, engine, res } = setup();
    const buf = new Uint8Array(H + 100);
    buf[H] = 0x55;
    expect(engine.encapsulate(buf, H, 100, t, 0, res)).toBe(GeneveVerdict.Drop);
    expect(res.reason).toBe(GeneveDrop.BadInnerPacket);
    buf[H] = 0x45;
    expect(engine.encapsulate(buf, H, 19, t, 0, res)).toBe(GeneveVerdict.Drop);
    expect(engine.encapsulate(buf, H, 0, t, 0, res)).toBe(GeneveVerdict.Drop);
    expect(engine.counters.drops[GeneveDrop.BadInnerPacket]).toBe(3);
    expect(t.drops).toBe(3);
    expect(() => engine.encapsulate(buf, 7, 20, t, 0, res)).toThrow(RangeError);
    expect(() => engine.encapsulate(buf, H, 101, t, 0, res)).toThrow(RangeError);
    expect(() => engine.decapsulate(buf, 10, buf.length, '192.0.2.2', 0, res)).toThrow(RangeError);
    expect(() => engine.decapsulateIp(buf, -1, 10, 0, res)).toThrow(RangeError);
  });
});

describe('outer UDP source port (RFC 8926 §3.3)', () => {
  it('is in 49152..65535, equal for a flow whatever the payload, and spread over flows', () => {
    const ports = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const a = udpPacket({
        src: '10.0.0.1',
        dst: '10.1.0.1',
        sport: 1024 + i,
        dport: 53,
        payload: new Uint8Array(10),
      });
      const b = udpPacket({
        src: '10.0.0.1',
        dst: '10.1.0.1',
        sport: 1024 + i,
        dport: 53,
        payload: new Uint8Array(900).fill(i),
      });
      const pa = sourcePortFromHash(innerFlowHash(a.buf, a.off, a.len, 0));
      const pb = sourcePortFromHash(innerFlowHash(b.buf, b.off, b.len, 0));
      expect(pa).toBe(pb);
      expect(pa).toBeGreaterThanOrEqual(GENEVE_SRC_PORT_MIN);
      expect(pa).toBeLessThanOrEqual(GENEVE_SRC_PORT_MAX);
      ports.add(pa);
    }
    // 2000 flows into 16384 ports: a uniform hash leaves ~115 collisions; allow generous slack.
    expect(ports.size).toBeGreaterThan(1750);
    // The engine's one-call variant agrees with hash-then-map, and encapsulate reports it.
    const { t, engine, res } = setup();
    for (let i = 0; i < 50; i++) {
      const q = udpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 7 + i, dport: 53, headroom: H });
      const want = sourcePortFromHash(innerFlowHash(q.buf, q.off, q.len, 0));
      expect(flowSourcePort(q.buf, q.off, q.len, 0)).toBe(want);
      engine.encapsulate(q.buf, q.off, q.len, t, 0, res);
      expect(res.srcPort).toBe(want);
    }
    // The seed changes the mapping.
    const p = tcpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 1, dport: 2 });
    const seeds = new Set(
      [1, 2, 3, 4, 5, 6, 7, 8].map((s) => sourcePortFromHash(innerFlowHash(p.buf, p.off, p.len, s))),
    );
    expect(seeds.size).toBeGreaterThan(4);
  });

  it('uses ports for TCP/UDP, and keeps all IPv4 fragments of a datagram on one port', () => {
    const port = (b: Built): number => sourcePortFromHash(innerFlowHash(b.buf, b.off, b.len, 9));
    const a = udpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 1000, dport: 53 });
    const b = udpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 1001, dport: 53 });
    expect(port(a)).not.toBe(port(b));
    // First fragment (MF set) of either flow and a later fragment: the same port (no ports hashed).
    const first = udpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 1000, dport: 53 });
    first.buf[first.off + 6] = IPV4_FLAG_MF >>> 8;
    const later = udpPacket({ src: '10.0.0.1', dst: '10.1.0.1', sport: 7, dport: 7 });
    later.buf[later.off + 6] = 0;
    later.buf[later.off + 7] = 185; // fragment offset 185 × 8
    expect(port(first)).toBe(port(later));
    // IPv6: ports of UDP count.
    const c = udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1000, dport: 53 });
    const d = udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1001, dport: 53 });
    expect(port(c)).not.toBe(port(d));
  });
});

describe('GeneveEngine receive rules and drops', () => {
  /** A datagram for tunnel t (VNI 0x0a0b0c, from 192.0.2.2) carrying an IPv4 ICMP packet. */
  function datagram(mutate?: (buf: Uint8Array, off: number) => void): { buf: Uint8Array; off: number; len: number } {
    const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: 8 });
    writeGeneveHeader(b.buf, 0, 0x0a0b0c, GENEVE_PROTO_IPV4, 0, false, false);
    mutate?.(b.buf, 0);
    return { buf: b.buf, off: 0, len: b.buf.length };
  }

  it('drops every malformed or unwanted datagram with its reason, once', () => {
    const { engine, t, res } = setup();
    const cases: [GeneveDrop, { buf: Uint8Array; off: number; len: number }, string?][] = [
      [GeneveDrop.Truncated, { ...datagram(), len: 7 }],
      [
        GeneveDrop.BadVersion,
        datagram((b) => {
          b[0] = 0x40;
        }),
      ],
      [
        GeneveDrop.OptionsTruncated,
        datagram((b) => {
          b[0] = 0x3f;
        }),
      ],
      [
        GeneveDrop.Oam,
        datagram((b) => {
          b[1] = GENEVE_FLAG_OAM;
        }),
      ],
      [
        GeneveDrop.UnknownTunnel,
        datagram((b) => {
          b[6] = 0x0d;
        }),
      ],
      [GeneveDrop.UnknownTunnel, datagram(), '192.0.2.99'],
      [
        GeneveDrop.ModeMismatch,
        datagram((b) => {
          b[2] = GENEVE_PROTO_TEB >>> 8;
          b[3] = GENEVE_PROTO_TEB & 0xff;
        }),
      ],
      [
        GeneveDrop.UnknownProtocol,
        datagram((b) => {
          b[2] = 0x12;
          b[3] = 0x34;
        }),
      ],
      [
        GeneveDrop.InnerMalformed,
        datagram((b) => {
          b[2] = GENEVE_PROTO_IPV6 >>> 8;
          b[3] = GENEVE_PROTO_IPV6 & 0xff;
        }),
      ],
      [
        GeneveDrop.InnerMalformed,
        datagram((b) => {
          b[8 + 2] = 0xff;
        }),
      ], // total length beyond the data
      [
        GeneveDrop.InnerMalformed,
        datagram((b) => {
          b[8] = 0x44;
        }),
      ], // IHL 4
      [GeneveDrop.InnerMalformed, { ...datagram(), len: 8 + 19 }],
    ];
    for (const [reason, d, from] of cases) {
      expect(engine.decapsulate(d.buf, d.off, d.len, from ?? '192.0.2.2', 0, res), GENEVE_DROP_NAMES[reason]).toBe(
        GeneveVerdict.Drop,
      );
      expect(res.reason).toBe(reason);
    }
    for (let r = 1; r < GENEVE_DROP_COUNT; r++) {
      expect(engine.counters.drops[r], GENEVE_DROP_NAMES[r]).toBe(cases.filter((c) => c[0] === r).length);
    }
    // Drops after the tunnel was identified are charged to it.
    expect(t.drops).toBe(6);
    expect(engine.counters.rxPackets).toBe(0);
  });

  it('critical options: dropped unless understood; non-critical ones pass and are exposed', () => {
    const build = (type: number) => {
      const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: 16 });
      writeGeneveHeader(b.buf, 0, 0x0a0b0c, GENEVE_PROTO_IPV4, 8, false, (type & 0x80) !== 0);
      writeGeneveOption(b.buf, 8, 0x0101, type, new Uint8Array([9, 9, 9, 9]), 0, 4);
      return b;
    };
    const plain = setup();
    const crit = build(0x85);
    expect(plain.engine.decapsulate(crit.buf, 0, crit.buf.length, '192.0.2.2', 0, plain.res)).toBe(GeneveVerdict.Drop);
    expect(plain.res.reason).toBe(GeneveDrop.CriticalOption);
    const nonCrit = build(0x05);
    expect(plain.engine.decapsulate(nonCrit.buf, 0, nonCrit.buf.length, '192.0.2.2', 0, plain.res)).toBe(
      GeneveVerdict.Deliver,
    );
    expect(plain.res.optionsOff).toBe(8);
    expect(plain.res.optionsLen).toBe(8);
    expect(plain.res.off).toBe(16);
    const knowing = setup({}, { understoodOptions: [{ optionClass: 0x0101, type: 0x85 }] });
    expect(knowing.engine.decapsulate(crit.buf, 0, crit.buf.length, '192.0.2.2', 0, knowing.res)).toBe(
      GeneveVerdict.Deliver,
    );
  });

  it('trims link padding after the inner packet to its own length', () => {
    const { engine, res } = setup();
    const d = datagram();
    const padded = new Uint8Array(d.len + 12);
    padded.set(d.buf);
    expect(engine.decapsulate(padded, 0, padded.length, '192.0.2.2', 0, res)).toBe(GeneveVerdict.Deliver);
    expect(res.len).toBe(d.len - 8);
  });

  it('never throws on seeded random and mutated datagrams; every call is accounted for', () => {
    const { engine, t, t6, res, peer, pt, pt6 } = setup();
    const rng = new Prng(0xfeed);
    const valid = packets(rng, 40).map((b) => {
      const v4 = rng.int(0, 1) === 0;
      peer.encapsulateIp(b.buf, b.off, b.len, v4 ? pt : pt6, 0, res);
      return {
        buf: b.buf.slice(res.ipOff, res.ipOff + res.ipLen),
        udpPayloadAt: res.off - res.ipOff,
        from: (v4 ? t : t6).remoteUnderlayText,
      };
    });
    // Unmodified, every one of them is delivered both ways.
    for (const v of valid) {
      expect(engine.decapsulateIp(v.buf, 0, v.buf.length, 0, res)).toBe(GeneveVerdict.Deliver);
      expect(engine.decapsulate(v.buf, v.udpPayloadAt, v.buf.length - v.udpPayloadAt, v.from, 0, res)).toBe(
        GeneveVerdict.Deliver,
      );
    }
    engine.counters.reset();
    let calls = 0;
    let delivered = 0;
    let consumedOrControl = 0;
    for (let i = 0; i < 20000; i++) {
      const v = valid[rng.int(0, valid.length - 1)]!;
      let buf: Uint8Array;
      if (i % 4 === 0) {
        buf = rng.bytes(rng.int(0, 200));
      } else {
        buf = v.buf.slice();
        for (let k = rng.int(1, 4); k > 0; k--) buf[rng.int(0, buf.length - 1)] ^= 1 << rng.int(0, 7);
        if (i % 3 === 0) buf = buf.subarray(0, rng.int(0, buf.length));
      }
      const whole = i % 2 === 0;
      const verdict = whole
        ? engine.decapsulateIp(buf, 0, buf.length, i, res)
        : engine.decapsulate(
            buf,
            Math.min(v.udpPayloadAt, buf.length),
            buf.length - Math.min(v.udpPayloadAt, buf.length),
            v.from,
            i,
            res,
          );
      calls++;
      if (verdict === GeneveVerdict.Deliver) {
        delivered++;
        expect(res.off + res.len).toBeLessThanOrEqual(buf.length);
      } else if (verdict !== GeneveVerdict.Drop) {
        consumedOrControl++;
      }
    }
    expect(delivered + consumedOrControl + engine.counters.totalDrops()).toBe(calls);
    expect(engine.counters.rxPackets).toBe(delivered);
    expect(delivered).toBeGreaterThan(0); // flips in the inner payload still decode on the UDP-payload path
    expect(engine.counters.drops[GeneveDrop.BadOuter]).toBeGreaterThan(0);
  });
});

describe('whole outer packets (encapsulateIp / decapsulateIp)', () => {
  it('builds valid IPv4 and IPv6 outer headers with UDP checksums, and reads them back', () => {
    const { engine, pt, pt6, peer, res } = setup();
    for (const tunnel of [pt, pt6]) {
      const b = tcpPacket({
        src: '10.0.0.1',
        dst: '10.1.0.1',
        sport: 5,
        dport: 6,
        payload: new Uint8Array(500).fill(3),
        headroom: H,
      });
      const inner = toHex(b.buf, b.off, b.len);
      expect(peer.encapsulateIp(b.buf, b.off, b.len, tunnel, 0, res)).toBe(GeneveVerdict.Send);
      expect(res.ipLen).toBe(b.len + geneveOverhead(tunnel.underlayFamily, 'l3'));
      expect(res.ipOff + res.ipLen).toBe(b.off + b.len);
      if (tunnel.underlayFamily === 4) expect(ipv4HeaderValid(b.buf, res.ipOff, res.ipLen)).toBe(true);
      const udpOff = res.off - 8;
      expect(udpChecksum(b.buf, udpOff)).not.toBe(0);
      const rx = new GeneveResult();
      expect(engine.decapsulateIp(b.buf, res.ipOff, res.ipLen, 0, rx)).toBe(GeneveVerdict.Deliver);
      expect(toHex(b.buf, rx.off, rx.len)).toBe(inner);
      // A corrupted byte is caught by the UDP checksum.
      b.buf[rx.off + 100] ^= 0x10;
      expect(engine.decapsulateIp(b.buf, res.ipOff, res.ipLen, 0, rx)).toBe(GeneveVerdict.Drop);
      expect(rx.reason).toBe(GeneveDrop.BadOuter);
    }
  });

  it('zero UDP checksums: optional over IPv4, refused over IPv6 unless allowed', () => {
    const noCsum = setup({}, { udpChecksumV4: false });
    const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H });
    noCsum.peer.encapsulateIp(b.buf, b.off, b.len, noCsum.pt, 0, noCsum.res);
    expect(udpChecksum(b.buf, noCsum.res.off - 8)).toBe(0);
    const rx = new GeneveResult();
    expect(noCsum.engine.decapsulateIp(b.buf, noCsum.res.ipOff, noCsum.res.ipLen, 0, rx)).toBe(GeneveVerdict.Deliver);

    for (const accept of [false, true]) {
      const s = setup({}, { acceptZeroChecksumV6: accept });
      const c = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H });
      s.peer.encapsulateIp(c.buf, c.off, c.len, s.pt6, 0, s.res);
      c.buf[s.res.off - 2] = 0;
      c.buf[s.res.off - 1] = 0;
      expect(s.engine.decapsulateIp(c.buf, s.res.ipOff, s.res.ipLen, 0, rx)).toBe(
        accept ? GeneveVerdict.Deliver : GeneveVerdict.Drop,
      );
    }
  });

  it('refuses other ports, fragments and non-UDP; needs a local underlay address', () => {
    const { engine, peer, pt, res } = setup();
    const make = () => {
      const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H });
      peer.encapsulateIp(b.buf, b.off, b.len, pt, 0, res);
      return { buf: b.buf, off: res.ipOff, len: res.ipLen };
    };
    const rx = new GeneveResult();
    let p = make();
    expect(engine.decapsulateIp(p.buf, p.off, p.len, 0, rx)).toBe(GeneveVerdict.Deliver);
    const other = setup({}, { port: 6081 });
    expect(other.engine.decapsulateIp(p.buf, p.off, p.len, 0, rx)).toBe(GeneveVerdict.Drop);
    expect(rx.reason).toBe(GeneveDrop.BadOuter);
    p = make();
    p.buf[p.off + 9] = 6; // protocol TCP (header checksum now wrong too; either way BadOuter)
    expect(engine.decapsulateIp(p.buf, p.off, p.len, 0, rx)).toBe(GeneveVerdict.Drop);
    expect(rx.reason).toBe(GeneveDrop.BadOuter);
    p = make();
    p.buf[p.off + 6] |= IPV4_FLAG_MF >>> 8; // header checksum now wrong too; either way BadOuter
    expect(engine.decapsulateIp(p.buf, p.off, p.len, 0, rx)).toBe(GeneveVerdict.Drop);
    expect(rx.reason).toBe(GeneveDrop.BadOuter);
    const table = new GeneveTunnelTable();
    const noLocal = table.add({
      vni: 1,
      remoteUnderlay: '192.0.2.2',
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: '10.80.0.2',
    });
    const b = icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: H });
    expect(() => new GeneveEngine(table).encapsulateIp(b.buf, b.off, b.len, noLocal, 0, res)).toThrow(/localUnderlay/);
  });
});

describe('MTU accounting', () => {
  it('subtracts outer IP + UDP + Geneve (+ options, + Ethernet in L2)', () => {
    expect(geneveOverhead(4, 'l3')).toBe(20 + 8 + 8);
    expect(geneveOverhead(6, 'l3')).toBe(40 + 8 + 8);
    expect(geneveOverhead(4, 'l2')).toBe(20 + 8 + 8 + 14);
    expect(geneveOverhead(6, 'l2', 8)).toBe(40 + 8 + 8 + 8 + 14);
    expect(geneveInnerMtu(1500, 4, 'l3')).toBe(1464);
    expect(geneveInnerMtu(1500, 4, 'l2')).toBe(1450);
    expect(geneveInnerMtu(1500, 6, 'l2', 4)).toBe(1426);
    expect(geneveUnderlayMtu(1340, 4, 'l2')).toBe(1390);
    expect(geneveEncapHeaderLen('l2', 12)).toBe(8 + 12 + 14);
    expect(() => geneveInnerMtu(50, 4, 'l2')).toThrow(RangeError);
    expect(GENEVE_MAX_HEADROOM).toBe(322);
  });

  it('a packet of exactly the inner MTU makes an outer packet of exactly the underlay MTU', () => {
    const { engine, t, t6, res } = setup();
    for (const tunnel of [t, t6]) {
      const mtu = geneveInnerMtu(1400, tunnel.underlayFamily, 'l3');
      const b = udpPacket({
        src: '10.0.0.1',
        dst: '10.1.0.1',
        sport: 1,
        dport: 2,
        payload: new Uint8Array(mtu - 28),
        headroom: H,
      });
      expect(b.len).toBe(mtu);
      engine.encapsulateIp(b.buf, b.off, b.len, tunnel, 0, res);
      expect(res.ipLen).toBe(1400);
    }
  });
});
