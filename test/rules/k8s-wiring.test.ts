/**
 * FirewallConfigurations from the (fake) API server, selected with Liqo's gateway label sets,
 * compiled and attached to a router's hook points; a bad edit keeps the previous rules.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FIREWALL_CONFIGURATIONS,
  GatewayRulesWatcher,
  ROUTE_CONFIGURATIONS,
  fabricFirewallSelectors,
  fabricRouteSelectors,
} from '../../src/control/k8s/firewall-watch.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import {
  HOOK_COUNT,
  HOOK_FORWARD,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  PacketMeta,
  SOURCE_NODE,
  SOURCE_PEER,
  VERDICT_ACCEPT,
  type PacketHook,
} from '../../src/router/hooks.js';
import { startGatewayRules } from '../../src/daemon/k8s-rules.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { EventRecorder } from '../../src/control/k8s/events.js';
import type { K8sObject } from '../../src/control/k8s/resources.js';
import { LANE_PEER, type Steering } from '../../src/router/steer.js';
import { ipToNumber } from '../../src/rules/model.js';
import { until } from '../util/wait.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import * as fx from './fixtures.js';

const AV = 'networking.liqo.io/v1beta1';
const DEV = {
  peer: fx.TUNNEL,
  node: fx.NODE_IF,
  host: fx.DEFAULT_IF,
  peerAddr: ipToNumber('192.0.2.1')!,
  nodeAddr: ipToNumber('198.51.100.1')!,
  hostAddr: 0,
  pathMtu: 1500,
};

class Hooks {
  readonly at: PacketHook[][] = Array.from({ length: HOOK_COUNT }, () => []);
  attach(h: number, s: PacketHook): void {
    this.at[h]!.push(s);
  }
  detach(h: number, s: PacketHook): boolean {
    const i = this.at[h]!.indexOf(s);
    if (i >= 0) this.at[h]!.splice(i, 1);
    return i >= 0;
  }
}

/** A UDP packet from a node to `dst`, through prerouting..postrouting of the attached stages; returns its destination. */
function send(h: Hooks, src: string, dst: string, fromPeer = false): string {
  const b = new Uint8Array(28);
  b.set([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
  b.set(src.split('.').map(Number), 12);
  b.set(dst.split('.').map(Number), 16);
  b.set([0x30, 0x39, 0, 53, 0, 8, 0, 0], 20);
  const v = new IpView();
  expect(parseIp(b, 0, b.length, v)).toBe(IP_OK);
  const m = new PacketMeta();
  m.source = fromPeer ? SOURCE_PEER : SOURCE_NODE;
  // A forwarded packet's hooks (INPUT/OUTPUT are other paths: running them too would make it a
  // second packet for conntrack).
  for (const hook of [HOOK_PREROUTING, HOOK_FORWARD, HOOK_POSTROUTING]) {
    m.output = hook === HOOK_PREROUTING ? OUTPUT_NONE : OUTPUT_NODE;
    for (const s of h.at[hook]!) expect(s.process(b, v, m, 0)).toBe(VERDICT_ACCEPT);
  }
  return `${[...b.subarray(12, 16)].join('.')}>${[...b.subarray(16, 20)].join('.')}`;
}

describe('gateway rules from Kubernetes', () => {
  let server: FakeApiServer;
  beforeAll(async () => {
    server = await FakeApiServer.start();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('selects with Liqo gateway label sets, attaches, keeps the previous rules on a bad edit', async () => {
    const put = (o: unknown): void => {
      server.put(AV, FIREWALL_CONFIGURATIONS.plural, o as Record<string, unknown>);
    };
    put(fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16'));
    put(fx.mssClamp('1360'));
    put(fx.notrack(6091));
    put(fx.ipMappingGw('rlx-db', '192.168.7.10', '10.73.0.5'));
    put(fx.masqueradeBypass('rlx-peer', '10.112.0.0/16', '10.70.0.0/16', '10.74.0.0/16', '10.80.0.1')); // fabric: not the gateway's
    const other = fx.remapCidr('externalcidr', '10.96.0.0/12', '10.160.0.0/12') as {
      metadata: { name: string; labels: Record<string, string> };
    };
    other.metadata.name = 'other-peer-remap-externalcidr';
    other.metadata.labels['networking.liqo.io/firewall-unique'] = 'other-peer'; // another peer's gateway
    put(other);
    server.put(AV, ROUTE_CONFIGURATIONS.plural, {
      metadata: {
        name: 'rlx-peer-gw-ext',
        namespace: fx.NS,
        labels: { 'networking.liqo.io/route-category': 'gateway', 'networking.liqo.io/route-unique': 'rlx-peer' },
      },
      spec: { table: { name: 'rlx-peer-gw-ext', rules: [] } },
    });
    server.put(AV, ROUTE_CONFIGURATIONS.plural, {
      metadata: {
        name: 'n2-node',
        namespace: fx.NS,
        labels: {
          'networking.liqo.io/route-category': 'gateway',
          'networking.liqo.io/route-subcategory': 'fabric-node',
          'networking.liqo.io/route-unique': 'n2',
        },
      },
      spec: { table: { name: 'n2', rules: [] } },
    });

    const hooks = new Hooks();
    const rules = new RulesAttachment(DEV);
    rules.attachTo(hooks);
    let fw: KubernetesObject[] = [];
    let rt: KubernetesObject[] = [];
    let errors: string[] = [];
    let changes = 0;
    const w = new GatewayRulesWatcher({
      kubeConfig: server.kubeConfig(),
      remoteClusterIds: ['rlx-peer'],
      nodeName: 'n1',
      debounceMs: 20,
      onChange: (f, r) => {
        fw = f;
        rt = r;
        errors = rules.update(f).map((e) => e.message);
        changes++;
      },
    });
    await w.start();
    try {
      expect(fw.map((o) => o.metadata!.name)).toEqual([
        'gw-mss-clamping',
        'gw-notrack',
        'rlx-db-remap-ipmapping-gw',
        'rlx-peer-remap-podcidr',
      ]);
      expect(rt.map((o) => o.metadata!.name)).toEqual(['rlx-peer-gw-ext']);
      expect(errors).toEqual([]);
      expect(send(hooks, '10.112.0.1', '10.70.3.9')).toBe('10.112.0.1>10.243.3.9');

      // A bad edit: reported, the previous version of that object stays in force.
      const bad = fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16') as { spec: { table: { family: string } } };
      bad.spec.table.family = 'INET';
      const before = changes;
      put(bad);
      await until(() => changes > before, 'the bad edit');
      expect(errors.length).toBe(1);
      expect(errors[0]).toContain(`${fx.NS}/rlx-peer-remap-podcidr`);
      expect(errors[0]).toContain('spec.table.family');
      expect(send(hooks, '10.112.0.1', '10.70.3.9')).toBe('10.112.0.1>10.243.3.9');

      // Deleted: the rules go.
      const n = changes;
      server.remove(AV, FIREWALL_CONFIGURATIONS.plural, fx.NS, 'rlx-peer-remap-podcidr');
      await until(() => changes > n && fw.length === 3, 'the deletion');
      expect(send(hooks, '10.112.0.1', '10.70.3.9')).toBe('10.112.0.1>10.70.3.9');
      rules.detachFrom(hooks);
      expect(hooks.at.every((l) => l.length === 0)).toBe(true);
    } finally {
      await w.stop();
    }
  });

  it('weft k8s --liqo-firewall (Liqo mode): every chain attached, RouteConfigurations steer, a bad object named in a problem and an Event', async () => {
    const ns = 'liqo-tenant-rlx2';
    const put = (o: Record<string, unknown>, plural = FIREWALL_CONFIGURATIONS.plural): void => {
      const c = structuredClone(o) as { metadata: { namespace: string } };
      c.metadata.namespace = ns;
      server.put(AV, plural, c as unknown as Record<string, unknown>);
    };
    put(fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16') as Record<string, unknown>);
    const drop = fx.notrack(6091) as {
      metadata: { name: string };
      spec: { table: { name: string; chains: { rules: { filterRules: { action: string; match: unknown[] }[] } }[] } };
    };
    drop.metadata.name = 'rlx-drop';
    drop.spec.table.name = 'rlx-drop';
    drop.spec.table.chains[0]!.rules.filterRules[0]!.action = 'drop';
    put(drop as unknown as Record<string, unknown>);
    const gwExt = {
      metadata: {
        name: 'rlx-peer-gw-ext',
        namespace: ns,
        labels: { 'networking.liqo.io/route-category': 'gateway', 'networking.liqo.io/route-unique': 'rlx-peer' },
      },
      spec: {
        table: {
          name: 'rlx-peer',
          rules: [{ iif: fx.NODE_IF, dst: '10.243.0.0/16', routes: [{ dst: '10.243.0.0/16', gw: '169.254.18.2' }] }],
        },
      },
    };
    put(gwExt, ROUTE_CONFIGURATIONS.plural);
    const hooks = new Hooks();
    const problems: (string | null)[] = [];
    const steerings: (Steering<string> | null)[] = [];
    const events = new EventRecorder({
      kubeConfig: server.kubeConfig(),
      namespace: ns,
      component: 'weft-gateway',
      instance: 'test',
    });
    const g = await startGatewayRules<string>({
      kubeConfig: server.kubeConfig(),
      router: hooks,
      remoteClusterIds: undefined,
      nodeName: 'n1',
      namespace: ns,
      steer: {
        setSteering: (st) => steerings.push(st),
        nodes: () => [{ tunnel: 'node-1', dev: fx.NODE_IF }],
        isPeerAddress: (a) => a === '169.254.18.2',
      },
      onProblem: (p) => problems.push(p),
      onError: () => {},
      onObjectProblem: (obj, msg) => {
        events.warn(obj as K8sObject, 'InvalidConfiguration', msg).catch(() => {});
      },
    });
    try {
      expect([...g.attachment.tables().keys()]).toEqual([`${ns}/rlx-drop`, `${ns}/rlx-peer-remap-podcidr`]);
      // Liqo mode: the remap nat chains are attached (the router's own NAT is off).
      expect(send(hooks, '10.112.0.1', '10.70.3.9')).toBe('10.112.0.1>10.243.3.9');
      expect(g.attachment.engine!.counterOf(`${ns}/rlx-drop/rlx-drop/prerouting/policy`)).toBe(1);
      expect(problems).toEqual([null]);
      // Steered from the start, then with the gw-ext routes: from the node's interface to the peer.
      const st = steerings.at(-1)!;
      expect(st.nodeDevice('node-1')).toBe(fx.NODE_IF);
      const pkt = new Uint8Array(20);
      pkt.set([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 112, 0, 1, 10, 243, 3, 9]);
      expect(st.policy.route(pkt, 0, st.iifId(fx.NODE_IF))).toMatchObject({ lane: LANE_PEER, gw: '169.254.18.2' });
      expect(st.policy.route(pkt, 0, st.tunnelIif)).toBeUndefined();

      // A bad FirewallConfiguration and a bad RouteConfiguration: named, the previous versions stay.
      const bad = structuredClone(drop);
      bad.spec.table.chains[0]!.rules.filterRules[0]!.action = 'tcpmssclamp'; // to the route MTU before routing: the kernel refuses it
      put(bad as unknown as Record<string, unknown>);
      const badRt = structuredClone(gwExt);
      delete (badRt.spec.table.rules[0]!.routes[0] as Record<string, unknown>)['gw']; // the schema allows it; a route needs gw or dev
      put(badRt, ROUTE_CONFIGURATIONS.plural);
      await until(
        () => problems.some((p) => p?.includes('RouteConfiguration') === true && p.includes('tcpmssclamp')),
        'both problems',
      );
      const p = problems.at(-1)!;
      expect(p).toContain(`FirewallConfiguration ${ns}/rlx-drop chain prerouting rule notrack-geneve-dport`);
      expect(p).toContain(
        `RouteConfiguration ${ns}/rlx-peer-gw-ext rule #0 route #0: dev: a route needs a gw or a dev`,
      );
      expect(send(hooks, '10.112.0.1', '10.70.3.9')).toBe('10.112.0.1>10.243.3.9');
      // The old drop chain still runs (in a newly compiled engine: its counters start again).
      expect(g.attachment.engine!.counterOf(`${ns}/rlx-drop/rlx-drop/prerouting/policy`)).toBe(1);
      expect(steerings.at(-1)!.policy.route(pkt, 0, steerings.at(-1)!.iifId(fx.NODE_IF))).toMatchObject({
        lane: LANE_PEER,
      });
      await until(() => server.listObjects('v1', 'events').length >= 2, 'the Events');
      const ev = server
        .listObjects('v1', 'events')
        .map(
          (e) => e as unknown as { involvedObject: { kind: string; name: string }; message: string; reason: string },
        );
      expect(ev.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name} ${e.reason}`).sort()).toEqual([
        'FirewallConfiguration/rlx-drop InvalidConfiguration',
        'RouteConfiguration/rlx-peer-gw-ext InvalidConfiguration',
      ]);
    } finally {
      await g.stop();
    }
    expect(hooks.at.every((l) => l.length === 0)).toBe(true);
    expect(steerings.at(-1)).toBeNull();
  });

  it('node role (Liqo mode): the fabric category for this node, selected as cmd/fabric selects it, on the agent stages', async () => {
    const ns = 'liqo-tenant-rlx3';
    const put = (o: Record<string, unknown>, name?: string, labels?: Record<string, string>): void => {
      const c = structuredClone(o) as { metadata: { namespace: string; name: string; labels: Record<string, string> } };
      c.metadata.namespace = ns;
      if (name !== undefined) c.metadata.name = name;
      if (labels !== undefined) c.metadata.labels = labels;
      server.put(AV, FIREWALL_CONFIGURATIONS.plural, c as unknown as Record<string, unknown>);
    };
    put(fx.masqueradeBypass('rlx-peer', '10.112.0.0/16', '10.70.0.0/16', '10.74.0.0/16', '10.80.0.1')); // fabric + all-nodes
    const single = (node: string) => ({
      'networking.liqo.io/firewall-category': 'fabric',
      'networking.liqo.io/firewall-subcategory': 'single-node',
      'networking.liqo.io/firewall-unique': node,
    });
    const dropAll = fx.notrack(6091) as {
      spec: { table: { name: string; chains: { rules: { filterRules: { action: string }[] } }[] } };
    };
    dropAll.spec.table.chains[0]!.rules.filterRules[0]!.action = 'drop';
    put(dropAll as unknown as Record<string, unknown>, 'n2-only', single('n2')); // another node's: not selected
    put(fx.remapCidr('podcidr', '10.243.0.0/16', '10.70.0.0/16') as Record<string, unknown>); // the gateway's: not selected
    const hooks = new Hooks();
    const g = await startGatewayRules({
      kubeConfig: server.kubeConfig(),
      router: hooks,
      remoteClusterIds: undefined,
      nodeName: 'n1',
      namespace: ns,
      selectors: { firewall: fabricFirewallSelectors('n1'), routes: fabricRouteSelectors() },
      devices: { node: 'liqo.nodeside01' },
      onProblem: () => {},
      onError: () => {},
    });
    try {
      expect([...g.attachment.tables().keys()]).toEqual([`${ns}/rlx-peer-masquerade-bypass`]);
      // Host-network source towards a remote pod: the nodeport rule's SNAT to the unknown-source address.
      expect(send(hooks, '192.168.50.4', '10.70.3.9')).toBe('10.80.0.1>10.70.3.9');
      // A pod source: bypassed (SNAT to itself, so the CNI's masquerade does not apply).
      expect(send(hooks, '10.112.4.4', '10.70.3.9')).toBe('10.112.4.4>10.70.3.9');
    } finally {
      await g.stop();
    }
  });
});
