/**
 * The node role's fabric objects against the node's kernel (root; namespaces prefixed `nx`).
 *
 *   pod nx-pod 10.0.1.5 ─ nxp0 ┐                   ┌ nxu0 198.18.9.2 ─ Geneve ─ nx-gw 198.18.9.1
 *                              nx-node (NodeAgent, TUN nxt0 10.80.0.2)
 *   ext nx-ext 192.168.50.2 ─ nxe0 192.168.50.1 ┘
 *
 * The node runs a real NodeAgent and the node role's glue (NodeFabric: split, kernel, in-process
 * attachment) fed the fabric objects Liqo creates for this node in a peering
 * (test/rules/liqo-peering-objects.ts: `<cfg>-masquerade-bypass`, `<node>-gw-masquerade-bypass`,
 * `<ip>-remap-ipmapping-fabric`, `<fabric>-node-gw`), plus a user's fabric objects: a filter
 * chain about the node-side interface only (enforced in process) and a RouteConfiguration with
 * fwmark and iif. A CNI-like masquerade (nat postrouting, srcnat) is in the node, as on a real one.
 * Proves, with the kernel as the oracle (conntrack, nft, ip rule / ip route get):
 * - pod → remote pod keeps the pod's source (Liqo's bypass pre-empts the CNI masquerade);
 *   the node's own traffic to remote pods leaves as the unknown-source IP 10.70.0.0;
 * - the gateway pod's Geneve datagrams (UDP 6091) are not masqueraded, others are;
 * - a remote source arriving through the TUN and forwarded to an IP-mapped real address leaves
 *   masqueraded by the ip-mapping-fabric table (kernel-forwarded traffic the TUN never sees);
 * - ip rule / ip route get (mark, iif) give what Weft's policy router computes from the same
 *   RouteConfigurations;
 * - a change and a delete apply live; conntrack entries of other objects' flows stay (same ids);
 * - a route the kernel refuses is reported, the rest stays; the Helm chart's fabric-notrack goes
 *   into the kernel and, as Liqo does, the tracked flows it exempts are flushed (others stay);
 *   stop removes everything installed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeFabric } from '../../src/daemon/k8s-fabric.js';
import { Runtime } from '../../src/daemon/runtime.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { createLogger } from '../../src/control/log.js';
import { parseConfig, type NodeConfig } from '../../src/control/config.js';
import { fabricFirewallSelectors, fabricRouteSelectors } from '../../src/control/k8s/firewall-watch.js';
import type { InternalFabric } from '../../src/control/k8s/resources.js';
import { NodeAgent } from '../../src/node/agent.js';
import { parseAddress } from '../../src/packet/addr.js';
import { Router as PolicyRouter } from '../../src/route/policy.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import {
  installRouteConfigurations,
  liqoTableId,
  parseRouteConfiguration,
  type RouteHop,
} from '../../src/rules/routes.js';
import { udpPacket } from '../packet/factory.js';
import { e2eUnavailableReason, Topology, waitFor } from '../util/netns.js';
import { fabricObjects, helmNotrack, selects, type PeeringSide } from '../rules/liqo-peering-objects.js';
import { toHex } from '../util/hex.js';

const reason = e2eUnavailableReason(['ip', 'nft', 'conntrack', 'setpriv'], { nativeAddon: true });
const topo = new Topology('nx');
const NODE_IF = 'liqo.a7c2n9x0qe';
const TUN = 'nxt0';
const SIDE: PeeringSide = {
  cfg: 'cluster-b',
  remoteId: 'cluster-b',
  namespace: 'liqo-tenant-cluster-b',
  mode: 'server',
  remotePod: { real: '10.0.0.0/16', remapped: '10.71.0.0/16' },
  remoteExt: { real: '10.70.0.0/16', remapped: '10.72.0.0/16' },
  nodes: [{ name: 'worker', internalIP: '10.80.0.2', gatewayIf: 'liqo.k3x9q2m7va', pods: ['10.0.1.5'] }],
  mss: 1300, // the Helm clamp as a fixed value: what its default (0, rt mtu) gives over the default tunnel MTU 1340
  localPod: '10.0.0.0/16',
  localExt: '10.70.0.0/16',
  gatewayInternalIP: '10.80.0.1',
  nodeSideIf: NODE_IF,
  ipMappings: [{ name: 'db', real: '192.168.50.2', remapped: '10.70.0.5', node: 'worker', masquerade: true }],
  gatewayPod: { ip: '10.0.1.5', node: 'worker' },
  liqoNamespace: 'liqo',
};

const userFw: KubernetesObject = {
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
                name: 'udp-to-gw',
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
      ],
    },
  },
} as KubernetesObject;
const userRoute = (iif: string): KubernetesObject =>
  ({
    metadata: { name: 'user-mark', namespace: 'liqo', labels: { 'networking.liqo.io/route-category': 'fabric' } },
    spec: {
      table: {
        name: 'user-mark',
        rules: [
          { fwmark: 7, iif, routes: [{ dst: '0.0.0.0/0', gw: '10.80.0.1', dev: NODE_IF }] },
          { fwmark: 9, dst: '192.168.50.0/24', routes: [{ dst: '192.168.50.0/24', dev: NODE_IF, scope: 'link' }] },
        ],
      },
    },
  }) as KubernetesObject;

function objects(
  s: PeeringSide,
  extra: { fw?: KubernetesObject[]; rt?: KubernetesObject[] } = {},
): { fw: KubernetesObject[]; rt: KubernetesObject[] } {
  const o = fabricObjects(s);
  return {
    fw: [
      ...(o.firewall.filter((x) =>
        fabricFirewallSelectors('worker').some((sel) => selects(sel, x)),
      ) as KubernetesObject[]),
      ...(extra.fw ?? []),
    ],
    rt: [
      ...(o.routes.filter((x) => fabricRouteSelectors().some((sel) => selects(sel, x))) as KubernetesObject[]),
      ...(extra.rt ?? []),
    ],
  };
}

let node = '';
let pod = '';
let ext = '';
let gw = '';
let agent: NodeAgent | null = null;
let fabric: NodeFabric | null = null;
let rules: RulesAttachment | null = null;
let runtime: Runtime | null = null;
const runDir = mkdtempSync(join(tmpdir(), 'nx-run-'));
const problems: (string | null)[] = [];
const events: string[] = [];

/** What `weft k8s` does on a watch change (k8s-rules.ts onChange): split, attach the TUN part, routes to the kernel. */
async function feed(o: { fw: KubernetesObject[]; rt: KubernetesObject[] }): Promise<void> {
  const errs = rules!.update(fabric!.split(o.fw, o.rt));
  expect(errs).toEqual([]);
  const specs = o.rt.map((x) => parseRouteConfiguration(x)).sort((a, b) => (a.object < b.object ? -1 : 1));
  fabric!.routes(specs);
  await fabric!.settled();
}

const sh = (ns: string, cmd: string[]): string => topo.exec(ns, cmd, { allowFail: true });
/** conntrack entries (one line each) of `args` in the node. */
const ct = (...args: string[]): string[] =>
  sh(node, ['conntrack', '-L', '-o', 'id', ...args])
    .split('\n')
    .filter((l) => /^(icmp|udp|tcp)/.test(l));
const ctId = (line: string | undefined): string => /id=(\d+)/.exec(line ?? '')?.[1] ?? 'none';
const udp = (ns: string, dst: string, port: number): void => {
  sh(ns, ['bash', '-c', `echo weft > /dev/udp/${dst}/${port}`]);
};

function config(): NodeConfig {
  return parseConfig(
    {
      role: 'node',
      cluster: { id: 'a', podCIDRs: ['10.0.0.0/16'] },
      node: {
        name: 'worker',
        underlayAddress: '198.18.9.2',
        tunName: TUN,
        mtu: 1340,
        gateways: [
          {
            name: 'cluster-b',
            vni: 0,
            gatewayUnderlay: '198.18.9.1',
            gatewayInternalAddress: '10.80.0.1',
            localInternalAddress: '10.80.0.2',
            remoteCIDRs: ['10.71.0.0/16', '10.72.0.0/16'],
          },
        ],
      },
    },
    'test',
  ) as NodeConfig;
}

describe.skipIf(reason !== null)(
  `node role: fabric objects in the node's kernel${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    beforeAll(async () => {
      node = topo.addNamespace('-node');
      pod = topo.addNamespace('-pod');
      ext = topo.addNamespace('-ext');
      gw = topo.addNamespace('-gw');
      topo.link(pod, 'p1', '10.0.1.5/24', node, 'p0', '10.0.1.1/24');
      topo.link(ext, 'x1', '192.168.50.2/24', node, 'e0', '192.168.50.1/24');
      topo.link(gw, 'g1', '198.18.9.1/24', node, 'u0', '198.18.9.2/24');
      topo.exec(pod, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
      topo.exec(node, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      // The CNI's masquerade of pod traffic leaving the pod network (kindnet/flannel-like), at srcnat.
      topo.exec(node, ['nft', '-f', '-'], {
        input:
          'table ip nxcni {\n chain post {\n  type nat hook postrouting priority 100; policy accept;\n  ip saddr 10.0.0.0/16 ip daddr != 10.0.0.0/16 masquerade\n }\n}\n',
      });
      agent = await NodeAgent.start(config(), { netns: node });
      // `weft show` of this node (k8s.ts wires the same: setFabric, problems under fabric-kernel).
      runtime = await Runtime.create({
        name: 'nx-show',
        runDir,
        source: 'kubernetes',
        logger: createLogger({ level: 'silent', env: {} }),
        conncheck: false,
      });
      fabric = new NodeFabric(agent, {
        netns: node,
        internalFabrics: () => [{ spec: { interface: { node: { name: NODE_IF } } } } as InternalFabric],
        onProblem: (p) => {
          problems.push(p);
          runtime!.setProblem('fabric-kernel', p);
        },
        onObjectProblem: (obj, m) => events.push(`${obj.kind} ${obj.metadata?.name}: ${m}`),
        onError: (e) => {
          throw e;
        },
      });
      rules = new RulesAttachment({
        peer: 'liqo-tunnel',
        node: NODE_IF,
        host: 'eth0',
        peerAddr: 0,
        nodeAddr: 0,
        hostAddr: 0,
        pathMtu: 1500,
      });
      rules.attachTo(agent);
      runtime.setFabric(() => fabric!.status());
      runtime.setRules(rules);
      // A leftover of a crashed instance: a rule looking up Liqo's table id of cluster-b-node-gw.
      topo.exec(node, ['ip', 'rule', 'add', 'to', '10.71.0.0/16', 'lookup', String(liqoTableId('cluster-b-node-gw'))]);
      await feed(objects(SIDE, { fw: [userFw], rt: [userRoute('nxp0')] }));
    }, 60_000);

    afterAll(async () => {
      await fabric?.stop().catch(() => {});
      await agent?.stop().catch(() => {});
      await runtime?.stop().catch(() => {});
      rmSync(runDir, { recursive: true, force: true });
      await topo.cleanup();
    }, 30_000);

    it("each chain on one path: Liqo's nat tables in the kernel, the node-side-interface-only chain in process", () => {
      const paths = fabric!
        .status()
        .chains.map((c) => `${c.object} ${c.chain}: ${c.path}${c.kernelTable ? ` ${c.kernelTable}` : ''}`);
      expect(paths).toEqual([
        'liqo-tenant-cluster-b/cluster-b-masquerade-bypass pre-postrouting: kernel cluster-b-masquerade-bypass',
        'liqo-tenant-cluster-b/db-remap-ipmapping-fabric prerouting: kernel db-remap-ipmapping-fabric-liqo-tenant-cluster-b',
        'liqo-tenant-cluster-b/db-remap-ipmapping-fabric postrouting: kernel db-remap-ipmapping-fabric-liqo-tenant-cluster-b',
        'liqo/user-count to-gw: tun',
        'liqo/worker-gw-masquerade-bypass pre-postrouting: kernel worker-gw-masquerade-bypass',
      ]);
      const tables = sh(node, ['nft', 'list', 'tables']).trim().split('\n').sort();
      expect(tables).toEqual([
        'table ip cluster-b-masquerade-bypass',
        'table ip db-remap-ipmapping-fabric-liqo-tenant-cluster-b',
        'table ip nxcni',
        'table ip worker-gw-masquerade-bypass',
      ]);
      expect([...rules!.tables().keys()]).toEqual(['liqo/user-count']);
      expect(problems.at(-1)).toBeNull();
      const shown = formatStatus(runtime!.status(), Date.now());
      expect(shown).toContain(
        '  chain liqo-tenant-cluster-b/cluster-b-masquerade-bypass cluster-b-masquerade-bypass/pre-postrouting: node kernel (nft table ip cluster-b-masquerade-bypass)',
      );
      expect(shown).toContain('  chain liqo/user-count user-count/to-gw: in process (TUN traffic only)');
      expect(shown).toContain(
        `  routes liqo-tenant-cluster-b/cluster-b-node-gw: node kernel, table cluster-b-node-gw (id ${liqoTableId('cluster-b-node-gw')}), 3 rules, 3 routes`,
      );
    });

    it("masquerade bypass: a pod's traffic to a remote pod keeps its source, the node's own leaves as the unknown-source IP", async () => {
      const before = agent!.stats().tun.rxPackets;
      sh(pod, ['ping', '-n', '-c', '1', '-W', '1', '10.71.0.7']);
      sh(node, ['ping', '-n', '-c', '1', '-W', '1', '10.71.0.8']);
      udp(pod, '10.71.0.9', 4000);
      // Reply tuple's destination = the source the packet left with.
      expect(ct('-p', 'icmp', '-d', '10.71.0.7')[0]).toMatch(/src=10\.71\.0\.7 dst=10\.0\.1\.5 /);
      expect(ct('-p', 'icmp', '-d', '10.71.0.8')[0]).toMatch(/src=10\.71\.0\.8 dst=10\.70\.0\.0 /);
      // They entered the agent through its TUN; the UDP one was counted in process (the TUN-only chain), once.
      // (The agent runs on this event loop: it reads its TUN once the synchronous commands above are done.)
      await waitFor('the agent reading them from its TUN', () => agent!.stats().tun.rxPackets - before >= 3, 5000);
      expect(rules!.counterSamples()).toContainEqual(
        expect.objectContaining({ object: 'liqo/user-count', rule: 'udp-to-gw', packets: 1 }),
      );
    });

    it("gateway masquerade bypass: the gateway pod's Geneve datagrams keep its address, its other traffic is masqueraded", () => {
      udp(pod, '192.168.50.2', 6091);
      udp(pod, '192.168.50.2', 6092);
      expect(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6091')[0]).toMatch(
        /dport=6091 .*src=192\.168\.50\.2 dst=10\.0\.1\.5 /,
      );
      expect(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6092')[0]).toMatch(
        /dport=6092 .*src=192\.168\.50\.2 dst=192\.168\.50\.1 /,
      );
    });

    it("ip-mapping masquerade: a remote source arriving through the TUN and forwarded to the real address leaves with the node's address", async () => {
      // The gateway has already translated 10.70.0.5 → 192.168.50.2 (remap-ipmapping-gw); the node forwards it.
      const inner = udpPacket({ src: '10.71.3.3', dst: '192.168.50.2', sport: 5555, dport: 7777 });
      const geneve = `00000800${'000000'}00${toHex(inner.buf, inner.off, inner.len)}`;
      topo.exec(gw, [
        'node',
        '-e',
        `const s=require('dgram').createSocket('udp4');s.bind(0,'198.18.9.1',()=>s.send(Buffer.from('${geneve}','hex'),6091,'198.18.9.2',()=>s.close()))`,
      ]);
      // The agent decapsulates it on this event loop and writes it to its TUN; the kernel forwards it.
      const line = await waitFor(
        'the forwarded flow in conntrack',
        () => ct('-p', 'udp', '--orig-src', '10.71.3.3')[0],
        5000,
      );
      expect(line).toMatch(
        /src=10\.71\.3\.3 dst=192\.168\.50\.2 sport=5555 dport=7777 .*src=192\.168\.50\.2 dst=192\.168\.50\.1 /,
      );
      // And a local pod reaching the mapped address by its remapped one (prerouting dnat) gets answered.
      expect(sh(pod, ['ping', '-n', '-c', '1', '-W', '2', '10.70.0.5'])).toMatch(/1 received/);
    });

    it('ip rule / ip route get with marks and input interfaces answer as the RouteConfigurations demand', () => {
      const specs = objects(SIDE, { rt: [userRoute(NODE_IF)] })
        .rt.map((x) => parseRouteConfiguration(x))
        .sort((a, b) => (a.object < b.object ? -1 : 1));
      const ids = specs.map((s) => s.tableId);
      expect(ids).toEqual([liqoTableId('cluster-b-node-gw'), liqoTableId('user-mark')]);
      const ruleShow = sh(node, ['ip', 'rule', 'show']);
      // Each rule once (the leftover was replaced, not duplicated).
      expect(ruleShow.split('\n').filter((l) => l.includes(`to 10.71.0.0/16 lookup ${ids[0]}`))).toHaveLength(1);
      for (const l of [
        `to 10.80.0.1 lookup ${ids[0]}`,
        `to 10.71.0.0/16 lookup ${ids[0]}`,
        `to 10.72.0.0/16 lookup ${ids[0]}`,
        `fwmark 0x7 iif nxp0 lookup ${ids[1]}`,
        `to 192.168.50.0/24 fwmark 0x9 lookup ${ids[1]}`,
      ])
        expect(ruleShow).toContain(l);
      // Weft's policy router over the same objects (iif nxp0 = 1, the TUN = 2; the node-side interface is the TUN).
      const weft = new PolicyRouter<RouteHop>();
      const IIFS = ['nxe0', 'nxp0', TUN];
      const spec2 = specs.map((s) => (s.table === 'user-mark' ? parseRouteConfiguration(userRoute('nxp0')) : s));
      installRouteConfigurations(weft, spec2, (n) => IIFS.indexOf(n === NODE_IF ? TUN : n));
      let compared = 0;
      let ours = 0;
      for (const dst of ['10.71.0.7', '10.72.1.1', '10.80.0.1', '192.168.50.2', '8.8.8.8']) {
        for (const [iif, src] of [
          ['nxe0', '192.168.50.2'],
          ['nxp0', '10.0.1.5'],
        ] as const) {
          for (const mark of [0, 7, 9]) {
            const out = sh(node, ['ip', '-j', 'route', 'get', dst, 'from', src, 'iif', iif, 'mark', String(mark)]);
            const k =
              out.trim() === ''
                ? null
                : ((JSON.parse(out) as { dev?: string; gateway?: string; table?: string }[])[0] ?? null);
            const b = new Uint8Array(20);
            b[0] = 0x45;
            b.set(parseAddress(src), 12);
            b.set(parseAddress(dst), 16);
            const hop = weft.route(b, 0, IIFS.indexOf(iif), mark);
            const what = `${dst} from ${src} iif ${iif} mark ${mark}: kernel ${out.trim()}`;
            if (hop === null || hop === undefined) {
              // None of the objects' rules: the kernel answers from main (the agent's routes, connected networks).
              expect(k?.table ?? 'main', what).toBe('main');
            } else {
              ours++;
              expect(k?.dev, what).toBe(hop.dev === undefined ? TUN : hop.dev === NODE_IF ? TUN : hop.dev);
              expect(k?.gateway, what).toBe(hop.gw);
              expect(k?.table, what).toBe(
                String(ids[spec2.findIndex((s) => s.rules.some((r) => r.routes.some((x) => x.hop === hop)))]),
              );
            }
            compared++;
          }
        }
      }
      expect(compared).toBe(30);
      expect(ours).toBeGreaterThan(10);
    });

    it("a change and a delete apply live; the other objects' flows keep their conntrack entries; a refused route is reported, the rest stays", async () => {
      const before = {
        gwBypass: ctId(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6091')[0]),
        mapping: ctId(ct('-p', 'udp', '--orig-src', '10.71.3.3')[0]),
      };
      expect(before.gwBypass).not.toBe('none');
      expect(before.mapping).not.toBe('none');
      // Change: the peer's external CIDR is now remapped to 10.73.0.0/16 (masquerade-bypass and node-gw change).
      const changed = { ...SIDE, remoteExt: { real: '10.70.0.0/16', remapped: '10.73.0.0/16' } };
      await feed(objects(changed, { fw: [userFw], rt: [userRoute('nxp0')] }));
      expect(sh(node, ['nft', 'list', 'table', 'ip', 'cluster-b-masquerade-bypass'])).toContain(
        'ip daddr 10.73.0.0/16',
      );
      expect(sh(node, ['nft', 'list', 'table', 'ip', 'cluster-b-masquerade-bypass'])).not.toContain('10.72.0.0/16');
      const id = liqoTableId('cluster-b-node-gw');
      expect(sh(node, ['ip', 'rule', 'show'])).toContain(`to 10.73.0.0/16 lookup ${id}`);
      expect(sh(node, ['ip', 'rule', 'show'])).not.toContain('10.72.0.0/16');
      expect(sh(node, ['ip', 'route', 'show', 'table', String(id)])).not.toContain('10.72.0.0/16');
      expect(sh(node, ['ip', '-o', 'route', 'get', '10.73.1.1', 'from', '10.0.1.5', 'iif', 'nxp0'])).toMatch(
        new RegExp(`via 10\\.80\\.0\\.1 dev ${TUN} table ${id}`),
      );
      // Delete: the gateway pod left this node (its object goes), the user's route object too.
      await feed(objects({ ...changed, gatewayPod: undefined }, { fw: [userFw] }));
      expect(sh(node, ['nft', 'list', 'tables'])).not.toContain('worker-gw-masquerade-bypass');
      expect(sh(node, ['ip', 'rule', 'show'])).not.toContain(`lookup ${liqoTableId('user-mark')}`);
      expect(ctId(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6091')[0])).toBe(before.gwBypass);
      expect(ctId(ct('-p', 'udp', '--orig-src', '10.71.3.3')[0])).toBe(before.mapping);
      expect(problems.at(-1)).toBeNull();
      // A route the kernel refuses (no such device): reported, the object's previous version and the others stay.
      const bad: KubernetesObject = {
        metadata: { name: 'user-bad', namespace: 'liqo', labels: { 'networking.liqo.io/route-category': 'fabric' } },
        spec: {
          table: {
            name: 'user-bad',
            rules: [{ dst: '10.99.0.0/16', routes: [{ dst: '10.99.0.0/16', dev: 'nxnothere' }] }],
          },
        },
      } as KubernetesObject;
      const o = objects({ ...changed, gatewayPod: undefined }, { fw: [userFw], rt: [bad] });
      await feed(o);
      expect(problems.at(-1)).toMatch(
        /RouteConfiguration liqo\/user-bad rule #0 route #0: dev: the node's kernel refused it: .*Cannot find device.*fix: the interface does not exist/,
      );
      expect(events.at(-1)).toMatch(/^RouteConfiguration user-bad: /);
      expect(formatStatus(runtime!.status(), Date.now())).toMatch(
        /error \(fabric-kernel.*RouteConfiguration liqo\/user-bad/,
      );
      expect(sh(node, ['ip', 'rule', 'show'])).not.toContain(`lookup ${liqoTableId('user-bad')}`);
      expect(sh(node, ['ip', 'rule', 'show'])).toContain(`to 10.73.0.0/16 lookup ${id}`);
      // Without Liqo's masquerade bypass in the kernel, the CNI masquerades a pod's flow to a remote pod.
      const last = {
        fw: o.fw.filter((x) => x.metadata?.name !== 'cluster-b-masquerade-bypass'),
        rt: o.rt.filter((x) => x !== bad),
      };
      await feed(last);
      expect(sh(node, ['nft', 'list', 'tables'])).not.toContain('cluster-b-masquerade-bypass');
      sh(pod, ['ping', '-n', '-c', '1', '-W', '1', '10.71.0.20']);
      expect(ct('-p', 'icmp', '-d', '10.71.0.20')[0]).toMatch(/src=10\.71\.0\.20 dst=10\.80\.0\.2 /);
      expect(ctId(ct('-p', 'udp', '--orig-src', '10.71.3.3')[0])).toBe(before.mapping);
      // The Helm chart's fabric-notrack (UDP 6091): in the kernel, and — as Liqo does — the tracked
      // 6091 flow it exempts is deleted, the others keep their entries; new 6091 datagrams go untracked.
      await feed({ fw: [...last.fw, helmNotrack('fabric') as KubernetesObject], rt: last.rt });
      expect(sh(node, ['nft', 'list', 'table', 'ip', 'liqo-notrack-geneve'])).toMatch(
        /udp dport 6091 counter packets \d+ bytes \d+ notrack/,
      );
      expect(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6091')).toEqual([]);
      expect(ctId(ct('-p', 'udp', '--orig-src', '10.71.3.3')[0])).toBe(before.mapping);
      udp(pod, '192.168.50.2', 6091);
      expect(ct('-p', 'udp', '--orig-dst', '192.168.50.2', '--dport', '6091')).toEqual([]);
      expect(problems.at(-1)).toBeNull();
    });

    it('a refusal by the kernel itself (nft without CAP_NET_ADMIN, a container without NET_ADMIN): the object and the fix named, the tables in force stay, a later success clears it', async () => {
      // A PATH entry whose `nft` is the real one with CAP_NET_ADMIN dropped: runNft (`ip netns exec … nft`) finds it first.
      const shim = mkdtempSync(join(tmpdir(), 'nx-shim-'));
      const realNft = execFileSync('sh', ['-c', 'command -v nft'], { encoding: 'utf8' }).trim();
      writeFileSync(
        join(shim, 'nft'),
        `#!/bin/sh\nexec setpriv --bounding-set=-net_admin --inh-caps=-net_admin ${realNft} "$@"\n`,
        { mode: 0o755 },
      );
      const tablesBefore = sh(node, ['nft', 'list', 'tables']);
      expect(tablesBefore).not.toContain('cluster-b-masquerade-bypass');
      const want = objects(
        { ...SIDE, remoteExt: { real: '10.70.0.0/16', remapped: '10.73.0.0/16' }, gatewayPod: undefined },
        { fw: [userFw, helmNotrack('fabric') as KubernetesObject] },
      );
      const path = process.env['PATH'];
      process.env['PATH'] = `${shim}:${path}`;
      try {
        await feed(want);
      } finally {
        process.env['PATH'] = path;
        rmSync(shim, { recursive: true, force: true });
      }
      expect(problems.at(-1)).toMatch(
        /cluster-b-masquerade-bypass[^]*Operation not permitted[^]*fix: needs CAP_NET_ADMIN/,
      );
      expect(events.at(-1)).toMatch(/^FirewallConfiguration cluster-b-masquerade-bypass: /);
      expect(sh(node, ['nft', 'list', 'tables'])).toBe(tablesBefore);
      // With the capability back, the same objects apply and the problem clears.
      await feed(want);
      expect(problems.at(-1)).toBeNull();
      expect(sh(node, ['nft', 'list', 'table', 'ip', 'cluster-b-masquerade-bypass'])).toContain(
        'ip daddr 10.73.0.0/16',
      );
    });

    it('stop removes every table, rule and route it installed, and only those', async () => {
      expect(sh(node, ['nft', 'list', 'tables'])).toContain('liqo-notrack-geneve');
      await fabric!.stop();
      expect(sh(node, ['nft', 'list', 'tables']).trim()).toBe('table ip nxcni');
      expect(
        sh(node, ['ip', 'rule', 'show'])
          .trim()
          .split('\n')
          .map((l) => l.split(':')[0]),
      ).toEqual(['0', '32766', '32767']);
      expect(sh(node, ['ip', 'route', 'show', 'table', String(liqoTableId('cluster-b-node-gw'))]).trim()).toBe('');
      // The agent's own routes are the agent's (its stop removes them).
      expect(sh(node, ['ip', 'route', 'show', 'dev', TUN])).toContain('10.71.0.0/16');
    });
  },
);
