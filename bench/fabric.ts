/**
 * Fabric throughput in network namespaces (root): pod ─veth─ node ─veth─ gateway.
 *
 *   anchor : iperf3 from the pod to the gateway namespace's underlay address, routed by the
 *            node's kernel over the plain veths (no Weft at all);
 *   fabric : iperf3 from the pod to the gateway's internal address 10.80.0.1: node kernel →
 *            NodeAgent TUN → Geneve (UDP 6091) → Gateway → local TUN → gateway kernel, and back
 *            (both data planes are child processes started from dist/).
 *
 * Measured in the same run, interleaved (anchor, fabric, anchor, fabric, …), medians reported:
 * TCP one stream (Gbit/s) and UDP with 64-byte payloads (received packets/s, iperf3 -b 0).
 * Ratios fabric/anchor are the result; absolute numbers depend on the machine.
 *
 * Namespaces are prefixed `wfb`, deleted at the end (also on failure); processes are killed by
 * their process-group id. Nothing routes outside the namespaces.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePrivateKeyBase64 } from '../src/crypto/keys.js';
import { getCryptoBackend } from '../src/crypto/select.js';

const NS = { pod: 'wfbp', node: 'wfbn', gw: 'wfbg' } as const;
const ROUNDS = 3;
const SECONDS = 3;

function sh(cmd: string[], allowFail = false, timeoutMs = 30_000): string {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', timeout: timeoutMs });
  if ((r.status !== 0 || r.error) && !allowFail) throw new Error(`${cmd.join(' ')}: ${r.stderr ?? ''}${r.error ? String(r.error) : ''}`);
  return r.stdout ?? '';
}

function inNs(ns: string, cmd: string[], allowFail = false, timeoutMs = 30_000): string {
  return sh(['ip', 'netns', 'exec', ns, ...cmd], allowFail, timeoutMs);
}

function cleanup(): void {
  for (const ns of Object.values(NS)) {
    for (const pid of sh(['ip', 'netns', 'pids', ns], true).split(/\s+/).filter(Boolean)) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    }
    sh(['ip', 'netns', 'del', ns], true);
  }
}

function topology(): void {
  cleanup();
  for (const ns of Object.values(NS)) {
    sh(['ip', 'netns', 'add', ns]);
    sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  }
  const link = (a: string, ia: string, addrA: string, b: string, ib: string, addrB: string): void => {
    sh(['ip', 'link', 'add', ia, 'netns', a, 'type', 'veth', 'peer', 'name', ib, 'netns', b]);
    sh(['ip', '-n', a, 'addr', 'add', addrA, 'dev', ia]);
    sh(['ip', '-n', b, 'addr', 'add', addrB, 'dev', ib]);
    sh(['ip', '-n', a, 'link', 'set', ia, 'up']);
    sh(['ip', '-n', b, 'link', 'set', ib, 'up']);
  };
  link(NS.pod, 'wfbp-n', '10.0.1.2/24', NS.node, 'wfbn-p', '10.0.1.1/24');
  link(NS.node, 'wfbn-g', '198.18.1.2/24', NS.gw, 'wfbg-n', '198.18.1.1/24');
  inNs(NS.node, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  // The pod has two addresses: 10.0.1.2 for the fabric (the gateway routes 10.0.1.0/24 into its
  // TUN, so replies come back through Geneve) and 10.0.1.3 for the anchor (the gateway routes that
  // /32 via the node's underlay address, so both directions stay on plain veths).
  sh(['ip', '-n', NS.pod, 'addr', 'add', '10.0.1.3/24', 'dev', 'wfbp-n']);
  sh(['ip', '-n', NS.pod, 'route', 'add', '10.80.0.0/16', 'via', '10.0.1.1', 'src', '10.0.1.2']);
  sh(['ip', '-n', NS.pod, 'route', 'add', '198.18.1.0/24', 'via', '10.0.1.1', 'src', '10.0.1.3']);
  sh(['ip', '-n', NS.gw, 'route', 'add', '10.0.1.3/32', 'via', '198.18.1.2']);
}

function configs(dir: string): { gw: string; node: string } {
  const privateKey = generatePrivateKeyBase64(getCryptoBackend('auto'));
  const gw = {
    role: 'gateway',
    cluster: { id: 'bench', podCIDRs: ['10.0.0.0/16'] },
    wireguard: { privateKey, listenPort: 51840, interfaceName: 'wfbgt' },
    geneve: {
      tunnels: [{ id: 1, nodeName: 'node', remoteUnderlay: '198.18.1.2', localInternalAddress: '10.80.0.1', remoteInternalAddress: '10.80.0.2' }],
      podRoutes: [{ podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' }],
    },
  };
  const node = {
    role: 'node',
    cluster: { id: 'bench', podCIDRs: ['10.0.1.0/24'] },
    node: {
      name: 'node', underlayAddress: '198.18.1.2', tunName: 'wfbnt',
      gateways: [{ name: 'gw', vni: 1, gatewayUnderlay: '198.18.1.1', gatewayInternalAddress: '10.80.0.1', localInternalAddress: '10.80.0.2', remoteCIDRs: [] }],
    },
  };
  const paths = { gw: join(dir, 'gw.yaml'), node: join(dir, 'node.yaml') };
  writeFileSync(paths.gw, JSON.stringify(gw));
  writeFileSync(paths.node, JSON.stringify(node));
  return paths;
}

function launch(ns: string, config: string): ChildProcess {
  const entry = fileURLToPath(new URL('../src/cli/launch.js', import.meta.url));
  const child = spawn('timeout', ['-k', '3', '300', 'ip', 'netns', 'exec', ns, process.execPath, '--input-type=module', '-e',
    `const m = await import(${JSON.stringify(entry)}); process.exitCode = await m.runUntilSignal(${JSON.stringify(config)});`],
  { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  return child;
}

async function ready(child: ChildProcess, what: string): Promise<void> {
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not start: ${out}`)), 15_000);
    const on = (d: Buffer): void => {
      out += d.toString();
      if (out.includes('ready')) { clearTimeout(t); resolve(); }
    };
    child.stdout?.on('data', on);
    child.stderr?.on('data', on);
    child.on('exit', () => { clearTimeout(t); reject(new Error(`${what} exited: ${out}`)); });
  });
}

function kill(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
}

interface Sample { tcpGbps: number; udpPps: number; udpLoss: number }

async function iperf(server: string, client: string, bind: string, udp: boolean): Promise<{ bps: number; pps: number; loss: number }> {
  const port = String(5201 + Math.floor(Math.random() * 500));
  const srv = spawn('ip', ['netns', 'exec', server, 'iperf3', '-s', '-1', '-B', bind, '-p', port], { stdio: 'ignore', detached: true });
  try {
    for (let i = 0; i < 50 && inNs(server, ['ss', '-Hln', `sport = :${port}`], true).trim() === ''; i++) await new Promise((r) => setTimeout(r, 100));
    const args = ['iperf3', '-c', bind, '-p', port, '-t', String(SECONDS), '-J', '--connect-timeout', '3000'];
    if (udp) args.push('-u', '-l', '64', '-b', '0');
    const j = JSON.parse(inNs(client, args, true, (SECONDS + 20) * 1000)) as {
      error?: string;
      end?: { sum_received?: { bits_per_second?: number }; sum?: { packets?: number; lost_packets?: number; seconds?: number; lost_percent?: number } };
    };
    if (j.error) throw new Error(`iperf3: ${j.error}`);
    if (!udp) return { bps: j.end?.sum_received?.bits_per_second ?? 0, pps: 0, loss: 0 };
    const s = j.end?.sum ?? {};
    const got = (s.packets ?? 0) - (s.lost_packets ?? 0);
    return { bps: 0, pps: got / (s.seconds ?? SECONDS), loss: s.lost_percent ?? 0 };
  } finally {
    if (srv.pid !== undefined) try { process.kill(-srv.pid, 'SIGKILL'); } catch { /* gone */ }
  }
}

async function sample(target: string): Promise<Sample> {
  const tcp = await iperf(NS.gw, NS.pod, target, false);
  const udp = await iperf(NS.gw, NS.pod, target, true);
  return { tcpGbps: tcp.bps / 1e9, udpPps: udp.pps, udpLoss: udp.loss };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Runs the benchmark; returns a Markdown table (or why it could not run). */
export async function runFabricBench(): Promise<string> {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'fabric bench skipped: needs root (network namespaces, TUN)';
  if (spawnSync('sh', ['-c', 'command -v iperf3'], { stdio: 'ignore' }).status !== 0) return 'fabric bench skipped: iperf3 not installed';
  const dir = mkdtempSync(join(tmpdir(), 'weft-bench-fabric-'));
  const procs: ChildProcess[] = [];
  try {
    topology();
    const cfg = configs(dir);
    const gw = launch(NS.gw, cfg.gw);
    procs.push(gw);
    await ready(gw, 'gateway');
    const node = launch(NS.node, cfg.node);
    procs.push(node);
    await ready(node, 'node agent');
    const anchor: Sample[] = [];
    const fabric: Sample[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      anchor.push(await sample('198.18.1.1'));
      fabric.push(await sample('10.80.0.1'));
    }
    const a = { tcp: median(anchor.map((s) => s.tcpGbps)), pps: median(anchor.map((s) => s.udpPps)), loss: median(anchor.map((s) => s.udpLoss)) };
    const f = { tcp: median(fabric.map((s) => s.tcpGbps)), pps: median(fabric.map((s) => s.udpPps)), loss: median(fabric.map((s) => s.udpLoss)) };
    return [
      `pod → gateway namespace, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (node ${process.version})`,
      '',
      '| path | TCP 1 stream (Gbit/s) | UDP 64 B received (kpps) | UDP loss % |',
      '|---|---|---|---|',
      `| anchor: plain veth, kernel routing | ${a.tcp.toFixed(2)} | ${(a.pps / 1e3).toFixed(1)} | ${a.loss.toFixed(1)} |`,
      `| weft fabric: node TUN → Geneve → gateway → TUN | ${f.tcp.toFixed(2)} | ${(f.pps / 1e3).toFixed(1)} | ${f.loss.toFixed(1)} |`,
      `| ratio fabric / anchor | ${(f.tcp / a.tcp).toFixed(3)} | ${(f.pps / a.pps).toFixed(3)} | |`,
    ].join('\n');
  } finally {
    for (const p of procs) kill(p);
    await new Promise((r) => setTimeout(r, 500));
    cleanup();
  }
}
