// `weft show` text of the gateway's built-in NAT: conntrack entries and, when the gateway reports
// them, the packets it translated (0 in Liqo mode, where the FirewallConfigurations translate:
// test/e2e/liqo-firewall-processes.test.ts reads them) and every SYN clamped (rules' included).
import { describe, expect, test } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';

const base: WeftStatus = {
  weft: {
    version: '0.1.0',
    name: 'k8s-gateway',
    role: 'gateway',
    pid: 1,
    startedAt: '2026-01-01T00:00:00Z',
    source: 'kubernetes',
    active: true,
  },
  cluster: { id: 'cluster-a' },
  geneve: { port: 6091, tunnels: [] },
  drops: {},
  queues: {},
};

describe('weft show: the built-in NAT', () => {
  test('entries, translated packets and clamped SYNs', () => {
    const text = formatStatus(
      { ...base, nat: { entries: 3, forwarded: 10, replies: 9, mssClamped: 2 } },
      Date.parse('2026-01-01T00:00:05Z'),
    );
    expect(text).toContain('  nat entries: 3, forwarded 10, replies 9, mss clamped 2\n');
  });

  test('an older gateway that reports only the entries', () => {
    const text = formatStatus({ ...base, nat: { entries: 0 } }, Date.parse('2026-01-01T00:00:05Z'));
    expect(text).toMatch(/ {2}nat entries: 0$/m);
  });
});
