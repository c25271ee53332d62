/**
 * Gateway routing decisions with the real classes, in-process, inside one network namespace the
 * test creates (root): the Gateway (Geneve on 127.0.0.1:6091, local TUN, WireGuard on 51840),
 * two fake nodes (GenevePort on 127.0.0.2 / 127.0.0.3) and a fake remote gateway (a WireGuard
 * Device + WireGuardPort) — everything over loopback inside the namespace.
 *
 * Cluster A (this gateway) and the peer B both use pod CIDR 10.0.0.0/16; A addresses B's pods
 * as 10.71.0.0/16 and B's external CIDR as 10.72.0.0/16. Inside the tunnel real addresses travel.
 *
 * Proves, packet by packet: peer → local pod (source remapped, TTL − 1, checksums valid, right
 * node tunnel); node → peer (destination back to real, source kept, TTL − 1, encrypted to the
 * peer); node → node hairpin; node → the gateway's own address through the TUN and the kernel's
 * answer back; TTL 1 → Time Exceeded from 10.80.0.1 quoting the original; DF packet over the
 * tunnel MTU → Fragmentation Needed (MTU 1340) back to the sender; unknown destination → counted
 * drop; live apply() of pod routes, tunnels, IP mappings and a peer update that keeps the session.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, type GatewayConfig } from '../../src/control/config.js';
import { diffConfig } from '../../src/control/diff.js';
import { generatePrivateKeyBase64, publicKeyBase64 } from '../../src/crypto/keys.js';
import { getCryptoBackend } from '../../src/crypto/select.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { GenevePort } from '../../src/pipelines/geneve-port.js';
import { WireGuardPort } from '../../src/pipelines/wireguard-port.js';
import { withNetnsAsync } from '../../src/kernel/netns.js';
import { formatAddress, parsePrefix } from '../../src/packet/addr.js';
import { icmpv4ChecksumValid } from '../../src/packet/icmp.js';
import { ipv4HeaderValid } from '../../src/packet/ipv4.js';
import { Device } from '../../src/wireguard/device.js';
import { arena, icmpEcho, udpPacket, type Built } from '../packet/factory.js';
import { e2eUnavailableReason, run, waitFor } from '../util/netns.js';

const skip = e2eUnavailableReason([], { nativeAddon: true });
// Unique per run: other runs of the suite may share this machine (cleaned up in afterAll).

function key(): { priv: string; pub: string } {
  const b = getCryptoBackend('auto');
  const priv = generatePrivateKeyBase64(b);
  return { priv, pub: publicKeyBase64(b, priv) };
}

interface Sink {
  got: Uint8Array[];
}
function sinkOf(): Sink & {
  deliverBatch: (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, t: readonly GeneveTunnel[], n: number) => void;
  writeBatch: (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, peers: readonly unknown[], n: number) => number;
} {
  const s = {
    got: [] as Uint8Array[],
    deliverBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, _t: readonly GeneveTunnel[], n: number) {
      for (let i = 0; i < n; i++) s.got.push(buf.slice(offs[i], offs[i]! + lens[i]!));
    },
    writeBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, _peers: readonly unknown[], n: number) {
      for (let i = 0; i < n; i++) s.got.push(buf.slice(offs[i], offs[i]! + lens[i]!));
      return n;
    },
  };
  return s;
}

const src = (p: Uint8Array): string => formatAddress(p, 12, 4);
const dst = (p: Uint8Array): string => formatAddress(p, 16, 4);
const ttl = (p: Uint8Array): number => p[8]!;

describe.skipIf(skip !== null)('Gateway routing (in-process, one namespace, loopback underlay)', () => {
  const NS = `wfu-${process.pid}`;
  const gwKey = key();
  const peerKey = key();
  let cfg: GatewayConfig;
  let gw: Gateway;
  const nodes: { port: GenevePort; sink: Sink }[] = [];
  let peer: { port: WireGuardPort; device: Device; sink: Sink };

  const rawConfig = (extra: Record<string, unknown> = {}): GatewayConfig =>
    parseConfig(
      {
        role: 'gateway',
        cluster: { id: 'cluster-a', podCIDRs: ['10.0.0.0/16'] },
        wireguard: { privateKey: gwKey.priv, listenPort: 51840, interfaceName: 'wfu-gwt' },
        peers: [
          {
            name: 'cluster-b',
            clusterId: 'cluster-b',
            publicKey: peerKey.pub,
            remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
            remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
          },
        ],
        geneve: {
          listenAddress: '127.0.0.1',
          tunnels: [
            {
              id: 1,
              nodeName: 'node-a',
              remoteUnderlay: '127.0.0.2',
              localInternalAddress: '10.80.0.1',
              remoteInternalAddress: '10.80.0.2',
            },
            {
              id: 2,
              nodeName: 'node-b',
              remoteUnderlay: '127.0.0.3',
              localInternalAddress: '10.80.0.1',
              remoteInternalAddress: '10.80.0.3',
            },
          ],
          podRoutes: [
            { podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' },
            { podCIDR: '10.0.2.0/24', nodeInternalAddress: '10.80.0.3' },
          ],
        },
        ...extra,
      },
      'test',
    ) as GatewayConfig;

  beforeAll(async () => {
    run(['ip', 'netns', 'del', NS], { allowFail: true });
    run(['ip', 'netns', 'add', NS]);
    run(['ip', '-n', NS, 'link', 'set', 'lo', 'up']);
    cfg = rawConfig();
    gw = await Gateway.start(cfg, { netns: NS });
    for (const [i, addr] of ['127.0.0.2', '127.0.0.3'].entries()) {
      const table = new GeneveTunnelTable();
      table.add({
        vni: i + 1,
        remoteUnderlay: '127.0.0.1',
        localInternalAddress: `10.80.0.${i + 2}`,
        remoteInternalAddress: '10.80.0.1',
      });
      table.addPodRoute('0.0.0.0/0', '10.80.0.1');
      const sink = sinkOf();
      nodes.push({ port: await GenevePort.open({ table, sink, address: addr, netns: NS }), sink });
    }
    const device = new Device({ backend: getCryptoBackend('auto'), mtu: 1340 });
    device.setPrivateKey(Buffer.from(peerKey.priv, 'base64'));
    const gp = device.addPeer(Buffer.from(gwKey.pub, 'base64'));
    device.setEndpoint(gp, { address: '127.0.0.1', port: 51840 });
    device.addAllowedIp(gp, parsePrefix('0.0.0.0/0'));
    const sink = sinkOf();
    const port = new WireGuardPort({ device, sink, mtu: 9216 });
    await withNetnsAsync(NS, () => port.bind(0));
    peer = { port, device, sink };
  }, 30_000);

  afterAll(async () => {
    await gw?.stop().catch(() => {});
    for (const n of nodes) await n.port.close();
    await peer?.port.close();
    run(['ip', 'netns', 'del', NS], { allowFail: true });
  });

  beforeEach(() => {
    for (const n of nodes) n.sink.got.length = 0;
    if (peer) peer.sink.got.length = 0;
  });

  const fromPeer = (p: Built): void => {
    const a = arena([p]);
    peer.port.encryptBatch(a.buf, a.offs, a.lens, 1);
  };
  const fromNode = (i: number, p: Built): void => {
    const a = arena([p]);
    nodes[i]!.port.sendBatch(a.buf, a.offs, a.lens, 1);
  };
  const got = (s: Sink, n = 1): Promise<unknown> => waitFor(`${n} packet(s)`, () => s.got.length >= n, 5000, 10);

  it('opens its sockets inside the namespace', () => {
    const inNs = run(['ip', 'netns', 'exec', NS, 'ss', '-Hlun']);
    expect(inNs).toMatch(/127\.0\.0\.1:6091\b/);
    expect(inNs).toMatch(/:51840\b/);
    expect(run(['ss', '-Hlun', 'sport = :51840'])).not.toMatch(/:51840\b/);
  });

  it("peer → local pod: source remapped, TTL − 1, checksums valid, sent to the pod's node", async () => {
    fromPeer(icmpEcho({ src: '10.0.9.9', dst: '10.0.1.5', ttl: 20 })); // starts the handshake too
    await got(nodes[0]!.sink);
    const p = nodes[0]!.sink.got[0]!;
    expect(src(p)).toBe('10.71.9.9');
    expect(dst(p)).toBe('10.0.1.5');
    expect(ttl(p)).toBe(19);
    expect(ipv4HeaderValid(p, 0, p.length)).toBe(true);
    expect(icmpv4ChecksumValid(p, 20, p.length - 20)).toBe(true);
    expect(nodes[1]!.sink.got.length).toBe(0);
    const s = gw.peers()[0]!;
    expect(s.connected).toBe(true);
    expect(s.handshakes).toBe(1);
  });

  it('node → peer: destination back to the real address, pod source kept, TTL − 1, encrypted to the peer', async () => {
    fromNode(0, udpPacket({ src: '10.0.1.5', dst: '10.71.9.9', sport: 4000, dport: 53, ttl: 64 }));
    await got(peer.sink);
    const p = peer.sink.got[0]!;
    expect(src(p)).toBe('10.0.1.5');
    expect(dst(p)).toBe('10.0.9.9');
    expect(ttl(p)).toBe(63);
    expect(ipv4HeaderValid(p, 0, p.length)).toBe(true);
  });

  it('node → node through the gateway (hairpin)', async () => {
    fromNode(0, icmpEcho({ src: '10.0.1.5', dst: '10.0.2.7', ttl: 9 }));
    await got(nodes[1]!.sink);
    const p = nodes[1]!.sink.got[0]!;
    expect([src(p), dst(p), ttl(p)]).toEqual(['10.0.1.5', '10.0.2.7', 8]);
  });

  it("node → the gateway's own address: the kernel behind the TUN answers", async () => {
    fromNode(0, icmpEcho({ src: '10.0.1.5', dst: '10.80.0.1', ident: 77, seq: 5 }));
    await got(nodes[0]!.sink);
    const p = nodes[0]!.sink.got[0]!;
    expect([src(p), dst(p), p[20]]).toEqual(['10.80.0.1', '10.0.1.5', 0]); // echo reply
    expect((p[24]! << 8) | p[25]!).toBe(77);
  });

  it('TTL 1 towards the peer: Time Exceeded from the gateway, quoting the original', async () => {
    const orig = icmpEcho({ src: '10.0.1.5', dst: '10.71.9.9', ttl: 1, seq: 42 });
    fromNode(0, orig);
    await got(nodes[0]!.sink);
    const p = nodes[0]!.sink.got[0]!;
    // Rules: the dnat is at prerouting, before the hop; the echo flow is established (earlier
    // test), so the error is related and gets nf_nat_icmp_reply_translation — quote back to the
    // remapped address, outer source the flow's remote address (README "Rules: deviations").
    expect([src(p), dst(p), p[20], p[21]]).toEqual(['10.71.9.9', '10.0.1.5', 11, 0]);
    expect(icmpv4ChecksumValid(p, 20, p.length - 20)).toBe(true);
    expect(p.subarray(28)).toEqual(orig.buf.subarray(orig.off, orig.off + orig.len)); // untranslated
    expect(peer.sink.got.length).toBe(0);
  });

  it('DF packet over the tunnel MTU: Fragmentation Needed with MTU 1340 back to the sender', async () => {
    fromNode(0, udpPacket({ src: '10.0.1.5', dst: '10.71.9.9', sport: 1, dport: 2, payload: new Uint8Array(1400) }));
    await got(nodes[0]!.sink);
    const p = nodes[0]!.sink.got[0]!;
    expect([dst(p), p[20], p[21], (p[26]! << 8) | p[27]!]).toEqual(['10.0.1.5', 3, 4, 1340]);
    expect(peer.sink.got.length).toBe(0);
  });

  it('an unknown destination is a counted drop', async () => {
    const before = gw.drops()['route_no_route'] ?? 0;
    fromNode(0, icmpEcho({ src: '10.0.1.5', dst: '198.51.100.1' }));
    await waitFor('drop counted', () => (gw.drops()['route_no_route'] ?? 0) === before + 1, 5000, 10);
  });

  it('apply(): pod route add, IP mapping add, tunnel remove, peer update keeping the session', async () => {
    const next = rawConfig({
      ipMappings: [{ externalAddress: '10.70.0.10', realAddress: '10.0.2.50' }],
    });
    next.geneve.podRoutes.push({ podCIDR: '10.0.3.0/24', nodeInternalAddress: '10.80.0.3' });
    next.peers[0]!.persistentKeepalive = 25;
    const ops = diffConfig(cfg, next);
    expect(ops.map((o) => o.kind).sort()).toEqual(['ipMapping.add', 'peer.update', 'podRoute.add']);
    await gw.apply(ops, next);
    cfg = next;
    fromNode(0, icmpEcho({ src: '10.0.1.5', dst: '10.0.3.1' }));
    await got(nodes[1]!.sink);
    // IP mapping: the peer reaches 10.0.2.50 as 10.70.0.10 (real external address of A inside the tunnel).
    fromPeer(icmpEcho({ src: '10.0.9.9', dst: '10.70.0.10' }));
    await got(nodes[1]!.sink, 2);
    expect(dst(nodes[1]!.sink.got[1]!)).toBe('10.0.2.50');
    expect(gw.peers()[0]!.handshakes).toBe(1); // the session survived the update

    const without = structuredClone(next);
    without.geneve.tunnels = without.geneve.tunnels.filter((t) => t.id !== 2);
    without.geneve.podRoutes = without.geneve.podRoutes.filter((r) => r.nodeInternalAddress !== '10.80.0.3');
    await gw.apply(diffConfig(next, without), without);
    const before = gw.drops()['route_no_route'] ?? 0;
    fromNode(0, icmpEcho({ src: '10.0.1.5', dst: '10.0.2.7' }));
    await waitFor('no route any more', () => (gw.drops()['route_no_route'] ?? 0) === before + 1, 5000, 10);
    expect(gw.stats().tunnels.map((t) => t.name)).toEqual(['node-a']);
  });

  it('stop() removes the routes and addresses it added and the TUN', async () => {
    expect(run(['ip', '-n', NS, 'route', 'show', 'dev', 'wfu-gwt'])).toMatch(/^10\.71\.0\.0\/16/m);
    await gw.stop();
    expect(run(['ip', '-n', NS, '-o', 'link', 'show'])).not.toMatch(/wfu-gwt/);
    expect(run(['ip', '-n', NS, 'route', 'show'])).toBe('');
    expect(run(['ip', 'netns', 'exec', NS, 'ss', '-Hlun'])).not.toMatch(/127\.0\.0\.1:6091\b|:51840\b/); // the fake nodes still listen on .2/.3
  });
});
