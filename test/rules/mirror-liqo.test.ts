/**
 * The stateless mirror shortcut on Liqo's own gateway rule set (liqo-peering-objects.ts: the
 * remap-podcidr / remap-externalcidr pairs with `iifname != eth0` and `oifname != eth0`, the MSS
 * clamp, service-nodeport-routing's ct mark / meta mark, an IP mapping, a user's drop rule) and
 * its RouteConfigurations, on a Router in Liqo mode (steering): packet for packet the same lane,
 * node tunnel and bytes as the same gateway on conntrack alone, over seeded traffic through
 * every interface — two nodes' Geneve interfaces, liqo-tunnel, eth0 (a route sends one range
 * from the tunnel out of eth0, where Liqo's snat does not apply; the gateway host's own packets
 * enter at OUTPUT) — with new flows, replies, repeats, ICMP errors from routers on the way, and
 * nodeport-style flows from the unknown-source address whose replies are steered by their ct mark.
 */
import { describe, expect, it } from 'vitest';
import { gatewayFirewallSelectors, gatewayRouteSelectors } from '../../src/control/k8s/firewall-watch.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { PeerTable } from '../../src/router/peer-table.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { buildSteering, parseRouteObjects } from '../../src/rules/steering.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { DEFAULT_IF, TUNNEL_IF, gatewayObjects, selects, type PeeringSide } from './liqo-peering-objects.js';
import { errorAbout, replyTo, rng } from './router-flows.js';

type Link = { name: string };
const PEER_TUN = '169.254.18.2';
/** remotePod.real: the peer's own pod CIDR, or ours (10.112.0.0/16: Liqo's usual reason to remap). */
const sideWith = (remotePodReal: string): PeeringSide => ({
  cfg: 'cluster-b',
  remoteId: 'cluster-b',
  namespace: 'liqo-tenant-cluster-b',
  mode: 'server',
  remotePod: { real: remotePodReal, remapped: '10.71.0.0/16' },
  remoteExt: { real: '10.244.0.0/16', remapped: '10.72.0.0/16' },
  nodes: [
    { name: 'w1', internalIP: '10.80.0.2', gatewayIf: 'liqo.k3x9q2m7va', pods: ['10.112.1.5', '10.112.1.6'] },
    { name: 'w2', internalIP: '10.80.0.3', gatewayIf: 'liqo.p0w8r1zt4c', pods: ['10.112.2.5', '10.112.2.6'] },
  ],
  mss: 1300, // the Helm clamp as a fixed value: what its default (0, rt mtu) gives over the default tunnel MTU 1340
  dropPort: 8081,
  ipMappings: [{ name: 'db', real: '192.168.60.10', remapped: '10.70.0.5', node: 'w1' }],
  localPod: '10.112.0.0/16',
  localExt: '10.70.0.0/16',
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: 'liqo.a7c2n9x0qe',
});
const SIDE = sideWith('10.243.0.0/16');
const SAME = sideWith('10.112.0.0/16');
/** Not Liqo's: a route sending 192.168.50.0/24 from the tunnel out of eth0 (the host lane). */
const TO_ETH0 = {
  apiVersion: 'networking.liqo.io/v1beta1',
  kind: 'RouteConfiguration',
  metadata: {
    name: 'to-eth0',
    namespace: SIDE.namespace,
    labels: { 'networking.liqo.io/route-category': 'gateway', 'networking.liqo.io/route-unique': SIDE.remoteId },
  },
  spec: {
    table: {
      name: 'to-eth0',
      rules: [{ iif: TUNNEL_IF, dst: '192.168.50.0/24', routes: [{ dst: '192.168.50.0/24', dev: DEFAULT_IF }] }],
    },
  },
};

interface Gw {
  router: Router<Link, GeneveTunnel>;
  rules: RulesAttachment;
  nodes: GeneveTunnel[];
  link: Link;
}

function gateway(statelessMirror: boolean, side: PeeringSide = SIDE): Gw {
  const SIDE = side;
  const nat = new PeerTable({ localPodCIDRs: [SIDE.localPod], localExternalCIDR: SIDE.localExt, mtu: 1340 });
  const table = new GeneveTunnelTable();
  const nodes = SIDE.nodes.map((n, i) =>
    table.add({
      vni: i + 1,
      remoteUnderlay: `192.168.0.${2 + i}`,
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: n.internalIP,
      mode: 'l3',
      name: n.name,
    }),
  );
  const router = new Router<Link, GeneveTunnel>({ peers: nat, nodes: table });
  const link: Link = { name: SIDE.remoteId };
  const rp = router.addPeer(
    SIDE.remoteId,
    nat.addPeer({
      name: SIDE.remoteId,
      remote: { podCIDRs: [SIDE.remotePod.real], externalCIDRs: ['10.244.0.0/16'] },
      remapped: { podCIDRs: ['10.98.0.0/16'], externalCIDRs: ['10.99.0.0/16'] },
    }),
    link,
  );
  router.setLocalAddresses(['10.80.0.1']);
  router.setTunnelAddresses(['169.254.18.1'], [{ address: PEER_TUN, peer: rp }]);
  const objs = gatewayObjects(SIDE);
  const fw = objs.firewall.filter((o) => gatewayFirewallSelectors([SIDE.remoteId]).some((s) => selects(s, o)));
  const rt = [...objs.routes, TO_ETH0].filter((o) =>
    SIDE.nodes.some((n) => gatewayRouteSelectors([SIDE.remoteId], n.name).some((s) => selects(s, o))),
  );
  const rules = new RulesAttachment(
    { peer: TUNNEL_IF, node: '', host: DEFAULT_IF, peerAddr: 0, nodeAddr: 0, hostAddr: 0, pathMtu: 1340 },
    { flows: { seed: 1 }, statelessMirror },
  );
  rules.attachTo(router);
  expect(rules.update(fw)).toEqual([]);
  const parsed = parseRouteObjects(rt, new Map());
  expect(parsed.errors).toEqual([]);
  router.setSteering(
    buildSteering(
      {
        devices: { tunnel: TUNNEL_IF, host: DEFAULT_IF },
        nodes: nodes.map((t, i) => ({ tunnel: t, dev: SIDE.nodes[i]!.gatewayIf })),
        isPeerAddress: (g) => g === PEER_TUN,
      },
      [...parsed.specs.values()],
    ),
  );
  return { router, rules, nodes, link };
}

type From = { kind: 'node'; node: number } | { kind: 'peer' } | { kind: 'host' };
type Out = { lane: string; hex: string; pkt: Uint8Array } | null;

function through(g: Gw, p: Built, from: From, now: number): Out {
  const L = new RouterLanes<Link, GeneveTunnel>(2);
  const buf = p.buf.slice();
  const offs = Uint32Array.of(p.off),
    lens = Uint32Array.of(p.len);
  if (from.kind === 'node') g.router.fromNodes(buf, offs, lens, 1, now, L, [g.nodes[from.node]!]);
  else if (from.kind === 'peer') g.router.fromPeers(buf, offs, lens, [g.link], 1, now, L);
  else g.router.fromHost(buf, offs, lens, 1, now, L);
  for (const [lane, l] of [
    ['peer', L.toPeers],
    ['node', L.toNodes],
    ['host', L.toHost],
  ] as const) {
    if (l.count > 0) {
      const pkt = buf.slice(l.offs[0]!, l.offs[0]! + l.lens[0]!);
      const tag = lane === 'node' ? `:${(l.tags[0] as GeneveTunnel).name}` : '';
      return { lane: lane + tag + (l.count > 1 ? `+${l.count - 1}` : ''), pkt, hex: Buffer.from(pkt).toString('hex') };
    }
  }
  return null;
}

describe("mirror shortcut ≡ conntrack on Liqo's gateway rule set (Liqo mode)", () => {
  it('the remap pairs with iifname/oifname != eth0 take the shortcut next to ct marks and an IP mapping', () => {
    const g = gateway(true);
    expect(g.rules.runtime.statelessShortcut).toBe(true);
    expect(gateway(false).rules.runtime.statelessShortcut).toBe(false);
  });

  it('an snat that could take a tunnel packet leaving by eth0 (where the pair does not apply) keeps the pair on conntrack', () => {
    const on = (extraPost: object | null, priority = 110): boolean => {
      const objs = gatewayObjects(SIDE).firewall.filter((o) =>
        (o['metadata'] as { name: string }).name.includes('remap-podcidr'),
      );
      const fw = [...objs];
      if (extraPost !== null)
        fw.push({
          metadata: { name: 'other', namespace: 'x' },
          spec: {
            table: {
              name: 'other',
              family: 'IPV4',
              chains: [
                {
                  name: 'post',
                  type: 'nat',
                  hook: 'postrouting',
                  priority,
                  policy: 'accept',
                  rules: { natRules: [extraPost] },
                },
              ],
            },
          },
        });
      const rules = new RulesAttachment({
        peer: TUNNEL_IF,
        node: '',
        host: DEFAULT_IF,
        peerAddr: 0,
        nodeAddr: 0,
        hostAddr: 0,
        pathMtu: 1340,
      });
      expect(rules.update(fw)).toEqual([]);
      return rules.runtime.statelessShortcut;
    };
    const masq = (oif: string, op: string): object => ({
      name: 'm',
      natType: 'snat',
      to: '10.70.0.0',
      match: [
        { op, dev: { position: 'out', value: oif } },
        { op: 'neq', ip: { position: 'src', value: SIDE.localPod } },
      ],
    });
    expect(on(null)).toBe(true);
    // Only towards the tunnel: never sees a packet leaving by eth0.
    expect(on(masq(TUNNEL_IF, 'eq'))).toBe(true);
    // Out of eth0, or anywhere but the tunnel: would bind what the pair leaves untranslated.
    expect(on(masq(DEFAULT_IF, 'eq'))).toBe(false);
    expect(on(masq(TUNNEL_IF, 'neq'))).toBe(false);
    // At the pair's own priority, registered after it: it runs BEFORE the pair's snat (the kernel's
    // order of equal priorities). Needing oifname == liqo-tunnel it never sees a tunnel packet
    // (a gateway sends none back into the tunnel), so the pair keeps the shortcut.
    expect(on(masq(TUNNEL_IF, 'eq'), 100)).toBe(true);
    expect(on(masq(DEFAULT_IF, 'eq'), 100)).toBe(false);
  });

  it("the peer's real pod CIDR equal to ours: the pair still takes the shortcut", () => {
    expect(gateway(true, SAME).rules.runtime.statelessShortcut).toBe(true);
  });

  for (const [seed, SIDE] of [21, 22, 23, 24, 25, 26, 31, 32, 33, 34].map(
    (x) => [x, x < 30 ? sideWith('10.243.0.0/16') : SAME] as const,
  )) {
    const RP = SIDE.remotePod.real.split('.').slice(0, 2).join('.');
    it(`seed ${seed}: 500 packets through every interface, same lane, tunnel and bytes (peer's real pod CIDR ${SIDE.remotePod.real})`, () => {
      const A = gateway(false, SIDE);
      const B = gateway(true, SIDE);
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const n = (k: number): number => 1 + Math.floor(rand() * k);
      const sent: { out: Uint8Array; orig: Built; from: From; back: From }[] = [];
      const kinds = new Map<string, number>();
      let now = 1000;
      let sport = 20000;
      let translated = 0;
      for (let i = 0; i < 500; i++) {
        now += 7;
        const proto = pick(['tcp', 'udp', 'icmp']);
        const dport = rand() < 0.1 ? 8081 : 80;
        const mk = (src: string, dst: string): Built =>
          proto === 'tcp'
            ? tcpPacket({ src, dst, sport: ++sport, dport, flags: 0x02, mss: 1460, headroom: 128 })
            : proto === 'udp'
              ? udpPacket({ src, dst, sport: ++sport, dport, headroom: 128 })
              : icmpEcho({ src, dst, ident: ++sport, headroom: 128 });
        const node = Math.floor(rand() * 2);
        const pod = (k: number): string => SIDE.nodes[k]!.pods[Math.floor(rand() * 2)]!;
        const k = Math.floor(rand() * 12);
        let p: Built;
        let from: From;
        let back: From;
        let record = true;
        let kind: string;
        if (k <= 1) {
          kind = 'pod→REM';
          p = mk(pod(node), `10.${pick([71, 72])}.${n(3)}.${n(9)}`);
          from = { kind: 'node', node };
          back = { kind: 'peer' };
        } else if (k === 2) {
          kind = 'peer→pod';
          const dn = Math.floor(rand() * 2);
          p = mk(`${pick([RP, '10.244'])}.${n(3)}.${n(9)}`, pod(dn));
          from = { kind: 'peer' };
          back = { kind: 'node', node: dn };
        } else if (k === 3) {
          kind = 'peer→eth0';
          p = mk(`${RP}.${n(3)}.${n(9)}`, `192.168.50.${n(9)}`);
          from = { kind: 'peer' };
          back = { kind: 'host' };
        } else if (k === 4) {
          kind = 'host→remote';
          p = mk(`192.168.50.${n(9)}`, `${pick([RP, '10.71'])}.${n(3)}.${n(9)}`);
          from = { kind: 'host' };
          back = { kind: 'peer' };
        } else if (k === 5) {
          kind = 'peer→ipmapping';
          p = mk(`${RP}.${n(3)}.${n(9)}`, '10.70.0.5');
          from = { kind: 'peer' };
          back = { kind: 'node', node: 0 };
        } else if (k === 6) {
          kind = 'unknown-source→REM';
          p = mk('10.70.0.0', `10.71.${n(3)}.${n(9)}`);
          from = { kind: 'node', node };
          back = { kind: 'peer' };
        } else if ((k === 7 || k === 8) && sent.length > 0) {
          const s = pick(sent);
          kind = 'reply';
          p = replyTo(s.out, k === 7 ? 0x12 : 0x11);
          from = s.back;
          back = s.from;
          record = false;
        } else if (k === 9 && sent.length > 0) {
          const s = pick(sent);
          kind = 'again';
          p = { ...s.orig, buf: s.orig.buf.slice() };
          from = s.from;
          back = s.back;
          record = false;
        } else if (k === 10 && sent.length > 0) {
          // A router on the way answers with an error (to the packet's source, as it left).
          const s = pick(sent);
          kind = 'error';
          p = errorAbout(
            s.out,
            s.back.kind === 'peer'
              ? `${RP}.0.254`
              : s.back.kind === 'node'
                ? SIDE.nodes[s.back.node]!.internalIP
                : '192.168.50.254',
          );
          from = s.back;
          back = s.from;
          record = false;
        } else if (k === 11) {
          // A node's error about a packet between two local pods (never through this gateway):
          // related to no connection, so untranslated. Both addresses are in the peer's REAL
          // when its real pod CIDR is ours: not to be read as the peer's error about a D packet.
          const dn = Math.floor(rand() * 2);
          kind = 'node error about local';
          const q = mk(pod(node), pod(dn));
          p = errorAbout(q.buf.subarray(q.off, q.off + q.len), SIDE.nodes[dn]!.internalIP);
          from = { kind: 'node', node: dn };
          back = { kind: 'node', node };
          record = false;
        } else {
          kind = 'pod→REM';
          p = mk(pod(node), `10.71.${n(3)}.${n(9)}`);
          from = { kind: 'node', node };
          back = { kind: 'peer' };
        }
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
        const a = through(A, p, from, now);
        const b = through(B, p, from, now);
        expect(b?.lane ?? 'dropped', `packet ${i} (${kind})`).toBe(a?.lane ?? 'dropped');
        expect(b?.hex, `packet ${i} (${kind})`).toBe(a?.hex);
        // Addresses rewritten (the TTL changes on every forwarded packet).
        if (a !== null && Buffer.compare(a.pkt.subarray(12, 20), p.buf.subarray(p.off + 12, p.off + 20)) !== 0)
          translated++;
        if (a !== null && record) sent.push({ out: a.pkt, orig: p, from, back });
      }
      expect(translated).toBeGreaterThan(150);
      expect(B.rules.stats().stateless).toBeGreaterThan(150);
      // Flows not of the pairs (IP mapping, unknown source, the host's) stay on conntrack.
      expect(B.rules.runtime.flows.size).toBeGreaterThan(0);
      expect(B.rules.runtime.flows.size).toBeLessThan(A.rules.runtime.flows.size);
      // Counters (the user's drop rule, chain policies) as on conntrack, except the nat chains'
      // policies (docs/rules.md deviation: they count first packets of connections nothing bound).
      const natPolicy = (id: string): boolean => /\/(outgoing|incoming|prerouting|postrouting)\/policy$/.test(id);
      expect(B.rules.counters().filter((c) => !natPolicy(c.id))).toEqual(
        A.rules.counters().filter((c) => !natPolicy(c.id)),
      );
      expect(B.rules.counters().find((c) => c.id.includes('drop-tcp-8081'))!.packets).toBeGreaterThan(0);
      expect(A.router.drops).toEqual(B.router.drops);
      for (const kd of [
        'pod→REM',
        'peer→pod',
        'peer→eth0',
        'host→remote',
        'unknown-source→REM',
        'reply',
        'error',
        'node error about local',
      ])
        expect(kinds.get(kd) ?? 0, kd).toBeGreaterThan(5);
    });
  }
});
