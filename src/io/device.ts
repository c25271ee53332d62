/**
 * A batch packet device: what a pipeline reads IP packets from and writes them to (the TUN
 * device, io/tun.ts; the in-memory device, io/memory-device.ts). Shaped after wireguard-go's
 * tun.Device: reads fill a caller-owned PacketBatch (one callback per wake-up, valid only during
 * the call), writes take a batch of offsets into the caller's buffer, and the offloads in effect
 * are declared (null: plain IP packets, no virtio_net_hdr).
 */
import type { PacketBatch } from './batch.js';

/** Offloads a device has in effect (a vnet-header TUN); null on a device without a header. */
export interface PacketDeviceOffloads {
  /** Bytes of virtio_net_hdr before every packet read or written. */
  readonly vnetHdrLen: number;
  /** Transport checksums may arrive partial (NEEDS_CSUM). */
  readonly csum: boolean;
  /** TCP super-packets read and accepted on write. */
  readonly tso: boolean;
  /** UDP super-packets read and accepted on write. */
  readonly uso: boolean;
}

export interface PacketDeviceStats {
  rxPackets: number;
  rxBytes: number;
  rxBatches: number;
  rxErrors: number;
  txPackets: number;
  txBytes: number;
  txErrors: number;
}

/** A device's counters, all zero. */
export function zeroDeviceStats(): PacketDeviceStats {
  return { rxPackets: 0, rxBytes: 0, rxBatches: 0, rxErrors: 0, txPackets: 0, txBytes: 0, txErrors: 0 };
}

export interface PacketDevice {
  readonly name: string;
  /** How packets move ("native", "koffi", "memory"), for logs. */
  readonly mechanism: string;
  readonly mtu: number;
  readonly offload: PacketDeviceOffloads | null;
  readonly stats: PacketDeviceStats;
  /** Changes the MTU live; throws (typed) when refused, nothing changed then. */
  setMtu(mtu: number): void;
  /**
   * Starts reading: each wake-up fills `batch` (maxLen ≥ the MTU; with offload, headroom ≥ the
   * vnet header) and calls `onBatch` once. Throws when called twice.
   */
  start(batch: PacketBatch, onBatch: (batch: PacketBatch) => void): void;
  /** Stops delivering batches (start() may be called again). */
  stop(): void;
  /** Delivers what is queued now, as a wake-up would (0 when nothing, or not started). */
  pollNow(): number;
  /** Writes packets i < count at buf[offs[i], +lens[i]); returns how many were taken (the rest counted). */
  writeBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number;
  /** Offload only: packets that start with their virtio_net_hdr. Throws without offload (misuse). */
  writeVnetBatch(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number;
  close(): Promise<void>;
}
