/**
 * Host-lane TCP relay throughput (root): a kernel TCP client uploads to a server in another
 * namespace, either
 *
 *   kernel : straight over a veth (the kernel's TCP end to end, kernel routing; the anchor), or
 *   relay  : through a TUN into Weft's host lane in process — the TCP engine terminates the
 *            connection (answering as the destination) and HostLaneTcpRelay carries the bytes on
 *            with a node:net socket over the same veth — the path of a gateway without a TUN
 *            (`--host-lane=sockets`) for a pod reaching an out-of-cluster address.
 *
 * Measured in the same run, interleaved (kernel, relay, kernel, relay, …): the time from connect
 * to the server's acknowledgement that all bytes arrived (it answers after the client's FIN).
 * Medians of the rounds; the ratio relay/kernel is the result.
 *
 *   wrtA: client, TUN wrt0 (198.18.90.1), this process's relay (re-executed here), veth wrta0
 *         198.18.92.1; the client binds 198.18.90.1, and `ip rule from 198.18.90.1` sends it
 *         into the TUN; the relay's socket leaves by the main table (veth).
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
import { HostLaneDevice } from '../src/pipelines/host-lane.js';
import { HostLaneTcpRelay } from '../src/pipelines/host-lane-tcp.js';

const NS_A = 'wrtA';
const NS_B = 'wrtB';
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

/** Uploads MB, waits for the server's count; prints {ms, bytes}. argv: host, localAddress|''. */
const CLIENT = `
const net = require('node:net');
const [host, local, mb] = process.argv.slice(1);
const total = Number(mb) * 1024 * 1024;
const chunk = Buffer.alloc(65536, 7);
const t0 = process.hrtime.bigint();
const s = net.connect({ host, port: ${PORT}, allowHalfOpen: true, ...(local ? { localAddress: local } : {}) }, () => {
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

/** Runs inside wrtA: the TUN, the lane and its relay, the server in wrtB, the rounds. */
async function child(): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 3);
  const mb = Number(process.env.MB ?? 64);
  const tun = TunDevice.open({ name: 'wrt0', mtu: 1500, txQueueLen: 4096 });
  sh(['ip', 'addr', 'add', `${POD}/24`, 'dev', 'wrt0']);
  sh(['ip', 'rule', 'add', 'from', POD, 'lookup', '90', 'prio', '100']);
  sh(['ip', 'route', 'add', '198.18.91.0/24', 'dev', 'wrt0', 'table', '90']);
  // Replies from 198.18.91.2 arrive on wrt0 while the main table routes it by the veth.
  for (const k of ['all', 'default', 'wrt0']) sh(['sysctl', '-qw', `net.ipv4.conf.${k}.rp_filter=0`]);
  const lane = new HostLaneDevice({ name: 'wrt-lane', mtu: 1500, queue: 4096 });
  const relay = new HostLaneTcpRelay(lane);
  lane.register(6, relay);
  tun.start(new PacketBatch({ capacity: 64, maxLen: 1500 }), (b) => {
    lane.writeBatch(b.buf, b.offs, b.lens, b.count);
  });
  lane.start(new PacketBatch({ capacity: 64, maxLen: 1500, headroom: 16 }), (b) => {
    tun.writeBatch(b.buf, b.offs, b.lens, b.count);
  });
  const server: ChildProcess = spawn('ip', ['netns', 'exec', NS_B, process.execPath, '-e', SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
      server.on('exit', () => reject(new Error('server exited')));
    });
    const kernel: number[] = [];
    const relayed: number[] = [];
    // The client is a child process awaited asynchronously: the relay runs on this event loop.
    for (let i = 0; i < rounds; i++) {
      const k = await runAsync(DST, '', mb);
      const r = await runAsync(DST, POD, mb);
      if (k.bytes !== mb * 1024 * 1024 || r.bytes !== mb * 1024 * 1024)
        throw new Error(`server counted ${k.bytes} / ${r.bytes} bytes, expected ${mb * 1024 * 1024}`);
      kernel.push((mb * 8) / 1024 / (k.ms / 1000));
      relayed.push((mb * 8) / 1024 / (r.ms / 1000));
    }
    const med = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1]!;
    const st = relay.engine.stats;
    process.stdout.write(
      JSON.stringify({
        rounds,
        mb,
        kernelGbps: kernel,
        relayGbps: relayed,
        kernelMedian: med(kernel),
        relayMedian: med(relayed),
        ratio: med(relayed) / med(kernel),
        engine: { retransmits: st.retransmits, drops: st.dropsByReason(), accepted: st.accepted },
        laneDrops: Object.fromEntries(Object.entries(lane.drops).filter(([, v]) => v > 0)),
      }) + '\n',
    );
  } finally {
    server.kill('SIGTERM');
    await relay.close();
    tun.stop();
    await tun.close();
    await lane.close();
  }
}

/** The client as a child process, awaited without blocking this event loop. */
function runAsync(host: string, local: string, mb: number): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', CLIENT, host, local, String(mb)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('exit', () => {
      try {
        const j = JSON.parse(out.trim().split('\n').pop() || '{"error":"no output"}') as {
          ms?: number;
          bytes?: number;
          error?: string;
        };
        if (j.error !== undefined || j.ms === undefined) reject(new Error(`client to ${host}: ${j.error}`));
        else resolve({ ms: j.ms, bytes: j.bytes! });
      } catch (e) {
        reject(e as Error);
      }
    });
  });
}

function cleanup(): void {
  for (const ns of [NS_A, NS_B]) spawnSync('ip', ['netns', 'del', ns]);
}

export async function runRelayTcpBench(): Promise<string> {
  if (process.getuid?.() !== 0) throw new Error('bench relay-tcp: needs root (network namespaces, a TUN)');
  cleanup();
  try {
    sh(['ip', 'netns', 'add', NS_A]);
    sh(['ip', 'netns', 'add', NS_B]);
    sh(['ip', 'link', 'add', 'wrta0', 'netns', NS_A, 'type', 'veth', 'peer', 'name', 'wrtb0', 'netns', NS_B]);
    sh(['ip', '-n', NS_A, 'addr', 'add', '198.18.92.1/24', 'dev', 'wrta0']);
    sh(['ip', '-n', NS_B, 'addr', 'add', '198.18.92.2/24', 'dev', 'wrtb0']);
    sh(['ip', '-n', NS_B, 'addr', 'add', `${DST}/32`, 'dev', 'lo']);
    for (const [ns, dev] of [
      [NS_A, 'wrta0'],
      [NS_A, 'lo'],
      [NS_B, 'wrtb0'],
      [NS_B, 'lo'],
    ] as const)
      sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
    sh(['ip', '-n', NS_A, 'route', 'add', '198.18.91.0/24', 'via', '198.18.92.2']);
    const self = fileURLToPath(import.meta.url);
    const r = spawnSync('ip', ['netns', 'exec', NS_A, process.execPath, self, 'child'], {
      encoding: 'utf8',
      env: process.env,
      timeout: 300_000,
    });
    if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
    const line = r.stdout.trim().split('\n').pop()!;
    const j = JSON.parse(line) as { kernelMedian: number; relayMedian: number; ratio: number };
    return (
      `relay-tcp: relay ${j.relayMedian.toFixed(3)} Gbit/s vs kernel ${j.kernelMedian.toFixed(3)} Gbit/s = ` +
      `${j.ratio.toFixed(3)}x\n${line}`
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
