/**
 * Compiled rules with conntrack on the real Router: NAT decided on a connection's first packet,
 * replies reversed by the connection's binding, ct marks kept on the connection, reject's ICMP
 * error, ICMP errors about NATed flows, live updates keeping unaffected connections.
 */
import { describe, expect, it } from 'vitest';
import { checksumVerifies, pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import { writeTimeExceeded } from '../../src/packet/icmp-error.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { PeerTable } from '../../src/router/peer-table.js';
import { FLOW_TIME_WAIT } from '../../src/nat/flows.js';
import {
  HOOK_FORWARD,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  PacketMeta,
  SOURCE_NODE,
  VERDICT_ACCEPT,
  type PacketHook,
} from '../../src/router/hooks.js';
import { ROUTER_DROP_NAMES } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { ipToNumber } from '../../src/rules/model.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { heapBytesPerOp } from '../util/alloc.js';
import * as fx from './fixtures.js';

const SYN = 0x02,
  ACK = 0x10,
  FIN = 0x01;
type Obj = Record<string, unknown>;

const DEV = {
  peer: fx.TUNNEL,
  node: fx.NODE_IF,
  host: fx.DEFAULT_IF,
  peerAddr: ipToNumber('10.99.0.1')!,
  nodeAddr: ipToNumber('10.112.0.1')!,
  hostAddr: 0,
  pathMtu: 1500,
};

function fc(name: string, chains: Obj[]): Obj {
  return { metadata: { name, namespace: 't' }, spec: { table: { name, family: 'IPV4', chains } } };
}
const natChain = (hook: string, natRules: Obj[]): Obj => ({
  name: hook,
  type: 'nat',
  hook,
  priority: hook === 'prerouting' ? -100 : 100,
  policy: 'accept',
  rules: { natRules },
});
/** Masquerade of everything leaving through the tunnel that is not from a local pod. */
const MASQ = fc('masq', [
  natChain('postrouting', [
    {
      name: 'unknown-src',
      natType: 'snat',
      to: '10.99.0.0',
      match: [
        { op: 'eq', dev: { position: 'out', value: fx.TUNNEL } },
        { op: 'neq', ip: { position: 'src', value: '10.112.0.0/16' } },
      ],
    },
  ]),
]);
const MASQ_ALL = fc('masq-all', [
  natChain('postrouting', [
    { name: 'all', natType: 'masquerade', match: [{ op: 'eq', dev: { position: 'out', value: fx.TUNNEL } }] },
  ]),
]);

/** A router with one peer (real pod CIDR 10.243.0.0/16, nothing remapped by the built-in NAT) and the rules. */
function setup(objects: Obj[]) {
  const nat = new PeerTable({ localPodCIDRs: ['10.112.0.0/16'], localExternalCIDR: '10.99.0.0/16' });
  const nodes = {
    lookupDestination: (b: Uint8Array, o: number) =>
      (b[o] === 10 && b[o + 1] === 112) || b[o] === 192 || (b[o] === 10 && b[o + 1] === 200) ? 'n1' : undefined,
  };
  const router = new Router<string, string>({ peers: nat, nodes });
  router.addPeer('b', nat.addPeer({ name: 'b', remote: { podCIDRs: ['10.243.0.0/16'], externalCIDRs: [] } }), 'link-b');
  const rules = new RulesAttachment(DEV, { flows: { capacity: 64, seed: 1 } });
  rules.attachTo(router);
  expect(rules.update(objects).map((e) => e.message)).toEqual([]);
  const lanes = new RouterLanes<string, string>(4);
  let now = 1000;
  /** Sends `p` from a node or the peer; returns the packet that came out (a copy) and its lane. */
  const send = (p: Built, from: 'node' | 'peer'): { lane: string; pkt: Uint8Array } | null => {
    lanes.clear();
    now += 10;
    if (from === 'node') router.fromNodes(p.buf, Uint32Array.of(p.off), Uint32Array.of(p.len), 1, now, lanes);
    else router.fromPeers(p.buf, Uint32Array.of(p.off), Uint32Array.of(p.len), ['link-b'], 1, now, lanes);
    for (const [lane, l] of [
      ['peer', lanes.toPeers],
      ['node', lanes.toNodes],
      ['host', lanes.toHost],
    ] as const) {
      if (l.count > 0) return { lane, pkt: p.buf.slice(l.offs[0]!, l.offs[0]! + l.lens[0]!) };
    }
    return null;
  };
  return { nat, router, rules, send };
}

const addr = (b: Uint8Array, o: number): string => [...b.subarray(o, o + 4)].join('.');
const ports = (b: Uint8Array): string => `${(b[20]! << 8) | b[21]!}>${(b[22]! << 8) | b[23]!}`;
const tuple = (b: Uint8Array): string =>
  `${addr(b, 12)}:${(b[20]! << 8) | b[21]!}>${addr(b, 16)}:${(b[22]! << 8) | b[23]!}`;
const l4ok = (b: Uint8Array): boolean =>
  checksumVerifies(b, 20, b.length - 20, pseudoHeaderSumV4(b, 12, 16, b[9]!, b.length - 20)) &&
  checksumVerifies(b, 0, 20);
const H = { headroom: 128 };

describe('compiled rules with conntrack', () => {
  it('masquerade: SYN, SYN-ACK, ACK, FIN both ways translated by the connection; a clashing client gets another port', () => {
    const { rules, send } = setup([MASQ]);
    expect(rules.plan()).toEqual([{ id: 't/masq/masq/postrouting/unknown-src', form: 'snat-ct' }]);
    const out = send(
      tcpPacket({ src: '192.168.1.5', dst: '10.243.3.9', sport: 40000, dport: 80, flags: SYN, ...H }),
      'node',
    )!;
    expect(out.lane).toBe('peer');
    expect(tuple(out.pkt)).toBe('10.99.0.0:40000>10.243.3.9:80');
    expect(l4ok(out.pkt)).toBe(true);
    const synack = send(
      tcpPacket({ src: '10.243.3.9', dst: '10.99.0.0', sport: 80, dport: 40000, flags: SYN | ACK, ...H }),
      'peer',
    )!;
    expect(synack.lane).toBe('node');
    expect(tuple(synack.pkt)).toBe('10.243.3.9:80>192.168.1.5:40000');
    expect(l4ok(synack.pkt)).toBe(true);
    expect(
      tuple(
        send(tcpPacket({ src: '192.168.1.5', dst: '10.243.3.9', sport: 40000, dport: 80, flags: ACK, ...H }), 'node')!
          .pkt,
      ),
    ).toBe('10.99.0.0:40000>10.243.3.9:80');
    // Same source port from another host towards the same server: the reply tuple is taken.
    const other = send(
      tcpPacket({ src: '192.168.1.6', dst: '10.243.3.9', sport: 40000, dport: 80, flags: SYN, ...H }),
      'node',
    )!;
    expect(addr(other.pkt, 12)).toBe('10.99.0.0');
    const p2 = (other.pkt[20]! << 8) | other.pkt[21]!;
    expect(p2).not.toBe(40000);
    expect(p2).toBeGreaterThanOrEqual(1024);
    expect(l4ok(other.pkt)).toBe(true);
    expect(
      tuple(
        send(tcpPacket({ src: '10.243.3.9', dst: '10.99.0.0', sport: 80, dport: p2, flags: SYN | ACK, ...H }), 'peer')!
          .pkt,
      ),
    ).toBe('10.243.3.9:80>192.168.1.6:40000');
    // FINs both ways: the first connection goes to TIME_WAIT (and stays translated).
    expect(
      tuple(
        send(
          tcpPacket({ src: '192.168.1.5', dst: '10.243.3.9', sport: 40000, dport: 80, flags: FIN | ACK, ...H }),
          'node',
        )!.pkt,
      ),
    ).toBe('10.99.0.0:40000>10.243.3.9:80');
    expect(
      tuple(
        send(
          tcpPacket({ src: '10.243.3.9', dst: '10.99.0.0', sport: 80, dport: 40000, flags: FIN | ACK, ...H }),
          'peer',
        )!.pkt,
      ),
    ).toBe('10.243.3.9:80>192.168.1.5:40000');
    const f = rules.runtime.flows;
    expect(f.size).toBe(2);
    const states = [...f.state].filter((s) => s !== 0);
    expect(states).toContain(FLOW_TIME_WAIT);
    // A segment to the SNAT address without a connection is not translated (no rule for it).
    expect(
      send(tcpPacket({ src: '10.243.3.9', dst: '10.99.0.0', sport: 80, dport: 555, flags: ACK, ...H }), 'peer'),
    ).toBeNull();
  });

  it("nat chains decide only a connection's first packet: the reply of a flow from the peer is not masqueraded", () => {
    const { send } = setup([MASQ_ALL]);
    const inb = send(
      tcpPacket({ src: '10.243.1.2', dst: '10.112.0.5', sport: 5555, dport: 80, flags: SYN, ...H }),
      'peer',
    )!;
    expect(tuple(inb.pkt)).toBe('10.243.1.2:5555>10.112.0.5:80');
    const rep = send(
      tcpPacket({ src: '10.112.0.5', dst: '10.243.1.2', sport: 80, dport: 5555, flags: SYN | ACK, ...H }),
      'node',
    )!;
    expect(rep.lane).toBe('peer');
    expect(tuple(rep.pkt)).toBe('10.112.0.5:80>10.243.1.2:5555');
    // A new connection from the node is masqueraded to the tunnel interface's address.
    expect(
      tuple(
        send(tcpPacket({ src: '10.112.0.5', dst: '10.243.1.2', sport: 81, dport: 5555, flags: SYN, ...H }), 'node')!
          .pkt,
      ),
    ).toBe('10.99.0.1:81>10.243.1.2:5555');
  });

  it('IP mapping DNAT: replies get the mapped source back from the connection, forms planned', () => {
    const { rules, send } = setup([fx.ipMappingGw('rlx-db', '192.168.7.10', '10.73.0.5')]);
    expect(rules.plan().map((r) => r.form)).toEqual(['addr-map', 'snat-ct']);
    const q = send(udpPacket({ src: '10.243.1.2', dst: '10.73.0.5', sport: 5353, dport: 53, ...H }), 'peer')!;
    expect(q.lane).toBe('node');
    expect(tuple(q.pkt)).toBe('10.243.1.2:5353>192.168.7.10:53');
    expect(l4ok(q.pkt)).toBe(true);
    const r = send(udpPacket({ src: '192.168.7.10', dst: '10.243.1.2', sport: 53, dport: 5353, ...H }), 'node')!;
    expect(tuple(r.pkt)).toBe('10.73.0.5:53>10.243.1.2:5353');
    expect(l4ok(r.pkt)).toBe(true);
  });

  it('ct mark set on a connection in forward is restored as the meta mark of its replies at prerouting', () => {
    const { router, send } = setup([fx.serviceNodeportRouting('10.200.0.1', 7)]);
    const seen: number[] = [];
    const probe: PacketHook = {
      name: 'probe',
      process: (_b, _v, m) => {
        seen.push(m.mark);
        return VERDICT_ACCEPT;
      },
    };
    router.attach(HOOK_PREROUTING, probe);
    send(udpPacket({ src: '10.200.0.1', dst: '10.243.3.9', sport: 3000, dport: 53, ...H }), 'node');
    send(udpPacket({ src: '10.243.3.9', dst: '10.200.0.1', sport: 53, dport: 3000, ...H }), 'peer');
    // A new connection from the peer to the same address has no mark.
    send(udpPacket({ src: '10.243.3.9', dst: '10.200.0.1', sport: 54, dport: 3000, ...H }), 'peer');
    expect(seen).toEqual([0, 7, 0]);
  });

  it('ICMP echo and an ICMP error about a masqueraded flow are translated (quoted packet and outer address)', () => {
    const { send } = setup([MASQ]);
    const echo = send(icmpEcho({ src: '192.168.1.5', dst: '10.243.3.9', ident: 0x77, ...H }), 'node')!;
    expect(addr(echo.pkt, 12)).toBe('10.99.0.0');
    const rep = send(icmpEcho({ src: '10.243.3.9', dst: '10.99.0.0', ident: 0x77, type: 0, ...H }), 'peer')!;
    expect(addr(rep.pkt, 16)).toBe('192.168.1.5');
    expect(checksumVerifies(rep.pkt, 20, rep.pkt.length - 20)).toBe(true);
    const out = send(udpPacket({ src: '192.168.1.5', dst: '10.243.3.9', sport: 40000, dport: 53, ...H }), 'node')!;
    expect(tuple(out.pkt)).toBe('10.99.0.0:40000>10.243.3.9:53');
    // The peer side answers with Time Exceeded quoting the packet as it left.
    const err = new Uint8Array(256);
    err.set(out.pkt, 128);
    const n = writeTimeExceeded(err, 128, out.pkt.length, Uint8Array.of(10, 243, 0, 254));
    const back = send({ buf: err, off: 100, len: n, l4: 120 }, 'peer')!;
    expect(back.lane).toBe('node');
    const b = back.pkt;
    expect(addr(b, 12)).toBe('10.243.0.254');
    expect(addr(b, 16)).toBe('192.168.1.5');
    expect(addr(b, 28 + 12)).toBe('192.168.1.5');
    expect((b[48]! << 8) | b[49]!).toBe(40000);
    expect(checksumVerifies(b, 20, b.length - 20)).toBe(true);
    expect(checksumVerifies(b, 28, 20)).toBe(true);
  });

  it('reject answers with ICMP net-unreachable from the input interface, quoting the packet', () => {
    const rej = fc('rej', [fx.forwardFilterChain('fwd', [fx.deny9999('reject')])]);
    const { rules, router, send } = setup([rej]);
    const r = send(
      tcpPacket({ src: '10.112.0.5', dst: '10.243.3.9', sport: 1234, dport: 9999, flags: SYN, ...H }),
      'node',
    )!;
    expect(r.lane).toBe('node');
    const b = r.pkt;
    expect(addr(b, 12)).toBe('10.112.0.1');
    expect(addr(b, 16)).toBe('10.112.0.5');
    expect([b[20], b[21]]).toEqual([3, 0]);
    expect(checksumVerifies(b, 20, b.length - 20)).toBe(true);
    expect(addr(b, 28 + 16)).toBe('10.243.3.9');
    expect(router.drops[ROUTER_DROP_NAMES.indexOf('filtered')]).toBe(1);
    expect(rules.runtime.counterOf('t/rej/rej/fwd/no-9999')).toBe(1);
    expect(rules.runtime.generalOf('t/rej/rej/fwd/no-9999')).toBe(1);
    expect(rules.generalCounters()).toEqual([{ id: 't/rej/rej/fwd/no-9999', packets: 1 }]);
    expect(rules.counters()).toContainEqual({ id: 't/rej/rej/fwd/no-9999', packets: 1, bytes: 40 }); // 20 + 20 bytes, no options
    expect(rules.stats().rejected).toBe(1);
  });

  it('live update: connections bound by an unchanged rule keep their entries; those of a removed rule go', () => {
    const map = fx.ipMappingGw('rlx-db', '192.168.7.10', '10.73.0.5');
    const { rules, send } = setup([MASQ, map]);
    send(udpPacket({ src: '10.243.1.2', dst: '10.73.0.5', sport: 5353, dport: 53, ...H }), 'peer');
    send(udpPacket({ src: '192.168.1.5', dst: '10.243.3.9', sport: 40000, dport: 53, ...H }), 'node');
    send(udpPacket({ src: '10.112.0.9', dst: '10.243.3.9', sport: 7, dport: 7, ...H }), 'node'); // not NATed
    expect(rules.runtime.flows.size).toBe(3);
    // Same objects again (a resync): nothing lost.
    expect(rules.update([MASQ, map])).toEqual([]);
    expect(rules.runtime.flows.size).toBe(3);
    // The mapping goes: its connection goes, the masqueraded and the plain one stay.
    expect(rules.update([MASQ])).toEqual([]);
    expect(rules.runtime.flows.size).toBe(2);
    expect(rules.stats().flushed).toBe(1);
    expect(
      tuple(send(udpPacket({ src: '10.243.3.9', dst: '10.99.0.0', sport: 53, dport: 40000, ...H }), 'peer')!.pkt),
    ).toBe('10.243.3.9:53>192.168.1.5:40000');
    expect(
      tuple(send(udpPacket({ src: '192.168.7.10', dst: '10.243.1.2', sport: 53, dport: 5353, ...H }), 'node')!.pkt),
    ).toBe('10.99.0.0:53>10.243.1.2:5353');
  });

  it('IPv6 and non-first fragments pass untouched and untracked', () => {
    const rules = new RulesAttachment(DEV);
    rules.update([MASQ_ALL]);
    const run = (p: Built): Uint8Array => {
      const before = p.buf.slice(p.off, p.off + p.len);
      const v = new IpView();
      expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
      const m = new PacketMeta();
      m.source = SOURCE_NODE;
      m.output = OUTPUT_NONE;
      const stages = rules.runtime.hooks;
      expect(stages[HOOK_PREROUTING]!.process(p.buf, v, m, 0)).toBe(VERDICT_ACCEPT);
      m.output = OUTPUT_NODE;
      expect(stages[HOOK_FORWARD]!.process(p.buf, v, m, 0)).toBe(VERDICT_ACCEPT);
      expect(stages[HOOK_POSTROUTING]!.process(p.buf, v, m, 0)).toBe(VERDICT_ACCEPT);
      return before;
    };
    const six = udpPacket({ src: 'fd00::1', dst: 'fd00::2', sport: 1, dport: 2 });
    expect([...six.buf]).toEqual([...run(six)]);
    const frag = udpPacket({ src: '10.1.0.1', dst: '10.2.0.1', sport: 1, dport: 2 });
    frag.buf[6] = 0x00;
    frag.buf[7] = 0x10; // offset 16 × 8 bytes: a non-first fragment
    frag.buf[10] = 0;
    frag.buf[11] = 0;
    let s = 0;
    for (let i = 0; i < 20; i += 2) s += (frag.buf[i]! << 8) | frag.buf[i + 1]!;
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    frag.buf[10] = (~s >>> 8) & 0xff;
    frag.buf[11] = ~s & 0xff;
    expect([...frag.buf]).toEqual([...run(frag)]);
    expect(rules.stats().fragments).toBe(1);
    expect(rules.runtime.flows.size).toBe(0);
  });

  it("an established connection's packets allocate nothing", () => {
    const { router } = setup([MASQ, fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16')]);
    const p = udpPacket({ src: '192.168.1.5', dst: '10.70.3.9', sport: 40000, dport: 53, ...H });
    const copy = p.buf.slice();
    const lanes = new RouterLanes<string, string>(1);
    const offs = Uint32Array.of(p.off);
    const lens = Uint32Array.of(p.len);
    let now = 1;
    const trip = (): void => {
      p.buf.set(copy);
      lanes.clear();
      router.fromNodes(p.buf, offs, lens, 1, now++, lanes);
    };
    trip();
    expect(lanes.toPeers.count).toBe(1);
    expect(ports(p.buf.subarray(p.off))).toBe('40000>53');
    expect(addr(p.buf, p.off + 12) + '>' + addr(p.buf, p.off + 16)).toBe('10.99.0.0>10.243.3.9');
    expect(heapBytesPerOp(trip)).toBeLessThan(4);
  });
});
