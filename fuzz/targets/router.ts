/**
 * Fuzz target: the I/O-free Router (src/router/router.ts) with its translation (the NAT
 * configuration's compiled rules, src/rules/nat-router.ts), on one packet at a time
 * from a node, the gateway host, or one of two peers whose real pod CIDRs are the same.
 *
 * Setup as test/router: cluster A pods 10.0.0.0/16, external 10.70.0.0/16, gateway internal
 * 10.80.0.1 / fd00::1; nodes 10.80.0.2 (pods 10.0.1.0/24), 10.80.0.3 (10.0.2.0/24), fd00::3;
 * peers b (remapped 10.71/16, 10.72/16) and c (10.73/16, 10.74/16); tunnel addresses
 * 169.254.18.1 (ours), .2 (b), .6 (c).
 *
 * Input: up to 4 packets (fuzz/lib/records.ts), each with 3 header bytes: bits 0-1 source (node,
 * host, peer b, peer c), bit 2 fix checksums, bit 3 put palette addresses in (header bytes 1 and
 * 2 pick source and destination), bits 4-5 headroom (0, 40, 76, 128 bytes). Each input starts
 * from a fresh router and rules.
 * Invariants: each packet has exactly one fate — one output packet or one counted drop (router or
 * peer table), except that an expired TTL counts ttl_expired and may output the Time Exceeded in its
 * place; an output lies inside the buffer, parses as IP, and its checksums verify whenever the
 * input's did.
 */
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnel } from '../../src/geneve/tunnel.js';
import { NatRouter } from '../../src/rules/nat-router.js';
import { parseAddress } from '../../src/packet/addr.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { RouterDrop } from '../../src/router/drops.js';
import { RouterLanes } from '../../src/router/lanes.js';
import { Router } from '../../src/router/router.js';
import { checksumProblem, fixChecksums, hex, must, total } from '../lib/check.js';
import { records } from '../lib/records.js';

type Link = { name: string };
const PALETTE4 = [
  '10.0.1.11',
  '10.0.2.23',
  '10.0.3.3',
  '172.18.0.5',
  '10.71.2.23',
  '10.73.2.23',
  '10.72.0.8',
  '10.70.0.1',
  '10.80.0.1',
  '10.80.0.2',
  '169.254.18.1',
  '169.254.18.2',
  '169.254.18.6',
  '10.0.0.1',
  '0.0.0.0',
  '224.0.0.1',
].map(parseAddress);
const PALETTE6 = ['fd00::1', 'fd00::3', 'fd00::9', '2001:db8::1', '::', 'ff02::1'].map(parseAddress);
const HEADROOMS = [0, 40, 76, 128];

let nat!: NatRouter<Link, GeneveTunnel>;
let router!: Router<Link, GeneveTunnel>;
const links: Link[] = [{ name: 'b' }, { name: 'c' }];
const L = new RouterLanes<Link, GeneveTunnel>(4);
const offs = new Uint32Array(1);
const lens = new Uint32Array(1);
const v = new IpView();
let now = 1_700_000_000_000;

export function reset(): void {
  const cfg = {
    localPodCIDRs: ['10.0.0.0/16'],
    localExternalCIDR: '10.70.0.0/16',
    mtu: 1340,
    icmpSourceV4: '10.80.0.1',
    conntrack: { seed: 1, capacity: 64 },
  };
  const table = new GeneveTunnelTable();
  table.add({
    vni: 1,
    remoteUnderlay: '192.168.0.2',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
    mode: 'l3',
    name: 'node1',
  });
  table.add({
    vni: 2,
    remoteUnderlay: '192.168.0.3',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.3',
    mode: 'l3',
    name: 'node2',
  });
  table.add({
    vni: 3,
    remoteUnderlay: '192.168.0.4',
    localInternalAddress: 'fd00::1',
    remoteInternalAddress: 'fd00::3',
    mode: 'l3',
    name: 'node3',
  });
  table.addPodRoute('10.0.1.0/24', '10.80.0.2');
  table.addPodRoute('10.0.2.0/24', '10.80.0.3');
  nat = new NatRouter<Link, GeneveTunnel>(cfg, table, { icmpRatePerSecond: 1_000_000, icmpBurst: 1_000_000 });
  router = nat.router;
  const remote = { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] };
  const b = nat.addPeer(
    { name: 'b', remote, remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] } },
    links[0]!,
  );
  const c = nat.addPeer(
    { name: 'c', remote, remapped: { podCIDRs: ['10.73.0.0/16'], externalCIDRs: ['10.74.0.0/16'] } },
    links[1]!,
  );
  router.setLocalAddresses(['10.80.0.1', 'fd00::1']);
  router.setTunnelAddresses(
    ['169.254.18.1'],
    [
      { address: '169.254.18.2', peer: b },
      { address: '169.254.18.6', peer: c },
    ],
  );
  now = 1_700_000_000_000;
}
reset();

export function fuzz(data: Uint8Array): void {
  reset();
  for (const r of records(data, 3, 4)) one(r.head, r.body);
}

function one(h: Uint8Array, pkt: Uint8Array): void {
  now += 5;
  const flags = h[0]!;
  const source = flags & 3;
  const head = HEADROOMS[(flags >>> 4) & 3]!;
  const len = pkt.length;
  const buf = new Uint8Array(head + len + 64);
  buf.set(pkt, head);
  const ver = len > 0 ? buf[head]! >>> 4 : 0;
  if ((flags & 8) !== 0) {
    if (ver === 4 && len >= 20) {
      buf.set(PALETTE4[h[1]! % PALETTE4.length]!, head + 12);
      buf.set(PALETTE4[h[2]! % PALETTE4.length]!, head + 16);
    }
    if (ver === 6 && len >= 40) {
      buf.set(PALETTE6[h[1]! % PALETTE6.length]!, head + 8);
      buf.set(PALETTE6[h[2]! % PALETTE6.length]!, head + 24);
    }
  }
  if ((flags & 4) !== 0) fixChecksums(buf, head, len);
  const csumOk = parseIp(buf, head, len, v) === IP_OK && checksumProblem(buf, head, len) === null;
  const input = hex(buf, head, len);
  offs[0] = head;
  lens[0] = len;
  const rd = router.drops;
  const ttlBefore = rd[RouterDrop.TtlExpired]!;
  const dropsBefore = total(rd) - ttlBefore + total(nat.peerTable.drops);
  L.clear();
  if (source === 0) router.fromNodes(buf, offs, lens, 1, now, L);
  else if (source === 1) router.fromHost(buf, offs, lens, 1, now, L);
  else router.fromPeers(buf, offs, lens, [links[source - 2]!], 1, now, L);
  const outputs = L.toPeers.count + L.toNodes.count + L.toHost.count;
  const drops = total(rd) - rd[RouterDrop.TtlExpired]! + total(nat.peerTable.drops) - dropsBefore;
  const expired = rd[RouterDrop.TtlExpired]! - ttlBefore;
  must(expired <= 1 && outputs <= 1, `one packet in, ${outputs} out, ${expired} expired`);
  must(
    expired === 1 ? outputs + drops <= 1 : outputs + drops === 1,
    `exactly one fate: ${outputs} outputs, ${drops} drops, ${expired} expired (source ${source}, ${input})`,
  );
  for (const list of [L.toPeers, L.toNodes, L.toHost] as const) {
    for (let i = 0; i < list.count; i++) {
      const o = list.offs[i]!;
      const n = list.lens[i]!;
      must(o + n <= buf.length, 'output inside the buffer');
      must(parseIp(buf, o, n, v) === IP_OK, `output parses (${hex(buf, o, n)})`);
      const generated = expired === 1 || o !== head;
      if (csumOk || generated) {
        const p = checksumProblem(buf, o, n);
        must(p === null, `output ${p} (source ${source}, in ${input}, out ${hex(buf, o, n)})`);
      }
    }
  }
  L.clear();
}
