/**
 * The node role's split of its fabric objects (src/rules/fabric-split.ts) and the kernel
 * reconciler (src/node/fabric-kernel.ts) against recorded `nft` / `ip` calls (no root): which
 * chains go where, what is sent to the kernel for a change, how a refusal is reported and that
 * the previous version stays, and that clear() removes what was installed and only that.
 * The same against the real kernel: test/node/fabric-kernel.test.ts.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NodeFabric } from '../../src/daemon/k8s-fabric.js';
import type { InternalFabric } from '../../src/control/k8s/resources.js';
import type { NodeAgent } from '../../src/node/agent.js';
import { fabricFirewallSelectors, fabricRouteSelectors } from '../../src/control/k8s/firewall-watch.js';
import { RouteCommandError } from '../../src/kernel/iproute.js';
import { ConntrackCommandError } from '../../src/kernel/conntrack.js';
import { NftCommandError } from '../../src/kernel/nft.js';
import { FabricKernel } from '../../src/node/fabric-kernel.js';
import { splitFabricFirewall, type KernelTable } from '../../src/rules/fabric-split.js';
import { liqoTableId, parseRouteConfiguration } from '../../src/rules/routes.js';
import { fabricObjects, helmNotrack, selects, type PeeringSide } from '../rules/liqo-peering-objects.js';
import { forwardFilterChain } from '../rules/fixtures.js';

const NODE_IF = 'liqo.a7c2n9x0qe';
const TUN = 'weft0';
const SIDE: PeeringSide = {
  cfg: 'cluster-b',
  remoteId: 'cluster-b',
  namespace: 'liqo-tenant-cluster-b',
  mode: 'server',
  remotePod: { real: '10.0.0.0/16', remapped: '10.71.0.0/16' },
  remoteExt: { real: '10.70.0.0/16', remapped: '10.72.0.0/16' },
  nodes: [{ name: 'worker', internalIP: '10.80.0.2', gatewayIf: 'liqo.k3x9q2m7va', pods: [] }],
  mss: 1300, // the Helm clamp as a fixed value: what its default (0, rt mtu) gives over the default tunnel MTU 1340
  localPod: '10.0.0.0/16',
  localExt: '10.70.0.0/16',
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: NODE_IF,
  ipMappings: [{ name: 'db', real: '192.168.50.2', remapped: '10.70.0.5', node: 'worker', masquerade: true }],
  gatewayPod: { ip: '10.0.1.5', node: 'worker' },
  liqoNamespace: 'liqo',
};

const fabricFw = (s: PeeringSide, node: string): Record<string, unknown>[] =>
  fabricObjects(s).firewall.filter((o) => fabricFirewallSelectors(node).some((x) => selects(x, o)));

/** A user's fabric FirewallConfiguration: one chain about the node-side interface only, one not. */
const userFw = {
  metadata: {
    name: 'user-count',
    namespace: 'liqo',
    labels: {
      'networking.liqo.io/firewall-category': 'fabric',
      'networking.liqo.io/firewall-subcategory': 'all-nodes',
    },
  },
  spec: {
    table: {
      name: 'user-count',
      family: 'IPV4',
      chains: [
        {
          name: 'to-gw',
          type: 'filter',
          hook: 'postrouting',
          priority: 0,
          policy: 'accept',
          rules: {
            filterRules: [
              {
                name: 'count-udp',
                counter: true,
                action: 'accept',
                match: [
                  { op: 'eq', dev: { position: 'out', value: NODE_IF } },
                  { op: 'eq', proto: { value: 'udp' } },
                ],
              },
            ],
          },
        },
        forwardFilterChain('fwd', [
          {
            name: 'count-fwd',
            counter: true,
            action: 'accept',
            match: [{ op: 'eq', dev: { position: 'out', value: NODE_IF } }],
          },
        ]),
      ],
    },
  },
};

describe("the node role's split of fabric FirewallConfigurations", () => {
  it('puts every chain Liqo creates for a node into the kernel, and a chain about the node-side interface only in process', () => {
    const fw = fabricFw(SIDE, 'worker');
    expect(fw.map((o) => (o.metadata as { name: string }).name).sort()).toEqual([
      'cluster-b-masquerade-bypass',
      'db-remap-ipmapping-fabric',
      'worker-gw-masquerade-bypass',
    ]);
    // Another node does not select this node's gateway masquerade bypass.
    expect(
      fabricFw(SIDE, 'other')
        .map((o) => (o.metadata as { name: string }).name)
        .sort(),
    ).toEqual(['cluster-b-masquerade-bypass', 'db-remap-ipmapping-fabric']);
    const s = splitFabricFirewall([...fw, userFw], new Set([NODE_IF]), TUN, new Map());
    expect(s.placements.map((p) => `${p.object} ${p.chain} ${p.path}`)).toEqual([
      'liqo-tenant-cluster-b/cluster-b-masquerade-bypass pre-postrouting kernel',
      'liqo-tenant-cluster-b/db-remap-ipmapping-fabric prerouting kernel',
      'liqo-tenant-cluster-b/db-remap-ipmapping-fabric postrouting kernel',
      'liqo/user-count to-gw tun',
      'liqo/user-count fwd kernel',
      'liqo/worker-gw-masquerade-bypass pre-postrouting kernel',
    ]);
    // In process: only the TUN chain of the user's object.
    expect(s.tunObjects).toHaveLength(1);
    expect((s.tunObjects[0] as typeof userFw).spec.table.chains.map((c) => c.name)).toEqual(['to-gw']);
    // In the kernel: the rest; the node-side interface is the TUN there.
    expect([...s.kernelTables.keys()]).toEqual([
      'liqo-tenant-cluster-b/cluster-b-masquerade-bypass',
      'liqo-tenant-cluster-b/db-remap-ipmapping-fabric',
      'liqo/user-count',
      'liqo/worker-gw-masquerade-bypass',
    ]);
    const user = s.kernelTables.get('liqo/user-count')!;
    expect(user.nft).toContain(`oifname "${TUN}" counter accept comment "count-fwd"`);
    expect(user.nft).not.toContain('to-gw');
    expect(s.kernelTables.get('liqo-tenant-cluster-b/cluster-b-masquerade-bypass')!.nft).toBe(
      [
        'table ip cluster-b-masquerade-bypass {',
        '  chain pre-postrouting {',
        '    type nat hook postrouting priority 99; policy accept;',
        '    ip daddr 10.71.0.0/16 ip saddr 10.0.0.0/16 snat prefix to 10.0.0.0/16 comment "podcidr-cluster-b-10-0-0-0-16-10-71-0-0-16"',
        '    ip daddr 10.71.0.0/16 ip saddr != 10.0.0.0/16 snat to 10.70.0.0 comment "service-nodeport-cluster-b-10-71-0-0-16"',
        '    ip daddr 10.72.0.0/16 ip saddr 10.0.0.0/16 snat prefix to 10.0.0.0/16 comment "podcidr-cluster-b-ext-10-0-0-0-16"',
        '    ip daddr 10.72.0.0/16 ip saddr != 10.0.0.0/16 snat to 10.70.0.0 comment "service-nodeport-cluster-b-ext"',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    expect(s.kernelTables.get('liqo/worker-gw-masquerade-bypass')!.nft).toContain(
      'meta l4proto udp ip saddr 10.0.1.5 @th,16,16 6091 snat to 10.0.1.5',
    );
    expect(s.kernelTables.get('liqo-tenant-cluster-b/db-remap-ipmapping-fabric')!.nft).toContain(
      'ip daddr 192.168.50.2 masquerade comment "db"',
    );
  });

  it("a table name nft's syntax cannot write gets a weft_ prefix; an object that fails to parse keeps its previous kernel table", () => {
    const fw = fabricFw(SIDE, 'worker');
    const digit = {
      ...fw[0]!,
      metadata: { name: 'x', namespace: 'n' },
      spec: { table: { ...(fw[0]!.spec as { table: object }).table, name: '10-0-0-5-remap' } },
    };
    const first = splitFabricFirewall([digit], new Set(), TUN, new Map());
    expect(first.kernelTables.get('n/x')!.kernelName).toBe('weft_10-0-0-5-remap');
    const bad = { ...digit, spec: { table: { name: '10-0-0-5-remap', family: 'INET', chains: [] } } };
    const again = splitFabricFirewall([bad], new Set(), TUN, first.kernelTables);
    expect(again.kernelTables.get('n/x')).toBe(first.kernelTables.get('n/x'));
    // The attachment gets the bad object and reports its RuleParseError.
    expect(again.tunObjects).toEqual([bad]);
  });
});

interface Calls {
  nft: string[];
  ip: string[];
  ct: string[];
}

function fakeKernel(
  opts: { nftFail?: (s: string) => string | null; ipFail?: (a: string) => string | null; conntrack?: string } = {},
): { k: FabricKernel; calls: Calls } {
  const calls: Calls = { nft: [], ip: [], ct: [] };
  const k = new FabricKernel({
    tun: TUN,
    nodeDevs: () => new Set([NODE_IF]),
    nft: async (script) => {
      const err = opts.nftFail?.(script) ?? null;
      if (err !== null) throw new NftCommandError(err, undefined);
      calls.nft.push(script);
    },
    ip: async (args) => {
      const a = args.join(' ');
      const err = opts.ipFail?.(a) ?? null;
      if (err !== null) throw new RouteCommandError(['ip', ...args], err, '');
      calls.ip.push(a);
      return '';
    },
    conntrack: async (args) => {
      calls.ct.push(args.join(' '));
      if (opts.conntrack === undefined) throw new ConntrackCommandError(args, 'conntrack: not found (ENOENT)');
      return args[0] === '-L' ? opts.conntrack : '';
    },
  });
  return { k, calls };
}

describe('FabricKernel (recorded nft and ip calls)', () => {
  const tables = (): Map<string, KernelTable> =>
    splitFabricFirewall(fabricFw(SIDE, 'worker'), new Set([NODE_IF]), TUN, new Map()).kernelTables;

  it('creates each table in one transaction, replaces only what changed, deletes what went, and clear() removes the rest', async () => {
    const { k, calls } = fakeKernel();
    expect(await k.syncFirewall(tables())).toEqual([]);
    expect(calls.nft).toHaveLength(3);
    expect(calls.nft[0]!.split('\n').slice(0, 3)).toEqual([
      'add table ip cluster-b-masquerade-bypass',
      'delete table ip cluster-b-masquerade-bypass',
      'table ip cluster-b-masquerade-bypass {',
    ]);
    // Unchanged: nothing sent.
    expect(await k.syncFirewall(tables())).toEqual([]);
    expect(calls.nft).toHaveLength(3);
    // One object changed, one deleted.
    const changed = splitFabricFirewall(
      fabricFw(
        { ...SIDE, remoteExt: { real: '10.70.0.0/16', remapped: '10.73.0.0/16' }, gatewayPod: undefined },
        'worker',
      ),
      new Set([NODE_IF]),
      TUN,
      new Map(),
    ).kernelTables;
    expect(await k.syncFirewall(changed)).toEqual([]);
    expect(calls.nft.slice(3)).toEqual([
      expect.stringContaining('ip daddr 10.73.0.0/16'),
      'delete table ip worker-gw-masquerade-bypass',
    ]);
    await k.clear();
    expect(calls.nft.slice(5).sort()).toEqual([
      'delete table ip cluster-b-masquerade-bypass',
      'delete table ip db-remap-ipmapping-fabric-liqo-tenant-cluster-b',
    ]);
    expect(k.firewall().size).toBe(0);
  });

  it('a table the kernel refuses: a KernelRuleError naming object, chain, rule, field and fix; the previous version stays', async () => {
    let refuse = false;
    const { k } = fakeKernel({
      nftFail: (s) =>
        refuse && s.includes('10.73.')
          ? '/dev/stdin:8:5-60: Error: Could not process rule: No such file or directory\n    ip daddr 10.73.0.0/16 …'
          : null,
    });
    await k.syncFirewall(tables());
    const before = k.firewall().get('liqo-tenant-cluster-b/cluster-b-masquerade-bypass');
    refuse = true;
    const changed = splitFabricFirewall(
      fabricFw({ ...SIDE, remoteExt: { real: '10.70.0.0/16', remapped: '10.73.0.0/16' } }, 'worker'),
      new Set([NODE_IF]),
      TUN,
      new Map(),
    ).kernelTables;
    const errs = await k.syncFirewall(changed);
    expect(errs).toHaveLength(1);
    // Script line 8: after add/delete, table, chain and type lines, the third rule.
    expect(errs[0]).toMatchObject({
      object: 'liqo-tenant-cluster-b/cluster-b-masquerade-bypass',
      chain: 'pre-postrouting',
      rule: 'podcidr-cluster-b-ext-10-0-0-0-16',
      field: 'spec.table.chains[0].rules.natRules[2]',
    });
    expect(errs[0]!.message).toMatch(
      /Could not process rule.*fix: the kernel lacks nf_tables.*previous version stays in force/,
    );
    expect(k.firewall().get('liqo-tenant-cluster-b/cluster-b-masquerade-bypass')).toBe(before);
    // Without nft at all.
    const { k: k2 } = fakeKernel({ nftFail: () => 'nft: not found (ENOENT)' });
    const e2 = await k2.syncFirewall(tables());
    expect(e2[0]!.message).toMatch(/fix: install nftables/);
    expect(k2.firewall().size).toBe(0);
  });

  const routeSpecs = (s: PeeringSide) =>
    fabricObjects(s)
      .routes.filter((o) => fabricRouteSelectors().some((x) => selects(x, o)))
      .map((o) => parseRouteConfiguration(o));

  it("RouteConfigurations: Liqo's rule then routes per table, the node-side interface as the TUN; a change adds first and removes what went", async () => {
    const { k, calls } = fakeKernel();
    const specs = routeSpecs(SIDE);
    const id = liqoTableId('cluster-b-node-gw');
    expect(specs.map((s) => s.tableId)).toEqual([id]);
    expect(await k.syncRoutes(specs)).toEqual([]);
    expect(calls.ip).toEqual([
      // First install of the table id: leftovers of a crashed instance go (none here).
      `-j rule show table ${id}`,
      `route flush table ${id}`,
      `route replace 10.80.0.1/32 dev ${TUN} scope link table ${id}`,
      `route replace 10.71.0.0/16 via 10.80.0.1 table ${id}`,
      `route replace 10.72.0.0/16 via 10.80.0.1 table ${id}`,
      `rule add to 10.80.0.1/32 lookup ${id}`,
      `rule add to 10.71.0.0/16 lookup ${id}`,
      `rule add to 10.72.0.0/16 lookup ${id}`,
    ]);
    calls.ip.length = 0;
    expect(
      await k.syncRoutes(routeSpecs({ ...SIDE, remoteExt: { real: '10.70.0.0/16', remapped: '10.73.0.0/16' } })),
    ).toEqual([]);
    expect(calls.ip).toEqual([
      `route replace 10.80.0.1/32 dev ${TUN} scope link table ${id}`,
      `route replace 10.71.0.0/16 via 10.80.0.1 table ${id}`,
      `route replace 10.73.0.0/16 via 10.80.0.1 table ${id}`,
      `rule add to 10.73.0.0/16 lookup ${id}`,
      `rule del to 10.72.0.0/16 lookup ${id}`,
      `route del 10.72.0.0/16 table ${id}`,
    ]);
    calls.ip.length = 0;
    await k.clear();
    expect(calls.ip.filter((c) => c.startsWith('rule del'))).toHaveLength(3);
    expect(calls.ip.filter((c) => c.startsWith('route del'))).toHaveLength(3);
  });

  it('a route the kernel refuses: KernelRouteError naming object, rule, route, field and fix; the previous version is restored', async () => {
    const { k, calls } = fakeKernel({
      ipFail: (a) => (a.includes('dev nxmissing') ? 'Cannot find device "nxmissing"' : null),
    });
    const specs = routeSpecs(SIDE);
    await k.syncRoutes(specs);
    calls.ip.length = 0;
    const bad = parseRouteConfiguration({
      metadata: { name: 'cluster-b-node-gw', namespace: SIDE.namespace },
      spec: {
        table: {
          name: 'cluster-b-node-gw',
          rules: [
            { dst: '10.71.0.0/16', routes: [{ dst: '10.71.0.0/16', gw: '10.80.0.1' }] },
            { dst: '10.74.0.0/16', routes: [{ dst: '10.74.0.0/16', dev: 'nxmissing' }] },
          ],
        },
      },
    });
    const errs = await k.syncRoutes([bad]);
    expect(errs).toHaveLength(1);
    expect(errs[0]).toMatchObject({
      object: `${SIDE.namespace}/cluster-b-node-gw`,
      where: 'rule #1 route #0',
      field: 'dev',
    });
    expect(errs[0]!.message).toMatch(/Cannot find device.*fix: the interface does not exist on this node/);
    // Nothing of the old version was deleted; the routes touched are put back.
    expect(
      calls.ip.filter(
        (c) => c.startsWith('rule del') || (c.includes('10.72.0.0/16 table') && c.startsWith('route del')),
      ),
    ).toEqual([]);
    expect(calls.ip.at(-1)).toMatch(/^route replace 10\.72\.0\.0\/16 via 10\.80\.0\.1 table/);
    expect(k.routeSpecs()).toEqual(specs);
  });

  it("the Helm chart's fabric-notrack in the kernel; then, as Liqo does, the tracked flows it exempts are deleted (orig or reply tuple), others stay", async () => {
    const list = [
      'udp      17 29 src=198.18.9.2 dst=198.18.9.1 sport=40000 dport=6091 [UNREPLIED] src=198.18.9.1 dst=198.18.9.2 sport=6091 dport=40000 mark=0 use=1',
      'udp      17 29 src=198.18.9.1 dst=198.18.9.2 sport=6091 dport=41000 [UNREPLIED] src=198.18.9.2 dst=198.18.9.1 sport=41000 dport=6091 mark=0 use=1',
      'udp      17 29 src=10.0.1.5 dst=192.168.50.2 sport=5000 dport=7777 [UNREPLIED] src=192.168.50.2 dst=10.0.1.5 sport=7777 dport=5000 mark=0 use=1',
      'tcp      6 431999 ESTABLISHED src=10.0.1.5 dst=10.71.0.7 sport=6091 dport=80 src=10.71.0.7 dst=10.0.1.5 sport=80 dport=6091 [ASSURED] mark=0 use=1',
      'icmp     1 29 src=10.0.1.5 dst=10.71.0.7 type=8 code=0 id=7 src=10.71.0.7 dst=10.0.1.5 type=0 code=0 id=7 mark=0 use=1',
    ].join('\n');
    const { k, calls } = fakeKernel({ conntrack: list });
    const s = splitFabricFirewall([helmNotrack('fabric')], new Set([NODE_IF]), TUN, new Map());
    expect(s.placements.map((p) => `${p.chain} ${p.path}`)).toEqual(['prerouting kernel', 'output kernel']);
    expect(await k.syncFirewall(s.kernelTables)).toEqual([]);
    expect(calls.nft[0]).toContain('meta l4proto udp @th,16,16 6091 counter notrack comment "notrack-geneve-dport"');
    expect(calls.ct).toEqual([
      '-L',
      '-D -p udp --orig-src 198.18.9.2 --orig-dst 198.18.9.1 --orig-port-src 40000 --orig-port-dst 6091',
      '-D -p udp --orig-src 198.18.9.1 --orig-dst 198.18.9.2 --orig-port-src 6091 --orig-port-dst 41000',
    ]);
    // Without the conntrack tool: the table is in force, the failed flush is reported.
    const { k: k2 } = fakeKernel();
    const e = await k2.syncFirewall(s.kernelTables);
    expect(e[0]!.message).toMatch(
      /liqo\/fabric-notrack: notrack: in force, but the conntrack entries.*fix: install conntrack/,
    );
    expect(k2.firewall().size).toBe(1);
  });

  it('NodeFabric: a route naming a node-side interface whose InternalFabric is not known yet is refused, and installed once it is (resync)', async () => {
    const calls: string[] = [];
    const problems: (string | null)[] = [];
    let fabrics: InternalFabric[] = [];
    const nf = new NodeFabric(
      { tun: { name: TUN } as NodeAgent['tun'] },
      {
        internalFabrics: () => fabrics,
        onProblem: (p) => problems.push(p),
        onObjectProblem: () => {},
        onError: (e) => {
          throw e;
        },
        runners: {
          nft: async () => {},
          ip: async (args) => {
            const dev = args[args.indexOf('dev') + 1];
            if (args.includes('dev') && dev !== TUN)
              throw new RouteCommandError(['ip', ...args], `Cannot find device "${dev}"`, '');
            calls.push(args.join(' '));
            return '';
          },
        },
      },
    );
    const rt = fabricObjects(SIDE).routes.filter((o) =>
      fabricRouteSelectors().some((x) => selects(x, o)),
    ) as KubernetesObject[];
    nf.split([], rt);
    nf.routes(rt.map((o) => parseRouteConfiguration(o)));
    await nf.settled();
    expect(problems.at(-1)).toMatch(/cluster-b-node-gw rule #0 route #0: dev: .*Cannot find device "liqo\.a7c2n9x0qe"/);
    expect(calls.filter((c) => !c.startsWith('-j rule show') && !c.startsWith('route flush'))).toEqual([]);
    fabrics = [{ spec: { interface: { node: { name: NODE_IF } } } } as InternalFabric];
    nf.resync();
    await nf.settled();
    expect(problems.at(-1)).toBeNull();
    expect(calls.find((c) => c.startsWith('route replace'))).toBe(
      `route replace 10.80.0.1/32 dev ${TUN} scope link table ${liqoTableId('cluster-b-node-gw')}`,
    );
    expect(nf.status().routes).toEqual([
      {
        object: `${SIDE.namespace}/cluster-b-node-gw`,
        table: 'cluster-b-node-gw',
        tableId: liqoTableId('cluster-b-node-gw'),
        rules: 3,
        routes: 3,
      },
    ]);
  });
});
