import { describe, expect, it } from 'vitest';
import { checksumVerifies, pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { mssSyn as syn } from '../packet/factory.js';
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
  VERDICT_ACCEPT,
  VERDICT_DROP,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import type { RulesDevices } from '../../src/rules/devices.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { ipToNumber, type RuleTable } from '../../src/rules/model.js';
import { parseFirewallConfiguration } from '../../src/rules/parse.js';
import * as fx from './fixtures.js';
import { heapBytesPerOp } from '../util/alloc.js';

const DEV: RulesDevices = {
  peer: fx.TUNNEL,
  node: fx.NODE_IF,
  host: fx.DEFAULT_IF,
  peerAddr: ipToNumber('192.0.2.1')!,
  nodeAddr: ipToNumber('198.51.100.1')!,
  hostAddr: 0,
  pathMtu: 1500,
};

/** The compiled rules with conntrack, as the router runs them. */
function mk(tables: RuleTable[]): RulesRuntime {
  const r = new RulesRuntime(DEV, { flows: { capacity: 1024 } });
  r.install(compileRules(tables));
  return r;
}

function through(e: RulesRuntime, b: Uint8Array, fromPeer: boolean): number {
  const v = new IpView();
  expect(parseIp(b, 0, b.length, v)).toBe(IP_OK);
  const m = new PacketMeta();
  m.source = fromPeer ? SOURCE_PEER : SOURCE_NODE;
  m.output = OUTPUT_NONE;
  if (e.hooks[HOOK_PREROUTING]!.process(b, v, m, 0) === VERDICT_DROP) return VERDICT_DROP;
  m.output = fromPeer ? OUTPUT_NODE : OUTPUT_PEER;
  if (e.hooks[HOOK_FORWARD]!.process(b, v, m, 0) === VERDICT_DROP) return VERDICT_DROP;
  return e.hooks[HOOK_POSTROUTING]!.process(b, v, m, 0);
}

const tcpOk = (b: Uint8Array): boolean =>
  checksumVerifies(b, 20, b.length - 20, pseudoHeaderSumV4(b, 12, 16, 6, b.length - 20));

describe('compiled rules (RulesRuntime)', () => {
  it('remap-podcidr: prefix DNAT from nodes, prefix SNAT from the tunnel, checksums kept valid', () => {
    const e = mk([parseFirewallConfiguration(fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16'))]);
    const a = syn('10.112.0.1', '10.70.3.9', 1460);
    expect(through(e, a, false)).toBe(VERDICT_ACCEPT);
    expect([...a.subarray(16, 20)]).toEqual([10, 243, 3, 9]);
    expect(tcpOk(a)).toBe(true);
    const b = syn('10.243.1.2', '10.112.0.1', 1460);
    expect(through(e, b, true)).toBe(VERDICT_ACCEPT);
    expect([...b.subarray(12, 16)]).toEqual([10, 70, 1, 2]);
    // From the tunnel a remapped destination is not translated (iifname != liqo-tunnel).
    const c = syn('10.1.0.1', '10.70.3.9', 1460);
    through(e, c, true);
    expect([...c.subarray(16, 20)]).toEqual([10, 70, 3, 9]);
  });

  it('MSS clamp lowers, never raises, towards the tunnel only', () => {
    const e = mk([parseFirewallConfiguration(fx.mssClamp('1360'))]);
    const hi = syn('10.112.0.1', '10.70.0.1', 1460);
    through(e, hi, false);
    expect((hi[42]! << 8) | hi[43]!).toBe(1360);
    expect(tcpOk(hi)).toBe(true);
    const lo = syn('10.112.0.1', '10.70.0.1', 1000);
    through(e, lo, false);
    expect((lo[42]! << 8) | lo[43]!).toBe(1000);
    const other = syn('10.70.0.1', '10.112.0.1', 1460);
    through(e, other, true);
    expect((other[42]! << 8) | other[43]!).toBe(1460);
  });

  it('first match, chain policy drop, counters per rule; chains at one hook in priority order', () => {
    const fc = {
      metadata: { name: 'f', namespace: 'n' },
      spec: {
        table: {
          name: 't',
          family: 'IPV4',
          chains: [
            {
              name: 'late',
              type: 'filter',
              hook: 'forward',
              priority: 10,
              policy: 'drop',
              rules: {
                filterRules: [
                  {
                    name: 'ok',
                    counter: true,
                    action: 'accept',
                    match: [{ op: 'eq', ip: { position: 'dst', value: '10.9.0.0/16' } }],
                  },
                ],
              },
            },
            {
              name: 'early',
              type: 'filter',
              hook: 'forward',
              priority: -10,
              policy: 'accept',
              rules: {
                filterRules: [
                  { name: 'count', counter: true, match: [{ op: 'neq', dev: { position: 'in', value: fx.TUNNEL } }] },
                  {
                    name: 'block',
                    counter: true,
                    action: 'drop',
                    match: [{ op: 'eq', ip: { position: 'src', value: '10.1.0.1-10.1.0.5' } }],
                  },
                ],
              },
            },
          ],
        },
      },
    };
    const e = mk([parseFirewallConfiguration(fc)]);
    expect(through(e, syn('10.1.0.3', '10.9.0.1', 1460), false)).toBe(VERDICT_DROP);
    expect(through(e, syn('10.1.0.9', '10.9.0.1', 1460), false)).toBe(VERDICT_ACCEPT);
    expect(through(e, syn('10.1.0.9', '10.8.0.1', 1460), true)).toBe(VERDICT_DROP);
    expect(e.counterOf('n/f/t/early/count')).toBe(2);
    expect(e.counterOf('n/f/t/early/block')).toBe(1);
    expect(e.counterOf('n/f/t/late/ok')).toBe(1);
    expect(e.counterOf('n/f/t/late/policy')).toBe(1);
  });

  it('as the kernel: of two chains at one priority, the one created last runs first', () => {
    const chain = (name: string, filterRules: object[]): object => ({
      name,
      type: 'filter',
      hook: 'prerouting',
      priority: 0,
      policy: 'accept',
      rules: { filterRules },
    });
    const fc = {
      metadata: { name: 'f', namespace: 'n' },
      spec: {
        table: {
          name: 't',
          family: 'IPV4',
          chains: [
            chain('first', [{ name: 'all', counter: true, action: 'drop' }]),
            chain('second', [{ name: 'all', counter: true }]),
          ],
        },
      },
    };
    const e = mk([parseFirewallConfiguration(fc)]);
    expect(through(e, syn('10.1.0.3', '10.9.0.1', 1460), false)).toBe(VERDICT_DROP);
    expect([e.counterOf('n/f/t/second/all'), e.counterOf('n/f/t/first/all')]).toEqual([1, 1]);
  });

  it('as the kernel: no interface is the empty name (before routing, oifname != X holds, == X fails)', () => {
    const fc = {
      metadata: { name: 'f', namespace: 'n' },
      spec: {
        table: {
          name: 't',
          family: 'IPV4',
          chains: [
            {
              name: 'pre',
              type: 'filter',
              hook: 'prerouting',
              priority: 0,
              policy: 'accept',
              rules: {
                filterRules: [
                  {
                    name: 'not-tunnel',
                    counter: true,
                    match: [{ op: 'neq', dev: { position: 'out', value: fx.TUNNEL } }],
                  },
                  { name: 'tunnel', counter: true, match: [{ op: 'eq', dev: { position: 'out', value: fx.TUNNEL } }] },
                ],
              },
            },
          ],
        },
      },
    };
    const e = mk([parseFirewallConfiguration(fc)]);
    expect(through(e, syn('10.1.0.3', '10.9.0.1', 1460), false)).toBe(VERDICT_ACCEPT);
    expect([e.counterOf('n/f/t/pre/not-tunnel'), e.counterOf('n/f/t/pre/tunnel')]).toEqual([1, 0]);
  });
});

describe('compiled rules: allocation', () => {
  it('evaluates every gateway producer (NAT, MSS clamp, marks, counters) without allocating per packet', () => {
    const e = mk(
      [
        fx.notrack(6091),
        fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16'),
        fx.ipMappingGw('db', '192.168.7.10', '10.73.0.5'),
        fx.serviceNodeportRouting('10.80.0.2', 7),
        fx.mssClamp('1360'),
      ].map((o) => parseFirewallConfiguration(o)),
    );
    const a = syn('10.112.0.1', '10.70.3.9', 1460);
    const b = syn('10.243.1.2', '10.73.0.5', 1460);
    const origA = a.slice();
    const origB = b.slice();
    const v = new IpView();
    const m = new PacketMeta();
    const one = (buf: Uint8Array, orig: Uint8Array, fromPeer: boolean): void => {
      buf.set(orig);
      parseIp(buf, 0, buf.length, v);
      m.source = fromPeer ? SOURCE_PEER : SOURCE_NODE;
      m.output = OUTPUT_NONE;
      e.hooks[HOOK_PREROUTING]!.process(buf, v, m, 0);
      m.output = fromPeer ? OUTPUT_NODE : OUTPUT_PEER;
      e.hooks[HOOK_FORWARD]!.process(buf, v, m, 0);
      e.hooks[HOOK_POSTROUTING]!.process(buf, v, m, 0);
    };
    const trip = (): void => {
      one(a, origA, false);
      one(b, origB, true);
    };
    for (let i = 0; i < 50_000; i++) trip();
    // The translations did happen (so the loop measures the real work).
    expect([...a.subarray(16, 20)]).toEqual([10, 243, 3, 9]);
    expect((a[42]! << 8) | a[43]!).toBe(1360);
    expect([...b.subarray(12, 20)]).toEqual([10, 70, 1, 2, 192, 168, 7, 10]);
    // Smallest of three windows (a per-packet allocation shows in each): test/util/alloc.ts.
    const perOp = heapBytesPerOp(trip);
    expect(perOp).toBeLessThan(4);
  });
});
