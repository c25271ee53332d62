/**
 * Host-lane TCP relay throughput (root): a kernel TCP client uploads to a server in another
 * namespace, either
 *
 *   kernel : straight over a veth (the kernel's TCP end to end, kernel routing; the anchor),
 *   tun    : the host lane of a TUN gateway (`--host-lane=tun`): the client's packets arrive on a
 *            TUN (standing in for the pod side: Geneve from the node), this process reads them
 *            and writes them with the gateway's FabricTunWriter (coalesced into TSO super-packets)
 *            into the gateway's TUN (opened with offloads, as GatewayIo opens it); the kernel
 *            forwards them out of the veth, masqueraded (nft, as Liqo's rules ask on that
 *            interface); the replies are read back from the gateway's TUN with startTunReader
 *            (the gateway's reader) and written to the pod-side TUN,
 *   relay  : the host lane in process (`--host-lane=sockets`): the same pod-side TUN into a
 *            HostLaneDevice — the TCP engine terminates the connection (answering as the
 *            destination) and HostLaneTcpRelay carries the bytes on with a node:net socket over
 *            the same veth.
 *
 * Measured in the same run, interleaved (kernel, tun, relay, kernel, …): the time from connect
 * to the server's acknowledgement that all bytes arrived (it answers after the client's FIN).
 * Medians of the rounds; the ratios relay/tun, tun/kernel and relay/kernel are the result. Neither
 * middle runs the gateway's router (rules, NAT) in JavaScript: both measure the lane alone.
 *
 *   wrtC: the client for tun and relay, TUN wrtp0 198.18.90.1/24 (read by this process),
 *         198.18.91.0/24 routed into it.
 *   wrtA: this process (re-executed here), the kernel variant's client, the gateway TUN wrtg0
 *         (198.18.90.0/24 routed into it, forwarding on), veth wrta0 198.18.92.1.
 *   wrtB: server on 198.18.91.2 (lo) and 198.18.92.2 (veth wrtb0).
 *
 * Environment: ROUNDS (default 3), MB per transfer (default 64).
 * Namespaces are prefixed `wrt`, deleted at the end (also on failure); processes are killed by
 * their pid. Nothing routes outside the namespaces.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PacketBatch } from '../src/io/batch.js';
import { TunDevice } from '../src/io/tun.js';
import { FabricTunWriter, startTunReader } from '../src/pipelines/fabric-offload.js';
import { HostLaneDevice } from '../src/pipelines/host-lane.js';
import { HostLaneTcpRelay } from '../src/pipelines/host-lane-tcp.js';
import { coalesceAreaFor } from '../src/pipelines/tun-offload.js';

const NS_A = 'wrtA';
const NS_B = 'wrtB';
const NS_C = 'wrtC';
const DST = '198.18.91.2';
const POD = '198.18.90.1';
const PORT = 5201;

function sh(args: string[]): string {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${args.join(' ')}: ${r.stderr || r.error?.message}`);
  return r.stdout;
}

const SERVER = `
const net = require('node:net');
net.createServer({ allowHalfOpen: true }, (s) => {
  let n = 0;
  s.on('data', (d) => { n += d.length; });
  s.on('end', () => s.end(String(n)));
  s.on('error', () => {});
}).listen(${PORT}, '0.0.0.0', () => process.stdout.write('listening\\n'));
`;

/** Uploads MB, waits for the server's count; prints {ms, bytes}. argv: host, MB. */
const CLIENT = `
const net = require('node:net');
const [host, mb] = process.argv.slice(1);
const total = Number(mb) * 1024 * 1024;
const chunk = Buffer.alloc(65536, 7);
const t0 = process.hrtime.bigint();
const s = net.connect({ host, port: ${PORT}, allowHalfOpen: true }, () => {
  let sent = 0;
  const pump = () => {
    while (sent < total) { sent += chunk.length; if (!s.write(chunk)) return s.once('drain', pump); }
    s.end();
  };
  pump();
});
let reply = '';
s.on('data', (d) => { reply += d; });
s.on('close', () => {
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  process.stdout.write(JSON.stringify({ ms, bytes: Number(reply) }) + '\\n');
});
s.on('error', (e) => { process.stdout.write(JSON.stringify({ error: String(e) }) + '\\n'); process.exit(1); });
setTimeout(() => { process.stdout.write(JSON.stringify({ error: 'timeout' }) + '\\n'); process.exit(1); }, 60000).unref();
`;

const BATCH = 64;
const MTU = 1500;
const HEADROOM = 128;
const TAILROOM = 64;

/** Runs inside wrtA: the TUNs, the lane and its relay, the server in wrtB, the rounds. */
async function child(): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 3);
  const mb = Number(process.env.MB ?? 64);
  // The pod side: a TUN in wrtC, read and written here (plain packets, no offload, for both middles).
  const pod = TunDevice.open({ name: 'wrtp0', mtu: MTU, txQueueLen: 4096, netns: NS_C });
  sh(['ip', '-n', NS_C, 'addr', 'add', `${POD}/24`, 'dev', 'wrtp0']);
  sh(['ip', '-n', NS_C, 'route', 'add', '198.18.91.0/24', 'dev', 'wrtp0']);
  // The TUN gateway's host lane: its TUN with offloads, forwarding and masquerade out of the veth.
  const gw = TunDevice.open({ name: 'wrtg0', mtu: MTU, txQueueLen: 4096, offload: true });
  if (gw.offload === null || !gw.offload.tso) throw new Error('bench relay-tcp: the kernel refused TUN TSO on wrtg0');
  sh(['ip', 'route', 'add', '198.18.90.0/24', 'dev', 'wrtg0']);
  sh(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  for (const k of ['all', 'default', 'wrtg0']) sh(['sysctl', '-qw', `net.ipv4.conf.${k}.rp_filter=0`]);
  sh(['nft', 'add', 'table', 'ip', 'wrt']);
  sh(['nft', 'add', 'chain', 'ip', 'wrt', 'post', '{ type nat hook postrouting priority 100 ; }']);
  sh(['nft', 'add', 'rule', 'ip', 'wrt', 'post', 'oifname', 'wrta0', 'ip', 'saddr', '198.18.90.0/24', 'masquerade']);
  const gwWriter = new FabricTunWriter(gw, BATCH);
  startTunReader(gw, { mtu: MTU, headroom: HEADROOM, tailroom: TAILROOM, batchSize: BATCH }, (buf, offs, lens, n) => {
    pod.writeBatch(buf, offs, lens, n);
  });
  // The in-process host lane.
  const lane = new HostLaneDevice({ name: 'wrt-lane', mtu: MTU, queue: 4096 });
  const relay = new HostLaneTcpRelay(lane);
  lane.register(6, relay);
  lane.start(new PacketBatch({ capacity: BATCH, maxLen: MTU, headroom: 16 }), (b) => {
    pod.writeBatch(b.buf, b.offs, b.lens, b.count);
  });
  // The pod side's packets go to the middle under test (one transfer at a time).
  let viaTun = false;
  pod.start(
    new PacketBatch({
      capacity: BATCH,
      maxLen: MTU,
      headroom: HEADROOM,
      tailroom: TAILROOM,
      scratch: coalesceAreaFor(BATCH * MTU, gwWriter.reservation, gwWriter.maxFlows),
    }),
    (b) => {
      if (viaTun) gwWriter.write(b.buf, b.offs, b.lens, b.count, b.scratchOff, b.scratchLen);
      else lane.writeBatch(b.buf, b.offs, b.lens, b.count);
    },
  );
  const server: ChildProcess = spawn('ip', ['netns', 'exec', NS_B, process.execPath, '-e', SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
      server.on('exit', () => reject(new Error('server exited')));
    });
    const gbps = (ms: number): number => (mb * 8) / 1024 / (ms / 1000);
    const want = mb * 1024 * 1024;
    const kernel: number[] = [];
    const tunPath: number[] = [];
    const relayed: number[] = [];
    // The clients are child processes awaited asynchronously: the middles run on this event loop.
    for (let i = 0; i < rounds; i++) {
      const k = await runAsync(null, mb);
      viaTun = true;
      const t = await runAsync(NS_C, mb);
      viaTun = false;
      const r = await runAsync(NS_C, mb);
      if (k.bytes !== want || t.bytes !== want || r.bytes !== want)
        throw new Error(`server counted ${k.bytes} / ${t.bytes} / ${r.bytes} bytes, expected ${want}`);
      kernel.push(gbps(k.ms));
      tunPath.push(gbps(t.ms));
      relayed.push(gbps(r.ms));
    }
    const med = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1]!;
    const st = relay.engine.stats;
    const co = gwWriter.coalescer!.coalescer.stats;
    process.stdout.write(
      JSON.stringify({
        rounds,
        mb,
        kernelGbps: kernel,
        tunGbps: tunPath,
        relayGbps: relayed,
        kernelMedian: med(kernel),
        tunMedian: med(tunPath),
        relayMedian: med(relayed),
        relayPerTun: med(relayed) / med(tunPath),
        tunPerKernel: med(tunPath) / med(kernel),
        relayPerKernel: med(relayed) / med(kernel),
        engine: { retransmits: st.retransmits, drops: st.dropsByReason(), accepted: st.accepted },
        laneDrops: Object.fromEntries(Object.entries(lane.drops).filter(([, v]) => v > 0)),
        gro: { packets: co.packets, superPackets: co.superPackets, merged: co.mergedSegments },
        tunTxErrors: { pod: pod.stats.txErrors, gw: gw.stats.txErrors },
      }) + '\n',
    );
  } finally {
    server.kill('SIGTERM');
    await relay.close();
    for (const d of [pod, gw]) d.stop();
    await pod.close();
    await gw.close();
    await lane.close();
  }
}

/** The client as a child process (in `ns`, or here), awaited without blocking this event loop. */
function runAsync(ns: string | null, mb: number): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const argv = [process.execPath, '-e', CLIENT, DST, String(mb)];
    const p =
      ns === null
        ? spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] })
        : spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('exit', () => {
      try {
        const j = JSON.parse(out.trim().split('\n').pop() || '{"error":"no output"}') as {
          ms?: number;
          bytes?: number;
          error?: string;
        };
        if (j.error !== undefined || j.ms === undefined) reject(new Error(`client (${ns ?? 'wrtA'}): ${j.error}`));
        else resolve({ ms: j.ms, bytes: j.bytes! });
      } catch (e) {
        reject(e as Error);
      }
    });
  });
}

function cleanup(): void {
  for (const ns of [NS_A, NS_B, NS_C]) spawnSync('ip', ['netns', 'del', ns]);
}

export async function runRelayTcpBench(): Promise<string> {
  if (process.getuid?.() !== 0) throw new Error('bench relay-tcp: needs root (network namespaces, a TUN)');
  cleanup();
  try {
    sh(['ip', 'netns', 'add', NS_A]);
    sh(['ip', 'netns', 'add', NS_B]);
    sh(['ip', 'netns', 'add', NS_C]);
    sh(['ip', 'link', 'add', 'wrta0', 'netns', NS_A, 'type', 'veth', 'peer', 'name', 'wrtb0', 'netns', NS_B]);
    sh(['ip', '-n', NS_A, 'addr', 'add', '198.18.92.1/24', 'dev', 'wrta0']);
    sh(['ip', '-n', NS_B, 'addr', 'add', '198.18.92.2/24', 'dev', 'wrtb0']);
    sh(['ip', '-n', NS_B, 'addr', 'add', `${DST}/32`, 'dev', 'lo']);
    for (const [ns, dev] of [
      [NS_A, 'wrta0'],
      [NS_A, 'lo'],
      [NS_B, 'wrtb0'],
      [NS_B, 'lo'],
      [NS_C, 'lo'],
    ] as const)
      sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
    sh(['ip', '-n', NS_A, 'route', 'add', '198.18.91.0/24', 'via', '198.18.92.2']);
    const self = fileURLToPath(import.meta.url);
    const r = spawnSync('ip', ['netns', 'exec', NS_A, process.execPath, ...process.execArgv, self, 'child'], {
      encoding: 'utf8',
      env: process.env,
      timeout: 120_000,
    });
    if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
    const line = r.stdout.trim().split('\n').pop()!;
    const j = JSON.parse(line) as {
      kernelMedian: number;
      tunMedian: number;
      relayMedian: number;
      relayPerTun: number;
      tunPerKernel: number;
      relayPerKernel: number;
    };
    const f = (x: number): string => x.toFixed(3);
    return (
      `relay-tcp: relay ${f(j.relayMedian)} / tun ${f(j.tunMedian)} / kernel ${f(j.kernelMedian)} Gbit/s; ` +
      `relay/tun ${f(j.relayPerTun)}x, tun/kernel ${f(j.tunPerKernel)}x, relay/kernel ${f(j.relayPerKernel)}x\n${line}`
    );
  } finally {
    cleanup();
  }
}

if (process.argv[2] === 'child') {
  child().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`${String(e)}\n`);
      process.exit(1);
    },
  );
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  runRelayTcpBench().then(
    (s) => console.log(s),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
