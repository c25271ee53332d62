/**
 * What a default Liqo install creates — Liqo's Helm templates (/work/shared/liqo/helm-templates)
 * rendered with the chart's default values (/work/shared/liqo/helm-values.yaml) and what
 * `liqoctl install` adds from the cluster — next to the objects Liqo's controllers create for a
 * peering (test/rules/liqo-peering-objects.ts): every object is valid for Liqo's CRDs as the API
 * server serves it, and Weft's Liqo-mode translation refuses none of them (gateway and node
 * selections, FirewallConfigurations and RouteConfigurations, the IPAM Networks). The renderer
 * (test/k8s-fake/helm-render.ts) is checked on its own too: the constructs it supports, and a
 * throw for any other.
 */
import { describe, expect, test } from 'vitest';
import {
  fabricFirewallSelectors,
  fabricRouteSelectors,
  gatewayFirewallSelectors,
  gatewayRouteSelectors,
} from '../../src/control/k8s/firewall-watch.js';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import { translate } from '../../src/control/k8s/translate.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { splitFabricFirewall } from '../../src/rules/fabric-split.js';
import { parseRouteObjects } from '../../src/rules/steering.js';
import { GENEVE_LIQO_UDP_PORT } from '../../src/geneve/header.js';
import {
  asServed,
  LIQOCTL_INSTALL_VALUES,
  mergeValues,
  renderLiqoChart,
  renderTemplateText,
  type K8sObject,
} from '../k8s-fake/helm-render.js';
import { EXTERNAL_CIDR, INTERNAL_CIDR, LIQO_NAMESPACE, liqoPeeringSide, rulesSide } from '../k8s-fake/liqo-peering.js';
import { KEYS } from '../control/fixtures.js';
import { DEFAULT_IF, GENEVE_PORT, TUNNEL_IF, fabricObjects, gatewayObjects, selects } from './liqo-peering-objects.js';

const names = (objs: { obj: K8sObject }[]) => objs.map(({ obj }) => `${obj.kind}/${obj.metadata.name}`);

describe('the Go-template subset of test/k8s-fake/helm-render.ts', () => {
  const r = (src: string, values: unknown = {}) => renderTemplateText(src, values);
  test('trimming, fields, variables, if/else if, range over lists and maps, with, pipelines', () => {
    expect(r('a  {{- .Values.x -}}  b', { x: 1 })).toBe('a1b');
    expect(r('[{{ .Values.missing }}]')).toBe('[]'); // Helm prints a missing key as nothing
    expect(() => r('{{ .Values.a.b }}')).toThrow(/nil pointer evaluating \.b/);
    expect(r('{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}', { b: true })).toBe('B');
    expect(r('{{ range $i, $v := .Values.l }}{{ $i }}={{ $v }};{{ end }}', { l: ['x', 'y'] })).toBe('0=x;1=y;');
    expect(r('{{ range $k, $v := .Values.m }}{{ $k }}{{ $v }}{{ end }}', { m: { b: 2, a: 1 } })).toBe('a1b2');
    expect(r('{{ range list (dict "n" "p") (dict "n" "q") }}{{ .n }}{{ end }}')).toBe('pq');
    expect(r('{{ with .Values.w }}{{ .v }}{{ end }}', { w: { v: 7 } })).toBe('7');
    expect(r('{{ $x := "a" }}{{ if true }}{{ $x = "b" }}{{ end }}{{ $x }}')).toBe('b');
    expect(r('{{ .Values.v | toString | quote }}', { v: 0 })).toBe('"0"');
    expect(r('{{ .Values.c | replace "/" "-" | replace "." "-" }}', { c: '10.0.0.0/16' })).toBe('10-0-0-0-16');
    expect(r('{{ .Values.e | default "d" }}', { e: '' })).toBe('d');
    expect(r('{{ if and .Values.p (ne .Values.p "0") }}on{{ end }}', { p: '8081' })).toBe('on');
    expect(r('{{ if gt (int .Values.n) 1 }}many{{ else }}one{{ end }}', { n: '1' })).toBe('one');
    expect(r('{{ if .Values.i | eq "userspace" }}u{{ end }}', { i: 'userspace' })).toBe('u');
    expect(r('x:{{- toYaml .Values.m | nindent 2 }}', { m: { b: [1], a: 'z' } })).toBe('x:\n  a: z\n  b:\n  - 1');
    expect(r('{{ printf "{{ .Name }}" }}-{{ "{{ .X }}" }}')).toBe('{{ .Name }}-{{ .X }}');
  });
  test('any other construct throws, naming it', () => {
    expect(() => r('{{ upper "x" }}')).toThrow(/function upper is not supported/);
    expect(() => r('{{ include "liqo.unknown" . }}')).toThrow(/named template liqo.unknown is not defined/);
    expect(() => r('{{ template "x" }}')).toThrow(/template.*not supported/);
    expect(() => r('{{/* c */}}')).toThrow(/comments are not supported/);
    expect(() => r('{{ if .Values.a }}')).toThrow(/missing \{\{ end \}\}/);
    expect(() => r('{{ eq .Values.n "1" }}', { n: 1 })).toThrow(/incompatible types/);
  });
  test('mergeValues merges as Helm: maps key by key, lists and scalars replaced, null deletes; inputs unchanged', () => {
    const base = { a: { l: [1, 2], s: 'x', keep: true, gone: 1 }, top: 1 };
    const over = { a: { l: [3], s: 'y', gone: null }, extra: { k: 1 } };
    expect(mergeValues(base, over)).toEqual({ a: { l: [3], s: 'y', keep: true }, top: 1, extra: { k: 1 } });
    expect(base.a.gone).toBe(1);
  });
});

describe('a default Liqo install', () => {
  const install = renderLiqoChart();

  test('renders the fabric DaemonSet, the MSS clamp, the IPAM Networks and the gateway templates (NOTRACK only when enabled)', () => {
    expect(names(install)).toEqual([
      'DaemonSet/liqo-fabric',
      'FirewallConfiguration/gw-mss-clamping',
      'Network/pod-cidr-10-0-0-0-16',
      'Network/service-cidr',
      'Network/external-cidr',
      'Network/internal-cidr',
      'WgGatewayClientTemplate/wireguard-client',
      'WgGatewayServerTemplate/wireguard-server',
    ]);
    expect(names(renderLiqoChart({ networking: { notrack: { enabled: true } } }))).toEqual([
      ...names(install).slice(0, 6),
      'FirewallConfiguration/fabric-notrack',
      'FirewallConfiguration/gw-notrack',
      ...names(install).slice(6),
    ]);
    // Every object in the release's namespace; every Liqo object valid for its CRD as served.
    for (const { obj } of install) {
      expect(obj.metadata.namespace).toBe(LIQO_NAMESPACE);
      if (obj.apiVersion.includes('liqo.io')) expect(() => asServed(obj)).not.toThrow();
    }
  });

  test("the defaults Weft's fixtures follow are Liqo's: Geneve port, external and internal CIDRs, MSS clamp on liqo-tunnel", () => {
    const ds = install.find(({ obj }) => obj.kind === 'DaemonSet')!.obj as K8sObject & {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    };
    const args = ds.spec.template.spec.containers[0]!.args;
    expect(args).toContain(`--geneve-port=${GENEVE_PORT}`);
    expect(GENEVE_PORT).toBe(GENEVE_LIQO_UDP_PORT);
    const cidr = (n: string) =>
      (install.find(({ obj }) => obj.kind === 'Network' && obj.metadata.name === n)!.obj.spec as { cidr: string }).cidr;
    expect([cidr('external-cidr'), cidr('internal-cidr')]).toEqual([EXTERNAL_CIDR, INTERNAL_CIDR]);
    expect(cidr('pod-cidr-10-0-0-0-16')).toBe(LIQOCTL_INSTALL_VALUES.ipam.podCIDRs[0]);
    const mss = asServed(install.find(({ obj }) => obj.kind === 'FirewallConfiguration')!.obj);
    const rule = (
      mss.spec as {
        table: { chains: { rules: { filterRules: { action: string; value: string; counter: boolean }[] } }[] };
      }
    ).table.chains[0]!.rules.filterRules[0]!;
    // "0": Liqo renders the clamp to the route's MTU; the API server defaults `counter` to true.
    expect(rule).toMatchObject({ action: 'tcpmssclamp', value: '0', counter: true });
    expect(JSON.stringify(mss)).toContain(TUNNEL_IF);
  });

  // The FirewallConfigurations and RouteConfigurations of one cluster: the install's (NOTRACK
  // enabled too, so both are checked) and the controllers' for one peering, whose own MSS clamp
  // object is the install's (the chart creates it once, with the release's values).
  const peering = {
    local: 'cluster-a',
    remote: 'cluster-b',
    side: 'server' as const,
    privateKey: KEYS.aPriv,
    publicKey: KEYS.aPub,
    remotePublicKey: KEYS.bPub,
    endpoint: { address: '192.168.77.1', port: 51840 },
    gatewayPod: { ip: '10.0.0.10', node: 'worker-1' },
    nodes: [
      { name: 'worker-1', pods: [{ name: 'app-1', ip: '10.0.0.20' }] },
      { name: 'worker-2', pods: [{ name: 'app-2', ip: '10.0.1.20' }] },
    ],
    liqoMode: { mss: 0, ipMappings: [{ name: 'db', real: '192.168.61.10', remapped: '10.70.0.5', node: 'worker-1' }] },
  };
  const side = { ...rulesSide(peering), gatewayPod: peering.gatewayPod, liqoNamespace: LIQO_NAMESPACE };
  const helmFw = renderLiqoChart({ networking: { notrack: { enabled: true } } })
    .map(({ obj }) => obj)
    .filter((o) => o.kind === 'FirewallConfiguration')
    .map(asServed);
  const controllers = [...gatewayObjects(side).firewall, ...fabricObjects(side).firewall].filter(
    (o) => (o['metadata'] as { name: string }).name !== 'gw-mss-clamping',
  );
  const firewall = [...helmFw, ...controllers];
  const routes = [...gatewayObjects(side).routes, ...fabricObjects(side).routes];
  const key = (o: Record<string, unknown>) => {
    const m = o['metadata'] as { namespace: string; name: string };
    return `${m.namespace}/${m.name}`;
  };
  const devices = {
    peer: TUNNEL_IF,
    node: side.nodeSideIf,
    host: DEFAULT_IF,
    peerAddr: 0,
    nodeAddr: 0,
    hostAddr: 0,
    pathMtu: 1340,
  };

  test('the gateway: every FirewallConfiguration and RouteConfiguration it selects is accepted (MSS clamp value "0" included)', () => {
    const fw = firewall.filter((o) => gatewayFirewallSelectors([side.remoteId]).some((s) => selects(s, o)));
    expect(fw.map(key)).toEqual(expect.arrayContaining(['liqo/gw-mss-clamping', 'liqo/gw-notrack']));
    const rules = new RulesAttachment(devices);
    // Each refusal would be a Warning Event on its object and an error in `weft show` (k8s-liqo-mode.test.ts).
    expect(rules.update(fw).map((e) => e.message)).toEqual([]);
    expect([...rules.tables().keys()].length).toBe(fw.length);
    for (const node of side.nodes) {
      const rt = routes.filter((o) => gatewayRouteSelectors([side.remoteId], node.name).some((s) => selects(s, o)));
      expect(rt.length).toBeGreaterThan(0);
      expect(parseRouteObjects(rt, new Map()).errors.map((e) => e.message)).toEqual([]);
    }
  });

  test('a node: every fabric FirewallConfiguration and RouteConfiguration it selects is accepted', () => {
    for (const node of side.nodes) {
      const fw = firewall.filter((o) => fabricFirewallSelectors(node.name).some((s) => selects(s, o)));
      expect(fw.map(key)).toContain('liqo/fabric-notrack');
      const split = splitFabricFirewall(fw, new Set([side.nodeSideIf]), 'weft0', new Map());
      // Kernel tables are what parsed; the rest goes in process, where a refusal is reported.
      const rules = new RulesAttachment(devices);
      expect(rules.update(split.tunObjects).map((e) => e.message)).toEqual([]);
      expect(new Set([...split.kernelTables.keys(), ...[...rules.tables().keys()]]).size).toBe(fw.length);
      const rt = routes.filter((o) => fabricRouteSelectors().some((s) => selects(s, o)));
      expect(rt.length).toBeGreaterThan(0);
      expect(parseRouteObjects(rt, new Map()).errors.map((e) => e.message)).toEqual([]);
    }
  });

  test("the IPAM Networks as the chart creates them translate, with the install's CIDRs", () => {
    const res: LiqoResources = liqoPeeringSide(peering);
    res.networks = install
      .map(({ obj }) => obj)
      .filter((o) => o.kind === 'Network')
      .map(asServed) as unknown as LiqoResources['networks'];
    for (const role of ['gateway', 'node'] as const) {
      const { config, warnings } = translate(res, {
        role,
        clusterId: 'cluster-a',
        nodeName: 'worker-1',
        remoteClusterIds: ['cluster-b'],
      });
      // (The peering's InternalNodes wait for their status.nodeIP, which the fabric writes: not the install's.)
      expect(warnings.filter((w) => !/^InternalNode \S+: status.nodeIP not set yet/.test(w))).toEqual([]);
      expect(config.cluster).toMatchObject({
        podCIDRs: ['10.0.0.0/16'],
        serviceCIDRs: ['10.96.0.0/12'],
        externalCIDR: EXTERNAL_CIDR,
        internalCIDR: INTERNAL_CIDR,
      });
    }
  });
});
