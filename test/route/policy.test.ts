import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../../src/packet/addr.js';
import { RouteConfigError, Router } from '../../src/route/policy.js';
import { icmpEcho } from '../packet/factory.js';

const TUNNEL = 1;
const HOST = 2;

function pkt(src: string, dst: string): { buf: Uint8Array; off: number } {
  const p = icmpEcho({ src, dst, headroom: 10 });
  return { buf: p.buf, off: p.off };
}

describe('Router (policy routing)', () => {
  it('tries rules in ascending priority; equal priorities keep insertion order', () => {
    const r = new Router<string>();
    r.addTable('low');
    r.addTable('high');
    r.addTable('tie');
    r.addRoute('low', '0.0.0.0/0', 'via-low');
    r.addRoute('high', '0.0.0.0/0', 'via-high');
    r.addRoute('tie', '0.0.0.0/0', 'via-tie');
    r.addRule({ priority: 200, table: 'low' });
    r.addRule({ priority: 100, table: 'high' });
    r.addRule({ priority: 100, table: 'tie' });
    const p = pkt('10.0.0.1', '10.0.0.2');
    expect(r.route(p.buf, p.off, HOST)).toBe('via-high');
    expect(r.listRules().map((x) => x.table)).toEqual(['high', 'tie', 'low']);
  });

  it('selects by input id, source and destination prefix; falls through when a table has no route', () => {
    const r = new Router<string>();
    for (const t of ['from-tunnel', 'pods', 'main']) r.addTable(t);
    // Liqo-like: traffic arriving from the tunnel goes to the local pods via the node, host traffic to
    // the remote pod CIDR goes into the tunnel, everything else uses main.
    r.addRoute('from-tunnel', '10.200.0.0/16', 'node-a');
    r.addRoute('pods', '10.201.0.0/16', 'tunnel');
    r.addRoute('main', '0.0.0.0/0', 'uplink');
    r.addRule({ priority: 10, iif: TUNNEL, table: 'from-tunnel' });
    r.addRule({ priority: 20, src: '10.200.0.0/16', dst: '10.201.0.0/16', table: 'pods' });
    r.addRule({ priority: 32766, table: 'main' });

    const fromTunnel = pkt('10.201.3.4', '10.200.1.1');
    expect(r.route(fromTunnel.buf, fromTunnel.off, TUNNEL)).toBe('node-a');
    // Same packet from the host does not match the iif rule nor the src rule → main.
    expect(r.route(fromTunnel.buf, fromTunnel.off, HOST)).toBe('uplink');
    // From the tunnel to an address its table does not cover → continue to later rules.
    const stray = pkt('10.201.3.4', '8.8.8.8');
    expect(r.route(stray.buf, stray.off, TUNNEL)).toBe('uplink');

    const podToRemote = pkt('10.200.5.5', '10.201.9.9');
    expect(r.route(podToRemote.buf, podToRemote.off, HOST)).toBe('tunnel');
    const otherSrc = pkt('192.168.1.1', '10.201.9.9');
    expect(r.route(otherSrc.buf, otherSrc.off, HOST)).toBe('uplink');
  });

  it('a rule with an IPv4 selector never matches IPv6 packets; unselective rules serve both families', () => {
    const r = new Router<string>();
    r.addTable('t');
    r.addTable('any');
    r.addRoute('t', '::/0', 'v6-from-t');
    r.addRoute('any', 'fd00::/8', 'v6-any');
    r.addRule({ priority: 1, dst: '10.0.0.0/8', table: 't' });
    r.addRule({ priority: 2, table: 'any' });
    const p6 = pkt('fd00::1', 'fd00::2');
    expect(r.route(p6.buf, p6.off, HOST)).toBe('v6-any');
    const p4 = pkt('10.0.0.1', '10.0.0.2');
    expect(r.route(p4.buf, p4.off, HOST)).toBeUndefined();
  });

  it('fwmark selects when given', () => {
    const r = new Router<string>();
    r.addTable('marked');
    r.addTable('main');
    r.addRoute('marked', '0.0.0.0/0', 'm');
    r.addRoute('main', '0.0.0.0/0', 'n');
    r.addRule({ priority: 1, fwmark: 0x10, table: 'marked' });
    r.addRule({ priority: 2, table: 'main' });
    const p = pkt('1.1.1.1', '2.2.2.2');
    expect(r.route(p.buf, p.off, HOST, 0x10)).toBe('m');
    expect(r.route(p.buf, p.off, HOST)).toBe('n');
  });

  it('removing routes, next hops, rules and tables', () => {
    const r = new Router<string>();
    r.addTable('a');
    r.addRoute('a', '10.0.0.0/8', 'x');
    r.addRoute('a', 'fd00::/8', 'x');
    r.addRoute('a', '10.1.0.0/16', 'y');
    const rule = r.addRule({ priority: 5, table: 'a' });
    const p = pkt('1.1.1.1', '10.1.1.1');
    expect(r.route(p.buf, p.off, HOST)).toBe('y');
    expect(r.removeRoute('a', '10.1.0.0/16')).toBe(true);
    expect(r.removeRoute('a', '10.1.0.0/16')).toBe(false);
    expect(r.route(p.buf, p.off, HOST)).toBe('x');
    expect(r.removeNextHop('x')).toBe(2);
    expect(r.route(p.buf, p.off, HOST)).toBeUndefined();
    r.addRoute('a', parsePrefix('0.0.0.0/0'), 'z');
    expect(r.route(p.buf, p.off, HOST)).toBe('z');
    expect(r.removeRule(rule)).toBe(true);
    expect(r.route(p.buf, p.off, HOST)).toBeUndefined();
    r.addRule({ priority: 5, table: 'a' });
    expect(r.removeTable('a')).toBe(true);
    expect(r.listRules()).toEqual([]);
  });

  it('configuration mistakes are typed errors; non-IP input routes nowhere', () => {
    const r = new Router<string>();
    expect(() => r.addRule({ priority: 1, table: 'nope' })).toThrow(RouteConfigError);
    expect(() => r.addRoute('nope', '10.0.0.0/8', 'x')).toThrow(RouteConfigError);
    r.addTable('a');
    expect(() => r.addRule({ priority: 1, src: '10.0.0.0/8', dst: 'fd00::/8', table: 'a' })).toThrow(RouteConfigError);
    expect(() => r.addRule({ priority: -1, table: 'a' })).toThrow(RouteConfigError);
    r.addRoute('a', '0.0.0.0/0', 'x');
    r.addRule({ priority: 1, table: 'a' });
    const junk = new Uint8Array(64).fill(0x20); // version nibble 2
    expect(r.route(junk, 0, HOST)).toBeUndefined();
  });
});
