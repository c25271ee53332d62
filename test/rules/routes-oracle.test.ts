/**
 * RouteConfiguration → src/route/policy.ts, against the kernel's policy routing (root).
 * Seeded random RouteConfigurations are installed the way Liqo's route controller does
 * (table id from the name, `ip rule` per rule into that table, routes replaced into it) in a
 * namespace, and into Weft's policy router through src/rules/routes.ts; then `ip route get DST
 * from SRC iif IIF mark M` and Weft's route() must agree on no-route / device / gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress, parseAddress, type Prefix } from '../../src/packet/addr.js';
import { Router as PolicyRouter } from '../../src/route/policy.js';
import {
  installRouteConfigurations,
  liqoTableId,
  parseRouteConfiguration,
  type RouteHop,
} from '../../src/rules/routes.js';
import { e2eUnavailableReason, Topology } from '../util/netns.js';
import { Prng } from '../util/prng.js';

const reason = e2eUnavailableReason(['ip']);
const topo = new Topology('rlx');
let ns = '';
const IIFS = ['rlxi0', 'rlxi1'];
const DEVS = ['rlxd0', 'rlxd1', 'rlxd2'];

function setup(): void {
  ns = topo.addNamespace('rt');
  const r = (args: string[]): string => topo.exec(ns, args);
  [...IIFS, ...DEVS].forEach((d, i) => {
    // veth pairs inside the namespace (no dummy module needed); the peer end only has to be up.
    r(['ip', 'link', 'add', d, 'type', 'veth', 'peer', 'name', `${d}p`]);
    r(['ip', 'link', 'set', `${d}p`, 'up']);
    r(['ip', 'addr', 'add', `172.31.${i}.1/24`, 'dev', d]);
    r(['ip', 'link', 'set', d, 'up']);
  });
  for (const s of [
    'net/ipv4/ip_forward=1',
    'net/ipv4/conf/all/rp_filter=0',
    'net/ipv4/conf/default/rp_filter=0',
    ...[...IIFS, ...DEVS].map((d) => `net/ipv4/conf/${d}/rp_filter=0`),
  ]) {
    r(['sysctl', '-qw', s]);
  }
}

const txt = (p: Prefix): string => `${formatAddress(p.addr)}/${p.prefixLen}`;

function packet(src: string, dst: string): Uint8Array {
  const b = new Uint8Array(20);
  b[0] = 0x45;
  b.set(parseAddress(src), 12);
  b.set(parseAddress(dst), 16);
  return b;
}

describe.skipIf(reason !== null)(
  `RouteConfiguration against kernel policy routing${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    beforeAll(setup, 30_000);
    afterAll(() => topo.cleanup(), 30_000);

    it('seeded random rule/route sets: same decision for ip route get (iif, mark, src, dst)', () => {
      const PREFIXES = ['10.0.0.0/8', '10.1.0.0/16', '10.1.2.0/24', '10.2.0.0/16', '0.0.0.0/0', '10.1.2.3/32'];
      const SRC_PREFIXES = ['10.5.0.0/16', '10.1.0.0/16', '172.16.0.0/12'];
      const DSTS = ['10.1.2.3', '10.1.2.9', '10.1.9.9', '10.2.3.4', '10.9.9.9', '192.168.1.1'];
      const SRCS = ['10.5.0.1', '10.1.2.5', '172.16.0.1'];
      const MARKS = [0, 1, 2, 7];
      let compared = 0;
      let routed = 0;
      for (let seed = 1; seed <= 10; seed++) {
        const rng = new Prng(seed * 104729);
        const pick = <T>(xs: readonly T[]): T => xs[rng.int(0, xs.length - 1)]!;
        const maybe = (p: number): boolean => rng.next() < p;
        // Clean slate: our rules and tables from the previous seed.
        for (const line of topo.exec(ns, ['ip', 'rule', 'show']).split('\n')) {
          const m = /^(\d+):/.exec(line);
          if (m && !['0', '32766', '32767'].includes(m[1]!)) topo.exec(ns, ['ip', 'rule', 'del', 'pref', m[1]!]);
        }
        const rcs = [];
        for (let i = 0; i < rng.int(1, 3); i++) {
          const rules = [];
          for (let j = 0; j < rng.int(1, 4); j++) {
            const routes = [];
            for (let k = 0; k < rng.int(1, 3); k++) {
              const d = rng.int(0, DEVS.length - 1);
              routes.push({
                dst: pick(PREFIXES),
                dev: DEVS[d],
                ...(maybe(0.5) ? { gw: `172.31.${IIFS.length + d}.${rng.int(2, 9)}` } : {}),
              });
            }
            rules.push({
              ...(maybe(0.6) ? { priority: rng.int(1, 300) * 100 } : {}),
              ...(maybe(0.5) ? { iif: pick(IIFS) } : {}),
              ...(maybe(0.3) ? { src: pick(SRC_PREFIXES) } : {}),
              ...(maybe(0.3) ? { dst: pick(PREFIXES) } : {}),
              ...(maybe(0.4) ? { fwmark: pick([1, 2, 7]) } : {}),
              ...(maybe(0.1) ? { oif: pick(DEVS) } : {}),
              routes,
            });
          }
          rcs.push({
            metadata: { name: `rc-${seed}-${i}`, namespace: 'rlx' },
            spec: { table: { name: `rlx-${seed}-${i}`, rules } },
          });
        }
        const specs = rcs.map((o) => parseRouteConfiguration(o));
        // Kernel, as Liqo's controller does it: per rule, the rule then its routes (replace).
        for (const s of specs) {
          topo.exec(ns, ['ip', 'route', 'flush', 'table', String(s.tableId)], { allowFail: true });
          expect(s.tableId).toBe(liqoTableId(s.table));
          for (const r of s.rules) {
            const args = ['ip', 'rule', 'add'];
            if (r.priority !== undefined) args.push('pref', String(r.priority));
            if (r.iif !== undefined) args.push('iif', r.iif);
            if (r.oif !== undefined) args.push('oif', r.oif);
            if (r.src !== undefined) args.push('from', `${txt(r.src)}`);
            if (r.dst !== undefined) args.push('to', `${txt(r.dst)}`);
            if (r.fwmark !== undefined) args.push('fwmark', String(r.fwmark));
            args.push('table', String(s.tableId));
            topo.exec(ns, args);
            for (const x of r.routes) {
              topo.exec(ns, [
                'ip',
                'route',
                'replace',
                txt(x.dst),
                ...(x.hop.gw ? ['via', x.hop.gw] : []),
                'dev',
                x.hop.dev!,
                'table',
                String(s.tableId),
              ]);
            }
          }
        }
        const weft = new PolicyRouter<RouteHop>();
        installRouteConfigurations(weft, specs, (n) => IIFS.indexOf(n));
        for (let q = 0; q < 40; q++) {
          const dst = pick(DSTS);
          const src = pick(SRCS);
          const iif = rng.int(0, IIFS.length - 1);
          const mark = pick(MARKS);
          const out = topo.exec(
            ns,
            ['ip', '-j', 'route', 'get', dst, 'from', src, 'iif', IIFS[iif]!, 'mark', String(mark)],
            { allowFail: true },
          );
          const k =
            out.trim() === ''
              ? null
              : ((JSON.parse(out) as { dev?: string; gateway?: string; type?: string }[])[0] ?? null);
          const kernel = k && k.dev && (k.type ?? 'unicast') === 'unicast' ? { dev: k.dev, gw: k.gateway } : null;
          const hop = weft.route(packet(src, dst), 0, iif, mark);
          const mine = hop ? { dev: hop.dev, gw: hop.gw } : null;
          expect(
            mine,
            `seed ${seed}: ${dst} from ${src} iif ${IIFS[iif]} mark ${mark}\n${topo.exec(ns, ['ip', 'rule', 'show'])}`,
          ).toEqual(kernel);
          compared++;
          if (kernel) routed++;
        }
      }
      expect(compared).toBe(400);
      // Both outcomes occur.
      expect(routed).toBeGreaterThan(40);
      expect(routed).toBeLessThan(360);
    }, 120_000);
  },
);
