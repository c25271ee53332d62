/**
 * Issue 14, chaos: the demo's two-cluster fabric (src/demo; every data plane a real
 * `weft up -c FILE --no-conncheck`, read with `weft show --json`) with the seeded userspace relay
 * (test/util/udp-relay.mjs) in two places:
 *   - on the WAN: gateway A's peer endpoint is the relay (198.18.0.1:51850 in A's namespace),
 *     which forwards to gateway B; B, the WireGuard server, learns the relay's other socket as A's
 *     endpoint, so every datagram both ways crosses the relay;
 *   - on node B/worker-1's underlay: gateway B's tunnel to the node points at 172.19.0.12:6091 and
 *     the node's gateway at 172.19.0.13:6091, two extra addresses of the node where the relay
 *     listens; it forwards to the node's real 172.19.0.2:6091 (and back).
 * A 50 MB TCP transfer pod A1 → pod B1 (by B1's remapped address) crosses both relays.
 *
 * An anchor run without chaos, then one run with 5% loss + 5% reordering + 1% duplication + 1% of
 * the datagrams with one byte flipped on both relays: the bytes arrive intact (sha256 of the
 * sender's bytes = sha256 of the receiver's bytes), within a time bound; the relays lost,
 * reordered, duplicated and corrupted at about the rates asked for. WireGuard authenticates every
 * datagram, so every corrupted one is a counted drop with a reason in the receiving gateway's
 * `weft show --json`; with the fabric idle, each relay hop balances exactly (datagrams the relay
 * sent = datagrams the receiver accepted + its counted drops). Geneve has no integrity check of its
 * own (RFC 8926 leaves it to the outer UDP checksum, which the relay recomputes when it resends):
 * a corrupted header is a counted Geneve drop, a corrupted inner packet is caught by the pod's TCP
 * checksum (its kernel's Tcp InCsumErrors, read and reported). No process exited, and ping still
 * gets through.
 *
 * Safety: namespaces `chx-*` (created and deleted by name, also after a failure); every process
 * has a hard lifetime and is stopped by its process group; no namespace has a default route.
 */
import { readFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ping } from '../../src/demo/checks.js';
import { inNs, runCommand, sleep, startDaemon, waitFor, type Daemon } from '../../src/demo/host.js';
import { generateDemoKeys } from '../../src/demo/keys.js';
import { buildPlan, findPod, remotePodAddress, renderYaml, type DemoConfigFile } from '../../src/demo/plan.js';
import {
  startDataPlane,
  stopDataPlane,
  waitForFirstReply,
  weftUpCommand,
  writeDemoFiles,
  type RunningProcess,
} from '../../src/demo/data-plane.js';
import { buildTopology, destroyTopology } from '../../src/demo/topology.js';
import type { WeftStatus } from '../../src/daemon/status.js';
import {
  balance,
  geneveRxDrops,
  kernelTcpCsumErrors,
  kernelUdpDrops,
  showAll,
  wireguardRxDrops,
} from '../../bench/fabric-observe.js';
import { e2eUnavailableReason } from '../util/netns.js';

const ROOT = resolve(import.meta.dirname, '../..');
const WEFT_BIN = join(ROOT, 'bin/weft');
const RELAY = join(ROOT, 'test/util/udp-relay.mjs');
const skip = e2eUnavailableReason(['ip', 'ping', 'ss', 'timeout'], {
  nativeAddon: true,
  built: ['dist/src/cli/weft.js'],
});

const plan = buildPlan('chx');
const A1 = findPod(plan, 'A1');
const B1 = findPod(plan, 'B1');
const B1_AT_A = remotePodAddress(plan, plan.a, B1);
const NODE_B1 = plan.b.nodes[0]!; // worker-1, B1's node
const WAN_RELAY = '198.18.0.1:51850';
const UNDER_FRONT = '172.19.0.12';
const UNDER_BACK = '172.19.0.13';
const MB = 50;
const TRANSFER_BOUND_S = 300;
const PORT = 7000;

/** Receives one connection, hashes it, prints {bytes, sha256} when the sender ends. */
const SINK = `const c = require('crypto'); const h = c.createHash('sha256'); let n = 0;
const srv = require('net').createServer((s) => { s.on('data', (d) => { h.update(d); n += d.length; });
  s.on('end', () => { console.log(JSON.stringify({ bytes: n, sha256: h.digest('hex') })); s.end(); srv.close(); }); });
srv.listen(${PORT}, process.argv[1], () => console.log('listening'));`;

/** Sends MB seeded pseudo-random megabytes (xorshift32, seed argv[3]), prints {bytes, sha256, ms}. */
const SOURCE = `const c = require('crypto'); const h = c.createHash('sha256'); const total = Number(process.argv[2]) * 1048576;
let x = Number(process.argv[3]) >>> 0 || 1; let sent = 0; const t0 = Date.now();
const s = require('net').connect(${PORT}, process.argv[1]);
function chunk() { const b = Buffer.allocUnsafe(65536); for (let i = 0; i < b.length; i += 4) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; b.writeUInt32LE(x, i); } return b; }
function pump() { while (sent < total) { const b = chunk(); h.update(b); sent += b.length; if (!s.write(b)) { s.once('drain', pump); return; } } s.end(); }
s.on('connect', pump); s.on('error', (e) => { console.log(JSON.stringify({ error: e.code })); process.exit(1); });
s.on('close', () => { console.log(JSON.stringify({ bytes: sent, sha256: h.digest('hex'), ms: Date.now() - t0 })); process.exit(0); });
setTimeout(() => { console.log(JSON.stringify({ error: 'timeout', bytes: sent })); process.exit(1); }, ${TRANSFER_BOUND_S * 1000});`;

interface DirStats {
  received: number;
  dropped: number;
  duplicated: number;
  reordered: number;
  corrupted: number;
  sent: number;
}
interface RelayStats {
  forwarded: number;
  returned: number;
  dropped: number;
  duplicated: number;
  reordered: number;
  corrupted: number;
  sent: number;
  fwd: DirStats;
  rev: DirStats;
  parked: number;
}

interface Relay {
  daemon: Daemon;
  statsFile: string;
}
interface Chaos {
  loss: number;
  reorder: number;
  dup: number;
  corrupt: number;
}
const NO_CHAOS: Chaos = { loss: 0, reorder: 0, dup: 0, corrupt: 0 };
const CHAOS: Chaos = { loss: 0.05, reorder: 0.05, dup: 0.01, corrupt: 0.01 };

describe.skipIf(skip !== null)(
  'chaos: 50 MB through the two-cluster fabric with a lossy, reordering, duplicating, corrupting relay on the WAN and on an underlay',
  () => {
    let dir = '';
    const procs: RunningProcess[] = [];
    let relays: { wan: Relay; under: Relay } | null = null;

    function startRelay(name: string, ns: string, args: string[], seed: number, chaos: Chaos): Relay {
      const statsFile = join(dir, `${name}-${seed}.json`);
      const daemon = startDaemon(
        ns,
        `relay ${name}`,
        [
          process.execPath,
          RELAY,
          ...args,
          '--seed',
          String(seed),
          '--loss',
          String(chaos.loss),
          '--reorder',
          String(chaos.reorder),
          '--dup',
          String(chaos.dup),
          '--corrupt',
          String(chaos.corrupt),
          '--duration',
          '600',
          '--stats-file',
          statsFile,
        ],
        { lifetimeS: 620 },
      );
      return { daemon, statsFile };
    }

    async function startRelays(seed: number, chaos: Chaos): Promise<void> {
      relays = {
        wan: startRelay(
          'wan',
          plan.a.gatewayNs,
          ['--listen', WAN_RELAY, '--target', `${plan.b.wanAddress}:${plan.wireguardPort}`, '--via', plan.a.wanAddress],
          seed,
          chaos,
        ),
        under: startRelay(
          'underlay',
          NODE_B1.ns,
          [
            '--listen',
            `${UNDER_FRONT}:${plan.genevePort}`,
            '--target',
            `${NODE_B1.underlay}:${plan.genevePort}`,
            '--via',
            `${UNDER_BACK}:${plan.genevePort}`,
          ],
          seed + 1000,
          chaos,
        ),
      };
      for (const r of Object.values(relays)) {
        await waitFor(
          `${r.daemon.name} ready`,
          () => {
            if (r.daemon.exitStatus !== null) throw new Error(`${r.daemon.name} exited: ${r.daemon.output()}`);
            return r.daemon.output().includes('relay ready');
          },
          10_000,
          50,
        );
      }
    }

    /** Stops both relays; returns their final counters (printed on SIGTERM). */
    async function stopRelays(): Promise<{ wan: RelayStats; under: RelayStats }> {
      const r = relays!;
      relays = null;
      const out: Record<string, RelayStats> = {};
      for (const [k, v] of Object.entries(r)) {
        await v.daemon.stop();
        const line = v.daemon
          .output()
          .split('\n')
          .find((l) => l.startsWith('{'));
        if (line === undefined) throw new Error(`${v.daemon.name} printed no counters: ${v.daemon.output()}`);
        out[k] = JSON.parse(line) as RelayStats;
      }
      return out as { wan: RelayStats; under: RelayStats };
    }

    function readRelay(r: Relay): RelayStats {
      return JSON.parse(readFileSync(r.statsFile, 'utf8')) as RelayStats;
    }

    async function transfer(
      seed: number,
    ): Promise<{ ms: number; sent: { bytes: number; sha256: string }; got: { bytes: number; sha256: string } }> {
      const sink = startDaemon(B1.ns, 'sink', [process.execPath, '-e', SINK, B1.ip], {
        lifetimeS: TRANSFER_BOUND_S + 30,
      });
      try {
        await waitFor(
          'sink listening',
          () => {
            if (sink.exitStatus !== null) throw new Error(`sink exited: ${sink.output()}`);
            return sink.output().includes('listening');
          },
          10_000,
          50,
        );
        const r = await runCommand(inNs(A1.ns, [process.execPath, '-e', SOURCE, B1_AT_A, String(MB), String(seed)]), {
          timeoutMs: (TRANSFER_BOUND_S + 10) * 1000,
          allowFail: true,
        });
        const sent = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
          bytes: number;
          sha256: string;
          ms: number;
          error?: string;
        };
        expect(sent.error, r.stdout + r.stderr).toBeUndefined();
        await waitFor('sink result', () => sink.output().includes('sha256'), 20_000, 50);
        const got = JSON.parse(
          sink
            .output()
            .split('\n')
            .find((l) => l.includes('sha256'))!,
        ) as { bytes: number; sha256: string };
        return { ms: sent.ms, sent, got };
      } finally {
        await sink.stop();
      }
    }

    /**
     * Waits until nothing moves: relay and weft counters unchanged for `quietMs` (polled every
     * 500 ms). The default, 12 s, is longer than WireGuard's passive keepalive (sent 10 s after the
     * last data received when nothing was sent back) and covers TCP retransmissions after loss:
     * afterwards nothing is pending at all.
     */
    async function settle(quietMs = 12_000): Promise<void> {
      const snap = (): string => {
        const st = showAll(WEFT_BIN, join(dir, 'config', 'run'));
        const k = [...st.values()].map((s) => [
          s.interface?.rxPackets,
          s.interface?.txPackets,
          s.geneve.tunnels.map((t) => [t.rxPackets, t.txPackets]),
          s.wireguard?.peers.map((p) => [p.rxPackets, p.txPackets]),
        ]);
        const r =
          relays === null
            ? null
            : [readRelay(relays.wan), readRelay(relays.under)].map((x) => [x.fwd.received, x.rev.received, x.sent]);
        return JSON.stringify([k, r]);
      };
      let prev = snap();
      let quietSince = Date.now();
      await waitFor(
        `the fabric to go idle (${quietMs / 1000} s without a packet)`,
        async () => {
          await sleep(500);
          const now = snap();
          if (now !== prev) {
            prev = now;
            quietSince = Date.now();
          }
          return Date.now() - quietSince >= quietMs;
        },
        90_000,
        0,
      );
    }

    beforeAll(async () => {
      await destroyTopology(plan);
      dir = mkdtempSync(join(tmpdir(), 'weft-chaos-'));
      try {
        await buildTopology(plan);
        const cfgDir = join(dir, 'config');
        const files = writeDemoFiles(plan, generateDemoKeys(), cfgDir);
        patchConfigs(files, cfgDir);
        for (const a of [UNDER_FRONT, UNDER_BACK])
          await runCommand(['ip', '-n', NODE_B1.ns, 'addr', 'add', `${a}/32`, 'dev', NODE_B1.underlayIf]);
        await startRelays(1, NO_CHAOS);
        const up = weftUpCommand(WEFT_BIN);
        const command = Object.assign((f: string) => [...up(f), '--no-conncheck'], { label: 'weft up --no-conncheck' });
        await startDataPlane(plan, files, cfgDir, command, 900, () => {}, procs);
        await waitForFirstReply(A1.ns, B1_AT_A, 60_000);
      } catch (e) {
        await stopDataPlane(procs);
        await destroyTopology(plan);
        throw e;
      }
    }, 180_000);

    afterAll(async () => {
      if (relays) for (const r of Object.values(relays)) await r.daemon.stop();
      await stopDataPlane(procs);
      await destroyTopology(plan);
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it('the relays are on the path: gateway B sees A at the WAN relay, the node and its gateway only at the underlay relay', async () => {
      const st = showAll(WEFT_BIN, join(dir, 'config', 'run'));
      const gwB = st.get('gateway-b')!;
      expect(gwB.wireguard!.peers[0]!.endpoint).toMatch(/^198\.18\.0\.1:\d+$/);
      expect(gwB.wireguard!.peers[0]!.endpoint).not.toBe(`${plan.a.wanAddress}:${plan.wireguardPort}`);
      expect(st.get('gateway-a')!.wireguard!.peers[0]!.endpoint).toBe(WAN_RELAY);
      expect(gwB.geneve.tunnels.find((t) => t.vni === NODE_B1.vni)!.remoteUnderlay).toBe(UNDER_FRONT);
      // The handshake and the first ping crossed both relays, both ways (their stats files are
      // rewritten every second).
      const crossed = (): boolean => {
        const w = readRelay(relays!.wan);
        const u = readRelay(relays!.under);
        return w.fwd.received > 0 && w.rev.received > 0 && u.fwd.received > 0 && u.rev.received > 0;
      };
      await waitFor('relay counters', crossed, 5000, 200);
    });

    let anchorMs = 0;
    it(
      `anchor: ${MB} MB pod A1 → pod B1 through the same relays, no chaos`,
      async () => {
        const t = await transfer(6);
        expect(t.got.bytes).toBe(MB * 1048576);
        expect(t.got.sha256).toBe(t.sent.sha256);
        anchorMs = t.ms;
        console.info(
          `chaos anchor: ${MB} MB in ${(t.ms / 1000).toFixed(1)} s through the relays without loss, reordering, duplication or corruption`,
        );
      },
      (TRANSFER_BOUND_S + 60) * 1000,
    );

    it(
      `${MB} MB pod A1 → pod B1 arrive intact under 5% loss + 5% reordering + 1% duplication + 1% corruption on the WAN and the underlay: every corrupted WireGuard datagram is a counted drop, each relay hop balances, nothing crashed`,
      async () => {
        // Counters from here on: the fabric idle, the old relays gone, the new ones not yet started.
        // After the anchor (no loss: no retransmission pending) 3 s without a packet is a consistent
        // cut: the next packet the fabric sends by itself, the passive keepalive, comes 10 s after
        // the last data packet, and whenever it comes it is counted on both sides of the balance.
        await settle(3000);
        await stopRelays();
        const csum0 = kernelTcpCsumErrors(B1.ns) + kernelTcpCsumErrors(A1.ns);
        const show0 = showAll(WEFT_BIN, join(dir, 'config', 'run'));
        const k0: Record<string, number> = {};
        const p0: Record<string, number> = {};
        for (const ns of [plan.a.gatewayNs, plan.b.gatewayNs, NODE_B1.ns]) {
          k0[ns] = kernelUdpDrops(ns).inErrors;
          p0[ns] = kernelUdpDrops(ns).noPorts;
        }
        await startRelays(3, CHAOS);
        const t = await transfer(8);
        expect(t.got.bytes).toBe(MB * 1048576);
        expect(t.got.sha256).toBe(t.sent.sha256);
        // Traffic still flows both ways through the corrupting relays: at least half of the echoes
        // come back (each crosses four impaired hops, about 24% lost; 20 of them so that the bound
        // does not fail by chance, as 10 did about once in a hundred runs).
        const p = await ping(A1.ns, B1_AT_A, 20, 0.2);
        expect(p.received, p.output).toBeGreaterThanOrEqual(10);
        await settle();
        const r = await stopRelays();
        const st = showAll(WEFT_BIN, join(dir, 'config', 'run'));
        for (const proc of procs) expect(proc.daemon.exitStatus, proc.file.label).toBeNull();
        const gwA = diffStatus(show0.get('gateway-a')!, st.get('gateway-a')!);
        const gwB = diffStatus(show0.get('gateway-b')!, st.get('gateway-b')!);
        const node = diffStatus(show0.get(`node-b-${NODE_B1.name}`)!, st.get(`node-b-${NODE_B1.name}`)!);
        // The chaos really happened, at about the rates asked for (seeded: the same pattern every run).
        for (const x of [r.wan, r.under]) {
          expect(x.dropped / (x.forwarded + x.returned)).toBeGreaterThan(0.03);
          expect(x.duplicated).toBeGreaterThan(0);
          expect(x.reordered).toBeGreaterThan(0);
          expect(x.corrupted).toBeGreaterThan(0);
        }

        // Each namespace with a relay, balanced exactly: datagrams sent into it = datagrams read by
        // its sockets (relay, weft: accepted or counted as a drop) + the kernel's UDP receive drops.
        const kd = (ns: string, k0: Record<string, number>): number => kernelUdpDrops(ns).inErrors - k0[ns]!;
        const np = (ns: string): Record<string, number> => {
          const n = kernelUdpDrops(ns).noPorts - p0[ns]!;
          return n > 0 ? { kernel_udp_no_port: n } : {};
        };
        const gwBAll = diffTunnels(show0.get('gateway-b')!, st.get('gateway-b')!);
        const w2 = diffTunnels(
          show0.get(`node-b-${plan.b.nodes[1]!.name}`)!,
          st.get(`node-b-${plan.b.nodes[1]!.name}`)!,
        );
        const nsA = balance(
          `namespace ${plan.a.gatewayNs} (gateway A + WAN relay)`,
          gwA.peerTx + gwB.peerTx + r.wan.rev.sent,
          r.wan.fwd.received + r.wan.rev.received + gwA.peerRx,
          { ...gwA.wgDrops, kernel_udp: kd(plan.a.gatewayNs, k0), ...np(plan.a.gatewayNs) },
        );
        const nsB = balance(
          `namespace ${plan.b.gatewayNs} (gateway B)`,
          r.wan.fwd.sent + r.under.rev.sent + w2.tx,
          gwB.peerRx + gwBAll.rx,
          { ...gwB.wgDrops, ...gwB.geneveDrops, kernel_udp: kd(plan.b.gatewayNs, k0), ...np(plan.b.gatewayNs) },
        );
        const nsN = balance(
          `namespace ${NODE_B1.ns} (node B/${NODE_B1.name} + underlay relay)`,
          gwB.tunnelTx + node.tunnelTx + r.under.fwd.sent,
          r.under.fwd.received + r.under.rev.received + node.tunnelRx,
          { ...node.geneveDrops, kernel_udp: kd(NODE_B1.ns, k0), ...np(NODE_B1.ns) },
        );
        // Every corrupted WireGuard datagram was refused and counted (with the duplicates, refused as
        // replays), except any the receiving kernel dropped before weft read it.
        expect(sum(gwB.wgDrops) + nsB.drops['kernel_udp']!).toBeGreaterThanOrEqual(r.wan.fwd.corrupted);
        expect(sum(gwA.wgDrops) + nsA.drops['kernel_udp']!).toBeGreaterThanOrEqual(r.wan.rev.corrupted);
        expect(gwB.wgDrops['wg_decrypt_failed']).toBeGreaterThan(0);

        const csum = kernelTcpCsumErrors(B1.ns) + kernelTcpCsumErrors(A1.ns) - csum0;
        // Corrupted inner packets that passed Geneve were refused by the pods' TCP checksum.
        expect(csum).toBeGreaterThan(0);
        console.info(
          `chaos run: ${MB} MB in ${(t.ms / 1000).toFixed(1)} s (${((MB * 8.388608) / (t.ms / 1000)).toFixed(1)} Mbit/s, ${(t.ms / anchorMs).toFixed(2)}x the anchor's time); WAN relay ${JSON.stringify(r.wan)}; underlay relay ${JSON.stringify(r.under)}`,
        );
        console.info(
          `chaos run drops: gateway B ${JSON.stringify(gwB.allDrops)}; gateway A ${JSON.stringify(gwA.allDrops)}; node B/${NODE_B1.name} ${JSON.stringify(node.allDrops)}; pods' kernels: ${csum} TCP segments with a bad checksum`,
        );
        console.info(`chaos run balances: ${JSON.stringify([nsA, nsB, nsN])}`);
        for (const b of [nsA, nsB, nsN]) expect(b.unaccounted, JSON.stringify(b)).toBe(0);
      },
      (TRANSFER_BOUND_S + 180) * 1000,
    );
  },
);

/** Points gateway A at the WAN relay, and gateway B / node B-worker-1 at the underlay relay's two addresses. */
function patchConfigs(files: DemoConfigFile[], cfgDir: string): void {
  const patch = (name: string, f: (c: Record<string, any>) => void): void => {
    const file = files.find((x) => x.file === name);
    if (file === undefined) throw new Error(`no ${name} in the demo files`);
    const c = structuredClone(file.config) as Record<string, any>;
    f(c);
    writeFileSync(join(cfgDir, name), renderYaml(`chaos test: ${name}, relays on the path`, c as never), {
      mode: 0o600,
    });
  };
  patch('gateway-a.yaml', (c) => {
    c['peers'][0]['endpoint'] = WAN_RELAY;
  });
  patch('gateway-b.yaml', (c) => {
    const t = c['geneve']['tunnels'].find((x: { id: number }) => x.id === NODE_B1.vni);
    t.remoteUnderlay = UNDER_FRONT;
  });
  patch(`node-b-${NODE_B1.name}.yaml`, (c) => {
    c['node']['gateways'][0]['gatewayUnderlay'] = UNDER_BACK;
  });
  if (!existsSync(join(cfgDir, 'gateway-a.yaml'))) throw new Error('configuration not written');
}

/** Geneve packets over all tunnels of an instance between two snapshots. */
function diffTunnels(a: WeftStatus, b: WeftStatus): { rx: number; tx: number } {
  let rx = 0;
  let tx = 0;
  for (const t of b.geneve.tunnels) {
    rx += t.rxPackets;
    tx += t.txPackets;
  }
  for (const t of a.geneve.tunnels) {
    rx -= t.rxPackets;
    tx -= t.txPackets;
  }
  return { rx, tx };
}

function sum(r: Record<string, number>): number {
  return Object.values(r).reduce((a, b) => a + b, 0);
}

/** Counters of one instance between two snapshots (the relays of a run start from zero). */
function diffStatus(
  a: WeftStatus,
  b: WeftStatus,
): {
  peerRx: number;
  peerTx: number;
  tunnelRx: number;
  tunnelTx: number;
  wgDrops: Record<string, number>;
  geneveDrops: Record<string, number>;
  allDrops: Record<string, number>;
} {
  const d = (x: Record<string, number>, y: Record<string, number>): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(y)) if (v - (x[k] ?? 0) > 0) out[k] = v - (x[k] ?? 0);
    return out;
  };
  const pa = a.wireguard?.peers[0];
  const pb = b.wireguard?.peers[0];
  const vni = NODE_B1.vni;
  const ta = a.geneve.tunnels.find((t) => t.vni === vni);
  const tb = b.geneve.tunnels.find((t) => t.vni === vni);
  return {
    peerRx: (pb?.rxPackets ?? 0) - (pa?.rxPackets ?? 0),
    peerTx: (pb?.txPackets ?? 0) - (pa?.txPackets ?? 0),
    tunnelRx: (tb?.rxPackets ?? 0) - (ta?.rxPackets ?? 0),
    tunnelTx: (tb?.txPackets ?? 0) - (ta?.txPackets ?? 0),
    wgDrops: d(wireguardRxDrops(a), wireguardRxDrops(b)),
    geneveDrops: d(geneveRxDrops(a), geneveRxDrops(b)),
    allDrops: d(a.drops, b.drops),
  };
}
