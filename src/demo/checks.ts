/**
 * Cross-cluster measurements in the namespace topology, each bounded in time: ping, an HTTP
 * request whose server reports the source address it saw, a UDP echo that does the same,
 * iperf3 (TCP or UDP) and a ping-based traceroute. Used by `weft demo` (to print the table) and by
 * the end-to-end test (to assert on the same numbers).
 *
 * The HTTP and UDP servers are tiny Node.js programs run with this process's own `node`
 * (process.execPath), so no extra package is needed; iperf3 and ping are the system's.
 * Every server is a Daemon (own process group, hard lifetime) stopped before the function returns.
 */
import { WaitAbort, inNs, runCommand, startDaemon, waitFor, type Daemon } from './host.js';

export interface PingResult {
  sent: number;
  received: number;
  /** Round-trip times in milliseconds (NaN when nothing came back). */
  minMs: number;
  avgMs: number;
  maxMs: number;
  output: string;
}

/**
 * `count` echo requests from namespace `ns` to `addr`, `intervalS` apart, 1 s reply timeout each.
 * The command is killed 15 s after its own duration (a machine busy enough to delay ping that
 * long is not what a caller measures); `sent` is then 0 and `output` says so.
 */
export async function ping(
  ns: string,
  addr: string,
  count = 5,
  intervalS = 0.2,
  extra: readonly string[] = [],
): Promise<PingResult> {
  const r = await runCommand(
    // -w: ping ends by itself, with its statistics, even when a reply is held back for long
    // (a reordering relay keeps a datagram until the next one), before the kill below.
    inNs(ns, [
      'ping',
      '-n',
      '-c',
      String(count),
      '-i',
      String(intervalS),
      '-W',
      '1',
      '-w',
      String(Math.ceil(count * intervalS + 10)),
      ...extra,
      addr,
    ]),
    {
      allowFail: true,
      timeoutMs: Math.ceil((count * intervalS + 15) * 1000),
    },
  );
  const out = r.stdout;
  const tx = /(\d+) packets transmitted/.exec(out);
  const rx = /(\d+) received/.exec(out);
  const rtt = /= ([\d.]+)\/([\d.]+)\/([\d.]+)\//.exec(out);
  return {
    sent: tx ? Number(tx[1]) : 0,
    received: rx ? Number(rx[1]) : 0,
    minMs: rtt ? Number(rtt[1]) : NaN,
    avgMs: rtt ? Number(rtt[2]) : NaN,
    maxMs: rtt ? Number(rtt[3]) : NaN,
    output: `${out}${r.stderr}${r.status === 'timeout' ? '\nping killed: it ran past its time limit' : ''}`,
  };
}

/** One hop of a ping-based traceroute. */
export interface TraceHop {
  ttl: number;
  /** Who answered (the ICMP error's source, or the destination itself), or null (no answer). */
  from: string | null;
  /** 'time-exceeded', 'reached' (echo reply), 'unreachable' or 'none'. */
  kind: 'time-exceeded' | 'reached' | 'unreachable' | 'none';
}

/**
 * Echo requests with TTL 1, 2, … until the destination answers (at most `maxTtl`). ping prints an
 * ICMP error only when the packet quoted inside it is its own echo request to `addr` — so every
 * "time-exceeded" hop past a NAT proves the quoted header was translated back.
 */
export async function traceroute(ns: string, addr: string, maxTtl = 8): Promise<TraceHop[]> {
  const hops: TraceHop[] = [];
  for (let ttl = 1; ttl <= maxTtl; ttl++) {
    const r = await runCommand(inNs(ns, ['ping', '-n', '-c', '1', '-W', '1', '-t', String(ttl), addr]), {
      allowFail: true,
      timeoutMs: 5000,
    });
    const out = r.stdout;
    const reached = /bytes from ([0-9.]+)/.exec(out);
    const exceeded = /From ([0-9.]+)[^\n]*Time to live exceeded/i.exec(out);
    const unreachable = /From ([0-9.]+)[^\n]*Unreachable/i.exec(out);
    if (reached) {
      hops.push({ ttl, from: reached[1]!, kind: 'reached' });
      break;
    }
    if (exceeded) hops.push({ ttl, from: exceeded[1]!, kind: 'time-exceeded' });
    else if (unreachable) {
      hops.push({ ttl, from: unreachable[1]!, kind: 'unreachable' });
      break;
    } else hops.push({ ttl, from: null, kind: 'none' });
  }
  return hops;
}

const HTTP_SERVER = `
const http = require('node:http');
const [host, port] = [process.argv[1], Number(process.argv[2])];
const server = http.createServer((req, res) => {
  const body = JSON.stringify({ remoteAddress: req.socket.remoteAddress, remotePort: req.socket.remotePort, path: req.url });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.listen(port, host, () => console.log('listening'));
`;

// Two requests on fresh connections: the first warms up Node's fetch (its first use loads the
// HTTP client), the second is timed (TCP handshake + request + response).
const HTTP_CLIENT = `
const get = () => fetch(process.argv[1], { signal: AbortSignal.timeout(Number(process.argv[2])), headers: { connection: 'close' } });
get().then((r) => r.text()).then(async () => {
  const t0 = process.hrtime.bigint();
  const r = await get();
  const body = await r.text();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(JSON.stringify({ status: r.status, body, ms }));
}).catch((e) => { console.log(JSON.stringify({ error: String(e && e.cause ? e.cause.code || e.cause : e) })); process.exitCode = 1; });
`;

export interface HttpResult {
  ok: boolean;
  status: number;
  /** The client's address as the server saw it (req.socket.remoteAddress). */
  seenSource: string | null;
  /** Time of the second request measured by the client, milliseconds (TCP handshake included). */
  ms: number;
  error?: string;
}

/** Starts a server that answers with the source address it saw; resolves once it listens. */
async function startServer(
  ns: string,
  name: string,
  script: string,
  args: readonly string[],
  lifetimeS: number,
): Promise<Daemon> {
  const d = startDaemon(ns, name, [process.execPath, '-e', script, ...args], { lifetimeS });
  try {
    await waitFor(
      `${name} to listen in ${ns}`,
      () => {
        if (d.exitStatus !== null) throw new WaitAbort(`${name} exited (${d.exitStatus}): ${d.output().trim()}`);
        return d.output().includes('listening');
      },
      10_000,
      50,
    );
  } catch (e) {
    await d.stop();
    throw e;
  }
  return d;
}

/**
 * An HTTP GET from `clientNs` to `targetAddr:port`, served in `serverNs` on `bindAddr`; the
 * server echoes req.socket.remoteAddress, i.e. the source address after every NAT on the way.
 */
export async function httpCheck(
  serverNs: string,
  bindAddr: string,
  clientNs: string,
  targetAddr: string,
  port = 8080,
  timeoutMs = 5000,
): Promise<HttpResult> {
  const server = await startServer(serverNs, 'http-server', HTTP_SERVER, [bindAddr, String(port)], 60);
  try {
    const r = await runCommand(
      inNs(clientNs, [
        process.execPath,
        '-e',
        HTTP_CLIENT,
        `http://${targetAddr}:${port}/weft-demo`,
        String(timeoutMs),
      ]),
      {
        allowFail: true,
        timeoutMs: timeoutMs + 5000,
      },
    );
    const line = r.stdout.trim().split('\n').pop() ?? '';
    let j: { status?: number; body?: string; ms?: number; error?: string };
    try {
      j = JSON.parse(line) as typeof j;
    } catch {
      return {
        ok: false,
        status: 0,
        seenSource: null,
        ms: NaN,
        error: `no answer (${(r.stderr || line).trim().slice(0, 200)})`,
      };
    }
    if (j.error !== undefined) return { ok: false, status: 0, seenSource: null, ms: NaN, error: j.error };
    const body = JSON.parse(j.body ?? '{}') as { remoteAddress?: string };
    return {
      ok: j.status === 200,
      status: j.status ?? 0,
      seenSource: stripV4Mapped(body.remoteAddress ?? null),
      ms: j.ms ?? NaN,
    };
  } finally {
    await server.stop();
  }
}

function stripV4Mapped(a: string | null): string | null {
  return a !== null && a.startsWith('::ffff:') ? a.slice(7) : a;
}

const UDP_SERVER = `
const dgram = require('node:dgram');
const s = dgram.createSocket('udp4');
s.on('message', (m, r) => { s.send(Buffer.from(JSON.stringify({ from: r.address, port: r.port, len: m.length })), r.port, r.address); });
s.bind(Number(process.argv[2]), process.argv[1], () => console.log('listening'));
`;

const UDP_CLIENT = `
const dgram = require('node:dgram');
const [addr, port, count, size] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3]), Number(process.argv[4])];
const s = dgram.createSocket('udp4');
let got = 0; let seen = null;
s.on('message', (m) => {
  const j = JSON.parse(m.toString()); seen = j.from; got++;
  if (j.len !== size) seen = 'bad-length:' + j.len;
});
let i = 0;
const timer = setInterval(() => {
  if (i < count) { const b = Buffer.alloc(size, i & 255); s.send(b, port, addr); i++; return; }
  clearInterval(timer);
  setTimeout(() => { console.log(JSON.stringify({ sent: count, received: got, seen })); s.close(); }, 1000);
}, 20);
`;

export interface UdpEchoResult {
  sent: number;
  received: number;
  /** The client's address as the server saw it. */
  seenSource: string | null;
}

/** `count` UDP datagrams of `size` bytes from `clientNs` to `targetAddr:port`; the server in `serverNs` echoes who sent them. */
export async function udpEchoCheck(
  serverNs: string,
  bindAddr: string,
  clientNs: string,
  targetAddr: string,
  port = 9090,
  count = 10,
  size = 512,
): Promise<UdpEchoResult> {
  const server = await startServer(serverNs, 'udp-echo', UDP_SERVER, [bindAddr, String(port)], 60);
  try {
    const r = await runCommand(
      inNs(clientNs, [process.execPath, '-e', UDP_CLIENT, targetAddr, String(port), String(count), String(size)]),
      {
        allowFail: true,
        timeoutMs: count * 20 + 10_000,
      },
    );
    const j = JSON.parse(r.stdout.trim().split('\n').pop() || '{}') as {
      sent?: number;
      received?: number;
      seen?: string | null;
    };
    return { sent: j.sent ?? 0, received: j.received ?? 0, seenSource: j.seen ?? null };
  } finally {
    await server.stop();
  }
}

export interface IperfResult {
  /** Receiver-side throughput, bits per second. */
  bitsPerSecond: number;
  /** TCP retransmissions (sender side), or null for UDP. */
  retransmits: number | null;
  /** UDP: lost datagrams percentage, or null for TCP. */
  lostPercent: number | null;
  /**
   * UDP: lost datagrams percentage on the path: without those the receiving iperf3's own socket
   * overflowed (RcvbufErrors in its namespace during the run: a receiver that fell behind on a
   * busy machine), or null for TCP.
   */
  pathLostPercent: number | null;
  error?: string;
}

/** Datagrams the kernel of `ns` dropped because a socket's receive buffer was full (/proc/net/snmp, Udp RcvbufErrors). */
export async function udpRcvbufErrors(ns: string): Promise<number> {
  const lines = (await runCommand(inNs(ns, ['cat', '/proc/net/snmp']))).stdout
    .split('\n')
    .filter((l) => l.startsWith('Udp:'));
  const at = lines[0]?.split(/\s+/).indexOf('RcvbufErrors') ?? -1;
  const v = at < 0 ? NaN : Number(lines[1]?.split(/\s+/)[at]);
  if (!Number.isFinite(v)) throw new Error(`no Udp RcvbufErrors in /proc/net/snmp of ${ns}`);
  return v;
}

let iperfPort = 5201;

/** iperf3 for `seconds` from `clientNs` to `targetAddr`; the server runs in `serverNs` bound to `bindAddr`. */
export async function iperfCheck(
  serverNs: string,
  bindAddr: string,
  clientNs: string,
  targetAddr: string,
  seconds = 3,
  udp?: { bitrate: string; length: number },
): Promise<IperfResult> {
  const port = String(iperfPort);
  iperfPort = iperfPort >= 5299 ? 5201 : iperfPort + 1;
  const server = startDaemon(serverNs, 'iperf3-server', ['iperf3', '-s', '-1', '-B', bindAddr, '-p', port], {
    lifetimeS: seconds + 30,
  });
  try {
    await waitFor(
      `iperf3 server in ${serverNs}`,
      async () => {
        if (server.exitStatus !== null) throw new WaitAbort(`iperf3 server exited: ${server.output().trim()}`);
        const ss = await runCommand(inNs(serverNs, ['ss', '-Hltn', `sport = :${port}`]), { allowFail: true });
        return ss.stdout.trim().length > 0;
      },
      5000,
      50,
    );
    const args = ['iperf3', '-c', targetAddr, '-p', port, '-t', String(seconds), '-J', '--connect-timeout', '3000'];
    if (udp) args.push('-u', '-b', udp.bitrate, '-l', String(udp.length));
    const overflowedBefore = udp ? await udpRcvbufErrors(serverNs) : 0;
    const r = await runCommand(inNs(clientNs, args), { allowFail: true, timeoutMs: (seconds + 20) * 1000 });
    let j: {
      error?: string;
      end?: {
        sum_received?: { bits_per_second?: number };
        sum_sent?: { retransmits?: number };
        sum?: { bits_per_second?: number; lost_percent?: number; lost_packets?: number; packets?: number };
      };
    };
    try {
      j = JSON.parse(r.stdout) as typeof j;
    } catch {
      return {
        bitsPerSecond: 0,
        retransmits: null,
        lostPercent: null,
        pathLostPercent: null,
        error: (r.stderr || r.stdout).trim().slice(0, 200) || 'no output',
      };
    }
    if (j.error)
      return { bitsPerSecond: 0, retransmits: null, lostPercent: null, pathLostPercent: null, error: j.error };
    if (udp) {
      const sum = j.end?.sum;
      const overflowed = (await udpRcvbufErrors(serverNs)) - overflowedBefore;
      return {
        bitsPerSecond: sum?.bits_per_second ?? 0,
        retransmits: null,
        lostPercent: sum?.lost_percent ?? null,
        pathLostPercent:
          sum?.lost_packets === undefined || sum.packets === undefined || sum.packets === 0
            ? null
            : (100 * Math.max(0, sum.lost_packets - overflowed)) / sum.packets,
      };
    }
    return {
      bitsPerSecond: j.end?.sum_received?.bits_per_second ?? 0,
      retransmits: j.end?.sum_sent?.retransmits ?? null,
      lostPercent: null,
      pathLostPercent: null,
    };
  } finally {
    await server.stop();
  }
}
