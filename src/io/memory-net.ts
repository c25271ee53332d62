/**
 * The in-memory implementation of PacketDevice (device.ts) and DatagramSocket (datagram.ts): a
 * network of hosts, each with its addresses, UDP sockets and packet devices, for simulations,
 * examples and tests. No sockets, no timers: it moves what is queued when the caller pumps.
 *
 * The wire is one bounded FIFO ring of datagrams: sending copies the datagram into a slot (that
 * copy is the wire) and stamps it with the injected clock plus `latencyMs`; `pump()` hands the
 * datagrams that are due, in order, to the sockets bound at their destination, each socket's
 * share of a round as one batch into its own PacketBatch (as a recvmmsg would). A full ring, a
 * datagram larger than a slot, a destination nobody is bound to (counted when its turn comes) or
 * a socket that is not reading are counted drops, never growth. A device's host side (`inject`,
 * what the host stack sends into it) is a bounded ring too; what the application writes to a
 * device goes to its `onWrite` (the host stack) during the write.
 *
 * No offloads are declared (no virtio_net_hdr, no GSO/GRO): the pipelines take their plain
 * paths. A socket bound to a wildcard address receives on every address of its host and sends
 * from the host address sharing the longest prefix with the destination (a route's source).
 * Slots are allocated on first use (and grown for a longer datagram), so steady traffic
 * allocates nothing per datagram.
 */
import type { PacketBatch } from './batch.js';
import type { DatagramBufferSizes, DatagramSocket, DatagramStats } from './datagram.js';
import type { PacketDevice, PacketDeviceStats } from './device.js';
import { ADDR_PORT_OFFSET, ADDR_RECORD_LEN } from './native.js';
import { AddressInterner, recordPort } from './udp-address.js';
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

/** A bounded ring of packet copies with their metadata (the wire, a device's host side). */
class Ring {
  readonly slots: (Uint8Array | undefined)[];
  readonly lens: Uint32Array;
  readonly due: Float64Array;
  head = 0;
  count = 0;
  constructor(readonly capacity: number) {
    if (!(Number.isInteger(capacity) && capacity >= 1))
      throw new RangeError(`memory net: queue ${capacity} must be a positive integer`);
    this.slots = new Array<Uint8Array | undefined>(capacity);
    this.lens = new Uint32Array(capacity);
    this.due = new Float64Array(capacity);
  }
  /** Copies buf[off, +len) in; returns its index, or -1 when full. */
  push(buf: Uint8Array, off: number, len: number, due: number): number {
    if (this.count === this.capacity) return -1;
    const i = (this.head + this.count) % this.capacity;
    let s = this.slots[i];
    if (s === undefined || s.length < len) s = this.slots[i] = new Uint8Array(Math.max(len, 2048));
    s.set(buf.subarray(off, off + len));
    this.lens[i] = len;
    this.due[i] = due;
    this.count++;
    return i;
  }
  pop(): void {
    this.head = (this.head + 1) % this.capacity;
    this.count--;
  }
}

const key = (address: string, port: number): string => `${address}|${port}`;

export class MemoryNet {
  /** Datagrams taken onto the wire / handed to a socket. */
  sent = 0;
  delivered = 0;
  /** Dropped: the wire full (or the datagram larger than a slot). */
  droppedFull = 0;
  /** Dropped when their turn came: nobody bound at the destination, or the socket not reading. */
  droppedNoListener = 0;
  /** Every datagram accepted onto the wire (tests: what travels where); bytes valid during the call. */
  tap: ((toAddress: string, toPort: number, fromAddress: string, fromPort: number, bytes: Uint8Array) => void) | null =
    null;

  readonly clock: () => number;
  private readonly wire: Ring;
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

  constructor(opts: MemoryNetOptions = {}) {
    this.clock = opts.clock ?? Date.now;
    this.wire = new Ring(opts.slots ?? 4096);
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

  /** Puts a datagram on the wire; false when dropped (counted). */
  transmit(
    toAddress: string,
    toPort: number,
    fromAddress: string,
    fromPort: number,
    buf: Uint8Array,
    off: number,
    len: number,
  ): boolean {
    if (len > this.maxDatagram) {
      this.droppedFull++;
      return false;
    }
    const i = this.wire.push(buf, off, len, this.clock() + this.latency);
    if (i < 0) {
      this.droppedFull++;
      return false;
    }
    this.toAddr[i] = toAddress;
    this.toPort[i] = toPort;
    this.fromAddr[i] = fromAddress;
    this.fromPort[i] = fromPort;
    this.sent++;
    this.tap?.(toAddress, toPort, fromAddress, fromPort, this.wire.slots[i]!.subarray(0, len));
    return true;
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
export class MemoryHost {
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

export class MemoryDatagramSocket implements DatagramSocket {
  readonly stats: DatagramStats = {
    rxPackets: 0,
    rxBytes: 0,
    rxBatches: 0,
    rxTruncated: 0,
    rxErrors: 0,
    txPackets: 0,
    txBytes: 0,
    txDropped: 0,
    gsoFallbacks: 0,
  };
  readonly offload = { gso: false, gro: false };
  readonly canScatter = false;
  readonly gsoMessages = 0;
  /** The fwmark last set (recorded only: the memory net has no policy routing). */
  mark = 0;
  /** Datagrams taken into the batch this round. */
  pending = 0;
  private batch: PacketBatch | null = null;
  private cb: ((b: PacketBatch) => void) | null = null;
  private readonly addresses = new AddressInterner();
  private closed = false;

  constructor(
    private readonly host: MemoryHost,
    readonly family: 4 | 6,
    readonly port: number,
    private readonly on: readonly string[],
    /** The bound address (null: the wildcard). */
    readonly address: string | null,
  ) {}

  get reading(): boolean {
    return this.batch !== null;
  }

  get full(): boolean {
    return this.pending === this.batch!.capacity;
  }

  onBatch(batch: PacketBatch, cb: (batch: PacketBatch) => void): void {
    if (this.closed) throw new UdpError('socket is closed');
    if (this.cb) throw new Error('onBatch already set');
    if (batch.addrs.length < batch.capacity * ADDR_RECORD_LEN)
      throw new TypeError('the batch needs withAddresses: true');
    this.batch = batch;
    this.cb = cb;
  }

  /** @internal A datagram for this socket: into the next slot of the batch. */
  take(bytes: Uint8Array, len: number, rec: Uint8Array, port: number): void {
    const b = this.batch!;
    if (len > b.maxLen) {
      this.stats.rxTruncated++;
      return;
    }
    const i = this.pending++;
    const off = i * b.slotSize + b.headroom;
    b.buf.set(bytes.subarray(0, len), off);
    b.lens[i] = len;
    const r = i * ADDR_RECORD_LEN;
    b.addrs.set(rec, r);
    b.addrs[r + ADDR_PORT_OFFSET] = port >> 8;
    b.addrs[r + ADDR_PORT_OFFSET + 1] = port & 0xff;
    if (b.segs.length > 0) b.segs[i] = 0;
    this.stats.rxPackets++;
    this.stats.rxBytes += len;
  }

  /** @internal Hands the round's datagrams to the reader. */
  flush(): void {
    const n = this.pending;
    this.pending = 0;
    if (n === 0 || this.closed) return;
    const b = this.batch!;
    b.filled(n);
    this.stats.rxBatches++;
    this.cb!(b);
  }

  addressOf(batch: PacketBatch, i: number): string {
    return this.addresses.text(batch.addrs, i * ADDR_RECORD_LEN);
  }

  portOf(batch: PacketBatch, i: number): number {
    return recordPort(batch.addrs, i * ADDR_RECORD_LEN);
  }

  send(buf: Uint8Array, off: number, len: number, address: string, port: number): boolean {
    if (this.closed) throw new UdpError('socket is closed');
    const src = this.address ?? this.host.sourceFor(address);
    const ok =
      src !== undefined &&
      (address.includes(':') ? 6 : 4) === this.family &&
      this.host.net.transmit(address, port, src, this.port, buf, off, len);
    if (ok) {
      this.stats.txPackets++;
      this.stats.txBytes += len;
    } else this.stats.txDropped++;
    return ok;
  }

  sendTo(buf: Uint8Array, off: number, len: number, rec: Uint8Array, recOff: number): boolean {
    return this.send(buf, off, len, this.addresses.text(rec, recOff), recordPort(rec, recOff));
  }

  sendBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
  ): number {
    let sent = 0;
    for (let i = 0; i < count; i++) {
      if (this.sendTo(buf, offs[i]!, lens[i]!, addrs, (addrIdx === null ? i : addrIdx[i]!) * ADDR_RECORD_LEN)) sent++;
    }
    return sent;
  }

  bufferSizes(): DatagramBufferSizes {
    return { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }

  setMark(mark: number): void {
    if (!Number.isInteger(mark) || mark < 0 || mark > 0xffffffff)
      throw new RangeError(`fwmark ${mark} is not a uint32`);
    this.mark = mark;
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.batch = null;
      this.host.net.unbind(this, this.on, this.port);
    }
    return Promise.resolve();
  }
}

export class MemoryPacketDevice implements PacketDevice {
  readonly mechanism = 'memory';
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
  /** The host stack's side: every packet the application writes, valid during the call (null: counted as txErrors). */
  onWrite: ((buf: Uint8Array, off: number, len: number) => void) | null = null;
  /** Packets the host side could not queue (ring full, longer than the MTU). */
  droppedFull = 0;
  private readonly ring: Ring;
  private batch: PacketBatch | null = null;
  private onBatch: ((b: PacketBatch) => void) | null = null;
  private inBatch = false;
  private closed = false;

  constructor(
    private readonly net: MemoryNet,
    readonly name: string,
    private linkMtu: number,
    queue: number,
  ) {
    this.ring = new Ring(queue);
  }

  get mtu(): number {
    return this.linkMtu;
  }

  /** Packets queued by the host side, not yet read. */
  get queued(): number {
    return this.ring.count;
  }

  setMtu(mtu: number): void {
    if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) throw new RangeError(`MTU ${mtu} not in 68..65535`);
    if (this.batch !== null && mtu > this.batch.maxLen)
      throw new RangeError(`MTU ${mtu} is above the read batch's maxLen ${this.batch.maxLen}`);
    this.linkMtu = mtu;
  }

  start(batch: PacketBatch, onBatch: (batch: PacketBatch) => void): void {
    if (this.closed) throw new Error(`device ${this.name} is closed`);
    if (this.batch !== null) throw new Error('MemoryPacketDevice.start called twice');
    if (batch.maxLen < this.mtu) throw new RangeError(`batch.maxLen ${batch.maxLen} is below the MTU ${this.mtu}`);
    this.batch = batch;
    this.onBatch = onBatch;
  }

  stop(): void {
    this.batch = null;
    this.onBatch = null;
  }

  /** The host stack sends a packet into the device (read by the application at the next pump). */
  inject(buf: Uint8Array, off: number, len: number): boolean {
    if (this.closed || len > this.linkMtu || this.ring.push(buf, off, len, 0) < 0) {
      this.droppedFull++;
      return false;
    }
    return true;
  }

  pollNow(): number {
    const b = this.batch;
    const r = this.ring;
    if (b === null || this.inBatch || r.count === 0) return 0;
    let n = 0;
    while (n < b.capacity && r.count > 0) {
      const len = r.lens[r.head]!;
      b.buf.set(r.slots[r.head]!.subarray(0, len), n * b.slotSize + b.headroom);
      b.lens[n++] = len;
      this.stats.rxBytes += len;
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
    if (this.closed) throw new Error(`device ${this.name} is closed`);
    const w = this.onWrite;
    if (w === null) {
      this.stats.txErrors += count;
      return 0;
    }
    for (let i = 0; i < count; i++) {
      this.stats.txBytes += lens[i]!;
      w(buf, offs[i]!, lens[i]!);
    }
    this.stats.txPackets += count;
    return count;
  }

  writeVnetBatch(): number {
    throw new Error(`device ${this.name} has no offload: writeVnetBatch needs a vnet header`);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.stop();
      this.net.removeDevice(this);
    }
    return Promise.resolve();
  }
}
