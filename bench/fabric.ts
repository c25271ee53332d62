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
 * Environment:
 *   WEFT_VARIANTS="old:WEFT_ROOT=/work/main;nooff:WEFT_OFFLOAD=0"   more data-plane variants in the
 *            same run, each a label and space-separated K=V (WEFT_ROOT: another checkout whose
 *            dist/ to run — before/after comparisons; anything else is passed as environment);
 *            every round measures the anchor, then each variant (started and stopped in turn).
 *   WEFT_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"   extra node flags for both data planes
 *   ROUNDS, SECONDS   (default 3 and 3); ONLY=tcp or ONLY=udp runs one of the two
 *   FB_DEBUG=1        print each variant's whole stats lines too
 * After each variant's round its counters (SIGUSR1 "stats" lines) give the offloads in effect and
 * the GSO/GRO counts, printed under the table, with where the CPU went during the TCP runs
 * (medians, % of one core): the node agent and the gateway (/proc/PID/stat), the iperf3 client
 * and server (iperf3's own cpu_utilization_percent), the machine's softirq and total busy time
 * (/proc/stat; the machine is shared, so these include other work), and the data planes' CPU
 * per Gbit/s carried (less sensitive to other load than the throughput itself).
 *
 * Namespaces are prefixed `wfb`, deleted at the end (also on failure); processes are killed by
 * their process-group id. Nothing routes outside the namespaces.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePrivateKeyBase64 } from '../src/crypto/keys.js';
import { getCryptoBackend } from '../src/crypto/select.js';
import { inNs, iperf, median, sh, ticksOf } from './netns-iperf.js';

const NS = { pod: 'wfbp', node: 'wfbn', gw: 'wfbg' } as const;
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 3);

interface Variant {
  label: string;
  root: string;
  env: Record<string, string>;
}

function variants(): Variant[] {
  const here = fileURLToPath(new URL('../..', import.meta.url));
  const out: Variant[] = [{ label: 'weft', root: here, env: {} }];
  for (const v of (process.env.WEFT_VARIANTS ?? '')
    .split(';')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const c = v.indexOf(':');
    const label = c < 0 ? v : v.slice(0, c);
    if (!/^[a-z0-9-]+$/.test(label)) throw new Error(`WEFT_VARIANTS: bad label ${label}`);
    const env: Record<string, string> = {};
    for (const kv of (c < 0 ? '' : v.slice(c + 1)).split(/\s+/).filter(Boolean)) {
      const e = kv.indexOf('=');
      if (e < 1) throw new Error(`WEFT_VARIANTS: ${kv} is not K=V`);
      env[kv.slice(0, e)] = kv.slice(e + 1);
    }
    const root = env.WEFT_ROOT ?? here;
    delete env.WEFT_ROOT;
    out.push({ label: `weft-${label}`, root, env });
  }
  return out;
}

function cleanup(): void {
  for (const ns of Object.values(NS)) {
    for (const pid of sh(['ip', 'netns', 'pids', ns], true).split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
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
      tunnels: [
        {
          id: 1,
          nodeName: 'node',
          remoteUnderlay: '198.18.1.2',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.2',
        },
      ],
      podRoutes: [{ podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' }],
    },
  };
  const node = {
    role: 'node',
    cluster: { id: 'bench', podCIDRs: ['10.0.1.0/24'] },
    node: {
      name: 'node',
      underlayAddress: '198.18.1.2',
      tunName: 'wfbnt',
      gateways: [
        {
          name: 'gw',
          vni: 1,
          gatewayUnderlay: '198.18.1.1',
          gatewayInternalAddress: '10.80.0.1',
          localInternalAddress: '10.80.0.2',
          remoteCIDRs: [],
        },
      ],
    },
  };
  const paths = { gw: join(dir, 'gw.yaml'), node: join(dir, 'node.yaml') };
  writeFileSync(paths.gw, JSON.stringify(gw));
  writeFileSync(paths.node, JSON.stringify(node));
  return paths;
}

function launch(ns: string, config: string, v: Variant): ChildProcess {
  // A variant's checkout may predate src/daemon (the launcher was src/cli/launch.ts there).
  const entry = [join(v.root, 'dist/src/daemon/launch.js'), join(v.root, 'dist/src/cli/launch.js')].find((p) =>
    existsSync(p),
  );
  if (entry === undefined) throw new Error(`${v.root}: no built launcher (run npm run build there)`);
  const nodeArgs = (process.env.WEFT_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = spawn(
    'timeout',
    [
      '-k',
      '3',
      '600',
      'ip',
      'netns',
      'exec',
      ns,
      process.execPath,
      ...nodeArgs,
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(entry)}); process.exitCode = await m.runUntilSignal(${JSON.stringify(config)}); process.exit();`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, ...v.env } },
  );
  return child;
}

/** The data plane's own stats line (SIGUSR1 to the node process under timeout → ip netns exec). */
async function statsOf(child: ChildProcess): Promise<Record<string, unknown> | null> {
  if (child.pid === undefined) return null;
  const kids = sh(['pgrep', '-P', String(child.pid)], true)
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  if (kids.length === 0) return null;
  let out = '';
  const on = (d: Buffer): void => {
    out += d.toString();
  };
  child.stdout?.on('data', on);
  try {
    process.kill(Number(kids[0]), 'SIGUSR1');
    for (let i = 0; i < 40 && !/stats .*\n/.test(out); i++) await new Promise((r) => setTimeout(r, 50));
  } finally {
    child.stdout?.off('data', on);
  }
  const line = /stats (.*)\n/.exec(out)?.[1];
  return line === undefined ? null : (JSON.parse(line) as Record<string, unknown>);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return;
  const done = new Promise<void>((r) => child.once('exit', () => r()));
  // One SIGTERM to the data plane itself (a second one, as a group signal plus timeout's
  // forwarding would send, kills it before it can write its --cpu-prof profile).
  const kids = sh(['pgrep', '-P', String(child.pid)], true)
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  if (kids.length > 0)
    try {
      process.kill(Number(kids[0]), 'SIGTERM');
    } catch {
      /* gone */
    }
  else kill(child);
  await Promise.race([done, new Promise((r) => setTimeout(r, 5000))]);
}

async function ready(child: ChildProcess, what: string): Promise<void> {
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not start: ${out}`)), 15_000);
    const on = (d: Buffer): void => {
      out += d.toString();
      if (out.includes('ready')) {
        clearTimeout(t);
        resolve();
      }
    };
    child.stdout?.on('data', on);
    child.stderr?.on('data', on);
    child.on('exit', () => {
      clearTimeout(t);
      reject(new Error(`${what} exited: ${out}`));
    });
  });
}

function kill(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
}

interface Sample {
  tcpGbps: number;
  udpPps: number;
  udpLoss: number;
  cpu: TcpCpu;
}

/** CPU during the TCP run, % of one core (see the file comment); -1 where unknown. */
interface TcpCpu {
  node: number;
  gateway: number;
  client: number;
  server: number;
  softirq: number;
  busy: number;
}
const NO_CPU: TcpCpu = { node: -1, gateway: -1, client: -1, server: -1, softirq: -1, busy: -1 };

/** The machine's softirq and busy (not idle/iowait) clock ticks, all CPUs. */
function machineTicks(): { softirq: number; busy: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const busy = f.reduce((a, b) => a + b, 0) - f[3]! - f[4]!;
  return { softirq: f[6]!, busy };
}

/** The data plane's own PID (the child of `timeout`, which ip netns exec became). */
function dataPlanePid(child: ChildProcess | undefined): number | undefined {
  if (child?.pid === undefined) return undefined;
  const k = sh(['pgrep', '-P', String(child.pid)], true)
    .trim()
    .split(/\s+/)
    .filter(Boolean)[0];
  return k === undefined ? undefined : Number(k);
}

/** Offloads in effect and GSO/GRO counts from a stats line (older builds have none of it). */
function counters(what: string, st: Record<string, unknown> | null): string {
  if (st === null) return `${what} (no stats)`;
  const o = st.offloads as { tun: Record<string, boolean>; geneve: Record<string, boolean> } | null | undefined;
  if (o === undefined || o === null) return `${what} (no offload counters)`;
  const on = (r: Record<string, boolean>): string =>
    Object.entries(r)
      .filter(([, b]) => b)
      .map(([k]) => k)
      .join('+') || 'none';
  const gso = st.gso as { superPackets: number; segments: number };
  const gro = st.gro as { packets: number; superPackets: number };
  return `${what} tun ${on(o.tun)}, geneve ${on(o.geneve)}, ${gso.superPackets} super-packets cut into ${gso.segments} segments, ${gro.packets} packets coalesced into ${gro.superPackets}`;
}

/** One TCP and one UDP run to `target`; with the data planes given, the CPU of the TCP run. */
async function sample(target: string, node?: ChildProcess, gw?: ChildProcess): Promise<Sample> {
  const only = process.env.ONLY; // 'tcp' or 'udp': the other is reported as 0
  const none = { bps: 0, pps: 0, loss: 0, client: -1, server: -1 };
  const pids = [dataPlanePid(node), dataPlanePid(gw)];
  const t0 = [ticksOf(pids[0]), ticksOf(pids[1])];
  const m0 = machineTicks();
  const w0 = performance.now();
  const tcp =
    only === 'udp'
      ? none
      : await iperf({ serverNs: NS.gw, bind: target, clientNs: NS.pod, udp: false, seconds: SECONDS });
  const secs = (performance.now() - w0) / 1000;
  const m1 = machineTicks();
  const pct = (ticks: number): number => ticks / secs; // clock ticks are 1/100 s: ticks per second = % of one core
  const cpu: TcpCpu =
    only === 'udp'
      ? NO_CPU
      : {
          node: pids[0] === undefined ? -1 : pct(ticksOf(pids[0]) - t0[0]!),
          gateway: pids[1] === undefined ? -1 : pct(ticksOf(pids[1]) - t0[1]!),
          client: tcp.client,
          server: tcp.server,
          softirq: pct(m1.softirq - m0.softirq),
          busy: pct(m1.busy - m0.busy),
        };
  const udp =
    only === 'tcp'
      ? none
      : await iperf({ serverNs: NS.gw, bind: target, clientNs: NS.pod, udp: true, seconds: SECONDS });
  return { tcpGbps: tcp.bps / 1e9, udpPps: udp.pps, udpLoss: udp.loss, cpu };
}

/** Medians of the CPU split, one line. */
function cpuLine(label: string, xs: Sample[]): string {
  const m = (k: keyof TcpCpu): string => {
    const v = median(xs.map((s) => s.cpu[k]));
    return v < 0 ? '?' : v.toFixed(0);
  };
  const perGbit = median(xs.map((s) => (s.cpu.node < 0 ? -1 : (s.cpu.node + s.cpu.gateway) / s.tcpGbps)));
  const dp = perGbit < 0 ? '' : `; node agent + gateway ${perGbit.toFixed(1)} per Gbit/s`;
  return `${label} TCP CPU, % of one core: node agent ${m('node')}, gateway ${m('gateway')}, iperf3 client ${m('client')}, server ${m('server')}; machine softirq ${m('softirq')}, busy ${m('busy')} of ${cpus().length * 100}${dp}`;
}

/** Runs the benchmark; returns a Markdown table (or why it could not run). */
export async function runFabricBench(): Promise<string> {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0)
    return 'fabric bench skipped: needs root (network namespaces, TUN)';
  if (spawnSync('sh', ['-c', 'command -v iperf3'], { stdio: 'ignore' }).status !== 0)
    return 'fabric bench skipped: iperf3 not installed';
  const dir = mkdtempSync(join(tmpdir(), 'weft-bench-fabric-'));
  const procs: ChildProcess[] = [];
  try {
    topology();
    const cfg = configs(dir);
    const vs = variants();
    const anchor: Sample[] = [];
    const fabric: Sample[][] = vs.map(() => []);
    const notes: string[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      anchor.push(await sample('198.18.1.1'));
      for (let k = 0; k < vs.length; k++) {
        const v = vs[k]!;
        const gw = launch(NS.gw, cfg.gw, v);
        procs.push(gw);
        await ready(gw, 'gateway');
        const node = launch(NS.node, cfg.node, v);
        procs.push(node);
        await ready(node, 'node agent');
        fabric[k]!.push(await sample('10.80.0.1', node, gw));
        if (r === ROUNDS - 1) {
          const sn = await statsOf(node);
          const sg = await statsOf(gw);
          notes.push(`${v.label}: ${counters('node', sn)}; ${counters('gateway', sg)}`);
          if (process.env.FB_DEBUG) notes.push(JSON.stringify(sn), JSON.stringify(sg));
        }
        await stop(node);
        await stop(gw);
      }
    }
    const med = (xs: Sample[]): { tcp: number; pps: number; loss: number } => ({
      tcp: median(xs.map((s) => s.tcpGbps)),
      pps: median(xs.map((s) => s.udpPps)),
      loss: median(xs.map((s) => s.udpLoss)),
    });
    const a = med(anchor);
    const rows = vs.map((v, k) => {
      const f = med(fabric[k]!);
      return `| ${v.label} fabric: node TUN → Geneve → gateway → TUN | ${f.tcp.toFixed(2)} | ${(f.pps / 1e3).toFixed(1)} | ${f.loss.toFixed(1)} | ${(f.tcp / a.tcp).toFixed(3)} | ${(f.pps / a.pps).toFixed(3)} |`;
    });
    return [
      `pod → gateway namespace, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (node ${process.version})`,
      '',
      '| path | TCP 1 stream (Gbit/s) | UDP 64 B received (kpps) | UDP loss % | TCP / anchor | UDP / anchor |',
      '|---|---|---|---|---|---|',
      `| anchor: plain veth, kernel routing | ${a.tcp.toFixed(2)} | ${(a.pps / 1e3).toFixed(1)} | ${a.loss.toFixed(1)} | 1 | 1 |`,
      ...rows,
      '',
      ...notes,
      ...(process.env.ONLY === 'udp'
        ? []
        : [cpuLine('anchor', anchor), ...vs.map((v, k) => cpuLine(v.label, fabric[k]!))]),
    ].join('\n');
  } finally {
    for (const p of procs) kill(p);
    await new Promise((r) => setTimeout(r, 500));
    cleanup();
    rmSync(dir, { recursive: true, force: true }); // the configs hold a private key
  }
}
