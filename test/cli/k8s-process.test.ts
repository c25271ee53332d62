// Lease takeover between real `weft k8s` processes (root): each replica runs in its own
// namespace k8xp* (TUN, sockets), and reaches the fake API server through a TCP→unix-socket
// relay inside that namespace (a unix socket crosses namespaces; no interface is added to the
// host's). The leader is killed with SIGKILL, then the next one stopped with SIGTERM; the
// figures are printed. The only bound (12 s) is one that the old 15 s lease could not meet.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FakeApiServer } from '../k8s-fake/server.js';
import { NS } from '../control/k8s/liqo-fixtures.js';
import { loadLiqo } from '../control/k8s/helpers.js';
import { e2eUnavailableReason, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, WEFT_BIN } from './helpers.js';

const skip = e2eUnavailableReason(['ip', 'timeout']);
const topo = new Topology('k8xp');
let server: FakeApiServer;
let dir = '';
const relays: Server[] = [];
const API_PORT = 6443;

/** Unix socket (host side) → the fake server's TCP port. */
async function hostRelay(path: string): Promise<void> {
  const port = Number(new URL(server.url).port);
  const s = createServer((c) => {
    const up = createConnection(port, '127.0.0.1');
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve) => s.listen(path, resolve));
  relays.push(s);
}

const NS_RELAY =
  `const net=require('net');net.createServer(c=>{const u=net.connect(process.argv[1]);c.pipe(u).pipe(c);` +
  `c.on('error',()=>u.destroy());u.on('error',()=>c.destroy());}).listen(${API_PORT},'127.0.0.1')`;

/** One replica: namespace, relay, kubeconfig, `weft k8s` process. */
async function replica(id: string): Promise<{ ns: string; proc: Spawned }> {
  const ns = topo.addNamespace(id);
  const sock = join(dir, `${id}.sock`);
  await hostRelay(sock);
  topo.spawnIn(ns, `relay-${id}`, [process.execPath, '-e', NS_RELAY, sock], { lifetimeS: 120 });
  const kc = join(dir, `${id}.kubeconfig`);
  writeFileSync(
    kc,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'fake',
      clusters: [
        {
          name: 'fake',
          cluster: {
            server: `https://127.0.0.1:${API_PORT}`,
            'certificate-authority-data': Buffer.from(server.caPem).toString('base64'),
          },
        },
      ],
      users: [{ name: 't', user: { token: server.token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 't', namespace: NS } }],
    }),
  );
  const proc = topo.spawnIn(
    ns,
    `weft-${id}`,
    [
      process.execPath,
      WEFT_BIN,
      'k8s',
      '--role',
      'gateway',
      '--cluster-id',
      'cluster-a',
      '--remote-cluster-id',
      'cluster-b',
      '--namespace',
      NS,
      '--node-name',
      'worker-1',
      '--lease-name',
      'weft-proc',
      '--identity',
      id,
      '--kubeconfig',
      kc,
      '--no-conncheck',
      '--name',
      `k8xp-${id}`,
      '--run-dir',
      join(dir, `run-${id}`),
      '--log-level',
      'info',
    ],
    { lifetimeS: 120 },
  );
  return { ns, proc };
}

/** The one child of `timeout` (spawnIn's wrapper; `ip netns exec` execs the command). */
function childPid(pid: number): number {
  const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  if (kids.length !== 1) throw new Error(`expected one child of ${pid}, found ${kids.length}`);
  return kids[0]!;
}

const hasTun = (ns: string) => topo.exec(ns, ['ip', '-o', 'link'], { allowFail: true }).includes('liqo-tunnel');
const holder = () =>
  (
    server.getObject('coordination.k8s.io/v1', 'leases', NS, 'weft-proc')?.['spec'] as
      { holderIdentity?: string } | undefined
  )?.holderIdentity;

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/control/k8s/events.js']);
  dir = mkdtempSync(join(tmpdir(), 'k8xp-'));
  server = await FakeApiServer.start();
  loadLiqo(server);
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  for (const r of relays) r.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('weft k8s processes: Lease takeover after SIGKILL and SIGTERM (defaults)', () => {
  test('the standby forwards within 12 s of a SIGKILL of the leader, and at once after a SIGTERM', async () => {
    const f = await replica('f');
    await waitFor('f leads and forwards', () => holder() === 'f' && hasTun(f.ns), 30_000, 100);
    const g = await replica('g');
    // g is up once its control socket exists; then it lists and starts polling the Lease.
    await waitFor('g up', () => existsSync(join(dir, 'run-g', 'k8xp-g.sock')), 15_000);
    await new Promise((r) => setTimeout(r, 3000));
    expect(hasTun(g.ns)).toBe(false);

    const t0 = Date.now();
    process.kill(-f.proc.pid, 'SIGKILL');
    await waitFor('g forwards after the SIGKILL', () => hasTun(g.ns), 12_000, 50);
    const tKill = Date.now() - t0;
    expect(holder()).toBe('g');

    const h = await replica('h');
    await new Promise((r) => setTimeout(r, 3000));
    expect(hasTun(h.ns)).toBe(false);
    const t1 = Date.now();
    // SIGTERM to the weft process only, as the kubelet sends it (signalling the whole group would
    // also make `timeout` forward a second SIGTERM, which ends a stopping weft at once).
    process.kill(childPid(g.proc.pid), 'SIGTERM');
    await waitFor('h forwards after the SIGTERM', () => hasTun(h.ns), 12_000, 50);
    const tTerm = Date.now() - t1;
    console.log(`processes, default Lease timing: takeover after SIGKILL ${tKill} ms, after SIGTERM ${tTerm} ms`);
    await g.proc.exited;
    // SIGTERM: the Lease release is logged at info, not as a lost Lease (warning).
    expect(g.proc.output()).toMatch(/"level":30[^\n]*"msg":"released the Lease"/);
    expect(g.proc.output()).not.toContain('lost the Lease');
    const conn = server.getObject('networking.liqo.io/v1beta1', 'connections', NS, 'cluster-b');
    expect(conn).toBeDefined();
  }, 90_000);
});
