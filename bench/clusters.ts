/**
 * Pod ⇄ remote pod throughput across two clusters (root, `npm run bench:clusters`), the gateway
 * with its host lane on a TUN against the gateway without a host device:
 *
 *   pod A1 ─ node agent ─Geneve─ gateway A ══WireGuard══ gateway B ─Geneve─ node agent ─ pod B3
 *
 * The demo's namespaces and YAML (src/demo: plan, topology, data-plane), every data plane a real
 * `weft up -c FILE`; both gateways with `--host-lane tun`, then both with `--host-lane sockets`
 * (HOST_LANE_VARIANTS, default "tun,sockets"). The pod-to-pod path is Geneve UDP 6091 in and
 * WireGuard UDP out in either mode; the host lane is not on it, so the two should carry the same.
 *
 * Each round starts the gateways and the two node agents of A1 and B3 for one variant, waits for
 * the first reply (the WireGuard handshake), runs iperf3 A1 → B3 by its remapped address: TCP one
 * stream, then UDP with 64-byte payloads at full rate (received packets/s), stops them and goes on
 * with the next variant: interleaved rounds, medians. With the sockets variant the bench checks
 * that neither gateway namespace holds a TUN device. The CPU of both gateways and both node agents
 * during the TCP run (/proc/PID/stat) gives the data planes' CPU per Gbit/s carried.
 *
 * The sockets gateways run as uid 65534 under setpriv with no supplementary group and every
 * capability dropped (as the restricted template's pod; checked in /proc), so their UDP sockets get
 * the buffer sizes an unprivileged process may ask for. UNPRIVILEGED=0 runs them as root.
 *
 * Environment: ROUNDS, SECONDS (default 3 and 3); HOST_LANE_VARIANTS (comma-separated tun,
 * sockets, auto; the first is the reference of the ratios); UNPRIVILEGED (default 1).
 *
 * Namespaces are prefixed `wcb`, deleted at the end (also on failure); every process has a hard
 * lifetime and is stopped by its process group. No namespace has a default route.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRoot, haveCommand } from '../src/demo/host.js';
import { generateDemoKeys } from '../src/demo/keys.js';
import { buildPlan, findPod, keyFileName, nodeOfPod, remotePodAddress, type DemoConfigFile } from '../src/demo/plan.js';
import {
  findWeftBin,
  startDataPlane,
  stopDataPlane,
  waitForFirstReply,
  type DataPlaneCommand,
  writeDemoFiles,
  type RunningProcess,
} from '../src/demo/data-plane.js';
import { buildTopology, destroyTopology } from '../src/demo/topology.js';
import { inNs, iperf, median, nodePids, sh, ticksOf } from './netns-iperf.js';

const PREFIX = 'wcb';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 3);
const LANES = ['tun', 'sockets', 'auto'] as const;
type Lane = (typeof LANES)[number];

function lanes(): Lane[] {
  const out = (process.env.HOST_LANE_VARIANTS ?? 'tun,sockets')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  for (const l of out)
    if (!(LANES as readonly string[]).includes(l))
      throw new Error(`HOST_LANE_VARIANTS: ${JSON.stringify(l)} is not one of ${LANES.join(', ')}`);
  if (out.length === 0) throw new Error('HOST_LANE_VARIANTS: name at least one of tun, sockets, auto');
  return out as Lane[];
}

/** uid/gid the sockets gateways run as, with no supplementary group and no capability. */
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

/** `weft up -c FILE`, with `--host-lane LANE` for the gateways' files (sockets: under setpriv unless unprivileged is off). */
function upCommand(
  weftBin: string,
  lane: Lane,
  gatewayFiles: ReadonlySet<string>,
  unprivileged: boolean,
): DataPlaneCommand {
  const drop = lane === 'sockets' && unprivileged;
  return Object.assign(
    (path: string) =>
      gatewayFiles.has(path)
        ? [...(drop ? SETPRIV : []), process.execPath, weftBin, 'up', '-c', path, '--host-lane', lane]
        : [process.execPath, weftBin, 'up', '-c', path],
    { label: `weft up (gateways --host-lane ${lane}${drop ? `, uid ${NOBODY}, no capability` : ''}) -c` },
  );
}

/** Lets uid 65534 reach and read the gateways' files and create its control socket. */
function shareWithNobody(dir: string, cfgDir: string, files: readonly DemoConfigFile[], keyFiles: string[]): void {
  chmodSync(dir, 0o711);
  chmodSync(cfgDir, 0o755); // weft up watches the directory of its file (read), the keys stay 0600
  for (const f of [...files.filter((x) => x.role === 'gateway').map((x) => x.file), ...keyFiles])
    chownSync(join(cfgDir, f), NOBODY, NOBODY);
  const run = join(cfgDir, 'run'); // startDataPlane's control-socket directory
  mkdirSync(run, { recursive: true, mode: 0o700 });
  chownSync(run, NOBODY, NOBODY);
}

interface Sample {
  tcpGbps: number;
  udpPps: number;
  udpLoss: number;
  /** % of one core during the TCP run. */
  gatewaysCpu: number;
  nodesCpu: number;
}

/** Runs the benchmark; returns a Markdown table (or why it could not run). */
export async function runClustersBench(): Promise<string> {
  if (!isRoot()) return 'clusters bench skipped: needs root (network namespaces, TUN)';
  const unprivileged = process.env.UNPRIVILEGED !== '0';
  for (const c of ['ip', 'iperf3', 'ping', 'ss', 'timeout', ...(unprivileged ? ['setpriv'] : [])])
    if (!haveCommand(c)) return `clusters bench skipped: ${c} not installed`;
  const vs = lanes();
  const plan = buildPlan(PREFIX);
  const A1 = findPod(plan, 'A1');
  const B3 = findPod(plan, 'B3');
  const b3AtA = remotePodAddress(plan, plan.a, B3);
  const nodeNs = [nodeOfPod(plan, A1).ns, nodeOfPod(plan, B3).ns];
  const gwNs = [plan.a.gatewayNs, plan.b.gatewayNs];
  const dir = mkdtempSync(join(tmpdir(), 'weft-bench-clusters-'));
  const cfgDir = join(dir, 'config');
  const weftBin = findWeftBin();
  let procs: RunningProcess[] = [];
  const t0 = performance.now();
  try {
    await destroyTopology(plan); // a crashed earlier run
    await buildTopology(plan);
    const files: DemoConfigFile[] = writeDemoFiles(plan, generateDemoKeys(), cfgDir).filter(
      (f) => f.role === 'gateway' || nodeNs.includes(f.ns),
    );
    if (unprivileged) shareWithNobody(dir, cfgDir, files, [keyFileName(plan.a), keyFileName(plan.b)]);
    const gatewayFiles = new Set(files.filter((f) => f.role === 'gateway').map((f) => join(cfgDir, f.file)));
    const gatewayConfigs = files.filter((f) => f.role === 'gateway');
    const nodeConfigs = files.filter((f) => f.role === 'node');
    const samples: Sample[][] = vs.map(() => []);
    const notes: string[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (let k = 0; k < vs.length; k++) {
        const lane = vs[k]!;
        procs = [];
        const cmd = upCommand(weftBin, lane, gatewayFiles, unprivileged);
        // The gateways serving before the node agents start: a Geneve packet that reaches a
        // gateway while its WireGuard ports are still opening stops it (Gateway.flush: no wg yet).
        await startDataPlane(plan, gatewayConfigs, cfgDir, cmd, 120, () => {}, procs);
        await startDataPlane(plan, nodeConfigs, cfgDir, cmd, 120, () => {}, procs);
        await waitForFirstReply(A1.ns, b3AtA, 20_000);
        if (r === 0) {
          if (lane === 'sockets' && unprivileged) {
            const ids = gwNs.flatMap(nodePids).map((pid) => {
              const st = readFileSync(`/proc/${pid}/status`, 'utf8');
              return `${/^Uid:\s+(\d+)/m.exec(st)?.[1]} CapEff ${/^CapEff:\s+(\w+)/m.exec(st)?.[1]}`;
            });
            if (ids.length !== 2 || ids.some((x) => x !== `${NOBODY} CapEff 0000000000000000`))
              throw new Error(
                `--host-lane sockets gateways are not uid ${NOBODY} without capabilities: ${ids.join(', ')}`,
              );
            notes.push(`sockets: both gateway processes run as uid ${NOBODY} with an empty effective capability set`);
          }
          const tuns = gwNs.map((ns) => inNs(ns, ['ip', '-o', 'link', 'show', 'type', 'tun'], true).trim());
          const none = tuns.every((t) => t === '');
          if (lane === 'sockets' && !none) throw new Error(`--host-lane sockets: a gateway holds a TUN: ${tuns}`);
          notes.push(`${lane}: gateway namespaces ${none ? 'hold no TUN device' : 'hold a TUN device each'}`);
        }
        const gp = gwNs.flatMap(nodePids);
        const np = nodeNs.flatMap(nodePids);
        const sum = (ps: number[]): number => ps.reduce((a, p) => a + ticksOf(p), 0);
        const g0 = sum(gp);
        const n0 = sum(np);
        const w0 = performance.now();
        const tcp = await iperf({
          serverNs: B3.ns,
          bind: B3.ip,
          clientNs: A1.ns,
          connect: b3AtA,
          udp: false,
          seconds: SECONDS,
        });
        const secs = (performance.now() - w0) / 1000;
        const gatewaysCpu = (sum(gp) - g0) / secs; // ticks are 1/100 s: ticks per second = % of one core
        const nodesCpu = (sum(np) - n0) / secs;
        const udp = await iperf({
          serverNs: B3.ns,
          bind: B3.ip,
          clientNs: A1.ns,
          connect: b3AtA,
          udp: true,
          seconds: SECONDS,
        });
        samples[k]!.push({ tcpGbps: tcp.bps / 1e9, udpPps: udp.pps, udpLoss: udp.loss, gatewaysCpu, nodesCpu });
        await stopDataPlane(procs);
        procs = [];
      }
    }
    const med = (xs: Sample[], f: (s: Sample) => number): number => median(xs.map(f));
    const ref = samples[0]!;
    const rows = vs.map((lane, k) => {
      const s = samples[k]!;
      const tcp = med(s, (x) => x.tcpGbps);
      const pps = med(s, (x) => x.udpPps);
      const perGbit = med(s, (x) => (x.gatewaysCpu + x.nodesCpu) / x.tcpGbps);
      const gwPerGbit = med(s, (x) => x.gatewaysCpu / x.tcpGbps);
      return (
        `| ${lane}${lane === 'sockets' && unprivileged ? ` (uid ${NOBODY}, no capability)` : ''} | ${tcp.toFixed(2)} | ${(pps / 1e3).toFixed(1)} | ${med(s, (x) => x.udpLoss).toFixed(1)} | ` +
        `${(tcp / med(ref, (x) => x.tcpGbps)).toFixed(3)} | ${(pps / med(ref, (x) => x.udpPps)).toFixed(3)} | ` +
        `${gwPerGbit.toFixed(0)} | ${perGbit.toFixed(0)} |`
      );
    });
    return [
      `pod A1 → pod B3 across two clusters (node agent ─ Geneve ─ gateway ═ WireGuard ═ gateway ─ Geneve ─ node agent), ` +
        `gateways by --host-lane, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (node ${process.version}, ` +
        `${((performance.now() - t0) / 1000).toFixed(0)} s in all)`,
      '',
      `| gateways --host-lane | TCP 1 stream (Gbit/s) | UDP 64 B received (kpps) | UDP loss % | TCP / ${vs[0]} | UDP / ${vs[0]} | both gateways, CPU % of one core per Gbit/s | gateways + node agents, per Gbit/s |`,
      '|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      ...notes,
      ...vs.map(
        (lane, k) =>
          `${lane} rounds: TCP ${samples[k]!.map((x) => x.tcpGbps.toFixed(2)).join(', ')} Gbit/s; UDP ${samples[k]!.map((x) => (x.udpPps / 1e3).toFixed(1)).join(', ')} kpps`,
      ),
    ].join('\n');
  } finally {
    await stopDataPlane(procs);
    await destroyTopology(plan);
    rmSync(dir, { recursive: true, force: true }); // the configs hold private keys
  }
}
