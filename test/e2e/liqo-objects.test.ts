/**
 * Issue 11, end to end in namespaces: two clusters with the SAME pod CIDR (10.0.0.0/16) and
 * external CIDR (10.70.0.0/16) — the demo's topology (src/demo: gateways joined by WireGuard
 * over a veth WAN, nodes joined to their gateway by Geneve, pods behind their nodes) — whose
 * gateways and node agents run in this process in Liqo mode, driven ONLY by the
 * FirewallConfigurations and RouteConfigurations Liqo's controllers would create for the
 * peering (test/rules/liqo-peering-objects.ts, selected with Liqo's label selectors): the
 * gateways' built-in remap/masquerade NAT is off (Router.setSteering), every translation comes
 * from the objects' chains, every forwarding decision from the RouteConfigurations, Geneve runs
 * in L2 as Liqo's fabric creates it.
 *
 * Shown: pod ⇄ pod both ways (ping, HTTP with the source each side sees); a node's host network
 * → a remote pod and the reply back at the node (the node's masquerade-bypass SNAT, the
 * gateway's ct mark → fwmark route); an IP-mapped non-pod address (192.168.61.10 on node A1,
 * exposed as 10.70.0.5); a user FirewallConfiguration dropping TCP 8081 (8081 fails, 8080
 * works); the Helm MSS clamp (1200, not the tunnel's 1300) on SYNs; tshark on every hop: no bad
 * checksum.
 * Namespaces `lw-…` (prefix lw), created and removed by name; processes stopped by PID.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fabricFirewallSelectors,
  gatewayFirewallSelectors,
  gatewayRouteSelectors,
} from '../../src/control/k8s/firewall-watch.js';
import { parseConfig, type GatewayConfig, type NodeConfig } from '../../src/control/config.js';
import { httpCheck, ping } from '../../src/demo/checks.js';
import { WaitAbort, runCommand, startDaemon, waitFor, type Daemon } from '../../src/demo/host.js';
import { generateDemoKeys } from '../../src/demo/keys.js';
import {
  buildPlan,
  findPod,
  gatewayConfig,
  nodeConfig,
  otherCluster,
  planNamespaces,
  remotePodAddress,
  type DemoCluster,
} from '../../src/demo/plan.js';
import { buildTopology, destroyTopology } from '../../src/demo/topology.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { NodeAgent } from '../../src/node/agent.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { buildSteering, parseRouteObjects } from '../../src/rules/steering.js';
import {
  DEFAULT_IF,
  TUNNEL_IF,
  fabricObjects,
  gatewayObjects,
  selects,
  type PeeringSide,
} from '../rules/liqo-peering-objects.js';
import { needs } from '../util/requirements.js';
import { expectCleanCaptures, liqoCapturePoints } from './fabric-captures.js';
import { txChecksumOff } from './tx-checksum.js';

const PYTHON = '/usr/bin/python3';
const plan = buildPlan('lw');
const reason = needs({
  root: true,
  commands: ['ip', 'ping', 'timeout', 'tshark', 'tcpdump'],
  nativeAddon: true,
  other: [existsSync(PYTHON) ? null : `${PYTHON} not installed: apt-get install python3`],
});
/** networking.gateway.mssclamp.value; not Liqo's default (0: the route's MTU): a fixed value below the tunnel's shows the clamp. */
const MSS = 1200;
const DROP_PORT = 8081;
const MAPPED = { name: 'db', real: '192.168.61.10', remapped: '10.70.0.5' };

/** Liqo's view of one cluster's side of the peering (what its Configuration and InternalNodes say). */
function sideOf(c: DemoCluster): PeeringSide {
  const o = otherCluster(plan, c);
  return {
    cfg: o.id,
    remoteId: o.id,
    namespace: `liqo-tenant-${o.id}`,
    // A knows B's endpoint: A is the WireGuard client (Liqo's GatewayClient), B the server.
    mode: c.key === 'a' ? 'client' : 'server',
    remotePod: { real: o.podCIDR, remapped: c.remappedPeerPodCIDR },
    remoteExt: { real: o.externalCIDR, remapped: c.remappedPeerExternalCIDR },
    nodes: c.nodes.map((n, i) => ({
      name: n.name,
      internalIP: n.internal,
      gatewayIf: `liqo.${c.key}gwside0${i}`,
      pods: n.pods.map((p) => p.ip),
    })),
    mss: MSS,
    localPod: c.podCIDR,
    localExt: c.externalCIDR,
    gatewayInternalIP: c.gatewayInternal,
    nodeSideIf: `liqo.${c.key}nodeside`,
    ...(c.key === 'a' ? { dropPort: DROP_PORT, ipMappings: [{ ...MAPPED, node: c.nodes[0]!.name }] } : {}),
  };
}

interface Capture {
  name: string;
  file: string;
  daemon: Daemon;
}

describe.skipIf(reason !== null)(
  'two clusters with conflicting pod CIDRs, driven only by Liqo FirewallConfigurations and RouteConfigurations',
  () => {
    const A1 = findPod(plan, 'A1');
    const A2 = findPod(plan, 'A2');
    const B3 = findPod(plan, 'B3');
    const B4 = findPod(plan, 'B4');
    const b3AtA = remotePodAddress(plan, plan.a, B3);
    const a1AtB = remotePodAddress(plan, plan.b, A1);
    const a2AtB = remotePodAddress(plan, plan.b, A2);
    let dir = '';
    const gateways: Gateway[] = [];
    const agents: NodeAgent[] = [];
    const captures: Capture[] = [];
    const problems: string[] = [];

    beforeAll(async () => {
      await destroyTopology(plan);
      dir = mkdtempSync(join(tmpdir(), 'weft-e2e-lqwire-'));
      await buildTopology(plan);
      for (const ns of planNamespaces(plan)) await txChecksumOff(ns);
      // The IP-mapped non-pod address: hosted on node A1.
      await runCommand(['ip', '-n', plan.a.nodes[0]!.ns, 'addr', 'add', `${MAPPED.real}/32`, 'dev', 'lo']);

      for (const [name, ns, ifName] of liqoCapturePoints(plan)) {
        const file = join(dir, `${name}.pcap`);
        captures.push({
          name,
          file,
          daemon: startDaemon(
            ns,
            `tcpdump ${name}`,
            ['tcpdump', '-n', '-U', '-s', '0', '-Z', 'root', '-i', ifName, '-w', file],
            { lifetimeS: 200 },
          ),
        });
      }
      for (const c of captures) {
        await waitFor(
          `tcpdump on ${c.name}`,
          () => {
            if (c.daemon.exitStatus !== null) throw new WaitAbort(`tcpdump ${c.name} exited: ${c.daemon.output()}`);
            return c.daemon.output().includes('listening on');
          },
          10_000,
          50,
        );
      }

      const keys = generateDemoKeys();
      for (const c of [plan.a, plan.b]) {
        const side = sideOf(c);
        // Liqo's fabric creates Geneve interfaces as L2 (Ethernet inside, ARP): both ends L2.
        const gcfg = parseConfig(gatewayConfig(plan, c, keys, { keyFile: false, logLevel: 'silent' })) as GatewayConfig;
        for (const t of gcfg.geneve.tunnels) t.mode = 'l2';
        const gw = await Gateway.start(gcfg, { netns: c.gatewayNs });
        gateways.push(gw);
        // As `weft k8s` in Liqo mode: the objects' rules replace the configuration's at the hooks.
        gw.detachConfigRules();
        const objs = gatewayObjects(side);
        const fw = objs.firewall.filter((o) => gatewayFirewallSelectors([side.remoteId]).some((s) => selects(s, o)));
        const rules = new RulesAttachment({
          peer: TUNNEL_IF,
          node: 'liqo.geneve',
          host: DEFAULT_IF,
          peerAddr: 0,
          nodeAddr: 0,
          hostAddr: 0,
          pathMtu: plan.mtu,
        });
        rules.attachTo(gw.router);
        problems.push(...rules.update(fw).map((e) => e.message));
        const devOf = new Map(side.nodes.map((n) => [n.name, n.gatewayIf]));
        // The gateway pod runs on the first node: it selects that node's fabric-node objects.
        const rt = objs.routes.filter((o) =>
          gatewayRouteSelectors([side.remoteId], c.nodes[0]!.name).some((s) => selects(s, o)),
        );
        const { specs, errors } = parseRouteObjects(rt, new Map());
        problems.push(...errors.map((e) => e.message));
        const peerAddr = gw.tunnelAddresses().peers[0]!.remote;
        gw.router.setSteering(
          buildSteering(
            {
              devices: { tunnel: TUNNEL_IF, host: DEFAULT_IF },
              nodes: gw.nodeTunnels().map((t) => ({ tunnel: t.tunnel, dev: devOf.get(t.nodeName)! })),
              isPeerAddress: (g) => g === peerAddr,
            },
            [...specs.values()],
          ),
        );
        for (const n of c.nodes) {
          const ncfg = parseConfig(nodeConfig(plan, c, n, { logLevel: 'silent' })) as NodeConfig;
          for (const g of ncfg.node.gateways) g.mode = 'l2';
          const agent = await NodeAgent.start(ncfg, { netns: n.ns });
          agents.push(agent);
          const nr = new RulesAttachment({
            peer: TUNNEL_IF,
            node: side.nodeSideIf,
            host: DEFAULT_IF,
            peerAddr: 0,
            nodeAddr: 0,
            hostAddr: 0,
            pathMtu: plan.mtu,
          });
          nr.attachTo(agent);
          problems.push(
            ...nr
              .update(
                fabricObjects(side).firewall.filter((o) => fabricFirewallSelectors(n.name).some((s) => selects(s, o))),
              )
              .map((e) => e.message),
          );
        }
      }
      // The first packet starts the WireGuard handshake.
      await waitFor('first reply A1 → B3', async () => (await ping(A1.ns, b3AtA, 1, 0.2)).received === 1, 20_000, 200);
    }, 120_000);

    afterAll(async () => {
      for (const c of captures) await c.daemon.stop();
      for (const a of agents) await a.stop().catch(() => {});
      for (const g of gateways) await g.stop().catch(() => {});
      await destroyTopology(plan);
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it('every object is accepted', () => {
      expect(problems).toEqual([]);
    });

    it('pod ⇄ pod both ways: ping A1 → B3 and B4 → A2; HTTP B3 ← A1 sees A1 as B remaps it', async () => {
      expect((await ping(A1.ns, b3AtA, 5, 0.1)).received).toBe(5);
      expect((await ping(B4.ns, a2AtB, 5, 0.1)).received).toBe(5);
      const h = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, 8080);
      expect(h.error).toBeUndefined();
      expect(h.seenSource).toBe(a1AtB);
      const back = await httpCheck(A2.ns, A2.ip, B4.ns, a2AtB, 8080);
      expect(back.seenSource).toBe(remotePodAddress(plan, plan.a, B4));
    }, 60_000);

    it(`the user FirewallConfiguration drops TCP ${DROP_PORT} towards b; ${DROP_PORT - 1} passes`, async () => {
      const dropped = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT, 2000);
      expect(dropped.ok).toBe(false);
      const passed = await httpCheck(B3.ns, B3.ip, A1.ns, b3AtA, DROP_PORT - 1, 5000);
      expect(passed.status).toBe(200);
    }, 60_000);

    it("host network: node A1 reaches B3, B3 sees A's unknown-source IP as B remaps it, the reply reaches the node", async () => {
      const node = plan.a.nodes[0]!;
      const h = await httpCheck(B3.ns, B3.ip, node.ns, b3AtA, 8082);
      expect(h.status).toBe(200);
      expect(h.seenSource).toBe('10.72.0.0'); // 10.70.0.0 (GetUnknownSourceIP) in B's 10.72.0.0/16 view
    }, 60_000);

    it('an IP-mapped non-pod address: B4 reaches 192.168.61.10 on node A1 as 10.72.0.5', async () => {
      const h = await httpCheck(plan.a.nodes[0]!.ns, MAPPED.real, B4.ns, '10.72.0.5', 8083);
      expect(h.status).toBe(200);
      expect(h.seenSource).toBe(remotePodAddress(plan, plan.a, B4));
    }, 60_000);

    it(`tshark on every hop: no bad checksum; SYNs towards the tunnel clamped to ${MSS}`, async () => {
      for (const c of captures) await c.daemon.stop();
      await expectCleanCaptures(captures, { wireguardPort: 51840, mss: MSS, a1AtB, b3AtA });
      // Nothing went through the gateways' peer table (YAML mode's routing and MTU): Liqo mode's
      // policy routes choose the lane.
      for (const g of gateways) expect(g.peerTable.stats().forwarded).toBe(0);
    }, 120_000);
  },
);
