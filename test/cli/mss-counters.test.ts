/**
 * `mss clamped` counts every clamp: Liqo mode's rules (here Helm's default gw-mss-clamping, value
 * "0": the tunnel route's MTU − 40) reach the metrics (weft_mss_clamped_total) and the node
 * role's `weft show` line; the gateway's `nat … mss clamped` adds them to the built-in NAT's
 * (root: test/e2e/liqo-pods.test.ts reads it from a running gateway).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { Runtime } from '../../src/daemon/runtime.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { createLogger } from '../../src/control/log.js';
import { createMetricsRegistry } from '../../src/control/metrics.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { HOOK_FORWARD, OUTPUT_PEER, PacketMeta, SOURCE_NODE, VERDICT_ACCEPT } from '../../src/router/hooks.js';
import { RulesAttachment } from '../../src/rules/attach.js';
import { tcpPacket } from '../packet/factory.js';
import { helmMssClamp } from '../k8s-fake/helm-mssclamp.js';

const dir = mkdtempSync(join(tmpdir(), 'mss-counters-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('mss clamped: every clamp, Liqo mode included', () => {
  test("Helm's default clamp: SYNs out of the tunnel lowered to 1300 and counted in the metrics", async () => {
    // Liqo's default tunnel MTU (1340) as the gateway's route MTU.
    const rules = new RulesAttachment({
      peer: 'liqo-tunnel',
      node: 'liqo.n1',
      host: 'eth0',
      peerAddr: 0,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: 1340,
    });
    expect(rules.update([helmMssClamp('liqo')])).toEqual([]);
    const syn = (sport: number, mss: number): number => {
      const p = tcpPacket({ src: '10.112.0.5', dst: '10.70.0.9', sport, dport: 80, flags: 0x02, mss, headroom: 64 });
      const v = new IpView();
      expect(parseIp(p.buf, p.off, p.len, v)).toBe(IP_OK);
      const meta = new PacketMeta();
      meta.source = SOURCE_NODE;
      meta.output = OUTPUT_PEER;
      expect(rules.runtime.hooks[HOOK_FORWARD]!.process(p.buf, v, meta, 1000)).toBe(VERDICT_ACCEPT);
      return (p.buf[v.l4 + 22]! << 8) | p.buf[v.l4 + 23]!;
    };
    expect(syn(4001, 1460)).toBe(1300);
    expect(syn(4002, 1400)).toBe(1300);
    expect(syn(4003, 1200)).toBe(1200); // already below: not clamped, not counted

    const runtime = await Runtime.create({
      name: 'mss-counters',
      runDir: join(dir, 'run'),
      source: 'kubernetes',
      logger: createLogger({ level: 'silent', env: {} }),
      conncheck: false,
    });
    try {
      expect(await createMetricsRegistry(runtime.statsSource()).metrics()).toMatch(/^weft_mss_clamped_total 0$/m);
      runtime.setRules(rules);
      expect(await createMetricsRegistry(runtime.statsSource()).metrics()).toMatch(/^weft_mss_clamped_total 2$/m);
    } finally {
      await runtime.stop();
    }
  });

  test("weft show prints the node role's clamps", () => {
    const st: WeftStatus = {
      weft: {
        version: '0.1.0',
        name: 'k8s-node',
        role: 'node',
        pid: 1,
        startedAt: '2026-01-01T00:00:00Z',
        source: 'kubernetes',
        active: true,
      },
      cluster: { id: 'cluster-a' },
      geneve: { port: 6091, tunnels: [] },
      drops: {},
      queues: {},
      mssClamped: 4,
    };
    expect(formatStatus(st, Date.parse('2026-01-01T00:00:05Z'))).toContain('  mss clamped: 4\n');
  });
});
