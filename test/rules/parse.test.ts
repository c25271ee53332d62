import { describe, expect, it } from 'vitest';
import { ipToNumber } from '../../src/rules/model.js';
import { RuleParseError, parseFirewallConfiguration } from '../../src/rules/parse.js';
import * as fx from './fixtures.js';

type Obj = Record<string, unknown>;

function withRule(chain: Obj, rule: Obj): Obj {
  return {
    metadata: { name: 'x', namespace: 'ns' },
    spec: {
      table: {
        name: 't',
        family: 'IPV4',
        chains: [
          { name: 'c', policy: 'accept', priority: 0, ...chain, rules: { filterRules: [rule], natRules: [rule] } },
        ],
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

describe('parseFirewallConfiguration', () => {
  it('parses every producer fixture with its chains at their hooks', () => {
    const t = parseFirewallConfiguration(fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16'));
    expect(t.object).toBe(`${fx.NS}/rlx-peer-remap-podcidr`);
    expect(t.chains.map((c) => [c.name, c.hook, c.type, c.priority])).toEqual([
      ['outgoing', 'prerouting', 'nat', -100],
      ['incoming', 'postrouting', 'nat', 100],
    ]);
    const dnat = t.chains[0]!.rules[0]!;
    expect(dnat.kind === 'nat' && dnat.action).toEqual({
      type: 'dnat',
      addr: ipToNumber('10.243.0.0'),
      prefixLen: 16,
      text: '10.243.0.0/16',
    });
    expect(dnat.conds).toEqual([
      {
        kind: 'ip',
        pos: 'dst',
        op: 'eq',
        lo: ipToNumber('10.70.0.0'),
        hi: ipToNumber('10.70.255.255'),
        text: '10.70.0.0/16',
      },
      { kind: 'dev', dir: 'in', op: 'neq', name: fx.DEFAULT_IF },
      { kind: 'dev', dir: 'in', op: 'neq', name: fx.TUNNEL },
    ]);
    for (const o of [
      fx.ipMappingGw('a', '192.168.0.1', '10.1.0.1'),
      fx.masqueradeBypass('c', '10.1.0.0/16', '10.2.0.0/16', '10.3.0.0/16', '10.4.0.1'),
      fx.serviceNodeportRouting('10.4.0.2', 3),
      fx.mssClamp('1360'),
      fx.mssClamp(''),
      fx.notrack(6091),
    ]) {
      expect(parseFirewallConfiguration(o).chains.length).toBeGreaterThan(0);
    }
  });

  it('keeps Liqo rendering quirks: proto and port ranges ignore op; only the list of the chain type counts', () => {
    const t = parseFirewallConfiguration(
      withRule(
        { hook: 'forward', type: 'filter' },
        {
          name: 'r',
          action: 'drop',
          natType: 'snat',
          match: [{ op: 'neq', proto: { value: 'udp' }, port: { position: 'dst', value: '100-200' } }],
        },
      ),
    );
    const r = t.chains[0]!.rules;
    expect(r.length).toBe(1);
    expect(r[0]!.kind).toBe('filter');
    expect(r[0]!.conds).toEqual([
      { kind: 'proto', proto: 17 },
      { kind: 'port', pos: 'dst', op: 'eq', lo: 100, hi: 200 },
    ]);
    const m = parseFirewallConfiguration(
      withRule({ hook: 'postrouting', type: 'nat' }, { name: 'm', natType: 'snat', match: [] }),
    );
    const n = m.chains[0]!.rules[0]!;
    expect(n.kind === 'nat' && n.action.type).toBe('masquerade');
  });

  it.each([
    [
      'family',
      { metadata: { name: 'x', namespace: 'ns' }, spec: { table: { name: 't', family: 'INET', chains: [] } } },
      '',
      '',
      'spec.table.family',
    ],
    ['hook', withRule({ hook: 'ingress', type: 'filter' }, { name: 'r' }), 'c', '', 'hook'],
    ['action', withRule({ hook: 'forward', type: 'filter' }, { name: 'r', action: 'queue' }), 'c', 'r', 'action'],
    [
      'ip',
      withRule(
        { hook: 'forward', type: 'filter' },
        { name: 'r', match: [{ op: 'eq', ip: { position: 'src', value: 'fd00::1' } }] },
      ),
      'c',
      'r',
      'match[0].ip.value',
    ],
    [
      'host bits',
      withRule(
        { hook: 'forward', type: 'filter' },
        { name: 'r', match: [{ op: 'eq', ip: { position: 'src', value: '10.72.0.0/12' } }] },
      ),
      'c',
      'r',
      'match[0].ip.value',
    ],
    [
      'port',
      withRule(
        { hook: 'forward', type: 'filter' },
        { name: 'r', match: [{ op: 'eq', port: { position: 'src', value: '70000' } }] },
      ),
      'c',
      'r',
      'match[0].port.value',
    ],
    [
      'op',
      withRule(
        { hook: 'forward', type: 'filter' },
        { name: 'r', match: [{ op: 'lt', dev: { position: 'in', value: 'eth0' } }] },
      ),
      'c',
      'r',
      'match[0].op',
    ],
    [
      'ctmark value',
      withRule({ hook: 'forward', type: 'filter' }, { name: 'r', action: 'ctmark', value: 'x' }),
      'c',
      'r',
      'value',
    ],
    [
      'reject at postrouting',
      withRule({ hook: 'postrouting', type: 'filter' }, { name: 'r', action: 'reject' }),
      'c',
      'r',
      'action',
    ],
    [
      'rt mtu clamp at prerouting',
      withRule({ hook: 'prerouting', type: 'filter' }, { name: 'r', action: 'tcpmssclamp' }),
      'c',
      'r',
      'value',
    ],
    [
      'dnat at postrouting',
      withRule({ hook: 'postrouting', type: 'nat' }, { name: 'r', natType: 'dnat', to: '10.0.0.1', match: [] }),
      'c',
      'r',
      'natType',
    ],
    [
      'nat to range',
      withRule(
        { hook: 'postrouting', type: 'nat' },
        { name: 'r', natType: 'snat', to: '10.0.0.1-10.0.0.9', match: [] },
      ),
      'c',
      'r',
      'to',
    ],
    [
      'masquerade at input',
      withRule({ hook: 'input', type: 'nat' }, { name: 'r', natType: 'masquerade', match: [] }),
      'c',
      'r',
      'natType',
    ],
    [
      'nat chain at conntrack priority',
      withRule(
        { hook: 'prerouting', type: 'nat', priority: -200 },
        { name: 'r', natType: 'dnat', to: '10.0.0.1', match: [] },
      ),
      'c',
      '',
      'priority',
    ],
  ])('names object, chain, rule and field: %s', (_what, o, chain, rule, field) => {
    const e = err(o);
    expect(e.object).toBe(o === undefined ? '' : (o as { metadata: Obj }).metadata ? 'ns/x' : '?');
    expect([e.chain, e.rule, e.field]).toEqual([chain, rule, field]);
    expect(e.message).toContain(field);
  });
});
