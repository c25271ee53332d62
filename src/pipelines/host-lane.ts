/**
 * The host lane in process: what a gateway runs in place of its local TUN when it has no host
 * device (`--host-lane=sockets`, or /dev/net/tun could not be opened). It is a PacketDevice, so
 * the gateway shell feeds it and reads it exactly as it does the TUN: the router's host lane is
 * written into it, and the packets it answers with are read back as if the gateway host's
 * kernel had sent them (source: the original destination).
 *
 * What it does with a packet the router hands to the host:
 * - addressed to one of the gateway's own addresses (the link state's addresses:
 *   HostLaneLinkState): an ICMP echo request is answered in place; a UDP datagram goes to the
 *   local endpoint bound to that address and port (the in-tunnel connection check, bindUdp),
 *   else it is dropped as `host_lane_port_unreachable`;
 * - otherwise (a route out of the gateway's own interface, e.g. `dev eth0` in a RouteConfiguration;
 *   Liqo's IP mappings are not among them: Liqo routes a mapped address to the gateway's node):
 *   the handler registered for its IP protocol relays it through the gateway's own sockets
 *   (host-lane-udp.ts: a connected UDP socket per flow; host-lane-tcp.ts: the connection
 *   terminated by the TCP engine and re-originated with a node:net socket; host-lane-icmp.ts:
 *   ICMP echo through an unprivileged ping socket when net.ipv4.ping_group_range allows it);
 * - TCP, in either case, goes to the handler registered for protocol 6 (host-lane-tcp.ts, which
 *   refuses TCP to the gateway's own addresses with a RST); without one it is dropped as
 *   `host_lane_tcp_unsupported`;
 * - anything else is a counted drop whose name says what it was (HOST_LANE_DROPS).
 *
 * Bounded: replies wait in a ring of `queue` packets (full: `host_lane_queue_full`) and are read
 * on the next event-loop turn; handlers keep bounded flow tables (router/host-flows.ts).
 * IPv4 only (Liqo's tables are family ip): IPv6 is `host_lane_ipv6_unsupported`.
 */
import type { PacketBatch } from '../io/batch.js';
import type { PacketDevice, PacketDeviceStats } from '../io/device.js';
import { Ring } from '../io/memory-ring.js';
import { MemoryLinkState } from '../kernel/link-state.js';
import { IP_PROTO_ICMP, IP_PROTO_TCP, IP_PROTO_UDP } from '../packet/ipv4.js';
import { IP_OK, IpView, parseIp } from '../packet/ip-view.js';
import { parseAddress } from '../packet/addr.js';
import {
  UDP4_OVERHEAD,
  echoReplyInPlace,
  isEchoRequest4,
  readAddr4,
  writeUdp4,
  addr4Text,
} from '../router/host-packets.js';

/** Drop reasons of the host lane (weft show: `host_lane_*`). */
export const HOST_LANE_DROPS = [
  'host_lane_bad_packet',
  'host_lane_ipv6_unsupported',
  'host_lane_fragment',
  'host_lane_tcp_unsupported',
  'host_lane_tcp_flows_full',
  'host_lane_tcp_connect_failed',
  'host_lane_tcp_idle_timeout',
  'host_lane_protocol_unsupported',
  'host_lane_icmp_unsupported',
  'host_lane_icmp_echo_unavailable',
  'host_lane_port_unreachable',
  'host_lane_flows_full',
  'host_lane_flow_pending_full',
  'host_lane_socket_error',
  'host_lane_reply_too_big',
  'host_lane_queue_full',
] as const;
export type HostLaneDrop = (typeof HOST_LANE_DROPS)[number];

/** What a protocol handler gets from the lane. */
export interface HostLaneContext {
  /** Queues a packet towards the router (as the host would send it); false: queue full (counted). */
  emit(buf: Uint8Array, off: number, len: number): boolean;
  /** Counts a drop. */
  drop(reason: HostLaneDrop): void;
  /** Wall-clock ms. */
  clock(): number;
  /** The lane's MTU: a reply longer than this is dropped (`host_lane_reply_too_big`). */
  readonly mtu: number;
  /** Network namespace for the sockets a handler opens (tests; undefined: the process's). */
  readonly netns: string | undefined;
}

/**
 * A per-protocol handler of the host lane (UDP relay, ICMP echo relay, a TCP relay). `handle`
 * gets the packet parsed in `v` (IPv4, transport header present), valid during the call only;
 * `local`: addressed to one of the gateway's own addresses.
 */
export interface HostLaneProtocol {
  readonly name: string;
  handle(buf: Uint8Array, v: IpView, local: boolean, now: number): void;
  /**
   * Called once after the last packet of a written batch (whether or not it had any for this
   * handler): a handler may leave the work `handle` calls for (acknowledgments, socket writes)
   * to here, once per batch instead of once per packet.
   */
  endBatch?(now: number): void;
  /** Housekeeping at `now`: idle flows closed. */
  expire(now: number): void;
  /** Flows it relays now. */
  readonly flows: number;
  /** Flows it has closed for idleness so far (those with idle timeouts). */
  readonly expired?: number;
  close(): Promise<void>;
}

/** A UDP endpoint on one of the gateway's own addresses, served in process (bindUdp). */
export interface LocalUdpEndpoint {
  readonly address: string;
  readonly port: number;
  /** Sends `data` to address:port as a datagram from this endpoint; false when it could not be queued. */
  send(data: Uint8Array, port: number, address: string): boolean;
  /** Receives each datagram addressed to this endpoint (payload valid during the call). */
  onMessage: ((data: Uint8Array, address: string, port: number) => void) | null;
  close(): void;
}

export interface HostLaneOptions {
  readonly name: string;
  readonly mtu: number;
  /** Reply packets queued towards the router (default 256). */
  readonly queue?: number;
  readonly clock?: () => number;
  readonly netns?: string;
}

/** The gateway's own addresses as the lane sees them: the link state the gateway shell keeps. */
export class HostLaneLinkState extends MemoryLinkState {
  /** IPv4 addresses as numbers (the lane's local check, no allocation). */
  readonly v4 = new Set<number>();

  override addAddress(addr: string): Promise<void> {
    const a = parseAddress(addr.split('/')[0]!);
    if (a !== null && a.length === 4) this.v4.add(readAddr4(a, 0));
    return super.addAddress(addr);
  }

  override removeAddress(addr: string): Promise<void> {
    const a = parseAddress(addr.split('/')[0]!);
    if (a !== null && a.length === 4) this.v4.delete(readAddr4(a, 0));
    return super.removeAddress(addr);
  }
}

export class HostLaneDevice implements PacketDevice, HostLaneContext {
  readonly mechanism = 'in-process (sockets)';
  readonly offload = null;
  readonly stats: PacketDeviceStats = {
    rxPackets: 0,
    rxBytes: 0,
    rxBatches: 0,
    rxErrors: 0,
    txPackets: 0,
    txBytes: 0,
    txErrors: 0,
  };
  readonly drops: Record<HostLaneDrop, number>;
  /** Packets answered or relayed by the lane itself (echo replies to own addresses, local UDP). */
  answered = 0;
  readonly link: HostLaneLinkState;
  /** Why ICMP echo to other hosts is not relayed (null: it is, or nobody asked). */
  icmpEchoUnavailable: string | null = null;
  readonly netns: string | undefined;
  readonly name: string;
  readonly clock: () => number;
  private linkMtu: number;
  private readonly ring: Ring;
  private readonly protocols = new Map<number, HostLaneProtocol>();
  /** The registered handlers with an endBatch. */
  private batchEnders: HostLaneProtocol[] = [];
  private readonly endpoints = new Map<number, { addr: number; ep: LocalUdpEndpoint }[]>();
  private readonly v = new IpView();
  private readonly scratch: Uint8Array;
  private batch: PacketBatch | null = null;
  private onBatch: ((b: PacketBatch) => void) | null = null;
  private inBatch = false;
  private scheduled = false;
  private closed = false;
  private readonly housekeeping: NodeJS.Timeout;

  constructor(o: HostLaneOptions) {
    this.name = o.name;
    this.linkMtu = o.mtu;
    this.netns = o.netns;
    this.clock = o.clock ?? Date.now;
    this.ring = new Ring(o.queue ?? 256);
    this.link = new HostLaneLinkState(o.name);
    this.scratch = new Uint8Array(65535);
    this.drops = Object.fromEntries(HOST_LANE_DROPS.map((d) => [d, 0])) as Record<HostLaneDrop, number>;
    this.housekeeping = setInterval(() => this.expire(this.clock()), 1000);
    this.housekeeping.unref();
  }

  get mtu(): number {
    return this.linkMtu;
  }

  /** Packets queued towards the router, not yet read. */
  get queued(): number {
    return this.ring.count;
  }

  /** Flows relayed now, per handler name. */
  flows(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const p of this.protocols.values()) out[p.name] = p.flows;
    return out;
  }

  /** Flows closed for idleness so far, per handler name (those with idle timeouts). */
  expiredFlows(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const p of this.protocols.values()) if (p.expired !== undefined) out[p.name] = p.expired;
    return out;
  }

  /** Handlers by IP protocol, as registered (stats). */
  handlers(): Record<number, string> {
    const out: Record<number, string> = {};
    for (const [k, p] of this.protocols) out[k] = p.name;
    return out;
  }

  /** Registers the handler of IP protocol `protocol` (replaces one registered before). */
  register(protocol: number, h: HostLaneProtocol): void {
    const old = this.protocols.get(protocol);
    this.protocols.set(protocol, h);
    this.batchEnders = [...new Set(this.protocols.values())].filter((p) => p.endBatch !== undefined);
    if (old !== undefined && old !== h) void old.close();
  }

  drop(reason: HostLaneDrop): void {
    this.drops[reason]++;
  }

  setMtu(mtu: number): void {
    if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) throw new RangeError(`MTU ${mtu} not in 68..65535`);
    if (this.batch !== null && mtu > this.batch.maxLen)
      throw new RangeError(`MTU ${mtu} is above the read batch's maxLen ${this.batch.maxLen}`);
    this.linkMtu = mtu;
  }

  start(batch: PacketBatch, onBatch: (batch: PacketBatch) => void): void {
    if (this.closed) throw new Error(`host lane ${this.name} is closed`);
    if (this.batch !== null) throw new Error('HostLaneDevice.start called twice');
    this.batch = batch;
    this.onBatch = onBatch;
    this.schedule();
  }

  stop(): void {
    this.batch = null;
    this.onBatch = null;
  }

  /**
   * A UDP endpoint on `address`:`port` served in process: datagrams the router hands to the host
   * for it arrive in `onMessage`; `send` puts datagrams from it towards the router. Throws when
   * the address:port is taken (misuse).
   */
  bindUdp(address: string, port: number): LocalUdpEndpoint {
    const a = parseAddress(address);
    if (a === null || a.length !== 4) throw new RangeError(`host lane: ${address} is no IPv4 address`);
    const addr = readAddr4(a, 0);
    const list = this.endpoints.get(port) ?? [];
    if (list.some((e) => e.addr === addr)) throw new Error(`host lane: ${address}:${port} is already bound`);
    const lane = this;
    const ep: LocalUdpEndpoint = {
      address,
      port,
      onMessage: null,
      send(data, dport, daddr) {
        const d = parseAddress(daddr);
        if (d === null || d.length !== 4) return false;
        const n = writeUdp4(lane.scratch, 0, addr, port, readAddr4(d, 0), dport, data, data.length);
        if (n === 0 || n > lane.mtu) {
          lane.drop('host_lane_reply_too_big');
          return false;
        }
        return lane.emit(lane.scratch, 0, n);
      },
      close() {
        const l = lane.endpoints.get(port);
        if (l === undefined) return;
        const i = l.findIndex((e) => e.ep === ep);
        if (i >= 0) l.splice(i, 1);
        if (l.length === 0) lane.endpoints.delete(port);
      },
    };
    list.push({ addr, ep });
    this.endpoints.set(port, list);
    return ep;
  }

  emit(buf: Uint8Array, off: number, len: number): boolean {
    if (this.closed) return false;
    if (len > this.linkMtu) {
      this.drops.host_lane_reply_too_big++;
      return false;
    }
    if (this.ring.push(buf, off, len) < 0) {
      this.drops.host_lane_queue_full++;
      return false;
    }
    this.schedule();
    return true;
  }

  private schedule(): void {
    if (this.scheduled || this.batch === null || this.ring.count === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.pollNow() > 0 && !this.closed) {
        /* drain what is queued now, a batch at a time */
      }
    });
  }

  pollNow(): number {
    const b = this.batch;
    const r = this.ring;
    if (b === null || this.inBatch || r.count === 0) return 0;
    let n = 0;
    while (n < b.capacity && r.count > 0) {
      const len = r.lens[r.head]!;
      if (len <= b.maxLen) {
        b.buf.set(r.slots[r.head]!.subarray(0, len), n * b.slotSize + b.headroom);
        b.lens[n++] = len;
        this.stats.rxBytes += len;
      } else this.stats.rxErrors++;
      r.pop();
    }
    b.filled(n);
    this.stats.rxPackets += n;
    this.stats.rxBatches++;
    this.inBatch = true;
    try {
      this.onBatch!(b);
    } finally {
      this.inBatch = false;
    }
    return n;
  }

  writeBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number {
    if (this.closed) throw new Error(`host lane ${this.name} is closed`);
    const now = this.clock();
    for (let i = 0; i < count; i++) {
      this.stats.txBytes += lens[i]!;
      this.handle(buf, offs[i]!, lens[i]!, now);
    }
    const enders = this.batchEnders;
    for (let i = 0; i < enders.length; i++) enders[i]!.endBatch!(now);
    this.stats.txPackets += count;
    return count;
  }

  writeVnetBatch(): number {
    throw new Error(`host lane ${this.name} has no offload: writeVnetBatch needs a vnet header`);
  }

  private handle(buf: Uint8Array, off: number, len: number, now: number): void {
    const v = this.v;
    if (parseIp(buf, off, len, v) !== IP_OK) {
      this.drops.host_lane_bad_packet++;
      return;
    }
    if (v.family !== 4) {
      this.drops.host_lane_ipv6_unsupported++;
      return;
    }
    if (v.l4 < 0) {
      this.drops.host_lane_fragment++;
      return;
    }
    const local = this.link.v4.has(readAddr4(buf, v.dstOff));
    const proto = v.proto;
    if (local && proto === IP_PROTO_ICMP) {
      if (!isEchoRequest4(buf, v)) {
        this.drops.host_lane_icmp_unsupported++;
        return;
      }
      const n = echoReplyInPlace(buf, v);
      if (this.emit(buf, off, n)) this.answered++;
      return;
    }
    if (local && proto === IP_PROTO_UDP) {
      this.deliverLocalUdp(buf, v);
      return;
    }
    const h = this.protocols.get(proto);
    if (h !== undefined) {
      h.handle(buf, v, local, now);
      return;
    }
    if (proto === IP_PROTO_TCP) this.drops.host_lane_tcp_unsupported++;
    else if (proto === IP_PROTO_ICMP) this.drops.host_lane_icmp_echo_unavailable++;
    else this.drops.host_lane_protocol_unsupported++;
  }

  private deliverLocalUdp(buf: Uint8Array, v: IpView): void {
    const l4 = v.l4;
    if (v.l4Len < 8) {
      this.drops.host_lane_bad_packet++;
      return;
    }
    const dport = (buf[l4 + 2]! << 8) | buf[l4 + 3]!;
    const list = this.endpoints.get(dport);
    if (list === undefined) {
      this.drops.host_lane_port_unreachable++;
      return;
    }
    const dst = readAddr4(buf, v.dstOff);
    let ep: LocalUdpEndpoint | undefined;
    for (const e of list) if (e.addr === dst) ep = e.ep;
    if (ep === undefined || ep.onMessage === null) {
      this.drops.host_lane_port_unreachable++;
      return;
    }
    const ulen = Math.min((buf[l4 + 4]! << 8) | buf[l4 + 5]!, v.l4Len);
    if (ulen < 8) {
      this.drops.host_lane_bad_packet++;
      return;
    }
    const sport = (buf[l4]! << 8) | buf[l4 + 1]!;
    this.answered++;
    ep.onMessage(buf.subarray(l4 + 8, l4 + ulen), addr4Text(readAddr4(buf, v.srcOff)), sport);
  }

  /** Housekeeping: every handler's idle flows closed. */
  expire(now: number): void {
    for (const p of this.protocols.values()) p.expire(now);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.housekeeping);
    this.stop();
    for (const p of this.protocols.values()) await p.close();
    this.protocols.clear();
    this.batchEnders = [];
    this.endpoints.clear();
  }
}

/** Bytes of IPv4 + UDP header the lane writes in front of a relayed datagram. */
export const HOST_LANE_UDP_OVERHEAD = UDP4_OVERHEAD;
