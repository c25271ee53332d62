/**
 * The Geneve decapsulation harness behind the geneve-l3 and geneve-l2 targets: one engine over a
 * small tunnel table (IPv4 and IPv6 underlays), fed a datagram three ways.
 *
 * Input: byte 0 = how (bits 0-1: 0/3 = UDP payload from an underlay chosen by bits 2-3; 1 = a
 * whole outer IP packet as given; 2 = the payload wrapped by the harness in an outer IPv4/IPv6 +
 * UDP header with correct checksums from the chosen underlay, so the fuzzer gets past the outer
 * checks), bytes 1.. = the datagram.
 * Invariants per verdict: Drop ⇒ a named reason (1..GENEVE_DROP_COUNT-1), that counter and the total up by exactly one,
 * nothing delivered; Deliver ⇒ the inner packet lies inside the datagram, parses as IP of the
 * family its protocol type says, rx counted once, no drop; SendControl (L2) ⇒ a valid Geneve
 * header (TEB) + Ethernet + ARP reply from our MAC, inside the buffer; Consumed ⇒ no drop.
 */
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import {
  GENEVE_PROTO_IPV4,
  GENEVE_PROTO_IPV6,
  GENEVE_PROTO_TEB,
  geneveHeaderLen,
  geneveProtocolType,
} from '../../src/geneve/header.js';
import { GENEVE_DROP_COUNT } from '../../src/geneve/reasons.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import { parseAddress } from '../../src/packet/addr.js';
import { ARP_OP_REPLY, arpOperation, arpValid } from '../../src/packet/arp.js';
import { ETHERTYPE_ARP, ETH_HEADER_LEN } from '../../src/packet/ethernet.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { fixChecksums, must, total } from './check.js';

const UNDERLAYS = ['192.0.2.2', '2001:db8::2', '192.0.2.3', '198.51.100.9'];
const LOCAL4 = parseAddress('192.0.2.1');
const LOCAL6 = parseAddress('2001:db8::1');
const HEAD = 128;

export class GeneveHarness {
  engine: GeneveEngine;
  private readonly res = new GeneveResult();
  private readonly v = new IpView();
  private readonly underlays = UNDERLAYS.map((u) => parseAddress(u));

  constructor(private readonly mode: 'l2' | 'l3') {
    this.engine = GeneveHarness.make(mode);
  }

  private static make(mode: 'l2' | 'l3'): GeneveEngine {
    const table = new GeneveTunnelTable();
    table.add({
      vni: 1,
      remoteUnderlay: UNDERLAYS[0]!,
      localUnderlay: '192.0.2.1',
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: '10.80.0.2',
      mode,
    });
    table.add({
      vni: 2,
      remoteUnderlay: UNDERLAYS[1]!,
      localUnderlay: '2001:db8::1',
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: '10.80.0.3',
      mode,
    });
    table.add({
      vni: 0xabcdef,
      remoteUnderlay: UNDERLAYS[2]!,
      localInternalAddress: 'fd80::1',
      remoteInternalAddress: 'fd80::2',
      mode,
      remoteMac: '0a:1b:2c:3d:4e:5f',
    });
    return new GeneveEngine(table, { understoodOptions: [{ optionClass: 0x0102, type: 0x80 }], arpRetryMs: 1000 });
  }

  /** A fresh engine (learned MACs forgotten): replays start from the same state. */
  reset(): void {
    this.engine = GeneveHarness.make(this.mode);
  }

  run(data: Uint8Array, now: number): void {
    if (data.length < 1) return;
    const how = data[0]! & 3;
    const from = this.underlays[(data[0]! >>> 2) & 3]!;
    const dg = data.subarray(1);
    const e = this.engine;
    const c = e.counters;
    const before = total(c.drops);
    const rxBefore = c.rxPackets;
    let buf: Uint8Array;
    let off = HEAD;
    let len: number;
    let verdict: number;
    if (how === 1 || how === 2) {
      if (how === 2) {
        const ip = from.length === 4 ? 20 : 40;
        len = ip + 8 + dg.length;
        if (len > 65535) return;
        buf = new Uint8Array(HEAD + len + 64);
        writeOuter(buf, off, from, dg.length);
        buf.set(dg, off + ip + 8);
        fixChecksums(buf, off, len);
      } else {
        len = dg.length;
        buf = new Uint8Array(HEAD + len + 64);
        buf.set(dg, off);
      }
      verdict = e.decapsulateIp(buf, off, len, now, this.res);
    } else {
      len = dg.length;
      buf = new Uint8Array(HEAD + len + 64);
      buf.set(dg, off);
      verdict = e.decapsulate(buf, off, len, from, now, this.res);
    }
    const r = this.res;
    must(r.verdict === verdict, 'result verdict = returned verdict');
    const drops = total(c.drops) - before;
    if (verdict === GeneveVerdict.Drop) {
      must(r.reason > 0 && r.reason < GENEVE_DROP_COUNT, `drop reason ${r.reason} is a named reason`);
      must(drops === 1, `a drop counts exactly one (counted ${drops})`);
      must(c.rxPackets === rxBefore, 'a drop delivers nothing');
      return;
    }
    must(drops === 0, `verdict ${verdict} counted ${drops} drops`);
    must(
      r.off >= 0 && r.len >= 0 && r.off + r.len <= buf.length,
      `result region [${r.off}, +${r.len}) inside the buffer`,
    );
    if (verdict === GeneveVerdict.Deliver) {
      must(r.off >= off && r.off + r.len <= off + len, 'the inner packet lies inside the datagram');
      must(c.rxPackets === rxBefore + 1, 'a delivery counts one rx packet');
      must(parseIp(buf, r.off, r.len, this.v) === IP_OK, 'the delivered packet parses as IP');
      must(
        r.innerProtocol === (this.v.family === 4 ? GENEVE_PROTO_IPV4 : GENEVE_PROTO_IPV6),
        `inner protocol 0x${r.innerProtocol.toString(16)} matches IPv${this.v.family}`,
      );
      must(
        r.tunnel !== null && (this.mode === 'l2') === (r.tunnel.mode === 'l2'),
        'delivered through a tunnel of this mode',
      );
    } else if (verdict === GeneveVerdict.SendControl) {
      must(this.mode === 'l2', 'only L2 answers with control frames');
      const g = r.off;
      must(geneveProtocolType(buf, g) === GENEVE_PROTO_TEB, 'control frame is Ethernet over Geneve');
      const eth = g + geneveHeaderLen(buf, g);
      must(((buf[eth + 12]! << 8) | buf[eth + 13]!) === ETHERTYPE_ARP, 'control frame is ARP');
      const arp = eth + ETH_HEADER_LEN;
      must(
        arp + 28 <= g + r.len && arpValid(buf, arp, 28) && arpOperation(buf, arp) === ARP_OP_REPLY,
        'control frame is a valid ARP reply',
      );
      must(r.tunnel !== null, 'a reply names its tunnel');
      for (let i = 0; i < 6; i++)
        must(
          buf[eth + 6 + i] === r.tunnel.localMac[i] && buf[arp + 8 + i] === r.tunnel.localMac[i],
          'the reply comes from our MAC',
        );
    } else {
      must(verdict === GeneveVerdict.Consumed && this.mode === 'l2', `verdict ${verdict} on receive`);
    }
  }
}

/** Outer IPv4/IPv6 + UDP (to 6091) header from `from` to us, carrying `payloadLen` bytes; checksums left to fixChecksums. */
function writeOuter(buf: Uint8Array, off: number, from: Uint8Array, payloadLen: number): void {
  const v4 = from.length === 4;
  const ip = v4 ? 20 : 40;
  const udpLen = 8 + payloadLen;
  if (v4) {
    buf[off] = 0x45;
    buf[off + 2] = (ip + udpLen) >>> 8;
    buf[off + 3] = (ip + udpLen) & 0xff;
    buf[off + 8] = 64;
    buf[off + 9] = 17;
    buf.set(from, off + 12);
    buf.set(LOCAL4, off + 16);
  } else {
    buf[off] = 0x60;
    buf[off + 4] = udpLen >>> 8;
    buf[off + 5] = udpLen & 0xff;
    buf[off + 6] = 17;
    buf[off + 7] = 64;
    buf.set(from, off + 8);
    buf.set(LOCAL6, off + 24);
  }
  const u = off + ip;
  buf[u] = 0xc0;
  buf[u + 1] = 0x01;
  buf[u + 2] = 6091 >>> 8;
  buf[u + 3] = 6091 & 0xff;
  buf[u + 4] = udpLen >>> 8;
  buf[u + 5] = udpLen & 0xff;
}
