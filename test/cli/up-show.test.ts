// `weft up` + `weft show` for real: two node-less gateways (clusters A and B, same pod CIDR,
// remapped) in namespaces wc-up-a / wc-up-b joined by a veth, each run as `node bin/weft up -c
// FILE` in its namespace. Checks the control socket (show --json and text), the metrics
// endpoint, live reload (file change and SIGHUP), a clean SIGTERM stop, and exit codes 1 and 4.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import { DAEMON_INTERRUPT_BUDGET, daemonTieringFlags } from '../../src/cli/v8-tiering.js';
import { e2eUnavailableReason, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, runWeft, WEFT_BIN } from './helpers.js';

const skip = e2eUnavailableReason(['wg', 'curl']);
const topo = new Topology('wc-up');
let dir = '';
let nsA = '';
let nsB = '';
let gwA: Spawned | undefined;
let gwB: Spawned | undefined;
const keys = { a: '', b: '', aPub: '', bPub: '', c: '' };

function wg(args: string[], input = ''): string {
  return spawnSync('wg', args, { input, encoding: 'utf8' }).stdout.trim();
}

function gatewayYaml(me: 'a' | 'b', extraPeer = ''): string {
  const other = me === 'a' ? 'b' : 'a';
  return `role: gateway
cluster:
  id: wc-cluster-${me}
  podCIDRs: [10.0.0.0/16]
wireguard:
  privateKeyFile: ./${me}.key
  listenPort: 51840
  interfaceName: wc-tun-${me}
peers:
  - name: cluster-${other}
    clusterId: wc-cluster-${other}
    publicKey: ${me === 'a' ? keys.bPub : keys.aPub}
${me === 'a' ? '    endpoint: 198.18.7.2:51840\n' : ''}    remote: { podCIDRs: [10.0.0.0/16], externalCIDRs: [10.70.0.0/16] }
    remapped: { podCIDRs: [10.71.0.0/16], externalCIDRs: [10.72.0.0/16] }
${extraPeer}geneve:
  listenAddress: 127.0.0.1
metrics:
  listen: 127.0.0.1:9464
logging:
  level: info
`;
}

async function show(runDir: string, name?: string): Promise<WeftStatus> {
  const r = await runWeft(['show', '--json', '--run-dir', runDir, ...(name ? [name] : [])]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as WeftStatus;
}

function startUp(ns: string, label: string, file: string, runDir: string, env: NodeJS.ProcessEnv = {}): Spawned {
  return topo.spawnIn(ns, label, [process.execPath, WEFT_BIN, 'up', '-c', file, '--run-dir', runDir], {
    lifetimeS: 120,
    env,
  });
}

/** The v8Tiering field of a daemon's "weft up: running" log line (logging.level info). */
function tieringLogged(output: string): unknown {
  const line = output.split('\n').find((l) => l.includes('"weft up: running"'));
  expect(line, output).toBeDefined();
  return (JSON.parse(line!) as { v8Tiering?: unknown }).v8Tiering;
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/cli/commands/up.js', 'src/gateway/gateway.js']);
  dir = mkdtempSync(join(tmpdir(), 'wc-up-'));
  keys.a = wg(['genkey']);
  keys.b = wg(['genkey']);
  keys.aPub = wg(['pubkey'], keys.a);
  keys.bPub = wg(['pubkey'], keys.b);
  keys.c = wg(['pubkey'], wg(['genkey']));
  writeFileSync(join(dir, 'a.key'), `${keys.a}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'b.key'), `${keys.b}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a'));
  writeFileSync(join(dir, 'gateway-b.yaml'), gatewayYaml('b'));
  nsA = topo.addNamespace('a');
  nsB = topo.addNamespace('b');
  topo.link(nsA, 'wc-wan-a', '198.18.7.1/24', nsB, 'wc-wan-b', '198.18.7.2/24');
  // B with V8's own tiering (the variable unset), A with the daemon tiering at weft-wg's
  // budget: the start log says which one each daemon runs with.
  gwB = startUp(nsB, 'gateway-b', join(dir, 'gateway-b.yaml'), join(dir, 'run-b'), {
    WEFT_V8_INTERRUPT_BUDGET: undefined,
  });
  gwA = startUp(nsA, 'gateway-a', join(dir, 'gateway-a.yaml'), join(dir, 'run-a'), {
    WEFT_V8_INTERRUPT_BUDGET: String(DAEMON_INTERRUPT_BUDGET),
  });
  for (const [g, d] of [
    [gwA, 'run-a'],
    [gwB, 'run-b'],
  ] as const) {
    await waitFor(
      `${g.name} control socket`,
      () => {
        if (g.child.exitCode !== null) throw new Error(`${g.name} exited: ${g.output()}`);
        return existsSync(join(dir, d, `gateway-${d.slice(-1)}.sock`));
      },
      20_000,
    );
    // The control socket answers while the data plane still starts (the WireGuard warm-up runs
    // first): status says active once it forwards.
    await waitFor(
      `${g.name} active`,
      async () => (await show(join(dir, d), `gateway-${d.slice(-1)}`)).weft.active,
      20_000,
    );
  }
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skip !== null)('weft up / show against two running gateways', () => {
  test('show --json: identity, peer configuration, ports, no secrets', async () => {
    const st = await show(join(dir, 'run-a'), 'gateway-a');
    expect(st.weft).toMatchObject({
      name: 'gateway-a',
      role: 'gateway',
      active: true,
      source: join(dir, 'gateway-a.yaml'),
    });
    // The node process inside `timeout … ip netns exec …` (spawnIn's wrapper).
    expect(spawnSync('ps', ['-o', 'args=', '-p', String(st.weft.pid)], { encoding: 'utf8' }).stdout).toContain(
      'gateway-a.yaml',
    );
    expect(st.cluster.id).toBe('wc-cluster-a');
    expect(st.wireguard?.publicKey).toBe(keys.aPub);
    expect(st.wireguard?.listenPort).toBe(51840);
    expect(st.geneve.port).toBe(6091);
    expect(st.interface?.name).toBe('wc-tun-a');
    // Offloads on by default (WEFT_OFFLOAD unset): the TUN and the Geneve socket on 127.0.0.1 (lo can segment).
    expect(st.offloads?.tun).toMatchObject({ csum: true, tso: true });
    expect(st.offloads?.geneve).toEqual({ gso: true, gro: true });
    const p = st.wireguard!.peers;
    expect(p).toHaveLength(1);
    expect(p[0]).toMatchObject({
      name: 'cluster-b',
      clusterId: 'wc-cluster-b',
      publicKey: keys.bPub,
      endpoint: '198.18.7.2:51840',
      allowedIPs: ['10.0.0.0/16', '10.70.0.0/16'],
      remappedCIDRs: ['10.71.0.0/16', '10.72.0.0/16'],
      hasPresharedKey: false,
    });
    const raw = JSON.stringify(st);
    expect(raw).not.toContain(keys.a);
    expect(raw).not.toContain(keys.b);
  });

  test('WEFT_V8_INTERRUPT_BUDGET=N: the daemon runs with the daemon V8 tiering, logged at start; unset: V8 defaults', async () => {
    await waitFor('both start logs', () => [gwA!, gwB!].every((g) => /"weft up: running"/.test(g.output())), 10_000);
    expect(tieringLogged(gwA!.output())).toBe(daemonTieringFlags(String(DAEMON_INTERRUPT_BUDGET)).join(' '));
    expect(tieringLogged(gwB!.output())).toBe('V8 defaults');
  });

  test('traffic to a remapped address: handshake, transfer and drops appear in show and metrics', async () => {
    // A packet from gateway A's host to B's remapped pod range starts the handshake; B has no
    // pod routes, so B counts the packet as a routing drop after the NAT.
    await waitFor(
      'handshake A→B',
      async () => {
        topo.exec(nsA, ['ping', '-c', '1', '-W', '1', '10.71.0.9'], { allowFail: true });
        const st = await show(join(dir, 'run-a'), 'gateway-a');
        return st.wireguard!.peers[0]!.latestHandshake !== null;
      },
      20_000,
      200,
    );
    const a = await show(join(dir, 'run-a'), 'gateway-a');
    const pa = a.wireguard!.peers[0]!;
    expect(pa.txBytes).toBeGreaterThan(0);
    expect(pa.rxBytes).toBeGreaterThan(0);
    expect(Date.now() - Date.parse(pa.latestHandshake!)).toBeLessThan(60_000);
    // The host's pings are masqueraded: connections of the compiled rules (YAML mode's default)
    // are the NAT entries show reports, as the derived NAT's were.
    expect(a.nat?.entries).toBeGreaterThan(0);
    const b = await show(join(dir, 'run-b'), 'gateway-b');
    const pb = b.wireguard!.peers[0]!;
    expect(pb.endpoint).toBe('198.18.7.1:51840'); // learned from the handshake (B has none configured)
    expect(pb.latestHandshake).not.toBeNull();
    await waitFor(
      'routing drop at B',
      async () => Object.keys((await show(join(dir, 'run-b'), 'gateway-b')).drops).some((k) => k.startsWith('route_')),
      10_000,
      200,
    );

    const text = await runWeft(['show', '--run-dir', join(dir, 'run-a')]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^gateway: gateway-a\n/);
    expect(text.stdout).toMatch(/\n {2}offloads: tun csum tso( uso)?, geneve udp gso gro\n/);
    expect(text.stdout).toContain(`peer: ${keys.bPub}\n`);
    expect(text.stdout).toMatch(/\n {2}nat entries: [1-9]\d*, forwarded \d+/);
    expect(text.stdout).toMatch(/\n {2}latest handshake: (\d+ seconds?|0 seconds) ago\n/);
    expect(text.stdout).toMatch(/\n {2}transfer: \d+(\.\d+)? (B|KiB) received, \d+(\.\d+)? (B|KiB) sent\n/);

    const metrics = topo.exec(nsA, ['curl', '-sf', 'http://127.0.0.1:9464/metrics']);
    expect(metrics).toContain('liqo_peer_is_connected{driver="wireguard",cluster_id="wc-cluster-b"} 1');
    expect(metrics).toMatch(/weft_handshakes_total\{cluster_id="wc-cluster-b"\} [1-9]/);
  });

  test('a file change adds a peer live; SIGHUP re-reads; sessions of the kept peer survive', async () => {
    const before = (await show(join(dir, 'run-a'), 'gateway-a')).wireguard!.peers[0]!;
    const extra = `  - name: cluster-c\n    clusterId: wc-cluster-c\n    publicKey: ${keys.c}\n    remote: { podCIDRs: [10.5.0.0/16] }\n    remapped: { podCIDRs: [10.75.0.0/16] }\n`;
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a', extra));
    await waitFor(
      'peer cluster-c',
      async () => (await show(join(dir, 'run-a'), 'gateway-a')).wireguard!.peers.length === 2,
      10_000,
      200,
    );
    const after = (await show(join(dir, 'run-a'), 'gateway-a')).wireguard!.peers;
    expect(after.map((p) => p.name)).toEqual(['cluster-b', 'cluster-c']);
    expect(after[0]!.latestHandshake).toBe(before.latestHandshake); // not re-created
    expect(after[0]!.txBytes).toBeGreaterThanOrEqual(before.txBytes);
    // Back to one peer, applied by SIGHUP (no watch needed: the signal re-reads the file).
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a'));
    process.kill((await show(join(dir, 'run-a'), 'gateway-a')).weft.pid, 'SIGHUP');
    await waitFor(
      'peer cluster-c removed',
      async () => (await show(join(dir, 'run-a'), 'gateway-a')).wireguard!.peers.length === 1,
      10_000,
      200,
    );
  });

  test('an invalid file on reload is rejected and the running configuration stays', async () => {
    const st0 = await show(join(dir, 'run-a'), 'gateway-a');
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a').replace('listenPort: 51840', 'listenPort: "many"'));
    process.kill(st0.weft.pid, 'SIGHUP');
    await waitFor('rejection logged', () => /reload rejected/.test(gwA!.output()), 10_000);
    expect(gwA!.output()).toMatch(/wireguard\.listenPort/);
    const st = await show(join(dir, 'run-a'), 'gateway-a');
    expect(st.wireguard!.listenPort).toBe(51840);
    writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a'));
  });

  test('a second instance with the same name exits 1 without touching the running one', async () => {
    const r = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const c = spawn(
        'ip',
        [
          'netns',
          'exec',
          nsA,
          process.execPath,
          WEFT_BIN,
          'up',
          '-c',
          join(dir, 'gateway-a.yaml'),
          '--run-dir',
          join(dir, 'run-a'),
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      c.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      const t = setTimeout(() => c.kill('SIGKILL'), 20_000);
      c.once('close', (code) => {
        clearTimeout(t);
        resolve({ code, err });
      });
    });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/another weft named "gateway-a" is running/);
    expect((await show(join(dir, 'run-a'), 'gateway-a')).weft.active).toBe(true);
  });

  test('show of an unknown instance exits 1; an empty run directory exits 1', async () => {
    const r = await runWeft(['show', 'nope', '--run-dir', join(dir, 'run-a')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/nope:.*cannot connect/);
    const e = await runWeft(['show', '--run-dir', join(dir, 'empty')]);
    expect(e.code).toBe(1);
    expect(e.stderr).toMatch(/no running weft/);
  });

  test('without CAP_NET_ADMIN up exits 4 and says what is needed', async () => {
    // A world-readable copy of A's configuration (inline key, another TUN name), run as nobody.
    const pub = mkdtempSync(join(tmpdir(), 'wc-up-nobody-'));
    try {
      chmodSync(pub, 0o777);
      writeFileSync(
        join(pub, 'gw.yaml'),
        gatewayYaml('a').replace('privateKeyFile: ./a.key', `privateKey: ${keys.a}`).replace('wc-tun-a', 'wc-tun-x'),
        { mode: 0o644 },
      );
      const r = spawnSync(
        'ip',
        [
          'netns',
          'exec',
          nsA,
          'setpriv',
          '--reuid=65534',
          '--regid=65534',
          '--clear-groups',
          '--inh-caps=-all',
          process.execPath,
          WEFT_BIN,
          'up',
          '-c',
          join(pub, 'gw.yaml'),
          '--run-dir',
          join(pub, 'run'),
        ],
        { encoding: 'utf8', timeout: 20_000 },
      );
      expect(r.status, r.stderr).toBe(4);
      expect(r.stderr).toMatch(/CAP_NET_ADMIN/);
      expect(r.stderr).toMatch(/wc-tun-x/);
    } finally {
      rmSync(pub, { recursive: true, force: true });
    }
  });

  test('SIGTERM: clean stop, exit 0, socket and TUN removed', async () => {
    // SIGTERM to the weft process itself (not the timeout wrapper), whose exit status timeout(1) passes on.
    for (const [g, d, n] of [
      [gwA!, 'run-a', 'gateway-a'],
      [gwB!, 'run-b', 'gateway-b'],
    ] as const) {
      const pid = (await show(join(dir, d), n)).weft.pid;
      process.kill(pid, 'SIGTERM');
      const code = await Promise.race([g.exited, new Promise((r) => setTimeout(() => r('timeout'), 10_000))]);
      expect(code, g.output()).toBe(0);
      expect(existsSync(join(dir, d, `${n}.sock`))).toBe(false);
    }
    expect(topo.exec(nsA, ['ip', '-o', 'link'])).not.toContain('wc-tun-a');
    expect(topo.exec(nsB, ['ip', '-o', 'link'])).not.toContain('wc-tun-b');
  });
});
