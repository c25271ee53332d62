/**
 * weft-wg with WEFT_WORKERS=2 against Debian's wireguard-go: each worker's start-up warm-up
 * (nothing of it in `wg show`), handshakes both ways, several TCP
 * flows at once (spread over both workers' TUN queues), one TCP flow each way delivered in
 * order (sequence numbers in a capture at the receiver's TUN), `wg show` transfer counters
 * equal to the peer's, the peer roaming to another underlay address, new sessions while
 * traffic flows, and a flood of bogus handshake initiations from many source ports that neither
 * stops pings nor a new handshake and reaches the main thread's socket, not the workers'; a
 * second weft-wg with workers refused the first one's port.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEFT_WG, WgGoPair, type WgCounters, type WgSide } from './wg-go-pair.js';
import { e2eUnavailableReason, iperfTcp, ping, run, sleep, Topology, waitFor } from '../util/netns.js';

const unavailable = e2eUnavailableReason(['wireguard-go', 'wg', 'iperf3', 'tshark', 'python3'], {
  built: ['dist/src/cli/weft-wg.js', 'dist/bench/flood.js'],
});

const FLOOD_JS = join(process.cwd(), 'dist/bench/flood.js');

const FLOOD_PY = `
import socket, sys, os
dst = (sys.argv[1], int(sys.argv[2]))
n = int(sys.argv[3])
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(16)]
msg = bytearray(148)
msg[0] = 1
for i in range(n):
    msg[4:8] = os.urandom(4)
    socks[i % 16].sendto(msg, dst)
`;

describe.skipIf(unavailable !== null)('weft-wg with 2 worker threads ↔ wireguard-go', () => {
  const topo = new Topology('wkr-');
  const tmp = mkdtempSync(join(tmpdir(), 'weft-workers-'));
  let A: WgSide;
  let B: WgSide;

  const pair = new WgGoPair(topo, tmp);
  const wg = (side: WgSide, args: string[]): string => pair.wg(side, args);
  const dump = (side: WgSide): WgCounters => pair.dump(side);
  const quiescent = (): Promise<{ a: WgCounters; b: WgCounters }> => pair.quiescent();
  /**
   * One TCP flow from `from` to `to` for `seconds` (iperf3, one stream), captured at the
   * receiver's TUN: data segments that arrive below the highest sequence already seen
   * (reordered or retransmitted), the data segments, and the sender's retransmits.
   */
  const oneFlow = async (
    from: WgSide,
    to: WgSide,
    seconds: number,
    rate: string,
  ): Promise<{
    segments: number;
    backwards: number;
    outOfOrder: number;
    retransmits: number;
    wireMessages: number;
    wireBackwards: number;
    wireEpisodes: number;
  }> => {
    const pcap = join(tmp, `flow-${to.ifname}.pcap`);
    const wire = join(tmp, `wire-${from.ifname}.pcap`);
    const veth = topo.ns(from === A ? 'va' : 'vb');
    const wcap = topo.spawnIn(
      from.ns,
      'tcpdump',
      ['tcpdump', '-i', veth, '-n', '-s', '64', '-U', '-w', wire, `udp and src host ${from.underlay}`],
      { lifetimeS: seconds + 30 },
    );
    const port = String(5301 + Math.floor(Math.random() * 200));
    const cap = topo.spawnIn(
      to.ns,
      'tcpdump',
      [
        'tcpdump',
        '-i',
        to.ifname,
        '-n',
        '-s',
        '96',
        '-U',
        '-w',
        pcap,
        `tcp and src host ${from.tunnel4} and src port not ${port}`,
      ],
      { lifetimeS: seconds + 30 },
    );
    const server = topo.spawnIn(to.ns, 'iperf3-server', ['iperf3', '-s', '-1', '-B', to.tunnel4, '-p', port], {
      lifetimeS: seconds + 30,
    });
    await waitFor(
      'iperf3 server',
      () => topo.exec(to.ns, ['ss', '-Hltn', `sport = :${port}`], { allowFail: true }).trim().length > 0,
      5000,
    );
    await sleep(500); // tcpdump opens the interface
    const out = topo.exec(from.ns, ['iperf3', '-c', to.tunnel4, '-p', port, '-t', String(seconds), '-b', rate, '-J'], {
      timeoutMs: (seconds + 20) * 1000,
    });
    await topo.stop(server);
    await sleep(300);
    await topo.stop(cap);
    await topo.stop(wcap);
    // The sender's transport messages in the order they left: the first counter of each
    // (GSO) datagram never goes back within a session when one worker sends the flow.
    const w = spawnSync(
      'tshark',
      [
        '-r',
        wire,
        '-d',
        'udp.port==51820,wg',
        '-Y',
        'wg.type == 4',
        '-T',
        'fields',
        '-e',
        'wg.receiver',
        '-e',
        'wg.counter',
      ],
      { encoding: 'utf8', timeout: 60_000, maxBuffer: 1 << 28 },
    );
    if (w.status !== 0) throw new Error(`tshark -r ${wire}: ${w.stderr}`);
    const last = new Map<string, number>();
    let wireBackwards = 0;
    // Runs of such datagrams: what was in flight on one queue when the flow moved is one run.
    let wireEpisodes = 0;
    let inRun = false;
    let wireMessages = 0;
    for (const l of w.stdout.trim().split('\n').filter(Boolean)) {
      const [idx, ctr] = l.split('\t');
      const c = Number(ctr.split(',')[0]);
      const prev = last.get(idx);
      const back = prev !== undefined && c <= prev;
      if (back) wireBackwards++;
      else last.set(idx, c);
      if (back && !inRun) wireEpisodes++;
      inRun = back;
      wireMessages++;
    }
    const j = JSON.parse(out) as { end: { sum_sent: { retransmits: number } } };
    const r = spawnSync(
      'tshark',
      [
        '-r',
        pcap,
        '-Y',
        'tcp.len > 0',
        '-T',
        'fields',
        '-e',
        'tcp.stream',
        '-e',
        'tcp.seq_raw',
        '-e',
        'tcp.len',
        '-e',
        'tcp.analysis.out_of_order',
      ],
      { encoding: 'utf8', timeout: 60_000, maxBuffer: 1 << 28 },
    );
    if (r.status !== 0) throw new Error(`tshark -r ${pcap}: ${r.stderr}${r.error ? String(r.error) : ''}`);
    const rows = r.stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'));
    // The data connection is the stream with the most segments (iperf3's control one has few).
    const count = new Map<string, number>();
    for (const [st] of rows) count.set(st, (count.get(st) ?? 0) + 1);
    const data = [...count.entries()].sort((x, y) => y[1] - x[1])[0]?.[0];
    const flow = rows.filter(([st]) => st === data);
    let end = -1;
    let backwards = 0;
    let outOfOrder = 0;
    for (const [, seq, len, ooo] of flow) {
      const e = (Number(seq) + Number(len)) >>> 0;
      if (end >= 0 && ((e - end) | 0) <= 0) backwards++;
      else end = e;
      if (ooo) outOfOrder++;
    }
    return {
      segments: flow.length,
      backwards,
      outOfOrder,
      retransmits: j.end.sum_sent.retransmits,
      wireMessages,
      wireBackwards,
      wireEpisodes,
    };
  };
  const setPeer = (self: WgSide, other: WgSide, endpoint: string | null): void => pair.setPeer(self, other, endpoint);

  beforeAll(async () => {
    await pair.start({ ifPrefix: 'wkr', underlay24: '198.18.9', tunnel24: '100.64.9', weftEnv: { WEFT_WORKERS: '2' } });
    A = pair.A;
    B = pair.B;
  }, 60_000);

  afterAll(async () => {
    await topo.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('each worker warmed its data path before the port was bound; the warm-up left nothing in wg show', () => {
    const out = A.proc!.output();
    for (const i of [0, 1]) {
      const m = new RegExp(
        `worker ${i}: warm-up: (\\d+) packets in (\\d+) ms, I/O warm-up: (\\d+) echoes in (\\d+) ms`,
      ).exec(out);
      expect(m, `worker ${i}'s warm-up line in:\n${out}`).not.toBeNull();
      console.log(m![0]);
      expect(Number(m![1])).toBeGreaterThan(0);
      expect(Number(m![3])).toBeGreaterThan(0);
      // Before the sockets were bound: the start line (port, worker count) comes after it.
      expect(out.indexOf(m![0])).toBeLessThan(out.indexOf('2 worker threads'));
    }
    // The peer without an endpoint: no handshake and no packet yet, so every counter is the
    // warm-up's trace if it left one.
    setPeer(A, B, null);
    expect(dump(A)).toEqual({ handshake: 0, rx: 0, tx: 0 });
  });

  it('handshakes initiated by either side; pings both ways', () => {
    setPeer(A, B, `${B.underlay}:51820`);
    setPeer(B, A, null);
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    expect(dump(A).handshake).toBeGreaterThan(0);
  });

  it('carries several TCP flows at once both ways', async () => {
    const ab = await iperfTcp(topo, B.ns, A.ns, B.tunnel4, 3, ['-P', '4']);
    const ba = await iperfTcp(topo, A.ns, B.ns, A.tunnel4, 3, ['-P', '4']);
    console.log(`2 workers, 4 flows: A→B ${ab.toFixed(2)} Gbit/s, B→A ${ba.toFixed(2)} Gbit/s`);
    expect(ab).toBeGreaterThan(0.01);
    expect(ba).toBeGreaterThan(0.01);
  }, 60_000);

  it('one TCP flow each way arrives in order at the receiver (no reordering through the workers)', async () => {
    // Into weft (B→A): the segments at A's TUN. Out of weft (A→B): the order A's transport
    // messages leave in (wireguard-go drops some of A's bursts in its socket, and a loss and
    // its retransmit would look like reordering at B's TUN). The unpaced flow is printed.
    const ab = await oneFlow(A, B, 1, '300M');
    const ba = await oneFlow(B, A, 1, '300M');
    const full = await oneFlow(A, B, 1, '0');
    const text = (f: typeof ab): string =>
      `${f.segments} segments at the receiver's TUN, ${f.backwards} below the highest seen (${f.outOfOrder} out of order), ${f.retransmits} retransmits; ${f.wireMessages} datagrams on the sender's wire, ${f.wireBackwards} with a lower counter than one before (${f.wireEpisodes} runs of them)`;
    console.log(`one flow through 2 workers: paced A→B ${text(ab)}; paced B→A ${text(ba)}; unpaced A→B ${text(full)}`);
    expect(ab.segments).toBeGreaterThan(1000);
    expect(ba.segments).toBeGreaterThan(1000);
    expect(full.segments).toBeGreaterThan(1000);
    expect(ab.wireMessages).toBeGreaterThan(100);
    // A flow moves once, from the TUN queue the kernel first picks to the queue of the worker
    // that writes its replies (TUN flow steering follows the last writer): what was in flight on
    // the first queue (at most a worker's batch of 64) may then leave after, once, never again.
    for (const f of [ab, full]) {
      expect(f.wireEpisodes, text(f)).toBeLessThanOrEqual(1);
      expect(f.wireBackwards, text(f)).toBeLessThanOrEqual(64);
    }
    expect(ba.backwards).toBe(0);
  }, 60_000);

  it("wg show transfer counters move exactly as the peer's over lossless traffic on both workers", async () => {
    const q0 = await quiescent();
    // Four paced flows (on both workers' queues) and pings both ways.
    // A dials (SYNs on either TUN queue), B sends (wireguard-go as the receiver drops bursts
    // in its socket: bytes A sent and B never counted would not be a counting error).
    await iperfTcp(topo, B.ns, A.ns, B.tunnel4, 1, ['-P', '4', '-b', '20M', '-R']);
    expect(ping(topo, B.ns, A.tunnel4, 5, 0.05).received).toBe(5);
    expect(ping(topo, A.ns, B.tunnel4, 5, 0.05).received).toBe(5);
    const q1 = await quiescent();
    const d = { atx: q1.a.tx - q0.a.tx, arx: q1.a.rx - q0.a.rx, btx: q1.b.tx - q0.b.tx, brx: q1.b.rx - q0.b.rx };
    console.log(`counters moved: A tx ${d.atx} rx ${d.arx}; B tx ${d.btx} rx ${d.brx}`);
    expect(d.arx).toBeGreaterThan(1e6);
    expect(d.atx).toBe(d.brx);
    expect(d.arx).toBe(d.btx);
  }, 30_000);

  it('follows the peer when it roams to another underlay address', async () => {
    const q0 = await quiescent();
    try {
      topo.exec(B.ns, ['sysctl', '-qw', `net.ipv4.conf.${topo.ns('vb')}.promote_secondaries=1`]);
      topo.exec(B.ns, ['ip', 'addr', 'add', '198.18.9.3/24', 'dev', topo.ns('vb')]);
      topo.exec(B.ns, ['ip', 'addr', 'del', '198.18.9.2/24', 'dev', topo.ns('vb')]);
      wg(B, ['set', B.ifname, 'peer', A.pub, 'endpoint', `${A.underlay}:51820`]);
      expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
      expect(wg(A, ['show', A.ifname, 'endpoints'])).toContain('198.18.9.3:51820');
      expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
      // And back: the previous address again (another 4-tuple, possibly another worker).
      topo.exec(B.ns, ['ip', 'addr', 'add', '198.18.9.2/24', 'dev', topo.ns('vb')]);
      topo.exec(B.ns, ['ip', 'addr', 'del', '198.18.9.3/24', 'dev', topo.ns('vb')]);
      wg(B, ['set', B.ifname, 'peer', A.pub, 'endpoint', `${A.underlay}:51820`]);
      expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
      expect(wg(A, ['show', A.ifname, 'endpoints'])).toContain('198.18.9.2:51820');
      expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
    } finally {
      // Back at .2 whatever failed, for the tests after this one.
      topo.exec(B.ns, ['ip', 'addr', 'add', '198.18.9.2/24', 'dev', topo.ns('vb')], { allowFail: true });
      topo.exec(B.ns, ['ip', 'addr', 'del', '198.18.9.3/24', 'dev', topo.ns('vb')], { allowFail: true });
    }
    const q1 = await quiescent();
    expect(q1.a.tx - q0.a.tx).toBe(q1.b.rx - q0.b.rx);
    expect(q1.a.rx - q0.a.rx).toBe(q1.b.tx - q0.b.tx);
  }, 30_000);

  it('new sessions started by either side: the first pings under them all arrive', async () => {
    for (const [self, other] of [
      [A, B],
      [B, A],
    ] as const) {
      const before = dump(A).handshake;
      wg(self, ['set', self.ifname, 'peer', other.pub, 'remove']);
      await sleep(1100); // latest-handshake has 1 s resolution
      setPeer(self, other, `${other.underlay}:51820`);
      // The first ping waits for the handshake; the rest go under the new session both ways.
      expect(ping(topo, self.ns, other.tunnel4, 5, 0.05).received).toBe(5);
      expect(ping(topo, other.ns, self.tunnel4, 5, 0.05).received).toBe(5);
      expect(dump(A).handshake).toBeGreaterThan(before);
    }
  }, 30_000);

  it('a flood of bogus initiations from many ports stops neither pings nor a fresh handshake', async () => {
    const flood = topo.spawnIn(B.ns, 'flood', ['python3', '-c', FLOOD_PY, A.underlay, '51820', '200000'], {
      lifetimeS: 60,
    });
    await sleep(300);
    expect(ping(topo, B.ns, A.tunnel4, 5, 0.1).received).toBeGreaterThanOrEqual(4);
    // A new session while the flood runs: B forgets A and meets it again.
    const before = dump(A).handshake;
    wg(B, ['set', B.ifname, 'peer', A.pub, 'remove']);
    await sleep(1100); // latest-handshake has 1 s resolution
    setPeer(B, A, `${A.underlay}:51820`);
    await waitFor('ping after a new handshake', () => ping(topo, B.ns, A.tunnel4, 1).received === 1, 15_000);
    expect(dump(A).handshake).toBeGreaterThan(before);
    await flood.exited;
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
  }, 90_000);

  it('a flood of initiations with a valid mac1 puts it under load: cookie replies come back, pings go on', async () => {
    // bench/flood.ts: initiations with A's mac1 and no mac2 from one socket, 20k/s for 3 s. Under
    // load the main thread answers them with cookie replies (at most 20 a second to one source).
    const flood = topo.spawnIn(B.ns, 'flood-mac1', ['node', FLOOD_JS, A.underlay, '51820', A.pub, '20000', '3'], {
      lifetimeS: 30,
    });
    await sleep(1000);
    expect(ping(topo, B.ns, A.tunnel4, 5, 0.1).received).toBeGreaterThanOrEqual(4);
    await flood.exited;
    const m = /flood sent=(\d+) replies=(\d+)/.exec(flood.output());
    expect(m, flood.output()).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(30_000);
    expect(Number(m![2])).toBeGreaterThan(0);
    expect(Number(m![2])).toBeLessThanOrEqual(4 * 21);
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
  }, 30_000);

  it("a second weft-wg with workers cannot take the first one's port (EADDRINUSE, as wireguard-go)", async () => {
    // Both bind with SO_REUSEPORT as the same user: without a check the second would join the
    // first one's group and take a share of its datagrams.
    const ifname = 'wkrc';
    const second = topo.spawnIn(A.ns, 'weft-wg-second', ['node', WEFT_WG, '-f', ifname], {
      lifetimeS: 60,
      env: { LOG_LEVEL: 'info', WEFT_WORKERS: '2' },
    });
    try {
      await waitFor(`${ifname} UAPI`, () => existsSync(`/var/run/wireguard/${ifname}.sock`), 15_000);
      await waitFor(
        'the second weft-wg reports 2 worker threads',
        () => second.output().includes('2 worker threads'),
        10_000,
      );
      const r = spawnSync(
        'ip',
        ['netns', 'exec', A.ns, 'wg', 'set', ifname, 'listen-port', '51820', 'private-key', A.keyFile],
        { encoding: 'utf8', timeout: 10_000 },
      );
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/Address already in use/);
      expect(wg(A, ['show', ifname, 'listen-port']).trim()).not.toBe('51820');
      expect(ping(topo, B.ns, A.tunnel4, 5, 0.05).received).toBe(5);
      expect(ping(topo, A.ns, B.tunnel4, 5, 0.05).received).toBe(5);
    } finally {
      await topo.stop(second);
    }
  }, 45_000);

  it('stops on SIGTERM without a warning from Node (every worker closes what it opened)', async () => {
    const proc = A.proc!;
    await topo.stop(proc);
    expect(proc.output()).not.toMatch(/Warning:/);
  }, 20_000);

  it("the flood reached the main thread's own socket, not a worker's (SO_REUSEPORT steering)", () => {
    // Read from the stop log of the test above: what the main thread's sockets received, and
    // per worker what it dropped. Without steering the workers screen the flood and count its
    // bad mac1s themselves.
    const out = A.proc!.output();
    expect(out).toMatch(/2 worker threads \(handshake messages steered to this thread\)/);
    const own = /this thread's sockets received (\d+) datagrams/.exec(out);
    expect(own, out).not.toBeNull();
    expect(Number(own![1])).toBeGreaterThan(10_000);
    const workerLines = out.split('\n').filter((l) => /worker \d: handed over/.test(l));
    expect(workerLines.length).toBe(2);
    for (const l of workerLines) expect(l).not.toMatch(/invalid_mac1|cookie_required|rate_limited/);
    expect(out).toMatch(/dropped since start: .*invalid_mac1 \d{5,}/);
  });
});

if (unavailable !== null) {
  describe('weft-wg with 2 worker threads', () => {
    it.skip(`non-root placeholder (as root a missing tool fails the file instead), skipped: ${unavailable}`, () => {});
  });
}
