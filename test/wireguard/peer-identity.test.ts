/**
 * Peer identity on the data path: encryptFor() sends to the peer the caller names (no
 * allowed-IPs lookup), and the opt-in overlappingAllowedIps mode lets two peers hold the same
 * prefix, each checked against its own set on receive. Virtual clock and network (sim.ts).
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import { formatPrefix, parsePrefix } from '../../src/packet/addr.js';
import {
  Device,
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  EncryptResult,
  RECEIVE_DROP,
} from '../../src/wireguard/device.js';
import { DROP_INNER_SOURCE_NOT_ALLOWED, DROP_NO_ROUTE, DROP_OUTBOUND_INVALID } from '../../src/wireguard/drops.js';
import type { Peer } from '../../src/wireguard/peer.js';
import { ipv4Packet, VirtualNet, type SimNode } from './sim.js';

const INIT = 1;
const HEADROOM = 16;

function same(x: Uint8Array, y: Uint8Array): boolean {
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** a with peers b and c; b and c each with peer a (allowed 0.0.0.0/0). */
function triangle(aAllowed: { b: string[]; c: string[] }, overlapping: boolean) {
  const net = new VirtualNet(createNodeBackend());
  const a = net.addNode('a', '192.0.2.1', 51820, { overlappingAllowedIps: overlapping });
  const b = net.addNode('b', '192.0.2.2');
  const c = net.addNode('c', '192.0.2.3');
  const pb = a.connect(b, aAllowed.b);
  const pc = a.connect(c, aAllowed.c);
  b.connect(a, ['0.0.0.0/0']);
  c.connect(a, ['0.0.0.0/0']);
  return { net, a, b, c, pb, pc };
}

/** Encrypts `packet` at `node` for `peer` with encryptFor and puts the result on the wire. */
function sendFor(net: VirtualNet, node: SimNode, peer: Peer, packet: Uint8Array): number {
  const buf = new Uint8Array(HEADROOM + packet.length + 64);
  buf.set(packet, HEADROOM);
  const r = net.encryptResult;
  const code = node.device.encryptFor(peer, buf, HEADROOM, packet.length, net.now, r);
  if (code === ENCRYPT_SEND)
    net.transmit(node, r.endpoint!.address, r.endpoint!.port, buf.subarray(r.start, r.start + r.length));
  net.drainAll();
  net.advance(10);
  return code;
}

const prefixes = (d: Device, p: Peer): string[] => d.allowedIpsOf(p).map((x) => formatPrefix(x));

describe('Device.encryptFor', () => {
  it("sends to the named peer even when another peer's allowed IPs hold the destination", () => {
    const { net, a, b, c, pb, pc } = triangle({ b: ['10.2.0.0/16'], c: ['10.3.0.0/16'] }, false);
    // Sessions both ways (b and c initiate: their 0.0.0.0/0 routes everything to a).
    b.send(ipv4Packet('10.2.0.1', '10.1.0.1', 10));
    c.send(ipv4Packet('10.3.0.1', '10.1.0.1', 10));
    net.advance(50);
    expect(a.delivered).toHaveLength(2);
    const p = ipv4Packet('10.1.0.1', '10.2.0.5', 64); // 10.2.0.5: b's allowed IPs
    expect(sendFor(net, a, pc, p)).toBe(ENCRYPT_SEND);
    expect(net.encryptResult.peer).toBe(pc);
    expect(c.delivered.some((d) => same(d, p))).toBe(true);
    expect(b.delivered.some((d) => same(d, p))).toBe(false);
    // encrypt() by destination still picks b.
    const q = ipv4Packet('10.1.0.1', '10.2.0.6', 64);
    expect(a.send(q)).toBe(ENCRYPT_SEND);
    expect(net.encryptResult.peer).toBe(pb);
  });

  it('with no session: stages the packet, initiates a handshake, and delivers it once the session exists', () => {
    const { net, a, b, c, pc } = triangle({ b: ['10.2.0.0/16'], c: ['10.3.0.0/16'] }, false);
    const p = ipv4Packet('10.1.0.1', '10.2.0.5', 80);
    const buf = new Uint8Array(HEADROOM + p.length + 64);
    buf.set(p, HEADROOM);
    const r = new EncryptResult();
    expect(a.device.encryptFor(pc, buf, HEADROOM, p.length, net.now, r)).toBe(ENCRYPT_STAGED);
    expect(r.peer).toBe(pc);
    expect(a.device.outgoingCount).toBe(1);
    net.drainAll();
    const inits = net.sent(a, INIT);
    expect(inits).toHaveLength(1);
    expect(inits[0]!.toAddress).toBe(c.address);
    net.advance(50);
    expect(c.delivered.some((d) => same(d, p))).toBe(true);
    expect(b.delivered).toHaveLength(0);
  });

  it('drops what encrypt() drops: an invalid packet, and a peer removed meanwhile (no route)', () => {
    const { net, a, pc } = triangle({ b: ['10.2.0.0/16'], c: ['10.3.0.0/16'] }, false);
    const r = new EncryptResult();
    const buf = new Uint8Array(128);
    expect(a.device.encryptFor(pc, buf, HEADROOM, 40, net.now, r)).toBe(ENCRYPT_DROP); // version 0
    expect(r.reason).toBe(DROP_OUTBOUND_INVALID);
    expect(() => a.device.encryptFor(pc, buf, 8, 40, net.now, r)).toThrow(RangeError);
    a.device.removePeer(pc);
    buf.set(ipv4Packet('10.1.0.1', '10.3.0.5', 20), HEADROOM);
    const before = a.device.drops[DROP_NO_ROUTE];
    expect(a.device.encryptFor(pc, buf, HEADROOM, 40, net.now, r)).toBe(ENCRYPT_DROP);
    expect(r.reason).toBe(DROP_NO_ROUTE);
    expect(a.device.drops[DROP_NO_ROUTE]).toBe(before + 1);
  });
});

describe('overlapping allowed IPs', () => {
  it("default mode is WireGuard's: a prefix added to one peer leaves the other", () => {
    const { net, a, b, pb, pc } = triangle({ b: ['10.9.0.0/16'], c: [] }, false);
    expect(a.device.overlappingAllowedIps).toBe(false);
    a.device.addAllowedIp(pc, parsePrefix('10.9.0.0/16'));
    expect(prefixes(a.device, pb)).toEqual([]);
    expect(prefixes(a.device, pc)).toEqual(['10.9.0.0/16']);
    // b's inner source is no longer b's: a counted drop.
    const before = a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED];
    b.send(ipv4Packet('10.9.0.1', '10.1.0.1', 10));
    net.advance(50);
    expect(a.delivered).toHaveLength(0);
    expect(a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED]).toBe(before + 1);
  });

  it("two peers with the same prefix both deliver; a source outside the decrypting peer's own set is a counted drop", () => {
    const { net, a, b, c, pb, pc } = triangle({ b: ['10.9.0.0/16'], c: ['10.9.0.0/16', '10.7.0.0/16'] }, true);
    expect(a.device.overlappingAllowedIps).toBe(true);
    expect(prefixes(a.device, pb)).toEqual(['10.9.0.0/16']);
    expect(prefixes(a.device, pc)).toEqual(['10.7.0.0/16', '10.9.0.0/16']);
    const fromB = ipv4Packet('10.9.0.1', '10.1.0.1', 10);
    const fromC = ipv4Packet('10.9.0.2', '10.1.0.1', 10);
    b.send(fromB);
    c.send(fromC);
    net.advance(50);
    expect(a.delivered.map((d) => same(d, fromB) || same(d, fromC))).toEqual([true, true]);
    // 10.7.0.1 is c's, not b's: b may not use it.
    const before = a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED];
    b.send(ipv4Packet('10.7.0.1', '10.1.0.1', 10));
    net.advance(50);
    expect(a.delivered).toHaveLength(2);
    expect(a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED]).toBe(before + 1);
    expect(a.results.at(-1)).toEqual([RECEIVE_DROP, DROP_INNER_SOURCE_NOT_ALLOWED]);
    // Each direction by name, to the same destination.
    const toB = ipv4Packet('10.1.0.1', '10.9.0.1', 30);
    const toC = ipv4Packet('10.1.0.1', '10.9.0.2', 31);
    expect(sendFor(net, a, pb, toB)).toBe(ENCRYPT_SEND);
    expect(sendFor(net, a, pc, toC)).toBe(ENCRYPT_SEND);
    expect(b.delivered.some((d) => same(d, toB))).toBe(true);
    expect(c.delivered.some((d) => same(d, toC))).toBe(true);
    // encrypt() by destination picks one of the matching peers.
    expect(a.send(ipv4Packet('10.1.0.1', '10.9.0.3', 5))).toBe(ENCRYPT_SEND);
    expect([pb, pc]).toContain(net.encryptResult.peer);
  });

  it('removing a prefix from one peer keeps it for the other (source check and destination lookup)', () => {
    const { net, a, b, c, pb, pc } = triangle({ b: ['10.9.0.0/16'], c: ['10.9.0.0/16'] }, true);
    b.send(ipv4Packet('10.9.0.1', '10.1.0.1', 10));
    c.send(ipv4Packet('10.9.0.2', '10.1.0.1', 10));
    net.advance(50);
    expect(a.delivered).toHaveLength(2);
    expect(a.device.removeAllowedIp(pc, parsePrefix('10.9.0.0/16'))).toBe(true);
    expect(prefixes(a.device, pb)).toEqual(['10.9.0.0/16']);
    expect(prefixes(a.device, pc)).toEqual([]);
    expect(a.send(ipv4Packet('10.1.0.1', '10.9.0.3', 5))).toBe(ENCRYPT_SEND);
    expect(net.encryptResult.peer).toBe(pb);
    const before = a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED];
    c.send(ipv4Packet('10.9.0.2', '10.1.0.1', 10));
    b.send(ipv4Packet('10.9.0.1', '10.1.0.1', 11));
    net.advance(50);
    expect(a.device.drops[DROP_INNER_SOURCE_NOT_ALLOWED]).toBe(before + 1);
    expect(a.delivered).toHaveLength(3);
    // Removing b altogether leaves no route to the prefix.
    a.device.removePeer(pb);
    expect(a.send(ipv4Packet('10.1.0.1', '10.9.0.3', 5))).toBe(ENCRYPT_DROP);
    expect(net.encryptResult.reason).toBe(DROP_NO_ROUTE);
    // UAPI sees each peer's own set.
    a.device.addAllowedIp(pc, parsePrefix('10.9.0.0/16'));
    expect(a.device.uapiSnapshot().peers.map((p) => p.allowedIps.map((x) => formatPrefix(x)))).toEqual([
      ['10.9.0.0/16'],
    ]);
  });
});
