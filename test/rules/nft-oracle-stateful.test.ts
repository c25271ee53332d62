/**
 * The kernel's nftables + conntrack as the oracle of the compiled rules (root), for whole flows.
 *
 * Topology (namespaces ncoa, ncor, ncob) and harness: test/rules/oracle-bed.ts — A —veth— R
 * —veth— B, R forwarding by input interface, its interfaces named as Liqo's gateway names them;
 * marks as seen by routing (fwmark 7 → blackhole). Each flow is a script of steps; a step's
 * packet is built from what the other side captured at the previous step (a reply to the
 * kernel's translated packet), sent by scapy from its side, captured on the other, and the same
 * bytes are run through the compiled rules' prerouting → forward → postrouting (one RulesRuntime
 * for the whole case: conntrack state is carried from step to step as in the kernel). Outputs
 * must be byte-equal after the TTL / hop limit decrement; drops must be drops on both.
 * Random rule sets through the same flows: nft-oracle-random.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checksumVerifies } from '../../src/packet/checksum.js';
import type { RuleTable } from '../../src/rules/model.js';
import { rulesFromNatConfig } from '../../src/rules/from-nat.js';
import { tcpPacket } from '../packet/factory.js';
import * as fx from './fixtures.js';
import { echo6Flow, tcp6Flow, udp6Flow } from './oracle-flows6.js';
import {
  A_ADDR,
  B_ADDR,
  echoFlow,
  fragments,
  freshId,
  hopBehind,
  ip4,
  ipv6Flow,
  R_A_ADDR,
  tcpFlow,
  ttlProbe,
  udpFlow,
  type Flow,
} from './oracle-flows.js';
import { BLACKHOLE_MARK, OracleBed, oracleUnavailable as reason } from './oracle-bed.js';

const bed = new OracleBed('nc');
const play = bed.play.bind(bed);

const MASQ = {
  metadata: { name: 'masq', namespace: 'nc' },
  spec: {
    table: {
      name: 'ncmasq',
      family: 'IPV4',
      chains: [
        {
          name: 'post',
          type: 'nat',
          hook: 'postrouting',
          priority: 100,
          policy: 'accept',
          rules: {
            natRules: [
              { name: 'out', natType: 'masquerade', match: [{ op: 'eq', dev: { position: 'out', value: fx.TUNNEL } }] },
            ],
          },
        },
      ],
    },
  },
};

/**
 * An ip6 table (FirewallConfiguration family IPV6) with what the YAML mode writes for a peer's
 * IPv6 CIDRs: the remap pair (prefix dnat of the remapped fd00:70::/48 to the real
 * fd00:243::/48 for traffic not from the tunnel, prefix snat back for traffic from it), an
 * address dnat (IP mapping), masquerade of non-pod sources towards the tunnel and the MSS clamp
 * at the route's MTU (`rt mtu`: 1500 − 60).
 */
const V6 = {
  metadata: { name: 'v6', namespace: 'nc' },
  spec: {
    table: {
      name: 'nc6',
      family: 'IPV6',
      chains: [
        {
          name: 'pre',
          type: 'nat',
          hook: 'prerouting',
          priority: -100,
          policy: 'accept',
          rules: {
            natRules: [
              {
                name: 'remap',
                natType: 'dnat',
                to: 'fd00:243::/48',
                match: [
                  { op: 'eq', ip: { position: 'dst', value: 'fd00:70::/48' } },
                  { op: 'neq', dev: { position: 'in', value: fx.TUNNEL } },
                ],
              },
              {
                name: 'ipmapping',
                natType: 'dnat',
                to: 'fd00:243::7',
                match: [{ op: 'eq', ip: { position: 'dst', value: 'fd00:73::5' } }],
              },
            ],
          },
        },
        {
          name: 'post',
          type: 'nat',
          hook: 'postrouting',
          priority: 100,
          policy: 'accept',
          rules: {
            natRules: [
              {
                name: 'remap',
                natType: 'snat',
                to: 'fd00:70::/48',
                match: [
                  { op: 'eq', ip: { position: 'src', value: 'fd00:243::/48' } },
                  { op: 'eq', dev: { position: 'in', value: fx.TUNNEL } },
                ],
              },
              {
                name: 'masq',
                natType: 'masquerade',
                match: [
                  { op: 'eq', dev: { position: 'out', value: fx.TUNNEL } },
                  { op: 'neq', ip: { position: 'src', value: 'fd00:112::/48' } },
                ],
              },
            ],
          },
        },
        {
          name: 'mss',
          type: 'filter',
          hook: 'forward',
          priority: 0,
          policy: 'accept',
          rules: {
            filterRules: [
              {
                name: 'clamp',
                action: 'tcpmssclamp',
                match: [{ op: 'eq', dev: { position: 'out', value: fx.TUNNEL } }],
              },
            ],
          },
        },
      ],
    },
  },
};

describe.skipIf(reason !== null)(
  `compiled rules with conntrack against kernel nftables${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    beforeAll(async () => {
      bed.setup();
      for (const p of [bed.peers.a, bed.peers.b]) expect((await p.next()).ready).toEqual(['True']);
    }, 60_000);
    afterAll(async () => {
      await bed.cleanup();
    }, 60_000);

    it('masquerade: TCP open/close, UDP request/reply + ICMP error, echo; replies from the peer never masqueraded', async () => {
      const r = await play(
        [MASQ],
        [
          tcpFlow('b', '10.112.0.5', '10.243.0.9', 40001, 80),
          udpFlow('b', '10.112.0.5', '10.243.0.9', 40002, 53, true),
          echoFlow('b', '10.112.0.6', '10.243.0.9', 0x99),
          tcpFlow('a', '10.243.0.9', '10.112.0.5', 41000, 22),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      const syn = r.outputs.get('tcp b 10.112.0.5:40001 → 10.243.0.9:80')![0]!;
      expect(ip4(Uint8Array.from(Buffer.from(syn, 'hex')), 12)).toBe(R_A_ADDR);
      expect(r.outputs.get('tcp b 10.112.0.5:40001 → 10.243.0.9:80')!.every((o) => o !== null)).toBe(true);
    }, 120_000);

    it('Liqo gateway producers together: remap both ways, IP mapping replies, MSS clamp on the flow', async () => {
      const r = await play(
        [
          fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16'),
          fx.ipMappingGw('nc-db', '192.168.7.10', '10.73.0.5'),
          fx.mssClamp('1360'),
        ],
        [
          tcpFlow('b', '10.112.1.5', '10.70.3.9', 42000, 80),
          tcpFlow('a', '10.243.3.3', '10.112.0.9', 42001, 443),
          udpFlow('a', '10.243.0.1', '10.73.0.5', 42002, 53),
          udpFlow('b', '10.112.1.5', '10.70.3.9', 42003, 53, true),
          echoFlow('a', '10.243.0.1', '10.73.0.5', 0x42),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      // Liqo's remap pair (iifname != eth0 / oifname != eth0 too) takes the stateless shortcut;
      // the IP mapping's flows stay on conntrack.
      expect(r.rt.statelessShortcut).toBe(true);
      expect(r.rt.stats().stateless).toBeGreaterThan(10);
      expect(r.rt.stats().flows.entries).toBeGreaterThanOrEqual(2);
    }, 120_000);

    it('mirrored remap pair as the YAML mode builds it: the stateless shortcut against the kernel (both ways, errors, echo)', async () => {
      const mt = (op: string, x: object): object => ({ op, ...x });
      const pair = {
        metadata: { name: 'yaml-remap', namespace: 'weft' },
        spec: {
          table: {
            name: 'weft-derived',
            family: 'IPV4',
            chains: [
              {
                name: 'prerouting',
                type: 'nat',
                hook: 'prerouting',
                priority: -100,
                policy: 'accept',
                rules: {
                  natRules: [
                    {
                      name: 'b-remap',
                      natType: 'dnat',
                      to: '10.243.0.0/16',
                      match: [
                        mt('eq', { ip: { position: 'dst', value: '10.70.0.0/16' } }),
                        mt('neq', { dev: { position: 'in', value: fx.TUNNEL } }),
                      ],
                    },
                  ],
                },
              },
              {
                name: 'postrouting',
                type: 'nat',
                hook: 'postrouting',
                priority: 100,
                policy: 'accept',
                rules: {
                  natRules: [
                    {
                      name: 'b-remap',
                      natType: 'snat',
                      to: '10.70.0.0/16',
                      match: [
                        mt('eq', { ip: { position: 'src', value: '10.243.0.0/16' } }),
                        mt('eq', { dev: { position: 'in', value: fx.TUNNEL } }),
                      ],
                    },
                  ],
                },
              },
            ],
          },
        },
      };
      const r = await play(
        [pair],
        [
          tcpFlow('b', '10.112.1.5', '10.70.3.9', 44000, 80),
          tcpFlow('a', '10.243.3.3', '10.112.0.9', 44001, 443),
          udpFlow('b', '10.112.1.5', '10.70.3.9', 44002, 53, true),
          udpFlow('a', '10.243.0.1', '10.112.0.7', 44003, 53, true),
          echoFlow('b', '10.112.0.6', '10.70.0.9', 0x44),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      // Weft answered from the shortcut, not from conntrack entries.
      expect(r.rt.statelessShortcut).toBe(true);
      expect(r.rt.stats().stateless).toBeGreaterThan(10);
      expect(r.rt.stats().flows.entries).toBe(0);
    }, 120_000);

    it("the same pair with the peer's real pod CIDR equal to ours (Liqo's usual reason to remap): the shortcut against the kernel", async () => {
      const mt = (op: string, x: object): object => ({ op, ...x });
      const pair = {
        metadata: { name: 'yaml-remap-same', namespace: 'weft' },
        spec: {
          table: {
            name: 'weft-derived',
            family: 'IPV4',
            chains: [
              {
                name: 'prerouting',
                type: 'nat',
                hook: 'prerouting',
                priority: -100,
                policy: 'accept',
                rules: {
                  natRules: [
                    {
                      name: 'b-remap',
                      natType: 'dnat',
                      to: '10.112.0.0/16',
                      match: [
                        mt('eq', { ip: { position: 'dst', value: '10.70.0.0/16' } }),
                        mt('neq', { dev: { position: 'in', value: fx.TUNNEL } }),
                      ],
                    },
                  ],
                },
              },
              {
                name: 'postrouting',
                type: 'nat',
                hook: 'postrouting',
                priority: 100,
                policy: 'accept',
                rules: {
                  natRules: [
                    {
                      name: 'b-remap',
                      natType: 'snat',
                      to: '10.70.0.0/16',
                      match: [
                        mt('eq', { ip: { position: 'src', value: '10.112.0.0/16' } }),
                        mt('eq', { dev: { position: 'in', value: fx.TUNNEL } }),
                      ],
                    },
                  ],
                },
              },
            ],
          },
        },
      };
      const r = await play(
        [pair],
        [
          tcpFlow('b', '10.112.1.5', '10.70.3.9', 45000, 80),
          tcpFlow('a', '10.112.3.3', '10.112.0.9', 45001, 443),
          udpFlow('b', '10.112.1.5', '10.70.3.9', 45002, 53, true),
          udpFlow('a', '10.112.0.1', '10.112.0.7', 45003, 53, true),
          // A peer pod with the same address as the local one it talks to.
          udpFlow('a', '10.112.1.5', '10.112.1.5', 45004, 53),
          echoFlow('b', '10.112.0.6', '10.70.0.9', 0x45),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      expect(r.rt.statelessShortcut).toBe(true);
      expect(r.rt.stats().stateless).toBeGreaterThan(10);
      expect(r.rt.stats().flows.entries).toBe(0);
    }, 120_000);

    // Traceroute through the YAML mode's translation (src/rules/from-nat.ts): local pods
    // 10.112/16 and nodes 10.80/16 on B's side, the peer's real pods 10.243/16 (remapped 10.70/16)
    // behind the tunnel, the local external CIDR 10.71/16 (non-pod sources masqueraded to 10.71.0.0).
    const yamlTables = (): RuleTable[] =>
      rulesFromNatConfig(
        { localPodCIDRs: ['10.112.0.0/16'], localExternalCIDR: '10.71.0.0/16', clampMss: false },
        [
          {
            name: 'b',
            remote: { podCIDRs: ['10.243.0.0/16'], externalCIDRs: [] },
            remapped: { podCIDRs: ['10.70.0.0/16'], externalCIDRs: [] },
          },
        ],
        { tunnel: fx.TUNNEL },
      );
    const traceFlows = (base: number): Flow[] => [
      ttlProbe('b', '10.112.1.5', '10.70.3.9', base, 33435),
      ttlProbe('a', '10.243.0.1', '10.112.0.7', base + 1, 33436),
      ttlProbe('b', '10.80.0.3', '10.70.3.9', base + 2, 33437),
      hopBehind('a', '10.243.0.1', '10.112.0.7', base + 3, 33438, '10.80.0.9'),
      hopBehind('b', '10.112.1.5', '10.70.3.9', base + 4, 33439, A_ADDR),
      hopBehind('b', '10.80.0.3', '10.70.3.9', base + 5, 33440, A_ADDR),
    ];
    for (const mirror of [true, false]) {
      it(`traceroute through the YAML translation (${mirror ? 'stateless shortcut' : 'conntrack only'}): the router's own Time Exceeded, errors from a node behind it`, async () => {
        const r = await play(yamlTables(), traceFlows(mirror ? 46000 : 46100), { statelessMirror: mirror });
        expect(r.mismatches, r.ruleset).toEqual([]);
        const out = (name: string, i: number): Uint8Array =>
          Uint8Array.from(Buffer.from(r.outputs.get(name)![i]!, 'hex'));
        const b = mirror ? 46000 : 46100;
        // The kernel relates its own error to the dying packet's new connection: the dnat is
        // undone in the quote and the outer source is the address the sender used.
        const t1 = out(`ttl 1 b 10.112.1.5:${b} → 10.70.3.9:33435`, 0);
        expect([ip4(t1, 12), ip4(t1, 16), ip4(t1, 28 + 12), ip4(t1, 28 + 16)]).toEqual([
          '10.70.3.9',
          '10.112.1.5',
          '10.112.1.5',
          '10.70.3.9',
        ]);
        // From the tunnel the snat would come at postrouting, after the hop: nothing is translated
        // (the router's own source R_A_ADDR is replaced by the translation's error-source rule).
        const t2 = out(`ttl 1 a 10.243.0.1:${b + 1} → 10.112.0.7:33436`, 0);
        expect([ip4(t2, 12), ip4(t2, 16), ip4(t2, 28 + 12)]).toEqual(['10.71.0.0', '10.243.0.1', '10.243.0.1']);
        // A node's error about a translated flow: related (quote and destination translated back);
        // no snat reaches a related packet: its non-pod source 10.80.0.9 is replaced by the
        // error-source rule's stateless rewrite.
        const t4 = out(`hop behind a 10.243.0.1:${b + 3} → 10.112.0.7:33438, error from 10.80.0.9`, 1);
        expect([ip4(t4, 12), ip4(t4, 16), ip4(t4, 28 + 12)]).toEqual(['10.71.0.0', '10.243.0.1', '10.243.0.1']);
        expect(r.rt.statelessShortcut).toBe(mirror);
      }, 120_000);
    }

    it('ct mark on the connection, restored as meta mark of its replies: the policy router sees it (blackhole)', async () => {
      const r = await play(
        [fx.serviceNodeportRouting('10.80.0.2', BLACKHOLE_MARK)],
        [
          udpFlow('b', '10.80.0.2', '10.70.0.1', 43000, 53),
          tcpFlow('b', '10.80.0.2', '10.70.0.1', 43001, 80),
          udpFlow('a', '10.70.0.1', '10.80.0.2', 43002, 53),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      // The replies towards the marked connection's source are blackholed by both.
      expect(r.outputs.get('udp b 10.80.0.2:43000 → 10.70.0.1:53')![1]).toBeNull();
      expect(r.outputs.get('udp a 10.70.0.1:43002 → 10.80.0.2:53')![0]).not.toBeNull();
    }, 120_000);

    it('reject: ICMP net-unreachable back to the sender', async () => {
      const rej = {
        metadata: { name: 'rej', namespace: 'nc' },
        spec: {
          table: {
            name: 'ncrej',
            family: 'IPV4',
            chains: [fx.forwardFilterChain('filterfw', [fx.deny9999('reject')])],
          },
        },
      };
      const f: Flow = {
        name: 'rejected SYN',
        steps: [
          {
            side: 'b',
            back: true,
            what: 'SYN to 9999',
            build: () =>
              tcpPacket({
                src: B_ADDR,
                dst: '10.243.0.9',
                sport: 45000,
                dport: 9999,
                flags: 2,
                id: freshId(),
                mss: 1460,
              }),
          },
        ],
      };
      const r = await play([rej], [f]);
      // Deviation (docs/rules.md): the kernel's IP id is its own pseudo-random choice, Weft's is 0; equal
      // once the id and the header checksum are masked, Weft's header checksum verifying.
      const mask = (h: string): string => h.slice(0, 8) + 'xxxx' + h.slice(12, 20) + 'xxxx' + h.slice(24);
      expect(r.mismatches.length).toBe(1);
      const m = r.mismatches[0]!;
      expect(mask(m.weft)).toBe(mask(m.kernel));
      expect(m.kernel.slice(8, 12)).not.toBe('0000');
      const w = Uint8Array.from(Buffer.from(m.weft, 'hex'));
      expect(checksumVerifies(w, 0, 20)).toBe(true);
      expect(m.weft.slice(40, 44)).toBe('0300');
    }, 60_000);

    it('ip6 table: prefix dnat/snat 1:1 both ways, address dnat, masquerade with echo ids, MSS clamp (rt mtu − 60), ICMPv6 error quoting the translated packet', async () => {
      const r = await play(
        [V6, MASQ],
        [
          tcp6Flow('b', 'fd00:112::5', 'fd00:70::9', 43000, 80),
          tcp6Flow('a', 'fd00:243::3', 'fd00:112::9', 43001, 443),
          udp6Flow('b', 'fd00:80::5', 'fd00:70:0:1::9', 43002, 53, true),
          udp6Flow('a', 'fd00:243::4', 'fd00:112::8', 43003, 53, true),
          echo6Flow('b', 'fd00:80::6', 'fd00:73::5', 0x99),
          echo6Flow('b', 'fd00:80::7', 'fd00:73::5', 0x9a),
          udpFlow('b', '10.112.0.5', '10.243.0.9', 43004, 53),
        ],
      );
      expect(r.mismatches, r.ruleset).toEqual([]);
      const at = (flow: string, step: number): Uint8Array =>
        Uint8Array.from(Buffer.from(r.outputs.get(flow)![step]!, 'hex'));
      // The kernel's answers are what the assertions above compared Weft's with: check they are translations.
      const syn = at('tcp6 b [fd00:112::5]:43000 → [fd00:70::9]:80', 0);
      expect(Buffer.from(syn.subarray(24, 40)).toString('hex')).toBe('fd000243' + '0'.repeat(23) + '9');
      expect((syn[40 + 22]! << 8) | syn[40 + 23]!).toBe(1440);
      const fromTunnel = at('tcp6 a [fd00:243::3]:43001 → [fd00:112::9]:443', 0);
      expect(Buffer.from(fromTunnel.subarray(8, 24)).toString('hex')).toBe('fd000070' + '0'.repeat(23) + '3');
      const err = at('udp6 b [fd00:80::5]:43002 → [fd00:70:0:1::9]:53 + ICMPv6 error', 3);
      expect(err[40]).toBe(3);
      expect(Buffer.from(err.subarray(24, 40)).toString('hex')).toBe('fd000080' + '0'.repeat(23) + '5');
      expect(r.rt.stats().mssClamped).toBeGreaterThan(0);
    }, 180_000);

    it("the YAML translation's ip6 table (remap pair, IP mapping both ways, host SNAT, MSS clamp MTU − 60) against the kernel", async () => {
      const tables = rulesFromNatConfig(
        {
          localPodCIDRs: ['10.112.0.0/16', 'fd00:112::/48'],
          localExternalCIDR: '10.71.0.0/16',
          localExternalCIDRv6: 'fd00:71::/64',
          ipMappings: [{ externalAddress: 'fd00:71::5', realAddress: 'fd00:80::7' }],
          mtu: 1340,
        },
        [
          {
            name: 'b',
            remote: { podCIDRs: ['10.243.0.0/16', 'fd00:243::/48'], externalCIDRs: [] },
            remapped: { podCIDRs: ['10.70.0.0/16', 'fd00:70::/48'], externalCIDRs: [] },
          },
        ],
        { tunnel: fx.TUNNEL },
      );
      expect(tables.map((t) => [t.name, t.family])).toEqual([
        ['weft-derived', 'ip'],
        ['weft-derived6', 'ip6'],
      ]);
      const r = await play(tables, [
        tcp6Flow('b', 'fd00:112::5', 'fd00:70::9', 47000, 80),
        tcp6Flow('a', 'fd00:243::3', 'fd00:112::9', 47001, 443),
        udp6Flow('b', 'fd00:80::5', 'fd00:70::9', 47002, 53, true),
        echo6Flow('a', 'fd00:243::4', 'fd00:71::5', 0x77),
        udp6Flow('b', 'fd00:80::7', 'fd00:70::8', 47003, 53),
      ]);
      expect(r.mismatches, r.ruleset).toEqual([]);
      const at = (flow: string, step: number): string => r.outputs.get(flow)![step]!;
      // Kernel outputs: the pod's SYN to the peer's real address with MSS 1340 − 60; the host's request from fd00:71::.
      const syn = at('tcp6 b [fd00:112::5]:47000 → [fd00:70::9]:80', 0);
      expect(syn.slice(48, 80)).toBe('fd000243' + '0'.repeat(23) + '9');
      expect(syn.slice(80 + 44, 80 + 48)).toBe((1280).toString(16).padStart(4, '0'));
      expect(at('udp6 b [fd00:80::5]:47002 → [fd00:70::9]:53 + ICMPv6 error', 0).slice(16, 48)).toBe(
        'fd000071' + '0'.repeat(24),
      );
      expect(at('udp6 b [fd00:80::7]:47003 → [fd00:70::8]:53', 0).slice(16, 48)).toBe(
        'fd000071' + '0'.repeat(23) + '5',
      );
      expect(at('echo6 a fd00:243::4 → fd00:71::5', 0).slice(48, 80)).toBe('fd000080' + '0'.repeat(23) + '7');
    }, 180_000);

    it('IPv6 passes the ip tables untouched; fragments of a masqueraded datagram', async () => {
      const r = await play([MASQ], [ipv6Flow(), fragments('b', '10.112.0.7', '10.243.0.9', 44000)]);
      expect(r.mismatches, r.ruleset).toEqual([]);
      // Deviation (docs/rules.md): the kernel holds the first fragment until the datagram is complete.
      expect(r.outputs.get('fragments b 10.112.0.7 → 10.243.0.9')![0]).toBeNull();
      expect(r.outputs.get('IPv6 UDP through the ip tables')!.every((o) => o !== null)).toBe(true);
    }, 120_000);
  },
);
