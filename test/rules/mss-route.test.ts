/**
 * tcpmssclamp with value "0" — Liqo's Helm default (networking.gateway.mssclamp.value: 0), which
 * Liqo renders as nft `rt mtu` — parsed, rendered, compiled and run: the SYN's MSS is lowered to
 * the route's MTU − 40 as the kernel's nft_rt get_tcpmss computes it (mss.ts), where the kernel
 * accepts `rt mtu` (forward, output, postrouting) and refused where it refuses it.
 */
import { describe, expect, it } from 'vitest';
import { checksumVerifies, pseudoHeaderSumV4 } from '../../src/packet/checksum.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { mssSyn as syn } from '../packet/factory.js';
import {
  HOOK_FORWARD,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_HOST,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_HOST,
  SOURCE_NODE,
  SOURCE_PEER,
  SOURCE_SELF,
  VERDICT_ACCEPT,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import type { RulesDevices } from '../../src/rules/devices.js';
import { routeMss } from '../../src/rules/mss.js';
import { toNft } from '../../src/rules/nft.js';
import { RuleParseError, parseFirewallConfiguration } from '../../src/rules/parse.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { helmMssClamp, renderHelmMssClamp } from '../k8s-fake/helm-mssclamp.js';

/** Liqo's default tunnel MTU (chart networking.mtu, Weft's wireguard.mtu default): rt mtu gives 1300. */
const TUNNEL_MTU = 1340;
const DEV: RulesDevices = {
  peer: 'liqo-tunnel',
  node: 'liqo.abcdefghij',
  host: 'eth0',
  peerAddr: 0,
  nodeAddr: 0,
  hostAddr: 0,
  pathMtu: TUNNEL_MTU,
};

const mssOf = (b: Uint8Array): number => (b[42]! << 8) | b[43]!;
const tcpOk = (b: Uint8Array): boolean =>
  checksumVerifies(b, 20, b.length - 20, pseudoHeaderSumV4(b, 12, 16, 6, b.length - 20));

/** Forwarded from `source` out of `output`: prerouting, forward, postrouting. */
function forward(rt: RulesRuntime, b: Uint8Array, source: number, output: number): void {
  const v = new IpView();
  expect(parseIp(b, 0, b.length, v)).toBe(IP_OK);
  const m = new PacketMeta();
  m.source = source;
  m.output = OUTPUT_NONE;
  expect(rt.hooks[HOOK_PREROUTING]!.process(b, v, m, 0)).toBe(VERDICT_ACCEPT);
  m.output = output;
  expect(rt.hooks[HOOK_FORWARD]!.process(b, v, m, 0)).toBe(VERDICT_ACCEPT);
  expect(rt.hooks[HOOK_POSTROUTING]!.process(b, v, m, 0)).toBe(VERDICT_ACCEPT);
}

function runtime(objects: object[], devices: RulesDevices = DEV): RulesRuntime {
  const rt = new RulesRuntime(devices, { flows: { capacity: 64 } });
  rt.install(compileRules(objects.map((o) => parseFirewallConfiguration(o))));
  return rt;
}

/** The Helm object with its chain moved to `hook` (and, optionally, another value). */
function atHook(hook: string, value = '0'): object {
  const o = structuredClone(helmMssClamp('liqo')) as {
    spec: { table: { chains: { hook: string; rules: { filterRules: { value: string }[] } }[] } };
  };
  o.spec.table.chains[0]!.hook = hook;
  o.spec.table.chains[0]!.rules.filterRules[0]!.value = value;
  return o;
}

describe("Helm's default MSS clamp (value 0: nft rt mtu)", () => {
  it('the stated object is what the chart template renders with the chart defaults', () => {
    const rendered = renderHelmMssClamp();
    expect(rendered).not.toBeNull();
    const stated = helmMssClamp('liqo') as { metadata: Record<string, unknown> };
    const { namespace: _ns, ...metadata } = stated.metadata;
    expect(rendered).toEqual({ ...stated, metadata });
    expect((rendered as { spec: unknown }).spec).toMatchObject({
      table: { chains: [{ rules: { filterRules: [{ action: 'tcpmssclamp', value: '0' }] } }] },
    });
  });

  it('parses value "0" as the route-MTU clamp and renders it as `rt mtu`', () => {
    const t = parseFirewallConfiguration(helmMssClamp('liqo'));
    const rule = t.chains[0]!.rules[0]!;
    expect(rule.kind === 'filter' && rule.action).toEqual({ type: 'tcpmssclamp', mss: 0 });
    expect(toNft(t)).toContain('tcp option maxseg size set rt mtu');
    // A fixed value stays a fixed value; "0" and an absent value are the same rule.
    const fixed = parseFirewallConfiguration(atHook('forward', '1200')).chains[0]!.rules[0]!;
    expect(fixed.kind === 'filter' && fixed.action).toEqual({ type: 'tcpmssclamp', mss: 1200 });
    expect(toNft(parseFirewallConfiguration(atHook('forward', '1200')))).toContain('maxseg size set 1200');
  });

  it('accepted where the kernel accepts rt mtu (forward, output, postrouting), refused at prerouting and input', () => {
    for (const hook of ['forward', 'output', 'postrouting'])
      expect(() => parseFirewallConfiguration(atHook(hook))).not.toThrow();
    for (const hook of ['prerouting', 'input']) {
      let err: unknown;
      try {
        parseFirewallConfiguration(atHook(hook));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(RuleParseError);
      expect(err).toMatchObject({
        object: 'liqo/gw-mss-clamping',
        chain: 'mss-clamping',
        rule: 'mss-clamping-out',
        field: 'value',
      });
      expect((err as Error).message).toContain('rt mtu');
      // A fixed MSS is fine there (the kernel's exthdr write has no hook limit).
      expect(() => parseFirewallConfiguration(atHook(hook, '1200'))).not.toThrow();
    }
    for (const bad of ['-1', '65536', 'x', '1.5'])
      expect(() => parseFirewallConfiguration(atHook('forward', bad))).toThrow(RuleParseError);
  });

  it('a SYN out of the tunnel is clamped to the tunnel MTU − 40 (1300), counted once; others untouched', () => {
    const rt = runtime([helmMssClamp('liqo')]);
    const out = syn('10.112.0.1', '10.70.0.1', 1460);
    forward(rt, out, SOURCE_NODE, OUTPUT_PEER);
    expect(mssOf(out)).toBe(1300);
    expect(tcpOk(out)).toBe(true);
    expect(rt.stats().mssClamped).toBe(1);
    // Never raised (the kernel's maxseg write only lowers).
    const low = syn('10.112.0.2', '10.70.0.1', 1000);
    forward(rt, low, SOURCE_NODE, OUTPUT_PEER);
    expect(mssOf(low)).toBe(1000);
    // From the tunnel to a node: not out of liqo-tunnel, untouched.
    const inward = syn('10.70.0.1', '10.112.0.1', 1460);
    forward(rt, inward, SOURCE_PEER, OUTPUT_NODE);
    expect(mssOf(inward)).toBe(1460);
    expect(rt.stats().mssClamped).toBe(1);
  });

  it('the route back to the source counts too: min(out, back) − 40, as nft_rt get_tcpmss', () => {
    const rt = runtime([helmMssClamp('liqo')], { ...DEV, nodeMtu: 1280 });
    const b = syn('10.112.0.1', '10.70.0.1', 1460);
    forward(rt, b, SOURCE_NODE, OUTPUT_PEER);
    expect(mssOf(b)).toBe(1240);
    expect(tcpOk(b)).toBe(true);
  });

  it("routeMss: lanes, the local route of the router's own packets, the kernel's 536 fallback", () => {
    const d: RulesDevices = { ...DEV, pathMtu: 1500, peerMtu: 1340, nodeMtu: 1450 };
    expect(routeMss(d, SOURCE_NODE, OUTPUT_PEER)).toBe(1300);
    expect(routeMss(d, SOURCE_PEER, OUTPUT_NODE)).toBe(1300); // back through the tunnel
    expect(routeMss(d, SOURCE_HOST, OUTPUT_NODE)).toBe(1410);
    expect(routeMss(d, SOURCE_SELF, OUTPUT_HOST)).toBe(1460);
    expect(routeMss(d, SOURCE_SELF, OUTPUT_NONE)).toBe(1460);
    expect(routeMss({ ...d, pathMtu: 40 }, SOURCE_SELF, OUTPUT_HOST)).toBe(536);
    expect(routeMss({ ...d, pathMtu: 70000 }, SOURCE_SELF, OUTPUT_HOST)).toBe(536);
  });

  it("at output (the router's own SYN) and postrouting too; setDevices changes the MTU between packets", () => {
    const rt = runtime([atHook('output')]);
    const b = syn('10.80.0.1', '10.70.0.1', 1460);
    const v = new IpView();
    expect(parseIp(b, 0, b.length, v)).toBe(IP_OK);
    const m = new PacketMeta();
    m.source = SOURCE_SELF;
    m.output = OUTPUT_PEER;
    expect(rt.hooks[HOOK_OUTPUT]!.process(b, v, m, 0)).toBe(VERDICT_ACCEPT);
    expect(mssOf(b)).toBe(1300);
    const post = runtime([atHook('postrouting')]);
    post.setDevices({ ...DEV, pathMtu: 1200 });
    const c = syn('10.112.0.1', '10.70.0.1', 1460);
    forward(post, c, SOURCE_NODE, OUTPUT_PEER);
    expect(mssOf(c)).toBe(1160);
    expect(post.stats().mssClamped).toBe(1);
  });
});
