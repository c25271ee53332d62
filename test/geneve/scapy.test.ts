/**
 * Interoperability with scapy's GENEVE layer (Debian python3-scapy 2.5, run as /usr/bin/python3):
 * scapy builds Geneve datagrams (options, VNI, IPv4/IPv6/TEB payloads, O bit, bad version) and
 * whole outer IPv4/IPv6 packets with scapy's UDP checksums; our codec and engine decode them and
 * must agree on every field. The other way round, scapy parses datagrams our engine built.
 * scapy 2.5 miscomputes Opt Len by itself (it masks with 0x2f), so the script sets optionlen; and
 * its option list needs an extract_padding fix to parse more than one option (see PARSE).
 */
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import {
  geneveCritical,
  geneveNextOption,
  geneveOam,
  geneveOptionClass,
  geneveOptionCritical,
  geneveOptionDataLen,
  geneveOptionDataOffset,
  geneveOptionsLen,
  geneveOptionType,
  geneveProtocolType,
  geneveVersion,
  geneveVni,
  validateGeneve,
  writeGeneveOption,
} from '../../src/geneve/header.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveDrop } from '../../src/geneve/reasons.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import { icmpEcho, udpPacket } from '../packet/factory.js';
import { needs, missingPythonModule } from '../util/requirements.js';

const PY = '/usr/bin/python3';
const scapyMissing = needs({
  other: [missingPythonModule(PY, 'scapy.contrib.geneve', 'python3-scapy', 'from scapy.contrib.geneve import GENEVE')],
});

const OUR_MAC = '02:57:0a:50:00:01';
const PEER_MAC = '02:00:00:00:00:99';

/** Builds seeded random cases; prints one JSON object per line. */
const BUILD = String.raw`
import json, random, sys
from scapy.all import IP, IPv6, UDP, ICMP, Ether, Raw, raw
from scapy.contrib.geneve import GENEVE, GeneveOptions
rng = random.Random(8926)
out = []
l3_vnis = [0, 1, 0xabcdef]
l2_vnis = [7, 0xffffff]
for i in range(160):
    kind = rng.choice(['ipv4', 'ipv6', 'teb'])
    vni = rng.choice(l2_vnis if kind == 'teb' else l3_vnis)
    opts = []
    room = 252
    for _ in range(rng.randint(0, 4)):
        n = rng.randint(0, min(31, (room - 4) // 4)) if room >= 4 else -1
        if n < 0: break
        crit = rng.random() < 0.1
        opts.append({'cls': rng.randint(0, 0xffff), 'type': rng.randint(0, 0x7f) | (0x80 if crit else 0),
                     'data': bytes(rng.getrandbits(8) for _ in range(4 * n)).hex()})
        room -= 4 + 4 * n
    oam = 1 if rng.random() < 0.05 else 0
    version = 1 if rng.random() < 0.03 else 0
    critical = 1 if any(o['type'] & 0x80 for o in opts) else 0
    if kind == 'ipv4':
        inner = IP(src='10.0.0.%d' % (i % 250 + 1), dst='10.1.0.1', id=i) / UDP(sport=1000 + i, dport=2000) / Raw(b'x' * rng.randint(0, 300))
        proto = 0x0800
    elif kind == 'ipv6':
        inner = IPv6(src='fd00::%x' % (i + 1), dst='fd00:1::1') / UDP(sport=1000 + i, dport=2000) / Raw(b'y' * rng.randint(0, 300))
        proto = 0x86dd
    else:
        inner = Ether(dst='${OUR_MAC}', src='${PEER_MAC}') / IP(src='10.0.0.9', dst='10.1.0.9') / ICMP(id=i, seq=1) / Raw(b'z' * rng.randint(0, 100))
        proto = 0x6558
    optlen = sum(4 + len(o['data']) // 2 for o in opts) // 4
    g = GENEVE(version=version, optionlen=optlen, oam=oam, critical=critical, proto=proto, vni=vni,
               options=[GeneveOptions(classid=o['cls'], type=o['type'], length=len(o['data']) // 8, data=bytes.fromhex(o['data'])) for o in opts]) / inner
    v6 = rng.random() < 0.5
    outer = (IPv6(src='2001:db8::2', dst='2001:db8::1') if v6 else IP(src='192.0.2.2', dst='192.0.2.1')) / UDP(sport=rng.randint(49152, 65535), dport=6091) / g
    out.append({'version': version, 'oam': oam, 'critical': critical, 'proto': proto, 'vni': vni, 'options': opts,
                'inner': raw(inner).hex(), 'geneve': raw(g).hex(), 'outer': raw(outer).hex(), 'from': '2001:db8::2' if v6 else '192.0.2.2'})
for o in out: print(json.dumps(o))
`;
import { toHex, fromHex } from '../util/hex.js';

/** Parses hex datagrams given on stdin (one per line) with scapy; prints the fields as JSON. */
const PARSE = String.raw`
import json, sys
from scapy.all import raw
from scapy.contrib.geneve import GENEVE, GeneveOptions
# scapy 2.5's GeneveOptions lacks extract_padding, so the first option would swallow the rest of
# the options area as its payload; this makes each option end at its own length.
GeneveOptions.extract_padding = lambda self, s: (b'', s)
for line in sys.stdin.read().split():
    g = GENEVE(bytes.fromhex(line))
    print(json.dumps({'version': g.version, 'optionlen': g.optionlen, 'oam': g.oam, 'critical': g.critical, 'reserved': g.reserved,
        'proto': g.proto, 'vni': g.vni, 'reserved2': g.reserved2,
        'options': [{'cls': o.classid, 'type': o.type, 'length': o.length, 'data': o.data.hex()} for o in g.options],
        'payload': raw(g.payload).hex()}))
`;

interface Case {
  version: number;
  oam: number;
  critical: number;
  proto: number;
  vni: number;
  options: { cls: number; type: number; data: string }[];
  inner: string;
  geneve: string;
  outer: string;
  from: string;
}

function makeTable(): GeneveTunnelTable {
  const table = new GeneveTunnelTable();
  let n = 2;
  for (const from of ['192.0.2.2', '2001:db8::2']) {
    for (const vni of [0, 1, 0xabcdef]) {
      table.add({
        vni,
        remoteUnderlay: from,
        localInternalAddress: '10.80.0.1',
        remoteInternalAddress: `10.80.0.${n++}`,
      });
    }
    for (const vni of [7, 0xffffff]) {
      table.add({
        vni,
        remoteUnderlay: from,
        localInternalAddress: '10.80.0.1',
        remoteInternalAddress: `10.80.0.${n++}`,
        mode: 'l2',
        localMac: OUR_MAC,
      });
    }
  }
  return table;
}

describe.skipIf(scapyMissing !== null)(
  `scapy GENEVE interop${scapyMissing ? ` (skipped: ${scapyMissing})` : ''}`,
  () => {
    let cases: Case[] = [];

    beforeAll(() => {
      const r = spawnSync(PY, ['-c', BUILD], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      cases = r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Case);
    });

    it('generated a varied set (all protocols, options, O bit, bad versions, critical options)', () => {
      expect(cases.length).toBe(160);
      expect(new Set(cases.map((c) => c.proto)).size).toBe(3);
      expect(cases.some((c) => c.options.length >= 3)).toBe(true);
      expect(cases.some((c) => c.oam === 1)).toBe(true);
      expect(cases.some((c) => c.version !== 0)).toBe(true);
      expect(cases.some((c) => c.critical === 1)).toBe(true);
      expect(cases.some((c) => c.options.some((o) => o.data.length === 248))).toBe(true); // a 124-byte option
    });

    it('our views read every field scapy wrote', () => {
      for (const c of cases) {
        const g = fromHex(c.geneve);
        expect(geneveVersion(g, 0)).toBe(c.version);
        expect(geneveOam(g, 0)).toBe(c.oam === 1);
        expect(geneveCritical(g, 0)).toBe(c.critical === 1);
        expect(geneveProtocolType(g, 0)).toBe(c.proto);
        expect(geneveVni(g, 0)).toBe(c.vni);
        const optLen = c.options.reduce((s, o) => s + 4 + o.data.length / 2, 0);
        expect(geneveOptionsLen(g, 0)).toBe(optLen);
        let p = 8;
        for (const o of c.options) {
          expect(geneveOptionClass(g, p)).toBe(o.cls);
          expect(geneveOptionType(g, p)).toBe(o.type);
          expect(geneveOptionCritical(g, p)).toBe((o.type & 0x80) !== 0);
          expect(geneveOptionDataLen(g, p)).toBe(o.data.length / 2);
          expect(toHex(g, geneveOptionDataOffset(p), o.data.length / 2)).toBe(o.data);
          p = geneveNextOption(g, p);
        }
        expect(p).toBe(8 + optLen);
        expect(toHex(g, p)).toBe(c.inner);
      }
    });

    it("the engine delivers exactly scapy's inner packet, or drops with the RFC 8926 reason", () => {
      const table = makeTable();
      const engine = new GeneveEngine(table);
      const res = new GeneveResult();
      const seen = new Set<number>();
      for (const c of cases) {
        const expectDrop =
          c.version !== 0
            ? GeneveDrop.BadVersion
            : c.oam === 1
              ? GeneveDrop.Oam
              : c.options.some((o) => (o.type & 0x80) !== 0)
                ? GeneveDrop.CriticalOption
                : GeneveDrop.None;
        const innerIp = c.proto === 0x6558 ? c.inner.slice(28) : c.inner; // strip the 14-byte Ethernet header
        // (a) the UDP payload, as a socket hands it over, with the source as text
        const g = fromHex(c.geneve);
        const v1 = engine.decapsulate(g, 0, g.length, c.from, 1, res);
        // (b) the whole outer IP packet with scapy's UDP checksum
        const o = fromHex(c.outer);
        const res2 = new GeneveResult();
        const v2 = engine.decapsulateIp(o, 0, o.length, 1, res2);
        for (const [v, r, buf] of [
          [v1, res, g],
          [v2, res2, o],
        ] as const) {
          if (expectDrop === GeneveDrop.None) {
            expect(v).toBe(GeneveVerdict.Deliver);
            expect(toHex(buf, r.off, r.len)).toBe(innerIp);
            expect(r.vni).toBe(c.vni);
            expect(r.tunnel!.vni).toBe(c.vni);
            expect(r.tunnel!.remoteUnderlayText).toBe(c.from);
            expect(r.innerProtocol).toBe(c.proto === 0x6558 ? 0x0800 : c.proto);
          } else {
            expect(v).toBe(GeneveVerdict.Drop);
            expect(r.reason).toBe(expectDrop);
          }
        }
        seen.add(expectDrop);
        expect(validateGeneve(g, 0, g.length, null)).toBe(expectDrop);
      }
      expect(seen.size).toBe(4);
      // The L2 cases taught the L2 tunnels the peer's MAC.
      const l2 = [...table.tunnels()].filter((t) => t.l2 && t.rxPackets > 0);
      expect(l2.length).toBeGreaterThan(0);
      for (const t of l2)
        expect(Array.from(t.remoteMac, (b) => b.toString(16).padStart(2, '0')).join(':')).toBe(PEER_MAC);
    });

    it('scapy reads every field of datagrams our engine built', () => {
      const table = new GeneveTunnelTable();
      const opts = new Uint8Array(4 + 8 + 4 + 4 + 124);
      let p = writeGeneveOption(opts, 0, 0x0102, 0x05, new Uint8Array(8).fill(0xab), 0, 8);
      p = writeGeneveOption(opts, p, 0xffff, 0x80 | 0x22, null, 0, 0);
      writeGeneveOption(opts, p, 0x0103, 0x01, new Uint8Array(124).fill(0xcd), 0, 124);
      const tunnels = [
        table.add({
          vni: 0,
          remoteUnderlay: '192.0.2.2',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.2',
        }),
        table.add({
          vni: 0xfedcba,
          remoteUnderlay: '192.0.2.3',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.3',
          options: opts,
        }),
        table.add({
          vni: 99,
          remoteUnderlay: '192.0.2.4',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.4',
          mode: 'l2',
          remoteMac: PEER_MAC,
          localMac: OUR_MAC,
        }),
      ];
      const engine = new GeneveEngine(table);
      const res = new GeneveResult();
      const lines: string[] = [];
      const want: {
        vni: number;
        proto: number;
        optionlen: number;
        critical: number;
        payload: string;
        options: number;
      }[] = [];
      for (const t of tunnels) {
        for (const b of [
          icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM }),
          udpPacket({ src: 'fd00::1', dst: 'fd00:1::1', sport: 1, dport: 2, headroom: GENEVE_MAX_HEADROOM }),
        ]) {
          const innerHex = toHex(b.buf, b.off, b.len);
          expect(engine.encapsulate(b.buf, b.off, b.len, t, 0, res)).toBe(GeneveVerdict.Send);
          lines.push(toHex(b.buf, res.off, res.len));
          const proto = t.l2 ? 0x6558 : b.buf[b.off]! >>> 4 === 4 ? 0x0800 : 0x86dd;
          const ethHex = t.l2
            ? `${PEER_MAC}${OUR_MAC}`.replaceAll(':', '') + (b.buf[b.off]! >>> 4 === 4 ? '0800' : '86dd')
            : '';
          want.push({
            vni: t.vni,
            proto,
            optionlen: t.options.length / 4,
            critical: t.optionsCritical ? 1 : 0,
            payload: ethHex + innerHex,
            options: t === tunnels[1] ? 3 : 0,
          });
        }
      }
      const r = spawnSync(PY, ['-c', PARSE], { input: lines.join('\n'), encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      const parsed = r.stdout
        .trim()
        .split('\n')
        .map(
          (l) =>
            JSON.parse(l) as {
              version: number;
              optionlen: number;
              oam: number;
              critical: number;
              reserved: number;
              proto: number;
              vni: number;
              reserved2: number;
              options: { cls: number; type: number; length: number; data: string }[];
              payload: string;
            },
        );
      expect(parsed.length).toBe(want.length);
      for (let i = 0; i < parsed.length; i++) {
        const s = parsed[i]!;
        const w = want[i]!;
        expect(s.version).toBe(0);
        expect(s.oam).toBe(0);
        expect(s.reserved).toBe(0);
        expect(s.reserved2).toBe(0);
        expect(s.vni).toBe(w.vni);
        expect(s.proto).toBe(w.proto);
        expect(s.optionlen).toBe(w.optionlen);
        expect(s.critical).toBe(w.critical);
        expect(s.options.length).toBe(w.options);
        if (w.options === 3) {
          expect(s.options.map((o) => [o.cls, o.type, o.length])).toEqual([
            [0x0102, 0x05, 2],
            [0xffff, 0xa2, 0],
            [0x0103, 0x01, 31],
          ]);
          expect(s.options[2]!.data).toBe('cd'.repeat(124));
        }
        expect(s.payload).toBe(w.payload);
      }
    });
  },
);
