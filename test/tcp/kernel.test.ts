/**
 * The oracle: the engine behind a TUN device in a network namespace, against the Linux
 * kernel's TCP through real sockets (node:net in the namespace). 10 MB both ways with sha256
 * equality, graceful close both ways, RST both ways, active open to a kernel listener, the
 * kernel's retransmissions when the harness drops its segments (seeded), 4 MB both ways through
 * seeded links that lose, reorder and duplicate 5 % each way, and tshark's view of our segments
 * (MSS, no malformed packets, no checksum errors).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryLink } from '../../src/io/memory-link.js';
import { TunDevice } from '../../src/io/tun.js';
import { addressEquals, parseAddress } from '../../src/packet/addr.js';
import { IpView, parseIp } from '../../src/packet/ip-view.js';
import { tcpSeq, tcpHeaderLen } from '../../src/packet/tcp.js';
import type { TcpConnection } from '../../src/tcp/connection.js';
import { TCP_EV_CLOSED, TCP_EV_PEER_FIN } from '../../src/tcp/state.js';
import { TcpEndpoint } from '../../src/tcp/endpoint.js';
import type { TcpOptions } from '../../src/tcp/options.js';
import { Topology, e2eUnavailableReason, run, waitFor, type Spawned } from '../util/netns.js';
import { PcapWriter, LINKTYPE_RAW, TSHARK_TCP_BAD } from '../util/pcap.js';
import { Prng } from '../util/prng.js';
import { TunTcpHarness } from './tun-harness.js';

const PEER = join(import.meta.dirname, 'kernel-peer.mjs');
const KERNEL4 = '198.18.77.1';
const ENGINE4 = '198.18.77.2';
const KERNEL6 = 'fd77::1';
const ENGINE6 = 'fd77::2';
const reason = e2eUnavailableReason(['ip', 'tshark', 'timeout']);

interface PeerResult {
  sent: string;
  received: string;
  bytesIn: number;
  bytesOut: number;
  error?: string;
  reset?: boolean;
}

/** The engine side of an exchange: sends `out`, hashes what it reads, closes after sending. */
class Sink {
  readonly hashIn = createHash('sha256');
  bytesIn = 0;
  sent = 0;
  peerFin = false;
  closed = false;
  closeReason: string | null = null;
  private readonly tmp = new Uint8Array(65536);
  constructor(
    private readonly out: Uint8Array,
    private readonly closeAfterSend = true,
  ) {}

  on(c: TcpConnection): void {
    const ev = c.takeEvents();
    for (let n = c.recv(this.tmp, 0, this.tmp.length); n > 0; n = c.recv(this.tmp, 0, this.tmp.length)) {
      this.hashIn.update(this.tmp.subarray(0, n));
      this.bytesIn += n;
    }
    while (this.sent < this.out.length) {
      const n = c.send(this.out, this.sent, this.out.length - this.sent);
      if (n === 0) break;
      this.sent += n;
    }
    if (this.sent === this.out.length && this.closeAfterSend) c.close();
    if (ev & TCP_EV_PEER_FIN) this.peerFin = true;
    if (ev & TCP_EV_CLOSED) {
      this.closed = true;
      this.closeReason = c.closeReason;
    }
  }
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe.skipIf(reason !== null)(`tcp engine against the kernel's TCP${reason ? ` (skipped: ${reason})` : ''}`, () => {
  const topo = new Topology('tcpk-');
  let ns: string;
  let dir: string;

  beforeAll(() => {
    ns = topo.addNamespace('a');
    dir = mkdtempSync(join(tmpdir(), 'weft-tcpk-'));
  });
  afterAll(async () => {
    await topo.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A TUN in the namespace with the kernel's addresses, the engine serving the others. */
  async function setup(
    name: string,
    opts: Partial<TcpOptions> = {},
    mtu = 1500,
  ): Promise<{ h: TunTcpHarness; engine: TcpEndpoint }> {
    const dev = TunDevice.open({ name, mtu, netns: ns, txQueueLen: 4096 });
    run(['ip', '-n', ns, 'addr', 'add', `${KERNEL4}/24`, 'dev', name]);
    run(['ip', '-n', ns, 'addr', 'add', `${KERNEL6}/64`, 'dev', name, 'nodad']);
    const e4 = parseAddress(ENGINE4);
    const e6 = parseAddress(ENGINE6);
    // The engine answers for its two addresses only (any port); others are refused.
    const engine = new TcpEndpoint(
      { mtu, ...opts },
      {
        accept: (family, addr, off) =>
          family === 4 ? addressEquals(addr, off, e4, 0, 4) : addressEquals(addr, off, e6, 0, 16),
      },
    );
    const h = new TunTcpHarness(dev, engine);
    h.start();
    return { h, engine };
  }

  function peer(args: string[], lifetimeS = 60): Spawned {
    return topo.spawnIn(ns, 'peer', ['node', PEER, ...args], { lifetimeS });
  }

  async function result(p: Spawned): Promise<PeerResult> {
    await p.exited;
    const line = p
      .output()
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .pop();
    if (line === undefined) throw new Error(`peer printed no result: ${p.output()}`);
    return JSON.parse(line) as PeerResult;
  }

  for (const family of [4, 6] as const) {
    it(`IPv${family}: 10 MB both ways at once, sha256 equal, graceful close both ways`, async () => {
      const { h, engine } = await setup(`tcpk-d${family}`);
      try {
        const out = randomBytes(10 * 1024 * 1024);
        const sink = new Sink(out);
        h.onReady = (c) => sink.on(c);
        const p = peer(['client', family === 4 ? ENGINE4 : ENGINE6, '5001', String(10 * 1024 * 1024)]);
        const r = await result(p);
        await waitFor('engine side closed', () => sink.closed, 10_000, 20);
        expect(r.error).toBeUndefined();
        expect(r.bytesIn).toBe(out.length);
        expect(r.received).toBe(sha(out));
        expect(sink.bytesIn).toBe(r.bytesOut);
        expect(sink.hashIn.digest('hex')).toBe(r.sent);
        expect(sink.peerFin).toBe(true);
        expect(sink.closeReason).toBe('closed');
        expect(engine.stats.accepted).toBe(1);
        expect(engine.stats.dropsByReason().bad_checksum ?? 0).toBe(0);
      } finally {
        await h.stop();
      }
    }, 120_000);
  }

  it('active open: the engine connects to a kernel listener; 2 MB both ways; the kernel closes first', async () => {
    const { h, engine } = await setup('tcpk-ao');
    try {
      const p = peer(['server', KERNEL4, '5002', String(2 * 1024 * 1024)]);
      await waitFor('listener', () => p.output().includes('listening'), 10_000, 20);
      const out = randomBytes(2 * 1024 * 1024);
      const sink = new Sink(out, false);
      h.onReady = (c) => {
        sink.on(c);
        if (sink.peerFin && sink.sent === out.length) c.close();
      };
      const c = engine.connect(4, parseAddress(ENGINE4), 40123, parseAddress(KERNEL4), 5002)!;
      expect(c).not.toBeNull();
      h.kick();
      const r = await result(p);
      await waitFor('engine side closed', () => sink.closed, 10_000, 20);
      expect(r.error).toBeUndefined();
      expect(r.received).toBe(sha(out));
      expect(sink.hashIn.digest('hex')).toBe(r.sent);
      expect(engine.stats.connected).toBe(1);
    } finally {
      await h.stop();
    }
  }, 60_000);

  it("3% of the segments dropped each way (seeded): the kernel's and the engine's retransmissions repair them; SACK blocks in tshark", async () => {
    const { h, engine } = await setup('tcpk-rx');
    try {
      const rng = new Prng(0x5eed);
      const v = new IpView();
      let highest = -1;
      let kernelRetransmits = 0;
      h.dropIn = (buf, off, len) => {
        if (parseIp(buf, off, len, v) !== 0 || v.l4 < 0) return false;
        const dataLen = v.l4Len - tcpHeaderLen(buf, v.l4);
        if (dataLen === 0) return false;
        const end = (tcpSeq(buf, v.l4) + dataLen) >>> 0;
        if (highest >= 0 && ((end - highest) | 0) <= 0) kernelRetransmits++;
        else highest = end;
        return rng.nextU32() % 100 < 3;
      };
      const out = randomBytes(1024 * 1024);
      const sink = new Sink(out);
      h.onReady = (c) => sink.on(c);
      h.dropOut = (_buf, _off, len) => len > 100 && rng.nextU32() % 100 < 3;
      h.pcap = new PcapWriter(LINKTYPE_RAW);
      const r = await result(peer(['client', ENGINE4, '5003', String(3 * 1024 * 1024)]));
      await waitFor('engine side closed', () => sink.closed, 20_000, 20);
      expect(r.error).toBeUndefined();
      expect(sink.hashIn.digest('hex')).toBe(r.sent);
      expect(r.received).toBe(sha(out));
      expect(h.droppedIn).toBeGreaterThan(10);
      expect(kernelRetransmits).toBeGreaterThan(0);
      expect(h.droppedOut).toBeGreaterThan(5);
      expect(engine.stats.retransmits + engine.stats.fastRetransmits).toBeGreaterThan(0);
      // Our ACKs told the kernel what arrived out of order (SACK, RFC 2018).
      const file = join(dir, 'loss.pcap');
      h.pcap.writeFile(file);
      const sacks = run([
        'tshark',
        '-r',
        file,
        '-Y',
        `ip.src == ${ENGINE4} && tcp.options.sack_le`,
        '-T',
        'fields',
        '-e',
        'frame.number',
      ]).trim();
      expect(sacks.split('\n').length).toBeGreaterThan(5);
      const bad = run([
        'tshark',
        '-r',
        file,
        '-o',
        'tcp.check_checksum:TRUE',
        // The payload is random bytes: read as data, not as whatever protocol the kernel's
        // ephemeral port is registered for (whose dissector would call it malformed).
        '-d',
        'tcp.port==5003,data',
        '-Y',
        // Not expert severity here: with segments dropped on purpose, tshark's sequence analysis
        // flags some frames itself; the loss-free capture below checks it.
        `ip.src == ${ENGINE4} && (_ws.malformed || ${TSHARK_TCP_BAD})`,
        '-T',
        'fields',
        '-e',
        'frame.number',
        '-e',
        '_ws.expert.message',
        '-e',
        '_ws.expert.severity',
        '-e',
        'tcp.checksum.status',
      ]).trim();
      expect(bad.split('\n').filter(Boolean)).toEqual([]);
      // The gaps were held as out-of-order ranges or resent: the engine reports no bad input.
      expect(engine.stats.dropsByReason().bad_checksum ?? 0).toBe(0);
    } finally {
      await h.stop();
    }
  }, 60_000);

  it('seeded links each way with 5 % loss, 5 % reordering and 5 % duplication: 4 MB both ways at once intact; the counters agree', async () => {
    const { h, engine } = await setup('tcpk-im');
    try {
      const imp = { loss: 0.05, reorder: 0.05, reorderMs: 3, duplicate: 0.05 };
      h.linkIn = new MemoryLink({ ...imp, seed: 0x1e57 });
      h.linkOut = new MemoryLink({ ...imp, seed: 0x2e57 });
      // Kernel retransmissions seen on the wire before the link (data ending at or below the
      // highest end seen so far).
      const v = new IpView();
      let highest = -1;
      let kernelRetransmits = 0;
      h.dropIn = (buf, off, len) => {
        if (parseIp(buf, off, len, v) !== 0 || v.l4 < 0) return false;
        const dataLen = v.l4Len - tcpHeaderLen(buf, v.l4);
        if (dataLen === 0) return false;
        const end = (tcpSeq(buf, v.l4) + dataLen) >>> 0;
        if (highest >= 0 && ((end - highest) | 0) <= 0) kernelRetransmits++;
        else highest = end;
        return false;
      };
      const size = 4 * 1024 * 1024;
      const out = randomBytes(size);
      const sink = new Sink(out);
      h.onReady = (c) => sink.on(c);
      const r = await result(peer(['client', ENGINE4, '5008', String(size)], 90));
      await waitFor('engine side closed', () => sink.closed, 30_000, 20);
      await waitFor('held-back copies delivered', () => h.delayed === 0, 5000, 10);
      expect(r.error).toBeUndefined();
      expect(r.bytesIn).toBe(size);
      expect(r.received).toBe(sha(out));
      expect(sink.bytesIn).toBe(size);
      expect(sink.hashIn.digest('hex')).toBe(r.sent);
      expect(sink.closeReason).toBe('closed');
      const li = h.linkIn;
      const lo = h.linkOut;
      const st = engine.stats;
      // Each link did what it was set to (seeded: the same run each time).
      for (const l of [li, lo]) {
        expect(l.lost).toBeGreaterThan(0);
        expect(l.duplicated).toBeGreaterThan(0);
        expect(l.reordered).toBeGreaterThan(0);
      }
      // Every copy the inbound link passed reached the engine and has an input result; the
      // engine's accounting of them is complete (each taken or a counted drop).
      const inputs = h.results.reduce((a, b) => a + (b ?? 0), 0);
      expect(inputs).toBe(li.sent + li.duplicated - li.lost);
      expect(st.segmentsIn).toBe(inputs);
      for (let code = 1; code < st.drops.length; code++) expect(st.drops[code]).toBe(h.results[code] ?? 0);
      // Loss, reordering and duplication inbound: segments held out of order, duplicates
      // recognised (no more than the copies that could be duplicates: the link's duplicates plus
      // the kernel's retransmissions), the kernel retransmitting.
      expect(st.outOfOrder).toBeGreaterThan(0);
      expect(st.duplicates).toBeGreaterThan(0);
      expect(st.duplicates).toBeLessThanOrEqual(li.duplicated + kernelRetransmits);
      expect(kernelRetransmits).toBeGreaterThan(0);
      // Loss outbound: the engine retransmitted; nothing arrived corrupted.
      expect(st.retransmits).toBeGreaterThan(0);
      expect(st.retransmits).toBeGreaterThanOrEqual(st.fastRetransmits);
      expect(st.timeouts).toBe(0);
      expect(st.dropsByReason().bad_checksum ?? 0).toBe(0);
      console.log(
        `impaired 4 MB each way: in ${JSON.stringify({ sent: li.sent, lost: li.lost, dup: li.duplicated, reordered: li.reordered })}` +
          ` out ${JSON.stringify({ sent: lo.sent, lost: lo.lost, dup: lo.duplicated, reordered: lo.reordered })}` +
          ` engine ${JSON.stringify({ retransmits: st.retransmits, fast: st.fastRetransmits, outOfOrder: st.outOfOrder, duplicates: st.duplicates, drops: st.dropsByReason() })}` +
          ` kernelRetransmits ${kernelRetransmits}`,
      );
    } finally {
      await h.stop();
    }
  }, 120_000);

  it('RST from the kernel (socket abort) ends the engine connection with reason reset', async () => {
    const { h, engine } = await setup('tcpk-r1');
    try {
      const sink = new Sink(new Uint8Array(0), false);
      h.onReady = (c) => sink.on(c);
      const r = await result(peer(['reset', ENGINE4, '5004']));
      expect(r.reset).toBe(true);
      await waitFor('engine saw the reset', () => sink.closed, 5000, 20);
      expect(sink.closeReason).toBe('reset');
      expect(sink.bytesIn).toBe(1000);
      expect(engine.stats.resetsIn).toBe(1);
    } finally {
      await h.stop();
    }
  }, 30_000);

  it('RST from the engine (abort) reaches the kernel socket as ECONNRESET; a refused port too', async () => {
    const { h, engine } = await setup('tcpk-r2');
    try {
      h.onReady = (c) => {
        c.takeEvents();
        const tmp = new Uint8Array(2000);
        if (c.recv(tmp, 0, tmp.length) > 0) {
          c.abort();
          h.kick();
        }
      };
      const r = await result(peer(['expect-reset', ENGINE4, '5005']));
      expect(r.error).toBe('ECONNRESET');
      expect(engine.stats.resetsOut).toBeGreaterThanOrEqual(1);
      // An address the engine does not serve: the SYN is refused with RST+ACK.
      const r2 = await result(peer(['client', '198.18.77.3', '5006', '10']));
      expect(r2.error).toBe('ECONNREFUSED');
      expect(engine.stats.dropsByReason().refused).toBe(1);
    } finally {
      await h.stop();
    }
  }, 30_000);

  it('tshark: MSS both ways (ours from the MTU, the kernel honours it), no malformed segment, checksums good', async () => {
    // The TUN's MTU is 1400 (the kernel announces 1360); the engine's is 1280 (it announces 1240).
    const { h, engine } = await setup('tcpk-ts', { mtu: 1280 }, 1400);
    try {
      h.pcap = new PcapWriter(LINKTYPE_RAW);
      const out = randomBytes(300_000);
      const sink = new Sink(out);
      h.onReady = (c) => sink.on(c);
      const r = await result(peer(['client', ENGINE4, '5007', '300000']));
      await waitFor('engine side closed', () => sink.closed, 10_000, 20);
      expect(r.received).toBe(sha(out));
      const file = join(dir, 'tcp.pcap');
      h.pcap.writeFile(file);
      const syn = run([
        'tshark',
        '-r',
        file,
        '-Y',
        'tcp.flags.syn==1',
        '-T',
        'fields',
        '-e',
        'ip.src',
        '-e',
        'tcp.options.mss_val',
        '-e',
        'tcp.options.wscale.shift',
      ])
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(syn).toEqual([
        [KERNEL4, '1360', expect.any(String)],
        [ENGINE4, '1240', expect.any(String)],
      ]);
      // Largest payload each way: neither exceeds the MSS the other announced.
      const sizes = run(['tshark', '-r', file, '-T', 'fields', '-e', 'ip.src', '-e', 'tcp.len']).trim().split('\n');
      const max = { [KERNEL4]: 0, [ENGINE4]: 0 } as Record<string, number>;
      for (const l of sizes) {
        const [src, len] = l.split('\t');
        max[src!] = Math.max(max[src!] ?? 0, Number(len));
      }
      expect(max[KERNEL4]).toBe(1240);
      expect(max[ENGINE4]).toBe(1240);
      const bad = run([
        'tshark',
        '-r',
        file,
        '-o',
        'tcp.check_checksum:TRUE',
        '-o',
        'ip.check_checksum:TRUE',
        // Random payload: as data (a random ephemeral port once made tshark read it as another
        // protocol and report "Type value not expected").
        '-d',
        'tcp.port==5007,data',
        '-Y',
        `_ws.malformed || _ws.expert.severity == error || ip.checksum.status == 0 || ${TSHARK_TCP_BAD}`,
        '-T',
        'fields',
        '-e',
        'frame.number',
        '-e',
        '_ws.expert.message',
        '-e',
        '_ws.expert.severity',
        '-e',
        'tcp.checksum.status',
      ]).trim();
      expect(bad.split('\n').filter(Boolean)).toEqual([]);
      const ours = Number(
        run(['tshark', '-r', file, '-Y', `ip.src == ${ENGINE4}`, '-T', 'fields', '-e', 'frame.number'])
          .trim()
          .split('\n').length,
      );
      expect(ours).toBeGreaterThan(200);
      expect(engine.stats.accepted).toBe(1);
    } finally {
      await h.stop();
    }
  }, 60_000);
});
