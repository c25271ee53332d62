/**
 * The in-memory implementation of PacketDevice (device.ts) and DatagramSocket (datagram.ts): a
 * network of hosts, each with its addresses, UDP sockets and packet devices, for simulations,
 * examples and tests. No sockets, no timers: it moves what is queued when the caller pumps.
 *
 * The wire is one bounded pool of datagrams, earliest due first: sending copies the datagram into
 * a slot (that copy is the wire) and stamps it with the injected clock plus `latencyMs`; `pump()`
 * hands the datagrams that are due, in order, to the sockets bound at their destination, each
 * socket's share of a round as one batch into its own PacketBatch (as a recvmmsg would). A full
 * wire, a datagram larger than a slot, a destination nobody is bound to (counted when its turn
 * comes) or a socket that is not reading are counted drops, never growth.
 *
 * Impairments (memory-link.ts) are an option of a host pair (`impair(from, to, …)`, one
 * direction) or of the whole network (`impairAll`): seeded loss, duplication, reordering and
 * delay with jitter. Delayed copies wait in the wire's slots, so they count against its bound.
 * Balance: sent + duplicated = delivered + droppedLoss + droppedFull + droppedNoListener + inFlight. A device's host side (`inject`,
 * what the host stack sends into it) is a bounded ring too; what the application writes to a
 * device goes to its `onWrite` (the host stack) during the write.
 *
 * No offloads are declared (no virtio_net_hdr, no GSO/GRO): the pipelines take their plain
 * paths. A socket bound to a wildcard address receives on every address of its host and sends
 * from the host address sharing the longest prefix with the destination (a route's source).
 * Slots are allocated on first use (and grown for a longer datagram), so steady traffic
 * allocates nothing per datagram.
 *
 * Here: the network, its wire and hosts. The sockets are memory-socket.ts, the devices
 * memory-device.ts, both rings memory-ring.ts.
 */
import { MemoryPacketDevice, type MemoryDeviceOwner } from './memory-device.js';
import { MemoryLink, type LinkImpairments } from './memory-link.js';
import { DueQueue } from './memory-ring.js';
import { MemoryDatagramSocket, type MemorySocketHost, type MemoryWire, type Transmit } from './memory-socket.js';
import { ADDR_RECORD_LEN } from './native.js';
import { encodeAddress, UdpError } from './udp.js';
import { parseAddress } from '../packet/addr.js';

export interface MemoryNetOptions {
  /** Milliseconds (virtual time). Default Date.now. */
  readonly clock?: () => number;
  /** Datagrams in flight on the wire at most. Default 4096. */
  readonly slots?: number;
  /** Largest datagram. Default 65535. */
  readonly maxDatagram?: number;
  /** One-way delay: a datagram is due `latencyMs` after it was sent. Default 0. */
  readonly latencyMs?: number;
  /** Impairments of every host pair without its own (see `impairAll`). Default none. */
  readonly impairments?: LinkImpairments;
}

/** Options of a socket on a memory host (the subset of UdpOptions that means something here). */
export interface MemoryUdpOptions {
  readonly family: 4 | 6;
  /** Local address (one of the host's); default the wildcard. */
  readonly address?: string;
  /** 0: an ephemeral port. */
  readonly port: number;
}

export interface MemoryDeviceOptions {
  readonly name: string;
  readonly mtu?: number;
  /** Packets the host side may queue into the device. Default 1024. */
  readonly queue?: number;
}

const key = (address: string, port: number): string => `${address}|${port}`;

export class MemoryNet implements MemoryWire, MemoryDeviceOwner {
  /** Datagrams offered to the wire / handed to a socket. */
  sent = 0;
  delivered = 0;
  /** Extra copies an impaired link made, and the copies it lost. */
  duplicated = 0;
  droppedLoss = 0;
  /** Dropped: the wire full (or the datagram larger than a slot). */
  droppedFull = 0;
  /** Dropped when their turn came: nobody bound at the destination, or the socket not reading. */
  droppedNoListener = 0;
  /** Every copy accepted onto the wire (tests: what travels where); bytes valid during the call. */
  tap: ((toAddress: string, toPort: number, fromAddress: string, fromPort: number, bytes: Uint8Array) => void) | null =
    null;

  readonly clock: () => number;
  private readonly wire: DueQueue;
  private readonly maxDatagram: number;
  private readonly latency: number;
  private readonly toAddr: string[];
  private readonly toPort: Uint32Array;
  private readonly fromAddr: string[];
  private readonly fromPort: Uint32Array;
  /** Sockets by "address|port" (a wildcard socket under each of its host's addresses of its family). */
  private readonly bound = new Map<string, MemoryDatagramSocket>();
  private readonly hostOf = new Map<string, MemoryHost>();
  private readonly hosts: MemoryHost[] = [];
  private readonly devices: MemoryPacketDevice[] = [];
  /** Address records by address text (a bounded cache: the simulated world has few addresses). */
  private readonly records = new Map<string, Uint8Array>();
  private readonly touched: MemoryDatagramSocket[] = [];
  /** Impaired links by source host, then destination host. */
  private readonly links = new Map<MemoryHost, Map<MemoryHost, MemoryLink>>();
  private defaultLink: MemoryLink | null;

  constructor(opts: MemoryNetOptions = {}) {
    this.clock = opts.clock ?? Date.now;
    this.wire = new DueQueue(opts.slots ?? 4096);
    this.defaultLink = opts.impairments !== undefined ? new MemoryLink(opts.impairments) : null;
    this.maxDatagram = opts.maxDatagram ?? 65535;
    this.latency = opts.latencyMs ?? 0;
    const n = this.wire.capacity;
    this.toAddr = new Array<string>(n).fill('');
    this.fromAddr = new Array<string>(n).fill('');
    this.toPort = new Uint32Array(n);
    this.fromPort = new Uint32Array(n);
  }

  /** A machine with these addresses (each address belongs to one host). */
  host(...addresses: string[]): MemoryHost {
    for (const a of addresses) if (this.hostOf.has(a)) throw new Error(`memory net: address ${a} is already a host's`);
    const h = new MemoryHost(this, addresses);
    for (const a of addresses) this.hostOf.set(a, h);
    this.hosts.push(h);
    return h;
  }

  /** The host that owns `address`, if any. */
  hostAt(address: string): MemoryHost | undefined {
    return this.hostOf.get(address);
  }

  /**
   * Impairs what `from` sends to `to` (one direction; null: unimpaired again, or back to the
   * network-wide impairments). Returns the link, whose counters say what it did.
   */
  impair(from: MemoryHost, to: MemoryHost, imp: LinkImpairments | null): MemoryLink | null {
    let m = this.links.get(from);
    if (imp === null) {
      m?.delete(to);
      return null;
    }
    if (m === undefined) this.links.set(from, (m = new Map()));
    const link = new MemoryLink(imp);
    m.set(to, link);
    return link;
  }

  /** Impairs every host pair that has no `impair` of its own (null: none). One stream for all of them. */
  impairAll(imp: LinkImpairments | null): MemoryLink | null {
    this.defaultLink = imp === null ? null : new MemoryLink(imp);
    return this.defaultLink;
  }

  /** When the earliest datagram on the wire is due (Infinity: none); queued device packets are due now. */
  get nextDue(): number {
    for (const d of this.devices) if (d.queued > 0) return this.clock();
    const h = this.wire.head;
    return h < 0 ? Number.POSITIVE_INFINITY : this.wire.due[h]!;
  }

  /** Datagrams on the wire (due or not) and packets queued into devices. */
  get pending(): number {
    let n = this.wire.count;
    for (const d of this.devices) n += d.queued;
    return n;
  }

  /** @internal */
  bind(s: MemoryDatagramSocket, addresses: readonly string[], port: number): void {
    for (const a of addresses) {
      if (this.bound.has(key(a, port)))
        throw new UdpError(`cannot bind UDP ${a}:${port} on the memory net: EADDRINUSE (the port is in use)`, 98);
    }
    for (const a of addresses) this.bound.set(key(a, port), s);
  }

  /** @internal */
  unbind(s: MemoryDatagramSocket, addresses: readonly string[], port: number): void {
    for (const a of addresses) if (this.bound.get(key(a, port)) === s) this.bound.delete(key(a, port));
  }

  /** @internal */
  isBound(address: string, port: number): boolean {
    return this.bound.has(key(address, port));
  }

  /** @internal */
  addDevice(d: MemoryPacketDevice): void {
    this.devices.push(d);
  }

  /** @internal */
  removeDevice(d: MemoryPacketDevice): void {
    const i = this.devices.indexOf(d);
    if (i >= 0) this.devices.splice(i, 1);
  }

  /** Puts a datagram on the wire (each copy an impaired link makes); false when dropped (counted). */
  readonly transmit: Transmit = (toAddress, toPort, fromAddress, fromPort, buf, off, len) => {
    this.sent++;
    if (len > this.maxDatagram) {
      this.droppedFull++;
      return false;
    }
    const due = this.clock() + this.latency;
    const link = this.linkOf(fromAddress, toAddress);
    const copies = link === null ? 1 : link.copies();
    this.duplicated += copies - 1;
    let ok = false;
    for (let c = 0; c < copies; c++) {
      const d = link === null ? 0 : link.delay();
      if (d < 0) {
        this.droppedLoss++;
        ok = true; // lost on the way: the sender cannot tell
        continue;
      }
      const i = this.wire.push(buf, off, len, due + d);
      if (i < 0) {
        this.droppedFull++;
        continue;
      }
      this.toAddr[i] = toAddress;
      this.toPort[i] = toPort;
      this.fromAddr[i] = fromAddress;
      this.fromPort[i] = fromPort;
      ok = true;
      this.tap?.(toAddress, toPort, fromAddress, fromPort, this.wire.slots[i]!.subarray(0, len));
    }
    return ok;
  };

  private linkOf(fromAddress: string, toAddress: string): MemoryLink | null {
    if (this.links.size > 0) {
      const from = this.hostOf.get(fromAddress);
      const to = this.hostOf.get(toAddress);
      const l = from !== undefined && to !== undefined ? this.links.get(from)?.get(to) : undefined;
      if (l !== undefined) return l;
    }
    return this.defaultLink;
  }

  /**
   * Delivers until nothing due is left or `max` datagrams and packets were handed over
   * (bounded: a forwarding loop cannot spin forever). Returns how many were handed over.
   */
  pump(max = 1_000_000): number {
    let n = 0;
    while (n < max) {
      let k = 0;
      for (const d of this.devices) k += d.pollNow();
      k += this.deliverRound(max - n - k);
      n += k;
      if (k === 0) break;
    }
    return n;
  }

  /** One round: due datagrams in order into their sockets' batches (until one is full), then each batch once. */
  private deliverRound(max: number): number {
    const w = this.wire;
    const now = this.clock();
    let n = 0;
    while (w.count > 0 && n < max && w.due[w.head]! <= now) {
      const i = w.head;
      const s = this.bound.get(key(this.toAddr[i]!, this.toPort[i]!));
      if (s === undefined || !s.reading) {
        this.droppedNoListener++;
        w.pop();
        continue;
      }
      if (s.full) break;
      if (s.pending === 0) this.touched.push(s);
      s.take(w.slots[i]!, w.lens[i]!, this.recordOf(this.fromAddr[i]!), this.fromPort[i]!);
      this.delivered++;
      n++;
      w.pop();
    }
    const t = this.touched;
    for (let j = 0; j < t.length; j++) t[j]!.flush();
    t.length = 0;
    return n;
  }

  private recordOf(address: string): Uint8Array {
    let r = this.records.get(address);
    if (r === undefined) {
      if (this.records.size >= 4096) this.records.clear();
      r = new Uint8Array(ADDR_RECORD_LEN);
      encodeAddress(address, 0, r, 0);
      this.records.set(address, r);
    }
    return r;
  }
}

/** One machine on a MemoryNet: its addresses, sockets and devices. */
export class MemoryHost implements MemorySocketHost {
  private nextPort = 40000;
  private readonly sources = new Map<string, string>();
  constructor(
    readonly net: MemoryNet,
    readonly addresses: readonly string[],
  ) {}

  /** Binds a socket (throws UdpError when the address is not the host's or the port is taken). */
  openUdp(o: MemoryUdpOptions): MemoryDatagramSocket {
    const fam = (a: string): 4 | 6 => (a.includes(':') ? 6 : 4);
    if (o.address !== undefined && !this.addresses.includes(o.address))
      throw new UdpError(`cannot bind UDP ${o.address}:${o.port}: EADDRNOTAVAIL (not an address of this host)`, 99);
    const on = o.address !== undefined ? [o.address] : this.addresses.filter((a) => fam(a) === o.family);
    let port = o.port;
    if (port === 0) {
      do port = this.nextPort++;
      while (on.some((a) => this.net.isBound(a, port)));
    }
    const s = new MemoryDatagramSocket(this, o.family, port, on, o.address ?? null);
    this.net.bind(s, on, port);
    return s;
  }

  openDevice(o: MemoryDeviceOptions): MemoryPacketDevice {
    const d = new MemoryPacketDevice(this.net, o.name, o.mtu ?? 1420, o.queue ?? 1024);
    this.net.addDevice(d);
    return d;
  }

  /** The host address a datagram to `dst` leaves from: the longest common prefix of its family. */
  sourceFor(dst: string): string | undefined {
    let s = this.sources.get(dst);
    if (s !== undefined) return s;
    const d = parseAddress(dst);
    let best = -1;
    for (const a of this.addresses) {
      const b = parseAddress(a);
      if (b.length !== d.length) continue;
      let bits = 0;
      while (bits < b.length * 8 && ((b[bits >> 3]! ^ d[bits >> 3]!) & (0x80 >> (bits & 7))) === 0) bits++;
      if (bits > best) {
        best = bits;
        s = a;
      }
    }
    if (s !== undefined) this.sources.set(dst, s);
    return s;
  }
}
