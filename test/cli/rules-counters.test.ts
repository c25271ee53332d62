/**
 * Per-rule counters of the compiled rules in force reach `weft show` (the control socket's JSON,
 * i.e. `weft show --json`, and the text) and the Prometheus metrics: rules with `counter` and chain
 * policies with packets and bytes, rules on the general matcher with their matches.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { requestStatus } from '../../src/daemon/control-socket.js';
import { Runtime } from '../../src/daemon/runtime.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { createLogger } from '../../src/control/log.js';
import { createMetricsRegistry } from '../../src/control/metrics.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import {
  HOOK_FORWARD,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_NODE,
  VERDICT_ACCEPT,
  VERDICT_DROP,
} from '../../src/router/hooks.js';
import { RulesAttachment, splitRuleId } from '../../src/rules/attach.js';
import { udpPacket } from '../packet/factory.js';
import { forwardFilterChain } from '../rules/fixtures.js';

const NS = 'liqo-tenant-x';
const FC = {
  apiVersion: 'networking.liqo.io/v1beta1',
  kind: 'FirewallConfiguration',
  metadata: { name: 'user-fw', namespace: NS, labels: {} },
  spec: {
    table: {
      name: 'user',
      family: 'IPV4',
      chains: [
        forwardFilterChain('fwd', [
          {
            name: 'drop-7777',
            counter: true,
            action: 'drop',
            match: [{ op: 'eq', proto: { value: 'udp' }, port: { position: 'dst', value: '7777' } }],
          },
          { name: 'accept-53', action: 'accept', match: [{ op: 'eq', port: { position: 'dst', value: '53' } }] },
        ]),
      ],
    },
  },
};

const dir = mkdtempSync(join(tmpdir(), 'r2-counters-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('rule counters in weft show and metrics', () => {
  test('splitRuleId keeps a namespaced object whole', () => {
    expect(splitRuleId(`${NS}/user-fw/user/fwd/drop-7777`)).toEqual({
      object: `${NS}/user-fw`,
      table: 'user',
      chain: 'fwd',
      rule: 'drop-7777',
    });
  });

  test('a rule, chain or table name holding "/" (nft names may; the YAML translation\'s carry CIDRs) comes back whole', () => {
    const rules = new RulesAttachment({
      peer: 'liqo-tunnel',
      node: 'liqo.n1',
      host: 'eth0',
      peerAddr: 0,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: 1500,
    });
    const fc = structuredClone(FC);
    fc.spec.table.name = 'user/t';
    fc.spec.table.chains[0]!.name = 'fwd%2F';
    fc.spec.table.chains[0]!.rules.filterRules[0]!.name = 'b-remap-10.243.0.0/16';
    expect(rules.update([fc])).toEqual([]);
    const rows = rules.counterSamples().map((r) => [r.object, r.table, r.chain, r.rule]);
    expect(rows).toContainEqual([`${NS}/user-fw`, 'user/t', 'fwd%2F', 'b-remap-10.243.0.0/16']);
    expect(rows).toContainEqual([`${NS}/user-fw`, 'user/t', 'fwd%2F', 'policy']);
  });

  test('packets through the rules are counted per rule and shown', async () => {
    const rules = new RulesAttachment({
      peer: 'liqo-tunnel',
      node: 'liqo.n1',
      host: 'eth0',
      peerAddr: 0,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: 1500,
    });
    expect(rules.update([FC])).toEqual([]);
    const send = (dport: number, payload: number): number => {
      const p = udpPacket({
        src: '10.112.0.5',
        dst: '10.243.0.9',
        sport: 4000,
        dport,
        payload: new Uint8Array(payload),
        headroom: 128,
      });
      const v = new IpView();
      expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
      const meta = new PacketMeta();
      meta.source = SOURCE_NODE;
      meta.output = OUTPUT_PEER;
      return rules.runtime.hooks[HOOK_FORWARD]!.process(p.buf, v, meta, 1000);
    };
    for (let i = 0; i < 3; i++) expect(send(7777, 100)).toBe(VERDICT_DROP);
    for (let i = 0; i < 2; i++) expect(send(53, 10)).toBe(VERDICT_ACCEPT);
    expect(send(80, 0)).toBe(VERDICT_ACCEPT);

    const logger = createLogger({ level: 'silent', env: {} });
    const runtime = await Runtime.create({
      name: 'r2-counters',
      runDir: join(dir, 'run'),
      source: 'kubernetes',
      logger,
      conncheck: false,
    });
    try {
      expect(runtime.status().rules).toBeUndefined();
      runtime.setRules(rules);
      const st = (await requestStatus(runtime.socketPath)) as WeftStatus;
      const obj = `${NS}/user-fw`;
      expect(st.rules!.counters).toEqual([
        { object: obj, table: 'user', chain: 'fwd', rule: 'drop-7777', packets: 3, bytes: 3 * 128 },
        { object: obj, table: 'user', chain: 'fwd', rule: 'policy', packets: 1, bytes: 28 },
      ]);
      expect(st.rules!.general).toEqual([
        { object: obj, table: 'user', chain: 'fwd', rule: 'drop-7777', packets: 3 },
        { object: obj, table: 'user', chain: 'fwd', rule: 'accept-53', packets: 2 },
      ]);
      const text = formatStatus(st, Date.now());
      expect(text).toContain('rules: 2 counters, 2 on the general matcher, remap shortcut off');
      expect(text).toContain(`  counter ${obj} user/fwd/drop-7777: 3 packets, 384 B`);
      expect(text).toContain(`  general ${obj} user/fwd/accept-53: 2 matches`);

      const metrics = await createMetricsRegistry(runtime.statsSource()).metrics();
      const lbl = (rule: string): string => `{object="${obj}",table="user",chain="fwd",rule="${rule}"}`;
      expect(metrics).toContain(`weft_rule_packets_total${lbl('drop-7777')} 3`);
      expect(metrics).toContain(`weft_rule_bytes_total${lbl('drop-7777')} 384`);
      expect(metrics).toContain(`weft_rule_packets_total${lbl('policy')} 1`);
      expect(metrics).toContain(`weft_rule_general_matches_total${lbl('accept-53')} 2`);

      runtime.setRules(null);
      expect(runtime.status().rules).toBeUndefined();
      expect(await createMetricsRegistry(runtime.statsSource()).metrics()).not.toContain('weft_rule_packets_total{');
    } finally {
      await runtime.stop();
    }
  });
});
