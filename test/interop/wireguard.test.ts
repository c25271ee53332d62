/**
 * Interop: our `weft-wg` daemon against Debian's `wireguard-go` (a program we did not write),
 * and against itself, in network namespaces this test creates. Both daemons are configured only
 * through Debian's `wg` tool. Captures are dissected by `tshark`.
 *
 * Topology (per suite):  ns A (weft-wg)  ══ veth 198.18.7.0/24 (+ fd07::/64) ══  ns B (peer)
 * Tunnel: 100.64.7.1/24 ↔ 100.64.7.2/24 and fd64::1/64 ↔ fd64::2/64. No default routes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINKTYPE_ETHERNET, LINKTYPE_RAW, PcapWriter } from '../util/pcap.js';
import { tsharkCounts, TSHARK_START_MS } from '../util/tshark-count.js';
import { e2eUnavailableReason, iperfTcp, ping, run, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const WEFT_WG = join(ROOT, 'bin/weft-wg');
const unavailable = e2eUnavailableReason(['wireguard-go', 'wg', 'iperf3', 'tshark', 'python3'], {
  built: ['dist/src/cli/weft-wg.js'],
});

type Kind = 'weft' | 'wireguard-go';

interface Side {
  ns: string;
  ifname: string;
  kind: Kind;
  keyFile: string;
  pub: string;
  proc: Spawned | null;
  underlay: string;
  tunnel4: string;
  tunnel6: string;
  /** weft only: run with the kernel offloads (TSO/USO TUN, UDP GSO/GRO) or WEFT_OFFLOAD=0. */
  offload: boolean;
}

function wg(topo: Topology, side: Side, args: string[]): string {
  return topo.exec(side.ns, ['wg', ...args], { timeoutMs: 10_000 });
}

async function startDaemon(topo: Topology, side: Side): Promise<void> {
  const sock = `/var/run/wireguard/${side.ifname}.sock`;
  const cmd = side.kind === 'weft' ? ['node', WEFT_WG, '-f', side.ifname] : ['wireguard-go', '-f', side.ifname];
  const env =
    side.kind === 'weft' ? { LOG_LEVEL: 'info', WEFT_OFFLOAD: side.offload ? '1' : '0' } : { LOG_LEVEL: 'error' };
  // A killed daemon's TUN leaves with its last file descriptor, which the kernel may release a
  // little after the process is reaped; a daemon started before then finds the name taken.
  await waitFor(`${side.ifname} released`, () => !linkExists(side), 10_000);
  side.proc = topo.spawnIn(side.ns, `${side.kind}-${side.ifname}`, cmd, { lifetimeS: 600, env });
  const proc = side.proc;
  let code: number | string | null = null;
  void proc.exited.then((c) => (code = c));
  await waitFor(
    `${side.kind} UAPI socket ${sock}`,
    () => {
      if (code !== null) throw new Error(`${side.kind} exited (${code}) before it was up: ${proc.output()}`);
      return existsSync(sock) && wgShowOk(topo, side);
    },
    10_000,
  );
  // WEFT_WORKERS in the test's environment reaches weft-wg (this file runs with any count): the
  // daemon must say it runs that many, so a run meant for N workers cannot pass on one.
  const workers = Number(process.env.WEFT_WORKERS ?? 1);
  if (side.kind === 'weft' && workers > 1) {
    await waitFor(`${side.ifname} reports worker threads`, () => / worker threads/.test(proc.output()), 10_000);
    expect(proc.output()).toContain(` ${workers} worker threads`);
  }
}

function linkExists(side: Side): boolean {
  return (
    spawnSync('ip', ['-n', side.ns, 'link', 'show', 'dev', side.ifname], { stdio: 'ignore', timeout: 5000 }).status ===
    0
  );
}

function wgShowOk(topo: Topology, side: Side): boolean {
  return (
    spawnSync('ip', ['netns', 'exec', side.ns, 'wg', 'show', side.ifname], { stdio: 'ignore', timeout: 5000 })
      .status === 0
  );
}

function configureAddresses(topo: Topology, side: Side): void {
  topo.exec(side.ns, ['ip', 'addr', 'add', `${side.tunnel4}/24`, 'dev', side.ifname]);
  topo.exec(side.ns, ['ip', 'addr', 'add', `${side.tunnel6}/64`, 'dev', side.ifname, 'nodad']);
  topo.exec(side.ns, ['ip', 'link', 'set', side.ifname, 'mtu', '1420', 'up']);
}

/** Sets our interface and one peer; `endpoint` null = learn it from the peer's handshake. */
function setPeer(topo: Topology, self: Side, other: Side, endpoint: string | null, extra: string[] = []): void {
  wg(topo, self, [
    'set',
    self.ifname,
    'private-key',
    self.keyFile,
    'listen-port',
    '51820',
    'peer',
    other.pub,
    'allowed-ips',
    `${other.tunnel4}/32,${other.tunnel6}/128`,
    ...(endpoint ? ['endpoint', endpoint] : []),
    ...extra,
  ]);
}

function dump(
  topo: Topology,
  side: Side,
): { endpoint: string; latestHandshake: number; rx: number; tx: number; keepalive: string } {
  // wg show IF dump: first line interface; then peer lines:
  // public-key preshared-key endpoint allowed-ips latest-handshake rx tx keepalive
  const lines = wg(topo, side, ['show', side.ifname, 'dump']).trim().split('\n');
  const f = (lines[1] ?? '').split('\t');
  return {
    endpoint: f[2] ?? '',
    latestHandshake: Number(f[4] ?? 0),
    rx: Number(f[5] ?? 0),
    tx: Number(f[6] ?? 0),
    keepalive: f[7] ?? '',
  };
}

/**
 * Captures WireGuard (UDP port 51820, `and` the extra capture filter) on `dev` for at most
 * `seconds` (or `maxPackets`) with tshark into `file`; resolves once tshark is capturing.
 */
async function startCapture(
  topo: Topology,
  side: Side,
  dev: string,
  file: string,
  seconds: number,
  maxPackets = 0,
  filter = '',
): Promise<Spawned> {
  const count = maxPackets > 0 ? ['-c', String(maxPackets), '-F', 'pcap'] : [];
  const bpf = `udp port 51820${filter ? ` and ${filter}` : ''}`;
  const cap = topo.spawnIn(
    side.ns,
    'tshark',
    ['tshark', '-q', '-i', dev, '-f', bpf, '-a', `duration:${seconds}`, ...count, '-w', file],
    { lifetimeS: seconds + 20 },
  );
  await waitFor(`tshark capturing on ${dev}`, () => cap.output().includes('Capturing on'), TSHARK_START_MS);
  return cap;
}

const WG_DECODE = ['-d', 'udp.port==51820,wg'];
/** Datagrams; those of a known WireGuard type (1-4); malformed ones or with an error (tsharkCounts). */
const WG_CHECKS = [
  'udp',
  'udp && (wg.type == 1 || wg.type == 2 || wg.type == 3 || wg.type == 4)',
  '_ws.malformed || _ws.expert.severity >= "error"',
] as const;

/** A server in `ns` that prints "<bytes> <sha256>" of what one TCP connection brought. */
const SINK_PY = [
  'import socket,hashlib,sys',
  's=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)',
  's.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)',
  's.bind((sys.argv[1],int(sys.argv[2])));s.listen(1);s.settimeout(30)',
  'c,_=s.accept();c.settimeout(30);h=hashlib.sha256();n=0',
  'while True:',
  '  d=c.recv(1<<20)',
  '  if not d: break',
  '  h.update(d);n+=len(d)',
  'print(n,h.hexdigest())',
].join('\n');
/** A client that sends N seeded random bytes and prints "<bytes> <sha256>" of them. */
const SOURCE_PY = [
  'import socket,hashlib,random,sys',
  'data=random.Random(int(sys.argv[4])).randbytes(int(sys.argv[3]))',
  'c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=30);c.sendall(data);c.close()',
  'print(len(data),hashlib.sha256(data).hexdigest())',
].join('\n');

/** Sends `bytes` seeded random bytes from `from` to addr in `to` over TCP; returns [sent, received] summaries. */
async function transfer(
  topo: Topology,
  from: string,
  to: string,
  addr: string,
  bytes: number,
  seed: number,
): Promise<[string, string]> {
  const port = String(6100 + seed);
  const server = topo.spawnIn(to, 'py-sink', ['python3', '-c', SINK_PY, addr, port], { lifetimeS: 60 });
  await waitFor(
    'tcp sink',
    () => topo.exec(to, ['ss', '-Hltn', `sport = :${port}`], { allowFail: true }).trim().length > 0,
    10_000,
  );
  const sent = topo
    .exec(from, ['python3', '-c', SOURCE_PY, addr, port, String(bytes), String(seed)], { timeoutMs: 60_000 })
    .trim();
  await server.exited;
  return [sent, server.output().trim()];
}

/** Largest transport message at MTU 1420: 16-byte header + 1420 + 16-byte tag. */
const MAX_WG_MESSAGE = 1452;

/**
 * Reads a classic pcap of Ethernet/IPv4/UDP frames; a UDP payload longer than one WireGuard
 * message is a GSO frame: it is cut where the next transport message of the same receiver index
 * and counter + 1 starts (all but the last equal-sized). Every datagram is written to a raw-IP
 * pcap (UDP port 51820) for tshark. `bad` counts payloads that cannot be cut that way.
 */
/**
 * `interleaved`: weft-wg runs several workers, which take counters from one shared word, so a
 * frame one worker sent holds increasing counters with the other workers' in between (one
 * thread: each the next).
 */
function splitGsoCapture(
  file: Uint8Array,
  interleaved: boolean,
): {
  pcap: Uint8Array;
  frames: number;
  gsoFrames: number;
  datagrams: number;
  bad: number;
  badWhy: string;
} {
  const dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
  if (dv.getUint32(0, true) !== 0xa1b2c3d4 || dv.getUint32(20, true) !== LINKTYPE_ETHERNET)
    throw new Error('expected a classic little-endian Ethernet pcap');
  const w = new PcapWriter(LINKTYPE_RAW);
  let frames = 0;
  let gsoFrames = 0;
  let datagrams = 0;
  let bad = 0;
  let badWhy = '';
  const emit = (ip: number, payload: number, len: number): void => {
    const d = new Uint8Array(28 + len);
    d.set(file.subarray(ip, ip + 20), 0); // IPv4 header (no options on this veth)
    d[0] = 0x45;
    d[2] = (28 + len) >>> 8;
    d[3] = (28 + len) & 0xff;
    d[10] = 0;
    d[11] = 0;
    d.set(file.subarray(ip + 20, ip + 24), 20); // ports
    d[24] = (8 + len) >>> 8;
    d[25] = (8 + len) & 0xff;
    d.set(file.subarray(payload, payload + len), 28);
    w.add(d);
    datagrams++;
  };
  const u32 = (o: number): number => dv.getUint32(o, true);
  for (let p = 24; p + 16 <= file.length;) {
    const incl = u32(p + 8);
    const f = p + 16;
    p = f + incl;
    if (dv.getUint16(f + 12) !== 0x0800 || file[f + 14 + 9] !== 17) continue;
    frames++;
    const ip = f + 14;
    const pl = ip + 28;
    const len = dv.getUint16(ip + 2) - 28; // the IP length, not the (possibly truncated) capture
    if (len <= MAX_WG_MESSAGE) {
      emit(ip, pl, len);
      continue;
    }
    gsoFrames++;
    const idx = u32(pl + 4);
    const c0 = u32(pl + 8);
    const follows = (c: number, prev: number): boolean =>
      interleaved ? c > prev && c - prev < 1 << 16 : c === (prev + 1) >>> 0;
    let seg = 0;
    for (let s = 32; s <= MAX_WG_MESSAGE && s < len; s++) {
      if (u32(pl + s) === 4 && u32(pl + s + 4) === idx && follows(u32(pl + s + 8), c0)) {
        seg = s;
        break;
      }
    }
    let ok = file[pl] === 4 && seg > 0;
    for (let k = 0, prev = c0 - 1; ok && k * seg < len; k++) {
      const o = pl + k * seg;
      const l = Math.min(seg, len - k * seg);
      ok = l >= 32 && u32(o) === 4 && u32(o + 4) === idx && (k === 0 || follows(u32(o + 8), prev));
      prev = u32(o + 8);
    }
    if (!ok) {
      bad++;
      badWhy = `frame ${frames}: ${len} bytes cannot be cut into transport messages (segment ${seg})`;
      continue;
    }
    for (let k = 0; k * seg < len; k++) emit(ip, pl + k * seg, Math.min(seg, len - k * seg));
  }
  return { pcap: w.toBytes(), frames, gsoFrames, datagrams, bad, badWhy };
}

const pairs: [string, Kind, boolean][] = [
  ['weft ↔ wireguard-go', 'wireguard-go', true],
  ['weft ↔ weft', 'weft', true],
  ['weft with WEFT_OFFLOAD=0 ↔ wireguard-go', 'wireguard-go', false],
];

describe.skipIf(unavailable !== null).each(pairs)('WireGuard interop: %s', (_label, peerKind, offload) => {
  const tag = !offload ? 'wn' : peerKind === 'weft' ? 'ww' : 'wg';
  const topo = new Topology(`wi${tag}-`);
  const tmp = mkdtempSync(join(tmpdir(), `weft-interop-${tag}-`));
  let A: Side;
  let B: Side;

  beforeAll(async () => {
    const nsA = topo.addNamespace('a');
    const nsB = topo.addNamespace('b');
    topo.link(nsA, 'va', '198.18.7.1/24', nsB, 'vb', '198.18.7.2/24');
    topo.exec(nsA, ['ip', 'addr', 'add', 'fd07::1/64', 'dev', topo.ns('va'), 'nodad']);
    topo.exec(nsB, ['ip', 'addr', 'add', 'fd07::2/64', 'dev', topo.ns('vb'), 'nodad']);
    const mk = (ns: string, ifname: string, kind: Kind, underlay: string, t4: string, t6: string): Side => {
      const keyFile = join(tmp, `${ifname}.key`);
      writeFileSync(keyFile, run(['wg', 'genkey']), { mode: 0o600 });
      const pub = run(['wg', 'pubkey'], { input: readFileSync(keyFile, 'utf8') }).trim();
      return { ns, ifname, kind, keyFile, pub, proc: null, underlay, tunnel4: t4, tunnel6: t6, offload };
    };
    A = mk(nsA, `wi${tag}a`, 'weft', '198.18.7.1', '100.64.7.1', 'fd64::1');
    B = mk(nsB, `wi${tag}b`, peerKind, '198.18.7.2', '100.64.7.2', 'fd64::2');
    await startDaemon(topo, A);
    await startDaemon(topo, B);
    configureAddresses(topo, A);
    configureAddresses(topo, B);
  }, 60_000);

  afterAll(async () => {
    await topo.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('completes a handshake initiated by weft and pings both ways (IPv4 inner)', () => {
    setPeer(topo, A, B, `${B.underlay}:51820`);
    setPeer(topo, B, A, null); // B can only learn A's endpoint from A's initiation
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    const a = dump(topo, A);
    const b = dump(topo, B);
    // last_handshake_time is a Unix timestamp of this handshake (both implementations agree).
    const nowS = Date.now() / 1000;
    expect(a.latestHandshake).toBeGreaterThan(nowS - 30);
    expect(a.latestHandshake).toBeLessThanOrEqual(nowS + 1);
    expect(Math.abs(a.latestHandshake - b.latestHandshake)).toBeLessThanOrEqual(2);
    expect(b.endpoint).toBe(`${A.underlay}:51820`);
    // Transfer counters agree across implementations (bytes on the wire, both directions).
    expect(a.tx).toBeGreaterThan(0);
    expect(Math.abs(a.tx - b.rx)).toBeLessThanOrEqual(a.tx * 0.2 + 200);
    expect(Math.abs(a.rx - b.tx)).toBeLessThanOrEqual(a.rx * 0.2 + 200);
  });

  it('carries IPv6 inner traffic', () => {
    expect(ping(topo, A.ns, B.tunnel6, 3).received).toBe(3);
    expect(ping(topo, B.ns, A.tunnel6, 3).received).toBe(3);
  });

  it('completes a handshake initiated by the peer', () => {
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'remove']);
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'remove']);
    setPeer(topo, B, A, `${A.underlay}:51820`);
    setPeer(topo, A, B, null); // now only B knows where to send the initiation
    expect(dump(topo, A).latestHandshake).toBe(0);
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    expect(dump(topo, A).endpoint).toBe(`${B.underlay}:51820`);
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
  });

  it('runs iperf3 TCP in both directions', async () => {
    const ab = await iperfTcp(topo, B.ns, A.ns, B.tunnel4, 1);
    const ba = await iperfTcp(topo, A.ns, B.ns, A.tunnel4, 1);
    expect(ab).toBeGreaterThan(0.001); // Gbit/s: the transfer happened
    expect(ba).toBeGreaterThan(0.001);
  }, 60_000);

  it('carries bulk TCP byte-exact both ways with the offloads in effect, and the WAN sees only well-formed WireGuard', async () => {
    // The daemon reports what the kernel granted (this kernel grants all of them).
    const log = A.proc!.output();
    if (offload) {
      expect(log).toMatch(/offloads: tun csum true tso true uso (true|false), udp gso true gro true/);
    } else {
      expect(log).toContain('offloads: tun off, udp gso false gro false (disabled by configuration)');
    }
    const pcap = join(tmp, 'bulk.pcap');
    const cap = await startCapture(topo, B, topo.ns('vb'), pcap, 15, 6000);
    const ab = await transfer(topo, A.ns, B.ns, B.tunnel4, 24 << 20, 1);
    const ba = await transfer(topo, B.ns, A.ns, A.tunnel4, 24 << 20, 2);
    const v6 = await transfer(topo, A.ns, B.ns, B.tunnel6, 8 << 20, 3);
    expect(ab[1]).toBe(ab[0]);
    expect(ba[1]).toBe(ba[0]);
    expect(v6[1]).toBe(v6[0]);
    expect(ab[0]).toMatch(/^25165824 [0-9a-f]{64}$/);
    // The capture ends at 6000 frames or when stopped here, after the transfers (with GSO on both
    // sides they may not fill 6000 frames; no need to wait out its 15 s).
    await topo.stop(cap);
    // veth carries UDP GSO frames unsegmented: cut them back into datagrams (each must be a
    // transport message of the run's session with the next counter), then let tshark judge each.
    const split = splitGsoCapture(readFileSync(pcap), Number(process.env.WEFT_WORKERS ?? 1) > 1);
    expect(split.bad, split.badWhy).toBe(0);
    expect(split.frames).toBeGreaterThan(1000);
    if (offload)
      expect(split.gsoFrames).toBeGreaterThan(0); // A sent super-datagrams
    else expect(split.gsoFrames).toBe(0);
    const cut = join(tmp, 'bulk-split.pcap');
    writeFileSync(cut, split.pcap);
    // One tshark pass: every datagram is WireGuard of a known type; none malformed.
    const [all, known, malformed] = await tsharkCounts(cut, [...WG_CHECKS], WG_DECODE);
    expect(all).toBe(split.datagrams);
    expect(known).toBe(all);
    expect(malformed).toBe(0);
  }, 120_000);

  it('works with a preshared key and refuses a mismatched one', async () => {
    const psk = join(tmp, 'psk');
    writeFileSync(psk, run(['wg', 'genpsk']), { mode: 0o600 });
    const other = join(tmp, 'psk2');
    writeFileSync(other, run(['wg', 'genpsk']), { mode: 0o600 });
    // Mismatch first: no session can be derived.
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'remove']);
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'remove']);
    setPeer(topo, A, B, `${B.underlay}:51820`, ['preshared-key', psk]);
    setPeer(topo, B, A, `${A.underlay}:51820`, ['preshared-key', other]);
    expect(ping(topo, A.ns, B.tunnel4, 2, 0.5).received).toBe(0);
    expect(dump(topo, A).latestHandshake).toBe(0);
    // Matching keys: the handshake completes (the initiation retry fires within REKEY_TIMEOUT).
    // One echo every 0.5 s as before, for at most as long, stopping at the first answer.
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'preshared-key', psk]);
    let received = 0;
    const t0 = performance.now();
    while (received === 0 && performance.now() - t0 < 6500) {
      const t = performance.now();
      received = ping(topo, A.ns, B.tunnel4, 1).received;
      await sleep(Math.max(0, 500 - (performance.now() - t)));
    }
    expect(received).toBeGreaterThan(0);
    expect(dump(topo, A).latestHandshake).toBeGreaterThan(0);
    expect(wg(topo, A, ['show', A.ifname, 'preshared-keys'])).toContain(readFileSync(psk, 'utf8').trim());
  }, 30_000);

  it('sends persistent keepalives, and tshark dissects every packet as valid WireGuard', async () => {
    const pcap = join(tmp, 'ka.pcap');
    const cap = await startCapture(topo, B, topo.ns('vb'), pcap, 5);
    // A second capture ends by itself at the second keepalive from A (32 bytes of UDP payload):
    // the main capture then holds at least two too, and stops there rather than after 5 s.
    const kaSeen = await startCapture(
      topo,
      B,
      topo.ns('vb'),
      join(tmp, 'ka-seen.pcap'),
      5,
      2,
      `src host ${A.underlay} and udp[4:2] = 40`,
    );
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'persistent-keepalive', '1']);
    ping(topo, A.ns, B.tunnel4, 2);
    await kaSeen.exited;
    await sleep(300); // the main capture has read the same frames
    await topo.stop(cap);
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'persistent-keepalive', '0']);
    // Keepalives: transport data (type 4) with an empty payload = 32 bytes of UDP payload, from A.
    // One tshark pass: the keepalives; every captured datagram is WireGuard of a known type; none
    // malformed.
    const [all, known, malformed, keepalives] = await tsharkCounts(
      pcap,
      [...WG_CHECKS, `wg.type == 4 && udp.length == 40 && ip.src == ${A.underlay}`],
      WG_DECODE,
    );
    expect(keepalives).toBeGreaterThanOrEqual(2);
    expect(all).toBeGreaterThan(0);
    expect(known).toBe(all);
    expect(malformed).toBe(0);
  }, 30_000);

  it('follows the peer when it roams to another underlay address', () => {
    // B moves from .2 to .3; wireguard-go keeps a cached source until its endpoint is set again.
    // (promote_secondaries: deleting the primary address must not take .3 with it.)
    topo.exec(B.ns, ['sysctl', '-qw', `net.ipv4.conf.${topo.ns('vb')}.promote_secondaries=1`]);
    topo.exec(B.ns, ['ip', 'addr', 'add', '198.18.7.3/24', 'dev', topo.ns('vb')]);
    topo.exec(B.ns, ['ip', 'addr', 'del', '198.18.7.2/24', 'dev', topo.ns('vb')]);
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'endpoint', `${A.underlay}:51820`]);
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    expect(dump(topo, A).endpoint).toBe('198.18.7.3:51820');
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
    // And onto an IPv6 underlay.
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'endpoint', '[fd07::1]:51820']);
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    expect(dump(topo, A).endpoint).toBe('[fd07::2]:51820');
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
    B.underlay = '198.18.7.3';
  });

  it('recovers after the peer daemon restarts, without touching our side', async () => {
    await topo.stop(B.proc!);
    await waitFor('peer interface gone', () => !wgShowOk(topo, B), 5000);
    await startDaemon(topo, B);
    configureAddresses(topo, B);
    // The restarted peer gets its whole configuration again (A still holds the PSK set above).
    setPeer(topo, B, A, `${A.underlay}:51820`, ['preshared-key', join(tmp, 'psk')]);
    // Nothing is done to A: its old session is dead; B's new initiation replaces it.
    expect(ping(topo, B.ns, A.tunnel4, 3).received).toBe(3);
    expect(ping(topo, A.ns, B.tunnel4, 3).received).toBe(3);
  }, 30_000);

  it('the peer daemon killed with SIGKILL by its PID and started again: traffic both ways again in < 10 s', async () => {
    // timeout(1) → ip netns exec (which execs) → the daemon: the daemon is timeout's only child.
    const kids = spawnSync('pgrep', ['-P', String(B.proc!.pid)], { encoding: 'utf8' })
      .stdout.trim()
      .split(/\s+/)
      .filter(Boolean);
    expect(kids).toHaveLength(1);
    const t0 = performance.now();
    process.kill(Number(kids[0]), 'SIGKILL');
    await B.proc!.exited;
    // What the killed daemon left (its UAPI socket file) must not block the next one.
    await startDaemon(topo, B);
    configureAddresses(topo, B);
    setPeer(topo, B, A, `${A.underlay}:51820`, ['preshared-key', join(tmp, 'psk')]);
    const once = (ns: string, addr: string): boolean =>
      /1 received/.test(
        topo.exec(ns, ['ping', '-n', '-c', '1', '-W', '1', addr], { allowFail: true, timeoutMs: 3000 }),
      );
    for (;;) {
      const ba = once(B.ns, A.tunnel4);
      const ab = once(A.ns, B.tunnel4);
      if (ba && ab) break;
      if (performance.now() - t0 > 30_000) throw new Error('no traffic 30 s after the SIGKILL');
      await sleep(100);
    }
    const seconds = (performance.now() - t0) / 1000;
    console.log(
      `SIGKILL of the ${B.kind} peer (our side ${A.kind}): traffic both ways again after ${seconds.toFixed(2)} s`,
    );
    expect(seconds).toBeLessThan(10);
  }, 45_000);
});

if (unavailable !== null) {
  describe('WireGuard interop', () => {
    it.skip(`non-root placeholder (as root a missing tool fails the file instead), skipped: ${unavailable}`, () => {});
  });
}
