/**
 * The stateless shortcut for mirrored remap pairs (src/rules/mirror.ts) gives, packet for packet,
 * what conntrack gives (the path the stateful kernel oracle checks): the same rules run twice,
 * shortcut on and off, over seeded traffic — pod and host flows out, flows in from the peer and
 * the IP mapping, replies (TCP handshake, data, FIN), ICMP echo, ICMP errors both ways quoting
 * translated packets, a filter chain rejecting one port. And the shortcut is off for rule sets
 * not of its shape.
 */
import { describe, expect, it } from 'vitest';
import { ipToNumber, type Cond, type Rule, type RuleTable } from '../../src/rules/model.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { rulesFromNatConfig } from '../../src/rules/from-nat.js';
import { CFG, errorAbout, ip, PEER, PEER_SAME, port, replyTo, rng, rulesRouter, through, TUN } from './router-flows.js';

const REJECT_9: RuleTable = {
  object: 'user/fw',
  name: 'user',
  family: 'ip',
  chains: [
    {
      name: 'fwd',
      hook: 'forward',
      type: 'filter',
      priority: 0,
      policy: 'accept',
      rules: [
        {
          kind: 'filter',
          name: 'no-9',
          conds: [{ kind: 'port', pos: 'dst', op: 'eq', lo: 9, hi: 9 }],
          counter: true,
          action: { type: 'reject' },
        },
      ],
    },
  ],
};

/** The same packet's direction again (TCP: a data ACK of the connection). */
function again(p: Uint8Array, flags: number): Built {
  const proto = p[9]!;
  const src = ip(p, 12),
    dst = ip(p, 16);
  if (proto === 6) return tcpPacket({ src, dst, sport: port(p, 20), dport: port(p, 22), flags, headroom: 128 });
  if (proto === 17) return udpPacket({ src, dst, sport: port(p, 20), dport: port(p, 22), headroom: 128 });
  return icmpEcho({ src, dst, ident: port(p, 24), headroom: 128 });
}

describe('mirror shortcut ≡ conntrack', () => {
  for (const [seed, extra, peer] of [
    [1, [], PEER],
    [2, [], PEER],
    [3, [REJECT_9], PEER],
    [4, [REJECT_9], PEER],
    [5, [], PEER],
    [6, [REJECT_9], PEER],
    [7, [], PEER_SAME],
    [8, [REJECT_9], PEER_SAME],
    [9, [], PEER_SAME],
  ] as const) {
    const RP = peer.remote.podCIDRs[0]!.split('.').slice(0, 2).join('.');
    it(`seed ${seed}${extra.length > 0 ? ' (+ a filter chain)' : ''}: 400 packets, same lane and bytes (peer's real pod CIDR ${peer.remote.podCIDRs[0]})`, () => {
      const { r: A, rules: ra } = rulesRouter({
        nodeAddr: '10.112.0.254',
        statelessMirror: false,
        extra: [...extra],
        peer,
      });
      const { r: B, rules: rb } = rulesRouter({
        nodeAddr: '10.112.0.254',
        statelessMirror: true,
        extra: [...extra],
        peer,
      });
      expect(ra.runtime.statelessShortcut).toBe(false);
      expect(rb.runtime.statelessShortcut).toBe(true);
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      // Packets as they left (out: towards the peer, in: towards the nodes), for replies/errors.
      const sent: { out: Uint8Array; orig: Built; from: 'node' | 'peer' }[] = [];
      let now = 1000;
      let sport = 20000;
      let translated = 0;
      for (let i = 0; i < 400; i++) {
        now += 7;
        const kind = Math.floor(rand() * 10);
        const remote = `10.${pick([71, 72])}.${Math.floor(rand() * 4)}.${1 + Math.floor(rand() * 9)}`;
        const proto = pick(['tcp', 'udp', 'icmp']);
        const dport = rand() < 0.1 ? 9 : 80;
        const mk = (src: string, dst: string): Built =>
          proto === 'tcp'
            ? tcpPacket({ src, dst, sport: ++sport, dport, flags: 0x02, mss: 1460, headroom: 128 })
            : proto === 'udp'
              ? udpPacket({ src, dst, sport: ++sport, dport, headroom: 128 })
              : icmpEcho({ src, dst, ident: ++sport, headroom: 128 });
        let p: Built;
        let from: 'node' | 'peer';
        let record = false;
        if (kind === 0 || kind === 9) {
          p = mk(`10.112.0.${1 + Math.floor(rand() * 9)}`, remote);
          from = 'node';
          record = true;
        } else if (kind === 1) {
          p = mk(`192.168.1.${1 + Math.floor(rand() * 9)}`, remote);
          from = 'node';
          record = true;
        } else if (kind === 2) {
          p = mk('192.168.7.10', remote);
          from = 'node';
          record = true;
        } else if (kind === 3) {
          p = mk(
            `${pick([RP, '10.244'])}.0.${1 + Math.floor(rand() * 9)}`,
            pick(['10.112.0.3', '10.112.0.4', '10.70.5.5']),
          );
          from = 'peer';
          record = true;
        } else if ((kind === 4 || kind === 5) && sent.length > 0) {
          const s = pick(sent);
          p = replyTo(s.out, kind === 4 ? 0x12 : 0x11);
          from = s.from === 'node' ? 'peer' : 'node';
        } else if (kind === 6 && sent.length > 0) {
          const s = pick(sent);
          p = again(s.orig.buf.subarray(s.orig.off, s.orig.off + s.orig.len), 0x10);
          from = s.from;
        } else if ((kind === 7 || kind === 8) && sent.length > 0) {
          const s = pick(sent);
          // An error about the packet as it left, from a router on its way.
          p = errorAbout(s.out, s.from === 'node' ? `${RP}.0.254` : '10.112.0.254');
          from = s.from === 'node' ? 'peer' : 'node';
        } else {
          p = mk(`10.112.0.${1 + Math.floor(rand() * 9)}`, remote);
          from = 'node';
          record = true;
        }
        const a = through(A, p, from, now);
        const b = through(B, p, from, now);
        expect(b?.lane ?? 'dropped', `packet ${i} (kind ${kind})`).toBe(a?.lane ?? 'dropped');
        expect(b?.hex, `packet ${i} (kind ${kind})`).toBe(a?.hex);
        if (a !== null && a.hex !== Buffer.from(p.buf.subarray(p.off, p.off + p.len)).toString('hex')) translated++;
        // Not the router's own error (the filter's reject): a reply to it would be a packet
        // conntrack finds invalid (docs/rules.md deviation), not a flow's.
        if (a !== null && record && a.pkt[9] === p.buf[p.off + 9]) sent.push({ out: a.pkt, orig: p, from });
      }
      expect(translated).toBeGreaterThan(150);
      // Most remap packets took the shortcut; host-network and IP-mapping flows stayed on conntrack.
      expect(rb.stats().stateless).toBeGreaterThan(120);
      expect(rb.runtime.flows.size).toBeGreaterThan(0);
      expect(rb.runtime.flows.size).toBeLessThan(ra.runtime.flows.size);
      // Every counter (rules with counter, chain policies — the MSS clamp chain's too, decided at
      // prerouting when the router skips the forward hook) as with conntrack.
      // Deviation (docs/rules.md): a nat chain's policy counts connections none of its rules bound, on
      // their first packet; the shortcut keeps no connections, so mirror flows are not in it.
      const natPolicy = (id: string): boolean => /\/(prerouting|postrouting)\/policy$/.test(id);
      expect(rb.counters().filter((c) => !natPolicy(c.id))).toEqual(ra.counters().filter((c) => !natPolicy(c.id)));
      for (const c of rb.counters().filter((x) => natPolicy(x.id)))
        expect(c.packets).toBeLessThanOrEqual(ra.counters().find((x) => x.id === c.id)!.packets);
      expect(rb.counters().some((c) => c.id.includes('mss-clamping/policy') && c.packets > 50)).toBe(true);
      if (extra.length > 0) expect(rb.counters().find((c) => c.id.endsWith('/no-9'))!.packets).toBeGreaterThan(0);
    });
  }

  it("the router's own error about a pair's packet (Fragmentation Needed) quotes it as its sender sent it, as with conntrack", () => {
    for (const statelessMirror of [false, true]) {
      const { r } = rulesRouter({ nodeAddr: '10.112.0.254', statelessMirror });
      // A DF datagram over the tunnel MTU (1340) from a pod to a remapped peer pod.
      const big = udpPacket({
        src: '10.112.0.7',
        dst: '10.71.2.3',
        sport: 5000,
        dport: 80,
        payload: new Uint8Array(1400),
        headroom: 128,
      });
      const out = through(r, big, 'node', 1000);
      expect(out?.lane, `statelessMirror ${statelessMirror}`).toBe('node');
      const e = out!.pkt;
      expect([e[20], e[21]]).toEqual([3, 4]);
      // Outer source: the flow's remote address as the pod knows it; quoted destination too.
      expect([ip(e, 12), ip(e, 16), ip(e, 28 + 12), ip(e, 28 + 16)]).toEqual([
        '10.71.2.3',
        '10.112.0.7',
        '10.112.0.7',
        '10.71.2.3',
      ]);
    }
  });

  it('is off for rule sets not of its shape', () => {
    const base = rulesFromNatConfig(CFG, [PEER], { tunnel: TUN });
    const on = (tables: RuleTable[]): boolean => {
      const rules = new RulesAttachment({
        peer: TUN,
        node: 'n',
        host: 'h',
        peerAddr: 1,
        nodeAddr: 0,
        hostAddr: 0,
        pathMtu: 1340,
      });
      rules.setTables(tables);
      return rules.runtime.statelessShortcut;
    };
    expect(on(base)).toBe(true);
    // A ct mark anywhere needs the connection.
    const ctmark: RuleTable = {
      object: 'u/m',
      name: 'm',
      family: 'ip',
      chains: [
        {
          name: 'pre',
          hook: 'prerouting',
          type: 'filter',
          priority: -150,
          policy: 'accept',
          rules: [{ kind: 'filter', name: 'mark', conds: [], counter: false, action: { type: 'ctmark', mark: 5 } }],
        },
      ],
    };
    expect(on([...base, ctmark])).toBe(false);
    // Masquerade of every source: no local address is safe.
    const t = structuredClone(base);
    const post = t[0]!.chains.find((c) => c.hook === 'postrouting')!;
    for (const r of post.rules.filter((x) => x.name.startsWith('unknown-source-snat'))) {
      const masq = r as unknown as { conds: Cond[] };
      masq.conds = masq.conds.filter((c) => c.kind !== 'ip');
    }
    expect(on(t)).toBe(false);
    // An earlier rule in the prerouting chain catching part of a REM range.
    const t2 = structuredClone(base);
    const pre = t2[0]!.chains.find((c) => c.hook === 'prerouting')!;
    (pre.rules as Rule[]).unshift({
      kind: 'nat',
      name: 'steal',
      conds: [
        {
          kind: 'ip',
          pos: 'dst',
          op: 'eq',
          lo: ipToNumber('10.71.0.0')!,
          hi: ipToNumber('10.71.0.255')!,
          text: '10.71.0.0/24',
        },
      ],
      action: { type: 'dnat', addr: ipToNumber('10.1.0.0')!, prefixLen: 24, text: '10.1.0.0/24' },
    });
    expect(on(t2)).toBe(false);
  });
});
