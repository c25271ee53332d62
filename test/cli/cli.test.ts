// The `weft` command line in-process: argument parsing, help texts, and the exit-code contract
// (0 ok, 1 runtime, 2 usage, 3 configuration, 4 needs root/capability) for every failure kind
// that does not need a running data plane.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import {
  EXIT_CONFIG,
  EXIT_FAILURE,
  EXIT_PERMISSION,
  EXIT_USAGE,
  exitCodeFor,
  parseArgs,
  UsageError,
} from '../../src/cli/commands/common.js';
import { K8S_SPEC, parseK8sArgs } from '../../src/cli/commands/k8s-args.js';
import { formatBytes, formatDuration, formatStatus } from '../../src/cli/commands/status-text.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import { defaultInstanceName } from '../../src/cli/commands/up.js';
import { main, MAIN_HELP } from '../../src/cli/weft.js';
import { ConfigError } from '../../src/control/config-error.js';
import { CryptoBackendError } from '../../src/crypto/errors.js';
import { RouteCommandError } from '../../src/kernel/iproute.js';
import { TunPermissionError } from '../../src/io/tun-errors.js';
import { UdpError } from '../../src/io/udp.js';
import { captureIo } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'wc-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const COMMANDS = ['up', 'k8s', 'show', 'genkey', 'pubkey', 'genpsk', 'demo', 'bench', 'version'];

describe('parseArgs', () => {
  const spec = [
    { name: 'config', short: 'c', value: true },
    { name: 'json', value: false },
    { name: 'peer', value: true, repeatable: true },
  ] as const;

  test('long, short, inline and separate values; flags; positionals; --', () => {
    const a = parseArgs(['-c', 'f.yaml', '--json', 'x', '--peer=a', '--peer', 'b', '--', '--json'], spec);
    expect(a.options.get('config')).toBe('f.yaml');
    expect(a.options.get('json')).toBe(true);
    expect(a.lists.get('peer')).toEqual(['a', 'b']);
    expect(a.positionals).toEqual(['x', '--json']);
    expect(a.help).toBe(false);
    expect(parseArgs(['-cf.yaml'], spec).options.get('config')).toBe('f.yaml');
    expect(parseArgs(['--config=a=b'], spec).options.get('config')).toBe('a=b');
    expect(parseArgs(['-h'], spec).help).toBe(true);
    expect(parseArgs(['--help'], spec).help).toBe(true);
  });

  test('usage errors name the problem', () => {
    expect(() => parseArgs(['--nope'], spec)).toThrow(new UsageError('unknown option --nope'));
    expect(() => parseArgs(['-x'], spec)).toThrow(/unknown option -x/);
    expect(() => parseArgs(['--config'], spec)).toThrow(/--config needs a value/);
    expect(() => parseArgs(['--json=1'], spec)).toThrow(/--json takes no value/);
    expect(() => parseArgs(['-c', 'a', '-c', 'b'], spec)).toThrow(/--config given twice/);
  });
});

describe('exit codes for typed errors', () => {
  test('each error kind maps to its documented code', () => {
    expect(exitCodeFor(new UsageError('x'))).toBe(EXIT_USAGE);
    expect(exitCodeFor(new ConfigError('f.yaml', [{ path: 'a', message: 'b' }]))).toBe(EXIT_CONFIG);
    expect(exitCodeFor(new CryptoBackendError('no openssl'))).toBe(EXIT_CONFIG);
    expect(exitCodeFor(new TunPermissionError('weft0', 'TUNSETIFF: EPERM'))).toBe(EXIT_PERMISSION);
    expect(exitCodeFor(new UdpError('bind 51840: EACCES', 13))).toBe(EXIT_PERMISSION);
    expect(exitCodeFor(new UdpError('bind 51840: EADDRINUSE', 98))).toBe(EXIT_FAILURE);
    expect(
      exitCodeFor(new RouteCommandError(['ip', 'route', 'replace'], 'RTNETLINK answers: Operation not permitted', '')),
    ).toBe(EXIT_PERMISSION);
    expect(
      exitCodeFor(new RouteCommandError(['ip', 'route', 'replace'], 'Error: Nexthop has invalid gateway.', '')),
    ).toBe(EXIT_FAILURE);
    expect(exitCodeFor(Object.assign(new Error('mkdir /run/weft'), { code: 'EACCES' }))).toBe(EXIT_PERMISSION);
    expect(exitCodeFor(new Error('something broke'))).toBe(EXIT_FAILURE);
  });
});

describe('weft (main)', () => {
  test('no command: usage on stderr, exit 2; --help / help: usage on stdout, exit 0', async () => {
    const none = captureIo();
    expect(await main([], none)).toBe(2);
    expect(none.stderr).toBe(MAIN_HELP);
    for (const h of [['--help'], ['-h'], ['help']]) {
      const io = captureIo();
      expect(await main(h, io)).toBe(0);
      expect(io.stdout).toBe(MAIN_HELP);
    }
    const unknown = captureIo();
    expect(await main(['frobnicate'], unknown)).toBe(2);
    expect(unknown.stderr).toMatch(/^weft: unknown command "frobnicate"/);
  });

  test('the main help lists every command and the exit codes', () => {
    for (const c of COMMANDS) expect(MAIN_HELP).toMatch(new RegExp(`^  ${c}\\b`, 'm'));
    expect(MAIN_HELP).toMatch(
      /Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 configuration error,\s+4 needs root/,
    );
  });

  test('every command has --help (exit 0, its usage on stdout, nothing on stderr); "help CMD" is the same', async () => {
    for (const c of COMMANDS) {
      const io = captureIo();
      expect(await main([c, '--help'], io), c).toBe(0);
      expect(io.stdout, c).toMatch(new RegExp(`^Usage: weft ${c}\\b`));
      expect(io.stderr, c).toBe('');
      const io2 = captureIo();
      expect(await main(['help', c], io2)).toBe(0);
      expect(io2.stdout).toBe(io.stdout);
    }
  });

  test('version: first line is "weft VERSION"; --short only that; -V/--version too', async () => {
    const io = captureIo();
    expect(await main(['version', '--short'], io)).toBe(0);
    expect(io.stdout).toMatch(/^weft \d+\.\d+\.\d+\n$/);
    const v = captureIo();
    expect(await main(['--version'], v)).toBe(0);
    expect(v.stdout).toBe(io.stdout);
    const full = captureIo();
    expect(await main(['version'], full)).toBe(0);
    expect(full.stdout.startsWith(io.stdout)).toBe(true);
    expect(full.stdout).toMatch(/crypto auto = (openssl|node|pure)\n/);
  });
});

describe('weft up: usage and configuration errors before anything starts', () => {
  test('missing -c, stray argument, bad --log-level, bad --name: exit 2', async () => {
    for (const argv of [
      ['up'],
      ['up', 'file.yaml'],
      ['up', '-c', 'x.yaml', '--log-level', 'loud'],
      ['up', '-c', 'x.yaml', '--name', '../x'],
      ['up', '--bogus'],
    ]) {
      const io = captureIo();
      expect(await main(argv, io), argv.join(' ')).toBe(2);
      expect(io.stderr).toMatch(/^weft up: /);
      expect(io.stdout).toBe('');
    }
  });

  test('a missing file: exit 3 naming the file', async () => {
    const io = captureIo();
    const f = join(dir, 'absent.yaml');
    expect(await main(['up', '-c', f], io)).toBe(3);
    expect(io.stderr).toContain(`${f}: (root): cannot read configuration file: ENOENT`);
  });

  test('an invalid file: exit 3 with file:line: field path: what is expected, for every problem', async () => {
    const f = join(dir, 'bad.yaml');
    writeFileSync(
      f,
      [
        'role: gateway',
        'cluster:',
        '  id: a',
        '  podCIDRs: [10.0.0.0/33]',
        'wireguard:',
        '  privateKey: KDhoEFGiPp0W+S+G9mI2QmMnMCEL2f//Nma/xnbRDkU=',
        '  listenPort: 70000',
        '',
      ].join('\n'),
    );
    const io = captureIo();
    expect(await main(['up', '-c', f, '--run-dir', join(dir, 'run')], io)).toBe(3);
    expect(io.stderr).toMatch(/^weft up: invalid configuration:\n/);
    expect(io.stderr).toContain(`${f}:4: cluster.podCIDRs[0]: `);
    expect(io.stderr).toContain(`${f}:7: wireguard.listenPort: `);
  });

  test('a missing private key file: exit 3 naming it', async () => {
    const f = join(dir, 'keyfile.yaml');
    writeFileSync(f, 'role: gateway\ncluster: { id: a }\nwireguard:\n  privateKeyFile: ./nokey\n');
    const io = captureIo();
    expect(await main(['up', '-c', f], io)).toBe(3);
    expect(io.stderr).toContain(
      `${f}:4: wireguard.privateKeyFile: cannot read private key file ${join(dir, 'nokey')}: ENOENT`,
    );
  });

  test('WEFT_CRYPTO that is not a backend: exit 3', async () => {
    const f = join(dir, 'ok.yaml');
    writeFileSync(
      f,
      'role: gateway\ncluster: { id: a }\nwireguard:\n  privateKey: KDhoEFGiPp0W+S+G9mI2QmMnMCEL2f//Nma/xnbRDkU=\n',
    );
    const io = captureIo({ env: { WEFT_CRYPTO: 'quantum' } });
    expect(await main(['up', '-c', f, '--run-dir', join(dir, 'run')], io)).toBe(3);
    expect(io.stderr).toMatch(/WEFT_CRYPTO="quantum"/);
  });

  test('default instance name: the file base name, made safe', () => {
    expect(defaultInstanceName('/etc/weft/gateway-a.yaml')).toBe('gateway-a');
    expect(defaultInstanceName('node.yml')).toBe('node');
    expect(defaultInstanceName('/x/my conf.json')).toBe('my-conf');
    expect(defaultInstanceName('/x/.yaml')).toBe('weft');
  });
});

describe('weft k8s / show / demo / bench: argument checks', () => {
  const parse = (argv: string[], env: Record<string, string> = {}) => {
    const spec = [
      'role',
      'cluster-id',
      'kubeconfig',
      'namespace',
      'ipam-namespace',
      'node-name',
      'lease-name',
      'identity',
      'geneve-mode',
      'metrics-listen',
      'status-interval',
      'name',
      'run-dir',
      'log-level',
      'lease-duration',
      'lease-renew-deadline',
      'lease-retry-period',
    ]
      .map((name) => ({ name, value: true }))
      .concat([
        { name: 'remote-cluster-id', value: true, repeatable: true } as never,
        { name: 'pod-cidr', value: true, repeatable: true } as never,
        { name: 'conncheck', value: false },
      ]);
    return parseK8sArgs(parseArgs(argv, spec), env);
  };

  test("k8s: Liqo's Geneve check flags (both roles), defaults left to the runtime", () => {
    const k = (argv: string[]) => parseK8sArgs(parseArgs(['--role=node', '--node-name=w1', ...argv], K8S_SPEC), {});
    expect(k([]).geneveCheck).toEqual({ enabled: true });
    expect(k([]).geneveStatusIntervalMs).toBeUndefined();
    const s = k([
      '--geneve-ping-port=12346',
      '--geneve-ping-interval=0.5',
      '--geneve-ping-loss-threshold=3',
      '--geneve-ping-update-status-interval=30',
    ]);
    expect(s.geneveCheck).toEqual({ enabled: true, port: 12346, intervalMs: 500, lossThreshold: 3 });
    expect(s.geneveStatusIntervalMs).toBe(30_000);
    expect(k(['--no-geneve-ping']).geneveCheck?.enabled).toBe(false);
    expect(() => k(['--geneve-ping-interval=0'])).toThrow(/--geneve-ping-interval "0": seconds from 0.1 to 3600/);
    expect(() => k(['--geneve-ping-port=70000'])).toThrow(/geneve-ping-port/);
  });

  test('k8s: --host-lane tun|sockets|auto (gateway; default auto), refused for the node role', () => {
    const k = (argv: string[]) => parseK8sArgs(parseArgs(argv, K8S_SPEC), {});
    expect(k(['--role=gateway']).hostLane).toBe('auto');
    expect(k(['--role=gateway', '--host-lane=sockets']).hostLane).toBe('sockets');
    expect(k(['--role=gateway', '--host-lane', 'tun']).hostLane).toBe('tun');
    expect(() => k(['--role=gateway', '--host-lane=none'])).toThrow(/--host-lane "none": use tun, sockets or auto/);
    expect(() => k(['--role=node', '--node-name=w', '--host-lane=sockets'])).toThrow(
      /--host-lane is for the gateway role/,
    );
  });

  test("k8s: the host lane's UDP idle timeouts (gateway; default the kernel's 30 s / 120 s; flag or env; validated)", () => {
    const k = (argv: string[], env: Record<string, string> = {}) => parseK8sArgs(parseArgs(argv, K8S_SPEC), env);
    expect(k(['--role=gateway']).hostLaneUdp).toEqual({ unrepliedMs: 30_000, repliedMs: 120_000 });
    expect(
      k(['--role=gateway', '--host-lane-udp-timeout=2', '--host-lane-udp-stream-timeout', '2.5']).hostLaneUdp,
    ).toEqual({ unrepliedMs: 2000, repliedMs: 2500 });
    expect(k(['--role=gateway'], { WEFT_HOST_LANE_UDP_STREAM_TIMEOUT: '60' }).hostLaneUdp).toEqual({
      unrepliedMs: 30_000,
      repliedMs: 60_000,
    });
    expect(() => k(['--role=gateway', '--host-lane-udp-timeout=0'])).toThrow(
      /--host-lane-udp-timeout "0" \(or WEFT_HOST_LANE_UDP_TIMEOUT\): seconds from 0.1 to 3600/,
    );
    expect(() => k(['--role=gateway', '--host-lane-udp-stream-timeout=2m'])).toThrow(/seconds from 0.1 to 3600/);
    expect(() => k(['--role=node', '--node-name=w', '--host-lane-udp-timeout=5'])).toThrow(
      /--host-lane-udp-timeout is for the gateway role/,
    );
    expect(k(['--role=node', '--node-name=w']).hostLaneUdp).toBeUndefined();
  });

  test('k8s: Liqo gateway template arguments', () => {
    const liqo = (argv: string[]) => parseK8sArgs(parseArgs(argv, K8S_SPEC), {});
    const base = ['--role=gateway', '--name=peer-b', '--namespace=liqo-tenant-b', '--gateway-uid=u-1'];
    expect(() => liqo([...base, '--mode=both'])).toThrow(/use server or client/);
    expect(() => liqo(['--role=gateway', '--namespace=x', '--gateway-uid=u', '--mode=server'])).toThrow(
      /--mode needs --name/,
    );
    expect(() => liqo(['--role=gateway', '--name=n', '--namespace=x', '--mode=client'])).toThrow(
      /--mode needs --gateway-uid/,
    );
    expect(() => liqo(['--role=gateway', '--name=n', '--gateway-uid=u', '--mode=client'])).toThrow(
      /--mode needs --namespace/,
    );
    expect(() => liqo(['--role=gateway', '--gateway-uid=u'])).toThrow(/--gateway-uid is a Liqo gateway argument/);
    expect(() => liqo([...base, '--mode=server', '--leader-election=yes'])).toThrow(/true or false/);
    const s = liqo([...base, '--mode=client', '--leader-election=true', '--pod-name=peer-b-x1']);
    expect(s).toMatchObject({
      liqo: { name: 'peer-b', namespace: 'liqo-tenant-b', mode: 'client', gatewayUid: 'u-1' },
      leaseName: 'peer-b.liqo-tenant-b.client.connections.liqo.io',
      identity: 'peer-b-x1',
      podName: 'peer-b-x1',
      name: 'k8s-gateway',
      liqoNamespace: 'liqo',
    });
    expect(liqo([...base, '--mode=server', '--leader-election=false']).leaseName).toBeUndefined();
    // Without --mode, --name stays the instance name.
    expect(liqo(['--role=gateway', '--name=mine']).name).toBe('mine');
  });

  test('k8s: required flags, env fallbacks, and contradictions', () => {
    expect(() => parse([])).toThrow(/missing --role/);
    // No --cluster-id: read from Liqo's cluster-id ConfigMap at start.
    expect(parse(['--role', 'gateway']).clusterId).toBeUndefined();
    expect(() => parse(['--role', 'gateway', '--cluster-id', ''])).toThrow(/--cluster-id: empty/);
    expect(() => parse(['--role', 'node', '--cluster-id', 'a'])).toThrow(/--node-name/);
    expect(() => parse(['--role', 'gateway', '--cluster-id', 'a', '--lease-name', 'l'])).toThrow(/needs --namespace/);
    expect(() =>
      parse(['--role', 'node', '--cluster-id', 'a', '--node-name', 'n', '--lease-name', 'l', '--namespace', 'x']),
    ).toThrow(/gateway role/);
    expect(() => parse(['--role', 'router', '--cluster-id', 'a'])).toThrow(/use gateway or node/);
    expect(() => parse(['--role', 'gateway', '--cluster-id', 'a', '--geneve-mode', 'l4'])).toThrow(/l3 or l2/);
    expect(() => parse(['--role', 'gateway', '--cluster-id', 'a', '--status-interval', '0'])).toThrow(/1\.\.3600/);
    const s = parse(
      ['--role', 'gateway', '--remote-cluster-id', 'b', '--remote-cluster-id', 'c', '--lease-name', 'weft-gw'],
      { WEFT_CLUSTER_ID: 'a', POD_NAMESPACE: 'liqo-tenant-b', POD_NAME: 'weft-0', NODE_NAME: 'w1' },
    );
    expect(s).toMatchObject({
      role: 'gateway',
      clusterId: 'a',
      namespace: 'liqo-tenant-b',
      identity: 'weft-0',
      nodeName: 'w1',
      remoteClusterIds: ['b', 'c'],
      leaseName: 'weft-gw',
      name: 'k8s-gateway',
      geneveMode: 'l3',
      statusIntervalMs: 10_000,
      leaseDurationMs: 6000,
      leaseRenewDeadlineMs: 4000,
      leaseRetryPeriodMs: 1000,
    });
  });

  test('k8s: Lease timing from flags or env, checked for order', () => {
    const base = ['--role', 'gateway', '--cluster-id', 'a'];
    expect(
      parse([...base, '--lease-duration', '15', '--lease-renew-deadline', '10', '--lease-retry-period', '2']),
    ).toMatchObject({
      leaseDurationMs: 15_000,
      leaseRenewDeadlineMs: 10_000,
      leaseRetryPeriodMs: 2000,
    });
    expect(
      parse(base, { WEFT_LEASE_DURATION: '8', WEFT_LEASE_RENEW_DEADLINE: '5', WEFT_LEASE_RETRY_PERIOD: '0.5' }),
    ).toMatchObject({
      leaseDurationMs: 8000,
      leaseRenewDeadlineMs: 5000,
      leaseRetryPeriodMs: 500,
    });
    expect(() => parse([...base, '--lease-duration', '4'])).toThrow(/renew-deadline must be shorter/);
    expect(() => parse([...base, '--lease-retry-period', '4'])).toThrow(/retry-period must be shorter/);
    expect(() => parse([...base, '--lease-duration', '6.5'])).toThrow(/whole seconds/);
    expect(() => parse([...base, '--lease-duration', 'x'])).toThrow(/seconds from 0.1 to 3600/);
  });

  test('k8s: an unreadable kubeconfig is a configuration error (exit 3)', async () => {
    const io = captureIo();
    const f = join(dir, 'kubeconfig');
    writeFileSync(f, 'this: is: not yaml: [');
    expect(
      await main(
        ['k8s', '--role', 'gateway', '--cluster-id', 'a', '--kubeconfig', f, '--run-dir', join(dir, 'run')],
        io,
      ),
    ).toBe(3);
    expect(io.stderr).toMatch(/kubeconfig/);
  });

  test('show: at most one NAME; invalid names are usage errors', async () => {
    const io = captureIo();
    expect(await main(['show', 'a', 'b'], io)).toBe(2);
    const bad = captureIo();
    expect(await main(['show', '../etc'], bad)).toBe(2);
    expect(bad.stderr).toMatch(/instance name/);
  });

  test('demo and bench reject bad arguments with exit 2', async () => {
    for (const argv of [
      ['demo', '--keep', '--cleanup'],
      ['demo', '--prefix', 'Way-Too-Long'],
      ['demo', 'now'],
      ['demo', '--iperf-seconds', 'x'],
    ]) {
      const io = captureIo();
      expect(await main(argv, io), argv.join(' ')).toBe(2);
    }
  });
});

describe('status formatting', () => {
  test('the Geneve check per tunnel, the reason of an Error Connection, unknown-session handshakes', () => {
    const st: WeftStatus = {
      weft: {
        version: 'x',
        name: 'gw',
        role: 'gateway',
        pid: 1,
        startedAt: '2026-01-01T00:00:00Z',
        source: 'kubernetes',
        active: true,
      },
      cluster: { id: 'cluster-a' },
      wireguard: {
        publicKey: 'k',
        listenPort: 51840,
        crypto: 'openssl',
        unknownSession: { initiations: 2, suppressed: 1 },
        peers: [
          {
            name: 'cluster-b',
            clusterId: 'cluster-b',
            publicKey: 'p',
            hasPresharedKey: false,
            endpoint: null,
            allowedIPs: [],
            remappedCIDRs: [],
            latestHandshake: null,
            rxBytes: 0,
            txBytes: 0,
            persistentKeepalive: 0,
            connection: {
              value: 'Error',
              latencyMs: 1.5,
              reason: 'every Geneve tunnel to the nodes is down (worker-1: …)',
            },
          },
        ],
      },
      geneve: {
        port: 6091,
        tunnels: [
          {
            vni: 3,
            name: 'worker-1',
            remoteUnderlay: '10.0.0.2',
            rxPackets: 1,
            txPackets: 1,
            drops: 0,
            check: { value: 'Error', latencyMs: 0 },
          },
          {
            vni: 4,
            name: 'worker-2',
            remoteUnderlay: '10.0.0.3',
            rxPackets: 1,
            txPackets: 1,
            drops: 0,
            check: { value: 'Connected', latencyMs: 0.25 },
          },
        ],
      },
      drops: {},
      queues: {},
    };
    const text = formatStatus(st, Date.parse('2026-01-01T00:01:00Z'));
    expect(text).toContain('  connection: Error (every Geneve tunnel to the nodes is down (worker-1: …))');
    expect(text).toContain('  unknown-session handshakes: 2 initiated, 1 held back');
    expect(text).toMatch(/geneve tunnel: vni 3 \(worker-1\)\n.*\n.*\n  check: Error\n/);
    expect(text).toContain('  check: Connected, latency 0.250 ms');
  });

  test('durations and byte counts read like wg show', () => {
    expect(formatDuration(0)).toBe('0 seconds');
    expect(formatDuration(1)).toBe('1 second');
    expect(formatDuration(61)).toBe('1 minute, 1 second');
    expect(formatDuration(3600 * 26 + 2)).toBe('1 day, 2 hours, 2 seconds');
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(5 * 1024 * 1024 * 1024)).toBe('5.00 GiB');
  });
});
