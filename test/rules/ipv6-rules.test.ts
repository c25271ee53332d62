/**
 * ip6 tables (FirewallConfiguration family IPV6): what the parser accepts and refuses, which
 * packets each family's tables see, and the IPv6 path's per-packet allocation. The kernel
 * comparisons are in nft-oracle-stateful.test.ts ("ip6 table …").
 */
import { describe, expect, it } from 'vitest';
import { formatAddress, parseAddress } from '../../src/packet/addr.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import {
  HOOK_FORWARD,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_NODE,
  SOURCE_PEER,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import { rulesFromNatConfig } from '../../src/rules/from-nat.js';
import { RuleParseError, parseFirewallConfiguration } from '../../src/rules/parse.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { TCP_FLAG_SYN } from '../../src/packet/tcp.js';
import { tcpPacket, udpPacket } from '../packet/factory.js';
import { heapBytesPerOp } from '../util/alloc.js';
import * as fx from './fixtures.js';

type Obj = Record<string, unknown>;

function table(family: string, rule: Obj, chain: Obj = { hook: 'prerouting', type: 'nat', priority: -100 }): Obj {
  return {
    metadata: { name: 'x', namespace: 'ns' },
    spec: {
      table: {
        name: 't',
        family,
        chains: [{ name: 'c', policy: 'accept', ...chain, rules: { filterRules: [rule], natRules: [rule] } }],
      },
    },
  };
}

function err(o: unknown): RuleParseError {
  try {
    parseFirewallConfiguration(o);
  } catch (e) {
    if (e instanceof RuleParseError) return e;
    throw e;
  }
  throw new Error('no error');
}

const ipv = (position: string, value: string, op = 'eq'): Obj => ({ op, ip: { position, value } });

describe('ip6 tables: parser', () => {
  it('IPv6 addresses and CIDRs in matches, prefix and address NAT targets', () => {
    const t = parseFirewallConfiguration(
      table('IPV6', { name: 'r', natType: 'dnat', to: 'fd00:243::/48', match: [ipv('dst', 'fd00:70::/48')] }),
    );
    expect(t.family).toBe('ip6');
    const r = t.chains[0]!.rules[0]!;
    expect(r.kind === 'nat' && r.action.type === 'dnat' && r.action.prefixLen).toBe(48);
    expect(r.kind === 'nat' && r.action.type === 'dnat' && formatAddress(r.action.addr6!, 0, 6)).toBe('fd00:243::');
    expect(r.conds[0]).toMatchObject({ kind: 'ip6', pos: 'dst', op: 'eq', prefixLen: 48 });
    const one = parseFirewallConfiguration(
      table(
        'IPV6',
        { name: 'r', natType: 'snat', to: 'fd00:71::1', match: [ipv('src', 'fd00:1::5', 'neq')] },
        {
          hook: 'postrouting',
          type: 'nat',
          priority: 100,
        },
      ),
    ).chains[0]!.rules[0]!;
    expect(one.kind === 'nat' && one.action.type === 'snat' && one.action.prefixLen).toBe(128);
    expect(one.conds[0]).toMatchObject({ kind: 'ip6', op: 'neq', prefixLen: 128 });
  });

  it.each([
    [
      'an IPv4 address in an ip6 table',
      table('IPV6', { name: 'r', natType: 'dnat', to: 'fd00::1', match: [ipv('dst', '10.0.0.1')] }),
      'match[0].ip.value',
      'IPV4 table',
    ],
    [
      'an IPv6 address in an ip table',
      table('IPV4', { name: 'r', natType: 'dnat', to: '10.0.0.1', match: [ipv('dst', 'fd00::1')] }),
      'match[0].ip.value',
      'IPV6 table',
    ],
    [
      'an IPv6 target in an ip table',
      table('IPV4', { name: 'r', natType: 'dnat', to: 'fd00::/64', match: [] }),
      'to',
      'IPV6 table',
    ],
    [
      'an IPv4 target in an ip6 table',
      table('IPV6', { name: 'r', natType: 'dnat', to: '10.0.0.0/8', match: [] }),
      'to',
      'IPV4 table',
    ],
    [
      'host bits set',
      table('IPV6', { name: 'r', natType: 'dnat', to: 'fd00::1/64', match: [] }),
      'to',
      'did you mean fd00::/64',
    ],
    [
      'an IPv6 range',
      table('IPV6', { name: 'r', natType: 'dnat', to: 'fd00::1', match: [ipv('dst', 'fd00::1-fd00::9')] }),
      'match[0].ip.value',
      'ranges are not supported',
    ],
    [
      'a prefix length above 128',
      table('IPV6', { name: 'r', natType: 'dnat', to: 'fd00::/129', match: [] }),
      'to',
      '0-128',
    ],
    [
      'reject (ICMP net-unreachable) in an ip6 table',
      table('IPV6', { name: 'r', action: 'reject' }, { hook: 'forward', type: 'filter', priority: 0 }),
      'action',
      'IPV6',
    ],
    [
      'an INET table',
      table('INET', { name: 'r', action: 'accept' }, { hook: 'forward', type: 'filter', priority: 0 }),
      'spec.table.family',
      'one IPV4 and one IPV6 table',
    ],
    [
      'an ARP table',
      table('ARP', { name: 'r', action: 'accept' }, { hook: 'forward', type: 'filter', priority: 0 }),
      'spec.table.family',
      'IPV4 or IPV6',
    ],
  ])('refuses %s, naming the field', (_what, o, field, hint) => {
    const e = err(o);
    expect(e.field).toBe(field);
    expect(e.message).toContain(hint);
  });
});

/** A YAML gateway's rules with an IPv6 peer (remapped fd71:b::/48 → real fd00:a::/48), compiled. */
function runtime(): RulesRuntime {
  const rt = new RulesRuntime(
    { peer: fx.TUNNEL, node: fx.NODE_IF, host: fx.DEFAULT_IF, peerAddr: 0, nodeAddr: 0, hostAddr: 0, pathMtu: 1340 },
    { flows: { capacity: 1024 } },
  );
  rt.install(
    compileRules(
      rulesFromNatConfig(
        { localPodCIDRs: ['10.0.0.0/16', 'fd00:a::/48'], localExternalCIDR: '10.70.0.0/16', mtu: 1340 },
        [
          {
            name: 'b',
            remote: { podCIDRs: ['10.0.0.0/16', 'fd00:a::/48'], externalCIDRs: [] },
            remapped: { podCIDRs: ['10.71.0.0/16', 'fd71:b::/48'], externalCIDRs: [] },
          },
        ],
        { tunnel: fx.TUNNEL },
      ),
    ),
  );
  return rt;
}

describe('ip6 tables: runtime', () => {
  it('an IPv6 packet towards a CIDR no ip6 rule maps passes untouched and untracked', () => {
    const rt = runtime();
    expect(rt.rules!.tracked6).toBe(true);
    const p = udpPacket({ src: 'fd00:a::1', dst: 'fd72:b::2', sport: 1, dport: 2 });
    const before = p.buf.slice(p.off, p.off + p.len);
    const v = new IpView();
    expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
    const m = new PacketMeta();
    m.source = SOURCE_NODE;
    m.output = OUTPUT_NONE;
    rt.hooks[HOOK_PREROUTING]!.process(p.buf, v, m, 0);
    expect(p.buf.slice(p.off, p.off + p.len)).toEqual(before);
    expect(rt.currentMark).toBeGreaterThanOrEqual(0); // tracked (a new connection), not translated
  });

  it('remaps and clamps IPv6 without allocating per packet', () => {
    const rt = runtime();
    const a = tcpPacket({
      src: 'fd00:a::5',
      dst: 'fd71:b::9',
      sport: 40000,
      dport: 80,
      flags: TCP_FLAG_SYN,
      mss: 1460,
    });
    const b = tcpPacket({ src: 'fd00:a::9', dst: 'fd00:a::5', sport: 80, dport: 40000, flags: 0x12, mss: 1460 });
    const A = a.buf.subarray(a.off, a.off + a.len);
    const B = b.buf.subarray(b.off, b.off + b.len);
    const origA = A.slice();
    const origB = B.slice();
    const v = new IpView();
    const m = new PacketMeta();
    const one = (buf: Uint8Array, orig: Uint8Array, fromPeer: boolean): void => {
      buf.set(orig);
      parseIp(buf, 0, buf.length, v);
      m.source = fromPeer ? SOURCE_PEER : SOURCE_NODE;
      m.output = OUTPUT_NONE;
      rt.hooks[HOOK_PREROUTING]!.process(buf, v, m, 0);
      m.output = fromPeer ? OUTPUT_NODE : OUTPUT_PEER;
      rt.hooks[HOOK_FORWARD]!.process(buf, v, m, 0);
      rt.hooks[HOOK_POSTROUTING]!.process(buf, v, m, 0);
    };
    const trip = (): void => {
      one(A, origA, false);
      one(B, origB, true);
    };
    for (let i = 0; i < 20_000; i++) trip();
    expect(formatAddress(A, 24, 6)).toBe('fd00:a::9');
    expect((A[62]! << 8) | A[63]!).toBe(1280);
    expect(formatAddress(B, 8, 6)).toBe('fd71:b::9');
    expect(parseAddress('fd71:b::9')).toEqual(B.slice(8, 24));
    expect(heapBytesPerOp(trip)).toBeLessThan(4);
  });
});
