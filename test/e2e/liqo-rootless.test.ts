// A gateway without a host device, as real processes (root sets up; the gateways do not run as
// root). Two Liqo-shaped clusters as in liqo-pods.test.ts, but each gateway runs from deploy/liqo's
// RESTRICTED template (--host-lane=sockets) under setpriv as uid/gid 65534 with no supplementary
// group, every capability dropped from the inheritable and bounding sets (no TUN, no NET_ADMIN),
// net.ipv4.ping_group_range in its network namespace set as the template's safe sysctl sets it:
//   app pod lrXp 10.0.1.5 ─ node worker-1 lrXn (node agent, root: Geneve 6091) ─ gateway pod lrXg
//   10.244.0.10 (uid 65534) ═ WAN 192.168.78.1 ⇄ .2 ═ the other gateway; cluster a's gateway pod
//   also has a second link to an out-of-cluster host lrax 192.168.99.2 (its "eth0" route).
// Proves: pod ⇄ remote pod through Geneve and WireGuard both ways; both Connections Connected by
// the in-process connection check; ping from the pod to its gateway's own (internal) address,
// answered by the gateway; a UDP exchange and ICMP echo between the pod and the out-of-cluster
// host through the gateway's host lane (a RouteConfiguration routes the host dev eth0 from the
// gateway, the fabric routes it to the gateway), relayed by the gateway's own sockets; weft show
// says it runs without a host device; the process has uid 65534 and no capability. And the
// fall-back: `weft up --host-lane auto` as uid 65534 without capabilities cannot create its TUN,
// says so on stderr, and runs with the host lane in process.
import {
  chmodSync,
  chownSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import type { FakeApiServer } from '../k8s-fake/server.js';
import type { GatewayObject } from '../k8s-fake/liqo-render.js';
import {
  liqoFirewallConfigurations,
  liqoPeeringSide,
  tenantNamespace,
  type PeeringSide,
} from '../k8s-fake/liqo-peering.js';
import { e2eUnavailableReason, ping, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, ROOT, runWeft, WEFT_BIN } from '../cli/helpers.js';
import {
  NET,
  gatewayObject,
  gatewayPodCommand,
  hostRelay,
  nodeAgentCommand,
  relayIn,
  saKubeconfig,
  startLiqoApiServer,
  weftPid,
} from './liqo-processes.js';

const skip = e2eUnavailableReason(['ip', 'ping', 'timeout', 'setpriv']);
const topo = new Topology('lr');
const WAN = { a: '192.168.78.1', b: '192.168.78.2' } as const;
const GW_POD_IP = '10.244.0.10';
const NODE_HOST_IP = '10.244.0.1';
const POD_IP = '10.0.1.5';
const POD_IP_REMOTE = '10.71.1.5';
/** The gateway's internal address (the fabric IPAM's first: test/k8s-fake/liqo-peering.ts). */
const GW_INTERNAL = '10.80.0.1';
const EXT_GW = '192.168.99.1';
const EXT_HOST = '192.168.99.2';
const NOBODY = 65534;
const SETPRIV = [
  'setpriv',
  `--reuid=${NOBODY}`,
  `--regid=${NOBODY}`,
  '--clear-groups',
  '--inh-caps=-all',
  '--bounding-set=-all',
  '--',
];

type Letter = 'a' | 'b';
interface Cluster {
  letter: Letter;
  id: string;
  remote: string;
  server: FakeApiServer;
  ns: string;
  gw: GatewayObject;
  sock: string;
  keyDir: string;
}
const clusters = new Map<Letter, Cluster>();
const relays: Server[] = [];
const procs = new Map<string, Spawned>();
let dir = '';

/** Cluster a: the out-of-cluster host routed out of the gateway's own interface (eth0), and towards the gateway on the node. */
function externalRoutes(): Record<string, unknown>[] {
  return [
    {
      apiVersion: NET,
      kind: 'RouteConfiguration',
      metadata: {
        name: 'e2e-external-gw',
        namespace: 'liqo',
        labels: { 'networking.liqo.io/route-category': 'gateway', 'networking.liqo.io/route-subcategory': 'fabric' },
      },
      spec: {
        table: {
          name: 'e2e-external-gw',
          rules: [{ dst: `${EXT_HOST}/32`, routes: [{ dst: `${EXT_HOST}/32`, dev: 'eth0' }] }],
        },
      },
    },
    {
      apiVersion: NET,
      kind: 'RouteConfiguration',
      metadata: {
        name: 'e2e-external-node-gw',
        namespace: 'liqo',
        labels: { 'networking.liqo.io/route-category': 'fabric' },
      },
      spec: {
        table: { name: 'e2e-external-node-gw', rules: [{ routes: [{ dst: `${EXT_HOST}/32`, gw: GW_INTERNAL }] }] },
      },
    },
  ];
}

async function startCluster(letter: Letter, keys: Record<Letter, { priv: string; pub: string }>): Promise<Cluster> {
  const other: Letter = letter === 'a' ? 'b' : 'a';
  const id = `cluster-${letter}`;
  const remote = `cluster-${other}`;
  const side: PeeringSide = {
    local: id,
    remote,
    side: letter === 'a' ? 'server' : 'client',
    privateKey: keys[letter].priv,
    publicKey: keys[letter].pub,
    remotePublicKey: keys[other].pub,
    endpoint: { address: WAN.a, port: 51840 },
    gatewayPod: { ip: GW_POD_IP, node: 'worker-1' },
    nodes: [{ name: 'worker-1', pods: [{ name: 'app', ip: POD_IP }] }],
    liqoMode: { mss: 1300 },
  };
  const res: LiqoResources = liqoPeeringSide(side);
  const ns = tenantNamespace(remote);
  const server = await startLiqoApiServer({
    clusterId: id,
    res,
    extra: [
      { plural: 'firewallconfigurations', objects: liqoFirewallConfigurations(side) },
      ...(letter === 'a' ? [{ plural: 'routeconfigurations', objects: externalRoutes() }] : []),
    ],
    gateway: { namespace: ns, name: remote },
  });
  const gw = gatewayObject(server, letter === 'a' ? 'server' : 'client', ns, remote);
  const sock = join(dir, `${letter}-api.sock`);
  relays.push(await hostRelay(server, sock));
  const keyDir = join(dir, `keys-${letter}`);
  mkdirSync(keyDir);
  writeFileSync(join(keyDir, 'privateKey'), Buffer.from(keys[letter].priv, 'base64'));
  const c: Cluster = { letter, id, remote, server, ns, gw, sock, keyDir };
  clusters.set(letter, c);
  return c;
}

/** A directory uid 65534 may write (its control socket). */
function nobodyDir(path: string): string {
  mkdirSync(path, { recursive: true });
  chownSync(path, NOBODY, NOBODY);
  return path;
}

/** The gateway pod from the restricted template, as uid 65534 with no capability, in lrXg. */
function startGateway(c: Cluster): Spawned {
  const mode = c.letter === 'a' ? 'server' : 'client';
  const pod = `${c.remote}-1`;
  const cmd = gatewayPodCommand(mode, c.gw, pod, 'worker-1', `wireguard-${mode}-template-restricted.yaml`);
  expect(cmd.args).toContain('--host-lane=sockets');
  c.server.put('v1', 'pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod, namespace: c.ns, labels: cmd.labels },
    spec: {
      nodeName: 'worker-1',
      serviceAccountName: cmd.serviceAccount,
      containers: [{ name: 'gateway', image: 'weft' }],
    },
    status: { phase: 'Running', podIP: GW_POD_IP, hostIP: NODE_HOST_IP },
  });
  const argv = cmd.args
    .filter((a) => !a.startsWith('--metrics-listen='))
    .map((a) => (a.startsWith('--wireguard-key-dir=') ? `--wireguard-key-dir=${c.keyDir}` : a));
  const kc = saKubeconfig(c.server, join(dir, `${c.letter}-gw.kubeconfig`), c.ns, cmd.serviceAccount);
  const runDir = nobodyDir(join(dir, `run-gw-${c.letter}`));
  const proc = topo.spawnIn(
    topo.ns(`${c.letter}g`),
    `gw-${c.letter}`,
    [...SETPRIV, process.execPath, WEFT_BIN, ...argv, `--kubeconfig=${kc}`, `--run-dir=${runDir}`],
    { lifetimeS: 300, env: { ...cmd.env, WEFT_RUN_DIR: runDir } },
  );
  procs.set(`gw-${c.letter}`, proc);
  return proc;
}

function startNodeAgent(c: Cluster): Spawned {
  const cmd = nodeAgentCommand(c.id, 'worker-1', 'weft-fabric-w1', NODE_HOST_IP);
  const kc = saKubeconfig(c.server, join(dir, `${c.letter}-node.kubeconfig`), 'liqo', cmd.serviceAccount);
  const proc = topo.spawnIn(
    topo.ns(`${c.letter}n`),
    `node-${c.letter}`,
    [process.execPath, WEFT_BIN, ...cmd.args, `--kubeconfig=${kc}`, `--run-dir=${join(dir, `run-node-${c.letter}`)}`],
    { lifetimeS: 300, env: cmd.env },
  );
  procs.set(`node-${c.letter}`, proc);
  return proc;
}

async function show(runDir: string): Promise<WeftStatus> {
  const sock = readdirSync(runDir).find((f) => f.endsWith('.sock'));
  if (sock === undefined) throw new Error(`no control socket in ${runDir}`);
  const r = await runWeft(['show', sock.slice(0, -5), '--json', '--run-dir', runDir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`weft show (${runDir}): ${r.code} ${r.stderr}`);
  return JSON.parse(r.stdout) as WeftStatus;
}

const status = (c: Cluster) =>
  c.server.getObject(NET, 'connections', c.ns, `gw-${c.remote}`)?.['status'] as
    { value?: string; latency?: { value?: string } } | undefined;
const podNs = (l: Letter) => topo.ns(`${l}p`);
const diag = (): string => [...procs].map(([n, p]) => `--- ${n}\n${p.output().slice(-2500)}`).join('\n');

/** One UDP request/reply from `ns` to addr:port (node's dgram, bounded): the reply text or ''. */
function udpExchange(ns: string, addr: string, port: number, text: string): string {
  const js =
    `const s=require('dgram').createSocket('udp4');s.on('message',m=>{process.stdout.write(m.toString());process.exit(0)});` +
    `let n=0;const t=setInterval(()=>{if(n++>10){process.exit(1)}s.send(${JSON.stringify(text)},${port},${JSON.stringify(addr)})},300);`;
  return topo.exec(ns, [process.execPath, '-e', js], { allowFail: true, timeoutMs: 10_000 }).trim();
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/pipelines/host-lane.js']);
  dir = mkdtempSync(join(tmpdir(), 'lr-rootless-'));
  chmodSync(dir, 0o755); // uid 65534 reads its kubeconfig and key below it
  for (const l of ['a', 'b'] as const) {
    const g = topo.addNamespace(`${l}g`);
    const n = topo.addNamespace(`${l}n`);
    const p = topo.addNamespace(`${l}p`);
    topo.link(g, `${l}g-n`, `${GW_POD_IP}/24`, n, `${l}n-g`, `${NODE_HOST_IP}/24`);
    topo.link(n, `${l}n-p`, '10.0.1.1/24', p, `${l}p-n`, `${POD_IP}/24`);
    topo.exec(n, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    topo.exec(p, ['ip', 'route', 'add', 'default', 'via', '10.0.1.1']);
    // The restricted template's pod sysctl: the gateway's group may open ICMP sockets.
    topo.exec(g, ['sysctl', '-qw', `net.ipv4.ping_group_range=${NOBODY} ${NOBODY}`]);
  }
  topo.link(topo.ns('ag'), 'ag-w', `${WAN.a}/24`, topo.ns('bg'), 'bg-w', `${WAN.b}/24`);
  const x = topo.addNamespace('ax');
  topo.link(topo.ns('ag'), 'ag-x', `${EXT_GW}/24`, x, 'ax-g', `${EXT_HOST}/24`);
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  for (const r of relays) r.close();
  for (const c of clusters.values()) await c.server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(skip !== null)('a gateway without a host device: uid 65534, no capabilities (processes)', () => {
  test('pod ⇄ remote pod, the connection check, ping to the gateway, UDP, TCP and ICMP echo out of the gateway through the host lane', async () => {
    const backend = getCryptoBackend('auto');
    const keys = Object.fromEntries(
      (['a', 'b'] as const).map((l) => {
        const priv = generatePrivateKeyBase64(backend);
        return [l, { priv, pub: publicKeyBase64(backend, priv) }];
      }),
    ) as Record<Letter, { priv: string; pub: string }>;
    const ca = await startCluster('a', keys);
    const cb = await startCluster('b', keys);
    // The out-of-cluster host: a UDP echo server.
    const echo = topo.spawnIn(
      topo.ns('ax'),
      'udp-echo',
      [
        process.execPath,
        '-e',
        `const s=require('dgram').createSocket('udp4');s.on('message',(m,r)=>s.send('echo:'+m+' from '+r.address,r.port,r.address));s.bind(7007,'${EXT_HOST}',()=>console.log('bound'))`,
      ],
      { lifetimeS: 300 },
    );
    procs.set('udp-echo', echo);
    // And a TCP server: it answers the sha256 of all it received and the peer's address, then ends.
    const tcpSrv = topo.spawnIn(
      topo.ns('ax'),
      'tcp-sha',
      [
        process.execPath,
        '-e',
        `const h=require('crypto');require('net').createServer({allowHalfOpen:true},(c)=>{const d=h.createHash('sha256');c.on('data',(b)=>d.update(b));c.on('end',()=>c.end(d.digest('hex')+' from '+c.remoteAddress))}).listen(7008,'${EXT_HOST}',()=>console.log('listening'))`,
      ],
      { lifetimeS: 300 },
    );
    procs.set('tcp-sha', tcpSrv);
    for (const c of [ca, cb]) {
      relayIn(topo, topo.ns(`${c.letter}g`), c.sock, 300);
      relayIn(topo, topo.ns(`${c.letter}n`), c.sock, 300);
      startNodeAgent(c);
      startGateway(c);
    }
    try {
      await waitFor(
        'Connected on both sides (in-process connection check)',
        () => status(ca)?.value === 'Connected' && status(cb)?.value === 'Connected',
        45_000,
      );
      // The gateway process: uid 65534, no capability at all.
      for (const l of ['a', 'b'] as const) {
        const pid = weftPid(procs.get(`gw-${l}`)!);
        const st = readFileSync(`/proc/${pid}/status`, 'utf8');
        expect(st).toMatch(new RegExp(`^Uid:\\s+${NOBODY}\\s+${NOBODY}\\s+${NOBODY}\\s+${NOBODY}$`, 'm'));
        for (const k of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'])
          expect(st, k).toMatch(new RegExp(`^${k}:\\s+0000000000000000$`, 'm'));
      }
      await waitFor(
        'pod a → pod b answers',
        () => ping(topo, podNs('a'), POD_IP_REMOTE, 1, 0.2).received === 1,
        20_000,
        200,
      );
      const ab = ping(topo, podNs('a'), POD_IP_REMOTE, 10, 0.1);
      const ba = ping(topo, podNs('b'), POD_IP_REMOTE, 10, 0.1);
      console.log(
        `[lr] pod a → pod b ${ab.received}/10 (avg ${ab.avgMs} ms), pod b → pod a ${ba.received}/10 (avg ${ba.avgMs} ms)`,
      );
      expect(ab.received).toBeGreaterThanOrEqual(9);
      expect(ba.received).toBeGreaterThanOrEqual(9);
      // The gateway's own address, answered by the gateway (no kernel holds it).
      const own = ping(topo, podNs('a'), GW_INTERNAL, 5, 0.1);
      console.log(`[lr] pod a → its gateway ${GW_INTERNAL}: ${own.received}/5 (avg ${own.avgMs} ms)`);
      expect(own.received).toBeGreaterThanOrEqual(4);
      // UDP to the out-of-cluster host through the host lane: the gateway's own socket carries it.
      await waitFor('udp echo bound', () => echo.output().includes('bound'), 5000);
      const r1 = udpExchange(podNs('a'), EXT_HOST, 7007, 'hello');
      console.log(`[lr] UDP pod a → ${EXT_HOST}:7007 through the host lane: ${JSON.stringify(r1)}`);
      expect(r1).toBe(`echo:hello from ${EXT_GW}`);
      const icmp = ping(topo, podNs('a'), EXT_HOST, 5, 0.1);
      console.log(
        `[lr] ICMP echo pod a → ${EXT_HOST} through the host lane: ${icmp.received}/5 (avg ${icmp.avgMs} ms)`,
      );
      expect(icmp.received).toBeGreaterThanOrEqual(4);
      const st = await show(join(dir, 'run-gw-a'));
      console.log(`[lr] weft show hostLane ${JSON.stringify(st.hostLane)}`);
      expect(st.hostLane?.mode).toBe('sockets');
      expect(st.hostLane?.reason).toMatch(/--host-lane=sockets/);
      expect(st.hostLane?.answered).toBeGreaterThanOrEqual(4);
      expect(st.hostLane?.flows?.['udp']).toBe(1);
      expect(st.hostLane?.flows?.['icmp_echo']).toBe(1);
      expect(st.hostLane?.icmpEchoUnavailable).toBeNull();
      expect(st.hostLane?.handlers?.[6]).toBe('tcp');
      // TCP to the out-of-cluster host: terminated in the gateway, carried on by its own socket.
      await waitFor('tcp server listening', () => tcpSrv.output().includes('listening'), 5000);
      const tcpJs =
        `const h=require('crypto');const b=h.randomBytes(1<<20);const want=h.createHash('sha256').update(b).digest('hex');` +
        `const c=require('net').connect({host:'${EXT_HOST}',port:+process.argv[1],allowHalfOpen:true});let r='';` +
        `c.on('data',(d)=>r+=d);c.on('end',()=>{console.log(r.startsWith(want+' ')?'sha-ok'+r.slice(64):'sha-bad '+r);c.end()});` +
        `c.on('error',(e)=>console.log('error '+e.code));c.end(b);setTimeout(()=>{console.log('timeout');process.exit(1)},20000).unref()`;
      const tcp = topo
        .exec(podNs('a'), [process.execPath, '-e', tcpJs, '7008'], { allowFail: true, timeoutMs: 25_000 })
        .trim();
      console.log(`[lr] TCP pod a → ${EXT_HOST}:7008 through the host lane, 1 MiB: ${JSON.stringify(tcp)}`);
      expect(tcp).toBe(`sha-ok from ${EXT_GW}`);
      // Nothing listens on 7009: the pod's connection is reset (the gateway's connect was refused).
      const refused = topo
        .exec(podNs('a'), [process.execPath, '-e', tcpJs, '7009'], { allowFail: true, timeoutMs: 25_000 })
        .trim();
      console.log(`[lr] TCP pod a → ${EXT_HOST}:7009 (closed port): ${JSON.stringify(refused)}`);
      expect(refused).toMatch(/^error (ECONNRESET|EPIPE)/);
      const st2 = await show(join(dir, 'run-gw-a'));
      expect(st2.drops['host_lane_tcp_connect_failed']).toBe(1);
      expect(procs.get('gw-a')!.output()).toContain('host lane in process');
    } catch (e) {
      console.log(diag());
      throw e;
    }
  }, 180_000);

  test('fall-back: without the right to create a TUN, --host-lane auto says why and runs the host lane in process', async () => {
    const ns = topo.addNamespace('fb');
    const cfg = join(dir, 'fb.yaml');
    copyFileSync(join(ROOT, 'examples/gateway-a.yaml'), cfg);
    writeFileSync(
      cfg,
      readFileSync(cfg, 'utf8')
        .replace(/^metrics:\n {2}listen: .*\n/m, '')
        .replace('endpoint: 192.0.2.20:51840', 'endpoint: 127.0.0.1:51999'),
    );
    chmodSync(cfg, 0o644);
    const runDir = nobodyDir(join(dir, 'run-fb'));
    const p = topo.spawnIn(
      ns,
      'fb',
      [...SETPRIV, process.execPath, WEFT_BIN, 'up', '-c', cfg, '--host-lane', 'auto', '--run-dir', runDir],
      { lifetimeS: 60 },
    );
    procs.set('fb', p);
    try {
      await waitFor('control socket', () => readdirSync(runDir).some((f) => f.endsWith('.sock')), 20_000);
      await waitFor('the fall-back logged', () => p.output().includes('host lane in process'), 10_000);
      const line = p
        .output()
        .split('\n')
        .find((l) => l.includes('host lane in process'))!;
      console.log(`[lr] fall-back log: ${line.slice(0, 400)}`);
      const j = JSON.parse(line) as { level: number; reason: string; msg: string };
      expect(j.level).toBe(40); // warn: shown at the default level
      expect(j.reason).toMatch(/^no TUN: cannot create TUN device liqo-tunnel .*CAP_NET_ADMIN/);
      expect(j.msg).toMatch(/no host device \(TUN\)/);
      const st = await show(runDir);
      expect(st.hostLane?.mode).toBe('sockets');
      expect(st.hostLane?.reason).toBe(j.reason);
      const text = await runWeft(['show', 'fb', '--run-dir', runDir], { timeoutMs: 10_000 });
      expect(text.stdout).toMatch(/host lane: in process, without a host device \(no TUN: /);
    } catch (e) {
      console.log(diag());
      throw e;
    }
  }, 60_000);
});
