// Liqo's in-tunnel connection check end to end: two `weft up` gateways (clusters A and B, the
// same pod CIDR, remapped) in namespaces wka / wkb joined by a veth, checking each other every
// 500 ms (--conncheck-interval; Liqo's 2 s is the default) through the WireGuard tunnel between
// their tunnel addresses 169.254.18.2 (A, the client: it has B's endpoint) and 169.254.18.1 (B).
//
// Proves: the gateways carry the tunnel addresses (TUN address, kernel route with that source);
// both sides reach Connected with a measured latency (> 0, < 1 s), shown by `weft show` (JSON and
// text) and the metrics endpoint; the check's datagrams cross the WAN only inside WireGuard;
// tunnel addresses changed by a reload move the check live; after B's process is killed (by PID)
// A reaches Error after 5 missed replies — not earlier than 4 intervals after the kill — and
// reports it everywhere; a restarted B brings A back to Connected.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { WeftPeerStatus, WeftStatus } from '../../src/daemon/status.js';
import { ensureBuilt, runWeft, WEFT_BIN } from '../cli/helpers.js';
import { e2eUnavailableReason, Topology, waitFor, type Spawned } from '../util/netns.js';

const skip = e2eUnavailableReason(['wg', 'curl', 'tcpdump']);
const topo = new Topology('wk');
const INTERVAL_MS = 500;
const LOSS_THRESHOLD = 5; // Liqo's, not configurable on the command line
const METRICS = '127.0.0.1:9466';
let dir = '';
let nsA = '';
let nsB = '';
const procs: Record<'a' | 'b', Spawned | undefined> = { a: undefined, b: undefined };
const keys = { a: '', b: '', aPub: '', bPub: '' };

function wg(args: string[], input = ''): string {
  return spawnSync('wg', args, { input, encoding: 'utf8' }).stdout.trim();
}

/** Gateway YAML; `tunnel` = [ours, the peer's] explicit tunnel addresses (default: Liqo's). */
function gatewayYaml(me: 'a' | 'b', tunnel?: [string, string]): string {
  const other = me === 'a' ? 'b' : 'a';
  return `role: gateway
cluster:
  id: wk-cluster-${me}
  podCIDRs: [10.0.0.0/16]
wireguard:
  privateKeyFile: ./${me}.key
  listenPort: 51840
  interfaceName: wk-tun-${me}
${tunnel ? `  tunnelAddress: ${tunnel[0]}\n` : ''}peers:
  - name: cluster-${other}
    clusterId: wk-cluster-${other}
    publicKey: ${me === 'a' ? keys.bPub : keys.aPub}
${me === 'a' ? '    endpoint: 198.18.9.2:51840\n' : ''}${tunnel ? `    tunnelAddress: ${tunnel[1]}\n` : ''}    remote: { podCIDRs: [10.0.0.0/16], externalCIDRs: [10.70.0.0/16] }
    remapped: { podCIDRs: [10.71.0.0/16], externalCIDRs: [10.72.0.0/16] }
geneve:
  listenAddress: 127.0.0.1
metrics:
  listen: ${METRICS}
logging:
  level: info
`;
}

const runDir = (me: 'a' | 'b'): string => join(dir, `run-${me}`);

async function show(me: 'a' | 'b'): Promise<WeftStatus> {
  const r = await runWeft(['show', '--json', '--run-dir', runDir(me), `gateway-${me}`]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as WeftStatus;
}

async function peerOf(me: 'a' | 'b'): Promise<WeftPeerStatus> {
  return (await show(me)).wireguard!.peers[0]!;
}

function metrics(ns: string): string {
  return topo.exec(ns, ['curl', '-sf', `http://${METRICS}/metrics`]);
}

function metric(text: string, name: string, cluster: string): number {
  const m = new RegExp(`^${name}\\{driver="wireguard",cluster_id="${cluster}"\\} (\\S+)$`, 'm').exec(text);
  if (m === null) throw new Error(`${name} for ${cluster} not in:\n${text}`);
  return Number(m[1]);
}

async function startGateway(me: 'a' | 'b'): Promise<Spawned> {
  const ns = me === 'a' ? nsA : nsB;
  const g = topo.spawnIn(
    ns,
    `gateway-${me}`,
    [
      process.execPath,
      WEFT_BIN,
      'up',
      '-c',
      join(dir, `gateway-${me}.yaml`),
      '--run-dir',
      runDir(me),
      '--conncheck-interval',
      String(INTERVAL_MS),
    ],
    { lifetimeS: 150 },
  );
  procs[me] = g;
  await waitFor(
    `gateway-${me} control socket`,
    () => {
      if (g.child.exitCode !== null) throw new Error(`gateway-${me} exited: ${g.output()}`);
      return existsSync(join(runDir(me), `gateway-${me}.sock`));
    },
    20_000,
  );
  // The control socket opens before the data plane: wait until it forwards.
  await waitFor(`gateway-${me} active`, async () => (await show(me)).weft.active, 20_000);
  return g;
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/cli/commands/up.js', 'src/gateway/gateway.js', 'src/control/tunnel-address.js']);
  dir = mkdtempSync(join(tmpdir(), 'wk-cc-'));
  keys.a = wg(['genkey']);
  keys.b = wg(['genkey']);
  keys.aPub = wg(['pubkey'], keys.a);
  keys.bPub = wg(['pubkey'], keys.b);
  writeFileSync(join(dir, 'a.key'), `${keys.a}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'b.key'), `${keys.b}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a'));
  writeFileSync(join(dir, 'gateway-b.yaml'), gatewayYaml('b'));
  nsA = topo.addNamespace('a');
  nsB = topo.addNamespace('b');
  topo.link(nsA, 'wan-a', '198.18.9.1/24', nsB, 'wan-b', '198.18.9.2/24');
  await startGateway('b');
  await startGateway('a');
}, 60_000);

afterAll(async () => {
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(skip !== null)('in-tunnel connection check between two weft gateways', () => {
  test("each gateway carries its tunnel address and routes the peer's via its TUN with that source", () => {
    expect(topo.exec(nsA, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'wk-tun-a'])).toContain('inet 169.254.18.2/32');
    expect(topo.exec(nsB, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'wk-tun-b'])).toContain('inet 169.254.18.1/32');
    expect(topo.exec(nsA, ['ip', 'route', 'get', '169.254.18.1'])).toMatch(
      /169\.254\.18\.1 dev wk-tun-a src 169\.254\.18\.2/,
    );
    expect(topo.exec(nsB, ['ip', 'route', 'get', '169.254.18.2'])).toMatch(
      /169\.254\.18\.2 dev wk-tun-b src 169\.254\.18\.1/,
    );
  });

  test('both sides reach Connected with a measured latency: show (JSON, text) and metrics', async ({ annotate }) => {
    for (const me of ['a', 'b'] as const) {
      await waitFor(
        `gateway-${me} Connected`,
        async () => (await peerOf(me)).connection?.value === 'Connected',
        10_000,
        100,
      );
    }
    const a = await peerOf('a');
    expect(a).toMatchObject({ tunnelAddress: '169.254.18.1', localTunnelAddress: '169.254.18.2' });
    expect(a.connection!.latencyMs).toBeGreaterThan(0);
    expect(a.connection!.latencyMs).toBeLessThan(1000);
    const b = await peerOf('b');
    await annotate(
      `latency A→B ${a.connection!.latencyMs.toFixed(3)} ms, B→A ${b.connection!.latencyMs.toFixed(3)} ms`,
    );
    expect(b).toMatchObject({ tunnelAddress: '169.254.18.2', localTunnelAddress: '169.254.18.1' });
    expect(b.connection!.latencyMs).toBeGreaterThan(0);
    expect(b.connection!.latencyMs).toBeLessThan(1000);
    // Only the check has used the tunnel so far: its bytes are the peer counters'.
    expect(a.txBytes).toBeGreaterThan(0);
    expect(a.rxBytes).toBeGreaterThan(0);

    const text = await runWeft(['show', '--run-dir', runDir('a')]);
    expect(text.stdout).toContain('  tunnel address: 169.254.18.1 (ours 169.254.18.2)\n');
    expect(text.stdout).toMatch(/\n {2}connection: Connected, latency \d+\.\d{3} ms\n/);

    const m = metrics(nsA);
    expect(metric(m, 'liqo_peer_is_connected', 'wk-cluster-b')).toBe(1);
    const us = metric(m, 'liqo_peer_latency_us', 'wk-cluster-b');
    expect(us).toBeGreaterThan(0);
    expect(us).toBeLessThan(1_000_000);
    expect(metric(metrics(nsB), 'liqo_peer_is_connected', 'wk-cluster-a')).toBe(1);
    // Nothing of the check was dropped by the routing stage or the NAT (the TUN carries no IPv6,
    // so the kernel sends no router solicitations or MLD into it that could count as no_route).
    for (const me of ['a', 'b'] as const) {
      const drops = Object.keys((await show(me)).drops);
      expect(drops.filter((k) => k.startsWith('route_') || k.startsWith('nat_'))).toEqual([]);
    }
  });

  test('on the WAN the check travels only inside WireGuard', () => {
    // ~3 intervals of traffic on B's WAN end: WireGuard datagrams, no plaintext UDP 12345.
    const cap = (filter: string): number => {
      const out = topo.exec(nsB, ['timeout', '2', 'tcpdump', '-nn', '-q', '-l', '-i', 'wkwan-b', filter], {
        allowFail: true,
        timeoutMs: 10_000,
      });
      return out.split('\n').filter((l) => l.includes(' IP ')).length;
    };
    expect(cap('udp port 51840')).toBeGreaterThanOrEqual(2);
    expect(cap('udp port 12345 or net 169.254.0.0/16')).toBe(0);
  });

  test("the gateway host pings the peer's tunnel address; any other source towards it is dropped and counted", async () => {
    const icmp = (extra: string[]): string =>
      topo.exec(nsA, ['ping', '-n', '-q', '-c', '2', '-i', '0.2', '-W', '1', ...extra, '169.254.18.1'], {
        allowFail: true,
        timeoutMs: 10_000,
      });
    expect(icmp([])).toMatch(/2 packets transmitted, 2 received/);
    // From A's internal address (also on its TUN) B could not accept it (allowed IPs): dropped at A.
    expect(icmp(['-I', '10.80.0.1'])).toMatch(/2 packets transmitted, 0 received/);
    await waitFor(
      'route_tunnel_source at A',
      async () => (await show('a')).drops['route_tunnel_source'] === 2,
      5000,
      100,
    );
  });

  test('a reload moving both ends to other tunnel addresses moves the check live', async () => {
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a', ['169.254.30.2', '169.254.30.1']));
    writeFileSync(join(dir, 'gateway-b.yaml'), gatewayYaml('b', ['169.254.30.1', '169.254.30.2']));
    for (const me of ['a', 'b'] as const) {
      await waitFor(
        `gateway-${me} on the new addresses, Connected`,
        async () => {
          const p = await peerOf(me);
          return (
            p.tunnelAddress === (me === 'a' ? '169.254.30.1' : '169.254.30.2') && p.connection?.value === 'Connected'
          );
        },
        15_000,
        100,
      );
    }
    const addrs = topo.exec(nsA, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'wk-tun-a']);
    expect(addrs).toContain('inet 169.254.30.2/32');
    expect(addrs).not.toContain('169.254.18.2');
    expect(topo.exec(nsA, ['ip', 'route', 'show', 'dev', 'wk-tun-a'])).not.toContain('169.254.18.1');
    expect(topo.exec(nsA, ['ip', 'route', 'get', '169.254.30.1'])).toMatch(/dev wk-tun-a src 169\.254\.30\.2/);
    // Back to Liqo's defaults for the rest.
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a'));
    writeFileSync(join(dir, 'gateway-b.yaml'), gatewayYaml('b'));
    for (const me of ['a', 'b'] as const) {
      await waitFor(
        `gateway-${me} back on 169.254.18.x, Connected`,
        async () => {
          const p = await peerOf(me);
          return p.tunnelAddress?.startsWith('169.254.18.') === true && p.connection?.value === 'Connected';
        },
        15_000,
        100,
      );
    }
  });

  test('B killed: A reaches Error after 5 missed replies and reports it; a restarted B brings it back', async ({
    annotate,
  }) => {
    await waitFor('A Connected', async () => (await peerOf('a')).connection?.value === 'Connected', 10_000, 100);
    const pidB = (await show('b')).weft.pid;
    process.kill(pidB, 'SIGKILL'); // the weft process itself (not the timeout wrapper), by PID
    const killedAt = Date.now();
    await procs.b!.exited;
    const lossWindow = INTERVAL_MS * LOSS_THRESHOLD;
    await waitFor('A Error', async () => (await peerOf('a')).connection?.value === 'Error', lossWindow + 5000, 50);
    // When A declared Error: the time of its log line (same host clock; polling `weft show`
    // adds its own process start-up to any other measurement).
    const errorAt = procs
      .a!.output()
      .split('\n')
      .filter((l) => l.includes('"msg":"connection check"') && l.includes('"value":"Error"'))
      .map((l) => (JSON.parse(l) as { time: number }).time)
      .find((t) => t >= killedAt);
    expect(errorAt, procs.a!.output()).toBeTypeOf('number');
    const elapsed = errorAt! - killedAt;
    await annotate(`Error ${elapsed} ms after the kill (interval ${INTERVAL_MS} ms, threshold ${LOSS_THRESHOLD})`);
    // The last reply came at most one interval (plus a round trip) before the kill, so Error cannot
    // come earlier than 4 intervals after it, nor much later than 5; the slack is for slow CI.
    expect(elapsed).toBeGreaterThanOrEqual(lossWindow - INTERVAL_MS - 100);
    expect(elapsed).toBeLessThan(lossWindow + 2000);

    const a = await peerOf('a');
    expect(a.connection).toEqual({
      value: 'Error',
      latencyMs: 0,
      reason: 'no reply to the in-tunnel connection check',
    });
    const text = await runWeft(['show', '--run-dir', runDir('a')]);
    expect(text.stdout).toContain('\n  connection: Error (no reply to the in-tunnel connection check)\n');
    const m = metrics(nsA);
    expect(metric(m, 'liqo_peer_is_connected', 'wk-cluster-b')).toBe(0);
    expect(metric(m, 'liqo_peer_latency_us', 'wk-cluster-b')).toBe(0);
    expect(procs.a!.output()).toMatch(/"value":"Error".*"msg":"connection check"/);

    // B again (same key, same addresses): A re-handshakes once its sends go unanswered
    // (WireGuard's keepalive + rekey timeout, ~15 s) and the check recovers.
    const restartAt = Date.now();
    await startGateway('b');
    await waitFor('A Connected again', async () => (await peerOf('a')).connection?.value === 'Connected', 40_000, 200);
    await annotate(
      `Connected again ${Date.now() - restartAt} ms after B restarted (${Date.now() - killedAt} ms after the kill)`,
    );
    expect((await peerOf('a')).connection!.latencyMs).toBeGreaterThan(0);
  }, 70_000);
});
