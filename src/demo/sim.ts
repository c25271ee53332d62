/**
 * The demo without root: the plan's two clusters in ONE process, over a simulated network.
 *
 * The same configuration model as the namespace demo (plan.ts's YAML objects, validated by
 * parseConfig) drives the real protocol engines, wired as the gateway and node agent pipelines
 * wire them, but with in-memory queues instead of TUN devices and UDP sockets:
 *
 *   pod ─▶ node (GeneveEngine: encapsulate) ─▶ [underlay queue] ─▶ gateway (GeneveEngine:
 *   decapsulate ─▶ Router + compiled rules ─▶ wireguard Device.encrypt) ─▶ [WAN queue] ─▶ gateway
 *   (Device.receive ─▶ Router + compiled rules ─▶ GeneveEngine.encapsulate) ─▶ [underlay queue] ─▶
 *   node (decapsulate) ─▶ pod
 * (the gateway's translation as YAML mode runs it: src/rules/nat-router.ts)
 *
 * A "pod" is a minimal IPv4 responder: it answers ICMP echo requests, echoes UDP port 7, counts
 * UDP port 9 (discard) and answers any other UDP port with ICMP Port Unreachable (RFC 792), as a
 * kernel would. A node's own host stack records what reaches the node's internal address.
 *
 * The wire is io/memory-wire.ts (a bounded ring of datagram slots, delivered in place with
 * headroom for encapsulation/encryption). Everything runs synchronously: `pump()` delivers until
 * the ring is empty. Time is the wall clock (WireGuard timestamps are TAI64N of wall-clock time).
 */
import { parseConfig, decodeKey, type GatewayConfig, type NodeConfig } from '../control/config.js';
import { getCryptoBackend } from '../crypto/select.js';
import { MemoryWire } from '../io/memory-wire.js';
import { GeneveEngine } from '../geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../geneve/result.js';
import { GeneveTunnelTable, type GeneveTunnel } from '../geneve/table.js';
import { NAT_DROP_MIN } from '../nat/results.js';
import { addressEquals, formatAddress, parseAddress, parsePrefix } from '../packet/addr.js';
import { internetChecksum } from '../packet/checksum.js';
import {
  ICMP_ECHO_ID_OFFSET,
  ICMP_ECHO_SEQ_OFFSET,
  ICMP_ERROR_PAYLOAD_OFFSET,
  ICMP_HEADER_LEN,
  ICMPV4_CODE_PORT_UNREACHABLE,
  ICMPV4_DEST_UNREACHABLE,
  ICMPV4_ECHO_REPLY,
  ICMPV4_ECHO_REQUEST,
  fillIcmpv4Checksum,
  icmpv4ChecksumValid,
} from '../packet/icmp.js';
import {
  IPV4_DST_OFFSET,
  IPV4_MIN_HEADER_LEN,
  IPV4_PROTOCOL_OFFSET,
  IPV4_SRC_OFFSET,
  IP_PROTO_ICMP,
  IP_PROTO_UDP,
  ipv4HeaderLen,
  ipv4HeaderValid,
  ipv4TotalLength,
  writeIpv4Header,
} from '../packet/ipv4.js';
import {
  UDP_DST_PORT_OFFSET,
  UDP_HEADER_LEN,
  UDP_SRC_PORT_OFFSET,
  fillUdpChecksumV4,
  udpChecksumValidV4,
  writeUdpHeader,
} from '../packet/udp.js';
import {
  Device,
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  EncryptResult,
  RECEIVE_DELIVER,
  ReceiveResult,
} from '../wireguard/device.js';
import type { Peer } from '../wireguard/peer.js';
import { OutgoingMessage } from '../wireguard/pool.js';
import { Router, RouterLanes } from '../router/router.js';
import { NatRouter } from '../rules/nat-router.js';
import { generateDemoKeys } from './keys.js';
import {
  findPod,
  gatewayConfig,
  type DemoRow,
  nodeConfig,
  remotePodAddress,
  remoteSnatAddress,
  type DemoCluster,
  type DemoPlan,
} from './plan.js';

/** Room for the packets pods and hosts originate. */
const SLOT_SIZE = 2048;
/** Where pods and hosts build the packets they originate (headroom for the node's Geneve header). */
const TX_OFFSET = 128;
const UDP_ECHO_PORT = 7;
const UDP_DISCARD_PORT = 9;
const TRACE_PORT = 33434;

function now(): number {
  return Date.now();
}

/** One received packet as a pod or host stack saw it. */
export interface SeenPacket {
  src: string;
  dst: string;
  protocol: number;
  /** ICMP type (or -1). */
  icmpType: number;
  /** For ICMP errors: the quoted packet's source and destination. */
  quotedSrc?: string;
  quotedDst?: string;
  /** Every checksum (IP header, ICMP / UDP, quoted IP header) verified. */
  checksumsOk: boolean;
}

function describe(buf: Uint8Array, off: number, len: number): SeenPacket {
  const hl = ipv4HeaderLen(buf, off);
  const total = ipv4TotalLength(buf, off);
  const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
  const p: SeenPacket = {
    src: formatAddress(buf, off + IPV4_SRC_OFFSET, 4),
    dst: formatAddress(buf, off + IPV4_DST_OFFSET, 4),
    protocol: proto,
    icmpType: -1,
    checksumsOk: ipv4HeaderValid(buf, off, len),
  };
  const l4 = off + hl;
  if (proto === IP_PROTO_ICMP) {
    p.icmpType = buf[l4]!;
    p.checksumsOk &&= icmpv4ChecksumValid(buf, l4, total - hl);
    if (p.icmpType === ICMPV4_DEST_UNREACHABLE || p.icmpType === 11) {
      const q = l4 + ICMP_ERROR_PAYLOAD_OFFSET;
      p.quotedSrc = formatAddress(buf, q + IPV4_SRC_OFFSET, 4);
      p.quotedDst = formatAddress(buf, q + IPV4_DST_OFFSET, 4);
      p.checksumsOk &&= internetChecksum(buf, q, ipv4HeaderLen(buf, q)) === 0;
    }
  } else if (proto === IP_PROTO_UDP) {
    p.checksumsOk &&= udpChecksumValidV4(buf, off, l4, total - hl);
  }
  return p;
}

/** The last 64 packets a stack received, and how many it received in all. */
export class SeenLog {
  readonly recent: SeenPacket[] = [];
  total = 0;

  add(p: SeenPacket): void {
    this.total++;
    this.recent.push(p);
    if (this.recent.length > 64) this.recent.shift();
  }

  /** Packets received after the log had `total` entries (at most the last 64). */
  since(total: number): SeenPacket[] {
    const n = Math.min(this.total - total, this.recent.length);
    return n <= 0 ? [] : this.recent.slice(this.recent.length - n);
  }
}

/** Swap the IPv4 source and destination in place (checksums unchanged: the sum is order-independent). */
function swapAddresses(buf: Uint8Array, off: number): void {
  for (let i = 0; i < 4; i++) {
    const t = buf[off + IPV4_SRC_OFFSET + i]!;
    buf[off + IPV4_SRC_OFFSET + i] = buf[off + IPV4_DST_OFFSET + i]!;
    buf[off + IPV4_DST_OFFSET + i] = t;
  }
}

/** A pod: an IPv4 address and the smallest stack the demo needs. */
export class SimPod {
  readonly address: Uint8Array;
  /** What was delivered to this pod (except the discard port's packets). */
  readonly seen = new SeenLog();
  discardPackets = 0;
  discardBytes = 0;
  private readonly scratch = new Uint8Array(SLOT_SIZE);

  constructor(
    readonly name: string,
    readonly ip: string,
    private readonly node: SimNode,
  ) {
    this.address = parseAddress(ip);
  }

  /** A packet for this pod, at buf[off, off+len) (the pod may reuse the buffer for its answer). */
  receive(buf: Uint8Array, off: number, len: number): void {
    const proto = buf[off + IPV4_PROTOCOL_OFFSET]!;
    const hl = ipv4HeaderLen(buf, off);
    const total = ipv4TotalLength(buf, off);
    const l4 = off + hl;
    if (
      proto === IP_PROTO_UDP &&
      ((buf[l4 + UDP_DST_PORT_OFFSET]! << 8) | buf[l4 + UDP_DST_PORT_OFFSET + 1]!) === UDP_DISCARD_PORT
    ) {
      // The throughput sink: count without looking further (like a socket that reads and drops).
      this.discardPackets++;
      this.discardBytes += total;
      return;
    }
    this.seen.add(describe(buf, off, len));
    if (proto === IP_PROTO_ICMP && buf[l4] === ICMPV4_ECHO_REQUEST) {
      swapAddresses(buf, off);
      buf[l4] = ICMPV4_ECHO_REPLY;
      fillIcmpv4Checksum(buf, l4, total - hl);
      this.node.fromPod(buf, off, total);
    } else if (proto === IP_PROTO_UDP) {
      const dport = (buf[l4 + UDP_DST_PORT_OFFSET]! << 8) | buf[l4 + UDP_DST_PORT_OFFSET + 1]!;
      if (dport === UDP_ECHO_PORT) {
        swapAddresses(buf, off);
        for (let i = 0; i < 2; i++) {
          const t = buf[l4 + UDP_SRC_PORT_OFFSET + i]!;
          buf[l4 + UDP_SRC_PORT_OFFSET + i] = buf[l4 + UDP_DST_PORT_OFFSET + i]!;
          buf[l4 + UDP_DST_PORT_OFFSET + i] = t;
        }
        fillUdpChecksumV4(buf, off, l4, total - hl);
        this.node.fromPod(buf, off, total);
      } else {
        this.portUnreachable(buf, off, hl);
      }
    }
  }

  /** ICMP Destination Unreachable / Port Unreachable quoting the IP header + 8 bytes (RFC 792). */
  private portUnreachable(buf: Uint8Array, off: number, hl: number): void {
    const quoted = hl + 8;
    const icmpLen = ICMP_HEADER_LEN + quoted;
    const s = this.scratch;
    const o = TX_OFFSET;
    writeIpv4Header(s, o, this.address, 0, buf, off + IPV4_SRC_OFFSET, IP_PROTO_ICMP, icmpLen, 64, 0, false);
    const l4 = o + IPV4_MIN_HEADER_LEN;
    s.fill(0, l4, l4 + ICMP_HEADER_LEN);
    s[l4] = ICMPV4_DEST_UNREACHABLE;
    s[l4 + 1] = ICMPV4_CODE_PORT_UNREACHABLE;
    s.set(buf.subarray(off, off + quoted), l4 + ICMP_HEADER_LEN);
    fillIcmpv4Checksum(s, l4, icmpLen);
    this.node.fromPod(s, o, IPV4_MIN_HEADER_LEN + icmpLen);
  }

  /** Sends an ICMP echo request to `dst` (id/seq given), built in the pod's own buffer. */
  sendEcho(dst: string, id: number, seq: number, payload = 56): void {
    sendEchoFrom(this.scratch, this.address, parseAddress(dst), id, seq, payload, (b, o, l) =>
      this.node.fromPod(b, o, l),
    );
  }

  /** Sends one UDP datagram of `payload` bytes to dst:port. */
  sendUdp(dst: string, sport: number, dport: number, payload: number): void {
    const s = this.scratch;
    const o = TX_OFFSET;
    const udpLen = UDP_HEADER_LEN + payload;
    writeIpv4Header(s, o, this.address, 0, parseAddress(dst), 0, IP_PROTO_UDP, udpLen, 64, 0, true);
    const l4 = o + IPV4_MIN_HEADER_LEN;
    writeUdpHeader(s, l4, sport, dport, udpLen);
    s.fill(0x5a, l4 + UDP_HEADER_LEN, l4 + udpLen);
    fillUdpChecksumV4(s, o, l4, udpLen);
    this.node.fromPod(s, o, IPV4_MIN_HEADER_LEN + udpLen);
  }
}

function sendEchoFrom(
  s: Uint8Array,
  src: Uint8Array,
  dst: Uint8Array,
  id: number,
  seq: number,
  payload: number,
  out: (b: Uint8Array, o: number, l: number) => void,
): void {
  const o = TX_OFFSET;
  const icmpLen = ICMP_HEADER_LEN + payload;
  writeIpv4Header(s, o, src, 0, dst, 0, IP_PROTO_ICMP, icmpLen, 64, seq & 0xffff, true);
  const l4 = o + IPV4_MIN_HEADER_LEN;
  s[l4] = ICMPV4_ECHO_REQUEST;
  s[l4 + 1] = 0;
  s[l4 + ICMP_ECHO_ID_OFFSET] = id >>> 8;
  s[l4 + ICMP_ECHO_ID_OFFSET + 1] = id & 0xff;
  s[l4 + ICMP_ECHO_SEQ_OFFSET] = (seq >>> 8) & 0xff;
  s[l4 + ICMP_ECHO_SEQ_OFFSET + 1] = seq & 0xff;
  for (let i = 0; i < payload; i++) s[l4 + ICMP_HEADER_LEN + i] = i & 0xff;
  fillIcmpv4Checksum(s, l4, icmpLen);
  out(s, o, IPV4_MIN_HEADER_LEN + icmpLen);
}

/** A node: its kernel's routing (local pods, else the Geneve tunnel to the gateway) and a node agent's Geneve engine. */
export class SimNode {
  readonly table = new GeneveTunnelTable();
  readonly engine: GeneveEngine;
  readonly pods: SimPod[] = [];
  readonly internal: Uint8Array;
  /** Packets addressed to the node itself (host network). */
  readonly hostSeen = new SeenLog();
  drops = 0;
  private readonly res = new GeneveResult();
  private readonly scratch = new Uint8Array(SLOT_SIZE);

  constructor(
    readonly name: string,
    readonly config: NodeConfig,
    private readonly wire: MemoryWire,
  ) {
    this.engine = new GeneveEngine(this.table);
    const n = config.node;
    this.internal = parseAddress(n.gateways[0]!.localInternalAddress);
    for (const g of n.gateways) {
      this.table.add({
        vni: g.vni,
        remoteUnderlay: g.gatewayUnderlay,
        remotePort: config.geneve.port,
        localInternalAddress: g.localInternalAddress,
        remoteInternalAddress: g.gatewayInternalAddress,
        mode: g.mode,
        name: g.name,
      });
      for (const c of g.remoteCIDRs) this.table.addPodRoute(c, g.gatewayInternalAddress);
    }
    wire.listen(n.underlayAddress!, config.geneve.port, (b, o, l, from) => this.fromUnderlay(b, o, l, from));
  }

  addPod(name: string, ip: string): SimPod {
    const p = new SimPod(name, ip, this);
    this.pods.push(p);
    return p;
  }

  private localPod(buf: Uint8Array, off: number): SimPod | undefined {
    for (const p of this.pods) if (addressEquals(buf, off + IPV4_DST_OFFSET, p.address, 0, 4)) return p;
    return undefined;
  }

  /** The node kernel routes a packet from a pod (or the host itself). */
  fromPod(buf: Uint8Array, off: number, len: number): void {
    const pod = this.localPod(buf, off);
    if (pod !== undefined) {
      pod.receive(buf, off, len);
      return;
    }
    const t = this.table.lookupSend(buf, off, len);
    const v = t === undefined ? GeneveVerdict.Drop : this.engine.encapsulate(buf, off, len, t, now(), this.res);
    // Held (L2, peer MAC being resolved) only with L2 tunnels, which the demo's plan does not use.
    if (v === GeneveVerdict.Drop || v === GeneveVerdict.Held || t === undefined) {
      if (v === GeneveVerdict.Drop) this.drops++;
      return;
    }
    this.wire.send(
      t.remoteUnderlayText,
      t.remotePort,
      this.config.node.underlayAddress!,
      this.config.geneve.port,
      buf,
      this.res.off,
      this.res.len,
    );
  }

  private fromUnderlay(buf: Uint8Array, off: number, len: number, from: string): void {
    const v = this.engine.decapsulate(buf, off, len, from, now(), this.res);
    if (v === GeneveVerdict.SendControl) {
      const t = this.res.tunnel!;
      this.wire.send(
        t.remoteUnderlayText,
        t.remotePort,
        this.config.node.underlayAddress!,
        this.config.geneve.port,
        buf,
        this.res.off,
        this.res.len,
      );
      return;
    }
    if (v !== GeneveVerdict.Deliver) return;
    const o = this.res.off;
    const pod = this.localPod(buf, o);
    if (pod !== undefined) pod.receive(buf, o, this.res.len);
    else if (addressEquals(buf, o + IPV4_DST_OFFSET, this.internal, 0, 4)) {
      this.hostSeen.add(describe(buf, o, this.res.len));
    } else this.drops++;
  }

  /** Host-network ICMP echo from the node's own address (its TUN address) to `dst`. */
  hostEcho(dst: string, id: number, seq: number): void {
    sendEchoFrom(this.scratch, this.internal, parseAddress(dst), id, seq, 56, (b, o, l) => this.fromPod(b, o, l));
  }
}

/**
 * A gateway's I/O shell on the simulated wire: Geneve towards its nodes and WireGuard towards
 * the peer gateway, with the shipped Router (src/router/router.ts) making every decision —
 * the same router `weft up` runs, so the simulation proves the code that ships.
 */
export class SimGatewayShell {
  readonly table = new GeneveTunnelTable();
  readonly geneve: GeneveEngine;
  readonly router: Router<Peer, GeneveTunnel>;
  /** The router with the configuration's compiled rules at its hooks. */
  readonly nat: NatRouter<Peer, GeneveTunnel>;
  readonly device: Device;
  /** Packets the router delivered to the gateway host (its own addresses). */
  readonly hostSeen = new SeenLog();
  /** Drops of the shell's own stages (Geneve decapsulation/encapsulation, WireGuard encryption). */
  drops = 0;
  private readonly gres = new GeneveResult();
  private readonly eres = new EncryptResult();
  private readonly rres = new ReceiveResult();
  private readonly msg = new OutgoingMessage<Peer>();
  private readonly lanes = new RouterLanes<Peer, GeneveTunnel>(1);
  private readonly offs = new Uint32Array(1);
  private readonly lens = new Uint32Array(1);
  private readonly links: Peer[] = [];
  private readonly underlay: string;

  constructor(
    readonly cluster: DemoCluster,
    readonly config: GatewayConfig,
    private readonly wire: MemoryWire,
  ) {
    const c = config;
    this.underlay = cluster.gatewayUnderlay;
    this.geneve = new GeneveEngine(this.table);
    for (const t of c.geneve.tunnels) {
      this.table.add({
        vni: t.id,
        remoteUnderlay: t.remoteUnderlay,
        remotePort: c.geneve.port,
        localInternalAddress: t.localInternalAddress,
        remoteInternalAddress: t.remoteInternalAddress,
        mode: t.mode,
        name: t.nodeName,
      });
    }
    for (const r of c.geneve.podRoutes) this.table.addPodRoute(r.podCIDR, r.nodeInternalAddress);
    const internal = c.geneve.tunnels[0]!.localInternalAddress;
    this.nat = new NatRouter<Peer, GeneveTunnel>(
      {
        localPodCIDRs: c.cluster.podCIDRs,
        localExternalCIDR: c.cluster.externalCIDR,
        mtu: c.wireguard.mtu,
        icmpSourceV4: internal,
      },
      this.table,
    );
    this.router = this.nat.router;
    this.router.setLocalAddresses([internal]);
    this.device = new Device({
      backend: getCryptoBackend(c.wireguard.cryptoBackend),
      mtu: c.wireguard.mtu,
      overlappingAllowedIps: true,
    });
    this.device.setPrivateKey(decodeKey(c.wireguard.privateKey));
    this.device.listenPort = c.wireguard.listenPort;
    for (const peer of c.peers) {
      const wgPeer = this.device.addPeer(decodeKey(peer.publicKey));
      for (const cidr of [...peer.remote.podCIDRs, ...peer.remote.externalCIDRs])
        this.device.addAllowedIp(wgPeer, parsePrefix(cidr));
      if (peer.endpoint !== undefined) {
        const colon = peer.endpoint.lastIndexOf(':');
        this.device.setEndpoint(wgPeer, {
          address: peer.endpoint.slice(0, colon),
          port: Number(peer.endpoint.slice(colon + 1)),
        });
      }
      this.nat.addPeer({ name: peer.name, remote: peer.remote, remapped: peer.remapped, mtu: c.wireguard.mtu }, wgPeer);
    }
    wire.listen(this.underlay, c.geneve.port, (b, o, l, from) => this.fromNode(b, o, l, from));
    wire.listen(cluster.wanAddress, c.wireguard.listenPort, (b, o, l, from, port) => this.fromWan(b, o, l, from, port));
  }

  /** Every drop on this gateway: its shell's stages, the router's (the rules' included) and the peer table's. */
  get dropCount(): number {
    let n = this.drops;
    for (const d of this.router.drops) n += d;
    const t = this.router.peerTable.drops;
    for (let i = NAT_DROP_MIN; i < t.length; i++) n += t[i]!;
    return n;
  }

  /** Geneve from a node: decapsulate, then the router. */
  private fromNode(buf: Uint8Array, off: number, len: number, from: string): void {
    const v = this.geneve.decapsulate(buf, off, len, from, now(), this.gres);
    if (v === GeneveVerdict.SendControl) {
      const t = this.gres.tunnel!;
      this.wire.send(
        t.remoteUnderlayText,
        t.remotePort,
        this.underlay,
        this.config.geneve.port,
        buf,
        this.gres.off,
        this.gres.len,
      );
      return;
    }
    if (v !== GeneveVerdict.Deliver) return;
    this.offs[0] = this.gres.off;
    this.lens[0] = this.gres.len;
    this.router.fromNodes(buf, this.offs, this.lens, 1, now(), this.lanes);
    this.flush(buf);
  }

  /** WireGuard from the peer gateway: decrypt, then the router with the peer that decrypted it. */
  private fromWan(buf: Uint8Array, off: number, len: number, from: string, port: number): void {
    if (this.device.receive(buf, off, len, { address: from, port }, now(), false, this.rres) === RECEIVE_DELIVER) {
      this.offs[0] = this.rres.start;
      this.lens[0] = this.rres.length;
      this.links[0] = this.rres.peer!;
      this.router.fromPeers(buf, this.offs, this.lens, this.links, 1, now(), this.lanes);
      this.flush(buf);
    }
    this.flushOutbox();
  }

  /** Sends what the router sorted into its lanes. */
  private flush(buf: Uint8Array): void {
    const L = this.lanes;
    for (let i = 0; i < L.toNodes.count; i++) {
      const t = L.toNodes.tags[i]!;
      const v = this.geneve.encapsulate(buf, L.toNodes.offs[i]!, L.toNodes.lens[i]!, t, now(), this.gres);
      if (v === GeneveVerdict.Drop || v === GeneveVerdict.Held) {
        if (v === GeneveVerdict.Drop) this.drops++;
        continue;
      }
      this.wire.send(
        t.remoteUnderlayText,
        t.remotePort,
        this.underlay,
        this.config.geneve.port,
        buf,
        this.gres.off,
        this.gres.len,
      );
    }
    for (let i = 0; i < L.toPeers.count; i++) {
      const a = this.device.encryptFor(
        L.toPeers.tags[i]!,
        buf,
        L.toPeers.offs[i]!,
        L.toPeers.lens[i]!,
        now(),
        this.eres,
      );
      if (a === ENCRYPT_SEND) {
        const ep = this.eres.endpoint!;
        this.wire.send(
          ep.address,
          ep.port,
          this.cluster.wanAddress,
          this.config.wireguard.listenPort,
          buf,
          this.eres.start,
          this.eres.length,
        );
      } else if (a === ENCRYPT_DROP) this.drops++;
    }
    for (let i = 0; i < L.toHost.count; i++) this.hostSeen.add(describe(buf, L.toHost.offs[i]!, L.toHost.lens[i]!));
    L.clear();
    this.flushOutbox();
  }

  /** Handshake messages, keepalives and packets staged until the session existed. */
  flushOutbox(): void {
    const m = this.msg;
    while (this.device.popOutgoing(m)) {
      this.wire.send(
        m.address,
        m.port,
        this.cluster.wanAddress,
        this.config.wireguard.listenPort,
        m.buf,
        m.start,
        m.length,
      );
      this.device.releaseOutgoing(m.slot);
    }
  }

  /** Runs expired WireGuard timers (retransmissions, keepalives). */
  poll(): void {
    this.device.poll(now());
    this.flushOutbox();
  }
}

/** The whole simulated system, built from the plan's configuration files. */
export class SimSystem {
  readonly wire = new MemoryWire();
  readonly gateways: Record<'a' | 'b', SimGatewayShell>;
  readonly nodes = new Map<string, SimNode>();
  readonly pods = new Map<string, SimPod>();

  constructor(readonly plan: DemoPlan) {
    const keys = generateDemoKeys();
    const gw = (c: DemoCluster): SimGatewayShell => {
      const cfg = parseConfig(gatewayConfig(plan, c, keys, { keyFile: false }), `${c.id} gateway (simulated)`);
      if (cfg.role !== 'gateway') throw new Error('unreachable: gateway config has role gateway');
      return new SimGatewayShell(c, cfg, this.wire);
    };
    this.gateways = { a: gw(plan.a), b: gw(plan.b) };
    for (const c of [plan.a, plan.b]) {
      for (const n of c.nodes) {
        const cfg = parseConfig(nodeConfig(plan, c, n), `${c.id}/${n.name} (simulated)`);
        if (cfg.role !== 'node') throw new Error('unreachable: node config has role node');
        const node = new SimNode(`${c.label}/${n.name}`, cfg, this.wire);
        this.nodes.set(n.ns, node);
        for (const p of n.pods) this.pods.set(p.name, node.addPod(p.name, p.ip));
      }
    }
  }

  pod(name: string): SimPod {
    const p = this.pods.get(name);
    if (p === undefined) throw new Error(`no simulated pod ${name}`);
    return p;
  }

  run(): void {
    this.wire.pump();
    this.gateways.a.poll();
    this.gateways.b.poll();
    this.wire.pump();
  }
}

function fmtUs(us: number): string {
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} µs`;
}

/** An echo exchange: did the reply come back from `expectFrom`, and how long did it take. */
function echo(sys: SimSystem, from: SimPod, to: string, id: number, seq: number): { ok: boolean; us: number } {
  const before = from.seen.total;
  const t0 = process.hrtime.bigint();
  from.sendEcho(to, id, seq);
  sys.run();
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  const got = from.seen.since(before).find((p) => p.icmpType === ICMPV4_ECHO_REPLY && p.src === to);
  return { ok: got !== undefined && got.checksumsOk, us };
}

/**
 * Runs the simulated demo and returns the table rows (the same checks as the namespace demo,
 * where they make sense without a kernel: no TCP, no iperf3).
 */
export async function runSimulatedDemo(plan: DemoPlan, step: (s: string) => void): Promise<DemoRow[]> {
  step(
    'building the two clusters in-process: 2 gateways (WireGuard Device + Router with compiled rules + GeneveEngine), 4 nodes (GeneveEngine), 8 pods',
  );
  const sys = new SimSystem(plan);
  const rows: DemoRow[] = [];
  const A1 = findPod(plan, 'A1');
  const A2 = findPod(plan, 'A2');
  const A3 = findPod(plan, 'A3');
  const B3 = findPod(plan, 'B3');
  const B4 = findPod(plan, 'B4');
  const b3AtA = remotePodAddress(plan, plan.a, B3);
  const a1AtB = remotePodAddress(plan, plan.b, A1);
  const a2AtB = remotePodAddress(plan, plan.b, A2);
  const snatAtB = remoteSnatAddress(plan, plan.b);
  const a1 = sys.pod('A1');
  const a3 = sys.pod('A3');
  const b3 = sys.pod('B3');
  const b4 = sys.pod('B4');
  const backend = sys.gateways.a.device.backend.name;

  step(`WireGuard handshake + first echo ${A1.name} → ${B3.name} as ${b3AtA} (crypto backend ${backend})`);
  const first = echo(sys, a1, b3AtA, 0x4242, 1);
  const hs = sys.gateways.a.device.peers()[0]!.lastHandshakeMs;
  rows.push({
    check: 'WireGuard handshake',
    path: `gateway A → gateway B (simulated WAN, ${backend} crypto)`,
    result: first.ok ? `done; handshake + first echo in ${fmtUs(first.us)}` : 'failed',
    ok: first.ok && hs > 0,
  });

  step(`200 ICMP echoes ${A1.name} → ${B3.name}`);
  let okCount = 0;
  let total = 0;
  for (let i = 0; i < 200; i++) {
    const r = echo(sys, a1, b3AtA, 0x4242, 2 + i);
    if (r.ok) okCount++;
    total += r.us;
  }
  rows.push({
    check: 'ping (ICMP echo)',
    path: `${A1.name} ${A1.ip} → ${B3.name} as ${b3AtA}`,
    result: `${okCount}/200, in-process round trip avg ${fmtUs(total / 200)}`,
    ok: okCount === 200,
  });
  const seenByB3 = b3.seen.recent.filter((p) => p.icmpType === ICMPV4_ECHO_REQUEST).pop();
  rows.push({
    check: `source seen by ${B3.name}`,
    path: `${A1.name} ${A1.ip} (remapped by B)`,
    result: `${seenByB3?.src ?? '—'} (expected ${a1AtB})`,
    ok: seenByB3?.src === a1AtB && seenByB3.dst === B3.ip,
  });

  step(`echo the other way: ${B4.name} → ${A2.name} as ${a2AtB}`);
  const back = echo(sys, b4, a2AtB, 0x4343, 1);
  rows.push({
    check: 'ping (B → A)',
    path: `${B4.name} ${B4.ip} → ${A2.name} as ${a2AtB}`,
    result: back.ok ? `reply in ${fmtUs(back.us)}` : 'no reply',
    ok: back.ok,
  });

  step(`UDP to a closed port: ICMP Port Unreachable from ${B3.name} back to ${A3.name}, translated`);
  const before = a3.seen.total;
  a3.sendUdp(b3AtA, 40000, TRACE_PORT, 32);
  sys.run();
  const err = a3.seen.since(before).find((p) => p.icmpType === ICMPV4_DEST_UNREACHABLE);
  rows.push({
    check: 'ICMP error translated',
    path: `${B3.name} → ${A3.name} (port unreachable)`,
    result: err
      ? `from ${err.src}, quoting ${err.quotedSrc} → ${err.quotedDst}, checksums ${err.checksumsOk ? 'valid' : 'BAD'}`
      : 'no ICMP error came back',
    ok: err !== undefined && err.src === b3AtA && err.quotedSrc === A3.ip && err.quotedDst === b3AtA && err.checksumsOk,
  });

  step(
    `host network: node A/${plan.a.nodes[0]!.name} (${plan.a.nodes[0]!.internal}) → ${B3.name}, SNAT to ${plan.a.snatAddress}`,
  );
  const node = sys.nodes.get(plan.a.nodes[0]!.ns)!;
  const b3Before = b3.seen.total;
  const hostBefore = node.hostSeen.total;
  node.hostEcho(b3AtA, 0x5151, 1);
  sys.run();
  const atB3 = b3.seen.since(b3Before).find((p) => p.icmpType === ICMPV4_ECHO_REQUEST);
  const hostReply = node.hostSeen.since(hostBefore).find((p) => p.icmpType === ICMPV4_ECHO_REPLY);
  rows.push({
    check: 'host-network SNAT',
    path: `node A/${plan.a.nodes[0]!.name} → ${B3.name} ${b3AtA}`,
    result: `${B3.name} saw ${atB3?.src ?? '—'} (expected ${snatAtB}); reply ${hostReply ? `back at ${hostReply.dst}` : 'lost'}`,
    ok: atB3?.src === snatAtB && hostReply?.dst === plan.a.nodes[0]!.internal && hostReply.src === b3AtA,
  });

  const count = 20_000;
  const size = 1200;
  step(`in-process throughput: ${count} UDP datagrams of ${size} bytes ${A1.name} → ${B3.name} (one core, no I/O)`);
  const pk0 = b3.discardPackets;
  const by0 = b3.discardBytes;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) {
    a1.sendUdp(b3AtA, 40001, UDP_DISCARD_PORT, size);
    if ((i & 255) === 255) sys.wire.pump();
  }
  sys.run();
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const got = b3.discardPackets - pk0;
  const bits = (b3.discardBytes - by0) * 8;
  rows.push({
    check: 'throughput (in-process)',
    path: `${A1.name} → ${B3.name}, Geneve+NAT+WireGuard ×2`,
    result: `${got}/${count} datagrams, ${(bits / secs / 1e6).toFixed(0)} Mbit/s of IP packets (${(got / secs / 1000).toFixed(0)} kpps)`,
    ok: got === count,
  });

  const drops =
    sys.gateways.a.dropCount + sys.gateways.b.dropCount + [...sys.nodes.values()].reduce((s, n) => s + n.drops, 0);
  rows.push({
    check: 'drops',
    path: 'gateways, nodes, wire',
    result: `${drops} in the pipelines, ${sys.wire.droppedFull + sys.wire.droppedNoListener} on the wire; ${sys.wire.delivered} datagrams delivered`,
    ok: null,
  });
  return rows;
}
