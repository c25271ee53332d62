import { describe, expect, it } from 'vitest';
import { Router as PolicyRouter } from '../../src/route/policy.js';
import {
  RouteParseError,
  installRouteConfigurations,
  liqoTableId,
  parseRouteConfiguration,
  type RouteHop,
} from '../../src/rules/routes.js';

const rc = (rules: unknown[]): unknown => ({
  metadata: { name: 'n1-extcidr', namespace: 'liqo' },
  spec: { table: { name: 'n1-extcidr', rules } },
});

describe('parseRouteConfiguration', () => {
  it('one table per object, id from the name; rules without priority get the kernel default preference', () => {
    const s = parseRouteConfiguration(
      rc([
        { iif: 'liqo-tunnel', dst: '10.70.0.0/16', routes: [{ dst: '10.70.0.0/16', gw: '10.80.0.2', dev: 'liqo.n1' }] },
        { fwmark: 7, routes: [{ dst: '0.0.0.0/0', dev: 'liqo.n1' }] },
        { priority: 100, src: '10.1.0.0/16', routes: [{ dst: '10.9.0.0/16', dev: 'eth0' }] },
      ]),
    );
    expect(s.tableId).toBe(liqoTableId('n1-extcidr'));
    expect(s.tableId).not.toBe(liqoTableId('n2-extcidr'));
    expect(s.rules.map((r) => r.priority)).toEqual([undefined, undefined, 100]);
    const r = new PolicyRouter<RouteHop>();
    installRouteConfigurations(r, [s], () => 3);
    expect(r.listRules().map((x) => x.priority)).toEqual([100, 32764, 32765]);
  });

  it.each([
    ['routes', [{ dst: '10.0.0.0/8' }]],
    ['dst', [{ routes: [{ gw: '10.0.0.1' }] }]],
    ['gw', [{ routes: [{ dst: '10.0.0.0/8', gw: 'fd00::1' }] }]],
    ['dev', [{ routes: [{ dst: '10.0.0.0/8' }] }]],
    ['fwmark', [{ fwmark: -1, routes: [] }]],
    ['src', [{ src: '10.0.0.300/8', routes: [] }]],
  ])('typed error naming the field: %s', (field, rules) => {
    try {
      parseRouteConfiguration(rc(rules));
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RouteParseError);
      expect((e as RouteParseError).field).toBe(field);
      expect((e as RouteParseError).object).toBe('liqo/n1-extcidr');
    }
  });
});
