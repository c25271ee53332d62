/**
 * Issue 13's fabric path end to end, with offloads on (the default) and off (WEFT_OFFLOAD=0):
 * one cluster in namespaces (a gateway, two node agents, a pod per node; every data plane a child
 * process started from dist/), as fabric.test.ts builds it.
 *
 * Proves, for each setting: TCP bulk transfers arrive intact (sha256 of 16 MiB on both ends) pod →
 * gateway host, gateway host → pod and pod → pod across nodes (hairpin through the gateway); the
 * data planes report the offloads in effect (all off with WEFT_OFFLOAD=0) and, with offloads on,
 * super-packets cut and coalesced on both sides; tshark on every hop (the pod veth, the node
 * underlay, the gateway's TUN) finds no malformed packet and no bad IP/TCP checksum in anything
 * our data planes produced; the underlay carries GSO-sized Geneve datagrams (larger than the
 * underlay MTU, one UDP_SEGMENT send) only with offloads on.
 *
 * Checksums in captures: a packet a local stack (pod, node or gateway kernel) sends with checksum
 * offload appears in a capture with its checksum still partial (the "bad" tshark reports is the
 * pseudo-header sum); such packets are the kernel's, not ours, and tshark cannot judge them. So the
 * checks count bad checksums only on packets whose checksum must be complete on that hop: inner
 * packets inside Geneve (our segmenter fills them in; the kernel never touches an inner checksum),
 * and on the pod veth and the gateway TUN the segments at most one MTU long that our coalescer
 * passed through whole. Super-packets written with NEEDS_CSUM are the kernel's to finish.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayStats } from '../../src/gateway/gateway-stats.js';
import type { NodeAgentStats } from '../../src/node/agent.js';
import { TSHARK_TCP_NOT_GOOD } from '../util/pcap.js';
import { tsharkCounts, TSHARK_START_MS } from '../util/tshark-count.js';
import { e2eUnavailableReason, ping, run, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';
import { buildFabric, GATEWAY_INTERNAL, launchArgv, statsOf, type FabricCluster } from './fabric-topology.js';

const ROOT = resolve(import.meta.dirname, '../..');
const skip = e2eUnavailableReason(['tshark', 'ping'], { nativeAddon: true, built: ['dist/src/daemon/launch.js'] });
const BYTES = 8 << 20;
const PORT = 7700;

/** A TCP server: prints the sha256 and length of everything one connection sends, then exits. */
function sinkServer(addr: string): string {
  return (
    `const h = require('crypto').createHash('sha256'); let n = 0;` +
    ` const srv = require('net').createServer((s) => { s.on('data', (d) => { h.update(d); n += d.length; }); s.on('end', () => { console.log('got ' + h.digest('hex') + ' ' + n); s.end(); srv.close(); }); });` +
    ` srv.listen(${PORT}, '${addr}', () => console.log('listening'));`
  );
}

/** A TCP client: sends BYTES seeded pseudo-random bytes (sha256 chain), prints their sha256. */
function sourceClient(addr: string, seed: number): string {
  return (
    `const c = require('crypto'); const h = c.createHash('sha256'); const buf = Buffer.alloc(${BYTES});` +
    ` let k = Buffer.from('${seed}'); for (let o = 0; o < buf.length; o += 32) { k = c.createHash('sha256').update(k).digest(); k.copy(buf, o); }` +
    ` h.update(buf); const s = require('net').connect(${PORT}, '${addr}', () => { s.end(buf); });` +
    ` s.on('close', () => { console.log('sent ' + h.digest('hex') + ' ' + buf.length); process.exit(0); }); s.on('error', (e) => { console.log('error ' + e.code); process.exit(1); });`
  );
}

/** Geneve decoded on 6091, IP and TCP checksums verified. */
const TSHARK_OPTIONS = ['-d', 'udp.port==6091,geneve', '-o', 'ip.check_checksum:TRUE', '-o', 'tcp.check_checksum:TRUE'];

for (const offload of [true, false]) {
  describe.skipIf(skip !== null)(`fabric e2e with offloads ${offload ? 'on' : 'off (WEFT_OFFLOAD=0)'}`, () => {
    const topo = new Topology(offload ? 'fbo' : 'fbf');
    let cl: FabricCluster;
    let gw: Spawned;
    const agents: Spawned[] = [];
    const env = offload ? {} : { WEFT_OFFLOAD: '0' };
    let dir = '';
    const caps: { name: string; ns: string; iface: string; pcap: string; proc: Spawned }[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'fb-cap-'));
      try {
        [cl] = buildFabric(topo, { clusters: 1, nodesPerCluster: 2 }) as [FabricCluster];
        gw = topo.spawnIn(cl.gwNs, 'gateway', launchArgv(ROOT, cl.gatewayConfigPath), { lifetimeS: 170, env });
        await waitFor(
          'gateway ready',
          () =>
            gw.output().includes('ready gateway') ||
            (gw.child.exitCode !== null && Promise.reject(new Error(gw.output()))),
          15_000,
        );
        for (let i = 0; i < cl.nodeNs.length; i++) {
          agents.push(
            topo.spawnIn(cl.nodeNs[i]!, `node-${i}`, launchArgv(ROOT, cl.nodeConfigPaths[i]!), { lifetimeS: 170, env }),
          );
        }
        for (const a of agents)
          await waitFor(
            `${a.name} ready`,
            () =>
              a.output().includes('ready node') || (a.child.exitCode !== null && Promise.reject(new Error(a.output()))),
            15_000,
          );
        expect(ping(topo, cl.podNs[0]!, GATEWAY_INTERNAL, 2, 0.1).received).toBe(2);
        expect(ping(topo, cl.podNs[0]!, cl.podAddr[1]!, 2, 0.1).received).toBe(2);
      } catch (e) {
        await topo.cleanup();
        throw e;
      }
    }, 60_000);

    afterAll(async () => {
      await topo.cleanup();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    }, 30_000);

    it('the data planes report the offloads in effect', async () => {
      const g = await statsOf<GatewayStats>(gw);
      const n = await statsOf<NodeAgentStats>(agents[0]!);
      for (const o of [g.offloads!, n.offloads]) {
        if (offload) {
          expect(o.tun).toMatchObject({ csum: true, tso: true });
          expect(o.geneve).toEqual({ gso: true, gro: true });
        } else {
          expect(o).toEqual({ tun: { csum: false, tso: false, uso: false }, geneve: { gso: false, gro: false } });
        }
      }
    });

    it('TCP bulk transfers arrive intact (sha256), captured on every hop', async () => {
      const p = topo.prefix;
      const hops = [
        { name: 'pod veth', ns: cl.nodeNs[0]!, iface: `${p}an0-p` },
        { name: 'node underlay', ns: cl.nodeNs[0]!, iface: `${p}an0-g` },
        { name: 'gateway tun', ns: cl.gwNs, iface: `${p}agt` },
      ];
      for (const h of hops) {
        const pcap = join(dir, `${h.name.replace(' ', '-')}.pcap`);
        // Whole frames: tshark verifies a checksum only when it has every byte.
        const proc = topo.spawnIn(
          h.ns,
          `tshark ${h.name}`,
          ['tshark', '-q', '-i', h.iface, '-a', 'duration:90', '-w', pcap],
          { lifetimeS: 100 },
        );
        caps.push({ ...h, pcap, proc });
      }
      for (const c of caps)
        await waitFor(`tshark on ${c.name}`, () => c.proc.output().includes('Capturing on'), TSHARK_START_MS);
      await sleep(500);
      const transfers = [
        { what: 'pod → gateway host', serverNs: cl.gwNs, clientNs: cl.podNs[0]!, addr: GATEWAY_INTERNAL },
        { what: 'gateway host → pod', serverNs: cl.podNs[0]!, clientNs: cl.gwNs, addr: cl.podAddr[0]! },
        { what: 'pod → pod (hairpin)', serverNs: cl.podNs[1]!, clientNs: cl.podNs[0]!, addr: cl.podAddr[1]! },
      ];
      for (const [k, t] of transfers.entries()) {
        const srv = topo.spawnIn(t.serverNs, `sink ${t.what}`, ['node', '-e', sinkServer(t.addr)], { lifetimeS: 90 });
        await waitFor(`${t.what} server`, () => srv.output().includes('listening'), 10_000);
        const cli = topo.spawnIn(t.clientNs, `source ${t.what}`, ['node', '-e', sourceClient(t.addr, k + 1)], {
          lifetimeS: 90,
        });
        const [code] = await Promise.all([cli.exited, srv.exited]);
        expect(code, cli.output()).toBe(0);
        const sent = /sent ([0-9a-f]{64}) (\d+)/.exec(cli.output());
        const got = /got ([0-9a-f]{64}) (\d+)/.exec(srv.output());
        expect(sent, cli.output()).not.toBeNull();
        expect(got?.slice(1), `${t.what}: ${srv.output()}`).toEqual(sent!.slice(1));
        expect(Number(got![2])).toBe(BYTES);
      }
      await sleep(500);
      for (const c of caps) await topo.stop(c.proc);

      const g = await statsOf<GatewayStats>(gw);
      const n0 = await statsOf<NodeAgentStats>(agents[0]!);
      if (offload) {
        // Both directions were cut (TUN super-packets) and coalesced (GRO into the TUN).
        expect(n0.gso.superPackets).toBeGreaterThan(0);
        expect(g.gso.superPackets).toBeGreaterThan(0);
        expect(g.gro.superPackets).toBeGreaterThan(0);
        expect(n0.gro.superPackets).toBeGreaterThan(0);
      } else {
        expect([n0.gso.superPackets, g.gso.superPackets, g.gro.superPackets, n0.gro.superPackets]).toEqual([
          0, 0, 0, 0,
        ]);
      }
      for (const k of Object.keys(g.drops)) expect(['route_no_route'], JSON.stringify(g.drops)).toContain(k);
      console.log(
        `${offload ? 'on' : 'off'}: node ${JSON.stringify({ gso: n0.gso, gro: n0.gro })}, gateway ${JSON.stringify({ gso: g.gso, gro: g.gro })}`,
      );
    }, 150_000);

    it('tshark: no malformed packet, no bad checksum we made; GSO-sized Geneve datagrams only with offloads on', async () => {
      expect(caps).toHaveLength(3);
      const pod0 = cl.podAddr[0]!;
      /** What our data planes produced on hop `name`, whose TCP checksum must be complete there. */
      const oursOn = (name: string): string =>
        // On the underlay every inner segment (the kernel never touches an inner checksum); on the
        // pod veth what goes to the pod (it came out of the node TUN), on the gateway TUN what does
        // not come from the gateway host — each at most one MTU long (a coalesced super-packet is
        // written with NEEDS_CSUM and is the kernel's to finish).
        // (ICMP errors of the kernels quote truncated TCP headers: not ours, not checkable.)
        name === 'node underlay'
          ? 'geneve && tcp && !icmp'
          : name === 'pod veth'
            ? `ip.dst == ${pod0} && tcp && !icmp && ip.len <= 1340`
            : `ip.src != ${GATEWAY_INTERNAL} && tcp && !icmp && ip.len <= 1340`;
      // Every count of a capture in one tshark pass; the three captures at once.
      const counts = await Promise.all(
        caps.map((c) =>
          tsharkCounts(
            c.pcap,
            [
              'frame',
              '_ws.malformed',
              'ip.checksum.status == 0',
              oursOn(c.name),
              `${oursOn(c.name)} && ${TSHARK_TCP_NOT_GOOD}`,
              `${oursOn(c.name)} && tcp.checksum.ffff`,
              'udp.dstport == 6091 && ip.len > 1500',
            ],
            TSHARK_OPTIONS,
          ),
        ),
      );
      for (const [i, c] of caps.entries()) {
        const ours = oursOn(c.name);
        const [frames, malformed, badIp, oursTotal, oursBad, oursFfff, gsoSized] = counts[i] as [
          number,
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        console.log(
          `${offload ? 'on' : 'off'} ${c.name}: ${frames} frames, ${malformed} malformed, ${badIp} bad ip checksum, ${oursTotal} ours (${oursBad} bad tcp checksum, ${oursFfff} with 0xffff for 0), ${gsoSized} gso-sized geneve`,
        );
        expect(frames, c.name).toBeGreaterThan(offload ? 100 : 1000); // with offloads, 64 KiB frames
        expect(malformed, c.name).toBe(0);
        // IP header checksums are never left to offload: every one must verify, inner and outer.
        expect(badIp, c.name).toBe(0);
        expect(oursTotal, c.name).toBeGreaterThan(offload ? 20 : 1000); // with offloads: mostly ACKs and the tail segments of bursts
        const badRows =
          oursBad === 0
            ? ''
            : run(
                [
                  'tshark',
                  '-r',
                  c.pcap,
                  '-d',
                  'udp.port==6091,geneve',
                  '-o',
                  'tcp.check_checksum:TRUE',
                  '-Y',
                  `${ours} && ${TSHARK_TCP_NOT_GOOD}`,
                  '-T',
                  'fields',
                  '-e',
                  'frame.number',
                  '-e',
                  'ip.src',
                  '-e',
                  'ip.dst',
                  '-e',
                  'ip.len',
                  '-e',
                  'tcp.flags.str',
                  '-e',
                  'tcp.checksum',
                  '-e',
                  'tcp.checksum.status',
                  '-e',
                  'tcp.len',
                ],
                { timeoutMs: 60_000 },
              );
        expect(oursBad, `${c.name}: ${badRows}`).toBe(0);
        if (c.name === 'node underlay') {
          if (offload) expect(gsoSized).toBeGreaterThan(0);
          else expect(gsoSized).toBe(0);
        }
      }
    }, 300_000);
  });
}
