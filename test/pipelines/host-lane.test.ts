// The in-process host lane (src/pipelines/host-lane.ts) as the gateway shell drives it: packets
// written into it (the router's host lane), packets read back (what the host would answer). No
// root: own addresses are the lane's link state; the UDP relay talks to a UDP server on
// 127.0.0.1 through a real connected socket.
import { createSocket } from 'node:dgram';
import { afterEach, describe, expect, test } from 'vitest';
import { PacketBatch } from '../../src/io/batch.js';
import { HostLaneDevice } from '../../src/pipelines/host-lane.js';
import { HostLaneUdpRelay } from '../../src/pipelines/host-lane-udp.js';
import { HOST_FLOW_REPLIED_MS } from '../../src/router/host-flows.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { checksumVerifies } from '../../src/packet/checksum.js';
import { ipv4TransportSum } from '../../src/packet/ipv4.js';
import { foldSum } from '../../src/packet/checksum.js';
import { readAddr4, writeIcmp4, writeUdp4 } from '../../src/router/host-packets.js';
import { waitFor } from '../util/wait.js';

const OWN = '10.80.0.1';
const OWN_N = 0x0a500001;
const POD = 0x0a000105; // 10.0.1.5
const LO = 0x7f000001;

let lane: HostLaneDevice | null = null;
afterEach(async () => {
  await lane?.close();
  lane = null;
});

function open(): { lane: HostLaneDevice; read: Uint8Array[] } {
  const l = new HostLaneDevice({ name: 'hl0', mtu: 1400, queue: 4 });
  lane = l;
  const read: Uint8Array[] = [];
  const b = new PacketBatch({ capacity: 8, maxLen: 1500, headroom: 16 });
  l.start(b, (x) => {
    for (let i = 0; i < x.count; i++) read.push(x.buf.slice(x.offs[i]!, x.offs[i]! + x.lens[i]!));
  });
  void l.link.addAddress(OWN);
  return { lane: l, read };
}

function write(l: HostLaneDevice, pkt: Uint8Array): void {
  const buf = new Uint8Array(2048);
  buf.set(pkt, 64);
  l.writeBatch(buf, new Uint32Array([64]), new Uint32Array([pkt.length]), 1);
}

function echo(src: number, dst: number, id: number, seq: number): Uint8Array {
  const icmp = new Uint8Array(8 + 16);
  icmp[0] = 8;
  icmp[4] = id >>> 8;
  icmp[5] = id & 0xff;
  icmp[7] = seq;
  icmp.fill(0xab, 8);
  const out = new Uint8Array(100);
  return out.slice(0, writeIcmp4(out, 0, src, dst, icmp, icmp.length));
}

function udp(src: number, sport: number, dst: number, dport: number, text: string): Uint8Array {
  const p = new TextEncoder().encode(text);
  const out = new Uint8Array(100 + p.length);
  return out.slice(0, writeUdp4(out, 0, src, sport, dst, dport, p, p.length));
}

function parsed(p: Uint8Array): IpView {
  const v = new IpView();
  expect(parseIp(p, 0, p.length, v)).toBe(IP_OK);
  expect(checksumVerifies(p, 0, 20)).toBe(true);
  return v;
}

describe('HostLaneDevice', () => {
  test('ICMP echo to an own address is answered in process; to an address not ours without a relay it is a counted drop', async () => {
    const { lane: l, read } = open();
    write(l, echo(POD, OWN_N, 0x1234, 7));
    await waitFor('echo reply', () => read.length === 1, 2000, 5);
    const r = read[0]!;
    const v = parsed(r);
    expect(readAddr4(r, v.srcOff)).toBe(OWN_N);
    expect(readAddr4(r, v.dstOff)).toBe(POD);
    expect(r[v.l4]).toBe(0); // echo reply
    expect((r[v.l4 + 4]! << 8) | r[v.l4 + 5]!).toBe(0x1234);
    expect(r[v.l4 + 7]).toBe(7);
    expect(checksumVerifies(r, v.l4, v.l4Len)).toBe(true);
    expect(l.answered).toBe(1);
    write(l, echo(POD, 0x08080808, 1, 1));
    expect(l.drops.host_lane_icmp_echo_unavailable).toBe(1);
  });

  test('UDP to an own address: the bound endpoint gets it and answers; another port is port_unreachable', async () => {
    const { lane: l, read } = open();
    const ep = l.bindUdp(OWN, 12345);
    const got: string[] = [];
    ep.onMessage = (data, address, port) => {
      got.push(`${new TextDecoder().decode(data)} from ${address}:${port}`);
      ep.send(new TextEncoder().encode('PONG'), port, address);
    };
    write(l, udp(POD, 5555, OWN_N, 12345, 'PING'));
    expect(got).toEqual(['PING from 10.0.1.5:5555']);
    await waitFor('PONG', () => read.length === 1, 2000, 5);
    const r = read[0]!;
    const v = parsed(r);
    expect(readAddr4(r, v.srcOff)).toBe(OWN_N);
    expect(readAddr4(r, v.dstOff)).toBe(POD);
    expect(foldSum(ipv4TransportSum(r, 0, 17, v.l4, v.l4Len))).toBe(0xffff);
    expect(new TextDecoder().decode(r.subarray(v.l4 + 8))).toBe('PONG');
    write(l, udp(POD, 5555, OWN_N, 9999, 'x'));
    expect(l.drops.host_lane_port_unreachable).toBe(1);
    expect(() => l.bindUdp(OWN, 12345)).toThrow(/already bound/);
    ep.close();
    write(l, udp(POD, 5555, OWN_N, 12345, 'PING'));
    expect(l.drops.host_lane_port_unreachable).toBe(2);
  });

  test('TCP, other protocols, IPv6 and fragments are counted drops by name', () => {
    const { lane: l } = open();
    const tcp = udp(POD, 1, OWN_N, 80, 'xxxxxxxxxxxxxxxxxxxx');
    tcp[9] = 6;
    // The header checksum again after the protocol change.
    const fix = (p: Uint8Array): Uint8Array => {
      p[10] = 0;
      p[11] = 0;
      let s = 0;
      for (let i = 0; i < 20; i += 2) s += (p[i]! << 8) | p[i + 1]!;
      s = (s & 0xffff) + (s >>> 16);
      s = (s & 0xffff) + (s >>> 16);
      const v = ~s & 0xffff;
      p[10] = v >>> 8;
      p[11] = v & 0xff;
      return p;
    };
    write(l, fix(tcp));
    const tcpOut = fix(udp(POD, 1, 0x08080808, 443, 'xxxxxxxxxxxxxxxxxxxx'));
    tcpOut[9] = 6;
    write(l, fix(tcpOut));
    expect(l.drops.host_lane_tcp_unsupported).toBe(2);
    const gre = fix(udp(POD, 1, 0x08080808, 1, 'x'));
    gre[9] = 47;
    write(l, fix(gre));
    expect(l.drops.host_lane_protocol_unsupported).toBe(1);
    const v6 = new Uint8Array(48);
    v6[0] = 0x60;
    v6[5] = 8;
    v6[6] = 17;
    v6[7] = 64;
    write(l, v6);
    expect(l.drops.host_lane_ipv6_unsupported).toBe(1);
    const frag = fix(udp(POD, 1, OWN_N, 1, 'x'));
    frag[6] = 0;
    frag[7] = 10; // fragment offset 80: no transport header
    write(l, fix(frag));
    expect(l.drops.host_lane_fragment).toBe(1);
  });

  test('the reply queue is bounded: overload is counted, never grows', () => {
    const { lane: l } = open();
    l.stop(); // nobody reads: replies stay queued
    for (let i = 0; i < 10; i++) write(l, echo(POD, OWN_N, 1, i));
    expect(l.queued).toBe(4);
    expect(l.drops.host_lane_queue_full).toBe(6);
  });

  test('UDP relay: a flow out of the gateway gets a connected socket; replies come back from the original destination', async () => {
    const { lane: l, read } = open();
    l.register(17, new HostLaneUdpRelay(l, { capacity: 2 }));
    const server = createSocket('udp4');
    const seen: string[] = [];
    await new Promise<void>((r) => server.bind(0, '127.0.0.1', () => r()));
    server.on('message', (m, rinfo) => {
      seen.push(`${m.toString()} from ${rinfo.address}`);
      server.send(Buffer.from(`re:${m.toString()}`), rinfo.port, rinfo.address);
    });
    const port = server.address().port;
    try {
      write(l, udp(POD, 40000, LO, port, 'one'));
      write(l, udp(POD, 40000, LO, port, 'two'));
      await waitFor('two replies', () => read.length === 2, 3000, 5);
      expect(seen).toEqual(['one from 127.0.0.1', 'two from 127.0.0.1']);
      for (const [i, r] of read.entries()) {
        const v = parsed(r);
        expect(readAddr4(r, v.srcOff)).toBe(LO);
        expect(readAddr4(r, v.dstOff)).toBe(POD);
        expect((r[v.l4]! << 8) | r[v.l4 + 1]!).toBe(port);
        expect((r[v.l4 + 2]! << 8) | r[v.l4 + 3]!).toBe(40000);
        expect(new TextDecoder().decode(r.subarray(v.l4 + 8))).toBe(i === 0 ? 're:one' : 're:two');
      }
      expect(l.flows()).toEqual({ udp: 1 });
      // Capacity 2: a second and third flow — the third is refused (counted).
      write(l, udp(POD, 40001, LO, port, 'three'));
      write(l, udp(POD, 40002, LO, port, 'four'));
      expect(l.flows()).toEqual({ udp: 2 });
      expect(l.drops.host_lane_flows_full).toBe(1);
      await waitFor('three answered', () => read.length === 3, 3000, 5);
      expect(seen).not.toContain('four from 127.0.0.1');
      // Idle past the replied-flow timeout: both flows closed, and counted as expired.
      expect(l.expiredFlows()).toEqual({ udp: 0 });
      l.expire(l.clock() + HOST_FLOW_REPLIED_MS + 1);
      expect(l.flows()).toEqual({ udp: 0 });
      expect(l.expiredFlows()).toEqual({ udp: 2 });
    } finally {
      server.close();
    }
  });
});
