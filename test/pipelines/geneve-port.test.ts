/**
 * GenevePort over loopback UDP (no root needed): two ports, a "gateway" on 127.0.0.1 and a
 * "node" on 127.0.0.2, same UDP port, real GeneveEngine/GeneveTunnelTable on both sides.
 *
 * Proves: a batch of inner packets sent with sendBatch arrives byte-identical, in order, with the
 * tunnel it came through, routed per packet by the remote internal /32 or the longest pod route;
 * packets without a tunnel or without headroom are counted drops (nothing sent); a datagram that
 * is not Geneve is dropped by the engine and never reaches the sink; L2 tunnels resolve the peer
 * MAC by ARP through the port (request and reply sent back by the ports) and then deliver.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { GeneveDrop } from '../../src/geneve/reasons.js';
import { GenevePort } from '../../src/pipelines/geneve-port.js';
import { UdpSocket } from '../../src/io/udp.js';
import { arena, icmpEcho, udpPacket } from '../packet/factory.js';
import { waitFor } from '../util/wait.js';
import { HEAP_WINDOWS, heapBytesPerOp } from '../util/alloc.js';

interface Got {
  bytes: Uint8Array;
  tunnel: GeneveTunnel;
}

function collector(): {
  got: Got[];
  calls: number;
  sink: {
    deliverBatch: GenevePort extends never
      ? never
      : (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, t: readonly GeneveTunnel[], n: number) => void;
  };
} {
  const c = {
    got: [] as Got[],
    calls: 0,
    sink: {
      deliverBatch: (buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, t: readonly GeneveTunnel[], n: number) => {
        c.calls++;
        for (let i = 0; i < n; i++) c.got.push({ bytes: buf.slice(offs[i], offs[i]! + lens[i]!), tunnel: t[i]! });
      },
    },
  };
  return c;
}

const PORT = 46091 + Math.floor(Math.random() * 1000);
const open: GenevePort[] = [];

async function pair(mode: 'l3' | 'l2' = 'l3'): Promise<{
  gw: GenevePort;
  node: GenevePort;
  gwSink: ReturnType<typeof collector>;
  nodeSink: ReturnType<typeof collector>;
}> {
  const gwTable = new GeneveTunnelTable();
  gwTable.add({
    vni: 7,
    remoteUnderlay: '127.0.0.2',
    remotePort: PORT,
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode,
    name: 'node-a',
  });
  gwTable.addPodRoute('10.0.1.0/24', '10.80.0.2');
  const nodeTable = new GeneveTunnelTable();
  nodeTable.add({
    vni: 7,
    remoteUnderlay: '127.0.0.1',
    remotePort: PORT,
    localInternalAddress: '10.80.0.2',
    remoteInternalAddress: '10.80.0.1',
    mode,
    name: 'gw',
  });
  nodeTable.addPodRoute('10.71.0.0/16', '10.80.0.1');
  const gwSink = collector();
  const nodeSink = collector();
  const gw = await GenevePort.open({ table: gwTable, sink: gwSink.sink, port: PORT, address: '127.0.0.1' });
  const node = await GenevePort.open({ table: nodeTable, sink: nodeSink.sink, port: PORT, address: '127.0.0.2' });
  open.push(gw, node);
  return { gw, node, gwSink, nodeSink };
}

afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});

describe('GenevePort', () => {
  it('sends a batch routed per packet and delivers it byte-identical with its tunnel', async () => {
    const { gw, node, nodeSink } = await pair();
    const pkts = [
      icmpEcho({ src: '10.71.0.9', dst: '10.0.1.5', seq: 1 }), // pod route 10.0.1.0/24
      udpPacket({ src: '10.71.0.9', dst: '10.80.0.2', sport: 1000, dport: 2000 }), // the node's internal /32
      icmpEcho({ src: '10.71.0.9', dst: '10.0.1.77', seq: 3 }),
    ];
    const a = arena(pkts);
    const originals = pkts.map((p) => p.buf.slice(p.off, p.off + p.len));
    expect(gw.sendBatch(a.buf, a.offs, a.lens, 3)).toBe(3);
    await waitFor('3 delivered', () => nodeSink.got.length === 3, 5000, 10);
    expect(nodeSink.got.map((g) => g.bytes)).toEqual(originals);
    const t = node.table.get(7, '127.0.0.1')!;
    expect(nodeSink.got.every((g) => g.tunnel === t)).toBe(true);
    expect(gw.stats.txPackets).toBe(3);
    expect(node.stats.rxDelivered).toBe(3);
    expect(gw.table.get(7, '127.0.0.2')!.txPackets).toBe(3);
    expect(t.rxPackets).toBe(3);
  });

  it('reverse direction: the node routes remote CIDRs to the gateway', async () => {
    const { node, gwSink } = await pair();
    const p = icmpEcho({ src: '10.0.1.5', dst: '10.71.3.4' });
    const a = arena([p]);
    expect(node.sendBatch(a.buf, a.offs, a.lens, 1)).toBe(1);
    await waitFor('delivered', () => gwSink.got.length === 1, 5000, 10);
    expect(gwSink.got[0]!.bytes).toEqual(p.buf.slice(p.off, p.off + p.len));
    expect(gwSink.got[0]!.tunnel.name).toBe('node-a');
  });

  it('counts packets without a tunnel or without headroom and sends only the rest', async () => {
    const { gw, nodeSink } = await pair();
    const ok = icmpEcho({ src: '10.71.0.9', dst: '10.0.1.5' });
    const noRoute = icmpEcho({ src: '10.71.0.9', dst: '192.0.2.1' });
    const a = arena([noRoute, ok]);
    expect(gw.sendBatch(a.buf, a.offs, a.lens, 2)).toBe(1);
    const tight = arena([ok], 4); // 4 bytes before the packet: no room for the 8-byte Geneve header
    expect(gw.sendBatch(tight.buf, tight.offs, tight.lens, 1)).toBe(0);
    expect(gw.stats.txNoTunnel).toBe(1);
    expect(gw.stats.txNoHeadroom).toBe(1);
    await waitFor('delivered', () => nodeSink.got.length === 1, 5000, 10);
    expect(nodeSink.got[0]!.bytes).toEqual(ok.buf.slice(ok.off, ok.off + ok.len));
  });

  it("sendBatchVia uses the caller's tunnels (undefined = counted drop)", async () => {
    const { gw, nodeSink } = await pair();
    const t = gw.table.get(7, '127.0.0.2')!;
    const p = icmpEcho({ src: '10.71.0.9', dst: '198.51.100.1' }); // no route: the caller decided
    const a = arena([p, p]);
    expect(gw.sendBatchVia(a.buf, a.offs, a.lens, [t, undefined], 2)).toBe(1);
    expect(gw.stats.txNoTunnel).toBe(1);
    await waitFor('delivered', () => nodeSink.got.length === 1, 5000, 10);
  });

  it('drops a datagram that is not Geneve in the engine; the sink never sees it', async () => {
    const { node, nodeSink } = await pair();
    const raw = await UdpSocket.open({ family: 4, port: 0, address: '127.0.0.1' });
    try {
      const junk = new Uint8Array([0xc0, 0, 0x08, 0, 0, 0, 7, 0, 0x45]); // version 3
      raw.send(junk, 0, junk.length, '127.0.0.2', PORT);
      await waitFor('counted', () => node.engine.counters.drops[GeneveDrop.BadVersion] === 1, 5000, 10);
      expect(nodeSink.calls).toBe(0);
      expect(node.stats.rxDatagrams).toBe(1);
    } finally {
      await raw.close();
    }
  });

  it('L2 mode: the first packet triggers ARP through the ports and is held, then sent; later packets are delivered', async () => {
    const { gw, node, nodeSink } = await pair('l2');
    const p = icmpEcho({ src: '10.71.0.9', dst: '10.0.1.5' });
    const want = p.buf.slice(p.off, p.off + p.len);
    let a = arena([p]);
    gw.sendBatch(a.buf, a.offs, a.lens, 1); // peer MAC unknown: held, an ARP request goes instead
    await waitFor('gateway learned the node MAC', () => gw.table.get(7, '127.0.0.2')!.remoteMacKnown, 5000, 10);
    expect(gw.engine.counters.arpRequestsSent).toBe(1);
    expect(node.engine.counters.arpRepliesSent).toBe(1);
    expect(node.stats.controlSent).toBe(1);
    // The reply releases the held packet.
    await waitFor('held packet delivered', () => nodeSink.got.length === 1, 5000, 10);
    expect(nodeSink.got[0]!.bytes).toEqual(want);
    expect(gw.engine.counters.arpHeld).toBe(1);
    expect(gw.engine.counters.arpHeldSent).toBe(1);
    expect(gw.engine.heldPackets).toBe(0);
    a = arena([p]);
    gw.sendBatch(a.buf, a.offs, a.lens, 1);
    await waitFor('delivered', () => nodeSink.got.length === 2, 5000, 10);
    expect(nodeSink.got[1]!.bytes).toEqual(want);
    expect(gw.engine.counters.totalDrops()).toBe(0);
  });
});

describe('GenevePort send path allocation', () => {
  it('routes, encapsulates and sends a batch without allocating per packet', async () => {
    const table = new GeneveTunnelTable();
    table.add({
      vni: 9,
      remoteUnderlay: '127.0.0.9',
      remotePort: PORT + 1,
      localInternalAddress: '10.80.0.1',
      remoteInternalAddress: '10.80.0.2',
    });
    table.addPodRoute('10.0.0.0/16', '10.80.0.2');
    const port = await GenevePort.open({ table, sink: collector().sink, port: 0, address: '127.0.0.1' });
    open.push(port);
    const pkts = Array.from({ length: 32 }, (_, i) =>
      udpPacket({ src: '10.71.0.9', dst: `10.0.${i}.5`, sport: 1000 + i, dport: 53 }),
    );
    const a = arena(pkts);
    const batch = () => {
      // The engine writes headers in front of each packet; the packets themselves stay intact.
      if (port.sendBatch(a.buf, a.offs, a.lens, 32) + port.stats.txSendFailures < 0) throw new Error('unreachable');
    };
    for (let i = 0; i < 2000; i++) batch();
    const rounds = 2000;
    expect(heapBytesPerOp(batch, rounds) / 32).toBeLessThan(4);
    const sent = (2000 + HEAP_WINDOWS * rounds) * 32;
    expect(port.stats.txPackets + port.stats.txSendFailures).toBe(sent);
    expect(table.get(9, '127.0.0.9')!.txPackets).toBe(sent);
  }, 30_000);
});
