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
import {
  e2eUnavailableReason, iperfTcp, ping, run, sleep, Topology, waitFor, type Spawned,
} from '../util/netns.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const WEFT_WG = join(ROOT, 'bin/weft-wg');
const unavailable = e2eUnavailableReason(['wireguard-go', 'wg', 'iperf3', 'tshark'], { built: ['dist/src/cli/weft-wg.js'] });

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
}

function wg(topo: Topology, side: Side, args: string[]): string {
  return topo.exec(side.ns, ['wg', ...args], { timeoutMs: 10_000 });
}

async function startDaemon(topo: Topology, side: Side): Promise<void> {
  const sock = `/var/run/wireguard/${side.ifname}.sock`;
  const cmd = side.kind === 'weft' ? ['node', WEFT_WG, '-f', side.ifname] : ['wireguard-go', '-f', side.ifname];
  side.proc = topo.spawnIn(side.ns, `${side.kind}-${side.ifname}`, cmd, { lifetimeS: 600, env: { LOG_LEVEL: 'error' } });
  await waitFor(`${side.kind} UAPI socket ${sock}`, () => existsSync(sock) && wgShowOk(topo, side), 10_000);
}

function wgShowOk(topo: Topology, side: Side): boolean {
  return spawnSync('ip', ['netns', 'exec', side.ns, 'wg', 'show', side.ifname], { stdio: 'ignore', timeout: 5000 }).status === 0;
}

function configureAddresses(topo: Topology, side: Side): void {
  topo.exec(side.ns, ['ip', 'addr', 'add', `${side.tunnel4}/24`, 'dev', side.ifname]);
  topo.exec(side.ns, ['ip', 'addr', 'add', `${side.tunnel6}/64`, 'dev', side.ifname, 'nodad']);
  topo.exec(side.ns, ['ip', 'link', 'set', side.ifname, 'mtu', '1420', 'up']);
}

/** Sets our interface and one peer; `endpoint` null = learn it from the peer's handshake. */
function setPeer(topo: Topology, self: Side, other: Side, endpoint: string | null, extra: string[] = []): void {
  wg(topo, self, [
    'set', self.ifname, 'private-key', self.keyFile, 'listen-port', '51820',
    'peer', other.pub, 'allowed-ips', `${other.tunnel4}/32,${other.tunnel6}/128`,
    ...(endpoint ? ['endpoint', endpoint] : []), ...extra,
  ]);
}

function dump(topo: Topology, side: Side): { endpoint: string; latestHandshake: number; rx: number; tx: number; keepalive: string } {
  // wg show IF dump: first line interface; then peer lines:
  // public-key preshared-key endpoint allowed-ips latest-handshake rx tx keepalive
  const lines = wg(topo, side, ['show', side.ifname, 'dump']).trim().split('\n');
  const f = (lines[1] ?? '').split('\t');
  return { endpoint: f[2] ?? '', latestHandshake: Number(f[4] ?? 0), rx: Number(f[5] ?? 0), tx: Number(f[6] ?? 0), keepalive: f[7] ?? '' };
}

/** Captures UDP on B's veth for `seconds` with tshark, returning the pcap path. */
function startCapture(topo: Topology, side: Side, dev: string, file: string, seconds: number): Spawned {
  return topo.spawnIn(side.ns, 'tshark', ['tshark', '-q', '-i', dev, '-f', 'udp port 51820', '-a', `duration:${seconds}`, '-w', file], { lifetimeS: seconds + 20 });
}

function tsharkFields(file: string, filter: string, fields: string[]): string[][] {
  const r = run(['tshark', '-r', file, '-d', 'udp.port==51820,wg', '-Y', filter, '-T', 'fields', ...fields.flatMap((f) => ['-e', f])], { timeoutMs: 30_000 });
  return r.trim().split('\n').filter(Boolean).map((l) => l.split('\t'));
}

const pairs: [string, Kind][] = [['weft ↔ wireguard-go', 'wireguard-go'], ['weft ↔ weft', 'weft']];

describe.skipIf(unavailable !== null).each(pairs)('WireGuard interop: %s', (_label, peerKind) => {
  const tag = peerKind === 'weft' ? 'ww' : 'wg';
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
      return { ns, ifname, kind, keyFile, pub, proc: null, underlay, tunnel4: t4, tunnel6: t6 };
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
    const ab = await iperfTcp(topo, B.ns, A.ns, B.tunnel4, 2);
    const ba = await iperfTcp(topo, A.ns, B.ns, A.tunnel4, 2);
    expect(ab).toBeGreaterThan(0.001); // Gbit/s: the transfer happened
    expect(ba).toBeGreaterThan(0.001);
  }, 60_000);

  it('works with a preshared key and refuses a mismatched one', () => {
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
    wg(topo, B, ['set', B.ifname, 'peer', A.pub, 'preshared-key', psk]);
    const r = ping(topo, A.ns, B.tunnel4, 12, 0.5);
    expect(r.received).toBeGreaterThan(0);
    expect(dump(topo, A).latestHandshake).toBeGreaterThan(0);
    expect(wg(topo, A, ['show', A.ifname, 'preshared-keys'])).toContain(readFileSync(psk, 'utf8').trim());
  }, 30_000);

  it('sends persistent keepalives, and tshark dissects every packet as valid WireGuard', async () => {
    const pcap = join(tmp, 'ka.pcap');
    const cap = startCapture(topo, B, topo.ns('vb'), pcap, 5);
    await sleep(800); // tshark needs a moment to open the interface
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'persistent-keepalive', '1']);
    ping(topo, A.ns, B.tunnel4, 2);
    await cap.exited;
    wg(topo, A, ['set', A.ifname, 'peer', B.pub, 'persistent-keepalive', '0']);
    // Keepalives: transport data (type 4) with an empty payload = 32 bytes of UDP payload, from A.
    const keepalives = tsharkFields(pcap, `wg.type == 4 && udp.length == 40 && ip.src == ${A.underlay}`, ['frame.number']);
    expect(keepalives.length).toBeGreaterThanOrEqual(2);
    // Every captured datagram is WireGuard of a known type; none malformed.
    const all = tsharkFields(pcap, 'udp', ['wg.type']);
    expect(all.length).toBeGreaterThan(0);
    for (const [t] of all) expect(['1', '2', '3', '4']).toContain(t);
    expect(tsharkFields(pcap, '_ws.malformed || _ws.expert.severity >= "error"', ['frame.number'])).toHaveLength(0);
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
});

if (unavailable !== null) {
  describe('WireGuard interop', () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
