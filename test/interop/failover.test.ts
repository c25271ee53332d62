/**
 * Failover against Debian's `wireguard-go`: a `weft-wg` killed with SIGKILL and started again
 * with the same key and configuration, while the peer keeps its old session, is back within
 * 2 s of being configured — not after the peer's Rekey-Timeout (5 s) or its new-handshake timer
 * (15 s).
 *   - Knowing no endpoint for the peer (the server side): the peer's old-session traffic
 *     (transport under an index the new process does not know) starts a handshake from it.
 *   - Knowing the peer's endpoint: it initiates as soon as it is configured, with no traffic at
 *     all (and, as the control, does not with WEFT_EAGER_HANDSHAKE=0).
 * Runs as root in namespaces the test creates (prefix wfo-).
 *
 *   ns a (weft-wg)  ══ veth 198.18.9.0/24 ══  ns b (wireguard-go)   tunnel 100.64.9.1 ↔ .2
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eUnavailableReason, ping, run, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const WEFT_WG = join(ROOT, 'bin/weft-wg');
const unavailable = e2eUnavailableReason(['wireguard-go', 'wg', 'ping'], { built: ['dist/src/cli/weft-wg.js'] });

const UNDER_A = '198.18.9.1';
const UNDER_B = '198.18.9.2';
const TUN_A = '100.64.9.1';
const TUN_B = '100.64.9.2';
/** The bound: traffic back within this long of the new process being up. */
const RESUME_WITHIN_MS = 2000;

interface Side {
  ns: string;
  ifname: string;
  keyFile: string;
  pub: string;
  proc: Spawned | null;
}

describe.skipIf(unavailable !== null)('failover: weft-wg restarted under a wireguard-go peer', () => {
  const topo = new Topology('wfo-');
  const tmp = mkdtempSync(join(tmpdir(), 'weft-failover-'));
  let A: Side;
  let B: Side;

  const wg = (s: Side, args: string[]): string => topo.exec(s.ns, ['wg', ...args], { timeoutMs: 10_000 });
  const wgShowOk = (s: Side): boolean =>
    spawnSync('ip', ['netns', 'exec', s.ns, 'wg', 'show', s.ifname], { stdio: 'ignore', timeout: 5000 }).status === 0;

  async function start(s: Side, cmd: string[], env: NodeJS.ProcessEnv): Promise<void> {
    s.proc = topo.spawnIn(s.ns, `${cmd[0]}-${s.ifname}`, cmd, { lifetimeS: 300, env });
    const sock = `/var/run/wireguard/${s.ifname}.sock`;
    await waitFor(`UAPI socket ${sock}`, () => existsSync(sock) && wgShowOk(s), 15_000);
  }

  /** Starts weft-wg in ns a and configures it: key, port, peer B (endpoint or none), addresses. */
  async function startA(endpointOfB: string | null, env: NodeJS.ProcessEnv = {}): Promise<number> {
    await start(A, ['node', WEFT_WG, '-f', A.ifname], { LOG_LEVEL: 'error', ...env });
    configure(A, B, TUN_B, endpointOfB);
    topo.exec(A.ns, ['ip', 'addr', 'add', `${TUN_A}/24`, 'dev', A.ifname]);
    topo.exec(A.ns, ['ip', 'link', 'set', A.ifname, 'mtu', '1420', 'up']);
    return Date.now();
  }

  function configure(self: Side, other: Side, otherTunnel: string, endpoint: string | null): void {
    wg(self, [
      'set',
      self.ifname,
      'private-key',
      self.keyFile,
      'listen-port',
      '51820',
      'peer',
      other.pub,
      'allowed-ips',
      `${otherTunnel}/32`,
      ...(endpoint === null ? [] : ['endpoint', endpoint]),
    ]);
  }

  /** SIGKILL of every process in ns a (only weft-wg runs there). */
  async function killA(): Promise<void> {
    const pids = run(['ip', 'netns', 'pids', A.ns], { allowFail: true }).split(/\s+/).filter(Boolean).map(Number);
    expect(pids.length).toBe(1);
    process.kill(pids[0], 'SIGKILL');
    await A.proc!.exited;
    await waitFor(
      'interface gone',
      () => spawnSync('ip', ['-n', A.ns, 'link', 'show', A.ifname], { stdio: 'ignore' }).status !== 0,
      5000,
    );
  }

  /** wg show dump: latest-handshake (s) of the only peer. */
  const latestHandshake = (s: Side): number =>
    Number((wg(s, ['show', s.ifname, 'dump']).trim().split('\n')[1] ?? '').split('\t')[4] ?? 0);

  beforeAll(async () => {
    const nsA = topo.addNamespace('a');
    const nsB = topo.addNamespace('b');
    topo.link(nsA, 'va', `${UNDER_A}/24`, nsB, 'vb', `${UNDER_B}/24`);
    const mk = (ns: string, ifname: string): Side => {
      const keyFile = join(tmp, `${ifname}.key`);
      writeFileSync(keyFile, run(['wg', 'genkey']), { mode: 0o600 });
      const pub = run(['wg', 'pubkey'], { input: readFileSync(keyFile, 'utf8') }).trim();
      return { ns, ifname, keyFile, pub, proc: null };
    };
    A = mk(nsA, 'wfoa');
    B = mk(nsB, 'wfob');
    await start(B, ['wireguard-go', '-f', B.ifname], { LOG_LEVEL: 'error' });
    configure(B, A, TUN_A, `${UNDER_A}:51820`);
    topo.exec(B.ns, ['ip', 'addr', 'add', `${TUN_B}/24`, 'dev', B.ifname]);
    topo.exec(B.ns, ['ip', 'link', 'set', B.ifname, 'mtu', '1420', 'up']);
  }, 60_000);

  afterAll(async () => {
    await topo.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('without an endpoint for the peer: the peer’s old-session pings (every 20 ms) wake a handshake; replies resume within 2 s', async () => {
    await startA(null);
    expect(ping(topo, B.ns, TUN_A, 3).received).toBe(3); // B's session with the first weft-wg
    const pinger = topo.spawnIn(B.ns, 'ping', ['ping', '-n', '-D', '-i', '0.02', '-W', '1', TUN_A], {
      lifetimeS: 60,
    });
    await sleep(500);
    await killA();
    const killedAt = Date.now();
    await sleep(300); // B goes on sending on the session the new process will not know
    const spawnedAt = Date.now();
    const up = await startA(null);
    const replyTimes = (): number[] =>
      [...pinger.output().matchAll(/^\[(\d+\.\d+)\] \d+ bytes from/gm)].map((m) => Number(m[1]) * 1000);
    await waitFor('a ping reply from the new weft-wg', () => replyTimes().some((t) => t > up), 20_000);
    await topo.stop(pinger);
    const first = replyTimes().find((t) => t > up)!;
    const resumedMs = first - up;
    console.log(
      `failover (no endpoint, peer traffic): first reply ${resumedMs.toFixed(0)} ms after configuration, ` +
        `${(first - spawnedAt).toFixed(0)} ms after the new process was spawned, ${(first - killedAt).toFixed(0)} ms after the kill`,
    );
    expect(resumedMs).toBeLessThan(RESUME_WITHIN_MS);
    expect(latestHandshake(A)).toBeGreaterThan(0);
  }, 60_000);

  it('knowing the peer’s endpoint: the new process initiates as soon as it is configured, with no traffic (not with WEFT_EAGER_HANDSHAKE=0)', async () => {
    // Control: waiting for data, as wireguard-go does, nothing happens without traffic.
    await killA();
    await startA(`${UNDER_B}:51820`, { WEFT_EAGER_HANDSHAKE: '0' });
    await sleep(RESUME_WITHIN_MS);
    expect(latestHandshake(A)).toBe(0);

    await killA();
    // wg shows whole seconds: the handshake can complete in the second before startA returns.
    const starting = Date.now();
    const up = await startA(`${UNDER_B}:51820`);
    await waitFor('a handshake of the new weft-wg', () => latestHandshake(A) > 0, 10_000);
    const doneMs = Date.now() - up;
    console.log(`failover (endpoint known, no traffic): handshake seen within ${doneMs} ms of configuration`);
    expect(doneMs).toBeLessThan(RESUME_WITHIN_MS);
    expect(latestHandshake(B) * 1000).toBeGreaterThanOrEqual(Math.floor(starting / 1000) * 1000);
    expect(ping(topo, B.ns, TUN_A, 3, 0.02).received).toBe(3); // B switched to the new session
  }, 60_000);
});
