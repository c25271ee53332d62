/**
 * The in-memory PacketDevice (device.ts) of a memory-net.ts host: what the host stack sends into
 * it (`inject`) waits in a bounded ring until the network's pump reads it into the application's
 * batch; what the application writes goes to `onWrite` (the host stack) during the write.
 */
import type { PacketBatch } from './batch.js';
import { zeroDeviceStats, type PacketDevice, type PacketDeviceStats } from './device.js';
import { Ring } from './memory-ring.js';

/** What a device needs of the network that pumps it (MemoryNet implements it). */
export interface MemoryDeviceOwner {
  removeDevice(d: MemoryPacketDevice): void;
}

export class MemoryPacketDevice implements PacketDevice {
  readonly mechanism = 'memory';
  readonly offload = null;
  readonly stats: PacketDeviceStats = zeroDeviceStats();
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
    private readonly net: MemoryDeviceOwner,
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
    if (this.closed || len > this.linkMtu || this.ring.push(buf, off, len) < 0) {
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
