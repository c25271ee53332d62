/**
 * Cross-check of the frames the engine builds against Wireshark's Geneve dissector: the engine
 * writes whole outer IPv4/IPv6 + UDP + Geneve packets (encapsulateIp), the test wraps them in
 * Ethernet, writes a pcap (test/util/pcap.ts) and reads it back with tshark.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import type { GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { writeGeneveOption } from '../../src/geneve/header.js';
import { formatAddress } from '../../src/packet/addr.js';
import { ETHERTYPE_IPV4, ETHERTYPE_IPV6, writeEthHeader } from '../../src/packet/ethernet.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { PcapWriter } from '../util/pcap.js';
import { needs } from '../util/requirements.js';

const TSHARK = 'tshark';
const tsharkMissing = needs({ commands: [TSHARK] });

function optionBlock(parts: { cls: number; type: number; data: number[] }[]): Uint8Array {
  const total = parts.reduce((s, p) => s + 4 + p.data.length, 0);
  const b = new Uint8Array(total);
  let p = 0;
  for (const o of parts) p = writeGeneveOption(b, p, o.cls, o.type, new Uint8Array(o.data), 0, o.data.length);
  return b;
}

interface Expected {
  /** Inner destination (IP) and, in L2 mode, inner destination MAC. */
  innerDst: string;
  innerMac?: string;
  vni: number;
  proto: number;
  options: { cls: number; type: number; len: number }[];
  critical: boolean;
  checksum: 'good' | 'absent';
  srcPort: number;
  arp?: boolean;
}

describe.skipIf(tsharkMissing !== null)(
  `tshark decodes engine-built Geneve frames${tsharkMissing ? ` (skipped: ${tsharkMissing})` : ''}`,
  () => {
    let dir: string;
    const expected: Expected[] = [];
    let rows: string[][] = [];

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'weft-geneve-'));
      const table = new GeneveTunnelTable();
      const specs: GeneveTunnelSpec[] = [
        {
          vni: 0,
          remoteUnderlay: '192.0.2.2',
          localUnderlay: '192.0.2.1',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.2',
        },
        {
          vni: 0x123456,
          remoteUnderlay: '2001:db8::2',
          localUnderlay: '2001:db8::1',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.3',
          options: optionBlock([
            { cls: 0x0102, type: 0x05, data: [1, 2, 3, 4] },
            { cls: 0xffff, type: 0x91, data: [9, 9, 9, 9, 8, 8, 8, 8] },
          ]),
        },
        {
          vni: 7,
          remoteUnderlay: '192.0.2.3',
          localUnderlay: '192.0.2.1',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.4',
          mode: 'l2',
          remoteMac: '02:00:00:00:00:04',
          options: optionBlock([{ cls: 0x0103, type: 0x7f, data: Array.from({ length: 124 }, (_, i) => i) }]),
        },
        {
          vni: 8,
          remoteUnderlay: '192.0.2.5',
          localUnderlay: '192.0.2.1',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.5',
          mode: 'l2',
        },
      ];
      const tunnels: GeneveTunnel[] = specs.map((s) => table.add(s));
      const engine = new GeneveEngine(table, { hashSeed: 1234 });
      const noCsum = new GeneveEngine(table, { udpChecksumV4: false });
      const pcap = new PcapWriter();
      const res = new GeneveResult();
      const inner: Built[] = [
        icmpEcho({ src: '10.0.0.1', dst: '10.1.0.1', headroom: GENEVE_MAX_HEADROOM + 14 }),
        udpPacket({ src: 'fd00::1', dst: 'fd00:1::1', sport: 40001, dport: 40002, headroom: GENEVE_MAX_HEADROOM + 14 }),
        tcpPacket({
          src: '10.0.0.9',
          dst: '10.1.0.9',
          sport: 40000,
          dport: 443,
          mss: 1400,
          payload: new Uint8Array(1000).fill(7),
          headroom: GENEVE_MAX_HEADROOM + 14,
        }),
      ];
      const add = (eng: GeneveEngine, t: GeneveTunnel, b: Built, e: Omit<Expected, 'srcPort' | 'innerDst'>): void => {
        const innerDst =
          b.buf[b.off]! >>> 4 === 4 ? formatAddress(b.buf, b.off + 16, 4) : formatAddress(b.buf, b.off + 24, 6);
        const buf = b.buf.slice(); // fresh copy per frame (the engine writes in place)
        const v = eng.encapsulateIp(buf, b.off, b.len, t, 5000, res);
        expect(v).toBe(e.arp === true ? GeneveVerdict.SendControl : GeneveVerdict.Send);
        const eth = res.ipOff - 14;
        writeEthHeader(
          buf,
          eth,
          new Uint8Array([2, 0, 0, 0, 0, 0xaa]),
          0,
          new Uint8Array([2, 0, 0, 0, 0, 0xbb]),
          0,
          t.underlayFamily === 4 ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6,
        );
        pcap.add(buf, eth, 14 + res.ipLen);
        expected.push({ ...e, srcPort: res.srcPort, innerDst });
      };
      const opt2 = [
        { cls: 0x0102, type: 0x05, len: 1 },
        { cls: 0xffff, type: 0x91, len: 2 },
      ];
      const opt3 = [{ cls: 0x0103, type: 0x7f, len: 31 }];
      for (const b of inner) {
        const proto = b.buf[b.off]! >>> 4 === 4 ? 0x0800 : 0x86dd;
        add(engine, tunnels[0]!, b, { vni: 0, proto, options: [], critical: false, checksum: 'good' });
        add(engine, tunnels[1]!, b, { vni: 0x123456, proto, options: opt2, critical: true, checksum: 'good' });
        add(engine, tunnels[2]!, b, {
          vni: 7,
          proto: 0x6558,
          options: opt3,
          critical: false,
          checksum: 'good',
          innerMac: '02:00:00:00:00:04',
        });
        add(noCsum, tunnels[0]!, b, { vni: 0, proto, options: [], critical: false, checksum: 'absent' });
      }
      // L2 tunnel without a peer MAC: the engine emits an ARP request instead.
      add(engine, tunnels[3]!, inner[0]!, {
        vni: 8,
        proto: 0x6558,
        options: [],
        critical: false,
        checksum: 'good',
        arp: true,
      });
      const file = join(dir, 'geneve.pcap');
      pcap.writeFile(file);

      const r = spawnSync(
        TSHARK,
        [
          '-r',
          file,
          '-d',
          'udp.port==6091,geneve',
          '-o',
          'udp.check_checksum:TRUE',
          '-T',
          'fields',
          '-E',
          'separator=/t',
          '-E',
          'occurrence=a',
          '-E',
          'aggregator=,',
          '-e',
          'geneve.version',
          '-e',
          'geneve.vni',
          '-e',
          'geneve.proto_type',
          '-e',
          'geneve.flags.oam',
          '-e',
          'geneve.flags.critical',
          '-e',
          'geneve.option.class',
          '-e',
          'geneve.option.type',
          '-e',
          'geneve.option.length',
          '-e',
          'udp.srcport',
          '-e',
          'udp.dstport',
          '-e',
          'udp.checksum.status',
          '-e',
          'arp.opcode',
          '-e',
          'arp.dst.proto_ipv4',
          '-e',
          'ip.checksum.status',
          '-e',
          '_ws.malformed',
          '-e',
          '_ws.expert.severity',
          '-e',
          'ip.dst',
          '-e',
          'ipv6.dst',
          '-e',
          'eth.dst',
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      expect(r.status, r.stderr).toBe(0);
      if (process.env.GENEVE_DEBUG) console.log(r.stdout);
      rows = r.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t'));
    });

    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('reads every frame with the VNI, protocol type, flags, options and ports we wrote', () => {
      expect(rows.length).toBe(expected.length);
      for (let i = 0; i < rows.length; i++) {
        const [ver, vni, proto, oam, crit, cls, type, len, sport, dport, csum, arpOp, arpTpa] = rows[i]!;
        const e = expected[i]!;
        expect(ver).toBe('0');
        expect(Number(vni)).toBe(e.vni);
        expect(Number(proto)).toBe(e.proto);
        expect(oam).toMatch(/^(False|0)$/);
        expect(crit).toMatch(e.critical ? /^(True|1)$/ : /^(False|0)$/);
        const split = (s: string | undefined): number[] =>
          s === undefined || s === '' ? [] : s.split(',').map(Number);
        expect(split(cls)).toEqual(e.options.map((o) => o.cls));
        expect(split(type)).toEqual(e.options.map((o) => o.type));
        // tshark 4.0 uses geneve.option.length twice: first the header's total options length in
        // bytes, then each option's length in bytes including its 4-byte option header.
        const optTotal = e.options.reduce((s, o) => s + 4 + 4 * o.len, 0);
        expect(split(len)).toEqual([optTotal, ...e.options.map((o) => 4 + 4 * o.len)]);
        // First occurrence = the outer UDP header (an inner UDP/TCP header may follow).
        const first = (s: string | undefined): string => (s ?? '').split(',')[0]!;
        expect(Number(first(sport))).toBe(e.srcPort);
        expect(Number(first(sport))).toBeGreaterThanOrEqual(49152);
        expect(Number(first(dport))).toBe(6091);
        // udp.checksum.status: 1 = good, 3 = not present (Wireshark's proto_checksum_enum_e).
        expect(first(csum)).toBe(e.checksum === 'good' ? '1' : '3');
        const last = (s: string | undefined): string => (s ?? '').split(',').at(-1)!;
        if (e.arp !== true) expect(last(rows[i]![e.innerDst.includes(':') ? 17 : 16])).toBe(e.innerDst);
        if (e.innerMac !== undefined) expect(last(rows[i]![18])).toBe(e.innerMac);
        if (e.arp === true) {
          expect(last(rows[i]![18])).toBe('ff:ff:ff:ff:ff:ff');
          expect(arpOp).toBe('1');
          expect(arpTpa).toBe('10.80.0.5');
        }
      }
    });

    it('finds no malformed frame and no expert warning or error', () => {
      for (const row of rows) {
        expect(row[14] ?? '').toBe('');
        const severities = (row[15] ?? '')
          .split(',')
          .filter((s) => s !== '')
          .map(Number);
        // Wireshark's expert severities: chat 0x200000, note 0x400000, warn 0x600000, error 0x800000.
        for (const s of severities) expect(s).toBeLessThan(0x600000);
      }
    });
  },
);
